//! Isolation between clients on reader connections (issue 10, SPEC P-9, W-3, W-4):
//! - property: over random sessions, the reader key of ACQUIRE_READER differs whenever the user,
//!   the database, the startup parameters, the client identity or the tracked settings differ,
//!   and is equal when they are equal (parameter order aside) — so a pooled reader connection
//!   never serves another user, database or settings;
//! - property: the statement the engine sends to a reader is only fixed text, validated numbers
//!   (XID list, LSN, timeout) and the client's own bytes, whatever XID list and LSN the writer
//!   reports; no byte of an invalid XID list reaches any backend.

mod common;

use std::collections::BTreeMap;

use common::{command_complete, query, rfq, startup, A, WRITER};
use polarsplit::Engine;
use polarsplit::Lsn;
use polarsplit::{Action, ClientInfo, Event, Outcome, Session};
use proptest::prelude::*;

// --- Reader keys ------------------------------------------------------------------------------

/// Session statements with the tracked setting they change: (SQL, name, Some(kept text) or None
/// for a reset).
const SETS: &[(&str, &str, bool)] = &[
    ("SET search_path = a", "search_path", true),
    ("SET search_path = b", "search_path", true),
    ("RESET search_path", "search_path", false),
    ("SET search_path TO DEFAULT", "search_path", false),
    ("SET TimeZone = 'UTC'", "timezone", true),
    ("SET statement_timeout = 5", "statement_timeout", true),
    ("SET ROLE bob", "role", true),
    ("RESET ROLE", "role", false),
    ("SET application_name = 'x'", "application_name", true),
];

/// Startup parameters (sorted), client identity, tracked settings (name → statement).
type Model<'a> = (
    Vec<(&'a str, &'a str)>,
    (&'a str, u16),
    BTreeMap<&'a str, &'a str>,
);

#[derive(Clone, Debug)]
struct Spec {
    /// Startup parameters in the order the client sends them.
    params: Vec<(&'static str, &'static str)>,
    identity: (&'static str, u16),
    sets: Vec<usize>,
}

impl Spec {
    /// What the reader key must capture: everything that makes a reader connection this
    /// client's — parameters as a set, identity, and the settings each statement left.
    fn model(&self) -> Model<'_> {
        let mut params = self.params.clone();
        params.sort();
        let mut settings = BTreeMap::new();
        for &i in &self.sets {
            let (sql, name, keeps) = SETS[i];
            if keeps {
                settings.insert(name, sql);
            } else {
                settings.remove(name);
            }
        }
        (params, self.identity, settings)
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::sample::select(vec!["alice", "bob", "Alice"]),
        prop::sample::select(vec![None, Some("db1"), Some("db2"), Some("alice")]),
        prop::sample::select(vec![None, Some("app1"), Some("app2")]),
        prop::sample::select(vec![("10.0.0.7", 40000u16), ("10.0.0.8", 40000)]),
        prop::collection::vec(0..SETS.len(), 0..4),
        any::<bool>(),
    )
        .prop_map(|(user, db, app, identity, sets, reversed)| {
            let mut params = vec![("user", user)];
            if let Some(d) = db {
                params.push(("database", d));
            }
            if let Some(a) = app {
                params.push(("application_name", a));
            }
            if reversed {
                params.reverse();
            }
            Spec {
                params,
                identity,
                sets,
            }
        })
}

