//! W-1: startup keys, what the server refuses (FATAL, NOTES.md) and what it accepts.
mod common;

use common::*;
use polarsplit::internals::protocol::RfqExtensions;
use polarsplit::{LsnField, TxStatus};
use polarsplit_sim::client::{self, Decoder, Msg};
use polarsplit_sim::history::Event;
use polarsplit_sim::{ConnectError, Dialect, ServerId, ServerRef};

fn param<'a>(m: &'a [Msg], name: &str) -> Option<&'a str> {
    m.iter().find_map(|m| match m {
        Msg::ParameterStatus(k, v) if k == name => Some(v.as_str()),
        _ => None,
    })
}

/// The startup fails with exactly this FATAL, then the connection closes.
fn assert_fatal(dialect: Dialect, params: &[(&str, &str)], code: &str, message: &str) {
    let mut c = cluster(dialect);
    let (conn, m) = open(&mut c, ServerRef::Primary, &client::startup(params), NONE);
    let f = error(&m).unwrap_or_else(|| panic!("{params:?}: no error in {m:?}"));
    assert_eq!(f.severity(), Some("FATAL"));
    assert_eq!(f.code(), Some(code), "{params:?}");
    assert_eq!(f.message(), Some(message), "{params:?}");
    assert!(!m.iter().any(|m| matches!(m, Msg::AuthOk)));
    assert!(c.is_closed(conn.id));
    assert!(c.history().iter().any(|e| matches!(
        &e.event,
        Event::ConnectionRefused { sqlstate, .. } if sqlstate == code
    )));
}

#[test]
fn w1_v15_keys_accepted_with_parameter_status_and_lsn_rfq() {
    let mut c = cluster(Dialect::Awide);
    let (_, m) = open(
        &mut c,
        ServerRef::Primary,
        &client::startup_v15("app", "db"),
        BOTH,
    );
    assert_eq!(m[0], Msg::AuthOk);
    assert_eq!(param(&m, "server_version"), Some("15.8"));
    assert_eq!(param(&m, "in_hot_standby"), Some("off"));
    assert_eq!(param(&m, "client_encoding"), Some("UTF8"));
    assert_eq!(param(&m, "DateStyle"), Some("ISO, MDY"));
    assert_eq!(param(&m, "integer_datetimes"), Some("on"));
    assert_eq!(param(&m, "standard_conforming_strings"), Some("on"));
    assert_eq!(param(&m, "session_authorization"), Some("app"));
    assert!(m.iter().any(|m| matches!(m, Msg::BackendKeyData { .. })));
    let (status, lsn, xact, len) = rfq(&m);
    assert_eq!((status, xact, len), (TxStatus::Idle, None, 13));
    assert_eq!(lsn, LsnField::At(c.insert_lsn()));

    let (_, m) = open(
        &mut c,
        ServerRef::Reader(0),
        &client::startup_v15("app", "db"),
        BOTH,
    );
    assert_eq!(param(&m, "in_hot_standby"), Some("on"));
    assert_eq!(rfq_lsn(&m), c.replay_lsn(ServerId(1)).unwrap());
}

#[test]
fn w1_send_lsn_without_identity_is_fatal_08p01() {
    assert_fatal(
        Dialect::Polardb,
        &[("user", "u"), ("_polar_proxy_send_lsn", "1")],
        "08P01",
        "[Proxy] Proxy is disabled, unable to use lsn or ssl",
    );
    assert_fatal(
        Dialect::Awide,
        &[("user", "u"), ("_polar_send_lsn", "1")],
        "08P01",
        "[Proxy] Proxy is disabled, unable to use lsn or ssl",
    );
}

#[test]
fn w1_only_one_identity_key_is_fatal_xx000() {
    for key in ["_polar_proxy_client_host", "_polar_proxy_client_port"] {
        assert_fatal(
            Dialect::Polardb,
            &[("user", "u"), ("_polar_proxy_send_lsn", "1"), (key, "1")],
            "XX000",
            "[Proxy] proxy info is incomplete.",
        );
    }
    assert_fatal(
        Dialect::Awide,
        &[("user", "u"), ("_polar_origin_client_ip", "10.0.0.1")],
        "XX000",
        "[Proxy] proxy info is incomplete.",
    );
}

#[test]
fn w1_legacy_profile_accepted() {
    let mut c = cluster(Dialect::Polardb);
    let (_, m) = open(
        &mut c,
        ServerRef::Primary,
        &client::startup(&[
            ("user", "u"),
            ("_polar_send_lsn", "1"),
            ("_polar_send_xact", "1"),
            ("_polar_origin_client_ip", "10.0.0.1"),
            ("_polar_origin_client_port", "4000"),
        ]),
        BOTH,
    );
    assert_eq!(rfq_lsn(&m), c.insert_lsn());
    assert!(c.history().iter().any(|e| matches!(
        e.event,
        Event::Connected {
            lsn_reporting: true,
            xact_reporting: true,
            ..
        }
    )));
}

