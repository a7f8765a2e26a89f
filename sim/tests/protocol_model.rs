//! What the simulated servers do with the rest of the protocol the engine must carry (SPEC §10,
//! S-4…S-6): named and unnamed statements and portals with parameters, row limits and
//! PortalSuspended, portal and statement lifetimes, Flush, DEALLOCATE; LISTEN/NOTIFY; roles and
//! session authorization; RESET ALL; a crashed reader restarting behind; a frozen reader.
mod common;

use common::*;
use polarsplit_sim::client::{self, Msg};
use polarsplit_sim::harness::shape;
use polarsplit_sim::{Cluster, ClusterConfig, Dialect, Event, Lsn, ServerId, ServerRef};

/// The answer's message types, asynchronous ones by their own letters.
fn kinds(m: &[Msg]) -> String {
    m.iter()
        .map(|m| match m {
            Msg::Notification { .. } => 'A',
            Msg::ParameterStatus(..) => 'S',
            Msg::Notice(_) => 'N',
            m => shape::kind(m),
        })
        .collect()
}

#[test]
fn e2_named_statement_with_parameters_binds_again_and_again() {
    let mut c = cluster(Dialect::Stock);
    let mut w = plain(&mut c, ServerRef::Primary);
    let mut b = client::parse_typed("_pg3_0", "SELECT v FROM kv WHERE k = $1", &[23]);
    b.extend(client::describe(false, "_pg3_0"));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "1tTZ");
    for k in [1, 2] {
        let mut b = client::bind_params("", "_pg3_0", &[Some(&k.to_string())]);
        b.extend(client::execute(""));
        b.extend(client::sync());
        c.write(w.id, &b).unwrap();
        let m = w.read(&mut c);
        assert_eq!(kinds(&m), "2DCZ");
        assert_eq!(value(&m), Some((k * 10).to_string()));
    }
    // A wrong number of parameters is refused.
    let mut b = client::bind("", "_pg3_0");
    b.extend(client::execute(""));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(code(&w.read(&mut c)).as_deref(), Some("08P01"));
}

#[test]
fn e5_row_limited_execute_suspends_the_portal() {
    let mut c = cluster(Dialect::Stock);
    let mut w = plain(&mut c, ServerRef::Primary);
    w.ok(&mut c, "BEGIN");
    let mut b = client::parse("", "SELECT k, v FROM kv ORDER BY k");
    b.extend(client::bind("cur", ""));
    b.extend(client::execute_limited("cur", 4));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "12DDDDsZ");
    // The portal survives the Sync inside the transaction block.
    let mut b = client::execute_limited("cur", 4);
    b.extend(client::execute_limited("cur", 100));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    let m = w.read(&mut c);
    assert_eq!(kinds(&m), "DDDDsDDCZ");
    assert_eq!(tags(&m), vec!["SELECT 10"]);
    w.ok(&mut c, "COMMIT");
    // Portals end with their transaction.
    let mut b = client::execute("cur");
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(code(&w.read(&mut c)).as_deref(), Some("34000"));
}

#[test]
fn e2_simple_query_destroys_the_unnamed_statement_and_deallocate_drops_named() {
    let mut c = cluster(Dialect::Stock);
    let mut w = plain(&mut c, ServerRef::Primary);
    let mut b = client::parse("", "SELECT 1");
    b.extend(client::parse("s1", "SELECT 2"));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "11Z");
    w.ok(&mut c, "SELECT 3");
    let mut b = client::bind("", "");
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(code(&w.read(&mut c)).as_deref(), Some("26000"));
    assert_eq!(tags(&w.ok(&mut c, "DEALLOCATE s1")), vec!["DEALLOCATE"]);
    assert_eq!(
        code(&w.q(&mut c, "DEALLOCATE s1")).as_deref(),
        Some("26000")
    );
}

#[test]
fn e1_flush_sends_what_is_pending_without_ready_for_query() {
    let mut c = Cluster::new(ClusterConfig {
        hold_until_flush: true,
        ..ClusterConfig::default()
    });
    let mut w = plain(&mut c, ServerRef::Primary);
    let mut b = client::parse("__asyncpg_stmt_1__", "SELECT v FROM kv WHERE k = 1");
    b.extend(client::describe(false, "__asyncpg_stmt_1__"));
    c.write(w.id, &b).unwrap();
    // A real backend buffers until Sync or Flush.
    assert_eq!(kinds(&w.read(&mut c)), "");
    c.write(w.id, &client::flush()).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "1tT");
    let mut b = client::bind("", "__asyncpg_stmt_1__");
    b.extend(client::execute(""));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "2DCZ");
    // A Flush after Sync has nothing to send.
    c.write(w.id, &client::flush()).unwrap();
    assert_eq!(kinds(&w.read(&mut c)), "");
}

