//! Transcript tests of reads inside open transactions (SPEC S-3, P-5, P-7, P-8, W-3, W-7).

mod common;

use common::*;
use polarsplit::Counter;
use polarsplit::Lsn;
use polarsplit::ServerDialect;
use polarsplit::{Event, Outcome, Reason};

const R1: u64 = 301;
const R2: u64 = 302;

fn host_with(dialect: ServerDialect) -> Host {
    let mut h = Host::new(config(&[("server_dialect", dialect.as_str())]));
    h.connect();
    h
}

/// BEGIN on the writer; its RFQ carries `marker` (awide: 'x' with an empty list). Its LSN
/// becomes the session's observed LSN (P-6); both readers are known (fresh monitor samples) to
/// have replayed it, so reads before the first write need no wait.
fn begin(h: &mut Host, sql: &str, marker: Option<(u8, &str)>) {
    h.client(&query(sql));
    h.writer_answers("BEGIN", b'T', Some(0x1000), marker);
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.engine.reader_sample(2, Lsn(0x1000), h.now);
    h.take_client();
}

fn acquired_server(h: &Host) -> u32 {
    h.log
        .iter()
        .rev()
        .find_map(|a| match a {
            A::Acquire { server, .. } => Some(*server),
            _ => None,
        })
        .expect("an AcquireReader")
}

fn acquired(acts: &[A]) -> bool {
    acts.iter().any(|a| matches!(a, A::Acquire { .. }))
}

/// The reader answers `hidden` SETs, one row, and an RFQ (`I`: readers are in autocommit).
fn reader_rows(h: &mut Host, conn: u64, hidden: usize, replay: u64) -> Vec<A> {
    let mut b = Vec::new();
    for _ in 0..hidden {
        b.extend(command_complete("SET"));
    }
    b.extend(select_result(&["v"]));
    b.extend(rfq(b'I', Some(replay), None));
    h.backend(conn, &b)
}

#[test]
fn p5_pre_write_read_goes_to_a_reader_and_the_client_sees_the_writer_status() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    let acts = h.client(&query("SELECT v FROM t WHERE k = 1"));
    assert!(acquired(&acts));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.import, d.wait),
        (
            Outcome::ReplicaWithWait,
            Reason::SplitPreWrite,
            false,
            false
        )
    );
    assert_eq!(h.take_sent(R1), query("SELECT v FROM t WHERE k = 1"));
    let acts = reader_rows(&mut h, R1, 0, 0x1100);
    // Pinned for the transaction: not released.
    assert!(!acts.iter().any(|a| matches!(a, A::Release { .. })));
    assert_eq!(h.session.pinned_reader(), Some(R1));
    // P-8: the writer's status, T, not the reader's I.
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'T']);
    // The writer connection was never touched by the read.
    assert!(h.take_sent(WRITER).starts_with(&query("BEGIN")));
}

#[test]
fn p5_split_after_a_write_imports_xids_in_the_fixed_order_then_reuses_the_pin() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    h.attach(R1);
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x1100);
    h.take_sent(R1);
    h.client(&query("INSERT INTO t VALUES (1, 1)"));
    h.writer_answers(
        "INSERT 0 1",
        b'T',
        Some(97_500_059_720),
        Some((b'x', "1,1234,5678")),
    );
    h.take_client();
    // Same pinned reader, no AcquireReader.
    let acts = h.client(&query("SELECT v FROM t WHERE k = 1"));
    assert!(!acquired(&acts), "{acts:?}");
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["SET polar_xact_split_xids = '1,1234,5678'; SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 5000; SET polar_xact_split_wait_lsn = '97500059720'; SELECT v FROM t WHERE k = 1".to_string()]
    );
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.import, d.wait),
        (Outcome::ReplicaTxnSplit, Reason::SplitRead, true, true)
    );
    reader_rows(&mut h, R1, 4, 97_500_060_000);
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(client_rfq_statuses(&got), vec![b'T']);
    // P-7: the pinned reader reported a replay past the target: the next split skips the wait.
    h.client(&query("SELECT v FROM t WHERE k = 2"));
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["SET polar_xact_split_xids = '1,1234,5678'; SELECT v FROM t WHERE k = 2".to_string()]
    );
    reader_rows(&mut h, R1, 1, 97_500_060_000);
    // COMMIT on the writer releases the pin; awide keeps the import, so it needs a reset.
    h.client(&query("COMMIT"));
    let acts = h.writer_answers("COMMIT", b'I', Some(97_500_070_000), None);
    assert!(
        acts.contains(&A::Release {
            conn: R1,
            needs_reset: true
        }),
        "{acts:?}"
    );
    assert_eq!(h.session.pinned_reader(), None);
    assert_eq!(h.engine.stats().get(Counter::SplitServed), 3);
}

