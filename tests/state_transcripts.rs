//! Session state and protocol fidelity as protocol traces (SPEC S-5, S-6, F-1, P-8; issue 17):
//! the writer's state is learned from the writer and replayed on readers in the right order;
//! hidden statements never hide what the client is owed (notifications, parameter status);
//! readers that may carry state or a late cancel are never handed to another session.

mod common;

use common::*;
use polarsplit::{ConnId, Event, Reason};
use polarsplit::{ServerDialect, StartupProfile};

const R1: ConnId = 901;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

fn stock() -> Host {
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ]));
    h.engine.remove_reader(2);
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.take_client();
    h
}

fn notification(channel: &str, payload: &str) -> Vec<u8> {
    let mut b = 42i32.to_be_bytes().to_vec();
    b.extend_from_slice(channel.as_bytes());
    b.push(0);
    b.extend_from_slice(payload.as_bytes());
    b.push(0);
    msg(b'A', &b)
}

fn acquired(acts: &[A]) -> bool {
    acts.iter().any(|a| matches!(a, A::Acquire { .. }))
}

#[test]
fn p8_notifications_and_parameter_status_during_the_probe_reach_the_client() {
    // Issue 17 point 2: everything in the probe's answer but its own results was dropped.
    let mut h = stock();
    h.client(&query("INSERT INTO t VALUES (1)"));
    let mut ans = command_complete("INSERT 0 1");
    ans.extend(rfq(b'I', None, None));
    ans.extend(msg(b'1', b""));
    ans.extend(notification("jobs", "a"));
    ans.extend(msg(b'2', b""));
    ans.extend(param_status("application_name", "x"));
    ans.extend(notice("NOTICE", "from the probe", None));
    ans.extend(data_row(&["0/5000"]));
    ans.extend(notification("jobs", "b"));
    ans.extend(command_complete("SELECT 1"));
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    let got = h.take_client();
    // The client's answer, both notifications and the ParameterStatus; never the probe's
    // rows, completions, notices or RFQ.
    assert_eq!(tags(&got), "CZASA");
    assert!(h.streams.balanced());
}

