//! E-4: a row-limited Execute of the unnamed portal inside a READ COMMITTED block — asyncpg's
//! `fetchrow`/`fetchval` (Parse/Bind/Execute with a limit of 1, then Sync), pgjdbc with
//! `setMaxRows` — runs on a reader when its batch is otherwise a split, its answers held until
//! the Execute ends. Ran to completion, or suspended with a limit of 1 (every point read ends
//! so: PostgreSQL stops at the limit without looking for another row), its answers are the
//! client's; suspended with a larger limit (rows remain, the portal would have to outlive the
//! batch) or grown past what may be held, the batch runs again on the writer and the client
//! sees only the writer's answers. The same cases run against real servers in
//! tests/e2e/test_e4_row_limited_reads_in_a_block.py.

mod common;

use common::*;
use polarsplit::{ConnId, Lsn, Outcome, Reason};

const R1: ConnId = 731;

/// In a READ COMMITTED block (BEGIN answered on the writer), one reader known caught up.
fn host_in_txn() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.take_client();
    h.take_sent(WRITER);
    h
}

/// asyncpg's `fetchrow` batch: Parse/Bind/Execute(limit)/Sync of the unnamed statement.
fn limited_batch(sql: &str, limit: i32) -> Vec<u8> {
    [
        parse("", sql),
        bind("", ""),
        execute_rows("", limit),
        sync(),
    ]
    .concat()
}

/// Sends `batch` inside the block; returns the tags sent to the reader (none: it went to the
/// writer) after the writer's touch of the block was answered.
fn send_split(h: &mut Host, batch: &[u8]) -> String {
    h.client(batch);
    h.attach_fresh(R1);
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    h.take_sent(WRITER);
    tags(&h.take_sent(R1))
}

fn rows(n: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..n {
        b.extend(data_row(&[&i.to_string()]));
    }
    b
}

#[test]
fn e4_a_limit_1_point_read_in_a_block_runs_on_a_reader_and_its_suspended_row_is_the_clients() {
    // fetchrow('SELECT v FROM t WHERE k = 1'): one row, then PortalSuspended (the executor
    // stops at the limit). Before: BATCH_ROW_LIMITED_IN_TXN, the writer.
    let mut h = host_in_txn();
    let sent = send_split(&mut h, &limited_batch("SELECT v FROM t WHERE k = 1", 1));
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ReplicaWithWait, Reason::SplitPreWrite)
    );
    assert!(sent.ends_with("PBES"), "{sent}");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    h.backend(R1, &ans);
    assert!(
        h.take_client().is_empty(),
        "held until the Execute ends (the batch may still run on the writer)"
    );
    h.backend(R1, &data_row(&["7"]));
    assert!(h.take_client().is_empty(), "the row is held too");
    h.backend(R1, &msg(b's', b""));
    assert_eq!(tags(&h.take_client()), "12Ds");
    h.backend(R1, &rfq(b'I', Some(0x1000), None));
    let out = h.take_client();
    assert_eq!(tags(&out), "Z");
    assert_eq!(client_rfq_statuses(&out), vec![b'T'], "the writer's status");
    assert!(h.take_sent(WRITER).is_empty(), "nothing ran on the writer");
}

#[test]
fn e4_a_row_limited_read_in_a_block_that_runs_to_completion_on_a_reader_is_the_clients() {
    // A limit of 5, three rows: CommandComplete, the portal exhausted — nothing of it has to
    // outlive the batch.
    let mut h = host_in_txn();
    let sent = send_split(&mut h, &limited_batch("SELECT v FROM t", 5));
    assert!(sent.ends_with("PBES"), "{sent}");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(rows(3));
    h.backend(R1, &ans);
    assert!(h.take_client().is_empty());
    let mut ans = command_complete("SELECT 3");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "12DDDCZ");
    assert!(h.take_sent(WRITER).is_empty());
}

