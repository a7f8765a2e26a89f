//! W-6: each statement of a Query answers, one RFQ ends it, an error aborts the rest and rolls
//! back its implicit transaction (SETs included); the whole string is parsed first. Plus the
//! transaction semantics the engine relies on (explicit blocks, failed state, isolation).
mod common;

use common::*;
use polarsplit::TxStatus;
use polarsplit_sim::client::Msg;
use polarsplit_sim::{Dialect, ServerId, ServerRef};

#[test]
fn w6_error_in_the_middle_rolls_back_the_sets_before_it() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    let m = r.q(
        &mut c,
        "SET polar_consistency_mode = 'best_effort'; SET application_name = 'x'; \
         SELECT nextval('s'); SELECT 1",
    );
    assert_eq!(tags(&m), vec!["SET", "SET"]);
    assert_eq!(code(&m).as_deref(), Some("25006"));
    assert!(
        rows(&m).is_empty(),
        "the statement after the error did not run"
    );
    assert_eq!(count_rfq(&m), 1);
    assert!(
        !m.iter().any(|m| matches!(m, Msg::ParameterStatus(..))),
        "application_name never changed"
    );
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_consistency_mode")),
        Some("strict".into())
    );
    assert_eq!(
        value(&r.ok(&mut c, "SHOW application_name")),
        Some(String::new())
    );
}

#[test]
fn w6_error_rolls_back_earlier_writes_of_the_message() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.q(
        &mut c,
        "INSERT INTO kv VALUES (200, 1); INSERT INTO kv VALUES (1, 1); INSERT INTO kv VALUES (201, 1)",
    );
    assert_eq!(tags(&m), vec!["INSERT 0 1"]);
    assert_eq!(code(&m).as_deref(), Some("23505"));
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    assert_eq!(c.committed_value_now(200), None);
    assert_eq!(c.committed_value_now(201), None);
}

#[test]
fn w6_one_rfq_per_query_and_tags() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.ok(
        &mut c,
        "BEGIN; SET LOCAL statement_timeout = 5; SAVEPOINT a; INSERT INTO kv VALUES (300, 1); \
         UPDATE kv SET v = 2 WHERE k = 300; UPDATE kv SET v = 2 WHERE k = 12345; \
         DELETE FROM kv WHERE k = 2; RELEASE a; SELECT v FROM kv WHERE k = 300; SHOW statement_timeout; \
         LOCK TABLE kv IN ROW EXCLUSIVE MODE; CREATE TEMP TABLE t (a int); SELECT nextval('s'); \
         SELECT set_config('a.b', 'x', true); SELECT pg_advisory_lock(7); COMMIT; \
         START TRANSACTION READ ONLY; ROLLBACK",
    );
    assert_eq!(
        tags(&m),
        vec![
            "BEGIN",
            "SET",
            "SAVEPOINT",
            "INSERT 0 1",
            "UPDATE 1",
            "UPDATE 0",
            "DELETE 1",
            "RELEASE",
            "SELECT 1",
            "SHOW",
            "LOCK TABLE",
            "CREATE TABLE",
            "SELECT 1",
            "SELECT 1",
            "SELECT 1",
            "COMMIT",
            "START TRANSACTION",
            "ROLLBACK"
        ]
    );
    assert_eq!(count_rfq(&m), 1);
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    assert_eq!(c.committed_value_now(300), Some(2));
    assert_eq!(c.committed_value_now(2), None);
    assert_eq!(c.sequence_value(), 1);
    // SET LOCAL ended with the transaction.
    assert_eq!(
        value(&w.ok(&mut c, "SHOW statement_timeout")),
        Some("0".into())
    );
    // Many rows.
    let m = w.ok(&mut c, "SELECT k, v FROM kv ORDER BY k");
    assert_eq!(rows(&m).len(), 10); // 1..=10 minus 2, plus 300
    assert_eq!(tags(&m), vec!["SELECT 10"]);
}

#[test]
fn w6_syntax_error_anywhere_runs_nothing() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.q(&mut c, "INSERT INTO kv VALUES (400, 1); FROB kv");
    assert_eq!(tags(&m), Vec::<String>::new());
    let f = error(&m).unwrap();
    assert_eq!(f.code(), Some("42601"));
    assert_eq!(f.message(), Some("syntax error at or near \"FROB\""));
    assert_eq!(c.committed_value_now(400), None);
    let m = w.q(&mut c, "");
    assert_eq!(m[0], Msg::EmptyQuery);
    assert_eq!(count_rfq(&m), 1);
}

#[test]
fn w6_explicit_transaction_error_is_failed_until_rollback() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (410, 1)");
    let m = w.q(&mut c, "INSERT INTO kv VALUES (1, 1); SELECT 1");
    assert_eq!(rfq(&m).0, TxStatus::Failed);
    let m = w.q(&mut c, "SELECT 1");
    assert_eq!(code(&m).as_deref(), Some("25P02"));
    assert_eq!(rfq(&m).0, TxStatus::Failed);
    let m = w.ok(&mut c, "COMMIT");
    assert_eq!(tags(&m), vec!["ROLLBACK"]);
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    assert_eq!(c.committed_value_now(410), None);
}