/// `SET SESSION AUTHORIZATION ru; SET ROLE rr` on the writer, with the captures that report
/// them (and `timezone = UTC`).
fn authorization_and_role(h: &mut Host) {
    h.client(&query("SET SESSION AUTHORIZATION ru"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    h.backend(WRITER, &capture_answer(true, &[], None));
    h.client(&query("SET ROLE rr"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    let mut cap = msg(b'2', b"");
    cap.extend(data_row(&["1", &hex("timezone"), &hex("UTC")]));
    cap.extend(data_row(&["2", &hex("session_authorization"), &hex("ru")]));
    cap.extend(data_row(&["3", &hex("role"), &hex("rr")]));
    cap.extend(command_complete("SELECT 3"));
    cap.extend(rfq(b'I', None, None));
    h.backend(WRITER, &cap);
    h.take_client();
}

#[test]
fn s5_replay_runs_settings_then_session_authorization_then_role() {
    // Issue 17 point 4: `SET SESSION AUTHORIZATION ru; SET ROLE rr` replayed ROLE first let a
    // read succeed that the primary refused.
    let mut h = host();
    authorization_and_role(&mut h);
    assert!(acquired(&h.client(&query("SELECT secret FROM t"))));
    let server = 1;
    h.event(
        R1,
        Event::ReaderAttached {
            server,
            fresh: true,
            needs_reset: false,
        },
    );
    let replay = sent_queries(&h.take_sent(R1)).remove(0);
    let tz = replay.find(&hex("timezone")).expect("timezone replayed");
    let auth = replay
        .find(&hex("session_authorization"))
        .expect("session authorization replayed");
    let role = replay
        .find(&format!("'{}'", hex("role")))
        .expect("role replayed");
    assert!(tz < auth && auth < role, "{replay}");
}

#[test]
fn s5_reset_all_keeps_role_because_the_capture_says_so() {
    // Issue 17 point 4: RESET ALL does not reset role; the engine does not guess, it asks.
    let mut h = host();
    h.client(&query("SET ROLE readonly"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(true, &[], Some("readonly")));
    h.backend(WRITER, &ans);
    let k1 = {
        let acts = h.client(&query("SELECT 1"));
        h.event(
            0,
            Event::ReaderUnavailable {
                no_credentials: false,
            },
        );
        h.writer_answers("SELECT 1", b'I', Some(0x1000), None);
        acts.iter()
            .find_map(|a| match a {
                A::Acquire { key, .. } => Some(*key),
                _ => None,
            })
            .unwrap()
    };
    h.client(&query("RESET ALL"));
    assert!(sends_capture(&h.take_sent(WRITER)));
    let mut ans = command_complete("RESET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(false, &[], Some("readonly")));
    h.backend(WRITER, &ans);
    let acts = h.client(&query("SELECT 2"));
    let k2 = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { key, .. } => Some(*key),
            _ => None,
        })
        .unwrap();
    assert_eq!(k1, k2, "the role is still the session's");
}

#[test]
fn s5_a_set_inside_a_transaction_is_captured_after_it_ends_and_its_reads_stay_on_the_writer() {
    let mut h = host();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.client(&query("SET search_path = other"));
    assert!(
        !sends_capture(&h.take_sent(WRITER)),
        "no hidden query inside a block"
    );
    h.writer_answers("SET", b'T', Some(0x1000), Some((b'x', "")));
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SplitSetInTxn);
    h.writer_answers("SELECT 1", b'T', Some(0x1000), Some((b'x', "")));
    h.take_sent(WRITER);
    h.client(&query("ROLLBACK"));
    assert!(!sends_capture(&h.take_sent(WRITER)));
    h.writer_answers("ROLLBACK", b'I', Some(0x1000), None);
    assert!(
        sends_capture(&h.take_sent(WRITER)),
        "captured once it ended"
    );
    // Rolled back: the writer says nothing changed, and the read goes to a reader.
    h.backend(WRITER, &capture_answer(true, &[], None));
    assert!(acquired(&h.client(&query("SELECT 2"))));
}

#[test]
fn s5_code_the_engine_cannot_see_into_keeps_the_session_on_the_writer_unless_covered() {
    // A DO block with EXECUTE 'SET ROLE …' (issue 17 point 4), a set_config in a function
    // (point 5): captured, and without custom_settings the session stays on the writer.
    let mut h = host();
    h.client(&query("DO $$BEGIN EXECUTE 'SET ROLE r2'; END$$"));
    assert!(sends_capture(&h.take_sent(WRITER)));
    let mut ans = command_complete("DO");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(true, &[], Some("r2")));
    h.backend(WRITER, &ans);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::SessionHazard);
    // With the application's placeholder names declared, the capture covers them.
    let mut h = Host::new(config(&[("custom_settings", "app.tenant")]));
    h.engine.remove_reader(2);
    h.connect();
    h.client(&query(
        "DO $$BEGIN PERFORM set_config('app.tenant', 'acme', false); END$$",
    ));
    let sent = h.take_sent(WRITER);
    assert!(sends_capture(&sent));
    assert!(
        String::from_utf8_lossy(&sent).contains("\"app.tenant\""),
        "the capture asks for the declared name"
    );
    let mut ans = command_complete("DO");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(true, &[("app.tenant", "acme")], None));
    h.backend(WRITER, &ans);
    assert!(acquired(&h.client(&query("SELECT * FROM orders"))));
}

#[test]
fn f1_a_reader_a_cancel_was_forwarded_to_is_closed_not_pooled() {
    // Issue 17 point 7: an RFQ does not prove the cancel's signal has landed.
    let mut h = host();
    h.client(&query("SELECT pg_sleep(10)"));
    h.attach(R1);
    assert_eq!(h.session.executing_connection(), Some(R1));
    h.session.cancel_forwarded(R1);
    let mut b = error(
        "ERROR",
        "57014",
        "canceling statement due to user request",
        None,
        None,
    );
    b.extend(rfq(b'I', Some(0x1000), None));
    let acts = h.backend(R1, &b);
    assert!(acts.contains(&A::CloseBackend(R1)), "{acts:?}");
    assert!(!acts.iter().any(|a| matches!(a, A::Release { .. })));
    assert_eq!(tags(&h.take_client()), "EZ");
}

