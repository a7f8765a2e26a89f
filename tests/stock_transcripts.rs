//! Read-your-writes on stock PostgreSQL (W-7): no LSN on RFQs, no `_polar_*` keys; the write
//! position is learned by the probe — an engine-named extended statement pipelined behind the
//! client's write — or a post-commit writer sample; reads go to a reader already caught up, else
//! to the writer — or wait with PostgreSQL 19's WAIT FOR LSN.

mod common;

use common::*;
use polarsplit::Counter;
use polarsplit::Lsn;
use polarsplit::{Event, Outcome, Reason};
use polarsplit::{ServerDialect, StartupProfile};
use polarsplit_test_support::host::sends_capture;
use polarsplit_test_support::{be, fe};

const R1: u64 = 801;

/// A stock-PostgreSQL session, with `more` settings on top of the stock ones.
fn stock(more: &[(&str, &str)]) -> Host {
    stock_as(more, &[("user", "app"), ("database", "db")])
}

/// [`stock`] for a client whose StartupMessage has `params`.
fn stock_as(more: &[(&str, &str)], params: &[(&str, &str)]) -> Host {
    let mut settings = vec![
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ];
    settings.extend_from_slice(more);
    let mut h = Host::new(config(&settings));
    h.client(&startup(params));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.writer_answers_startup_capture(&[]);
    h.take_client();
    h
}

/// The writer's answer to the probe batch ([`probe_answer_rows`]), then an idle RFQ.
fn probe_answer(lsn: &str) -> Vec<u8> {
    let mut b = probe_rows(lsn);
    b.extend(rfq(b'I', None, None));
    b
}

/// The probe's answers up to its CommandComplete, outside a block.
fn probe_rows(lsn: &str) -> Vec<u8> {
    probe_answer_rows(lsn, false)
}

/// The position of the causal token the client got in `got` — the row of a SHOW or a
/// ParameterStatus reporting it — as `X/Y`; `None` without one.
fn token_lsn(got: &[u8]) -> Option<String> {
    messages(got)
        .iter()
        .filter(|(t, _)| *t == b'D' || *t == b'S')
        .find_map(|(_, b)| {
            let text = String::from_utf8_lossy(b).into_owned();
            let token = &text[text.find("ps1:")?..];
            let token = token.trim_end_matches('\0');
            Some(token.rsplit(':').next()?.to_string())
        })
}

/// The tags and names of what the engine sent after the client's own bytes.
fn probe_sent(bytes: &[u8], client: &[u8]) -> String {
    assert!(bytes.starts_with(client), "the client's message first");
    let rest = &bytes[client.len()..];
    let mut out = tags(rest);
    if messages(rest)
        .iter()
        .any(|(t, b)| *t == b'P' && b.starts_with(b"polarsplit_probe\0"))
    {
        out.push_str(" probe");
    }
    out
}

#[test]
fn w7_probe_is_pipelined_behind_an_autocommit_write_and_swallowed() {
    let mut h = stock(&[]);
    let w = query("INSERT INTO t VALUES (1)");
    h.client(&w);
    // Same write as the client's Query: no extra round trip. Parsed once per connection.
    assert_eq!(probe_sent(&h.take_sent(WRITER), &w), "CPBCES probe");
    let mut b = command_complete("INSERT 0 1");
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    // The client's RFQ goes out as it arrives (forwarded as is: standard).
    assert_eq!(tags(&h.take_client()), "CZ");
    assert!(h.session.lsn_state().write_unknown);
    h.backend(WRITER, &probe_answer("0/5000"));
    assert!(
        h.take_client().is_empty(),
        "the probe's answer is swallowed"
    );
    let l = h.session.lsn_state();
    assert!(!l.write_unknown);
    assert_eq!(l.write_lsn, Lsn(0x5000));
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), 1);
    assert_eq!(h.engine.stats().get(Counter::TargetsLearned), 1);
    // The next write's probe parses its statement again: none stays prepared (W-7).
    let w2 = query("UPDATE t SET v = 2");
    h.client(&w2);
    assert_eq!(probe_sent(&h.take_sent(WRITER), &w2), "CPBCES probe");
    assert!(h.streams.balanced());
}

#[test]
fn w7_a_read_before_the_probe_answers_waits_for_it() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.take_client();
    let q = query("SELECT v FROM t");
    let acts = h.client(&q);
    assert!(
        !acts
            .iter()
            .any(|a| matches!(a, A::Decision(_) | A::FwdClient { .. })),
        "decided only once the write's position is known: {acts:?}"
    );
    // The probe answers: the read goes to the reader that has replayed it.
    let acts = h.backend(WRITER, &probe_answer("0/5000"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    assert_eq!(h.take_sent(R1), q);
    assert!(h.take_client().is_empty());
}

#[test]
fn w7_probe_keeps_the_clients_unnamed_statement() {
    // libpq's PQprepare("") then PQexecPrepared(""): the probe must not destroy the unnamed
    // statement (a simple-Query probe did, issue 17 point 3).
    let mut h = stock(&[]);
    h.client(&query("INSERT INTO t VALUES (1)"));
    let sent = h.take_sent(WRITER);
    assert!(
        !sent_queries(&sent)
            .iter()
            .any(|q| q.contains("pg_current_wal")),
        "the probe is no simple Query"
    );
    for (t, b) in messages(&sent) {
        if t == b'P' {
            assert!(b.starts_with(b"polarsplit_probe\0"), "a named statement");
        }
    }
}

#[test]
fn w7_no_probe_is_pipelined_into_a_transaction_block_or_copy() {
    let mut h = stock(&[]);
    for (sql, tag) in [
        ("BEGIN; INSERT INTO t VALUES (1)", "INSERT 0 1"),
        ("COPY t FROM STDIN", "COPY 0"),
    ] {
        let q = query(sql);
        h.client(&q);
        assert_eq!(h.take_sent(WRITER), q, "{sql}: nothing behind it");
        let status = if sql.starts_with("BEGIN") { b'T' } else { b'I' };
        h.writer_answers(tag, status, None, None);
        if status == b'T' {
            h.client(&query("COMMIT"));
            assert_eq!(h.take_sent(WRITER), query("COMMIT"));
            h.writer_answers("COMMIT", b'I', None, None);
        }
        // After an `I` RFQ, the probe follows.
        assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES", "{sql}");
        h.backend(WRITER, &probe_answer("0/7000"));
    }
}

#[test]
fn w7_no_hidden_work_behind_client_requests_queued_on_the_writer() {
    // A client that pipelines: a COPY's data and CopyDone, and in the same packet its next
    // COPY. The first COPY's RFQ makes a probe due (a committed write of unknown position);
    // sent then, it would reach the server behind the second COPY, in copy-in mode, where its
    // Bind is a protocol violation that ends the session. It follows the last RFQ instead.
    let mut h = stock(&[]);
    let copy = query("COPY t FROM STDIN");
    h.client(&copy);
    assert_eq!(h.take_sent(WRITER), copy);
    h.backend(WRITER, &be::copy_response(b'G', 1));
    let mut more = fe::copy_data(b"1\n");
    more.extend(fe::copy_done());
    more.extend(query("COPY t FROM STDIN"));
    h.client(&more);
    assert_eq!(h.take_sent(WRITER), more, "the client's, nothing else");
    h.writer_answers("COPY 1", b'I', None, None);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "",
        "nothing behind the COPY queued on the writer"
    );
    h.backend(WRITER, &be::copy_response(b'G', 1));
    h.client(&fe::copy_done());
    assert_eq!(tags(&h.take_sent(WRITER)), "c");
    h.writer_answers("COPY 0", b'I', None, None);
    assert_eq!(
        probe_sent(&h.take_sent(WRITER), b""),
        "CPBCES probe",
        "the owed probe, once nothing of the client's is queued"
    );
    h.backend(WRITER, &probe_answer("0/5000"));
    assert!(!h.session.lsn_state().write_unknown);
    assert!(h.streams.balanced());
}

#[test]
fn s5_no_capture_inside_a_block_the_client_pipelined() {
    // `DISCARD ALL` (its capture cannot ride behind it: it drops the capture's statement, so
    // the capture follows its RFQ) and, pipelined behind it, `BEGIN ISOLATION LEVEL REPEATABLE
    // READ`: the capture must not run inside the block — the block's snapshot would be the
    // capture's, taken before the client's first statement.
    let mut h = stock(&[]);
    let mut q = query("DISCARD ALL");
    q.extend(query("BEGIN ISOLATION LEVEL REPEATABLE READ"));
    h.client(&q);
    assert_eq!(h.take_sent(WRITER), q);
    h.writer_answers("DISCARD ALL", b'I', None, None);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "",
        "nothing behind the BEGIN queued on the writer"
    );
    h.writer_answers("BEGIN", b'T', None, None);
    assert_eq!(tags(&h.take_sent(WRITER)), "", "nothing inside the block");
    h.client(&query("COMMIT"));
    let mut sent = h.take_sent(WRITER);
    h.writer_answers("COMMIT", b'I', None, None);
    sent.extend(h.take_sent(WRITER));
    assert!(
        sends_capture(&sent),
        "the capture follows the block's end: {}",
        tags(&sent)
    );
}

