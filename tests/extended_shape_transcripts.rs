//! E-2 and the row shape of a prepared statement, as protocol traces: a server refuses to run a
//! prepared statement whose result type changed since it was parsed (0A000 "cached plan must
//! not change result type"), because its client decodes rows by the description it was shown.
//! Where the engine prepares the client's statement again on another connection (a hidden
//! Parse), it learns the new shape first and answers as the primary would: the refusal where
//! the shape changed, the statement's rows where it did not.

mod common;

use common::*;
use polarsplit::{ConnId, Outcome, Reason};
use polarsplit_test_support::be::{self, oid, Column};

const R1: ConnId = 701;
const R2: ConnId = 702;
const FLOAT8: u32 = 701;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

/// A RowDescription of one column `a` of type `type_oid`.
fn shape(type_oid: u32) -> Vec<u8> {
    be::row_description(&[Column::new("a", type_oid)])
}

/// The answer to a Parse/Describe-statement/Sync (or the engine's check: Parse/Describe/Sync)
/// of `SELECT a FROM t`: ParseComplete, no parameters, the row shape, RFQ.
fn described(type_oid: u32, status: u8, lsn: u64) -> Vec<u8> {
    let mut b = msg(b'1', b"");
    b.extend(msg(b't', &[0, 0]));
    b.extend(shape(type_oid));
    b.extend(rfq(status, Some(lsn), None));
    b
}

/// The answer to Bind/Describe-portal/Execute/Sync with one row in `type_oid`'s shape.
fn rows(type_oid: u32, status: u8, lsn: u64) -> Vec<u8> {
    let mut b = msg(b'2', b"");
    b.extend(shape(type_oid));
    b.extend(data_row(&["1"]));
    b.extend(command_complete("SELECT 1"));
    b.extend(rfq(status, Some(lsn), None));
    b
}

/// The SQLSTATEs of the ErrorResponses in a stream to the client.
fn sqlstates(bytes: &[u8]) -> Vec<String> {
    messages(bytes)
        .into_iter()
        .filter(|(t, _)| *t == b'E')
        .filter_map(|(_, body)| {
            body.split(|&b| b == 0)
                .find_map(|f| f.strip_prefix(b"C"))
                .map(|c| String::from_utf8_lossy(c).into_owned())
        })
        .collect()
}

/// asyncpg's prepare: `s1` is parsed and described on a reader, where it lives under an engine
/// name; the client is shown `a` as a bigint.
fn prepared_on_a_reader(h: &mut Host) {
    let mut b = parse("s1", "SELECT a FROM t");
    b.extend(describe(b'S', "s1"));
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(tags(&h.take_sent(R1)), "PDS");
    h.backend(R1, &described(oid::INT8, b'I', 0x1000));
    assert_eq!(tags(&h.take_client()), "1tTZ");
}

/// A transaction block that wrote: its reads stay on the writer, where `s1` does not exist.
fn in_a_writing_transaction(h: &mut Host) {
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), None);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x2000), None);
    h.take_client();
    h.take_sent(WRITER);
}