#[test]
fn s5_settings_replay_failure_closes_the_reader_and_the_read_runs_elsewhere() {
    let mut h = host();
    h.client(&query("SET search_path = app"));
    let mut ans = command_complete("SET");
    ans.extend(rfq(b'I', Some(0x1000), None));
    ans.extend(capture_answer(true, &[("search_path", "app")], None));
    h.backend(WRITER, &ans);
    h.take_client();
    h.take_sent(WRITER);
    h.client(&query("SELECT v FROM t"));
    h.event(
        R1,
        Event::ReaderAttached {
            server: 1,
            fresh: true,
            needs_reset: false,
        },
    );
    h.take_sent(R1);
    let mut b = error(
        "ERROR",
        "42501",
        "permission denied to set parameter",
        None,
        None,
    );
    b.extend(rfq(b'I', Some(0x1000), None));
    let acts = h.backend(R1, &b);
    assert!(acts.contains(&A::CloseBackend(R1)), "{acts:?}");
    // Never the client's statement on a connection with the wrong state.
    assert!(h.take_sent(R1).is_empty());
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    assert_eq!(h.take_sent(WRITER), query("SELECT v FROM t"));
    h.writer_answers("SELECT 0", b'I', Some(0x1000), None);
    assert_eq!(tags(&h.take_client()), "CZ");
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The AcquireReader after `sql`, with its key and startup bytes (polled by hand: the test
/// harness's action mirror keeps no startup bytes).
fn acquire_with_startup(h: &mut Host, sql: &str) -> (polarsplit::ReaderKey, Vec<u8>) {
    h.session.recv_client(&query(sql), h.now).unwrap();
    let mut got = None;
    while let Some(a) = h.session.poll_action() {
        if let polarsplit::Action::AcquireReader { key, startup, .. } = a {
            got = Some((key, startup.to_vec()));
        }
    }
    got.expect("an AcquireReader")
}

/// The key a host computes with the builder from what the connection is opened with.
fn built_key(h: &Host, startup: &[u8], settings: &[(&[u8], &[u8])]) -> polarsplit::ReaderKey {
    use polarsplit::internals::protocol::startup::StartupPacket;
    let StartupPacket::Startup { params, .. } = StartupPacket::parse(&startup[4..]).unwrap() else {
        panic!("not a StartupMessage");
    };
    let (user, db) = (params.get("user").unwrap(), params.get("database").unwrap());
    let mut b = polarsplit::ReaderKeyBuilder::new(h.engine.profile_generation(), user, db);
    let host = params.get("_polar_proxy_client_host").unwrap();
    let port: u16 = std::str::from_utf8(params.get("_polar_proxy_client_port").unwrap())
        .unwrap()
        .parse()
        .unwrap();
    b.identity(true, host, port);
    for (k, v) in params.iter() {
        b.startup_param(k, v);
    }
    for (k, v) in settings {
        b.setting(k, v);
    }
    b.build()
}

#[test]
fn p9_a_sessions_reader_key_is_the_builders_key_of_its_startup_and_state() {
    // A host that opens reader connections itself (a warm pool) keys them with the builder
    // (`polarsplit_reader_key_build`); a session's AcquireReader must ask for the same key, or
    // the host's connections would never serve it. Fresh, then after SET SESSION
    // AUTHORIZATION and SET ROLE with a tracked setting.
    let mut h = host();
    let (key, startup) = acquire_with_startup(&mut h, "SELECT 1");
    assert_eq!(key, built_key(&h, &startup, &[]));

    let mut h = host();
    authorization_and_role(&mut h);
    let (key, startup) = acquire_with_startup(&mut h, "SELECT secret FROM t");
    let want = built_key(
        &h,
        &startup,
        &[
            (b"timezone", b"UTC"),
            (polarsplit::AUTHORIZATION_KEY, b"ru"),
            (polarsplit::ROLE_KEY, b"rr"),
        ],
    );
    assert_eq!(key, want);
    // And the role is in it: without the role the builder gives another key.
    let without = built_key(
        &h,
        &startup,
        &[
            (b"timezone", b"UTC"),
            (polarsplit::AUTHORIZATION_KEY, b"ru"),
        ],
    );
    assert_ne!(key, without);
}