/// Drives a session of `spec` on `engine` to its first read; returns the reader key.
fn reader_key(engine: &std::sync::Arc<Engine>, spec: &Spec) -> [u64; 4] {
    let mut s = Session::new(
        engine.clone(),
        ClientInfo {
            client_addr: Some((spec.identity.0.to_string(), spec.identity.1)),
            proxy_addr: None,
            writer_hostgroup: None,
        },
    );
    let drain = |s: &mut Session| {
        let mut key = None;
        while let Some(a) = s.poll_action() {
            if let Action::AcquireReader { key: k, .. } = a {
                key = Some([
                    k.profile_generation,
                    k.auth_hash,
                    k.startup_identity_hash,
                    k.startup_options_hash,
                ]);
            }
        }
        key
    };
    s.recv_client(&startup(&spec.params), 1).unwrap();
    drain(&mut s);
    s.on_backend_event(WRITER, Event::WriterConnected, 1)
        .unwrap();
    drain(&mut s);
    let mut b = common::auth_ok();
    b.extend(rfq(b'I', Some(0x1000), None));
    s.recv_backend(WRITER, &b, 1).unwrap();
    drain(&mut s);
    let user = spec
        .params
        .iter()
        .rev()
        .find(|(k, _)| *k == "user")
        .map_or("", |(_, v)| *v);
    // The capture that follows the writer's startup (S-5): no login-time settings.
    s.recv_backend(WRITER, &common::capture_answer_as(user, &[], None), 1)
        .unwrap();
    drain(&mut s);
    // The writer's state after each statement, as its capture reports it (S-5).
    let mut state: BTreeMap<&str, &str> = BTreeMap::new();
    for &i in spec.sets.iter() {
        s.recv_client(&query(SETS[i].0), 1).unwrap();
        drain(&mut s);
        let (sql, name, keeps) = SETS[i];
        let tag = if sql.starts_with("RESET") {
            "RESET"
        } else {
            "SET"
        };
        if keeps {
            state.insert(name, value_of(sql));
        } else {
            state.remove(name);
        }
        let mut b = command_complete(tag);
        b.extend(rfq(b'I', Some(0x1000), None));
        let role = state.get("role").copied();
        let settings: Vec<(&str, &str)> = state
            .iter()
            .filter(|(k, _)| **k != "role")
            .map(|(k, v)| (*k, *v))
            .collect();
        // Parsed on the writer by the capture at the session's start.
        b.extend(common::capture_answer_as(user, &settings, role));
        s.recv_backend(WRITER, &b, 1).unwrap();
        drain(&mut s);
    }
    s.recv_client(&query("SELECT v FROM t"), 1).unwrap();
    drain(&mut s).unwrap_or_else(|| panic!("no AcquireReader for {spec:?}"))
}

/// The value a SET of `SETS` leaves (as the server's `setting` text).
fn value_of(sql: &str) -> &str {
    let v = sql.rsplit_once(['=', ' ']).map(|(_, v)| v).unwrap_or(sql);
    v.trim_matches('\'')
}

fn engine() -> std::sync::Arc<Engine> {
    let e = Engine::new(polarsplit_test_support::default_config());
    e.add_reader(1, 1);
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn p9_reader_keys_differ_exactly_when_user_database_startup_or_settings_differ(
        a in spec(),
        b in spec(),
    ) {
        let e = engine();
        let (ka, kb) = (reader_key(&e, &a), reader_key(&e, &b));
        prop_assert_eq!(
            a.model() == b.model(),
            ka == kb,
            "models equal: {}, keys equal: {}\n{:?}\n{:?}",
            a.model() == b.model(),
            ka == kb,
            a,
            b
        );
        // A session's key is a pure function of its state.
        prop_assert_eq!(ka, reader_key(&engine(), &a));
    }
}

#[test]
fn p9_reader_keys_of_equal_sessions_are_equal_and_each_difference_shows() {
    let e = engine();
    let base = Spec {
        params: vec![("user", "alice"), ("database", "db1")],
        identity: ("10.0.0.7", 40000),
        sets: vec![0],
    };
    let k = reader_key(&e, &base);
    // Same state reached differently: parameter order, a setting set twice, set then reset.
    let same = [
        Spec {
            params: vec![("database", "db1"), ("user", "alice")],
            ..base.clone()
        },
        Spec {
            sets: vec![1, 0],
            ..base.clone()
        },
        Spec {
            sets: vec![6, 0, 7],
            ..base.clone()
        },
    ];
    for s in &same {
        assert_eq!(reader_key(&e, s), k, "{s:?}");
    }
    let different = [
        Spec {
            params: vec![("user", "bob"), ("database", "db1")],
            ..base.clone()
        },
        Spec {
            params: vec![("user", "alice"), ("database", "db2")],
            ..base.clone()
        },
        Spec {
            identity: ("10.0.0.8", 40000),
            ..base.clone()
        },
        Spec {
            sets: vec![],
            ..base.clone()
        },
        Spec {
            sets: vec![0, 6],
            ..base.clone()
        },
    ];
    for s in &different {
        assert_ne!(reader_key(&e, s), k, "{s:?}");
    }
    // A configuration change that leaves the startup profile alone keeps pooled connections;
    // a new profile (here the identity it advertises) makes every one of them incompatible.
    e.replace_config(polarsplit_test_support::config(&[(
        "wait_timeout_ms",
        "77",
    )]));
    assert_eq!(reader_key(&e, &base), k);
    e.replace_config(polarsplit_test_support::config(&[(
        "identity_mode",
        polarsplit::IdentityMode::Proxy.as_str(),
    )]));
    assert_ne!(reader_key(&e, &base)[0], k[0]);
}