#[test]
fn e2_a_statement_prepared_again_with_a_changed_result_type_fails_0a000() {
    let mut h = host();
    prepared_on_a_reader(&mut h);
    in_a_writing_transaction(&mut h);
    // (Meanwhile `a` became double precision.) The statement runs on the writer: it is
    // checked there before the client's Bind is sent.
    h.client(&named_execute("s1"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    let sent = h.take_sent(WRITER);
    assert_eq!(
        named(&sent),
        vec![
            ('P', "s1".to_string()),
            ('D', "s1".to_string()),
            ('S', String::new())
        ],
        "the check: a hidden Parse under the client's name, Describe, Sync"
    );
    h.backend(WRITER, &described(FLOAT8, b'T', 0x2000));
    assert!(
        h.take_client().is_empty(),
        "the check's answers never reach the client"
    );
    // The shape is not the one the client was shown: the client's Bind is preceded by a
    // Close of the new statement and a Parse that fails, so the server itself skips the batch
    // to its Sync (and fails the transaction block, as the primary's error would).
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "CPBDES");
    assert_eq!(named(&sent)[0], ('C', "s1".to_string()));
    assert_eq!(named(&sent)[1], ('P', "polarsplit_refused".to_string()));
    let mut ans = msg(b'3', b"");
    ans.extend(error(
        "ERROR",
        "42601",
        "syntax error at or near \"polarsplit\"",
        None,
        None,
    ));
    ans.extend(rfq(b'E', Some(0x2000), None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ", "the primary's answer: its error, its RFQ");
    assert_eq!(sqlstates(&got), vec!["0A000"]);
    assert!(String::from_utf8_lossy(&got).contains("cached plan must not change result type"));
    // With the server's routine: pgjdbc and asyncpg prepare the statement again only after a
    // 0A000 from RevalidateCachedQuery (an examiner's finding, 2026-12-05).
    assert!(got.windows(22).any(|w| w == b"RRevalidateCachedQuery"));
    assert_eq!(client_rfq_statuses(&got), vec![b'E']);
    // The primary refuses it every time: so does the engine (the statement was closed on the
    // writer, so it is checked again — the primary would run it again once the shapes agree).
    h.client(&query("ROLLBACK"));
    h.writer_answers("ROLLBACK", b'I', Some(0x2000), None);
    h.take_client();
    h.take_sent(WRITER);
    in_a_writing_transaction(&mut h);
    h.client(&named_execute("s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS");
    h.backend(WRITER, &described(FLOAT8, b'T', 0x2000));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBDES");
    h.backend(WRITER, &ans);
    assert_eq!(sqlstates(&h.take_client()), vec!["0A000"]);
    assert!(h.streams.balanced());
}

#[test]
fn e2_a_statement_prepared_again_with_the_same_result_type_runs_normally() {
    let mut h = host();
    prepared_on_a_reader(&mut h);
    in_a_writing_transaction(&mut h);
    h.client(&named_execute("s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS", "the check");
    h.backend(WRITER, &described(oid::INT8, b'T', 0x2000));
    assert!(h.take_client().is_empty());
    // The same shape: the client's batch follows, the statement prepared by the check.
    assert_eq!(tags(&h.take_sent(WRITER)), "BDES");
    h.backend(WRITER, &rows(oid::INT8, b'T', 0x2000));
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    // The writer has it now: no check, no hidden Parse.
    h.client(&named_execute("s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "BDES");
    h.backend(WRITER, &rows(oid::INT8, b'T', 0x2000));
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    assert!(h.streams.balanced());
}

#[test]
fn e2_a_check_whose_parse_fails_lets_that_error_answer_the_clients_message() {
    // The table is gone: the primary's statement fails to re-plan with the same error the
    // hidden Parse gets, and it answers in the place of the client's Bind.
    let mut h = host();
    prepared_on_a_reader(&mut h);
    in_a_writing_transaction(&mut h);
    h.client(&named_execute("s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS");
    let mut ans = error(
        "ERROR",
        "42P01",
        "relation \"t\" does not exist",
        None,
        None,
    );
    ans.extend(rfq(b'E', Some(0x2000), None));
    h.backend(WRITER, &ans);
    assert!(h.take_client().is_empty());
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "PBDES", "prepared before its Bind, as before");
    let mut ans = error(
        "ERROR",
        "25P02",
        "current transaction is aborted",
        None,
        None,
    );
    ans.extend(rfq(b'E', Some(0x2000), None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert_eq!(sqlstates(&got), vec!["25P02"]);
    assert!(h.streams.balanced());
}

#[test]
fn e2_a_statement_prepared_again_on_another_reader_with_a_changed_result_type_is_the_writers() {
    // `s1` was described on R1; its next run lands on R2, which has not prepared it: the
    // hidden Parse there is followed by a hidden Describe. Another shape there fails the
    // attempt before anything reached the client, and the writer answers — here, as the
    // primary does, with the refusal.
    let mut h = host();
    prepared_on_a_reader(&mut h);
    h.client(&named_execute("s1"));
    h.attach_fresh(R2);
    let sent = h.take_sent(R2);
    assert_eq!(tags(&sent), "PDBDES");
    let engine = named(&sent)[0].1.clone();
    assert!(engine.starts_with("polarsplit_s_"));
    assert_eq!(named(&sent)[1], ('D', engine));
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 0]));
    ans.extend(shape(FLOAT8));
    ans.extend(rows(FLOAT8, b'I', 0x1000));
    let acts = h.backend(R2, &ans);
    assert!(
        h.take_client().is_empty(),
        "nothing of the attempt is shown"
    );
    // R2 holds the engine's statement in the new shape now: never reused, where its next run
    // would need no Parse and so no check (an examiner's finding, 2026-12-05).
    assert!(acts.contains(&A::CloseBackend(R2)), "{acts:?}");
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS", "the check on the writer");
    h.backend(WRITER, &described(FLOAT8, b'I', 0x1000));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBDES");
    let mut ans = msg(b'3', b"");
    ans.extend(error("ERROR", "42601", "syntax error", None, None));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert_eq!(sqlstates(&got), vec!["0A000"]);
    assert_eq!(client_rfq_statuses(&got), vec![b'I']);
    assert!(h.streams.balanced());
}

#[test]
fn e2_a_statement_prepared_again_on_another_reader_with_the_same_result_type_runs_there() {
    let mut h = host();
    prepared_on_a_reader(&mut h);
    h.client(&named_execute("s1"));
    h.attach_fresh(R2);
    assert_eq!(tags(&h.take_sent(R2)), "PDBDES");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 0]));
    ans.extend(shape(oid::INT8));
    ans.extend(rows(oid::INT8, b'I', 0x1000));
    h.backend(R2, &ans);
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    assert!(h.take_sent(WRITER).is_empty(), "nothing for the writer");
    assert!(h.streams.balanced());
}

#[test]
fn e2_the_shape_is_learned_from_a_portal_describe_too() {
    // libpq's PQprepare sends no Describe: the client is first shown the shape by the Describe
    // of the portal its first PQexecPrepared binds.
    let mut h = host();
    let mut b = parse("s1", "SELECT a FROM t");
    b.extend(sync());
    h.client(&b);
    h.attach_fresh(R1);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    h.client(&named_execute("s1"));
    h.attach(R1);
    assert_eq!(tags(&h.take_sent(R1)), "BDES");
    h.backend(R1, &rows(oid::INT8, b'I', 0x1000));
    assert_eq!(tags(&h.take_client()), "1Z2TDCZ");
    in_a_writing_transaction(&mut h);
    h.client(&named_execute("s1"));
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PDS",
        "checked: its shape was learned"
    );
    h.backend(WRITER, &described(FLOAT8, b'T', 0x2000));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBDES");
}

#[test]
fn e2_the_shape_is_learned_behind_a_fresh_readers_settings_replay_and_asyncpgs_flush() {
    // asyncpg's prepare is Parse/Describe/Flush, its first run Bind/Execute/Sync joining that
    // batch; the reader is fresh, and the session has login-time settings: its messages follow
    // the settings replay's answer (found through the example proxy: the replay's
    // ReadyForQuery ended the unit's shape notes just made).
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, polarsplit::Event::WriterConnected);
    h.backend(WRITER, &polarsplit_test_support::host::writer_auth(&[]));
    h.writer_answers_startup_capture(&[("datestyle", "ISO, DMY")]);
    h.take_client();
    let mut b = parse("s1", "SELECT a FROM t");
    b.extend(describe(b'S', "s1"));
    b.extend(flush());
    h.client(&b);
    h.attach_fresh(R1);
    assert_eq!(tags(&h.take_sent(R1)), "Q", "the settings replay first");
    let mut replay = row_description(1);
    replay.extend(data_row(&["ISO, DMY"]));
    replay.extend(command_complete("SELECT 1"));
    replay.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &replay);
    assert_eq!(tags(&h.take_sent(R1)), "PDH");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 0]));
    ans.extend(shape(oid::INT8));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "1tT");
    let mut b = bind("", "s1");
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(R1)), "BES");
    let mut ans = msg(b'2', b"");
    ans.extend(data_row(&["1"]));
    ans.extend(command_complete("SELECT 1"));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "2DCZ");
    in_a_writing_transaction(&mut h);
    let mut b = bind("", "s1");
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PDS",
        "checked: its shape was learned"
    );
    h.backend(WRITER, &described(FLOAT8, b'T', 0x2000));
    assert_eq!(tags(&h.take_sent(WRITER)), "CPBES");
    let mut ans = msg(b'3', b"");
    ans.extend(error("ERROR", "42601", "syntax error", None, None));
    ans.extend(rfq(b'E', Some(0x2000), None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    assert_eq!(sqlstates(&got), vec!["0A000"]);
    assert_eq!(tags(&got), "EZ");
    assert!(h.streams.balanced());
}

/// S-6/S-7/F-policy for a prepared statement (an examiner's probe, 2026-12-05): the server
/// plans it again after DDL on what it names, so its verdict is finished again too — DDL keeps
/// it on the writer like any read of the database until the next catalogue report, and that
/// report, which may say what the DDL made of the view, judges it afresh. Before, the verdict
/// of its Parse held for the connection's life: a view made to read `pg_is_in_recovery()` ran
/// on the standby.
#[test]

fn s6_a_prepared_statements_verdict_follows_ddl_and_the_next_catalogue_report() {
    let mut h = host();
    let e = h.engine.clone();
    e.set_function_catalog(b"db", []).unwrap();
    prepared_on_a_reader(&mut h);
    h.client(&query("CREATE OR REPLACE VIEW t AS SELECT 1::int8 AS a"));
    h.writer_answers("CREATE VIEW", b'I', Some(0x2000), None);
    h.take_client();
    h.take_sent(WRITER);
    h.client(&named_execute("s1"));
    // (A Bind of a statement that is not a read tells `NOT_A_READ`.)
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "PDS",
        "checked on the writer first (E-2)"
    );
    h.backend(WRITER, &described(oid::INT8, b'I', 0x2000));
    assert_eq!(tags(&h.take_sent(WRITER)), "BDES");
    h.backend(WRITER, &rows(oid::INT8, b'I', 0x2000));
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    // The host's next load reports the database: the statement is a plain read again.
    e.catalog_load_started(b"db");
    e.set_function_catalog(b"db", []).unwrap();
    h.engine.reader_sample(1, polarsplit::Lsn(0x2000), h.now);
    let acts = h.client(&named_execute("s1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_ne!(h.last_decision().reason, Reason::CatalogChanged);
}

/// The same for a read queued behind the DDL in one input (a pipeline): it was classified when
/// it arrived, before the DDL's answer; it is finished again before it is routed.
#[test]
fn s6_a_read_pipelined_behind_ddl_is_judged_after_it() {
    let mut h = host();
    let e = h.engine.clone();
    e.set_function_catalog(b"db", []).unwrap();
    let mut b = parse(
        "",
        "CREATE OR REPLACE VIEW v AS SELECT pg_is_in_recovery() AS a",
    );
    b.extend(bind("", ""));
    b.extend(execute(""));
    b.extend(sync());
    b.extend(parse("", "SELECT a FROM v"));
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(command_complete("CREATE VIEW"));
    ans.extend(rfq(b'I', Some(0x2000), None));
    let mut acts = h.backend(WRITER, &ans);
    h.engine.reader_sample(1, polarsplit::Lsn(0x2000), h.now);
    h.engine
        .writer_sample(0, polarsplit::Lsn(0x2000), h.now + 1);
    h.now += 2;
    acts.extend(h.timeout());
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::CatalogChanged),
        "{d:?}"
    );
}