#[test]
fn w6_begin_inside_a_message_takes_earlier_statements_along() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.ok(
        &mut c,
        "INSERT INTO kv VALUES (420, 1); BEGIN; INSERT INTO kv VALUES (421, 1)",
    );
    assert_eq!(rfq(&m).0, TxStatus::InTransaction);
    w.ok(&mut c, "ROLLBACK");
    assert_eq!(c.committed_value_now(420), None);
    // COMMIT in the middle: what came before stays committed.
    let m = w.q(
        &mut c,
        "BEGIN; INSERT INTO kv VALUES (430, 1); COMMIT; INSERT INTO kv VALUES (1, 1)",
    );
    assert_eq!(code(&m).as_deref(), Some("23505"));
    assert_eq!(c.committed_value_now(430), Some(1));
    // COMMIT / ROLLBACK with no transaction warn (25P01).
    let m = w.ok(&mut c, "COMMIT");
    assert_eq!(notices(&m)[0].code(), Some("25P01"));
    assert_eq!(tags(&m), vec!["COMMIT"]);
}

#[test]
fn w6_savepoint_and_lock_need_a_transaction_block() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    assert_eq!(code(&w.q(&mut c, "SAVEPOINT a")).as_deref(), Some("25P01"));
    assert_eq!(
        code(&w.q(&mut c, "LOCK TABLE kv")).as_deref(),
        Some("25P01")
    );
    // A multi-statement Query is an implicit block: LOCK works there.
    w.ok(&mut c, "LOCK TABLE kv; SELECT 1");
    w.ok(&mut c, "BEGIN");
    assert_eq!(code(&w.q(&mut c, "RELEASE nope")).as_deref(), Some("3B001"));
}

#[test]
fn repeatable_read_keeps_its_first_snapshot_read_committed_does_not() {
    let mut c = cluster(Dialect::Awide);
    let mut a = v15(&mut c, ServerRef::Primary);
    let mut b = v15(&mut c, ServerRef::Primary);
    let mut rc = v15(&mut c, ServerRef::Primary);
    a.ok(&mut c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    rc.ok(&mut c, "BEGIN");
    assert_eq!(
        value(&a.ok(&mut c, "SELECT v FROM kv WHERE k = 1")),
        Some("10".into())
    );
    assert_eq!(
        value(&rc.ok(&mut c, "SELECT v FROM kv WHERE k = 1")),
        Some("10".into())
    );
    b.ok(&mut c, "UPDATE kv SET v = 11 WHERE k = 1");
    assert_eq!(
        value(&a.ok(&mut c, "SELECT v FROM kv WHERE k = 1")),
        Some("10".into())
    );
    assert_eq!(
        value(&rc.ok(&mut c, "SELECT v FROM kv WHERE k = 1")),
        Some("11".into())
    );
    // Writing the row changed since the snapshot: a serialization failure.
    assert_eq!(
        code(&a.q(&mut c, "UPDATE kv SET v = 12 WHERE k = 1")).as_deref(),
        Some("40001")
    );
    // After the snapshot, the isolation level cannot change.
    assert_eq!(
        code(&rc.q(&mut c, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")).as_deref(),
        Some("25001")
    );
}

#[test]
fn concurrent_writers_conflict_at_once_55p03() {
    let mut c = cluster(Dialect::Awide);
    let mut a = v15(&mut c, ServerRef::Primary);
    let mut b = v15(&mut c, ServerRef::Primary);
    a.ok(&mut c, "BEGIN; UPDATE kv SET v = 1 WHERE k = 3");
    assert_eq!(
        code(&b.q(&mut c, "UPDATE kv SET v = 2 WHERE k = 3")).as_deref(),
        Some("55P03")
    );
    assert_eq!(
        code(&b.q(&mut c, "BEGIN; SELECT v FROM kv WHERE k = 3 FOR UPDATE")).as_deref(),
        Some("55P03")
    );
    b.ok(&mut c, "ROLLBACK");
    a.ok(&mut c, "BEGIN; SELECT v FROM kv WHERE k = 4 FOR SHARE");
    b.ok(&mut c, "BEGIN; SELECT v FROM kv WHERE k = 4 FOR SHARE");
    assert_eq!(
        code(&b.q(&mut c, "DELETE FROM kv WHERE k = 4")).as_deref(),
        Some("55P03")
    );
    a.ok(&mut c, "COMMIT");
    b.ok(&mut c, "ROLLBACK");
    b.ok(&mut c, "UPDATE kv SET v = 2 WHERE k = 3");
    assert_eq!(c.committed_value_now(3), Some(2));
}

#[test]
fn reported_settings_changes_reach_the_client_as_parameter_status() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.ok(&mut c, "SET application_name = 'shop'");
    let i = m
        .iter()
        .position(|m| *m == Msg::ParameterStatus("application_name".into(), "shop".into()))
        .unwrap();
    assert!(i < m.len() - 1, "before the RFQ");
}