#[test]
fn p7_dirty_reader_is_reset_before_it_serves_again() {
    let mut h = host_with(ServerDialect::Awide);
    h.client(&query("SELECT 1"));
    let server = acquired_server(&h);
    h.event(
        R1,
        Event::ReaderAttached {
            server,
            fresh: false,
            needs_reset: true,
        },
    );
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["SET polar_xact_split_xids = ''; SELECT 1".to_string()]
    );
    reader_rows(&mut h, R1, 1, 0x1000);
    let acts = h.log.clone();
    assert!(acts.contains(&A::Release {
        conn: R1,
        needs_reset: false
    }));
    assert_eq!(tags(&h.take_client()), "TDCZ");
}

#[test]
fn p5_each_check_refuses_in_order() {
    // Repeatable read.
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN ISOLATION LEVEL REPEATABLE READ", None);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitIsolation);
    // Serializable by session default.
    let mut h = host_with(ServerDialect::Awide);
    h.client(&query(
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    ));
    h.writer_answers("SET", b'I', Some(0x900), None);
    // S-5: the session default comes back with the capture of the writer's state.
    h.backend(
        WRITER,
        &capture_answer(&[("default_transaction_isolation", "serializable")], None),
    );
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitIsolation);
    // A SET in the transaction before the first write.
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SET LOCAL search_path = other"));
    h.writer_answers("SET", b'T', Some(0x1000), Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitSetInTxn);
    // No marker and not a known read-only prefix (LOCK TABLE).
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("LOCK TABLE t"));
    h.writer_answers("LOCK TABLE", b'T', Some(0x1000), None);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitNoMarker);
    // 'w' without a reader known past the transaction's LSN.
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x5000), Some((b'w', "1,900")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitWalPending);
    // ... and with one: the split is admitted.
    h.writer_answers("SELECT 1", b'T', Some(0x5000), Some((b'w', "1,900")));
    h.engine.reader_sample(2, Lsn(0x6000), h.now);
    let acts = h.client(&query("SELECT 2"));
    assert!(acquired(&acts), "{acts:?}");
    h.attach(R2);
    assert_eq!(h.last_decision().reason, Reason::SplitRead);
    // Split disabled.
    let mut h = Host::new(config(&[("txn_split", "off")]));
    h.connect();
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitDisabled);
}

#[test]
fn w3_hostile_xid_lists_never_reach_sql() {
    for list in [
        "1,2; DROP TABLE x",
        "1, 2",
        "-1,2",
        "+1,2",
        "1,99999999999999999999",
        "1",
    ] {
        let mut h = host_with(ServerDialect::Awide);
        begin(&mut h, "BEGIN", Some((b'x', "")));
        h.client(&query("INSERT INTO t VALUES (1)"));
        h.writer_answers("INSERT 0 1", b'T', Some(0x5000), Some((b'x', list)));
        h.client(&query("SELECT 1"));
        assert_eq!(h.last_decision().reason, Reason::SplitInvalidXids, "{list}");
        let sent = String::from_utf8_lossy(&h.take_sent(WRITER)).into_owned();
        assert!(!sent.contains("polar_xact_split_xids"), "{list}");
    }
    let big = "1,".repeat(5 * 1024) + "2";
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x5000), Some((b'x', &big)));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitInvalidXids);
}

