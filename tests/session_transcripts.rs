//! Transcript tests of the session engine (SPEC §2–§4): a fake host feeds real protocol bytes and
//! checks the exact actions and the bytes each side receives.

mod common;

use common::*;
use polarsplit::internals::protocol::startup::StartupPacket;
use polarsplit::{Consistency, OnMissingLsn, ReadFallback, ServerDialect, StartupProfile};
use polarsplit::{Event, Outcome, Reason};

const R1: u64 = 201;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.connect();
    h
}

/// Sends a read, expects AcquireReader, attaches `conn` for the chosen server.
fn read_on_reader(h: &mut Host, sql: &str, conn: u64) -> (u32, Vec<u8>) {
    let acts = h.client(&query(sql));
    let server = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { server, .. } => Some(*server),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no AcquireReader in {acts:?}"));
    h.event(
        conn,
        Event::ReaderAttached {
            server,
            fresh: false,
            needs_reset: false,
        },
    );
    (server, h.take_sent(conn))
}

/// The reader answers the wrapped statement: `hidden` SETs, then rows, then an RFQ with LSN.
fn reader_answers(h: &mut Host, conn: u64, hidden: usize, rows: &[&str], lsn: u64) -> Vec<A> {
    let mut b = Vec::new();
    for _ in 0..hidden {
        b.extend(command_complete("SET"));
    }
    b.extend(select_result(rows));
    b.extend(rfq(b'I', Some(lsn), None));
    h.backend(conn, &b)
}

#[test]
fn w1_startup_goes_to_the_writer_with_role_keys_and_rfq_is_standard() {
    let mut h = Host::new(config(&[]));
    let s = startup(&[
        ("user", "app"),
        ("_polar_proxy_send_lsn", "1"),
        ("database", "db"),
    ]);
    let acts = h.client(&s);
    let A::ConnectWriter(bytes) = &acts[1] else {
        panic!("{acts:?}")
    };
    assert_eq!(acts[0], A::DropClient(s.len()));
    match StartupPacket::parse(&bytes[4..]).unwrap() {
        StartupPacket::Startup { params, .. } => {
            assert_eq!(params.get("user"), Some(&b"app"[..]));
            assert_eq!(params.get("_polar_proxy_send_lsn"), Some(&b"1"[..]));
            assert_eq!(params.get("_polar_proxy_send_xact"), Some(&b"1"[..]));
            assert_eq!(
                params.get("_polar_proxy_client_host"),
                Some(&b"10.0.0.7"[..])
            );
            assert_eq!(params.get("_polar_proxy_client_port"), Some(&b"40000"[..]));
        }
        _ => panic!(),
    }
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(backend_key(5, 6));
    auth.extend(rfq(b'I', Some(0x500), None));
    h.backend(WRITER, &auth);
    // The client asked for LSNs itself: its RFQ carries one (P-8), the rest is forwarded.
    let got = h.take_client();
    let m = messages(&got);
    assert_eq!(tags(&got), "RKZ");
    // The session has observed nothing yet: its target is zero.
    assert_eq!(m[2].1.len(), 9);
    assert_eq!(
        parse_client_rfq(&m[2].1),
        (polarsplit::TxStatus::Idle, None)
    );
    assert_eq!(h.session.backend_key(), Some((5, &[0, 0, 0, 6][..])));
}

#[test]
fn w1_stock_profile_sends_no_polar_keys() {
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ]));
    let acts = h.client(&startup(&[("user", "u")]));
    let A::ConnectWriter(bytes) = &acts[1] else {
        panic!()
    };
    match StartupPacket::parse(&bytes[4..]).unwrap() {
        StartupPacket::Startup { params, .. } => {
            assert!(params.iter().all(|(k, _)| !k.starts_with(b"_polar_")));
        }
        _ => panic!(),
    }
}

#[test]
fn p3_step8_read_without_target_goes_to_a_reader_unwrapped() {
    let mut h = host();
    let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = 7";
    let (server, sent) = read_on_reader(&mut h, sql, R1);
    assert!(server == 1 || server == 2);
    assert_eq!(
        sent,
        query(sql),
        "no hidden statements when there is nothing to wait for"
    );
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.wait),
        (Outcome::ReplicaWithWait, Reason::ReadNoTarget, false)
    );
    let acts = reader_answers(&mut h, R1, 0, &["42"], 0x1500);
    assert!(acts.contains(&A::Release {
        conn: R1,
        needs_reset: false
    }));
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(client_rfq_statuses(&got), vec![b'I']);
    assert!(h.streams.balanced());
    // The reader's replay position is now the session's observed LSN (P-6).
    assert_eq!(h.session.lsn_state().observed_lsn.0, 0x1500);
}

