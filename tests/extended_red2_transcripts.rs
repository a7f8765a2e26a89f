//! Extended-protocol defects an examination found (red2), as protocol traces; the same cases run
//! against real servers in tests/e2e/test_red2_findings.py.
//! - E-1: messages of a batch routed at a Flush that arrived in the same client input as the
//!   Flush are sent once the reader connection is attached (nothing else would route them).
//! - E-2: a Parse of a name that lives only on readers reaches the writer behind a hidden Parse
//!   of that name, so the writer refuses it (42P05) as the one server would.
//! - E-2: a Parse the engine answered itself (the reader had the statement) and the server then
//!   skipped does not make the engine forget that the connection has the statement.

mod common;

use common::*;
use polarsplit::{ConnId, Event, Lsn, Outcome, Reason};

const R1: ConnId = 711;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

#[test]
fn e1_the_rest_of_a_batch_that_arrived_with_its_flush_follows_once_the_reader_is_attached() {
    let mut h = host();
    let mut b = parse("", "SELECT v FROM t WHERE k = $1");
    b.extend(describe(b'S', ""));
    b.extend(flush());
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(tags(&h.take_sent(R1)), "PDHBES");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
    ans.extend(row_description(1));
    ans.extend(msg(b'2', b""));
    ans.extend(data_row(&["7"]));
    ans.extend(command_complete("SELECT 1"));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "1tT2DCZ");
    assert!(h.streams.balanced());
}

#[test]
fn e2_a_parse_of_a_name_that_lives_only_on_a_reader_is_refused_by_the_writer() {
    let mut h = host();
    put_s1_on_r1(&mut h, "SELECT v FROM t", false);
    // The same name again, another text: only a server can refuse it, and the writer must
    // have the name to do so.
    let mut b = parse("s1", "SELECT 2");
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    let names = named(&sent);
    assert_eq!(
        names,
        vec![
            ('P', "s1".to_string()),
            ('P', "s1".to_string()),
            ('S', String::new())
        ],
        "a hidden Parse of the reader's statement ahead of the client's"
    );
    let mut ans = msg(b'1', b"");
    ans.extend(error(
        "ERROR",
        "42P05",
        "prepared statement \"s1\" already exists",
        None,
        None,
    ));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(
        tags(&h.take_client()),
        "EZ",
        "the hidden ParseComplete swallowed, the refusal forwarded"
    );
}

#[test]
fn e2_a_skipped_parse_the_engine_answered_keeps_the_readers_statement_known() {
    let r = "SELECT v FROM t";
    let mut h = host();
    let mut b = parse("", r);
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(tags(&h.take_sent(R1)), "PBES");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(data_row(&["1"]));
    ans.extend(command_complete("SELECT 1"));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    h.take_client();
    // An error skips the second Parse, which the engine answers itself (R1 has `r`).
    let mut b = parse("", "SELECT 1/0");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(parse("", r));
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach(R1);
    assert_eq!(
        tags(&h.take_sent(R1)),
        "PBEBES",
        "no Parse of `r`: R1 has it"
    );
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error("ERROR", "22012", "division by zero", None, None));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    // Retried on the writer (nothing reached the client), where it fails the same way.
    assert_eq!(tags(&h.take_sent(WRITER)), "PBEPBES");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error("ERROR", "22012", "division by zero", None, None));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12EZ");
    // R1 still has `r`: the next batch that needs it sends no Parse of it (a Parse would be
    // refused 42P05 by the reader).
    let mut b = parse("", r);
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach(R1);
    assert_eq!(tags(&h.take_sent(R1)), "BES");
}

#[test]
fn e4_a_named_portal_bound_inside_a_transaction_lives_on_the_writer() {
    // asyncpg's cursor in a transaction: Bind of a named portal and a row-limited Execute, then
    // more Executes of the portal in later batches; a reader's Sync would destroy the portal.
    let mut h = host();
    let mut b = parse("s1", "SELECT v FROM t");
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    h.take_client();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), None);
    h.take_client();
    h.take_sent(WRITER);
    let mut b = bind("c1", "s1");
    b.extend(sync());
    h.client(&b);
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ForcePrimary, Reason::BatchRowLimitedInTxn)
    );
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PBS",
        "the statement prepared on the writer first"
    );
    assert!(h.take_sent(R1).is_empty());
}

/// In a transaction block (BEGIN answered on the writer).
fn host_in_txn() -> Host {
    let mut h = host();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.take_client();
    h.take_sent(WRITER);
    h
}

#[test]
fn e4_the_unnamed_portal_bound_in_a_transaction_and_not_run_to_completion_lives_on_the_writer() {
    // In a transaction block the unnamed portal outlives its batch: a later batch may Execute
    // it. A reader's Sync would destroy it (the Execute then failed 34000 on the writer).
    let mut h = host_in_txn();
    let mut b = parse("", "SELECT v FROM t");
    b.extend(bind("", ""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ForcePrimary, Reason::BatchRowLimitedInTxn)
    );
    assert_eq!(tags(&h.take_sent(WRITER)), "PBS");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(rfq(b'T', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12Z");
    // Its Execute in the next batch runs where the portal lives.
    let mut b = execute("");
    b.extend(sync());
    h.client(&b);
    assert_eq!(h.last_decision().reason, Reason::BatchPortalElsewhere);
    assert_eq!(tags(&h.take_sent(WRITER)), "ES");
    // Bound and run to completion in one batch (what drivers send): still a read for a reader.
    let mut h = host_in_txn();
    let mut b = parse("", "SELECT v FROM t");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ReplicaWithWait, Reason::SplitPreWrite)
    );
    assert_eq!(tags(&h.take_sent(R1)), "PBES");
}

