//! W-4 / W-5 on `awide` readers: the wait happens when the SELECT takes its snapshot; strict
//! timeouts answer with 72000, best-effort ones warn then serve the rows.
mod common;

use common::*;
use polarsplit::TxStatus;
use polarsplit_sim::client::{self, Msg};
use polarsplit_sim::history::{Event, WaitOutcome};
use polarsplit_sim::{Dialect, Lsn, ServerId, ServerRef};

const R1: ServerId = ServerId(1);

/// The W-4 wrapper, byte for byte as the engine builds it.
fn wrapped(mode: &str, timeout: u64, lsn: Lsn, sql: &str) -> String {
    format!(
        "SET polar_consistency_mode = '{mode}'; SET polar_proxy_wait_timeout_ms = {timeout}; \
         SET polar_xact_split_wait_lsn = '{}'; {sql}",
        lsn.0
    )
}

/// Commits `INSERT (k, v)` on the primary; returns the commit's RFQ LSN.
fn commit_write(c: &mut polarsplit_sim::Cluster, k: i64, v: i64) -> Lsn {
    commit_sql(c, &format!("INSERT INTO kv VALUES ({k}, {v})"))
}

fn commit_sql(c: &mut polarsplit_sim::Cluster, sql: &str) -> Lsn {
    let mut w = v15(c, ServerRef::Primary);
    rfq_lsn(&w.ok(c, sql))
}

#[test]
fn w4_wait_satisfied_after_advance() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.advance(10);
    let target = commit_write(&mut c, 100, 7);
    let m = r.q(
        &mut c,
        &wrapped("strict", 1000, target, "SELECT v FROM kv WHERE k = 100"),
    );
    assert_eq!(
        tags(&m),
        vec!["SET", "SET", "SET"],
        "the SETs answered, the SELECT waits"
    );
    assert!(!m.iter().any(Msg::is_rfq));
    assert!(c.is_waiting(r.id));
    // Committed (and flushed) at t=10, lag 50: replayed at t=60.
    assert_eq!(c.next_event_time(), Some(60));
    c.advance(49);
    assert!(r.read(&mut c).is_empty());
    c.advance(1);
    let m = r.read(&mut c);
    assert_eq!(value(&m), Some("7".into()));
    assert_eq!(tags(&m), vec!["SELECT 1"]);
    assert!(rfq_lsn(&m) >= target);
    assert!(!c.is_waiting(r.id));
    let ended = c.history().iter().any(|e| {
        matches!(
            e.event,
            Event::WaitEnded {
                outcome: WaitOutcome::Reached,
                ..
            }
        ) && e.time == 60
    });
    assert!(ended);
    let st = c
        .history()
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::Statement(s) if s.text.starts_with("SELECT") => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!((st.started, st.wait.as_ref().unwrap().ended), (10, 60));
    assert!(st.snapshot.unwrap().lsn >= target);
}

#[test]
fn w4_wait_already_reached_answers_at_once() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let target = commit_write(&mut c, 100, 7);
    c.advance(50);
    let m = r.ok(
        &mut c,
        &wrapped("strict", 1000, target, "SELECT v FROM kv WHERE k = 100"),
    );
    assert_eq!(value(&m), Some("7".into()));
    assert_eq!(count_rfq(&m), 1);
}

#[test]
fn w5_strict_timeout_error_fields() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.pin_reader_lag(R1, Some(10_000)).unwrap();
    let target = commit_write(&mut c, 100, 7);
    r.q(
        &mut c,
        &wrapped("strict", 100, target, "SELECT v FROM kv WHERE k = 100"),
    );
    assert_eq!(c.next_event_time(), Some(100));
    c.advance(100);
    let m = r.read(&mut c);
    let f = error(&m).expect("72000");
    assert_eq!(f.severity(), Some("ERROR"));
    assert_eq!(f.code(), Some("72000"));
    assert_eq!(f.detail(), Some("polar_proxy_lsn_wait_timeout"));
    assert_eq!(f.routine(), Some("polar_proxy_wait_for_lsn"));
    assert!(f.message().is_some());
    assert!(rows(&m).is_empty() && !m.iter().any(|m| matches!(m, Msg::RowDescription(_))));
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    // The error rolled the implicit transaction back: the hidden SETs too (W-6).
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_proxy_wait_timeout_ms")),
        Some("0".into())
    );
}

#[test]
fn w5_best_effort_warning_then_stale_rows() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.pin_reader_lag(R1, Some(10_000)).unwrap();
    let target = commit_sql(&mut c, "UPDATE kv SET v = 99 WHERE k = 1");
    r.q(
        &mut c,
        &wrapped("best_effort", 100, target, "SELECT v FROM kv WHERE k = 1"),
    );
    c.advance(100);
    let m = r.read(&mut c);
    assert!(error(&m).is_none());
    let n = notices(&m);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].severity(), Some("WARNING"));
    assert_eq!(n[0].detail(), Some("polar_proxy_lsn_wait_timeout"));
    assert_eq!(n[0].routine(), Some("polar_proxy_wait_for_lsn"));
    let warn_at = m.iter().position(|m| matches!(m, Msg::Notice(_))).unwrap();
    let desc_at = m
        .iter()
        .position(|m| matches!(m, Msg::RowDescription(_)))
        .unwrap();
    assert!(warn_at < desc_at, "the warning comes before the rows");
    assert_eq!(value(&m), Some("10".into()), "stale");
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    let st = c.history().iter().rev().find_map(|e| match &e.event {
        Event::Statement(s) if s.text.starts_with("SELECT") => Some(s.clone()),
        _ => None,
    });
    let st = st.unwrap();
    assert_eq!(st.wait.unwrap().outcome, WaitOutcome::TimedOut);
    assert_eq!(st.reads, vec![(1, Some(10))]);
}

