//! F-1 faults: stop (57P01), kills, partial reads and mid-result cuts, injected errors, lag jumps,
//! writer failover and the generation counter.
mod common;

use common::*;
use polarsplit::TxStatus;
use polarsplit_sim::client::{self, Decoder, Msg};
use polarsplit_sim::history::{CloseReason, Event};
use polarsplit_sim::{
    Cluster, ClusterConfig, ConnectError, Dialect, Injection, Matcher, Role, ServerId, ServerRef,
    Target, XidStatus,
};

const R1: ServerId = ServerId(1);
const R2: ServerId = ServerId(2);

#[test]
fn f1_stopping_a_reader_sends_57p01_then_closes() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let mut idle = v15(&mut c, ServerRef::Id(R1));
    r.ok(&mut c, "BEGIN; SELECT 1");
    c.stop_server(R1).unwrap();
    for conn in [&mut r, &mut idle] {
        let m = conn.read(&mut c);
        let f = error(&m).unwrap();
        assert_eq!(f.severity(), Some("FATAL"));
        assert_eq!(f.code(), Some("57P01"));
        assert_eq!(
            f.message(),
            Some("terminating connection due to administrator command")
        );
        assert!(c.is_closed(conn.id));
    }
    assert!(c.write(r.id, &client::query("SELECT 1")).is_err());
    assert_eq!(
        c.connect(ServerRef::Id(R1)),
        Err(ConnectError::ServerDown(R1))
    );
    c.start_server(R1).unwrap();
    let mut again = v15(&mut c, ServerRef::Id(R1));
    again.ok(&mut c, "SELECT 1");
}

#[test]
fn f1_partial_reads_and_a_cut_in_the_middle_of_a_result() {
    let mut c = Cluster::new(ClusterConfig {
        initial_keys: 1000,
        ..ClusterConfig::default()
    });
    let r = v15(&mut c, ServerRef::Reader(0));
    c.write(r.id, &client::query("SELECT k, v FROM kv ORDER BY k"))
        .unwrap();
    let total = c.pending_output(r.id);
    assert!(total > 10_000);
    let mut d = Decoder::new(BOTH);
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.extend(d.feed(&c.read(r.id, 100)));
    }
    assert_eq!(c.pending_output(r.id), total - 1000);
    assert!(d.buffered() > 0 || !seen.is_empty());
    let rows_so_far = seen.iter().filter(|m| matches!(m, Msg::DataRow(_))).count();
    assert!(rows_so_far > 0 && rows_so_far < 1000);
    // The network cut loses what was not read yet.
    c.kill_discarding(r.id).unwrap();
    assert!(c.read_all(r.id).is_empty());
    assert!(c.is_closed(r.id));
}

#[test]
fn f1_kill_keeps_what_was_sent_and_rolls_back_the_open_transaction() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    c.write(
        w.id,
        &client::query("BEGIN; INSERT INTO kv VALUES (100, 1)"),
    )
    .unwrap();
    c.kill(w.id).unwrap();
    assert!(!c.is_closed(w.id), "unread bytes remain");
    assert!(c.server_closed(w.id));
    let m = w.read(&mut c);
    assert_eq!(rfq(&m).0, TxStatus::InTransaction);
    assert!(c.is_closed(w.id));
    assert_eq!(c.xid_status(732), Some(XidStatus::Aborted));
    assert_eq!(c.committed_value_now(100), None);
    assert!(c.history().iter().any(|e| matches!(
        e.event,
        Event::Closed {
            reason: CloseReason::Killed,
            ..
        }
    )));
}

#[test]
fn f1_injected_reusable_error_leaves_the_connection_usable() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.inject_error(
        Target::Conn(r.id),
        Injection::error("53300", "too many connections").matching(Matcher::Select),
    )
    .unwrap();
    let m = r.q(&mut c, "SET application_name = 'a'; SELECT 1");
    assert_eq!(tags(&m), vec!["SET"]);
    assert_eq!(code(&m).as_deref(), Some("53300"));
    assert_eq!(error(&m).unwrap().message(), Some("too many connections"));
    assert_eq!(value(&r.ok(&mut c, "SELECT 2")), Some("2".into()));
    // On a server: the first matching statement of any of its connections, e.g. a hidden SET.
    c.inject_error(
        Target::Server(R1),
        Injection::error("22023", "rejected").matching(Matcher::PolarSet),
    )
    .unwrap();
    let mut r2 = v15(&mut c, ServerRef::Id(R1));
    let m = r2.q(&mut c, "SET polar_xact_split_wait_lsn = '1'; SELECT 1");
    assert_eq!(code(&m).as_deref(), Some("22023"));
    let st = c.history().iter().rev().find_map(|e| match &e.event {
        Event::Statement(s) if s.polar_set => Some(s.result.clone()),
        _ => None,
    });
    assert!(matches!(
        st,
        Some(polarsplit_sim::history::StmtResult::Error { injected: true, .. })
    ));
    // In an explicit transaction it fails the transaction, as any error does.
    let mut w = v15(&mut c, ServerRef::Primary);
    c.inject_error(
        Target::Conn(w.id),
        Injection::error("40P01", "deadlock detected").matching(Matcher::Select),
    )
    .unwrap();
    let m = w.q(&mut c, "BEGIN; SELECT 1");
    assert_eq!(rfq(&m).0, TxStatus::Failed);
}

#[test]
fn f1_injected_fatal_closes_the_connection() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    c.inject_error(
        Target::Conn(r.id),
        Injection::error("XX000", "crash").fatal(),
    )
    .unwrap();
    let m = r.q(&mut c, "SELECT 1");
    assert_eq!(error(&m).unwrap().severity(), Some("FATAL"));
    assert!(!m.iter().any(Msg::is_rfq));
    assert!(c.is_closed(r.id));
}