/// E-2: a batch waiting for the check of its statement's shape on the writer still waits when
/// something else makes the session route its queue again before the check's answer (here the
/// host's timer; in an examiner's run the answer of the probe sent before it). Sending the check
/// marks the statement prepared on the writer, and the batch went on without the check: the
/// statement ran there in its new shape, where the primary answers 0A000
/// (`test_red1_findings.py`'s result-type case).
#[test]
fn e2_a_batch_waits_for_the_shape_check_whatever_else_routes_the_queue() {
    let mut h = host();
    prepared_on_a_reader(&mut h);
    in_a_writing_transaction(&mut h);
    h.client(&named_execute("s1"));
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS", "the check alone");
    h.timeout();
    assert!(
        h.take_sent(WRITER).is_empty(),
        "nothing of the batch before the check answered"
    );
    h.backend(WRITER, &described(FLOAT8, b'T', 0x2000));
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "CPBDES",
        "refused, as the primary refuses it"
    );
}

/// A reader's answer to Close/Parse/Describe-statement/Bind/Describe/Execute/Sync of `SELECT a
/// FROM t` prepared there again: CloseComplete, ParseComplete, no parameters, the row shape, then
/// [`rows`].
fn prepared_then_rows(lsn: u64) -> Vec<u8> {
    let mut a = msg(b'3', b"");
    a.extend(msg(b'1', b""));
    a.extend(msg(b't', &[0, 0]));
    a.extend(shape(oid::INT8));
    a.extend(rows(oid::INT8, b'I', lsn));
    a
}