#[test]
fn i11_read_goes_to_a_caught_up_reader_else_stays_on_the_writer() {
    let mut h = stock(&[]);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("0/5000"));
    h.take_sent(WRITER);
    // No reader has replayed 0/5000: the writer.
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.engine.reader_sample(2, Lsn(0x4fff), h.now);
    h.client(&query("SELECT v FROM t"));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::ReadNoBoundedWait)
    );
    assert_eq!(h.engine.stats().get(Counter::ReadsKeptOnWriter), 1);
    // The writer's read may have shown more than 0/5000 (S-1a: monotonic reads): a probe
    // behind it positions what it saw.
    let sent = h.take_sent(WRITER);
    assert_eq!(probe_sent(&sent, &query("SELECT v FROM t")), "CPBCES probe");
    h.writer_answers("SELECT 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("0/5100"));
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5100));
    // A reader at the write's position is behind that read now: the writer again.
    h.engine.reader_sample(2, Lsn(0x5000), h.now);
    h.client(&query("SELECT v FROM t"));
    assert_eq!(h.last_decision().reason, Reason::ReadNoBoundedWait);
    let sent = h.take_sent(WRITER);
    h.writer_answers("SELECT 1", b'I', None, None);
    if probe_sent(&sent, &query("SELECT v FROM t")) == "CPBCES probe" {
        h.backend(WRITER, &probe_answer("0/5100"));
    }
    // Reader 2 catches up with that: it serves the read, unwrapped (stock has no wait
    // before 19).
    h.engine.reader_sample(2, Lsn(0x5100), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 2, .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.take_sent(R1), query("SELECT v FROM t"));
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    assert_eq!(h.engine.stats().get(Counter::ReadsToCaughtUpReader), 1);
}

#[test]
fn i11_post_commit_writer_sample_positions_the_write_without_a_probe() {
    let mut h = stock(&[("lsn_probe", "off")]);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    assert_eq!(
        h.take_sent(WRITER),
        query("INSERT INTO t VALUES (1)"),
        "no probe"
    );
    // A sample whose query was sent in the same millisecond as the acknowledgement may predate
    // the commit: not used.
    h.engine.writer_sample(0, Lsn(0x6000), h.now);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::MissingLsnPrimary);
    h.writer_answers("SELECT 1", b'I', None, None);
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x6100), h.now);
    h.engine.reader_sample(1, Lsn(0x7000), h.now);
    h.engine.reader_sample(2, Lsn(0x7000), h.now);
    let acts = h.client(&query("SELECT 2"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x6100));
}

#[test]
fn i11_stock_transaction_reads_before_the_first_write_only() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    let acts = h.client(&query("SELECT 1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    // The writer answers the hidden touch of its block (P-5).
    h.writer_answers_touch(None, None);
    let mut b = select_result(&["1"]);
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'T']);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', None, None);
    h.client(&query("SELECT 2"));
    let d = h.last_decision();
    assert_eq!(d.outcome, Outcome::ForcePrimary);
    assert_eq!(d.reason, Reason::SplitLsnUnknown);
    h.writer_answers("SELECT 1", b'T', None, None);
    // COMMIT of a transaction that wrote: probed.
    h.take_sent(WRITER);
    h.client(&query("COMMIT"));
    assert_eq!(
        h.take_sent(WRITER),
        query("COMMIT"),
        "inside a block: not pipelined"
    );
    h.writer_answers("COMMIT", b'I', None, None);
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES");
}

#[test]
fn i11_deallocate_and_discard_plans_keep_a_blocks_read_only_prefix() {
    // PHP PDO with native prepares sends `DEALLOCATE pdo_stmt_N` inside the block whenever a
    // statement object is dropped: the block's later reads stay pre-write reads.
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    for (i, between) in ["DEALLOCATE pdo_stmt_00000001", "DISCARD PLANS"]
        .iter()
        .enumerate()
    {
        let acts = h.client(&query(&format!("SELECT {i}")));
        if i == 0 {
            assert!(
                acts.iter().any(|a| matches!(a, A::Acquire { .. })),
                "{acts:?}"
            );
            h.attach(R1);
            h.writer_answers_touch(None, None);
        }
        assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
        let mut b = select_result(&["1"]);
        b.extend(rfq(b'I', None, None));
        h.backend(R1, &b);
        assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'T']);
        h.client(&query(between));
        assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
        let tag = between.split(' ').next().unwrap();
        h.writer_answers(tag, b'T', None, None);
        h.take_client();
    }
    h.client(&query("SELECT 3"));
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    let sent = h.take_sent(R1);
    assert!(sent.ends_with(&query("SELECT 3")), "on the block's reader");
}

#[test]
fn i11_pg19_waits_with_wait_for_lsn_and_its_timeout_is_recognised_by_position() {
    let mut h = stock(&[]);
    h.engine.set_server_version(1, 190_000);
    h.engine.set_server_version(2, 190_000);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("16/B374D848"));
    h.take_client();
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["WAIT FOR LSN '16/B374D848' WITH (TIMEOUT '1000ms'); SELECT v FROM t".to_string()]
    );
    let d = h.last_decision();
    assert_eq!((d.reason, d.wait), (Reason::ReadWait, true));
    // The timeout answers the hidden WAIT FOR: a wait timeout, re-run on the writer.
    h.take_sent(WRITER);
    let mut b = error(
        "ERROR",
        "57014",
        "canceling statement due to timeout",
        None,
        None,
    );
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterTimeout);
    // The writer runs it, with a probe behind that positions what it saw (S-1a).
    let sent = h.take_sent(WRITER);
    assert!(sent.starts_with(&query("SELECT v FROM t")));
    assert_eq!(probe_sent(&sent, &query("SELECT v FROM t")), "CPBCES probe");
    assert!(h.take_client().is_empty());
    h.writer_answers("SELECT 0", b'I', None, None);
    h.backend(WRITER, &probe_answer("16/B374D848"));
    h.take_client();
    // A 57014 answering the client's own statement after the wait is a cancel: forwarded.
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    let mut b = msg(b'C', b"WAIT\0");
    b.extend(cancelled_error());
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert_eq!(h.engine.stats().get(Counter::Cancels), 1);
}

#[test]
fn e5_a_parse_describe_batch_on_the_writer_is_no_write() {
    // A driver preparing a read (Parse/Describe/Sync, as psycopg and JDBC do before their first
    // Execute of a named statement) that lands on the writer writes nothing: the session's
    // position stays known and its later reads still go to a reader caught up to it.
    let mut h = stock(&[]);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.take_sent(WRITER);
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("0/5000"));
    h.take_client();
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    let mut b = parse("s1", "SELECT v FROM t WHERE k = $1");
    b.extend(describe(b'S', "s1"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS", "no probe behind it");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
    ans.extend(row_description(1));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "1tTZ");
    let l = h.session.lsn_state();
    assert!(!l.write_unknown, "a Parse/Describe batch is no write");
    assert_eq!(l.write_lsn, Lsn(0x5000));
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
}

#[test]
fn e1_an_execute_joining_a_batch_after_its_flush_counts_as_a_possible_write() {
    // Parse/Describe/Flush of a read routed to the writer, then the rest of the batch: an
    // INSERT's Parse/Bind/Execute/Sync joins it on the same connection unclassified with it.
    // Its RFQ must not be taken for a read's: the session's position becomes unknown until the
    // probe answers.
    let mut h = stock(&[]);
    h.engine.remove_reader(1);
    h.engine.remove_reader(2);
    let mut first = parse("", "SELECT v FROM t WHERE k = $1");
    first.extend(describe(b'S', ""));
    first.extend(flush());
    h.client(&first);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
    ans.extend(row_description(1));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "1tT");
    let mut rest = parse("", "INSERT INTO t VALUES ($1)");
    rest.extend(bind("", ""));
    rest.extend(execute(""));
    rest.extend(sync());
    h.client(&rest);
    h.take_sent(WRITER);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("INSERT 0 1"));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12CZ");
    assert!(
        h.session.lsn_state().write_unknown,
        "the joining Execute may have written"
    );
}

/// A read outside a transaction on reader connection `R1`, attached now, answered with a
/// RowDescription, a row, its completion and a standard RFQ: the actions of that answer and its
/// length.
fn read_on_reader(h: &mut Host) -> (Vec<A>, usize) {
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    h.engine.reader_sample(2, Lsn(0x5000), h.now);
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    h.take_sent(R1);
    let mut answer = row_description(1);
    answer.extend(data_row(&["1"]));
    answer.extend(command_complete("SELECT 1"));
    answer.extend(rfq(b'I', None, None));
    (h.backend(R1, &answer), answer.len())
}

#[test]
fn p8_a_readers_rfq_that_is_the_writers_own_is_relayed_not_rebuilt() {
    let mut h = stock(&[]);
    let (acts, n) = read_on_reader(&mut h);
    // RowDescription, row, completion and the RFQ in one forward; nothing built for the client.
    assert_eq!(
        acts,
        vec![
            A::FwdBackend { conn: R1, n },
            A::Release {
                conn: R1,
                needs_reset: false
            }
        ]
    );
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'I']);
}

#[test]
fn p8_a_readers_rfq_is_rebuilt_when_the_client_asked_for_token_reports() {
    // A client that asked for token reports gets the engine's RFQ (a report may precede it).
    let mut h = stock_as(
        &[],
        &[
            ("user", "app"),
            ("database", "db"),
            ("options", "-c polarsplit.report_token=on"),
        ],
    );
    let (acts, _) = read_on_reader(&mut h);
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::DropBackend { conn: R1, n: 6 })),
        "{acts:?}"
    );
    assert!(
        acts.iter().any(|a| matches!(a, A::SendClient(_))),
        "{acts:?}"
    );
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'I']);
}