#[test]
fn e4_a_bind_of_the_unnamed_portal_in_a_transaction_joins_a_reader_batch_only_when_run_to_completion(
) {
    // asyncpg's Parse/Describe/Flush goes to a reader; a Bind of the unnamed portal that follows
    // without an Execute of it must not join there (the reader's Sync would destroy the portal).
    let cases: [(&str, Vec<u8>, bool); 3] = [
        ("bind only", [bind("", ""), sync()].concat(), false),
        (
            "run to completion",
            [bind("", ""), execute(""), sync()].concat(),
            true,
        ),
        (
            // A limit above E-4's held bound (a small one may now run, held, on a reader).
            "row-limited",
            [bind("", ""), execute_rows("", 1001), sync()].concat(),
            false,
        ),
    ];
    for (case, rest, joins) in cases {
        let mut h = host_in_txn();
        let mut b = parse("", "SELECT v FROM t");
        b.extend(describe(b'S', ""));
        b.extend(flush());
        h.client(&b);
        h.attach_fresh(R1);
        assert_eq!(h.last_decision().reason, Reason::SplitPreWrite, "{case}");
        h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
        h.take_sent(WRITER);
        let sent = tags(&h.take_sent(R1));
        assert!(sent.ends_with("PDH"), "{sent}");
        let mut ans = msg(b'1', b"");
        ans.extend(msg(b't', &[0, 0]));
        ans.extend(msg(b'n', b""));
        h.backend(R1, &ans);
        assert_eq!(tags(&h.take_client()), "1tn");
        let b = rest.clone();
        h.client(&b);
        let to_reader = tags(&h.take_sent(R1));
        if joins {
            assert_eq!(to_reader, "BES", "{case}");
            continue;
        }
        assert_eq!(
            to_reader, "S",
            "{case}: the held part closed by a hidden Sync"
        );
        h.backend(R1, &rfq(b'I', Some(0x1000), None));
        assert!(
            h.take_client().is_empty(),
            "{case}: the hidden Sync's RFQ swallowed"
        );
        assert!(h.take_sent(R1).is_empty(), "{case}");
        let to_writer = tags(&h.take_sent(WRITER));
        assert!(
            to_writer.ends_with(&tags(&rest)),
            "{case}: the rest routed anew, to the writer: {to_writer}"
        );
        assert_eq!(
            h.last_decision().reason,
            Reason::BatchRowLimitedInTxn,
            "{case}"
        );
    }
}

#[test]
fn e2_a_parse_behind_a_pipelined_deallocate_all_gets_no_hidden_parse() {
    // The name is tracked (reader only) when the Parse is sent, but the DEALLOCATE ALL ahead of
    // it drops it on the writer first: a hidden Parse would make the client's fail 42P05.
    let mut h = host();
    let mut b = parse("s1", "SELECT v FROM t");
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    h.take_client();
    let mut b = query("DEALLOCATE ALL");
    b.extend(parse("s1", "SELECT 2"));
    b.extend(sync());
    h.client(&b);
    let names: Vec<(char, String)> = named(&h.take_sent(WRITER))
        .into_iter()
        .filter(|(t, _)| *t == 'P')
        .collect();
    assert_eq!(
        names,
        vec![('P', "s1".to_string())],
        "only the client's Parse"
    );
}

#[test]
fn e1_f3_after_an_error_a_flush_released_the_rest_of_the_batch_is_skipped_to_its_sync() {
    let mut h = host();
    let mut b = parse("", "SELECT 1/0");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(flush());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(tags(&h.take_sent(R1)), "PBEH");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error("ERROR", "22012", "division by zero", None, None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "12E");
    // The reader skips to a Sync: the engine's own closes the batch there.
    assert_eq!(tags(&h.take_sent(R1)), "S");
    h.backend(R1, &rfq(b'I', Some(0x1000), None));
    assert!(h.take_client().is_empty(), "the client sent no Sync yet");
    // The rest of the client's batch is skipped, its Sync answered: one RFQ, no other error.
    let mut b = parse("", "SELECT v FROM t");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert!(h.take_sent(R1).is_empty());
    assert!(h.take_sent(WRITER).is_empty());
    assert_eq!(tags(&h.take_client()), "Z");
}

