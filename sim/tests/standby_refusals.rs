//! What a PostgreSQL 15 hot standby refuses, with which SQLSTATE (NOTES.md), and what it
//! accepts. Every refusal is in the history as a `RefusedWrite`.
mod common;

use common::*;
use polarsplit_sim::history::Event;
use polarsplit_sim::{Dialect, ServerId, ServerRef};

const REFUSED: &[(&str, &str, &str)] = &[
    (
        "INSERT INTO kv VALUES (1000, 1)",
        "25006",
        "cannot execute INSERT in a read-only transaction",
    ),
    (
        "UPDATE kv SET v = 1 WHERE k = 1",
        "25006",
        "cannot execute UPDATE in a read-only transaction",
    ),
    (
        "DELETE FROM kv WHERE k = 1",
        "25006",
        "cannot execute DELETE in a read-only transaction",
    ),
    (
        "SELECT nextval('s')",
        "25006",
        "cannot execute nextval() in a read-only transaction",
    ),
    (
        "SELECT txid_current()",
        "25006",
        "cannot assign TransactionIds during recovery",
    ),
    (
        "SELECT v FROM kv WHERE k = 1 FOR UPDATE",
        "25006",
        "cannot execute SELECT FOR UPDATE in a read-only transaction",
    ),
    (
        "SELECT v FROM kv WHERE k = 1 FOR SHARE",
        "25006",
        "cannot execute SELECT FOR SHARE in a read-only transaction",
    ),
    (
        "SELECT v FROM kv WHERE k = 1 FOR KEY SHARE",
        "25006",
        "cannot execute SELECT FOR KEY SHARE in a read-only transaction",
    ),
    (
        "BEGIN; LOCK TABLE kv",
        "25006",
        "cannot execute LOCK TABLE during recovery",
    ),
    (
        "BEGIN; LOCK TABLE kv IN SHARE MODE",
        "25006",
        "cannot execute LOCK TABLE during recovery",
    ),
    (
        "CREATE TEMP TABLE t (a int)",
        "25006",
        "cannot execute CREATE TABLE in a read-only transaction",
    ),
    (
        "SELECT pg_current_wal_lsn()",
        "55000",
        "recovery is in progress",
    ),
    (
        "SELECT pg_current_wal_insert_lsn()",
        "55000",
        "recovery is in progress",
    ),
    (
        "BEGIN; SET TRANSACTION READ WRITE",
        "0A000",
        "cannot set transaction read-write mode during recovery",
    ),
    (
        "BEGIN READ WRITE",
        "0A000",
        "cannot set transaction read-write mode during recovery",
    ),
];

#[test]
fn standby_refuses_writes_with_pg15_sqlstates() {
    for d in [Dialect::Awide, Dialect::Polardb, Dialect::Stock] {
        let mut c = cluster(d);
        let mut r = plain(&mut c, ServerRef::Id(ServerId(1)));
        for (sql, code_want, msg) in REFUSED {
            let m = r.q(&mut c, sql);
            let f = error(&m).unwrap_or_else(|| panic!("{d:?} {sql}: {m:?}"));
            assert_eq!(f.code(), Some(*code_want), "{d:?} {sql}");
            assert_eq!(f.message(), Some(*msg), "{d:?} {sql}");
            r.ok(&mut c, "ROLLBACK");
        }
        let refused = c
            .history()
            .iter()
            .filter(|e| matches!(e.event, Event::RefusedWrite { .. }))
            .count();
        assert_eq!(refused, REFUSED.len(), "{d:?}");
    }
}

#[test]
fn standby_refuses_serializable_at_the_first_query() {
    let mut c = cluster(Dialect::Awide);
    let mut r = plain(&mut c, ServerRef::Id(ServerId(1)));
    r.ok(&mut c, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    let m = r.q(&mut c, "SELECT 1");
    assert_eq!(code(&m).as_deref(), Some("0A000"));
    assert_eq!(
        error(&m).unwrap().message(),
        Some("cannot use serializable mode in a hot standby")
    );
}

#[test]
fn standby_accepts_reads_sets_and_session_state_functions() {
    let mut c = cluster(Dialect::Awide);
    let mut r = plain(&mut c, ServerRef::Id(ServerId(1)));
    for sql in [
        "SELECT 1",
        "SELECT v FROM kv WHERE k = 1",
        "SELECT k, v FROM kv ORDER BY k",
        "SET application_name = 'x'",
        "SHOW transaction_read_only",
        "SELECT set_config('a.b', 'x', false)",
        "SELECT pg_advisory_lock(1)",
        "SELECT pg_last_wal_replay_lsn()",
        "BEGIN; LOCK TABLE kv IN ACCESS SHARE MODE; LOCK TABLE kv IN ROW EXCLUSIVE MODE; COMMIT",
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; COMMIT",
        "DISCARD ALL",
    ] {
        r.ok(&mut c, sql);
    }
    assert_eq!(
        value(&r.ok(&mut c, "SELECT pg_is_in_recovery()")),
        Some("t".into())
    );
    assert_eq!(
        value(&r.ok(&mut c, "SHOW transaction_read_only")),
        Some("on".into())
    );
    assert!(!c
        .history()
        .iter()
        .any(|e| matches!(e.event, Event::RefusedWrite { .. })));
}