#[test]
fn f2_a_read_the_reader_refused_is_probed_when_the_writer_runs_it() {
    // Stock: the re-run of a refused "read" on the writer is a possible write, so the probe is
    // pipelined behind it and its position becomes the session's target (S-1a, P-6, W-7).
    let mut h = stock(&[(
        "unknown_functions",
        polarsplit::UnknownFunctions::Replica.as_str(),
    )]);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    let q = query("SELECT f_that_writes()");
    h.client(&q);
    h.attach(R1);
    // S-6: code the engine cannot see into runs on a pooled connection whose statements it
    // does not know: they are dropped first (hidden).
    assert_eq!(
        h.take_sent(R1),
        query("DEALLOCATE ALL; SELECT f_that_writes()")
    );
    let mut b = command_complete("DEALLOCATE ALL");
    b.extend(error(
        "ERROR",
        "25006",
        "cannot execute INSERT in a read-only transaction",
        None,
        None,
    ));
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    assert_eq!(probe_sent(&h.take_sent(WRITER), &q), "CPBCES probe");
    let mut w = select_result(&["1"]);
    w.extend(rfq(b'I', None, None));
    h.backend(WRITER, &w);
    h.backend(WRITER, &probe_answer("0/7000"));
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x7000));
    // The reader is known at 0x6000 only: the next read stays on the writer.
    h.client(&query("SELECT v FROM t"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
}

/// A stock session's committed autocommit write, answered with the probe's answer when the
/// engine sent a probe behind it; returns whether it did.
fn write_maybe_probed(h: &mut Host, lsn: &str) -> bool {
    let w = query("UPDATE t SET v = v + 1");
    h.take_sent(WRITER);
    h.client(&w);
    let sent = h.take_sent(WRITER);
    assert!(
        sent.starts_with(&w),
        "the client's write first: {}",
        tags(&sent)
    );
    let probed = sent.len() > w.len();
    h.writer_answers("UPDATE 1", b'I', None, None);
    if probed {
        h.backend(WRITER, &probe_answer(lsn));
        assert!(!h.session.lsn_state().write_unknown);
    } else {
        assert!(
            h.session.lsn_state().write_unknown,
            "an unprobed write's position is unknown"
        );
    }
    h.take_client();
    probed
}

/// A read the engine sends to the writer, answered there: the actions of the client's Query
/// and the decision.
///
/// A probe behind it (S-1a: it positions what the read saw, while such probes pay) is answered
/// 0x10 past the session's write.
fn read_on_the_writer(h: &mut Host) -> (Vec<A>, polarsplit::Decision) {
    let at = h.session.lsn_state().write_lsn.0 + 0x10;
    let (acts, d, _) = read_on_the_writer_at(h, at);
    (acts, d)
}

/// [`read_on_the_writer`] with a probe behind it answered at `at`; also whether there was one.
fn read_on_the_writer_at(h: &mut Host, at: u64) -> (Vec<A>, polarsplit::Decision, bool) {
    let acts = h.client(&query("SELECT v FROM t"));
    let d = h.last_decision();
    let sent = h.take_sent(WRITER);
    let probe = |t: u8| {
        messages(&sent)
            .iter()
            .any(|(m, b)| *m == t && b.windows(16).any(|w| w == b"polarsplit_probe"))
    };
    h.writer_answers("SELECT 1", b'I', None, None);
    if probe(b'B') {
        h.backend(WRITER, &probe_answer(&format!("0/{at:X}")));
    }
    h.take_client();
    (acts, d, probe(b'B'))
}

/// A read the engine sends to a reader (R1 attached), answered there: the actions of the
/// client's Query.
fn read_on_a_reader(h: &mut Host) -> Vec<A> {
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    let mut b = select_result(&["1"]);
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    h.take_client();
    acts
}

/// Writes, each followed by a read the writer serves (no probe pays), until the adaptive probe
/// skips one.
fn until_a_write_goes_unprobed(h: &mut Host) {
    let mut last = 0x5000;
    for _ in 0..200 {
        last += 0x100;
        if !write_maybe_probed(h, &format!("0/{last:X}")) {
            return;
        }
        read_on_the_writer(h);
    }
    panic!("200 writes, every one probed");
}

/// The host's writer samples arrive, as the example proxy's monitor feeds them: the adaptive
/// rule may leave writes unprobed only then. A sample sent before the writes positions none of
/// them (only one sent after a write's acknowledgement does).
fn writer_samples_arrive(h: &mut Host) {
    h.engine.writer_sample(0, Lsn(0x100), h.now);
}

#[test]
fn w7_adaptive_probe_backs_off_when_no_read_uses_its_position_and_those_reads_stay_on_the_writer() {
    // pgbench's read-your-writes shape: every read comes at once, before the standby replays
    // the write, so no probe's position ever puts a read on a reader.
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    // Per statement (a write, then its read, 40 times): whether a probe followed it.
    let mut probed = Vec::new();
    let mut wal = 0x5000;
    for i in 0..40u64 {
        wal += 0x100;
        probed.push(write_maybe_probed(&mut h, &format!("0/{wal:X}")));
        let positioned = !h.session.lsn_state().write_unknown;
        let (acts, d, read_probed) = read_on_the_writer_at(&mut h, wal + 0x10);
        probed.push(read_probed);
        assert!(
            !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
            "{acts:?}"
        );
        assert_eq!(d.outcome, Outcome::ForcePrimary, "write {i}: {d:?}");
        // After a positioned write the reader is known behind; after an unpositioned one the
        // position is unknown: the writer either way, and without waiting for anything.
        let why = if positioned {
            Reason::ReadNoBoundedWait
        } else {
            Reason::MissingLsnPrimary
        };
        assert_eq!(d.reason, why, "write {i}");
    }
    // Probes behind the writes and behind the reads the writer served (S-1a: they position what
    // the read saw, and an unprobed write before it) count alike: four that did not pay, then
    // every 2nd, 4th, … 64th statement that could have had one.
    let at: Vec<usize> = (0..80).filter(|&i| probed[i]).collect();
    assert_eq!(at, vec![0, 1, 2, 3, 5, 9, 17, 33, 65], "{probed:?}");
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), 9);
    assert!(h.streams.balanced());
}

#[test]
fn w7_adaptive_probe_that_puts_reads_on_a_reader_probes_every_write() {
    // Reads that come once the standby has replayed the write (a web request after a form
    // post): every probe pays.
    let mut h = stock(&[]);
    for i in 0..12u64 {
        let lsn = 0x5000 + i * 0x100;
        assert!(
            write_maybe_probed(&mut h, &format!("0/{lsn:X}")),
            "write {i} probed"
        );
        h.engine.reader_sample(1, Lsn(lsn), h.now);
        h.engine.reader_sample(2, Lsn(lsn), h.now);
        read_on_a_reader(&mut h);
        assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    }
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), 12);
}

#[test]
fn w7_adaptive_probe_comes_back_to_every_write_once_a_probe_pays() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    let mut wal = 0x5000;
    // Unpaid probes until the engine leaves statements unprobed.
    for _ in 0..12u64 {
        wal += 0x100;
        write_maybe_probed(&mut h, &format!("0/{wal:X}"));
        read_on_the_writer_at(&mut h, wal + 0x10);
    }
    // Writes and reads until one is probed again; the standby has replayed its position when
    // the next read comes.
    let mut n = 0;
    loop {
        assert!(n < 130, "a probe within 64 statements");
        n += 2;
        wal += 0x100;
        if write_maybe_probed(&mut h, &format!("0/{wal:X}")) {
            break;
        }
        wal += 0x10;
        let (_, d, probed) = read_on_the_writer_at(&mut h, wal);
        assert_eq!(d.reason, Reason::MissingLsnPrimary);
        if probed {
            break;
        }
    }
    assert!(!h.session.lsn_state().unknown());
    h.engine.reader_sample(1, Lsn(wal), h.now);
    h.engine.reader_sample(2, Lsn(wal), h.now);
    read_on_a_reader(&mut h);
    // That probe paid: the next writes are probed again, four in a row even with no read
    // between them (the trust a paying probe restores).
    for _ in 0..4 {
        wal += 0x100;
        assert!(write_maybe_probed(&mut h, &format!("0/{wal:X}")));
    }
}

#[test]
fn w7_adaptive_probe_without_writer_samples_probes_every_write() {
    // A host that feeds no writer samples (the Pgpool-II patch samples only its standbys): an
    // unprobed write would never be positioned, and the session's reads would stay on the
    // primary for good (an examiner's finding through Pgpool-II, 2026-12-05).
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    for i in 0..40u64 {
        assert!(
            write_maybe_probed(&mut h, &format!("0/{:X}", 0x5000 + i * 0x100)),
            "write {i} probed"
        );
        read_on_the_writer(&mut h);
    }
    // Samples that stopped arriving count as none.
    h.engine.writer_sample(0, Lsn(0x100), h.now);
    h.now += 2_001;
    for i in 40..60u64 {
        assert!(
            write_maybe_probed(&mut h, &format!("0/{:X}", 0x5000 + i * 0x100)),
            "write {i} probed"
        );
        read_on_the_writer(&mut h);
    }
}

#[test]
fn w7_lsn_probe_on_probes_every_committed_write() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    for i in 0..20u64 {
        assert!(
            write_maybe_probed(&mut h, &format!("0/{:X}", 0x5000 + i * 0x100)),
            "write {i}"
        );
        read_on_the_writer(&mut h);
    }
}

#[test]
fn c1_show_token_after_a_write_the_adaptive_probe_skipped_probes_then_answers_it() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    // Unpaid probes until a write goes unprobed.
    until_a_write_goes_unprobed(&mut h);
    let probes = h.engine.stats().get(Counter::ProbesSent);
    h.take_sent(WRITER);
    h.client(&query("SHOW polarsplit.causal_token"));
    // The engine probes the idle writer now, and the SHOW waits for the answer.
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES");
    assert!(h.take_client().is_empty(), "SHOW waits for the position");
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), probes + 1);
    h.backend(WRITER, &probe_answer("0/9000"));
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(
        token_lsn(&got).as_deref(),
        Some("0/9000"),
        "a token at the probed position"
    );
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x9000));
    assert!(h.streams.balanced());
}