#[test]
fn e1_f3_a_reader_lost_after_its_error_reached_the_client_adds_no_second_error() {
    // The reader's error reached the client; then the connection broke while only a Sync's
    // ReadyForQuery was still out — the engine's own Sync closing a batch a Flush released, or
    // the client's. One server would have sent the error and that RFQ: no 55000 "the replica
    // connection was lost" after the error (simulator seed 374 of 6d0f652's fix).
    for flushed in [true, false] {
        let mut h = host();
        let mut b = parse("", "SELECT 1/0");
        b.extend(bind("", ""));
        b.extend(execute(""));
        b.extend(if flushed { flush() } else { sync() });
        h.client(&b);
        h.attach_fresh(R1);
        h.take_sent(R1);
        let mut ans = msg(b'1', b"");
        ans.extend(msg(b'2', b""));
        if !flushed {
            // Without a Flush the reader's answer is held until its result begins: a row
            // reached the client before the error, so the error is forwarded (no retry, F-3).
            ans.extend(data_row(&["1"]));
        }
        ans.extend(error("ERROR", "22012", "division by zero", None, None));
        h.backend(R1, &ans);
        let want = if flushed { "12E" } else { "12DE" };
        assert_eq!(tags(&h.take_client()), want, "flushed {flushed}");
        h.event(R1, Event::ConnectionLost);
        let got = tags(&h.take_client());
        if flushed {
            assert_eq!(got, "", "the client sent no Sync yet");
            let mut b = parse("", "SELECT v FROM t");
            b.extend(bind("", ""));
            b.extend(execute(""));
            b.extend(sync());
            h.client(&b);
            assert!(
                h.take_sent(WRITER).is_empty(),
                "skipped as the server skips them"
            );
            assert_eq!(tags(&h.take_client()), "Z");
        } else {
            assert_eq!(got, "Z", "the RFQ of the client's Sync, no second error");
        }
    }
}

#[test]
fn e2_sql_prepare_of_a_name_that_lives_only_on_a_reader_is_refused_by_the_writer() {
    let mut h = host();
    let mut b = parse("s1", "SELECT v FROM t");
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    h.take_client();
    h.client(&query("PREPARE S1 AS SELECT 2"));
    let sent = h.take_sent(WRITER);
    assert_eq!(
        named(&sent)[..2],
        [('P', "s1".to_string()), ('S', String::new())],
        "the reader's statement mirrored ahead of the PREPARE"
    );
    assert!(tags(&sent).contains('Q'));
}

#[test]
fn e1_f3_after_a_writer_error_a_flush_released_the_rest_of_the_batch_is_skipped_to_its_sync() {
    // The same on the writer: the messages the client sends after the error reach the writer,
    // which skips them to the Sync and answers one RFQ. The engine expected their answers and
    // took the RFQ for a protocol violation (the session was closed).
    for in_txn in [false, true] {
        let mut h = if in_txn { host_in_txn() } else { host() };
        let mut b = parse("s1", "INSERT INTO t VALUES (1/0)");
        b.extend(bind("", "s1"));
        b.extend(execute(""));
        b.extend(flush());
        h.client(&b);
        assert_eq!(tags(&h.take_sent(WRITER)), "PBEH", "in_txn {in_txn}");
        let mut ans = msg(b'1', b"");
        ans.extend(msg(b'2', b""));
        ans.extend(error("ERROR", "22012", "division by zero", None, None));
        h.backend(WRITER, &ans);
        assert_eq!(tags(&h.take_client()), "12E", "in_txn {in_txn}");
        let mut b = parse("s2", "SELECT v FROM t");
        b.extend(bind("", "s2"));
        b.extend(execute(""));
        b.extend(sync());
        h.client(&b);
        assert_eq!(tags(&h.take_sent(WRITER)), "PBES", "in_txn {in_txn}");
        let status = if in_txn { b'E' } else { b'I' };
        h.backend(WRITER, &rfq(status, Some(0x1000), None));
        assert_eq!(
            client_rfq_statuses(&h.take_client()),
            vec![status],
            "in_txn {in_txn}: one RFQ, nothing else"
        );
        // `s2` was skipped: it does not exist, and a Bind of it is the writer's to refuse.
        if in_txn {
            h.client(&query("ROLLBACK"));
            h.writer_answers("ROLLBACK", b'I', Some(0x1000), None);
            h.take_client();
        }
        h.take_sent(WRITER);
        let mut b = bind("", "s2");
        b.extend(execute(""));
        b.extend(sync());
        h.client(&b);
        assert_eq!(
            h.last_decision().reason,
            Reason::BatchUnknownStatement,
            "in_txn {in_txn}"
        );
        assert_eq!(tags(&h.take_sent(WRITER)), "BES", "in_txn {in_txn}");
    }
}