#[test]
fn w4_write_then_read_waits_with_exact_wrapper_and_swallows_the_sets() {
    let mut h = host();
    let acts = h.client(&query("INSERT INTO t VALUES (1)"));
    assert!(acts.contains(&A::FwdClient {
        conn: WRITER,
        n: query("INSERT INTO t VALUES (1)").len()
    }));
    assert_eq!(h.last_decision().reason, Reason::NotARead);
    h.writer_answers("INSERT 0 1", b'I', Some(97_500_059_720), None);
    assert_eq!(h.session.lsn_state().write_lsn.0, 97_500_059_720);
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'I']);

    let sql = "SELECT status FROM orders WHERE id = 42";
    let (_, sent) = read_on_reader(&mut h, sql, R1);
    assert_eq!(
        sent_queries(&sent),
        vec![format!(
            "SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 1000; SET polar_xact_split_wait_lsn = '97500059720'; {sql}"
        )]
    );
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.wait, d.target.0),
        (
            Outcome::ReplicaWithWait,
            Reason::ReadWait,
            true,
            97_500_059_720
        )
    );
    reader_answers(&mut h, R1, 3, &["pending"], 97_500_059_800);
    let got = h.take_client();
    // P-8: no hidden result reaches the client; one standard RFQ.
    assert_eq!(tags(&got), "TDCZ");
    assert!(!got.windows(3).any(|w| w == b"SET"));
    assert!(h.streams.balanced());
}

#[test]
fn p4_caught_up_reader_is_preferred_and_the_wait_dropped() {
    let mut h = host();
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'I', Some(5000), None);
    h.engine.reader_sample(2, polarsplit::Lsn(6000), h.now);
    let (server, sent) = read_on_reader(&mut h, "SELECT v FROM t", R1);
    assert_eq!(server, 2, "the reader known to have replayed the target");
    assert_eq!(sent, query("SELECT v FROM t"));
    let d = h.last_decision();
    assert_eq!((d.reason, d.wait), (Reason::ReadCaughtUp, false));
}

#[test]
fn p4_stale_sample_does_not_skip_the_wait() {
    let mut h = host();
    h.now = 20_000;
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'I', Some(5000), None);
    h.engine
        .reader_sample(2, polarsplit::Lsn(6000), h.now - 10_000);
    let (_, sent) = read_on_reader(&mut h, "SELECT v FROM t", R1);
    assert!(sent_queries(&sent)[0].contains("polar_xact_split_wait_lsn = '5000'"));
}

#[test]
fn p4_reader_unavailable_falls_back_to_the_writer_unwrapped() {
    let mut h = host();
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'I', Some(5000), None);
    let sql = "SELECT v FROM t";
    let acts = h.client(&query(sql));
    assert!(matches!(acts.last(), Some(A::Acquire { .. })));
    h.event(
        0,
        Event::ReaderUnavailable {
            no_credentials: false,
        },
    );
    assert!(h.take_sent(WRITER).ends_with(&query(sql)));
    assert_eq!(h.last_decision().reason, Reason::NoReaderConnection);
    h.writer_answers("SELECT 0", b'I', Some(5100), None);
    assert!(h.streams.balanced());
}

#[test]
fn p4_no_healthy_reader_uses_read_fallback() {
    let mut h = host();
    h.engine.set_reader_health(1, false);
    h.engine.set_reader_health(2, false);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::NoReaderAvailable);

    let mut h = Host::new(config(&[("read_fallback", ReadFallback::Error.as_str())]));
    h.connect();
    h.engine.set_reader_health(1, false);
    h.engine.set_reader_health(2, false);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().outcome, Outcome::Reject);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(got.windows(5).any(|w| w == b"55000"));
}

#[test]
fn p3_step1_mode_off_is_passthrough_and_no_reader_hostgroup_is_primary() {
    let mut h = Host::new(config(&[("consistency", Consistency::Off.as_str())]));
    h.connect();
    let q = query("SELECT 1");
    let acts = h.client(&q);
    assert!(acts.contains(&A::FwdClient {
        conn: WRITER,
        n: q.len()
    }));
    assert_eq!(h.last_decision().reason, Reason::ModeOff);
    assert_eq!(h.last_decision().outcome, Outcome::Passthrough);

    let mut h = Host::new(config(&[("reader_hostgroup", "none")]));
    h.connect();
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::NoReaderHostgroup);
}