#[test]
fn e4_a_row_limited_read_in_a_block_that_suspends_on_a_reader_runs_again_on_the_writer() {
    // pgjdbc-like: a limit of 2 and more rows: the primary keeps the suspended portal for the
    // client's next Execute, a reader's Sync would destroy it. Nothing reached the client: the
    // same batch runs on the writer and the client sees exactly the writer's answers.
    let mut h = host_in_txn();
    let batch = limited_batch("SELECT v FROM t", 2);
    let sent = send_split(&mut h, &batch);
    assert!(sent.ends_with("PBES"), "{sent}");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(rows(2));
    ans.extend(msg(b's', b""));
    h.backend(R1, &ans);
    assert!(h.take_client().is_empty(), "nothing of the reader's");
    assert!(
        h.take_sent(WRITER).is_empty(),
        "the writer waits for the reader's RFQ"
    );
    h.backend(R1, &rfq(b'I', Some(0x1000), None));
    assert!(h.take_client().is_empty(), "the reader's RFQ swallowed");
    assert_eq!(
        h.take_sent(WRITER),
        batch,
        "the client's bytes, to the writer"
    );
    assert_eq!(h.last_decision().reason, Reason::BatchRowLimitedInTxn);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(data_row(&["w1"]));
    ans.extend(data_row(&["w2"]));
    ans.extend(msg(b's', b""));
    let own = ans.clone();
    ans.extend(rfq(b'T', Some(0x1000), Some((b'x', ""))));
    h.backend(WRITER, &ans);
    assert_eq!(
        h.take_client(),
        [own, rfq_plain(b'T')].concat(),
        "exactly the writer's"
    );
    // Its next Execute runs where the portal lives.
    h.client(&[execute_rows("", 2), sync()].concat());
    assert_eq!(h.last_decision().reason, Reason::BatchPortalElsewhere);
    assert_eq!(tags(&h.take_sent(WRITER)), "ES");
}

/// The client's ReadyForQuery as the engine sends it (no extensions asked for).
fn rfq_plain(status: u8) -> Vec<u8> {
    msg(b'Z', &[status])
}

#[test]
fn e4_rows_past_what_may_be_held_run_the_batch_again_on_the_writer() {
    // A limit of 1000 and rows of 1 KB: more than 64 KiB before the Execute ends.
    let mut h = host_in_txn();
    let batch = limited_batch("SELECT v FROM t", 1000);
    let sent = send_split(&mut h, &batch);
    assert!(sent.ends_with("PBES"), "{sent}");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    let wide = "x".repeat(1000);
    for _ in 0..100 {
        ans.extend(data_row(&[&wide]));
    }
    ans.extend(command_complete("SELECT 100"));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert!(h.take_client().is_empty());
    assert_eq!(h.take_sent(WRITER), batch);
}