#[test]
fn c1_show_token_after_a_failed_on_demand_probe_answers_55000_and_probes_once() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    until_a_write_goes_unprobed(&mut h);
    h.take_sent(WRITER);
    h.client(&query("SHOW polarsplit.causal_token"));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES");
    // The probe fails (the writer refuses it): the position stays unknown.
    let mut b = steps_answer();
    b.extend(cancelled_error());
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    // It waits, at most a second, for a writer sample that would position the write; none
    // comes.
    assert!(
        h.take_client().is_empty(),
        "the SHOW waits for a writer sample"
    );
    h.now += 1_000;
    h.timeout();
    let got = h.take_client();
    assert_eq!(
        tags(&got),
        "EZ",
        "SHOW answers the unknown position's error"
    );
    assert!(String::from_utf8_lossy(&got).contains("55000"));
    // A second SHOW does not probe again for the same write.
    h.client(&query("SHOW polarsplit.causal_token"));
    assert!(h.take_sent(WRITER).is_empty());
    assert_eq!(tags(&h.take_client()), "EZ");
}

/// Reads the application asks of the primary (`/* route=primary */`), each answered, a probe
/// behind one answered at a new position nothing reads at, until the adaptive rule leaves one
/// unprobed: what that read showed is then unpositioned (S-1a).
fn until_a_read_the_writer_served_goes_unprobed(h: &mut Host) {
    let mut at = 0x5000;
    for _ in 0..200 {
        at += 0x100;
        let q = query("/* route=primary */ SELECT v FROM t");
        h.client(&q);
        let sent = h.take_sent(WRITER);
        assert!(sent.starts_with(&q), "{}", tags(&sent));
        let probed = sent.len() > q.len();
        h.writer_answers("SELECT 1", b'I', None, None);
        if probed {
            h.backend(WRITER, &probe_answer(&format!("0/{at:X}")));
        }
        h.take_client();
        if !probed {
            let l = h.session.lsn_state();
            assert!(l.observed_unknown && !l.write_unknown, "{l:?}");
            return;
        }
    }
    panic!("200 reads, every one probed");
}

/// C-1 with S-1a: the token is the session's target, and the target counts what a read the
/// writer served showed. Once the adaptive probe left such a read unprobed, SHOW answered the
/// older target: another session presenting it read data older than this one had seen (an
/// examiner's finding, 2026-12-07: 6–9 of 10 rounds). Now SHOW probes the idle writer once and
/// answers the position it learns.
#[test]
fn c1_s1a_show_token_after_a_read_the_writer_served_unprobed_probes_then_covers_it() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    until_a_read_the_writer_served_goes_unprobed(&mut h);
    let probes = h.engine.stats().get(Counter::ProbesSent);
    h.client(&query("SHOW polarsplit.causal_token"));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES", "an on-demand probe");
    assert!(h.take_client().is_empty(), "SHOW waits for the position");
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), probes + 1);
    h.backend(WRITER, &probe_answer("0/9000"));
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(
        token_lsn(&got).as_deref(),
        Some("0/9000"),
        "a token at the probed position"
    );
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x9000));
    assert!(h.streams.balanced());
}

/// C-1 with S-1a: when the on-demand probe fails, the position of what the read showed stays
/// unknown: SHOW waits (at most a second) for a writer sample, then answers 55000 naming the
/// read (not a write), and does not probe again for the same read — no loop of failing probes.
#[test]
fn c1_s1a_show_token_after_a_failed_probe_for_a_read_answers_55000_and_probes_once() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    until_a_read_the_writer_served_goes_unprobed(&mut h);
    h.client(&query("SHOW polarsplit.causal_token"));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBCES");
    let mut b = steps_answer();
    b.extend(cancelled_error());
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    assert!(
        h.take_client().is_empty(),
        "the SHOW waits for a writer sample"
    );
    h.now += 1_000;
    h.timeout();
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.contains("55000"), "{text}");
    assert!(
        text.contains("what the session last read") && !text.contains("write"),
        "{text}"
    );
    h.client(&query("SHOW polarsplit.causal_token"));
    assert!(h.take_sent(WRITER).is_empty(), "no second probe");
    assert_eq!(tags(&h.take_client()), "EZ");
}

/// C-1 with S-1a for a client that has tokens reported: the RFQ of a read the writer served
/// waits for the probe behind it, so the token reported with it covers what the read showed.
/// Before, it was held only after a write: the client took the token it had, which did not
/// cover the read (an examiner's finding, 2026-12-07: 10 of 10 rounds).
#[test]
fn c1_s1a_a_reported_token_covers_a_read_the_writer_served_the_rfq_waits_for_the_probe() {
    let mut h = stock_as(
        &[],
        &[
            ("user", "app"),
            ("database", "db"),
            ("options", "-c polarsplit.report_token=on"),
        ],
    );
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    let q = query("/* route=primary */ SELECT v FROM t");
    h.client(&q);
    assert_eq!(probe_sent(&h.take_sent(WRITER), &q), "CPBCES probe");
    h.writer_answers("SELECT 1", b'I', None, None);
    assert_eq!(tags(&h.take_client()), "C", "the RFQ waits for the probe");
    h.backend(WRITER, &probe_answer("0/5000"));
    let got = h.take_client();
    assert_eq!(tags(&got), "SZ");
    assert_eq!(token_lsn(&got).as_deref(), Some("0/5000"));
    assert!(h.streams.balanced());
}

#[test]
fn w7_a_write_that_fails_still_has_its_pipelined_probe_answered() {
    let mut h = stock(&[]);
    let w = query("INSERT INTO t VALUES (1)");
    h.client(&w);
    assert_eq!(probe_sent(&h.take_sent(WRITER), &w), "CPBCES probe");
    let mut b = cancelled_error();
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    assert_eq!(tags(&h.take_client()), "EZ");
    h.backend(WRITER, &probe_answer("0/5000"));
    assert!(h.take_client().is_empty());
}

/// W-7's page-boundary rule, end to end: a probe answering an insert position just past a WAL
/// page header (offset 24 in a page, 40 at a segment's start) positions the write at the page's
/// start, which a standby that replayed the write reports — the read goes to that reader. One
/// byte further is a position the reader has not replayed: the writer.
#[test]
fn w7_a_probe_position_just_past_a_page_header_is_the_pages_start() {
    // (probe answer, the reader's replay position, the reader serves the read)
    let cases = [
        ("0/4018", 0x4000, true),         // 0x4018 = 8 KiB page 2 + 24
        ("0/4019", 0x4000, false),        // one byte into the page's first record
        ("0/1000028", 0x100_0000, true),  // 16 MiB segment start + 40
        ("0/1000018", 0x100_0000, false), // a segment's first page has a 40-byte header
    ];
    for (lsn, replayed, reader) in cases {
        let mut h = stock(&[("lsn_probe", "on")]);
        h.client(&query("INSERT INTO t VALUES (1)"));
        h.writer_answers("INSERT 0 1", b'I', None, None);
        h.backend(WRITER, &probe_answer(lsn));
        h.take_client();
        h.engine.reader_sample(1, Lsn(replayed), h.now);
        let acts = h.client(&query("SELECT v FROM t"));
        let acquired = acts
            .iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. }));
        assert_eq!(
            acquired, reader,
            "probe {lsn}, reader at {replayed:#x}: {acts:?}"
        );
        if reader {
            h.attach(R1);
            assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
        } else {
            assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
        }
    }
}

/// S-1a's monotonic reads on a server that reports no positions: a read the writer served
/// (here, in a READ COMMITTED block, because it reads the transaction's `now()`) may have shown
/// commits no reader has replayed. The block's next read stays on the writer until a writer
/// sample sent after that answer bounds it; then a reader that replayed the sample serves.
#[test]
fn s1a_a_read_the_writer_served_bounds_the_sessions_next_reads_on_a_reader() {
    // No probe: the writer sample's rule (a probe's is
    // `p5_s1a_a_read_the_writer_serves_in_a_read_committed_block_gets_a_probe_behind_it`).
    let mut h = stock(&[("lsn_probe", "off")]);
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    h.engine.writer_sample(0, Lsn(0x4000), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    h.client(&query("SELECT v, now() FROM t"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    h.writer_answers("SELECT 1", b'T', None, None);
    h.take_client();
    // Another session's commit at 0x4800 was visible to that read; no reader has it.
    h.client(&query("SELECT v FROM t"));
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ForcePrimary, Reason::SplitLsnUnknown)
    );
    h.writer_answers("SELECT 1", b'T', None, None);
    h.take_client();
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x4800), h.now);
    // A reader that replayed the sample serves.
    h.engine.reader_sample(1, Lsn(0x4800), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x4800));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// S-1a: a notification tells the client of a commit on the primary; what that transaction wrote