#[test]
fn w1_send_xact_alone_needs_no_identity() {
    let ext = RfqExtensions {
        lsn: false,
        xact: true,
    };
    let mut c = cluster(Dialect::Awide);
    let (mut w, m) = open(
        &mut c,
        ServerRef::Primary,
        &client::startup(&[("user", "u"), ("_polar_proxy_send_xact", "1")]),
        ext,
    );
    // Idle: no LSN slot asked for, no marker.
    assert_eq!(rfq(&m).3, 5);
    let m = w.ok(&mut c, "BEGIN");
    let (status, lsn, xact, len) = rfq(&m);
    assert_eq!(status, TxStatus::InTransaction);
    assert_eq!(lsn, LsnField::Missing);
    assert_eq!(xact.unwrap().1, "");
    assert_eq!(len, 7); // status, 'x', NUL
}

#[test]
fn w1_stock_refuses_polar_keys_fatal() {
    assert_fatal(
        Dialect::Stock,
        &[
            ("user", "u"),
            ("_polar_proxy_send_lsn", "1"),
            ("_polar_proxy_client_host", "h"),
            ("_polar_proxy_client_port", "1"),
        ],
        "42704",
        "unrecognized configuration parameter \"_polar_proxy_send_lsn\"",
    );
}

#[test]
fn w1_unknown_key_without_dot_is_fatal_dotted_accepted() {
    for d in [Dialect::Awide, Dialect::Polardb, Dialect::Stock] {
        assert_fatal(
            d,
            &[("user", "u"), ("frobnicate", "1")],
            "42704",
            "unrecognized configuration parameter \"frobnicate\"",
        );
        assert_fatal(
            d,
            &[("user", "u"), ("_polar_unknown", "1")],
            "42704",
            "unrecognized configuration parameter \"_polar_unknown\"",
        );
    }
    let mut c = cluster(Dialect::Stock);
    let (mut conn, m) = open(
        &mut c,
        ServerRef::Primary,
        &client::startup(&[
            ("user", "u"),
            ("polarsplit.x", "7"),
            ("application_name", "app1"),
            ("options", "-c statement_timeout=5s --lock-timeout=100"),
        ]),
        NONE,
    );
    assert_eq!(param(&m, "application_name"), Some("app1"));
    assert_eq!(
        value(&conn.ok(&mut c, "SHOW polarsplit.x")),
        Some("7".into())
    );
    assert_eq!(
        value(&conn.ok(&mut c, "SHOW statement_timeout")),
        Some("5000".into())
    );
    assert_eq!(
        value(&conn.ok(&mut c, "SHOW lock_timeout")),
        Some("100".into())
    );
}

#[test]
fn w1_missing_user_is_fatal_28000() {
    assert_fatal(
        Dialect::Awide,
        &[("database", "db")],
        "28000",
        "no PostgreSQL user name specified in startup packet",
    );
}

#[test]
fn w1_plain_startup_gets_standard_rfq() {
    for d in [Dialect::Awide, Dialect::Polardb, Dialect::Stock] {
        let mut c = cluster(d);
        let mut w = plain(&mut c, ServerRef::Primary);
        let m = w.ok(&mut c, "BEGIN");
        assert_eq!(rfq(&m).3, 5, "{d:?}");
        let m = w.ok(&mut c, "INSERT INTO kv VALUES (100, 1)");
        assert_eq!(rfq(&m).3, 5, "{d:?}");
    }
}

#[test]
fn w1_ssl_request_answered_n_then_startup() {
    let mut c = cluster(Dialect::Awide);
    let id = c.connect(ServerRef::Primary).unwrap();
    let mut d = Decoder::new(BOTH);
    d.expect_ssl_answer();
    c.write(id, &client::ssl_request()).unwrap();
    c.write(id, &client::startup_v15("u", "d")).unwrap();
    let m = d.feed(&c.read_all(id));
    assert_eq!(m[0], Msg::SslRefused);
    assert_eq!(m[1], Msg::AuthOk);
    assert!(m.last().unwrap().is_rfq());
}

#[test]
fn w1_startup_bytes_may_arrive_one_at_a_time() {
    let mut c = cluster(Dialect::Awide);
    let id = c.connect(ServerRef::Primary).unwrap();
    let bytes = client::startup_v15("u", "d");
    for b in &bytes {
        assert!(c.read_all(id).is_empty());
        c.write(id, std::slice::from_ref(b)).unwrap();
    }
    let m = Decoder::new(BOTH).feed(&c.read_all(id));
    assert!(m.last().unwrap().is_rfq());
}

#[test]
fn w1_connect_to_stopped_server_fails() {
    let mut c = cluster(Dialect::Awide);
    c.stop_server(ServerId(1)).unwrap();
    assert_eq!(
        c.connect(ServerRef::Id(ServerId(1))),
        Err(ConnectError::ServerDown(ServerId(1)))
    );
    c.start_server(ServerId(1)).unwrap();
    assert!(c.connect(ServerRef::Id(ServerId(1))).is_ok());
    assert_eq!(
        c.connect(ServerRef::Reader(5)),
        Err(ConnectError::NoSuchServer)
    );
}