// --- Hidden statements ------------------------------------------------------------------------

/// W-3, independently: a valid list is `<digits>,<digits>[,<digits>…]`, 64-bit fields.
fn valid_xids(b: &[u8]) -> bool {
    b.len() <= polarsplit::internals::protocol::rfq::MAX_XID_LIST_LEN
        && std::str::from_utf8(b).is_ok_and(|t| {
            t.split(',').count() >= 2
                && t.split(',').all(|f| {
                    !f.is_empty()
                        && f.bytes().all(|c| c.is_ascii_digit())
                        && f.parse::<u64>().is_ok()
                })
        })
}

/// The numbers inside one hidden statement, if it is one of W-4's fixed forms.
fn hidden_value<'a>(
    stmt: &'a str,
    head: &str,
    quoted: bool,
    ok: fn(u8) -> bool,
) -> Option<&'a str> {
    let v = stmt.strip_prefix(head)?;
    let v = if quoted {
        v.strip_prefix('\'')?.strip_suffix('\'')?
    } else {
        v
    };
    (!v.is_empty() && v.bytes().all(ok)).then_some(v)
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Wrapper {
    /// `SET polar_xact_split_xids = ''` (clearing an import left on the connection).
    reset: bool,
    xids: Option<String>,
    mode: Option<String>,
    timeout: Option<u64>,
    lsn: Option<u64>,
}

/// Parses an engine-built reader statement: W-4 hidden statements, then exactly `client_sql`.
/// Panics on any other byte.
fn parse_wrapper(text: &str, client_sql: &str) -> Wrapper {
    let hidden = text
        .strip_suffix(client_sql)
        .unwrap_or_else(|| panic!("the client's SQL is not the tail of {text:?}"));
    let mut w = Wrapper::default();
    for stmt in hidden.split_terminator("; ") {
        let digit = |b: u8| b.is_ascii_digit();
        if let Some(v) = hidden_value(stmt, "SET polar_xact_split_xids = ", true, |b| {
            b.is_ascii_digit() || b == b','
        }) {
            w.xids = Some(v.to_string());
        } else if stmt == "SET polar_xact_split_xids = ''" {
            w.reset = true;
        } else if let Some(v) = hidden_value(stmt, "SET polar_consistency_mode = ", true, |b| {
            b.is_ascii_lowercase() || b == b'_'
        }) {
            assert!(v == "strict" || v == "best_effort", "{stmt}");
            w.mode = Some(v.to_string());
        } else if let Some(v) =
            hidden_value(stmt, "SET polar_proxy_wait_timeout_ms = ", false, digit)
        {
            w.timeout = Some(v.parse().expect("a number"));
        } else if let Some(v) = hidden_value(stmt, "SET polar_xact_split_wait_lsn = ", true, digit)
        {
            w.lsn = Some(v.parse().expect("a 64-bit LSN"));
        } else {
            panic!("not a W-4 hidden statement: {stmt:?} in {text:?}");
        }
    }
    assert!(hidden.is_empty() || hidden.ends_with("; "), "{text:?}");
    w
}