#[test]
fn p3_step2_not_replica_safe_reasons() {
    for (sql, reason) in [
        ("SELECT 1; SELECT 2", Reason::MultiStatement),
        ("/* route=primary */ SELECT 1", Reason::HintPrimary),
        ("SELECT * FROM t FOR UPDATE", Reason::LockingClause),
        (
            "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
            Reason::DataModifyingCte,
        ),
        ("SELECT * INTO t2 FROM t", Reason::SelectInto),
        ("SELECT nextval('s')", Reason::WriteFunction),
        ("EXPLAIN ANALYZE SELECT 1", Reason::ExplainAnalyze),
        ("INSERT INTO t VALUES (1)", Reason::NotARead),
    ] {
        let mut h = host();
        h.client(&query(sql));
        let d = h.last_decision();
        assert_eq!(
            (d.outcome, d.reason),
            (Outcome::ForcePrimary, reason),
            "{sql}"
        );
    }
}

#[test]
fn s4_hazard_keeps_reads_on_the_writer_until_cleared() {
    let mut h = host();
    h.take_sent(WRITER);
    // A capture now and then asks the writer whether temporary objects are left (S-4): the
    // writer says they are.
    let answer_capture = |h: &mut Host| {
        if sends_capture(&h.take_sent(WRITER)) {
            h.backend(
                WRITER,
                &capture_answer_with("app", &[], None, &[(4, "temp")]),
            );
        }
    };
    h.client(&query("CREATE TEMP TABLE tmp (a int)"));
    let acts = h.writer_answers("CREATE TABLE", b'I', Some(0x2000), None);
    assert!(acts.contains(&A::PinWriter(true)));
    answer_capture(&mut h);
    h.client(&query("SELECT * FROM tmp"));
    assert_eq!(h.last_decision().reason, Reason::SessionHazard);
    h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
    answer_capture(&mut h);
    h.client(&query("DISCARD TEMP"));
    let acts = h.writer_answers("DISCARD TEMP", b'I', Some(0x2000), None);
    assert!(acts.contains(&A::PinWriter(false)));
    let acts = h.client(&query("SELECT 1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

/// S-4: a hazard the engine set when it saw temporary objects or SQL-prepared statements made
/// ends when a capture finds none left on the writer: a temporary table dropped (or rolled back,
/// or dropped at COMMIT), `DEALLOCATE name`. Before, only `DISCARD` and `DEALLOCATE ALL` ended
/// them, and the session read on the writer for good (an examiner's finding of 2026-12-05: a
/// pooled connection that bulk-loaded through a temporary table, 0 of 100 against 100 of 100).
/// While they are left, the capture asks again after 1, 2, 4, … 64 statements.
#[test]
fn s4_temp_and_prepare_hazards_end_when_the_writer_shows_none_left() {
    for (make, made_tag, kind, name, drop, drop_tag) in [
        (
            "CREATE TEMP TABLE tmp (a int)",
            "CREATE TABLE",
            4u8,
            "temp",
            "DROP TABLE tmp",
            "DROP TABLE",
        ),
        (
            "PREPARE p AS SELECT 1",
            "PREPARE",
            6,
            "prepared",
            "DEALLOCATE p",
            "DEALLOCATE",
        ),
    ] {
        let mut h = host();
        h.take_sent(WRITER);
        h.client(&query(make));
        let acts = h.writer_answers(made_tag, b'I', Some(0x2000), None);
        assert!(acts.contains(&A::PinWriter(true)), "{make}");
        // Still there: the checks back off.
        let mut checked = Vec::new();
        for n in 0..20 {
            if sends_capture(&h.take_sent(WRITER)) {
                checked.push(n);
                h.backend(
                    WRITER,
                    &capture_answer_with("app", &[], None, &[(kind, name)]),
                );
            }
            h.client(&query("SELECT a FROM t"));
            assert_eq!(h.last_decision().reason, Reason::SessionHazard, "{make}");
            h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
        }
        assert_eq!(checked, vec![0, 1, 3, 7, 15], "{make}");
        // Gone: the next check (at most 32 statements on) finds none, and reads leave the writer.
        h.take_sent(WRITER);
        h.client(&query(drop));
        h.writer_answers(drop_tag, b'I', Some(0x2000), None);
        let mut n = 0;
        while !sends_capture(&h.take_sent(WRITER)) {
            n += 1;
            assert!(n <= 32, "{make}: a check within 32 statements");
            h.client(&query("SELECT a FROM t"));
            h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
        }
        let acts = h.backend(WRITER, &capture_answer_with("app", &[], None, &[]));
        assert!(acts.contains(&A::PinWriter(false)), "{make}: {acts:?}");
        let acts = h.client(&query("SELECT a FROM t"));
        assert!(
            acts.iter().any(|a| matches!(a, A::Acquire { .. })),
            "{make}: {acts:?}"
        );
    }
}

/// S-5/S-4: after `setseed()` the session's random sequence exists on the writer only (a reader's
/// `random()` is unseeded; found by an examiner: the proxy answered the standby's values where the
/// primary answers its seeded sequence), and `DISCARD ALL` does not reset it.
#[test]
fn s4_setseed_keeps_the_sessions_reads_on_the_writer_for_the_session() {
    let mut h = host();
    h.client(&query("SELECT setseed(0.5)"));
    let acts = h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    assert!(acts.contains(&A::PinWriter(true)), "{acts:?}");
    for sql in ["SELECT random()", "SELECT a FROM t"] {
        h.client(&query(sql));
        assert_eq!(h.last_decision().reason, Reason::SessionHazard, "{sql}");
        h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    }
    h.client(&query("DISCARD ALL"));
    let acts = h.writer_answers("DISCARD ALL", b'I', Some(0x2000), None);
    assert!(!acts.contains(&A::PinWriter(false)), "{acts:?}");
    let acts = h.client(&query("SELECT random()"));
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

/// S-6/S-7/F-policy: DDL a session runs may add what the host's catalogue lacks (a view over
/// `set_config`, a function shadowing a built-in, a sequence; found by an examiner: a
/// `CREATE FUNCTION public.initcap` through the proxy ran on a reader for 10 s as the built-in).
/// The database's reads then stay on the writer until the host reports it again; inside a block
/// the mark is renewed when the block ends (a load before its COMMIT did not see it).
#[test]
fn s6_ddl_keeps_the_databases_reads_on_the_writer_until_the_next_catalogue_report() {
    let mut h = host();
    let e = h.engine.clone();
    e.set_function_catalog(b"db", []).unwrap();
    h.client(&query("CREATE VIEW v AS SELECT 1"));
    // Marked when sent: a standby may replay it before its answer reaches the engine, and
    // another session's read decided meanwhile would run the new definition there.
    assert!(e.catalog_changed(b"db"), "marked when sent");
    h.writer_answers("CREATE VIEW", b'I', Some(0x2000), None);
    assert!(e.catalog_changed(b"db"));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::CatalogChanged);
    h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    e.catalog_load_started(b"db");
    e.set_function_catalog(b"db", []).unwrap();
    assert!(!e.catalog_changed(b"db"));
    // In a block: marked at the statement, and again at its end.
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x2000), None);
    h.client(&query("DROP VIEW v"));
    h.writer_answers("DROP VIEW", b'T', Some(0x2000), None);
    assert!(e.catalog_changed(b"db"));
    e.catalog_load_started(b"db");
    e.set_function_catalog(b"db", []).unwrap();
    assert!(!e.catalog_changed(b"db"), "a load during the block");
    h.client(&query("COMMIT"));
    h.writer_answers("COMMIT", b'I', Some(0x2000), None);
    assert!(e.catalog_changed(b"db"), "renewed at the block's end");
    // DDL that changes no catalogue does not.
    e.set_function_catalog(b"db", []).unwrap();
    h.client(&query("CREATE INDEX i ON t (a)"));
    h.writer_answers("CREATE INDEX", b'I', Some(0x2000), None);
    assert!(!e.catalog_changed(b"db"));
}

/// S-6/S-7/F-policy across engines: a host with one engine per process (Pgpool-II's children)
/// shares the count of DDL its sessions ran (`sessions_ddl`) and reports it to the other engines
/// (`catalog_changed_elsewhere`): a session already open there keeps the database's reads on the
/// writer from its next statement until that engine's next load, and DDL reported that way is
/// not counted again (it would echo between the processes).
#[test]
fn s6_ddl_reported_from_another_engine_keeps_open_sessions_reads_on_the_writer() {
    let mut a = host();
    let mut b = host();
    let (ea, eb) = (a.engine.clone(), b.engine.clone());
    ea.set_function_catalog(b"db", []).unwrap();
    eb.set_function_catalog(b"db", []).unwrap();
    assert_eq!((ea.sessions_ddl(), eb.sessions_ddl()), (0, 0));
    // b's session is open and reads on a reader.
    read_on_reader(&mut b, "SELECT 1", R1);
    reader_answers(&mut b, R1, 0, &["1"], 0x100);
    // a's session runs DDL: counted when its answer is seen.
    a.client(&query("CREATE VIEW v AS SELECT pg_is_in_recovery()"));
    a.writer_answers("CREATE VIEW", b'I', Some(0x2000), None);
    assert_eq!(ea.sessions_ddl(), 1);
    assert!(
        !eb.catalog_changed(b"db"),
        "engines share nothing by themselves"
    );
    // The host tells b's engine: its open session's next read stays on the writer.
    eb.catalog_changed_elsewhere(b"db");
    assert!(eb.catalog_changed(b"db"));
    assert_eq!(eb.sessions_ddl(), 0, "not counted again");
    b.client(&query("SELECT * FROM v"));
    assert_eq!(b.last_decision().reason, Reason::CatalogChanged);
    b.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    // Another database is not touched; b's next load ends it.
    eb.catalog_changed_elsewhere(b"other");
    assert!(
        !eb.catalog_changed(b"other"),
        "never reported: the host's first load"
    );
    eb.catalog_load_started(b"db");
    eb.set_function_catalog(b"db", []).unwrap();
    assert!(!eb.catalog_changed(b"db"));
    read_on_reader(&mut b, "SELECT 2", R1);
}

#[test]
fn p3_step4_eventual_reads_never_wait() {
    let mut h = Host::new(config(&[("consistency", Consistency::Eventual.as_str())]));
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x9000), None);
    let (_, sent) = read_on_reader(&mut h, "SELECT 1", R1);
    assert_eq!(sent, query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::EventualRead);
}

