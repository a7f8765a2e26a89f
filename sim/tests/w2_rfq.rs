//! W-2 / W-3 / W-7: the ReadyForQuery extension, byte for byte, per dialect and state.
mod common;

use common::*;
use polarsplit::{LsnField, Marker, TxStatus};
use polarsplit_sim::client;
use polarsplit_sim::{Cluster, ClusterConfig, Dialect, ServerId, ServerRef};

fn xact(m: &[polarsplit_sim::client::Msg]) -> Option<(Marker, String)> {
    rfq(m).2
}

fn x(list: &str) -> Option<(Marker, String)> {
    Some((Marker::Splittable, list.to_string()))
}

fn w(list: &str) -> Option<(Marker, String)> {
    Some((Marker::WalPending, list.to_string()))
}

#[test]
fn w2_idle_rfq_is_status_then_big_endian_insert_lsn() {
    let mut c = cluster(Dialect::Polardb);
    let conn = v15(&mut c, ServerRef::Primary);
    c.write(conn.id, &client::query("SELECT 1")).unwrap();
    let bytes = c.read_all(conn.id);
    let tail = &bytes[bytes.len() - 14..];
    let mut want = vec![b'Z', 0, 0, 0, 13, b'I'];
    want.extend_from_slice(&c.insert_lsn().0.to_be_bytes());
    assert_eq!(tail, &want[..]);
}