#[test]
fn w7_polardb_prefix_without_marker_and_split_without_wait() {
    let mut h = host_with(ServerDialect::PolarDb);
    // polardb sends no marker before the first XID: the engine's own classification proves the
    // read-only prefix.
    begin(&mut h, "BEGIN", None);
    let acts = h.client(&query("SELECT 1"));
    assert!(acquired(&acts));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    assert_eq!(h.take_sent(R1), query("SELECT 1"));
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x1200);
    // After a write: only the XID SET, only to a reader known past the transaction's LSN.
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x8000), Some((b'x', "1,733")));
    h.client(&query("SELECT v FROM t"));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::SplitNoCaughtUpReader)
    );
    h.writer_answers("SELECT 1", b'T', Some(0x8000), Some((b'x', "1,733")));
    // A fresh monitor sample shows the pinned reader past the LSN (P-7 may use it as well as
    // the pin's own RFQ, which said 0x1200): the split goes there, import only.
    h.take_sent(R1);
    h.engine.reader_sample(1, Lsn(0x9000), h.now);
    h.client(&query("SELECT 1"));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.server),
        (Outcome::ReplicaTxnSplit, Reason::SplitRead, Some(1))
    );
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["SET polar_xact_split_xids = '1,733'; SELECT 1".to_string()]
    );
    reader_rows(&mut h, R1, 1, 0x9000);
    // The pin's own RFQ says so too:
    let mut h = host_with(ServerDialect::PolarDb);
    begin(&mut h, "BEGIN", None);
    h.client(&query("SELECT 1"));
    h.attach(R1);
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x9000);
    h.take_sent(R1);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x8000), Some((b'x', "1,733")));
    h.client(&query("SELECT v FROM t"));
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["SET polar_xact_split_xids = '1,733'; SELECT v FROM t".to_string()]
    );
    reader_rows(&mut h, R1, 1, 0x9000);
    // polardb clears the import itself: the reader is released clean.
    h.client(&query("COMMIT"));
    let acts = h.writer_answers("COMMIT", b'I', Some(0x9100), None);
    assert!(
        acts.contains(&A::Release {
            conn: R1,
            needs_reset: false
        }),
        "{acts:?}"
    );
    // No wait was ever sent to a polardb reader.
    assert!(!h
        .log
        .iter()
        .any(|a| matches!(a, A::SendBackend { bytes, .. } if String::from_utf8_lossy(bytes).contains("wait_lsn"))));
}

#[test]
fn p7_pin_released_on_reader_loss_and_rest_of_txn_on_writer() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    h.attach(R1);
    reader_rows(&mut h, R1, 0, 0x1100);
    h.take_client();
    h.event(R1, Event::ConnectionLost);
    assert_eq!(h.session.pinned_reader(), None);
    // A fresh reader is chosen for the next read.
    let acts = h.client(&query("SELECT 2"));
    assert!(acquired(&acts));
}

#[test]
fn p7_pin_released_when_the_reader_hostgroup_changes() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    h.attach(R1);
    reader_rows(&mut h, R1, 0, 0x1100);
    h.engine.add_reader(3, 5);
    h.engine.set_reader_hostgroup(0, Some(5));
    let acts = h.client(&query("SELECT 2"));
    assert!(
        acts.contains(&A::Release {
            conn: R1,
            needs_reset: false
        }),
        "{acts:?}"
    );
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 3, .. })),
        "{acts:?}"
    );
}

#[test]
fn p7_pin_released_when_the_reader_turns_unhealthy() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    h.attach(R1);
    reader_rows(&mut h, R1, 0, 0x1100);
    let server = h
        .log
        .iter()
        .find_map(|a| match a {
            A::Acquire { server, .. } => Some(*server),
            _ => None,
        })
        .unwrap();
    h.engine.set_reader_health(server, false);
    let _ = acquired_server(&h);
    let acts = h.client(&query("SELECT 2"));
    assert!(
        acts.contains(&A::Release {
            conn: R1,
            needs_reset: false
        }),
        "{acts:?}"
    );
}

#[test]
fn s3_rollback_releases_and_repeatable_read_never_splits() {
    let mut h = host_with(ServerDialect::Awide);
    begin(
        &mut h,
        "START TRANSACTION ISOLATION LEVEL READ COMMITTED",
        Some((b'x', "")),
    );
    h.client(&query("SELECT 1"));
    h.attach(R1);
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x1100);
    h.client(&query("ROLLBACK"));
    let acts = h.writer_answers("ROLLBACK", b'I', Some(0x1200), None);
    assert!(acts.contains(&A::Release {
        conn: R1,
        needs_reset: false
    }));
    assert!(!h.session.in_transaction());
    // SET TRANSACTION inside the transaction moves it to repeatable read.
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    h.writer_answers("SET", b'T', Some(0x1200), None);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitIsolation);
}