/// A Bind of `stmt` to `portal` with one text parameter of `n` bytes.
fn large_bind(portal: &str, stmt: &str, n: usize) -> Vec<u8> {
    let mut b = format!("{portal}\0{stmt}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(&(n as i32).to_be_bytes());
    b.extend(std::iter::repeat_n(b'x', n));
    b.extend_from_slice(&0i16.to_be_bytes());
    msg(b'B', &b)
}

/// `s1` parsed (and described) in a read batch: it lives on reader R1 only.
fn host_with_s1_on_a_reader_only() -> Host {
    let mut h = Host::new(config(&[("max_inspected_message_bytes", "1024")]));
    h.engine.remove_reader(2);
    h.connect();
    put_s1_on_r1(&mut h, "SELECT length($1::text)", true);
    h.take_sent(WRITER);
    h
}

/// The client parses `s1` as `sql` (and describes it, when `described`) in a read batch of its
/// own, which reader R1 answers: the statement lives there only.
fn put_s1_on_r1(h: &mut Host, sql: &str, described: bool) {
    let mut b = parse("s1", sql);
    if described {
        b.extend(describe(b'S', "s1"));
    }
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    if described {
        ans.extend(msg(b't', &[0, 1, 0, 0, 0, 25]));
        ans.extend(row_description(1));
    }
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    let want = if described { "1tTZ" } else { "1Z" };
    assert_eq!(tags(&h.take_client()), want);
}

/// Feeds `bytes` to the client side cut at `cuts` (bytes may arrive split anywhere).
fn client_in_pieces(h: &mut Host, bytes: &[u8], cuts: &[usize]) {
    let mut at = 0;
    for &c in cuts.iter().chain([&bytes.len()]) {
        if c > at {
            h.client(&bytes[at..c]);
            at = c;
        }
    }
}

/// E-2 (asyncpg's test_standard_codecs through the example proxy, 2026-12-06): a Bind too large
/// to inspect streams to the writer by count; the statement it names lives on a reader only, so
/// the writer gets it first, under the client's name — wherever the client's bytes are cut (in
/// the names too). Before, the engine did not read the name and the writer answered 26000.
#[test]
fn e2_a_bind_too_large_to_inspect_of_a_statement_on_a_reader_only_is_prepared_on_the_writer_first()
{
    for cuts in [&[][..], &[3, 8, 9, 12, 700], &[6, 7]] {
        let mut h = host_with_s1_on_a_reader_only();
        let mut b = large_bind("", "s1", 4000);
        let bind_len = b.len();
        b.extend(execute(""));
        b.extend(sync());
        client_in_pieces(&mut h, &b, cuts);
        // The client was shown s1's row shape: the writer's copy is checked first (E-2).
        let sent = h.take_sent(WRITER);
        assert_eq!(tags(&sent), "PDS", "cuts {cuts:?}");
        assert_eq!(named(&sent)[0], ('P', "s1".to_string()), "cuts {cuts:?}");
        let mut check = msg(b'1', b"");
        check.extend(msg(b't', &[0, 1, 0, 0, 0, 25]));
        check.extend(row_description(1));
        check.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &check);
        assert!(h.take_client().is_empty(), "cuts {cuts:?}");
        let sent = h.take_sent(WRITER);
        assert_eq!(
            &sent[..bind_len],
            &b[..bind_len],
            "the client's Bind as it sent it"
        );
        assert_eq!(tags(&sent), "BES", "cuts {cuts:?}");
        let mut ans = msg(b'2', b"");
        ans.extend(data_row(&["4000"]));
        ans.extend(command_complete("SELECT 1"));
        ans.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &ans);
        assert_eq!(tags(&h.take_client()), "2DCZ", "cuts {cuts:?}");
        assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
        assert!(h.streams.balanced(), "cuts {cuts:?}");
    }
}

/// E-2: a Parse too large to inspect has a text the engine does not read, which may name any
/// statement (`EXECUTE s1`): every statement that lives only on readers is prepared on the
/// writer before it, and the name it parses is the writer's from then on. At the head of a batch
/// they are prepared as before a Query, with a Sync of their own and their answers swallowed: one
/// that fails there now (its table dropped since) is not the client's error.
#[test]
fn e2_a_parse_too_large_to_inspect_has_every_statement_on_a_reader_only_prepared_on_the_writer_first(
) {
    for fails in [false, true] {
        let mut h = host_with_s1_on_a_reader_only();
        let text = format!("EXECUTE s1('a') /* {} */", "x".repeat(3000));
        let mut b = parse("s2", &text);
        b.extend(bind("", "s2"));
        b.extend(execute(""));
        b.extend(sync());
        h.client(&b);
        let sent = h.take_sent(WRITER);
        assert_eq!(
            named(&sent)[..3],
            [
                ('P', "s1".to_string()),
                ('S', String::new()),
                ('P', "s2".to_string())
            ],
            "s1 under the client's name before the large Parse"
        );
        assert_eq!(tags(&sent), "PSPBES");
        let mut ans = if fails {
            error(
                "ERROR",
                "42P01",
                "relation \"t\" does not exist",
                None,
                None,
            )
        } else {
            msg(b'1', b"")
        };
        ans.extend(rfq(b'I', Some(0x1000), None));
        ans.extend(msg(b'1', b""));
        ans.extend(msg(b'2', b""));
        ans.extend(data_row(&["1"]));
        ans.extend(command_complete("SELECT 1"));
        ans.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &ans);
        assert_eq!(
            tags(&h.take_client()),
            "12DCZ",
            "fails {fails}: the hidden answers swallowed"
        );
        // An unread text may have changed the session's state: the capture follows (S-5).
        assert!(sends_capture(&h.take_sent(WRITER)), "fails {fails}");
        // s2's text was not read: a Bind of it is the writer's.
        h.client(&named_execute("s2"));
        assert_eq!(tags(&h.take_sent(WRITER)), "BDES", "fails {fails}");
        assert!(h.streams.balanced());
    }
}

/// E-2: a simple Query too large to inspect may name any statement too.
#[test]
fn e2_a_query_too_large_to_inspect_has_every_statement_on_a_reader_only_prepared_on_the_writer_first(
) {
    let mut h = host_with_s1_on_a_reader_only();
    let text = format!("EXECUTE s1('a') /* {} */", "x".repeat(3000));
    h.client(&query(&text));
    let sent = h.take_sent(WRITER);
    assert_eq!(named(&sent)[0], ('P', "s1".to_string()));
    assert!(
        tags(&sent).starts_with("PSQ"),
        "a hidden Parse and Sync before the Query: {}",
        tags(&sent)
    );
}