/// the client may read next. After `UNLISTEN` (the LISTEN hazard kept its reads on the writer
/// until then) the next read stays on the writer until a writer sample sent after the
/// notification bounds it, as after a read the writer served; then a reader that replayed the
/// sample serves (found by the red13 examiners: the read ran on the lagging standby and showed
/// the row as before the notifying commit, 3 of 3).
#[test]
fn s1a_a_read_after_a_notification_waits_for_a_position_past_it() {
    let mut h = stock(&[("lsn_probe", "off")]);
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    h.engine.writer_sample(0, Lsn(0x4000), h.now);
    h.client(&query("LISTEN ch"));
    h.writer_answers("LISTEN", b'I', None, None);
    h.take_client();
    h.now += 5;
    // Another session's commit at 0x4800 notified; no reader has it.
    h.backend(WRITER, &be::notification(77, "ch", "row 7 changed"));
    assert_eq!(
        tags(&h.take_client()),
        "A",
        "the notification reaches the client"
    );
    h.client(&query("UNLISTEN ch"));
    h.writer_answers("UNLISTEN", b'I', None, None);
    h.take_client();
    h.client(&query("SELECT v FROM t WHERE k = 7"));
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ForcePrimary, Reason::MissingLsnPrimary)
    );
    h.writer_answers("SELECT 1", b'I', None, None);
    h.take_client();
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x4800), h.now);
    h.engine.reader_sample(1, Lsn(0x4800), h.now);
    let acts = h.client(&query("SELECT v FROM t WHERE k = 7"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// S-1a with two-phase commit: after `PREPARE TRANSACTION` the session's writes commit whenever
/// some session runs `COMMIT PREPARED`, which this session never sees. A reader that replayed
/// every position the session knows may still lack them, so its reads stay on the writer.
#[test]
fn s1a_after_prepare_transaction_the_sessions_reads_stay_on_the_writer() {
    let mut h = stock(&[("lsn_probe", "off")]);
    h.engine.reader_sample(1, Lsn(0x9000), h.now);
    h.engine.reader_sample(2, Lsn(0x9000), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', None, None);
    h.client(&query("PREPARE TRANSACTION 'g'"));
    h.writer_answers("PREPARE TRANSACTION", b'I', None, None);
    h.take_client();
    for _ in 0..3 {
        // Whatever the samples say later.
        h.now += 5;
        h.engine.writer_sample(0, Lsn(0x8000), h.now);
        let acts = h.client(&query("SELECT v FROM t"));
        assert!(
            !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
            "{acts:?}"
        );
        assert_eq!(h.last_decision().reason, Reason::MissingLsnPrimary);
        h.writer_answers("SELECT 1", b'I', None, None);
        h.take_client();
    }
}

/// S-1a/W-7: a block whose reads the writer served leaves the session's position unknown (what
/// they saw may be newer than any reader); no probe follows them inside a block whose reads
/// cannot be split off (here REPEATABLE READ), so one follows the block's end. Its position
/// bounds what the block saw: a reader that replayed it serves the session's next read, without
/// waiting for a writer sample.
#[test]
fn s1a_w7_a_probe_follows_the_end_of_a_block_whose_reads_the_writer_served() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.client(&query("BEGIN ISOLATION LEVEL REPEATABLE READ"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_sent(WRITER);
    h.client(&query("SELECT v, now() FROM t"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    h.writer_answers("SELECT 1", b'T', None, None);
    assert_eq!(tags(&h.take_sent(WRITER)), "Q", "no probe inside the block");
    h.client(&query("COMMIT"));
    assert_eq!(tags(&h.take_sent(WRITER)), "Q");
    h.writer_answers("COMMIT", b'I', None, None);
    assert_eq!(
        probe_sent(&h.take_sent(WRITER), b""),
        "CPBCES probe",
        "a probe behind the block's end"
    );
    h.backend(WRITER, &probe_answer("0/4800"));
    h.take_client();
    h.engine.reader_sample(1, Lsn(0x4800), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// S-5/W-7 on stock servers: no probe runs inside a transaction block, also behind a read the
/// writer serves in a READ COMMITTED block whose reads could still be split off (here because it
/// reads the transaction's `now()`, S-7). The probe calls a function, which can fail (EXECUTE on
/// `pg_current_wal_insert_lsn()` revoked from PUBLIC); inside the block its error aborted the
/// client's transaction — 25P02 for the rest, ROLLBACK for its COMMIT, its UPDATE lost (an
/// examiner's finding, 2026-12-07). What the read saw stays unpositioned until the block's end:
/// the block's later reads stay on the writer (the cost), the probe follows the COMMIT's RFQ, and
/// its position puts the session's next read on a reader that replayed it.
#[test]
fn s5_w7_no_probe_runs_inside_a_block_a_read_the_writer_served_is_probed_at_its_end() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_sent(WRITER);
    let q = query("SELECT v, now() FROM t");
    h.client(&q);
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    assert_eq!(h.take_sent(WRITER), q, "no probe inside the block");
    h.writer_answers("SELECT 1", b'T', None, None);
    h.take_client();
    assert!(h.session.lsn_state().observed_unknown);
    h.engine.reader_sample(1, Lsn(0x4800), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    // The block's next read: on the writer, what the first one saw being unpositioned; still no
    // probe behind it.
    let q = query("SELECT v FROM t");
    let acts = h.client(&q);
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.take_sent(WRITER), q, "no probe inside the block");
    h.writer_answers("SELECT 1", b'T', None, None);
    h.take_client();
    h.client(&query("COMMIT"));
    assert_eq!(tags(&h.take_sent(WRITER)), "Q");
    h.writer_answers("COMMIT", b'I', None, None);
    assert_eq!(
        probe_sent(&h.take_sent(WRITER), b""),
        "CPBCES probe",
        "a probe behind the block's end"
    );
    h.backend(WRITER, &probe_answer("0/4800"));
    h.take_client();
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x4800));
    assert!(!h.session.lsn_state().observed_unknown);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// P-5: no probe follows a read the writer serves in a block whose reads can no longer be split
/// off — after its first write on a server that cannot import XIDs, a probe's position is of no
/// use to them (and the write's own position is its commit's).
#[test]
fn p5_no_probe_follows_a_read_in_a_block_that_has_written() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', None, None);
    h.take_sent(WRITER);
    h.client(&query("SELECT v FROM t"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    assert_eq!(tags(&h.take_sent(WRITER)), "Q");
}

/// F-2 in a block: a read a reader refused and the writer ran again may be a write, so the
/// block counts as one that may have written. Its end is probed as a write's, and the session's
/// reads go back to a reader at the probe's position. Before, the block's end left the "write"
/// unpositioned, no probe followed, and inside the session's next blocks no writer sample could
/// position it: their reads stayed on the writer (an examiner's finding, 2026-12-05: a failed
/// `SELECT 1/0` in a block, then 0 of 3,000 reads on the standby in the next block).
#[test]
fn f2_a_block_whose_read_a_reader_refused_ends_with_a_probe() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_sent(WRITER);
    let acts = h.client(&query("SELECT 1/0"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "split off the block: {acts:?}"
    );
    // The block is touched ahead of its first split read (its answer swallowed).
    assert!(ends_with_touch(&h.take_sent(WRITER)));
    h.writer_answers_touch(None, None);
    h.attach(R1);
    h.take_sent(R1);
    let mut b = error("ERROR", "22012", "division by zero", None, None);
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    let sent = h.take_sent(WRITER);
    assert!(
        !probe_sent(&sent, b"").contains("probe"),
        "none in the block"
    );
    let mut w = error("ERROR", "22012", "division by zero", None, None);
    w.extend(rfq(b'E', None, None));
    h.backend(WRITER, &w);
    h.take_client();
    h.client(&query("ROLLBACK"));
    h.writer_answers("ROLLBACK", b'I', None, None);
    assert_eq!(
        probe_sent(&h.take_sent(WRITER), b"").split(' ').next_back(),
        Some("probe"),
        "a probe behind the block's end"
    );
    h.backend(WRITER, &probe_answer("0/4800"));
    h.take_client();
    assert!(!h.session.lsn_state().write_unknown);
    h.engine.reader_sample(1, Lsn(0x4800), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// W-7/P-5: a writer sample sent after an unpositioned write's acknowledgement positions it
/// inside a later block that has not written (the write is not the block's). Before, no sample
/// positioned anything inside a block, and the block's reads stayed on the writer however long
/// it lasted.
#[test]
fn w7_a_writer_sample_positions_an_earlier_write_inside_a_block_that_has_not_written() {
    let mut h = stock(&[("lsn_probe", "off")]);
    h.engine.writer_sample(0, Lsn(0x100), h.now);
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'I', None, None);
    h.take_client();
    assert!(h.session.lsn_state().write_unknown);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x5000), h.now);
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x5000));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// A replication connection is passed through, and no hidden statement of the engine's runs on
/// it: a walsender refuses extended-protocol messages with an ERROR (which drops the session's
/// temporary replication slots) and, in CopyBoth, with FATAL. Before, the startup capture
/// followed its login and the probe followed each command (an examiner's finding, 2026-12-05:
/// `pg_basebackup -X stream` and `pg_receivewal` failed through the proxy).
#[test]
fn replication_connections_get_no_hidden_statement() {
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
        ("lsn_probe", "on"),
    ]));
    h.client(&startup(&[
        ("user", "app"),
        ("database", "db"),
        ("replication", "database"),
    ]));
    h.event(WRITER, Event::WriterConnected);
    h.take_sent(WRITER);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "",
        "no capture behind the login"
    );
    h.take_client();
    for (q, tag) in [
        ("IDENTIFY_SYSTEM", "IDENTIFY_SYSTEM"),
        (
            "CREATE_REPLICATION_SLOT s TEMPORARY PHYSICAL",
            "CREATE_REPLICATION_SLOT",
        ),
        ("SET application_name = 'x'", "SET"),
        ("SELECT 1", "SELECT 1"),
    ] {
        let q = query(q);
        h.client(&q);
        assert_eq!(h.last_decision().reason, Reason::ReplicationConnection);
        assert_eq!(h.take_sent(WRITER), q, "only the client's command");
        h.writer_answers(tag, b'I', None, None);
        assert_eq!(tags(&h.take_sent(WRITER)), "", "nothing behind {tag}");
        assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'I']);
    }
}