#[test]
fn p6_missing_lsn_after_a_write_takes_the_missing_lsn_action() {
    for (action, outcome, reason) in [
        (
            OnMissingLsn::Primary,
            Outcome::ForcePrimary,
            Reason::MissingLsnPrimary,
        ),
        (
            OnMissingLsn::Warning,
            Outcome::ReplicaWithWait,
            Reason::MissingLsnWarning,
        ),
        (
            OnMissingLsn::Error,
            Outcome::Reject,
            Reason::MissingLsnReject,
        ),
    ] {
        let mut h = Host::new(config(&[("on_missing_lsn", action.as_str())]));
        h.connect();
        h.client(&query("INSERT INTO t VALUES (1)"));
        h.writer_answers("INSERT 0 1", b'I', None, None);
        h.take_client();
        assert!(h.session.lsn_state().write_unknown);
        h.client(&query("SELECT 1"));
        let d = h.last_decision();
        if action == OnMissingLsn::Warning {
            // Decided when the reader is attached.
            h.attach(R1);
            let got = h.take_client();
            assert_eq!(tags(&got), "N", "the warning precedes the result");
        } else {
            assert_eq!((d.outcome, d.reason), (outcome, reason));
        }
        if action == OnMissingLsn::Warning {
            let d = h.last_decision();
            assert_eq!((d.outcome, d.reason, d.wait), (outcome, reason, false));
        }
    }
}