/// E-1, E-2: a Close in a batch the server skips whole — sent after an error of an earlier batch
/// that no Sync had ended (a Flush released it), a Query between that the server discards — leaves
/// its statement: the client's next Parse of the name meets it (42P05 on the writer, as on the
/// primary alone). Found by the wire differential test with more reads (2026-12-06, seeds 476 and
/// 478): the engine undid skipped Closes only at the Sync of the batch that saw the error, forgot
/// the statement, and the new Parse was answered ParseComplete on a reader.
#[test]
fn e1_e2_a_close_skipped_after_an_earlier_batchs_error_leaves_the_statement() {
    let mut h = host();
    let mut b = parse("s2", "SELECT v FROM t WHERE k = $1");
    b.extend(bind("", "s2"));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("SELECT 0"));
    ans.extend(rfq(b'I', None, None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "12CZ");
    // A write, then a refused read, ended by a Flush: the writer skips to the next Sync.
    let mut b = parse("", "UPDATE t SET v = 1");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(parse("", "SELECT v FROM nosuch"));
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(flush());
    h.client(&b);
    h.take_sent(WRITER);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("UPDATE 1"));
    ans.extend(error(
        "ERROR",
        "42P01",
        "relation \"nosuch\" does not exist",
        None,
        None,
    ));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12CE");
    h.client(&query("ROLLBACK"));
    let mut b = bind("", "s2");
    b.extend(execute(""));
    b.extend(close(b'S', "s2"));
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    assert!(tags(&sent).ends_with("BECS"), "{}", tags(&sent));
    // Everything up to the Sync skipped: one ReadyForQuery.
    h.backend(WRITER, &rfq(b'I', None, None));
    assert_eq!(tags(&h.take_client()), "Z");
    // s2 still exists where the statement went: a new Parse of the name goes to the writer
    // behind the statement's own (which the writer refuses, 42P05, as the primary alone would).
    let mut b = parse("s2", "SELECT 2");
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "PPS", "{:?}", named(&sent));
    let at = |text: &[u8]| sent.windows(text.len()).position(|w| w == text);
    assert!(
        matches!((at(b"FROM t WHERE"), at(b"SELECT 2")), (Some(a), Some(b)) if a < b),
        "the statement's own Parse first, then the client's: {:?}",
        String::from_utf8_lossy(&sent)
    );
}

/// E-2: a server tells statement names apart by their first 63 bytes (`NAMEDATALEN`): a Parse of
/// a name that shares them with one living only on a reader is a Parse of that name, refused by
/// the writer behind the statement's own Parse, as on the primary alone. Before, the engine
/// compared names whole and parsed the second on a reader, where it succeeded.
#[test]
fn e2_a_parse_of_a_name_sharing_63_bytes_with_one_on_a_reader_is_refused_by_the_writer() {
    let stem = "s".repeat(63);
    let (first, second) = (format!("{stem}A"), format!("{stem}B"));
    let mut h = host();
    let mut b = parse(&first, "SELECT v FROM t");
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "1Z");
    let mut b = parse(&second, "SELECT 2");
    b.extend(sync());
    h.client(&b);
    let names: Vec<(char, String)> = named(&h.take_sent(WRITER))
        .into_iter()
        .map(|(t, n)| (t, n.chars().take(63).collect()))
        .collect();
    assert_eq!(
        names,
        vec![('P', stem.clone()), ('P', stem), ('S', String::new())],
        "a hidden Parse of the reader's statement ahead of the client's"
    );
}

#[test]
fn e2_an_execute_runs_what_its_portal_was_bound_to_not_a_statement_parsed_after() {
    // The unnamed statement parsed again between the portal's Bind and its Execute: the
    // Execute runs the bound SELECT, not the `DEALLOCATE ALL` parsed since, so `s2` (parsed
    // after it) still exists, and a second Parse of `s2` is the writer's to refuse (42P05).
    let mut h = host();
    let mut b = parse("", "SELECT v FROM t WHERE k = $1");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(parse("", "DEALLOCATE ALL"));
    b.extend(execute(""));
    b.extend(parse("s2", "SELECT v FROM t WHERE k = $1"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "PBEPEPS");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("SELECT 0"));
    ans.extend(msg(b'1', b""));
    ans.extend(command_complete("SELECT 0"));
    ans.extend(msg(b'1', b""));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12C1C1Z");
    let mut again = parse("s2", "SELECT v FROM t");
    again.extend(sync());
    h.client(&again);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PS",
        "the writer has s2: its Parse answers 42P05 there"
    );
}

/// `s1`, parsed on reader R1 only (default settings), tracked by the engine.
fn with_s1_on_a_reader() -> Host {
    let mut h = host();
    put_s1_on_r1(&mut h, "SELECT v FROM t WHERE k = $1", false);
    h
}

/// Parse, Bind and Execute of `DEALLOCATE ALL` as the unnamed statement (no Sync).
fn deallocate_all_executed() -> Vec<u8> {
    let mut b = parse("", "DEALLOCATE ALL");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b
}

/// The writer's answers to [`deallocate_all_executed`], then to one Parse and the Sync.
fn deallocate_all_then_parse_answer() -> Vec<u8> {
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("DEALLOCATE ALL"));
    ans.extend(msg(b'1', b""));
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans
}