#[test]
fn p5_a_read_of_a_value_of_the_clients_transaction_is_never_split() {
    // S-7: a reader runs the read in a transaction of its own, so now(), CURRENT_TIMESTAMP, the
    // 'today' input, and the block's isolation and deferrability would be the reader's. Before
    // the first write and after it, such a read stays on the writer; outside a block it goes to
    // a reader (its own transaction has the same values there).
    let reads = [
        "SELECT now()",
        "SELECT v, CURRENT_TIMESTAMP FROM t",
        "SELECT * FROM t WHERE d = 'today'",
        "SELECT current_setting('transaction_isolation')",
        "SELECT current_setting('Transaction_Deferrable')",
    ];
    for sql in reads {
        let mut h = host_with(ServerDialect::Awide);
        begin(&mut h, "BEGIN", Some((b'x', "")));
        h.client(&query(sql));
        assert_eq!(
            h.last_decision().reason,
            Reason::SplitTxnValue,
            "{sql} before the first write"
        );
        h.writer_answers("SELECT 1", b'T', Some(0x1000), Some((b'x', "")));
        h.client(&query("INSERT INTO t VALUES (1)"));
        h.writer_answers("INSERT 0 1", b'T', Some(0x5000), Some((b'x', "1,900")));
        h.engine.reader_sample(1, Lsn(0x6000), h.now);
        h.client(&query(sql));
        assert_eq!(
            h.last_decision().reason,
            Reason::SplitTxnValue,
            "{sql} after the first write"
        );
        h.writer_answers("SELECT 1", b'T', Some(0x5000), Some((b'x', "1,900")));
        // A read without such a value is still split.
        let acts = h.client(&query("SELECT v FROM t"));
        assert!(acquired(&acts), "{acts:?}");
        h.attach(R1);
        assert_eq!(h.last_decision().reason, Reason::SplitRead);
        h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
        reader_rows(&mut h, R1, 1, 0x6000);
        h.client(&query("COMMIT"));
        h.writer_answers("COMMIT", b'I', Some(0x7000), None);
        h.take_client();
        // Outside a block the same read goes to a reader.
        h.engine.reader_sample(1, Lsn(0x8000), h.now);
        h.engine.reader_sample(2, Lsn(0x8000), h.now);
        let acts = h.client(&query(sql));
        assert!(acquired(&acts), "{sql} outside a block: {acts:?}");
    }
}

#[test]
fn p5_a_read_split_off_a_block_touches_the_writers_block() {
    // The block's first split read runs a hidden SELECT 1 in the writer's block (its answer
    // swallowed): the block has its first snapshot as on one server, so a later SET TRANSACTION
    // ISOLATION LEVEL fails there as the primary's would; and a block reading on readers for long
    // is touched again, so its writer is not idle in transaction.
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.take_sent(WRITER);
    h.client(&query("SELECT 1"));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    assert!(ends_with_touch(&h.take_sent(WRITER)));
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x1100);
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ", "the touch's answer is swallowed");
    // A read soon after: no touch.
    h.now += 50;
    h.client(&query("SELECT 2"));
    reader_rows(&mut h, R1, 0, 0x1100);
    assert!(h.take_sent(WRITER).is_empty());
    // One after the interval: touched again.
    h.now += 100;
    h.client(&query("SELECT 3"));
    assert!(ends_with_touch(&h.take_sent(WRITER)));
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    reader_rows(&mut h, R1, 0, 0x1100);
    assert_eq!(tags(&h.take_client()), "TDCZTDCZ");
    // The server now refuses SET TRANSACTION as it would have after the block's first query.
    h.client(&query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"));
    assert_eq!(
        sent_queries(&h.take_sent(WRITER)),
        vec!["SET TRANSACTION ISOLATION LEVEL SERIALIZABLE".to_string()]
    );
    // Outside a block reads touch nothing.
    let mut h = host_with(ServerDialect::Awide);
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.engine.reader_sample(2, Lsn(0x1000), h.now);
    h.client(&query("SELECT 1"));
    h.attach(R1);
    assert!(h.take_sent(WRITER).is_empty());
}

/// S-3/P-5: `SET SESSION CHARACTERISTICS` inside a block sets the session's default for the
/// blocks after it (an examiner's finding of 2026-12-05: it was ignored there, so a later
/// REPEATABLE READ block read on a reader, 5/5 with a broken snapshot). As a SET in the block,
/// the block's reads stay on the writer and the state is captured once it ends.
#[test]
fn p5_s3_session_characteristics_set_inside_a_block_rule_the_blocks_after_it() {
    let mut h = host_with(ServerDialect::Awide);
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query(
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    ));
    h.writer_answers("SET", b'T', Some(0x1000), Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitSetInTxn);
    h.writer_answers("SELECT 1", b'T', Some(0x1000), Some((b'x', "")));
    h.client(&query("COMMIT"));
    h.writer_answers("COMMIT", b'I', Some(0x1000), None);
    assert!(
        sends_capture(&h.take_sent(WRITER)),
        "a capture follows the block's end"
    );
    // The writer says the default is REPEATABLE READ.
    h.backend(
        WRITER,
        &capture_answer(
            &[("default_transaction_isolation", "repeatable read")],
            None,
        ),
    );
    begin(&mut h, "BEGIN", Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitIsolation);
}