#[test]
fn p6_each_rfq_payload_state() {
    // Positioned after a read-only statement: observed only.
    let mut h = host();
    h.client(&query("SHOW search_path"));
    h.writer_answers("SHOW", b'I', Some(0x3000), None);
    let l = h.session.lsn_state();
    assert_eq!((l.write_lsn.0, l.observed_lsn.0), (0, 0x3000));
    // Present-zero after a write: the write's position is unknown.
    h.client(&query("DELETE FROM t"));
    h.writer_answers("DELETE 1", b'I', Some(0), None);
    assert!(h.session.lsn_state().write_unknown);
    // A later positioned writer RFQ clears it.
    h.client(&query("DELETE FROM t"));
    h.writer_answers("DELETE 1", b'I', Some(0x4000), None);
    let l = h.session.lsn_state();
    assert!(!l.write_unknown);
    assert_eq!(l.write_lsn.0, 0x4000);
    // Missing LSN on a reader that should report one: observed unknown.
    h.client(&query("SELECT 1"));
    h.attach(R1);
    let mut b = Vec::new();
    for _ in 0..3 {
        b.extend(command_complete("SET"));
    }
    b.extend(select_result(&["1"]));
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert!(h.session.lsn_state().observed_unknown);
}

#[test]
fn s2_generation_change_clears_the_session_lsns() {
    let mut h = host();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x9000), None);
    assert_eq!(h.session.lsn_state().target().0, 0x9000);
    h.engine.writer_changed(0);
    let (_, sent) = read_on_reader(&mut h, "SELECT 1", R1);
    assert_eq!(
        sent,
        query("SELECT 1"),
        "nothing to wait for in the new generation"
    );
    assert_eq!(h.session.lsn_state().target().0, 0);
    assert_eq!(
        h.engine.stats().get(polarsplit::Counter::GenerationResets),
        1
    );
}