/// A Parse of `name` (with a Sync) goes to the writer alone: the writer has the statement, and
/// refuses the Parse (42P05) as the primary does.
fn assert_parse_again_is_the_writers(h: &mut Host, name: &str, why: &str) {
    let mut again = parse(name, "SELECT 4");
    again.extend(sync());
    h.client(&again);
    assert_eq!(tags(&h.take_sent(WRITER)), "PS", "{why}");
}

/// E-2: a `DEALLOCATE ALL` executed in an extended batch drops the statements that existed when
/// it ran, not those the same batch parses after it: `s2`, parsed behind it, exists on the
/// writer, and a second Parse of `s2` is the writer's to refuse (42P05). Before, the engine
/// applied the clearing at the batch's ReadyForQuery and forgot `s2` with the rest.
#[test]
fn e2_a_deallocate_all_executed_in_a_batch_keeps_the_statements_parsed_after_it() {
    let mut h = host();
    let mut b = deallocate_all_executed();
    b.extend(parse("s2", "SELECT v FROM t WHERE k = $1"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "PBEPS");
    h.backend(WRITER, &deallocate_all_then_parse_answer());
    assert_eq!(tags(&h.take_client()), "12C1Z");
    assert_parse_again_is_the_writers(
        &mut h,
        "s2",
        "the writer has s2: its Parse answers 42P05 there",
    );
}

/// E-2: a name in use parsed again behind a `DEALLOCATE ALL` of the same batch is a new
/// statement (the server accepts the Parse): the engine tracks the new text under the name,
/// and a later Parse of it is the writer's to refuse.
#[test]
fn e2_a_name_parsed_again_behind_a_deallocate_all_of_its_batch_is_the_new_statement() {
    let mut h = with_s1_on_a_reader();
    let mut b = deallocate_all_executed();
    b.extend(parse("s1", "SELECT 3"));
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    assert!(tags(&sent).ends_with("PBEPS"), "{}", tags(&sent));
    let hidden = tags(&sent).len() - 5;
    let mut ans = Vec::new();
    for _ in 0..hidden {
        ans.extend(msg(b'1', b""));
    }
    ans.extend(deallocate_all_then_parse_answer());
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12C1Z");
    assert_parse_again_is_the_writers(
        &mut h,
        "s1",
        "the writer has the new s1: its Parse answers 42P05 there",
    );
}

/// E-2: a `DEALLOCATE ALL` sent as a Query and a batch the client pipelined behind it: the
/// batch's statement was parsed after the clearing, and survives it.
#[test]
fn e2_a_statement_parsed_behind_a_pipelined_deallocate_all_query_survives_it() {
    let mut h = host();
    let mut b = query("DEALLOCATE ALL");
    b.extend(parse("s2", "SELECT v FROM t WHERE k = $1"));
    b.extend(sync());
    h.client(&b);
    let sent = h.take_sent(WRITER);
    let mut ans = command_complete("DEALLOCATE ALL");
    ans.extend(rfq(b'I', Some(0x1000), None));
    if tags(&sent) == "QPS" {
        ans.extend(msg(b'1', b""));
        ans.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &ans);
    } else {
        assert_eq!(tags(&sent), "Q", "{:?}", named(&sent));
        h.backend(WRITER, &ans);
        h.attach_fresh(R1);
        let sent = tags(&h.take_sent(R1));
        assert!(sent.ends_with("PS"), "{sent}");
        // Hidden SETs (the settings a fresh reader is given) ahead of the client's Parse.
        let mut ans = hidden_sets_answer((sent.len() - 2) / 3);
        ans.extend(msg(b'1', b""));
        ans.extend(rfq(b'I', Some(0x1000), None));
        h.backend(R1, &ans);
    }
    assert_eq!(tags(&h.take_client()), "CZ1Z");
    let mut again = parse("s2", "SELECT v FROM t");
    again.extend(sync());
    h.client(&again);
    let sent = tags(&h.take_sent(WRITER));
    assert!(
        sent.ends_with("PS") && !sent.is_empty(),
        "s2 exists: its Parse answers 42P05 on the writer: {sent}"
    );
}

/// E-2: as above, with the batch behind the Query pipelined on the writer (it writes): its
/// statement is noted before the Query's ReadyForQuery applies the clearing, and survives it.
#[test]
fn e2_a_statement_pipelined_on_the_writer_behind_a_deallocate_all_query_survives_it() {
    let mut h = host();
    let mut b = query("DEALLOCATE ALL");
    b.extend(parse("s2", "INSERT INTO t VALUES ($1)"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "QPS");
    let mut ans = command_complete("DEALLOCATE ALL");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(msg(b'1', b""));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "CZ1Z");
    assert_parse_again_is_the_writers(
        &mut h,
        "s2",
        "s2 exists on the writer: its Parse answers 42P05 there",
    );
}

/// E-2: a Parse of a name in use behind a `DEALLOCATE ALL` that failed was skipped: the
/// statement that has the name stays, and a later Parse of it is refused by the writer.
#[test]
fn e2_a_parse_skipped_behind_a_failed_deallocate_all_leaves_the_statement_it_would_replace() {
    let mut h = with_s1_on_a_reader();
    let mut b = deallocate_all_executed();
    b.extend(parse("s1", "SELECT 3"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "PBEPS");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error(
        "ERROR",
        "25P02",
        "current transaction is aborted",
        None,
        None,
    ));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12EZ");
    let mut again = parse("s1", "SELECT 4");
    again.extend(sync());
    h.client(&again);
    let names = named(&h.take_sent(WRITER));
    assert_eq!(
        names,
        vec![
            ('P', "s1".to_string()),
            ('P', "s1".to_string()),
            ('S', String::new())
        ],
        "s1 still exists: prepared on the writer, where the client's Parse answers 42P05"
    );
}