/// S-1a/R-1a on stock servers: a read on a reader shows at least what that reader was known to
/// have replayed, and the session has seen it. When the reader goes back — restarted behind its
/// old position, or replaced by an older copy — its new, lower samples do not serve the session's
/// next read: the writer does until the reader is past what the session saw. Before, a reader's
/// answer without a position raised nothing, and the session's next reads there went back in
/// time for as long as replay took to catch up (an examiner's finding, 2026-12-05: 44–99 stale
/// reads in 5 of 6 runs).
#[test]
fn s1a_a_reader_that_went_back_does_not_serve_older_data_than_the_session_saw() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    h.engine.reader_sample(2, Lsn(0x5000), h.now);
    read_on_a_reader(&mut h);
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5000));
    // Both readers go back: an outage, then samples behind what the session saw.
    h.now += 10;
    for r in [1, 2] {
        h.engine.reader_outage(r, h.now);
    }
    h.now += 10;
    for r in [1, 2] {
        h.engine.reader_sample(r, Lsn(0x4000), h.now);
    }
    let (acts, d) = read_on_the_writer(&mut h);
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(d.outcome, Outcome::ForcePrimary);
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5000));
    // Replay passes what the session saw: a reader serves again.
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
}

/// S-1a/R-1a on stock servers: a read on a reader may show more than that reader's last sample
/// (it replayed a commit since, the monitor has not sampled it yet), so the sample is only a
/// lower bound of what the session saw. Evidence of the reader taken after the read positions
/// it; an outage of the reader before any such evidence leaves the session's position unknown —
/// its reads go to the writer until a writer sample sent after that positions it. Before, the
/// lower bound stood: a standby that went back to a position between its last sample and what
/// the read showed served the session older data than it had read (an examiner's finding,
/// 2026-12-07: 30 of 30 reads after the standby was replaced by an older copy).
#[test]
fn s1a_a_read_past_the_readers_last_sample_is_not_undone_when_the_reader_goes_back() {
    let mut h = stock(&[]);
    writer_samples_arrive(&mut h);
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    read_on_a_reader(&mut h);
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5000));
    // No new evidence: the reader keeps serving (the lower bound is what is known).
    h.now += 5;
    read_on_a_reader(&mut h);
    // The reader goes back: an outage, then a sample at the session's lower bound — no more
    // than what it had sampled, maybe less than the session read there.
    h.now += 10;
    h.engine.reader_outage(1, h.now);
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    let (acts, d, _) = read_on_the_writer_at(&mut h, 0x7000);
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(d.outcome, Outcome::ForcePrimary);
    // A writer sample sent after that read positions the session at the writer's position;
    // the reader, at 0x5000, serves it again only once it has replayed that far.
    h.now += 10;
    h.engine.writer_sample(0, Lsn(0x7000), h.now);
    h.now += 1;
    let (acts, _, _) = read_on_the_writer_at(&mut h, 0x7000);
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x7000));
    h.now += 10;
    h.engine.writer_sample(0, Lsn(0x7000), h.now);
    h.engine.reader_sample(1, Lsn(0x7000), h.now);
    h.now += 1;
    read_on_a_reader(&mut h);
}

/// S-1a on stock servers, the common case: a sample of the reader taken after the read
/// positions what it showed (its replay then), without an outage between; reads stay on the
/// reader throughout and another reader behind that position does not serve the session.
#[test]
fn s1a_a_sample_taken_after_a_read_positions_what_it_showed() {
    let mut h = stock(&[]);
    writer_samples_arrive(&mut h);
    h.engine.reader_sample(1, Lsn(0x5000), h.now);
    read_on_a_reader(&mut h);
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5000));
    // A sample sent in the same millisecond as the read's answer is not after it.
    h.engine.reader_sample(1, Lsn(0x5800), h.now);
    h.now += 1;
    read_on_a_reader(&mut h);
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5800));
    h.now += 1;
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.now += 1;
    // Settled at the next statement: a reader behind 0x6000 does not serve it.
    h.engine.reader_sample(2, Lsn(0x5f00), h.now);
    let acts = read_on_a_reader(&mut h);
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 1, .. })),
        "{acts:?}"
    );
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x6000));
    assert!(!h.session.lsn_state().observed_unknown);
}

/// W-7's adaptive probe in a session that only reads (S-1a): reads the writer serves because the
/// standby has not replayed the last probe's position yet make probes that do not pay. Once four
/// had not, the backoff counted only committed writes left unprobed — a session that never
/// writes never counted one, so it never probed again, and every later read stayed on the
/// writer however far the standby caught up (CI, 2026-12-05, then in READ COMMITTED blocks: 0 of
/// 200 reads on the standby, `SPLIT_LSN_UNKNOWN` 197, after 4 `READ_NO_BOUNDED_WAIT` while
/// other WAL kept the standby a few milliseconds behind). Every statement that leaves the
/// session's position unknown with no probe behind it now counts: a probe follows within 64 of
/// them, and the first that pays brings the reads back. (Outside blocks: no probe runs inside
/// one, S-5; a block's reads count the same way and its end is probed.)
#[test]
fn w7_adaptive_probe_backoff_counts_reads_left_unpositioned_so_a_reading_session_is_probed_again() {
    let mut h = stock(&[]);
    writer_samples_arrive(&mut h);
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.engine.reader_sample(2, Lsn(0x4000), h.now);
    // A read the application asks of the primary, then plain reads while the standby is behind
    // every probe's position: each goes to the writer.
    let mut at = 0x4800u64;
    let mut probes = 0;
    let read = |h: &mut Host, sql: &str, at: &mut u64| -> (bool, bool) {
        let q = query(sql);
        let acts = h.client(&q);
        let d = h.last_decision();
        if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
            // To a reader (the decision is logged once it is attached).
            return (true, false);
        }
        let sent = h.take_sent(WRITER);
        assert!(sent.starts_with(&q), "{:?}: {}", d.reason, tags(&sent));
        let probed = messages(&sent[q.len()..])
            .iter()
            .any(|(m, b)| *m == b'B' && b.windows(16).any(|w| w == b"polarsplit_probe"));
        h.writer_answers("SELECT 1", b'I', None, None);
        if probed {
            h.backend(WRITER, &probe_answer(&format!("0/{at:X}")));
            *at += 0x100;
        }
        h.take_client();
        (false, probed)
    };
    let (on_reader, probed) = read(&mut h, "/* route=primary */ SELECT v FROM t", &mut at);
    assert_eq!((on_reader, probed), (false, true));
    let mut stuck = 0;
    for _ in 0..8 {
        let (on_reader, probed) = read(&mut h, "SELECT v FROM t", &mut at);
        // Behind the last probe's position, or the position unknown after a read unprobed.
        assert!(!on_reader);
        probes += usize::from(probed);
        if !probed {
            stuck += 1;
        }
    }
    assert!(stuck > 0, "the backoff left some reads unprobed");
    // The standby catches up far past anything the session saw: a probe comes within 64 reads,
    // and the session's reads go back to the standby.
    h.engine.reader_sample(1, Lsn(0x100000), h.now);
    h.engine.reader_sample(2, Lsn(0x100000), h.now);
    let mut back = None;
    for n in 0..130 {
        let (on_reader, _) = read(&mut h, "SELECT v FROM t", &mut at);
        if on_reader {
            back = Some(n);
            break;
        }
    }
    assert!(
        back.is_some_and(|n| n <= 65),
        "{back:?} (probes before: {probes})"
    );
}

/// W-7's adaptive probe after an unprobed write, in a session that then only reads, one
/// statement behind the other: a probe behind one of those reads, taken after the write was
/// acknowledged, positions the write too. Before, a read behind an unprobed write never had a
/// probe, and only a writer sample sent after the session's last read could position it —
/// reads one behind the other leave no room for one: every read stayed on the writer until
/// the session wrote again, however far the standby had caught up.
#[test]
fn w7_reads_after_an_unprobed_write_get_a_probe_within_64_and_go_back_to_the_reader() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    writer_samples_arrive(&mut h);
    let mut wal = 0x5000;
    // Unpaid probes until a write goes unprobed.
    loop {
        wal += 0x100;
        if !write_maybe_probed(&mut h, &format!("0/{wal:X}")) {
            break;
        }
        read_on_the_writer_at(&mut h, wal + 0x10);
    }
    assert!(h.session.lsn_state().write_unknown);
    // The standby replays far past the write; the session only reads now.
    h.engine.reader_sample(1, Lsn(0x100000), h.now);
    h.engine.reader_sample(2, Lsn(0x100000), h.now);
    let mut probed_at = None;
    for n in 0..64 {
        let (_, d, probed) = read_on_the_writer_at(&mut h, wal + 0x10);
        assert_eq!(d.reason, Reason::MissingLsnPrimary);
        if probed {
            probed_at = Some(n);
            break;
        }
    }
    assert!(probed_at.is_some(), "a probe within 64 reads");
    let l = h.session.lsn_state();
    assert!(!l.unknown(), "{l:?}");
    assert_eq!(
        l.write_lsn,
        Lsn(wal + 0x10),
        "the probe positions the write"
    );
    read_on_a_reader(&mut h);
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
}