#[test]
fn p8_reader_parameter_status_never_reaches_the_client() {
    let mut h = host();
    read_on_reader(&mut h, "SELECT 1", R1);
    let mut b = param_status("in_hot_standby", "on");
    b.extend(select_result(&["1"]));
    b.extend(rfq(b'I', Some(0x1100), None));
    h.backend(R1, &b);
    assert_eq!(tags(&h.take_client()), "TDCZ");
}

#[test]
fn pipelined_statements_are_decided_in_order() {
    let mut h = host();
    let mut both = query("INSERT INTO t VALUES (1)");
    both.extend(query("SELECT v FROM t"));
    let acts = h.client(&both);
    // Only the INSERT is routed; the SELECT waits for the INSERT's LSN.
    assert_eq!(
        acts.iter().filter(|a| matches!(a, A::Decision(_))).count(),
        1,
        "{acts:?}"
    );
    let acts = h.writer_answers("INSERT 0 1", b'I', Some(0x7000), None);
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert!(sent_queries(&h.take_sent(R1))[0].contains("'28672'"));
}

#[test]
fn s5_captured_state_is_replayed_on_a_fresh_reader_as_its_own_message_and_keys_it() {
    let mut h = host();
    let acts = h.client(&query("SELECT 1"));
    let key_before = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { key, .. } => Some(*key),
            _ => None,
        })
        .unwrap();
    h.attach(R1);
    reader_answers(&mut h, R1, 0, &["1"], 0x1000);
    h.take_sent(R1);
    h.take_client();
    // The SET is followed, in the same write, by the capture of the writer's state (S-5).
    h.client(&query("SET search_path = app, public"));
    assert!(sends_capture(&h.take_sent(WRITER)), "capture pipelined");
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    // Until the capture answers, a read waits (its state is not known yet).
    let acts = h.client(&query("SELECT 2"));
    assert!(
        !acts
            .iter()
            .any(|a| matches!(a, A::Acquire { .. } | A::Decision(_))),
        "{acts:?}"
    );
    let acts = h.backend(
        WRITER,
        // Not parsed again: the capture at the session's start parsed it (S-5).
        &capture_answer(&[("search_path", "app, public")], None),
    );
    let (server, key_after) = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { server, key } => Some((*server, *key)),
            _ => None,
        })
        .expect("the read goes to a reader once the state is known");
    assert_ne!(
        key_before, key_after,
        "P-9: the captured state is part of the key"
    );
    assert_eq!(key_before.auth_hash, key_after.auth_hash);
    // The capture's rows never reach the client.
    assert_eq!(tags(&h.take_client()), "CZ");
    // A fresh connection is brought in line by the replay, its own message, before the read.
    h.event(
        R1,
        Event::ReaderAttached {
            server,
            fresh: true,
            needs_reset: false,
        },
    );
    let sent = sent_queries(&h.take_sent(R1));
    assert_eq!(sent.len(), 1, "only the replay until it answered: {sent:?}");
    assert!(
        sent[0].starts_with("SELECT pg_catalog.set_config("),
        "{sent:?}"
    );
    assert!(
        !sent[0].contains("app, public"),
        "values travel hex-encoded"
    );
    let mut replay = row_description(1);
    replay.extend(data_row(&["app, public"]));
    replay.extend(command_complete("SELECT 1"));
    replay.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &replay);
    assert_eq!(sent_queries(&h.take_sent(R1)), vec!["SELECT 2".to_string()]);
    reader_answers(&mut h, R1, 0, &["2"], 0x1000);
    assert_eq!(
        tags(&h.take_client()),
        "TDCZ",
        "nothing of the replay reaches the client"
    );
    // RESET: captured again; back to the startup key.
    h.client(&query("RESET search_path"));
    let mut ans = command_complete("RESET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(&[], None));
    h.backend(WRITER, &ans);
    let acts = h.client(&query("SELECT 3"));
    let key_reset = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { key, .. } => Some(*key),
            _ => None,
        })
        .unwrap();
    assert_eq!(key_reset, key_before);
    h.event(
        0,
        Event::ReaderUnavailable {
            no_credentials: false,
        },
    );
    h.writer_answers("SELECT 1", b'I', Some(0x1000), None);
    // A placeholder setting is asked for by name in the capture and replayed like any other.
    h.take_sent(WRITER);
    h.client(&query("SET myapp.tenant = 5"));
    let sent = h.take_sent(WRITER);
    assert!(
        String::from_utf8_lossy(&sent).contains("{\"myapp.tenant\"}"),
        "the capture in the same write asks for the new name"
    );
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(&[("myapp.tenant", "5")], None));
    h.backend(WRITER, &ans);
    let acts = h.client(&query("SELECT 4"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

#[test]
fn s5_a_failed_capture_keeps_reads_on_the_writer() {
    let mut h = host();
    h.client(&query("SET search_path = app"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    // The capture's Bind fails (the session's start parsed the statement already).
    ans.extend(error("ERROR", "42501", "permission denied", None, None));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SessionStateUnknown);
}

/// S-5: a failed capture is tried again, after 1, 2, 4, … 64 writer statements (failures in a
/// row double the wait), and the first that succeeds puts the session's reads back on readers.
/// Before, a failure kept them on the writer until the session's state changed again: a cancel
/// or a statement timeout that hit the capture once (a transient cause) cost the session its
/// offload for good.
#[test]
fn s5_a_failed_capture_is_tried_again_with_a_backoff_and_the_reads_come_back() {
    let mut h = host();
    h.client(&query("SET search_path = app"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(error(
        "ERROR",
        "57014",
        "canceling statement due to user request",
        None,
        None,
    ));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    h.take_sent(WRITER);
    // Reads on the writer; after each, whether a capture followed (answered with an error).
    let mut captured_after = Vec::new();
    for n in 0..40 {
        h.client(&query("SELECT 1"));
        assert_eq!(
            h.last_decision().reason,
            Reason::SessionStateUnknown,
            "read {n}"
        );
        h.writer_answers("SELECT 1", b'I', Some(0x1000), None);
        let capture = sends_capture(&h.take_sent(WRITER));
        if capture {
            captured_after.push(n);
            let mut e = error(
                "ERROR",
                "57014",
                "canceling statement due to statement timeout",
                None,
                None,
            );
            e.extend(rfq(b'I', None, None));
            h.backend(WRITER, &e);
        }
        h.take_client();
    }
    // After the 1st failure the next statement, then 2, 4, 8, 16 later.
    assert_eq!(captured_after, vec![0, 2, 6, 14, 30], "{captured_after:?}");
    // The next one succeeds: the reads leave the writer.
    let mut last = 0;
    for n in 40..120 {
        h.client(&query("SELECT 1"));
        h.writer_answers("SELECT 1", b'I', Some(0x1000), None);
        if sends_capture(&h.take_sent(WRITER)) {
            last = n;
            h.backend(WRITER, &capture_answer(&[("search_path", "app")], None));
            break;
        }
        h.take_client();
    }
    assert_eq!(
        last,
        30 + 32,
        "a wait of 32 statements after the 5th failure"
    );
    h.take_client();
    let acts = h.client(&query("SELECT 2"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

#[test]
fn reader_without_credentials_keeps_the_session_on_the_writer() {
    let mut h = host();
    h.client(&query("SELECT 1"));
    h.event(
        0,
        Event::ReaderUnavailable {
            no_credentials: true,
        },
    );
    assert_eq!(h.last_decision().reason, Reason::ReaderNoCredentials);
    h.writer_answers("SELECT 1", b'I', Some(0x1000), None);
    let acts = h.client(&query("SELECT 2"));
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "never asks again"
    );
    assert_eq!(h.last_decision().reason, Reason::ReaderNoCredentials);
}

#[test]
fn p6_a_read_the_writer_answered_without_its_position_makes_the_session_position_unknown() {
    // The writer shows its latest state to a read it answers; if its RFQ then lacks the LSN
    // it should carry, the session has seen a state newer than any position it knows, and a
    // later read on a reader that reached only the older target could go back in time
    // (monotonic reads; simulator, reader_faults family, seed 35).
    let mut h = host();
    h.client(&query("/* route=primary */ SELECT v FROM t"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    h.take_sent(WRITER);
    let mut ans = select_result(&["1"]);
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    h.take_client();
    h.client(&query("SELECT v FROM t"));
    assert_eq!(
        (h.last_decision().outcome, h.last_decision().reason),
        (Outcome::ForcePrimary, Reason::MissingLsnPrimary)
    );
    // The writer reports a position again: reads go back to readers, waiting for it.
    let mut ans = select_result(&["1"]);
    ans.extend(rfq(b'I', Some(0x5000), None));
    h.backend(WRITER, &ans);
    h.take_client();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.target),
        (Outcome::ReplicaWithWait, polarsplit::Lsn(0x5000)),
        "{d:?}"
    );
}

#[test]
fn p2_a_read_reaches_the_reader_the_same_decided_as_it_arrives_or_after_waiting() {
    // A read decided as it arrives is sent from the input (no copy kept); one that waits
    // behind another read is sent from the engine's copy. The reader gets the same bytes.
    let second = query("SELECT v FROM t WHERE k = 2");
    let mut h = host();
    h.client(&second);
    h.attach(R1);
    let alone = h.take_sent(R1);
    assert!(!alone.is_empty());

    let mut h = host();
    let mut both = query("SELECT v FROM t WHERE k = 1");
    both.extend(&second);
    h.client(&both);
    h.attach(R1);
    let first = h.take_sent(R1);
    assert!(sent_queries(&first)[0].contains("k = 1"), "{first:?}");
    let acts = reader_answers(&mut h, R1, 0, &["1"], 0x1000);
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "the second read is routed once the first answered: {acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.take_sent(R1), alone);
}

/// S-4: a session-level advisory lock keeps the session's reads on the writer while it is held;
/// the capture asks the writer whether one is (only while one may be: the empty name in its
/// `$1`), and the hazard ends when none is — `pg_advisory_unlock(key)` too, not only
/// `pg_advisory_unlock_all()` (an examiner's finding of 2026-12-05: a job queue's lock and
/// unlock on a pooled connection kept its reads on the primary for good, 0 of 100).
#[test]
fn s4_an_advisory_lock_released_by_key_ends_the_hazard() {
    let mut h = host();
    h.take_sent(WRITER);
    h.client(&query("SELECT pg_advisory_lock(42)"));
    let acts = h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    assert!(acts.contains(&A::PinWriter(true)), "{acts:?}");
    // Held: the capture asks, the writer says so.
    let sent = h.take_sent(WRITER);
    assert!(sends_capture(&sent), "{}", tags(&sent));
    assert!(
        sent.windows(3).any(|w| w == b"\"\"}"),
        "the capture asks for the advisory row"
    );
    h.backend(
        WRITER,
        &capture_answer_with("app", &[], None, &[(7, "advisory")]),
    );
    h.client(&query("SELECT a FROM t"));
    assert_eq!(h.last_decision().reason, Reason::SessionHazard);
    h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
    if sends_capture(&h.take_sent(WRITER)) {
        h.backend(
            WRITER,
            &capture_answer_with("app", &[], None, &[(7, "advisory")]),
        );
    }
    // Released by key: the next check finds none.
    h.client(&query("SELECT pg_advisory_unlock(42)"));
    h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    let mut n = 0;
    while !sends_capture(&h.take_sent(WRITER)) {
        n += 1;
        assert!(n <= 8, "a check within 8 statements");
        h.client(&query("SELECT a FROM t"));
        h.writer_answers("SELECT 0", b'I', Some(0x2000), None);
    }
    let acts = h.backend(WRITER, &capture_answer_with("app", &[], None, &[]));
    assert!(acts.contains(&A::PinWriter(false)), "{acts:?}");
    let acts = h.client(&query("SELECT a FROM t"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}

/// S-5/W-7: hidden work is never pipelined behind a statement that follows one still in flight
/// that drops every prepared statement (`DISCARD ALL`): the capture and the probe there were
/// bound by names the writer no longer had and failed (measured through the example proxy:
/// `DISCARD ALL` and `SELECT pg_advisory_lock(7)` in one packet, both hidden statements failed).
/// The capture follows `DISCARD ALL`'s answer, parsed again. Sent before the lock was known, it
/// does not ask about advisory locks — and so ends no such hazard (S-4).
#[test]
fn s5_no_hidden_work_behind_a_statement_that_follows_discard_all_in_flight() {
    let mut h = host();
    h.take_sent(WRITER);
    let mut both = query("DISCARD ALL");
    both.extend(query("SELECT pg_advisory_lock(7)"));
    h.client(&both);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "QQ",
        "nothing hidden behind either"
    );
    h.writer_answers("DISCARD ALL", b'I', Some(0x2000), None);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "",
        "nothing hidden while the client's next statement is queued on the writer"
    );
    h.writer_answers("SELECT 1", b'I', Some(0x2000), None);
    let sent = h.take_sent(WRITER);
    assert_eq!(tags(&sent), "CPBCES", "the capture behind it");
    assert!(
        sent.windows(3).any(|w| w == b"\"\"}"),
        "asked: the lock statement ran before it"
    );
    h.backend(
        WRITER,
        &capture_answer_with("app", &[], None, &[(7, "advisory")]),
    );
    h.take_client();
    h.client(&query("SELECT a FROM t"));
    assert_eq!(h.last_decision().reason, Reason::SessionHazard);
}