/// E-2: a Bind behind a `DEALLOCATE ALL` of its batch names a statement that no longer exists:
/// the writer answers it (26000) as the primary alone would. The engine does not prepare the
/// reader's statement on the writer for it first, which made the Bind succeed.
#[test]
fn e2_a_bind_behind_a_deallocate_all_of_its_batch_is_not_given_the_dropped_statement() {
    let mut h = with_s1_on_a_reader();
    let mut b = deallocate_all_executed();
    b.extend(bind("", "s1"));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PBEBES",
        "no hidden Parse of s1 behind the DEALLOCATE ALL"
    );
}

/// E-2: a read batch the client pipelined behind a `DEALLOCATE ALL` Query binds a statement the
/// Query drops: it is the writer's to refuse (26000), never run on the reader that still has it,
/// nor given the statement again by a hidden Parse.
#[test]
fn e2_a_bind_pipelined_behind_a_deallocate_all_query_meets_the_dropped_statement_on_the_writer() {
    let mut h = with_s1_on_a_reader();
    let mut b = query("DEALLOCATE ALL");
    b.extend(bind("", "s1"));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    let mut sent = h.take_sent(WRITER);
    assert!(tags(&sent).starts_with('Q'), "{}", tags(&sent));
    assert!(
        h.take_sent(R1).is_empty(),
        "nothing on the reader before the Query ran"
    );
    let mut ans = command_complete("DEALLOCATE ALL");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    sent.extend(h.take_sent(WRITER));
    assert!(
        h.take_sent(R1).is_empty(),
        "the Bind does not run on the reader"
    );
    assert_eq!(
        named(&sent)
            .into_iter()
            .filter(|(t, _)| *t != 'Q')
            .collect::<Vec<_>>(),
        vec![
            ('B', "s1".to_string()),
            ('E', String::new()),
            ('S', String::new())
        ],
        "the Bind reaches the writer with no Parse of s1 in front"
    );
}

/// E-1, E-2 (examiners' finding of 2026-12-07): extended messages sent without a Sync and a
/// simple Query behind them run in one implicit transaction, which a failure of the Query rolls
/// back whole. A statement that lives only on readers is prepared on the writer before a Query
/// that names it (`DEALLOCATE s1`) or changes how text parses (`SET TimeZone`): there, without
/// a Sync of its own — that Sync committed the INSERT before the Query failed, where the primary
/// alone rolls it back.
#[test]
fn e1_e2_no_hidden_sync_ends_unsynced_extended_messages_before_the_query_behind_them() {
    for (sql, first) in [
        ("DEALLOCATE s1; SELECT 1/0", "DEALLOCATE"),
        ("SET TimeZone = 'Asia/Kolkata'; SELECT 1/0", "SET"),
    ] {
        let mut h = host();
        put_s1_on_r1(&mut h, "SELECT '2020-01-01 00:00'::timestamptz", false);
        let mut b = parse("", "INSERT INTO t VALUES (1)");
        b.extend(bind("", ""));
        b.extend(execute(""));
        b.extend(flush());
        h.client(&b);
        assert_eq!(tags(&h.take_sent(WRITER)), "PBEH", "{sql}");
        let mut ans = msg(b'1', b"");
        ans.extend(msg(b'2', b""));
        ans.extend(command_complete("INSERT 0 1"));
        h.backend(WRITER, &ans);
        assert_eq!(tags(&h.take_client()), "12C", "{sql}");
        h.client(&query(sql));
        let sent = h.take_sent(WRITER);
        assert_eq!(
            tags(&sent),
            "PQ",
            "{sql}: s1 joins the client's batch, no Sync ends it early"
        );
        assert_eq!(named(&sent)[0], ('P', "s1".to_string()), "{sql}");
        let mut ans = msg(b'1', b"");
        ans.extend(command_complete(first));
        ans.extend(error("ERROR", "22012", "division by zero", None, None));
        ans.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &ans);
        assert_eq!(
            tags(&h.take_client()),
            "CEZ",
            "{sql}: the hidden answer swallowed"
        );
        // The Query's RFQ ended the implicit transaction: a capture the SET made due may follow.
        if sends_capture(&h.take_sent(WRITER)) {
            h.backend(WRITER, &capture_answer(&[], None));
        }
        h.client(&sync());
        assert_eq!(tags(&h.take_sent(WRITER)), "S", "{sql}");
        h.backend(WRITER, &rfq(b'I', Some(0x1000), None));
        assert_eq!(tags(&h.take_client()), "Z", "{sql}");
        assert!(h.streams.balanced(), "{sql}");
        assert!(!h.session.is_closed(), "{sql}: {}", h.session.last_error());
    }
}