#[test]
fn notify_reaches_every_listener_between_transactions() {
    let mut c = cluster(Dialect::Stock);
    let mut l = plain(&mut c, ServerRef::Primary);
    let mut n = plain(&mut c, ServerRef::Primary);
    let mut r = plain(&mut c, ServerRef::Id(ServerId(1)));
    assert_eq!(tags(&l.ok(&mut c, "LISTEN ch")), vec!["LISTEN"]);
    assert_eq!(code(&r.q(&mut c, "LISTEN ch")).as_deref(), Some("25006"));
    // Inside a transaction the listener gets nothing until it ends.
    l.ok(&mut c, "BEGIN");
    n.ok(&mut c, "NOTIFY ch, 'p1'");
    assert_eq!(kinds(&l.read(&mut c)), "");
    let m = l.q(&mut c, "COMMIT");
    assert_eq!(kinds(&m), "CZA");
    // An idle listener gets it at once; the notifier's own listening too, after its RFQ.
    n.ok(&mut c, "LISTEN ch");
    let m = n.q(&mut c, "SELECT pg_notify('ch', 'p2')");
    assert_eq!(kinds(&m), "TDCZA");
    assert!(matches!(&l.read(&mut c)[..], [Msg::Notification { payload, .. }] if payload == "p2"));
    // A rolled-back NOTIFY is never sent.
    n.ok(&mut c, "BEGIN");
    n.ok(&mut c, "NOTIFY ch, 'p3'");
    n.ok(&mut c, "ROLLBACK");
    assert_eq!(kinds(&l.read(&mut c)), "");
    let sent = c
        .history()
        .iter()
        .filter(|e| matches!(e.event, Event::NotificationSent { .. }))
        .count();
    assert_eq!(sent, 3);
}

#[test]
fn s5_roles_session_authorization_and_reset_all() {
    let mut c = cluster(Dialect::Stock);
    for to in [ServerRef::Primary, ServerRef::Id(ServerId(1))] {
        let mut x = plain(&mut c, to);
        x.ok(&mut c, "SET SESSION AUTHORIZATION ru");
        x.ok(&mut c, "SET ROLE rr");
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_user")).as_deref(),
            Some("rr")
        );
        assert_eq!(
            value(&x.ok(&mut c, "SELECT session_user")).as_deref(),
            Some("ru")
        );
        assert_eq!(
            code(&x.q(&mut c, "SELECT v FROM kv WHERE k = 1")).as_deref(),
            Some("42501")
        );
        // RESET ALL resets neither role nor session authorization (a reset placeholder
        // reads as NULL here; PostgreSQL gives '' once it was set).
        x.ok(&mut c, "SET app.tenant = 'acme'");
        x.ok(&mut c, "RESET ALL");
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_user")).as_deref(),
            Some("rr")
        );
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_setting('app.tenant', true)")),
            None
        );
        // SET SESSION AUTHORIZATION resets the role: the order matters.
        x.ok(&mut c, "SET SESSION AUTHORIZATION ru");
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_user")).as_deref(),
            Some("ru")
        );
        assert_eq!(
            value(&x.ok(&mut c, "SELECT v FROM kv WHERE k = 1")).as_deref(),
            Some("10")
        );
        // ru may not become nobody.
        assert_eq!(
            code(&x.q(&mut c, "SET ROLE nobody")).as_deref(),
            Some("42501")
        );
        // A function that calls set_config changes the state wherever it runs.
        x.ok(&mut c, "SELECT set_tenant('t1')");
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_setting('app.tenant')")).as_deref(),
            Some("t1")
        );
        x.ok(&mut c, "DISCARD ALL");
        assert_eq!(
            value(&x.ok(&mut c, "SELECT current_user")).as_deref(),
            Some("app")
        );
    }
}

#[test]
fn r1a_crashed_reader_restarts_behind_and_serves_reads_while_redoing() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    w.ok(&mut c, "UPDATE kv SET v = 7 WHERE k = 1");
    let before_write = c.replay_lsn(ServerId(1)).unwrap();
    c.advance(200);
    let caught_up = c.replay_lsn(ServerId(1)).unwrap();
    assert!(caught_up >= c.flushed_lsn());
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    assert_eq!(
        value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 1")).as_deref(),
        Some("7")
    );
    c.crash_restart_reader(ServerId(1), before_write).unwrap();
    assert!(c.server_closed(r.id));
    // Starting up: 57P03.
    let (_, m) = open(
        &mut c,
        ServerRef::Id(ServerId(1)),
        &client::startup_v15("app", "db"),
        BOTH,
    );
    assert_eq!(code(&m).as_deref(), Some("57P03"));
    c.advance(25);
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    let replay = c.replay_lsn(ServerId(1)).unwrap();
    assert!(replay < caught_up, "{replay} behind {caught_up}");
    assert_eq!(
        value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 1")).as_deref(),
        Some("10")
    );
    c.advance(1000);
    assert_eq!(
        value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 1")).as_deref(),
        Some("7")
    );
    assert!(c.replay_lsn(ServerId(1)).unwrap() >= caught_up);
    let _ = Lsn::ZERO;
}

#[test]
fn r1b_frozen_reader_answers_nothing_until_it_resumes() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    let now = c.now();
    c.freeze(ServerId(1), now + 30_000).unwrap();
    c.write(r.id, &client::query("SELECT v FROM kv WHERE k = 1"))
        .unwrap();
    assert_eq!(r.read(&mut c), vec![]);
    c.advance(29_000);
    assert_eq!(c.pending_output(r.id), 0);
    c.advance(1_000);
    let m = r.read(&mut c);
    assert_eq!(value(&m).as_deref(), Some("10"));
}