#[test]
fn w2_writer_lsn_is_the_insert_position_and_grows_per_record() {
    let mut c = cluster(Dialect::Awide);
    let mut conn = v15(&mut c, ServerRef::Primary);
    let l0 = rfq_lsn(&conn.ok(&mut c, "SELECT 1"));
    let l1 = rfq_lsn(&conn.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (100, 1)"));
    assert!(l1 > l0);
    assert_eq!(l1, c.insert_lsn());
    assert!(
        c.flushed_lsn() < l1,
        "an open transaction's WAL is unflushed"
    );
    let l2 = rfq_lsn(&conn.ok(&mut c, "COMMIT"));
    assert!(l2 > l1, "the commit record");
    assert_eq!(c.flushed_lsn(), l2, "a commit flushes");
    assert!(
        l0.0 > 0 && (l1.0 - l0.0) < 1000,
        "a few hundred bytes per record"
    );
}

#[test]
fn w2_reader_rfq_reports_its_replay_position() {
    let mut c = cluster(Dialect::Awide);
    let mut wr = v15(&mut c, ServerRef::Primary);
    let mut rd = v15(&mut c, ServerRef::Reader(0));
    let before = rfq_lsn(&rd.ok(&mut c, "SELECT 1"));
    let commit = rfq_lsn(&wr.ok(&mut c, "INSERT INTO kv VALUES (100, 1)"));
    assert_eq!(rfq_lsn(&rd.ok(&mut c, "SELECT 1")), before, "lag 50 ms");
    c.advance(50);
    let after = rfq_lsn(&rd.ok(&mut c, "SELECT 1"));
    assert_eq!(after, commit);
    assert_eq!(Some(after), c.replay_lsn(ServerId(1)));
    // Readers never send a marker.
    let m = rd.ok(&mut c, "BEGIN");
    assert_eq!(xact(&m), None);
}

#[test]
fn w2_awide_markers_x_empty_then_w_then_x_after_flush() {
    let mut c = cluster(Dialect::Awide);
    let mut a = v15(&mut c, ServerRef::Primary);
    let mut b = v15(&mut c, ServerRef::Primary);
    assert_eq!(xact(&a.ok(&mut c, "SELECT 1")), None, "autocommit");
    assert_eq!(xact(&a.ok(&mut c, "BEGIN")), x(""));
    assert_eq!(xact(&a.ok(&mut c, "SELECT v FROM kv WHERE k = 1")), x(""));
    let m = a.ok(&mut c, "INSERT INTO kv VALUES (100, 1)");
    assert_eq!(xact(&m), w("1,732"));
    assert_eq!(rfq(&m).0, TxStatus::InTransaction);
    // Anyone's commit flushes the WAL: the transaction becomes splittable.
    b.ok(&mut c, "INSERT INTO kv VALUES (200, 1)");
    assert_eq!(xact(&a.ok(&mut c, "SELECT 1")), x("1,732"));
    assert_eq!(
        xact(&a.ok(&mut c, "UPDATE kv SET v = 2 WHERE k = 100")),
        w("2,732")
    );
    a.ok(&mut c, "COMMIT");
}

#[test]
fn w2_awide_periodic_flush_turns_w_into_x() {
    let mut c = Cluster::new(ClusterConfig {
        dialect: Dialect::Awide,
        flush_interval_ms: 200,
        lag_change_interval_ms: 0,
        ..ClusterConfig::default()
    });
    let mut a = v15(&mut c, ServerRef::Primary);
    assert_eq!(
        xact(&a.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (1000, 1)")),
        w("1,732")
    );
    assert_eq!(c.next_event_time(), Some(200));
    c.advance(199);
    assert_eq!(xact(&a.ok(&mut c, "SELECT 1")), w("1,732"));
    c.advance(1);
    assert_eq!(xact(&a.ok(&mut c, "SELECT 1")), x("1,732"));
}

#[test]
fn w3_subtransaction_lists() {
    for d in [Dialect::Awide, Dialect::Polardb] {
        let mut c = cluster(d);
        let mut a = v15(&mut c, ServerRef::Primary);
        a.ok(&mut c, "BEGIN");
        a.ok(&mut c, "INSERT INTO kv VALUES (100, 1)");
        a.ok(&mut c, "INSERT INTO kv VALUES (101, 1)");
        a.ok(&mut c, "SAVEPOINT s1");
        let m = a.ok(&mut c, "INSERT INTO kv VALUES (102, 1)");
        assert_eq!(xact(&m).unwrap().1, "3,733,732", "{d:?}");
        let m = a.ok(&mut c, "RELEASE SAVEPOINT s1");
        assert_eq!(xact(&m).unwrap().1, "3,732,733", "{d:?}");
        // A rolled-back subtransaction leaves the list.
        a.ok(&mut c, "SAVEPOINT s2");
        let m = a.ok(&mut c, "UPDATE kv SET v = 0 WHERE k = 1");
        assert_eq!(xact(&m).unwrap().1, "4,734,732,733", "{d:?}");
        let m = a.ok(&mut c, "ROLLBACK TO SAVEPOINT s2");
        assert_eq!(xact(&m).unwrap().1, "4,732,733", "{d:?}");
        a.ok(&mut c, "COMMIT");
        assert_eq!(c.committed_value_now(102), Some(1));
        assert_eq!(c.committed_value_now(1), Some(10));
    }
}

#[test]
fn w7_polardb_no_marker_before_first_xid_then_x_never_w() {
    let mut c = cluster(Dialect::Polardb);
    let mut a = v15(&mut c, ServerRef::Primary);
    let m = a.ok(&mut c, "BEGIN");
    assert_eq!(rfq(&m).3, 13, "status + LSN, no marker");
    assert_eq!(xact(&a.ok(&mut c, "SELECT v FROM kv WHERE k = 1")), None);
    let m = a.ok(&mut c, "INSERT INTO kv VALUES (100, 1)");
    assert!(c.flushed_lsn() < c.insert_lsn(), "WAL pending");
    assert_eq!(xact(&m), x("1,732"), "never 'w'");
    a.ok(&mut c, "COMMIT");
}

#[test]
fn w7_polardb_no_marker_under_rr_after_lock_after_error_or_in_autocommit() {
    let mut c = cluster(Dialect::Polardb);
    let mut a = v15(&mut c, ServerRef::Primary);
    // Autocommit.
    assert_eq!(xact(&a.ok(&mut c, "INSERT INTO kv VALUES (100, 1)")), None);
    // REPEATABLE READ (BEGIN option, SET TRANSACTION, session default).
    for begin in [
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "BEGIN; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        // (In one Query the implicit transaction would start before the SET: as in PostgreSQL.)
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    ] {
        a.ok(&mut c, begin);
        if begin.starts_with("SET SESSION") {
            a.ok(&mut c, "BEGIN");
        }
        assert_eq!(
            xact(&a.ok(&mut c, "UPDATE kv SET v = 1 WHERE k = 2")),
            None,
            "{begin}"
        );
        a.ok(&mut c, "ROLLBACK");
        a.ok(
            &mut c,
            "SET default_transaction_isolation = 'read committed'",
        );
    }
    // LOCK TABLE, even after a write.
    a.ok(&mut c, "BEGIN; UPDATE kv SET v = 1 WHERE k = 2");
    let m = a.ok(&mut c, "LOCK TABLE kv IN SHARE MODE");
    assert_eq!(xact(&m), None);
    assert_eq!(xact(&a.ok(&mut c, "UPDATE kv SET v = 2 WHERE k = 2")), None);
    a.ok(&mut c, "ROLLBACK");
    // An error, even after recovering with ROLLBACK TO.
    a.ok(
        &mut c,
        "BEGIN; UPDATE kv SET v = 1 WHERE k = 2; SAVEPOINT s",
    );
    let m = a.q(&mut c, "INSERT INTO kv VALUES (1, 1)");
    assert_eq!(code(&m).as_deref(), Some("23505"));
    assert_eq!(rfq(&m).0, TxStatus::Failed);
    assert_eq!(xact(&m), None);
    let m = a.ok(&mut c, "ROLLBACK TO s");
    assert_eq!(rfq(&m).0, TxStatus::InTransaction);
    assert_eq!(xact(&m), None);
    a.ok(&mut c, "ROLLBACK");
}

#[test]
fn w2_awide_no_marker_under_rr_after_lock_or_error() {
    let mut c = cluster(Dialect::Awide);
    let mut a = v15(&mut c, ServerRef::Primary);
    assert_eq!(
        xact(&a.ok(&mut c, "BEGIN ISOLATION LEVEL REPEATABLE READ")),
        None
    );
    a.ok(&mut c, "ROLLBACK");
    a.ok(&mut c, "BEGIN");
    assert_eq!(xact(&a.ok(&mut c, "LOCK TABLE kv")), None);
    a.ok(&mut c, "ROLLBACK");
    a.ok(&mut c, "BEGIN");
    let m = a.q(&mut c, "SELECT nothing");
    assert_eq!(code(&m).as_deref(), Some("42601"));
    assert_eq!(xact(&m), None);
}

#[test]
fn w2_missing_lsn_rfqs_have_length_five() {
    let mut c = Cluster::new(ClusterConfig {
        dialect: Dialect::Awide,
        missing_lsn_per_million: 1_000_000,
        ..ClusterConfig::default()
    });
    let mut a = v15(&mut c, ServerRef::Primary);
    let m = a.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (1000, 1)");
    let (status, lsn, xact, len) = rfq(&m);
    assert_eq!(
        (status, lsn, xact, len),
        (TxStatus::InTransaction, LsnField::Missing, None, 5)
    );

    // At one half, both forms appear, deterministically.
    let run = || {
        let mut c = Cluster::new(ClusterConfig {
            dialect: Dialect::Polardb,
            missing_lsn_per_million: 500_000,
            ..ClusterConfig::default()
        });
        let mut a = v15(&mut c, ServerRef::Primary);
        (0..40)
            .map(|_| rfq(&a.ok(&mut c, "SELECT 1")).1 == LsnField::Missing)
            .collect::<Vec<_>>()
    };
    let v = run();
    assert!(v.iter().any(|m| *m) && v.iter().any(|m| !*m));
    assert_eq!(v, run());
}

#[test]
fn w7_stock_never_extends_the_rfq() {
    let mut c = cluster(Dialect::Stock);
    let mut a = plain(&mut c, ServerRef::Primary);
    for sql in ["BEGIN", "INSERT INTO kv VALUES (100, 1)", "COMMIT"] {
        assert_eq!(rfq(&a.ok(&mut c, sql)).3, 5);
    }
}