/// E-2 (examiners' finding of 2026-12-07): in a failed transaction block a Query that changes
/// how text parses is refused (25P02), and so is any Parse: the statement that lives only on
/// readers is not prepared on the writer ahead of it — nor in any block (red10-d), so neither
/// when the SET went before the engine knew the block had failed (pipelined behind the failing
/// statement). Before, the mark stayed: after the ROLLBACK every use of the
/// statement went to the writer without it and got 26000, where the primary alone answers.
#[test]
fn e2_a_statement_on_readers_only_is_not_taken_for_prepared_on_the_writer_by_a_refused_mirror() {
    for pipelined in [false, true] {
        let mut h = host();
        put_s1_on_r1(&mut h, "SELECT '2020-01-01 00:00'::timestamptz", false);
        h.client(&query("BEGIN"));
        assert_eq!(tags(&h.take_sent(WRITER)), "Q");
        h.writer_answers("BEGIN", b'T', None, None);
        assert_eq!(tags(&h.take_client()), "CZ");
        let fails = query("INSERT INTO t VALUES (1/0)");
        let set = query("SET TimeZone = 'Asia/Kolkata'");
        let mut failed = error("ERROR", "22012", "division by zero", None, None);
        failed.extend(rfq(b'E', None, None));
        let mut refused = error(
            "ERROR",
            "25P02",
            "current transaction is aborted, commands ignored until end of transaction block",
            None,
            None,
        );
        refused.extend(rfq(b'E', None, None));
        if pipelined {
            // The SET arrives before the INSERT's error: inside the client's block no mirror
            // goes ahead of it either (red10-d: its locks and its failure would be the block's).
            h.client(&[fails, set].concat());
            let sent = h.take_sent(WRITER);
            assert_eq!(tags(&sent), "QQ");
            h.backend(WRITER, &[failed.clone(), refused].concat());
            assert_eq!(tags(&h.take_client()), "EZEZ");
        } else {
            h.client(&fails);
            assert_eq!(tags(&h.take_sent(WRITER)), "Q");
            h.backend(WRITER, &failed);
            assert_eq!(tags(&h.take_client()), "EZ");
            h.client(&set);
            assert_eq!(
                tags(&h.take_sent(WRITER)),
                "Q",
                "no hidden Parse in a failed block"
            );
            h.backend(WRITER, &refused);
            assert_eq!(tags(&h.take_client()), "EZ");
        }
        h.client(&query("ROLLBACK"));
        assert_eq!(tags(&h.take_sent(WRITER)), "Q", "pipelined {pipelined}");
        h.writer_answers("ROLLBACK", b'I', Some(0x1000), None);
        assert_eq!(tags(&h.take_client()), "CZ");
        // s1 waits for the capture the block's SET made due, sent now.
        h.client(&named_execute("s1"));
        let sent = h.take_sent(WRITER);
        assert!(
            sends_capture(&sent) && !named(&sent).iter().any(|(_, n)| n == "s1"),
            "pipelined {pipelined}: s1 waits for the capture ({})",
            tags(&sent)
        );
        // A capture that finds other settings than those s1 was parsed under (one that finds
        // them the same sends it to a reader: extended_transcripts.rs,
        // e2_s5_a_prepared_read_sent_before_the_capture_answers_waits_for_it): s1 runs on the
        // writer, which gets it first, under the client's name.
        h.backend(
            WRITER,
            &capture_answer(&[("TimeZone", "Asia/Kolkata")], None),
        );
        let sent = h.take_sent(WRITER);
        assert!(
            tags(&sent).ends_with("PBDES") && named(&sent).contains(&('P', "s1".to_string())),
            "pipelined {pipelined}: s1 is prepared on the writer before its Bind ({})",
            tags(&sent)
        );
        assert!(!h.session.is_closed(), "{}", h.session.last_error());
    }
}

/// E-1, E-2: the hidden Parse that joins the client's unsynced batch ahead of its Query fails
/// there (its table dropped since): its error is the batch's — the server skips the Query to the
/// client's Sync, as after an error of the client's own — and the statement is not taken for
/// prepared on the writer.
#[test]
fn e1_e2_a_hidden_parse_failing_inside_the_clients_unsynced_batch_is_the_batchs_error() {
    let mut h = host();
    put_s1_on_r1(&mut h, "SELECT v FROM t WHERE k = '2020-01-01'", false);
    let mut b = parse("", "INSERT INTO t VALUES (1)");
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(flush());
    h.client(&b);
    h.take_sent(WRITER);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("INSERT 0 1"));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12C");
    h.client(&query("EXECUTE s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "PQ");
    h.backend(
        WRITER,
        &error(
            "ERROR",
            "42P01",
            "relation \"t\" does not exist",
            None,
            None,
        ),
    );
    assert_eq!(
        tags(&h.take_client()),
        "E",
        "the batch's error; the Query skipped"
    );
    h.client(&sync());
    assert_eq!(tags(&h.take_sent(WRITER)), "S");
    h.backend(WRITER, &rfq(b'I', Some(0x1000), None));
    assert_eq!(tags(&h.take_client()), "Z");
    assert!(!h.session.is_closed(), "{}", h.session.last_error());
    // s1 was not made on the writer: named there again, it is parsed there first.
    h.client(&query("EXECUTE s1"));
    let sent = h.take_sent(WRITER);
    assert!(
        tags(&sent).ends_with("PSQ") && named(&sent).contains(&('P', "s1".to_string())),
        "{}",
        tags(&sent)
    );
}