/// S-5 with W-7's probe behind every read the writer serves (`lsn_probe = on`): a failed
/// capture's retry counts those reads too. Counting only units without a probe behind them
/// would never try it again in such a session.
#[test]
fn s5_a_failed_capture_is_tried_again_behind_reads_that_carry_probes() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.client(&query("SET search_path = app"));
    h.take_sent(WRITER);
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', None, None));
    ans.extend(error(
        "ERROR",
        "55P03",
        "canceling statement due to lock timeout",
        None,
        None,
    ));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    h.take_client();
    let (_, d, probed) = read_on_the_writer_at(&mut h, 0x100);
    assert_eq!(d.reason, Reason::SessionStateUnknown);
    assert!(probed, "a probe behind the read");
    // Tried again after that read: the capture goes out once the probe has answered.
    assert!(sends_capture(&h.take_sent(WRITER)), "tried again");
    h.backend(WRITER, &capture_answer(&[("search_path", "app")], None));
    h.take_client();
    // Known again: the next read goes to the reader (replayed past the probe's position).
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

/// E-1: after an extended message the writer refused (a Flush released its error), a further
/// extended message, a simple Query and the Sync, each in its own packet, are discarded by the
/// server up to the Sync, which alone is answered; the session goes on after it. An examiner's
/// differential test of 2026-12-06 (seed 33, shrunk): the batch the Query closed waited for its
/// discarded Execute for ever, and every later statement behind it.
#[test]
fn e1_messages_sent_one_by_one_after_a_refused_flushed_execute_are_skipped_to_the_sync() {
    let missing = || error("ERROR", "34000", "portal \"\" does not exist", None, None);
    let mut h = stock(&[]);
    let mut b = execute_rows("", 2);
    b.extend(flush());
    h.client(&b);
    assert_eq!(h.take_sent(WRITER), b);
    h.backend(WRITER, &missing());
    assert_eq!(tags(&h.take_client()), "E");
    for m in [execute_rows("", 2), query("SELECT 1"), sync()] {
        h.client(&m);
        assert_eq!(h.take_sent(WRITER), m, "to the writer, which skips it");
    }
    h.backend(WRITER, &rfq(b'I', None, None));
    assert_eq!(tags(&h.take_client()), "Z", "the Sync's answer alone");
    // The session goes on: the next statement is routed (behind the capture the unknown
    // Execute made due), to the reader.
    h.client(&query("SELECT 'end'"));
    if !h.take_sent(WRITER).is_empty() {
        h.backend(WRITER, &capture_answer(&[], None));
    }
    assert!(
        matches!(h.log.last(), Some(A::Acquire { .. })),
        "{:?}",
        h.log.last()
    );
}

/// E-1, S-5: a SET sent as extended messages without a Sync, then a simple Query behind them:
/// both run in one implicit transaction on the primary. The capture the SET made due waits for
/// the Query's ReadyForQuery; sent between them, its Sync ended that transaction (an examiner's
/// differential test, 2026-12-06, seed 288 shrunk: the `application_name` report arrived before
/// the Query's answer; with a write in place of the SET and a Query that fails, the write the
/// primary rolls back would commit).
#[test]
fn e1_nothing_hidden_runs_between_unsynced_extended_messages_and_the_query_behind_them() {
    let mut h = stock(&[]);
    let mut b = parse("s2", "SET application_name = 'x'");
    b.extend(bind("", "s2"));
    b.extend(execute(""));
    b.extend(flush());
    h.client(&b);
    assert_eq!(h.take_sent(WRITER), b);
    let mut ans = msg(b'1', &[]);
    ans.extend(msg(b'2', &[]));
    ans.extend(command_complete("SET"));
    h.backend(WRITER, &ans);
    let q = query("SELECT 1");
    h.client(&q);
    assert_eq!(
        h.take_sent(WRITER),
        q,
        "the Query alone, nothing hidden in front of it"
    );
    let mut ans = param_status("application_name", "x");
    ans.extend(select_result(&["1"]));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    // The capture follows the Query's answer.
    assert!(sends_capture(&h.take_sent(WRITER)));
}

/// E-4, P-5, S-5: no probe follows a row-limited read the writer serves in a block (suspended,
/// its unnamed portal the client's to run on): the client's next Execute of the unnamed portal
/// reaches the writer with that portal intact, and nothing of the engine's ran in the block.
/// (Before 2026-12-06 the probe bound the unnamed portal — `SELECT 0` where the primary alone
/// returns the rest of the rows; then a portal of its own; since 2026-12-07 no probe runs in a
/// block at all, S-5.)
#[test]
fn e4_p5_s5_no_probe_follows_a_suspended_read_in_a_block() {
    let mut h = stock(&[("lsn_probe", "on")]);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_sent(WRITER);
    h.take_client();
    let mut b = parse("", "SELECT v, now() FROM t");
    b.extend(bind("", ""));
    b.extend(execute_rows("", 1));
    b.extend(sync());
    h.client(&b);
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    assert_eq!(
        h.take_sent(WRITER),
        b,
        "nothing of the engine's in the block"
    );
    // The client's part: suspended after one row.
    let mut a = msg(b'1', b"");
    a.extend(msg(b'2', b""));
    a.extend(data_row(&["1", "now"]));
    a.extend(msg(b's', b""));
    a.extend(rfq(b'T', None, None));
    h.backend(WRITER, &a);
    assert_eq!(tags(&h.take_client()), "12DsZ");
    // The client's next Execute of its unnamed portal goes to the writer, where it still is.
    let mut b = execute_rows("", 1);
    b.extend(sync());
    h.client(&b);
    assert!(h.take_sent(WRITER).starts_with(&b));
}

/// W-7, S-5: a client's Parse of a reserved name is refused by the server with 42P05 — the engine
/// parses its own probe and capture under those names first (they stay only until its next probe
/// or capture, which closes them before parsing) — except in a failed block, where the server
/// refuses every Parse (25P02) and the engine's would fail in the client's place.
#[test]
fn w7_a_clients_parse_of_a_reserved_name_is_refused_and_the_next_probe_parses_after_closing() {
    let mut h = stock(&[]);
    let mut b = parse("polarsplit_probe", "SELECT 1");
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "PPPS");
    let names: Vec<String> = named(&sent).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names[..3],
        ["polarsplit_probe", "polarsplit_capture", "polarsplit_probe"],
        "ours first, then the client's"
    );
    let mut ans = [msg(b'1', b""), msg(b'1', b"")].concat();
    ans.extend(error(
        "ERROR",
        "42P05",
        "prepared statement \"polarsplit_probe\" already exists",
        None,
        None,
    ));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(
        tags(&got),
        "EZ",
        "the client gets the refusal, nothing of ours"
    );
    assert!(String::from_utf8_lossy(&got).contains("42P05"));
    // The next probe closes the name before it parses it.
    let w = query("UPDATE t SET v = 1");
    h.client(&w);
    let sent = h.take_sent(WRITER);
    assert_eq!(probe_sent(&sent, &w), "CPBCES probe");
    assert_eq!(
        named(&sent[w.len()..])[0],
        ('C', "polarsplit_probe".to_string())
    );
    h.writer_answers("UPDATE 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("0/7000"));
    assert_eq!(tags(&h.take_client()), "CZ");
    // In a failed block: the client's Parse alone, refused by the server as any Parse there.
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_sent(WRITER);
    let w = query("UPDATE t SET v = 1/0");
    h.client(&w);
    assert_eq!(h.take_sent(WRITER), w);
    let mut ans = error("ERROR", "22012", "division by zero", None, None);
    ans.extend(rfq(b'E', None, None));
    h.backend(WRITER, &ans);
    h.take_client();
    let mut b = parse("polarsplit_capture", "SELECT 1");
    b.extend(sync());
    h.client(&b);
    assert_eq!(h.take_sent(WRITER), b, "nothing of ours in a failed block");
    let mut ans = error(
        "ERROR",
        "25P02",
        "current transaction is aborted",
        None,
        None,
    );
    ans.extend(rfq(b'E', None, None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "EZ");
    assert!(h.streams.balanced());
}

/// W-7, S-5: a client's SQL `PREPARE` of a reserved name is refused by the server with 42P05 as
/// its Parse of one is: the engine parses its own under those names first (a Sync of their own,
/// answers swallowed), so its next probe or capture never closes a statement of the client's.
/// Another name's PREPARE goes as it is.
#[test]
fn w7_a_clients_sql_prepare_of_a_reserved_name_is_refused_with_42p05() {
    let mut h = stock(&[]);
    let q = query("PREPARE /* c */ POLARSPLIT_CAPTURE AS SELECT 1");
    h.client(&q);
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "PPSQ");
    assert!(sent.ends_with(&q), "the client's Query behind ours");
    let names: Vec<String> = named(&sent).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names[..2], ["polarsplit_probe", "polarsplit_capture"]);
    let mut ans = [msg(b'1', b""), msg(b'1', b"")].concat();
    ans.extend(rfq(b'I', None, None));
    ans.extend(error(
        "ERROR",
        "42P05",
        "prepared statement \"polarsplit_capture\" already exists",
        None,
        None,
    ));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ", "the refusal and one RFQ, nothing of ours");
    assert!(String::from_utf8_lossy(&got).contains("42P05"));
    // Another name: the Query with no Parse of ours in front (the capture the refused PREPARE
    // made due may go first).
    let q = query("PREPARE mine AS SELECT 1");
    h.client(&q);
    let sent = h.take_sent(WRITER);
    assert!(sent.ends_with(&q));
    assert!(
        !named(&sent)
            .iter()
            .any(|(t, n)| *t == 'P' && n == "polarsplit_probe"),
        "{:?}",
        named(&sent)
    );
    if sends_capture(&sent) {
        h.backend(WRITER, &capture_answer(&[], None));
    }
    h.writer_answers("PREPARE", b'I', None, None);
    assert_eq!(tags(&h.take_client()), "CZ");
    assert!(h.streams.balanced());
}