fn xid_list() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Valid lists, including 64-bit extremes.
        (any::<u64>(), prop::collection::vec(any::<u64>(), 1..4)).prop_map(|(c, x)| {
            let mut s = c.to_string();
            for v in x {
                s.push(',');
                s.push_str(&v.to_string());
            }
            s.into_bytes()
        }),
        // Almost valid: digits, commas and a few hostile bytes.
        prop::collection::vec(
            prop::sample::select(b"0123456789,,, '-;xX\\\xff".to_vec()),
            0..24
        ),
        // Anything but NUL (which ends the list on the wire).
        prop::collection::vec(1u8..=255, 0..48),
        Just(b"1,2'; DROP TABLE evil; --".to_vec()),
        Just(b"1,99999999999999999999".to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn w4_reader_statements_hold_only_fixed_text_validated_numbers_and_client_bytes(
        xids in xid_list(),
        begin_lsn in 1u64..u64::MAX / 2,
        write_delta in any::<u64>(),
        // Any timeout the builder accepts (up to a day, in ms).
        split_timeout in 0u32..=86_400_000,
        polardb in any::<bool>(),
    ) {
        let split_timeout_text = split_timeout.to_string();
        let dialect = if polardb {
            polarsplit::ServerDialect::PolarDb
        } else {
            polarsplit::ServerDialect::Awide
        };
        // reader_response_timeout_ms 0: the builder requires it above every wait timeout, and
        // no time passes here.
        let c = polarsplit_test_support::config(&[
            ("split_wait_timeout_ms", &split_timeout_text),
            ("reader_response_timeout_ms", "0"),
            ("server_dialect", dialect.as_str()),
        ]);
        let mut h = common::Host::new(c);
        h.connect();
        h.client(&query("BEGIN"));
        h.writer_answers("BEGIN", b'T', Some(begin_lsn), Some((b'x', "")));
        h.engine.reader_sample(1, Lsn(begin_lsn), h.now);
        h.engine.reader_sample(2, Lsn(begin_lsn), h.now);
        h.client(&query("INSERT INTO t VALUES (1)"));
        let write_lsn = begin_lsn.saturating_add(write_delta).max(1);
        // The writer's RFQ, with the XID list exactly as generated (not necessarily UTF-8).
        let mut body = vec![b'T'];
        body.extend_from_slice(&write_lsn.to_be_bytes());
        body.push(b'x');
        body.extend_from_slice(&xids);
        body.push(0);
        let mut b = command_complete("INSERT 0 1");
        b.extend(common::msg(b'Z', &body));
        h.backend(WRITER, &b);
        h.take_client();

        let sql = "SELECT v FROM t WHERE k = 1";
        let acts = h.client(&query(sql));
        if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
            h.attach(301);
        }
        let d = h.last_decision();
        let valid = valid_xids(&xids);
        if !valid {
            prop_assert!(!d.import, "{:?} imported", String::from_utf8_lossy(&xids));
        }
        for a in &h.log {
            let A::SendBackend { conn, bytes } = a else { continue };
            for (t, m) in common::messages(bytes) {
                if t != b'Q' {
                    continue;
                }
                let text = std::str::from_utf8(&m[..m.len() - 1]).expect("engine SQL is UTF-8");
                if *conn == WRITER {
                    // Only the client's own statements go to the writer as Queries (the F-3
                    // abort and the P-5 touch of the block are extended messages of their own).
                    prop_assert!(
                        ["BEGIN", "INSERT INTO t VALUES (1)", sql].contains(&text),
                        "{}",
                        text
                    );
                    continue;
                }
                let w = parse_wrapper(text, sql);
                if let Some(x) = &w.xids {
                    prop_assert!(valid, "an invalid list reached SQL: {text}");
                    prop_assert_eq!(x.as_bytes(), &xids[..]);
                }
                if let Some(l) = w.lsn {
                    prop_assert_eq!(l, write_lsn, "the wait LSN is the writer's, as a number");
                }
                if let Some(t) = w.timeout {
                    // The split wait's timeout, or the plain read wait's (1000 by default).
                    prop_assert!(t == u64::from(split_timeout) || t == 1000, "timeout {}", t);
                }
            }
        }
        if valid && d.outcome == Outcome::ReplicaTxnSplit {
            prop_assert!(d.import);
        }
    }
}