#[test]
fn w4_mode_and_timeout_persist_the_wait_lsn_is_one_shot() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.pin_reader_lag(R1, Some(10_000)).unwrap();
    let target = commit_write(&mut c, 100, 7);
    // A wait with a target already reached (0 is trivially reached).
    r.ok(&mut c, &wrapped("best_effort", 250, Lsn(0), "SELECT 1"));
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_consistency_mode")),
        Some("best_effort".into())
    );
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_proxy_wait_timeout_ms")),
        Some("250".into())
    );
    // The target is consumed: a later SELECT alone does not wait for it.
    r.ok(
        &mut c,
        &format!("SET polar_xact_split_wait_lsn = '{}'", target.0),
    );
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_xact_split_wait_lsn")),
        Some("0".into())
    );
    let m = r.ok(&mut c, "SELECT v FROM kv WHERE k = 100");
    assert_eq!(tags(&m), vec!["SELECT 0"]);
}

#[test]
fn w4_timeout_zero_waits_until_replay_arrives() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.pin_reader_lag(R1, Some(1_000_000)).unwrap();
    let target = commit_write(&mut c, 100, 7);
    r.q(
        &mut c,
        &wrapped("strict", 0, target, "SELECT v FROM kv WHERE k = 100"),
    );
    c.advance(100_000);
    assert!(c.is_waiting(r.id) && r.read(&mut c).is_empty());
    c.set_reader_lag(R1, 0).unwrap();
    let m = r.read(&mut c);
    assert_eq!(value(&m), Some("7".into()));
}

#[test]
fn w4_the_primary_never_waits() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let m = w.ok(&mut c, &wrapped("strict", 100, Lsn(u64::MAX), "SELECT 1"));
    assert_eq!(value(&m), Some("1".into()));
}

#[test]
fn w4_invalid_values_are_refused_22023() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    for sql in [
        "SET polar_consistency_mode = 'eventual'",
        "SET polar_proxy_wait_timeout_ms = -1",
        "SET polar_xact_split_wait_lsn = '0/1A3B400'",
        "SET polar_xact_split_wait_lsn = '-1'",
    ] {
        let m = r.q(&mut c, sql);
        assert_eq!(code(&m).as_deref(), Some("22023"), "{sql}");
    }
}

#[test]
fn w5_statement_timeout_and_cancel_end_an_awide_wait_with_57014() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.pin_reader_lag(R1, Some(1_000_000)).unwrap();
    let target = commit_write(&mut c, 100, 7);
    r.ok(&mut c, "SET statement_timeout = 300");
    r.q(&mut c, &wrapped("strict", 0, target, "SELECT 1"));
    c.advance(300);
    let m = r.read(&mut c);
    assert_eq!(
        error(&m).unwrap().message(),
        Some("canceling statement due to statement timeout")
    );
    assert_eq!(code(&m).as_deref(), Some("57014"));

    r.ok(&mut c, "SET statement_timeout = 0");
    r.q(&mut c, &wrapped("strict", 0, target, "SELECT 1"));
    let (pid, secret) = c.backend_key(r.id).unwrap();
    let k = c.connect(ServerRef::Id(R1)).unwrap();
    c.write(k, &client::cancel_request(pid, secret)).unwrap();
    assert!(c.is_closed(k));
    let m = r.read(&mut c);
    assert_eq!(
        error(&m).unwrap().message(),
        Some("canceling statement due to user request")
    );
    assert!(c.history().iter().any(|e| matches!(
        e.event,
        Event::Cancel {
            effective: true,
            ..
        }
    )));
}

#[test]
fn w4_pipelined_queries_wait_behind_the_waiting_one() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let target = commit_write(&mut c, 100, 7);
    let mut bytes = client::query(&wrapped(
        "strict",
        0,
        target,
        "SELECT v FROM kv WHERE k = 100",
    ));
    bytes.extend(client::query("SELECT 2"));
    c.write(r.id, &bytes).unwrap();
    assert!(c.is_busy(r.id));
    c.advance(50);
    let m = r.read(&mut c);
    assert_eq!(count_rfq(&m), 2);
    assert_eq!(
        rows(&m),
        vec![vec![Some("7".into())], vec![Some("2".into())]]
    );
    assert!(!c.is_busy(r.id));
}

#[test]
fn settle_runs_time_until_the_answer_or_the_limit() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let target = commit_write(&mut c, 100, 7);
    r.q(
        &mut c,
        &wrapped("strict", 0, target, "SELECT v FROM kv WHERE k = 100"),
    );
    assert!(c.settle(r.id, 10_000));
    assert_eq!(c.now(), 50, "stopped at the answer");
    assert_eq!(value(&r.read(&mut c)), Some("7".into()));
    r.q(&mut c, &wrapped("strict", 0, Lsn(u64::MAX), "SELECT 1"));
    assert!(!c.settle(r.id, 1_000));
    assert_eq!(c.now(), 1_000);
    let selects = c
        .history()
        .iter()
        .filter_map(|e| e.event.statement())
        .filter(|s| s.text.starts_with("SELECT"))
        .count();
    assert_eq!(selects, 1);
}
