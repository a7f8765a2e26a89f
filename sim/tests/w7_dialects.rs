//! W-7: what `polardb` and `stock` servers refuse, and polardb's never-ending wait.
mod common;

use common::*;
use polarsplit_sim::client;
use polarsplit_sim::history::Event;
use polarsplit_sim::{Dialect, Lsn, ServerId, ServerRef};

const R1: ServerId = ServerId(1);

#[test]
fn w7_polardb_refuses_mode_and_timeout_42704() {
    let mut c = cluster(Dialect::Polardb);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    for (sql, name) in [
        (
            "SET polar_consistency_mode = 'strict'",
            "polar_consistency_mode",
        ),
        (
            "SET polar_proxy_wait_timeout_ms = 100",
            "polar_proxy_wait_timeout_ms",
        ),
        ("SHOW polar_consistency_mode", "polar_consistency_mode"),
    ] {
        let m = r.q(&mut c, sql);
        let f = error(&m).unwrap();
        assert_eq!(f.code(), Some("42704"));
        assert_eq!(
            f.message(),
            Some(format!("unrecognized configuration parameter \"{name}\"").as_str())
        );
    }
    // The engine's awide wrapper fails whole on polardb: nothing after the error runs.
    let m = r.q(
        &mut c,
        "SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 5; \
         SET polar_xact_split_wait_lsn = '1'; SELECT 1",
    );
    assert_eq!(code(&m).as_deref(), Some("42704"));
    assert!(rows(&m).is_empty());
    assert_eq!(count_rfq(&m), 1);
}

#[test]
fn w7_polardb_wait_never_times_out_cannot_be_cancelled_and_is_recorded() {
    let mut c = cluster(Dialect::Polardb);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let target = Lsn(rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)")).0 + 100_000);
    let m = r.q(
        &mut c,
        &format!("SET polar_xact_split_wait_lsn = '{}'; SELECT 1", target.0),
    );
    assert_eq!(tags(&m), vec!["SET"]);
    let sent = c.history().iter().find_map(|e| match &e.event {
        Event::PolardbWaitSent { target, conn, .. } if *conn == r.id => Some(*target),
        _ => None,
    });
    assert_eq!(sent, Some(target));
    // Queued behind the wait: no answer.
    assert!(r.q(&mut c, "SET statement_timeout = 10").is_empty());
    c.advance(3_600_000);
    assert!(c.is_waiting(r.id));
    // A cancel has no effect on it.
    let (pid, secret) = c.backend_key(r.id).unwrap_or_default();
    let k = c.connect(ServerRef::Id(R1)).unwrap();
    c.write(k, &client::cancel_request(pid, secret)).unwrap();
    assert!(c.is_waiting(r.id));
    assert!(c.history().iter().any(|e| matches!(
        e.event,
        Event::Cancel {
            effective: false,
            ..
        }
    )));
    assert!(r.read(&mut c).is_empty());
    // Only stopping the server ends it.
    c.stop_server(R1).unwrap();
    let m = r.read(&mut c);
    assert_eq!(code(&m).as_deref(), Some("57P01"));
    assert!(c.is_closed(r.id));
}

#[test]
fn w7_polardb_wait_lsn_persists_junk_is_zero_minus_one_hangs() {
    let mut c = cluster(Dialect::Polardb);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let target = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)"));
    r.q(
        &mut c,
        &format!("SET polar_xact_split_wait_lsn = '{}'; SELECT 1", target.0),
    );
    c.advance(50);
    assert_eq!(value(&r.read(&mut c)), Some("1".into()));
    // Persisted: a later SELECT waits for it again (already reached here, so at once) …
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_xact_split_wait_lsn")),
        Some(target.0.to_string())
    );
    let t2 = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (101, 1)"));
    r.ok(
        &mut c,
        &format!("SET polar_xact_split_wait_lsn = '{}'", t2.0),
    );
    r.q(&mut c, "SELECT v FROM kv WHERE k = 101");
    assert!(
        c.is_waiting(r.id),
        "… and a new one set alone applies to later SELECTs"
    );
    c.advance(50);
    assert_eq!(value(&r.read(&mut c)), Some("1".into()));
    // The X/Y form and junk read as 0: no wait.
    r.ok(
        &mut c,
        "SET polar_xact_split_wait_lsn = '0/1A3B400'; SELECT 1",
    );
    r.ok(&mut c, "SET polar_xact_split_wait_lsn = 'junk'; SELECT 1");
    // -1 wraps to the largest LSN: it never answers.
    r.q(&mut c, "SET polar_xact_split_wait_lsn = '-1'; SELECT 1");
    c.advance(1_000_000);
    assert!(c.is_waiting(r.id));
}

#[test]
fn w7_polardb_lone_import_set_fails_and_import_clears_at_query_end() {
    let mut c = cluster(Dialect::Polardb);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    let m = r.q(&mut c, "SET polar_xact_split_xids = '1,732'");
    let f = error(&m).unwrap();
    assert_eq!(
        f.message(),
        Some("Unable to start xact split without begin")
    );
    let m = r.q(&mut c, "SET polar_xact_split_xids = '1'");
    assert_eq!(code(&m).as_deref(), Some("22023"));
    // In a multi-statement Query it works, and is gone when the Query ends.
    r.ok(&mut c, "SET polar_xact_split_xids = '1,732'; SELECT 1");
    assert_eq!(
        value(&r.ok(&mut c, "SHOW polar_xact_split_xids")),
        Some(String::new())
    );
    let imports: Vec<bool> = c
        .history()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Statement(s) if s.text == "SELECT 1" => {
                Some(s.snapshot.as_ref().unwrap().import.is_some())
            }
            _ => None,
        })
        .collect();
    assert_eq!(imports, vec![true]);
}

#[test]
fn w7_import_on_a_primary_fails() {
    for d in [Dialect::Awide, Dialect::Polardb] {
        let mut c = cluster(d);
        let mut w = v15(&mut c, ServerRef::Primary);
        let m = w.q(&mut c, "SET polar_xact_split_xids = '1,732'; SELECT 1");
        assert_eq!(code(&m).as_deref(), Some("XX000"), "{d:?}");
    }
}

#[test]
fn w7_stock_refuses_every_polar_setting_42704() {
    let mut c = cluster(Dialect::Stock);
    let mut r = plain(&mut c, ServerRef::Id(R1));
    for name in [
        "polar_consistency_mode",
        "polar_proxy_wait_timeout_ms",
        "polar_xact_split_wait_lsn",
        "polar_xact_split_xids",
    ] {
        let m = r.q(&mut c, &format!("SET {name} = '1'"));
        let f = error(&m).unwrap();
        assert_eq!(f.code(), Some("42704"));
        assert_eq!(
            f.message(),
            Some(format!("unrecognized configuration parameter \"{name}\"").as_str())
        );
    }
    // Dotted names are placeholders, also on a standby.
    r.ok(&mut c, "SET polarsplit.x = 'y'");
    assert_eq!(value(&r.ok(&mut c, "SHOW polarsplit.x")), Some("y".into()));
    assert_eq!(
        value(&r.ok(&mut c, "SELECT pg_last_wal_replay_lsn()")),
        Some(c.replay_lsn(R1).unwrap().to_string())
    );
}