/// E-2: a statement the writer parsed keeps the names it resolved then — a server does not
/// look again when a table is created earlier on the search_path or a closer overload of a
/// function it calls appears — where a reader would parse it afresh. After DDL (the session's
/// own, and so after the catalogue report that follows it) it runs on the writer, where its
/// parse is (an examiner's finding, 2026-12-07: 6 of 6 reads answered from a shadowing table on
/// the standby). A statement parsed after the DDL goes to readers as before.
#[test]
fn e2_a_statement_the_writer_parsed_before_ddl_runs_on_the_writer() {
    let mut h = host();
    let e = h.engine.clone();
    e.set_function_catalog(b"db", []).unwrap();
    h.engine.reader_sample(1, polarsplit::Lsn(0x9000), h.now);
    in_a_writing_transaction(&mut h);
    let mut b = parse("s1", "SELECT a FROM t");
    b.extend(describe(b'S', "s1"));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_sent(WRITER)), "PDS", "parsed on the writer");
    h.backend(WRITER, &described(oid::INT8, b'T', 0x2000));
    h.take_client();
    h.client(&query("COMMIT"));
    h.writer_answers("COMMIT", b'I', Some(0x2000), None);
    h.take_client();
    h.take_sent(WRITER);
    // Before any DDL: a read for the reader, as every prepared read.
    let acts = h.client(&named_execute("s1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(tags(&h.take_sent(R1)), "CPDBDES", "prepared there first");
    h.backend(R1, &prepared_then_rows(0x2000));
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    // Another session's temporary table is its own: the statement still reads on readers.
    let mut other = Host::on(&e, h.now);
    other.connect();
    other.client(&query("CREATE TEMP TABLE scratch (a int)"));
    other.writer_answers("CREATE TABLE", b'I', Some(0x2100), None);
    // Nor does a statement the engine cannot read (a LATIN1 client's text): it marks the
    // catalogue changed, but is not counted as DDL of names.
    let mut third = Host::on(&e, h.now);
    third.connect();
    third.client(&msg(b'Q', b"SELECT 'caf\xe9'\0"));
    third.writer_answers("SELECT 1", b'I', Some(0x2100), None);
    // Nor does an index with a predicate: it changes what the catalogue reports of its table
    // (red10-b), not what a name resolves to.
    let mut fourth = Host::on(&e, h.now);
    fourth.connect();
    fourth.client(&query("CREATE INDEX i ON t (a) WHERE a > 0"));
    fourth.writer_answers("CREATE INDEX", b'I', Some(0x2100), None);
    e.catalog_load_started(b"db");
    e.set_function_catalog(b"db", []).unwrap();
    let acts = h.client(&named_execute("s1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(tags(&h.take_sent(R1)), "CPDBDES", "prepared again there");
    h.backend(R1, &prepared_then_rows(0x2100));
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    // DDL, and the catalogue report after it.
    h.client(&query("CREATE TABLE s.t (a int8)"));
    h.writer_answers("CREATE TABLE", b'I', Some(0x3000), None);
    h.take_client();
    h.take_sent(WRITER);
    e.catalog_load_started(b"db");
    e.set_function_catalog(b"db", []).unwrap();
    h.engine.reader_sample(1, polarsplit::Lsn(0x9000), h.now);
    let acts = h.client(&named_execute("s1"));
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.last_decision().reason, Reason::StatementResolvedBeforeDdl);
    assert_eq!(tags(&h.take_sent(WRITER)), "BDES");
    h.backend(WRITER, &rows(oid::INT8, b'I', 0x3000));
    h.take_client();
    // Parsed again after the DDL: a reader's parse is the writer's now.
    let mut b = parse("s2", "SELECT a FROM t");
    b.extend(describe(b'S', "s2"));
    b.extend(sync());
    let acts = h.client(&b);
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(tags(&h.take_sent(R1)), "CPDS");
    let mut a = msg(b'3', b"");
    a.extend(described(oid::INT8, b'I', 0x3000));
    h.backend(R1, &a);
    h.take_client();
    let acts = h.client(&named_execute("s2"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}