#[test]
fn e4_an_error_in_a_held_row_limited_read_is_recovered_from_as_any_reader_error() {
    // The reader refuses the statement before its row (F-2: retried on the writer, nothing of
    // the reader's reaches the client).
    let mut h = host_in_txn();
    let batch = limited_batch("SELECT v FROM t WHERE k = 1", 1);
    send_split(&mut h, &batch);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error("ERROR", "22012", "division by zero", None, None));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert!(h.take_client().is_empty(), "nothing of the reader's");
    assert_eq!(h.take_sent(WRITER), batch, "retried on the writer (F-2)");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(error("ERROR", "22012", "division by zero", None, None));
    ans.extend(rfq(b'E', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12EZ", "the writer's answers");
}

#[test]
fn e4_what_stays_on_the_writer_in_a_block() {
    // A named portal (pgjdbc's fetchSize cursors, C_1), a limit above 1000, a row-limited
    // Execute that is not the batch's first, one of a portal bound in an earlier batch, and a
    // batch a Flush routes (its answers cannot be held).
    let cases: [(&str, Vec<u8>); 4] = [
        (
            "named portal",
            [
                parse("", "SELECT v FROM t"),
                bind("C_1", ""),
                execute_rows("C_1", 1),
                sync(),
            ]
            .concat(),
        ),
        ("limit above 1000", limited_batch("SELECT v FROM t", 1001)),
        (
            "not the first Execute",
            [
                parse("", "SELECT v FROM t"),
                bind("", ""),
                execute(""),
                bind("", ""),
                execute_rows("", 1),
                sync(),
            ]
            .concat(),
        ),
        (
            "Flush",
            [
                parse("", "SELECT v FROM t"),
                bind("", ""),
                execute_rows("", 1),
                flush(),
            ]
            .concat(),
        ),
    ];
    for (case, batch) in cases {
        let mut h = host_in_txn();
        h.client(&batch);
        assert_eq!(
            (h.last_decision().outcome, h.last_decision().reason),
            (Outcome::ForcePrimary, Reason::BatchRowLimitedInTxn),
            "{case}"
        );
    }
}

#[test]
fn e4_outside_a_block_a_row_limited_read_is_forwarded_as_it_comes() {
    // Outside a block the portal dies at the Sync on the primary too: nothing is held, and a
    // suspended portal is the client's answer (unchanged).
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.client(&limited_batch("SELECT v FROM t", 2));
    h.attach_fresh(R1);
    assert_ne!(h.last_decision().outcome, Outcome::ForcePrimary);
    h.take_sent(R1);
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(data_row(&["1"]));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "12D", "the result began: forwarded");
    let mut ans = data_row(&["2"]);
    ans.extend(msg(b's', b""));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "DsZ");
    assert!(h.take_sent(WRITER).is_empty());
}

/// E-4 with asyncpg's `statement_cache_size=0` (what runs behind pgbouncer): `fetchrow` in a
/// transaction sends Parse/Describe/Flush of the unnamed statement, then Parse (the same text
/// again)/Bind/Execute(limit 1)/Sync. The first part went to a reader; the second's Parse joined
/// it and was answered by the engine (already prepared there), but that answer was left queued
/// behind nothing: when the row-limited Execute could not follow and a hidden Sync closed the
/// part, the reader's ReadyForQuery met the engine's own answer at the front, the reader was
/// taken as broken and the client's block aborted with 55000 — its COMMIT answered ROLLBACK
/// (an examiner's finding of 2026-12-05, 10/10). Now the ParseComplete goes out at once, and the
/// rest of the batch is routed anew as a batch of its own.
#[test]
fn e4_a_reparse_joining_a_flushed_part_then_a_row_limited_execute_is_answered() {
    let mut h = host_in_txn();
    let mut first = parse("", "SELECT v FROM t WHERE k = $1");
    first.extend(describe(b'S', ""));
    first.extend(flush());
    h.client(&first);
    h.attach_fresh(R1);
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    h.take_sent(WRITER);
    assert_eq!(tags(&h.take_sent(R1)).trim_start_matches('Q'), "PDH");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
    ans.extend(row_description(1));
    h.backend(R1, &ans);
    assert_eq!(tags(&h.take_client()), "1tT");
    h.client(&limited_batch("SELECT v FROM t WHERE k = $1", 1));
    // The Parse is answered at once; the part is closed by the engine's Sync.
    assert_eq!(tags(&h.take_client()), "1");
    assert_eq!(tags(&h.take_sent(R1)), "S");
    h.backend(R1, &rfq(b'I', Some(0x1000), None));
    // The rest runs as a batch of its own on the reader.
    assert_eq!(tags(&h.take_sent(R1)), "BES");
    let mut ans = msg(b'2', b"");
    ans.extend(data_row(&["7"]));
    ans.extend(msg(b's', b""));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &ans);
    let client = h.take_client();
    assert_eq!(tags(&client), "2DsZ");
    assert_eq!(
        client_rfq_statuses(&client),
        vec![b'T'],
        "still in the block"
    );
}