#[test]
fn lag_jumps_and_replay_never_goes_backwards() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let l1 = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)"));
    c.advance(50);
    assert_eq!(c.replay_lsn(R1), Some(l1));
    c.set_reader_lag(R1, 5_000).unwrap();
    assert_eq!(
        c.replay_lsn(R1),
        Some(l1),
        "a bigger lag never rewinds replay"
    );
    let l2 = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (101, 1)"));
    c.advance(4_999);
    assert_eq!(c.replay_lsn(R1), Some(l1));
    c.advance(1);
    assert_eq!(c.replay_lsn(R1), Some(l2));
    assert_eq!(c.lag_ms(R1), Some(5_000));
}

#[test]
fn random_lag_changes_over_time_within_bounds() {
    let mut c = Cluster::new(ClusterConfig {
        seed: 9,
        min_lag_ms: 10,
        max_lag_ms: 400,
        lag_change_interval_ms: 100,
        ..ClusterConfig::default()
    });
    let mut lags = std::collections::BTreeSet::new();
    for _ in 0..50 {
        c.advance(100);
        let l = c.lag_ms(R2).unwrap();
        assert!((10..=400).contains(&l));
        lags.insert(l);
    }
    assert!(lags.len() > 10);
    assert!(c
        .history()
        .iter()
        .any(|e| matches!(e.event, Event::LagChanged { .. })));
}

#[test]
fn failover_promotes_a_reader_breaks_old_primary_connections_and_bumps_generation() {
    let mut c = cluster(Dialect::Polardb);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut on_r1 = v15(&mut c, ServerRef::Id(R1));
    let kept = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)"));
    c.advance(50);
    // Committed but not replayed by r1 when it is promoted: lost.
    w.ok(&mut c, "INSERT INTO kv VALUES (101, 1)");
    w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (102, 1)");
    assert_eq!(c.generation(), 1);
    let g = c.promote(R1).unwrap();
    assert_eq!((g, c.generation(), c.timeline()), (2, 2, 2));
    assert_eq!(c.primary(), R1);
    assert_eq!(c.role(ServerId(0)), Some(Role::Reader));
    assert!(!c.is_up(ServerId(0)));
    // The old primary's connection broke without a message.
    let m = w.read(&mut c);
    assert!(m.is_empty());
    assert!(c.is_closed(w.id));
    assert_eq!(c.committed_value_now(100), Some(1));
    assert_eq!(c.committed_value_now(101), None);
    let open_xid = c.history().iter().find_map(|e| match &e.event {
        Event::Abort { conn, xid, .. } if *conn == w.id => Some(*xid),
        _ => None,
    });
    assert_eq!(c.xid_status(open_xid.unwrap()), Some(XidStatus::Aborted));
    let lost = c.history().iter().find_map(|e| match &e.event {
        Event::Failover {
            lost_xids,
            truncated_at,
            ..
        } => Some((lost_xids.clone(), *truncated_at)),
        _ => None,
    });
    let (lost, cut) = lost.unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!(cut, kept);
    // A connection to the promoted server lives on, now on a primary.
    let m = on_r1.ok(&mut c, "INSERT INTO kv VALUES (103, 1)");
    assert!(m.contains(&Msg::ParameterStatus("in_hot_standby".into(), "off".into())));
    assert!(rfq_lsn(&m) > kept);
    let mut w2 = v15(&mut c, ServerRef::Primary);
    assert_eq!(
        value(&w2.ok(&mut c, "SELECT v FROM kv WHERE k = 103")),
        Some("1".into())
    );
    // The other reader follows the new primary.
    c.advance(50);
    let mut r2 = v15(&mut c, ServerRef::Id(R2));
    assert_eq!(
        value(&r2.ok(&mut c, "SELECT v FROM kv WHERE k = 103")),
        Some("1".into())
    );
    // The old primary comes back as a reader.
    c.start_server(ServerId(0)).unwrap();
    c.advance(50);
    let mut old = v15(&mut c, ServerRef::Id(ServerId(0)));
    assert_eq!(
        value(&old.ok(&mut c, "SELECT pg_is_in_recovery()")),
        Some("t".into())
    );
    assert_eq!(
        value(&old.ok(&mut c, "SELECT v FROM kv WHERE k = 103")),
        Some("1".into())
    );
}

#[test]
fn restart_on_a_new_timeline_breaks_connections_keeps_data() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)");
    w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (101, 1)");
    assert_eq!(c.restart_primary_new_timeline(), 2);
    assert!(c.is_closed(w.id) || w.read(&mut c).is_empty());
    assert!(c.server_closed(w.id));
    assert_eq!(c.committed_value_now(100), Some(1));
    assert_eq!(c.committed_value_now(101), None);
    let mut w2 = v15(&mut c, ServerRef::Primary);
    w2.ok(&mut c, "INSERT INTO kv VALUES (101, 2)");
}

#[test]
fn a_waiting_connection_on_a_stopped_reader_gets_57p01() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    r.q(
        &mut c,
        "SET polar_xact_split_wait_lsn = '99999999999'; SELECT 1",
    );
    assert!(c.is_waiting(r.id));
    c.stop_server(R1).unwrap();
    let m = r.read(&mut c);
    assert_eq!(code(&m).as_deref(), Some("57P01"));
    assert!(c.history().iter().any(|e| matches!(
        e.event,
        Event::WaitEnded {
            outcome: polarsplit_sim::history::WaitOutcome::Aborted,
            ..
        }
    )));
}