/// S-3/P-5 (red10-c): the statements of one Query run in one implicit transaction, and a
/// `BEGIN` among them makes it the block, with what ran before it: `INSERT …; BEGIN` leaves the
/// INSERT uncommitted in the block. The block's reads are then past its first write — none on a
/// reader's pre-write path (a standby lacks the row the primary alone shows the block).
#[test]
fn s3_p5_a_write_before_the_begin_of_its_query_counts_in_the_block() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    h.client(&query("INSERT INTO t VALUES (1); BEGIN"));
    let mut b = be::command_complete("INSERT 0 1");
    b.extend(be::command_complete("BEGIN"));
    b.extend(rfq(b'T', None, None));
    h.backend(WRITER, &b);
    h.take_client();
    h.take_sent(WRITER);
    let acts = h.client(&query("SELECT count(*) FROM t"));
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    assert_ne!(h.last_decision().reason, Reason::SplitPreWrite);
    h.writer_answers("SELECT 1", b'T', None, None);
    h.take_client();
    // Its COMMIT commits a write: probed.
    h.take_sent(WRITER);
    h.client(&query("COMMIT"));
    h.writer_answers("COMMIT", b'I', None, None);
    assert_eq!(tags(&h.take_sent(WRITER)), "QCPBCES");
}

/// S-3/P-5 (red10-c): a `BEGIN` inside an open block is answered with a warning, and PostgreSQL
/// still applies its options (psycopg's own BEGIN, then the application's `BEGIN ISOLATION
/// LEVEL REPEATABLE READ`): the block is no longer READ COMMITTED, so no read leaves the writer.
#[test]
fn s3_p5_a_begin_inside_the_block_sets_its_isolation() {
    let mut h = stock(&[]);
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("BEGIN ISOLATION LEVEL REPEATABLE READ"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    let acts = h.client(&query("SELECT 1"));
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.last_decision().reason, Reason::SplitIsolation);
}

/// C-1 (red10-c): `COMMIT AND CHAIN` commits the block's write and opens the next block (RFQ
/// `T`), where no probe may run. For a client that has tokens reported, the RFQ waits for a
/// writer sample that positions the commit, so the token it sees covers the write; the new
/// block has written nothing, so the sample may position it.
#[test]
fn c1_a_write_committed_by_commit_and_chain_is_covered_by_the_reported_token() {
    let mut h = stock_as(
        &[],
        &[
            ("user", "app"),
            ("database", "db"),
            ("options", "-c polarsplit.report_token=on"),
        ],
    );
    // The host feeds writer samples (without them the RFQ would wait for nothing).
    writer_samples_arrive(&mut h);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'T', None, None);
    h.take_client();
    h.client(&query("COMMIT AND CHAIN"));
    h.writer_answers("COMMIT", b'T', None, None);
    let out = h.take_client();
    assert!(
        !tags(&out).contains('Z'),
        "the RFQ waits for the write's position: {:?}",
        tags(&out)
    );
    assert!(h.session.next_deadline().is_some(), "it looks again soon");
    // A sample sent in the same millisecond may predate the commit: not used.
    h.engine.writer_sample(0, Lsn(0x6000), h.now);
    h.timeout();
    assert!(!tags(&h.take_client()).contains('Z'));
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x6100), h.now);
    h.timeout();
    let out = h.take_client();
    assert_eq!(tags(&out), "SZ", "the token, then the RFQ");
    assert_eq!(token_lsn(&out).as_deref(), Some("0/6100"));
    assert_eq!(client_rfq_statuses(&out), vec![b'T']);
}

/// C-1 (red11-r): `COMMIT; BEGIN` in one Query ends the block and begins the next, as `COMMIT
/// AND CHAIN` does: the new block has not written, so a writer sample positions the commit, and
/// a token-reporting client's RFQ waits for it — the token it sees covers the write.
#[test]
fn c1_a_write_committed_by_commit_then_begin_in_one_query_is_covered_by_the_reported_token() {
    let mut h = stock_as(
        &[],
        &[
            ("user", "app"),
            ("database", "db"),
            ("options", "-c polarsplit.report_token=on"),
        ],
    );
    // The host feeds writer samples (without them the RFQ would wait for nothing).
    writer_samples_arrive(&mut h);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'T', None, None);
    h.take_client();
    h.client(&query("COMMIT; BEGIN"));
    let mut b = be::command_complete("COMMIT");
    b.extend(be::command_complete("BEGIN"));
    b.extend(rfq(b'T', None, None));
    h.backend(WRITER, &b);
    assert!(!tags(&h.take_client()).contains('Z'), "the RFQ waits");
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x6100), h.now);
    h.timeout();
    let out = h.take_client();
    assert_eq!(tags(&out), "SZ", "the token, then the RFQ");
    assert_eq!(token_lsn(&out).as_deref(), Some("0/6100"));
}

/// C-1 (red11-r): psycopg wraps a `SHOW polarsplit.causal_token` after `commit()` in a BEGIN of
/// its own; no probe runs in a block, so a write committed before it whose position the probe
/// left unknown was answered 55000. The SHOW now waits (bounded) for a writer sample sent after
/// the write, which positions it.
#[test]
fn c1_show_token_in_a_block_after_an_unpositioned_commit_waits_for_a_writer_sample() {
    let mut h = stock(&[("lsn_probe", "off")]);
    h.engine.writer_sample(0, Lsn(0x5000), h.now);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    h.take_sent(WRITER);
    h.client(&query("SHOW polarsplit.causal_token"));
    assert!(h.take_client().is_empty(), "the SHOW waits for a sample");
    assert!(h.take_sent(WRITER).is_empty(), "nothing goes to the writer");
    assert!(h.session.next_deadline().is_some(), "it looks again soon");
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x6100), h.now);
    h.timeout();
    let out = h.take_client();
    assert_eq!(tags(&out), "TDCZ");
    assert_eq!(token_lsn(&out).as_deref(), Some("0/6100"));
    assert_eq!(client_rfq_statuses(&out), vec![b'T']);
}

/// C-1: a host that feeds no writer samples (the Pgpool-II patch samples only standbys) has no
/// sample to wait for: the RFQ of a `COMMIT AND CHAIN` that committed a write goes at once (the
/// token is reported once the position is known), never a second's wait for nothing.
#[test]
fn c1_without_writer_samples_the_rfq_after_commit_and_chain_is_not_held() {
    let mut h = stock_as(
        &[],
        &[
            ("user", "app"),
            ("database", "db"),
            ("options", "-c polarsplit.report_token=on"),
        ],
    );
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'T', None, None);
    h.take_client();
    h.client(&query("COMMIT AND CHAIN"));
    h.writer_answers("COMMIT", b'T', None, None);
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'T']);
}

/// SPEC P-6: a SELECT of nothing but session-only built-ins with constant arguments (asyncpg's
/// Pool reset, a tenant's `set_config`, a lock release) is the writer's but writes nothing: no
/// probe rides behind it, the session's write position stays where its last write left it, and
/// its next read goes at once to a reader that replayed that write. Before (CI, 2026-12-07),
/// each was probed at the writer's insert position — other clients' WAL included — and, on a
/// busy primary, the reads after it stayed on the writer. An advisory lock's acquire, or the same
/// calls over a table, are still probed: they may write, or order the session after others.
#[test]
fn p6_session_only_calls_get_no_probe_and_keep_the_sessions_target() {
    for (sql, tag, probed) in [
        ("SELECT pg_advisory_unlock_all()", "SELECT 1", false),
        (
            "SELECT pg_catalog.pg_advisory_unlock(1), pg_advisory_unlock_shared(2, 3)",
            "SELECT 1",
            false,
        ),
        (
            "SELECT pg_advisory_unlock($$k$$::text::bigint)",
            "SELECT 1",
            true,
        ),
        ("SELECT pg_advisory_lock(1)", "SELECT 1", true),
        ("SELECT pg_advisory_unlock(k) FROM t", "SELECT 1", true),
        ("SELECT myschema.pg_advisory_unlock_all()", "SELECT 1", true),
    ] {
        let mut h = stock(&[]);
        h.engine.reader_sample(1, Lsn(0x5000), h.now);
        h.client(&query("INSERT INTO t VALUES (1)"));
        h.take_sent(WRITER);
        h.writer_answers("INSERT 0 1", b'I', None, None);
        h.backend(WRITER, &probe_answer("0/5000"));
        h.take_client();
        assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x5000));
        let q = query(sql);
        h.client(&q);
        let sent = probe_sent(&h.take_sent(WRITER), &q);
        assert_eq!(sent.ends_with(" probe"), probed, "{sql}: {sent}");
        assert_eq!(h.last_decision().reason, Reason::WriteFunction, "{sql}");
        h.writer_answers(tag, b'I', None, None);
        h.take_client();
        let l = h.session.lsn_state();
        assert_eq!(l.write_unknown, probed, "{sql}");
        if probed {
            h.backend(WRITER, &probe_answer("0/9000"));
            h.take_client();
        }
        // The next read: a reader at 0/5000 serves it at once — unless the statement was
        // probed, at a position that reader has not replayed.
        let acts = h.client(&query("SELECT v FROM t"));
        assert_eq!(
            acts.iter()
                .any(|a| matches!(a, A::Acquire { server: 1, .. })),
            !probed,
            "{sql}: {acts:?}"
        );
        if !probed {
            h.attach(R1);
            assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp, "{sql}");
        }
    }
}
