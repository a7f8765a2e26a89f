//! The session engine driven by a fake host through arbitrary interleavings of client bytes,
//! backend bytes, host events and engine-wide changes (SPEC §2–§4), in a configuration picked by
//! the input. Bytes are either raw or well-formed protocol messages built from the input (so the
//! fuzzer reaches deep states quickly), and are fed split into arbitrary pieces.
//!
//! The host plays by the contract — it drains every action after each input, feeds back client
//! bytes the session did not consume, answers ConnectWriter/AcquireReader with events, pools
//! released readers — and checks after every action:
//! - byte accounting (`polarsplit::Streams`, the contract's reference implementation): on
//!   the client stream and on every backend stream, forwarded + discarded never exceeds what was
//!   fed (an action never covers bytes the host does not have);
//! - stream integrity: engine-built bytes (SendClient, SendBackend) are whole, well-framed
//!   messages, start at a message boundary of the stream they go into, and no message reaches
//!   the client interleaved with another; nothing reaches the client after CloseClient;
//! - connection discipline: client bytes and engine bytes go only to open connections the
//!   session was given; a released reader carries no bytes of this session afterwards;
//! - hidden statements (W-4): every Query the engine builds is fixed text with validated numbers
//!   (`[0-9,]` XID lists, decimal LSNs and timeouts) and the client's own bytes — nothing else;
//! - startup packets for backends are well-formed; reader startups never ask for XIDs;
//! - the drain rule: an input while actions are pending is refused and changes nothing;
//! - determinism: the same input yields the same action sequence twice.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use polarsplit::internals::protocol::framer::frame;
use polarsplit::internals::protocol::frontend::FrontendMessage;
use polarsplit::internals::protocol::startup::StartupPacket;
use polarsplit::ConfigBuilder;
use polarsplit::Engine;
use polarsplit::Streams;
use polarsplit::{Action, BackendFact, ClientInfo, ConnId, Event, Session, SessionError};
use polarsplit::{Limits, Lsn};
use polarsplit::{LsnField, Marker, TxStatus};
use polarsplit_test_support::be::{self, Column};
use polarsplit_test_support::contains;
use polarsplit_test_support::fe::{self, msg};

use super::input::Input;

pub const WRITER: ConnId = 100;
/// A connection id the session never gets.
pub const STRANGER: ConnId = 999;

const SQL: &[&str] = &[
    "SELECT 1",
    "SELECT v FROM t WHERE k = 1",
    "select * from pgbench_accounts where aid = $1",
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET v = v + 1",
    "BEGIN",
    "BEGIN ISOLATION LEVEL REPEATABLE READ",
    "START TRANSACTION READ ONLY",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT a",
    "ROLLBACK TO SAVEPOINT a",
    "RELEASE a",
    "SET search_path = app, public",
    "SET TimeZone = 'UTC'",
    "SET LOCAL statement_timeout = 5",
    "RESET search_path",
    "RESET ALL",
    "SET application_name TO DEFAULT",
    "SET my.custom = 1",
    "SET polar_xact_split_xids = '1,2'",
    "SET ROLE bob",
    "SET SESSION AUTHORIZATION alice",
    "SET default_transaction_isolation = 'repeatable read'",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "SELECT pg_advisory_lock(1)",
    "LISTEN ch",
    "UNLISTEN *",
    "CREATE TEMP TABLE tt (a int)",
    "DISCARD ALL",
    "PREPARE p AS SELECT 1",
    "DEALLOCATE ALL",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "CLOSE ALL",
    "SELECT nextval('s')",
    "/* route=primary */ SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT * FROM t FOR UPDATE",
    "EXPLAIN ANALYZE SELECT 1",
    "COPY t FROM STDIN",
    "COPY t TO STDOUT",
    "SHOW search_path",
    "",
    ";",
    "SELECT '",
    "SELECT $$x$$",
    "WITH w AS (DELETE FROM t RETURNING *) SELECT * FROM w",
];

const TAGS: &[&str] = &[
    "SELECT 1",
    "INSERT 0 1",
    "UPDATE 3",
    "SET",
    "RESET",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SHOW",
    "SAVEPOINT",
    "RELEASE",
    "DISCARD ALL",
    "LISTEN",
    "COPY 1",
    "START TRANSACTION",
    "",
];

const SQLSTATES: &[&str] = &[
    "25006", "40001", "72000", "57014", "08006", "0A000", "42704", "XX000", "55000", "25P02",
    "40P01", "57P01", "53300", "42601",
];

const USERS: &[&[u8]] = &[b"app", b"bob", b"", b"_polar_x"];

const SEVERITIES: &[&[u8]] = &[b"ERROR", b"FATAL", b"PANIC"];

const XIDS: &[&[u8]] = &[
    b"1,732",
    b"3,733,732",
    b"",
    b"1",
    b"1,,2",
    b"1,2; DROP TABLE evil; --",
    b"1,2' OR '1'='1",
    b"1,18446744073709551616",
    b"18446744073709551615,1",
    b"0,0",
    b"-1,2",
    b"1,2\xff",
];

/// Tracks message framing of one outbound byte stream (tag + 4-byte length + body).
#[derive(Clone, Debug, Default)]
struct Framing {
    hdr: Vec<u8>,
    remaining: usize,
    /// Who is writing the message in progress (a backend connection, or `None` for the engine).
    owner: Option<Option<ConnId>>,
    broken: bool,
}

impl Framing {
    fn at_boundary(&self) -> bool {
        self.hdr.is_empty() && self.remaining == 0
    }

    fn feed(&mut self, mut b: &[u8], owner: Option<ConnId>) {
        if self.broken {
            return;
        }
        while !b.is_empty() {
            if self.remaining > 0 {
                assert_eq!(
                    self.owner,
                    Some(owner),
                    "bytes of two sources interleave inside one message"
                );
                let n = self.remaining.min(b.len());
                self.remaining -= n;
                b = &b[n..];
                continue;
            }
            if self.hdr.is_empty() {
                self.owner = Some(owner);
            } else {
                assert_eq!(
                    self.owner,
                    Some(owner),
                    "bytes of two sources interleave inside one header"
                );
            }
            let n = (5 - self.hdr.len()).min(b.len());
            self.hdr.extend_from_slice(&b[..n]);
            b = &b[n..];
            if self.hdr.len() == 5 {
                let len = u32::from_be_bytes([self.hdr[1], self.hdr[2], self.hdr[3], self.hdr[4]]);
                self.hdr.clear();
                if len < 4 {
                    // A peer sent garbage the engine forwarded by count; stop judging this stream.
                    self.broken = true;
                    return;
                }
                self.remaining = len as usize - 4;
            }
        }
    }
}

/// What the host knows of one backend connection besides its bytes (those are in `Streams`).
#[derive(Debug, Default)]
struct Conn {
    /// What the host sent to the server after its startup packet.
    sent: Framing,
    open: bool,
    /// A released reader back in the host's pool (with its needs_reset flag).
    pooled: Option<bool>,
    /// Reader key of the AcquireReader it was opened or attached for.
    key: Option<[u64; 4]>,
}

struct Host {
    engine: Arc<Engine>,
    session: Session,
    st: State,
}

/// What the host knows and checks, apart from the session it drives.
struct State {
    /// Client bytes received by the host and not yet consumed by the session.
    client_backlog: Vec<u8>,
    /// The bytes fed to the session and not yet covered by an action, per stream. With facts
    /// input a backend stream holds one placeholder byte per message fed as a fact (the
    /// engine then forwards and discards by message count).
    streams: Streams,
    /// Every client byte the session consumed (what the engine may legitimately echo).
    client_all: Vec<u8>,
    to_client: Framing,
    client_closed: bool,
    conns: BTreeMap<ConnId, Conn>,
    connect_requested: bool,
    acquire: Option<(u32, [u64; 4])>,
    next_conn: ConnId,
    now: u64,
    log: String,
    /// `POLARSPLIT_FUZZ_TRACE=1`: print every input and action (to debug a crash artifact).
    trace: bool,
    /// Backend input as parsed facts (a libpq-based host): FORWARD/DISCARD_BACKEND count
    /// messages, each whole.
    facts: bool,
}

/// Bytes of the fuzz input as text (they name fixed, ASCII choices).
fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).expect("ASCII")
}

/// Matches one fixed hidden statement (W-4) at the start of `p`: its length.
fn fixed_hidden(p: &[u8]) -> Option<usize> {
    fn lit(p: &[u8], l: &[u8]) -> Option<usize> {
        p.starts_with(l).then_some(l.len())
    }
    fn run_of(p: &[u8], ok: impl Fn(u8) -> bool) -> usize {
        p.iter().take_while(|&&b| ok(b)).count()
    }
    for exact in [
        &b"SET polar_consistency_mode = 'strict'; "[..],
        b"SET polar_consistency_mode = 'best_effort'; ",
        b"SET polar_xact_split_xids = ''; ",
    ] {
        if let Some(n) = lit(p, exact) {
            return Some(n);
        }
    }
    type Numeric<'a> = (&'a [u8], &'a dyn Fn(u8) -> bool, &'a [u8]);
    let numeric: [Numeric<'_>; 3] = [
        (
            b"SET polar_xact_split_xids = '",
            &|b: u8| b.is_ascii_digit() || b == b',',
            b"'; ",
        ),
        (
            b"SET polar_proxy_wait_timeout_ms = ",
            &|b: u8| b.is_ascii_digit(),
            b"; ",
        ),
        (
            b"SET polar_xact_split_wait_lsn = '",
            &|b: u8| b.is_ascii_digit(),
            b"'; ",
        ),
    ];
    for (head, ok, tail) in numeric {
        if let Some(n) = lit(p, head) {
            let d = run_of(&p[n..], ok);
            if d > 0 && p[n + d..].starts_with(tail) {
                return Some(n + d + tail.len());
            }
        }
    }
    // PostgreSQL 19: WAIT FOR LSN 'X/Y' [WITH (TIMEOUT 'Nms')];
    if let Some(n) = lit(p, b"WAIT FOR LSN '") {
        let d = run_of(&p[n..], |b| b.is_ascii_hexdigit() || b == b'/');
        let mut i = n + d;
        if d == 0 || !p[i..].starts_with(b"'") {
            return None;
        }
        i += 1;
        if let Some(k) = lit(&p[i..], b" WITH (TIMEOUT '") {
            i += k;
            let t = run_of(&p[i..], |b| b.is_ascii_digit());
            if t == 0 || !p[i + t..].starts_with(b"ms')") {
                return None;
            }
            i += t + 4;
        }
        return p[i..].starts_with(b"; ").then_some(i + 2);
    }
    None
}

/// Whether `p` is a sequence of hidden statements: fixed ones, or the client's own statements
/// (settings replayed on a fresh reader, S-4), each followed by `"; "`.
fn hidden_prefix_ok(p: &[u8], client: &[u8]) -> bool {
    let mut i = 0;
    'outer: while i < p.len() {
        if let Some(n) = fixed_hidden(&p[i..]) {
            i += n;
            continue;
        }
        let rest = &p[i..];
        for k in 0..rest.len().saturating_sub(1) {
            if &rest[k..k + 2] == b"; " && k > 0 && contains(client, &rest[..k]) {
                i += k + 2;
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// W-4: an engine-built Query is hidden statements, then (optionally) the client's own string.
fn query_ok(sql: &[u8], client: &[u8]) -> bool {
    if sql == polarsplit_abort_statement() || sql == b"SELECT pg_current_wal_insert_lsn()" {
        return true;
    }
    if hidden_prefix_ok(sql, client) {
        return true;
    }
    // Split points: after each "; " (and at 0).
    let mut cuts = vec![0];
    cuts.extend(
        (0..sql.len().saturating_sub(1))
            .filter(|&k| &sql[k..k + 2] == b"; ")
            .map(|k| k + 2),
    );
    cuts.into_iter()
        .any(|m| contains(client, &sql[m..]) && hidden_prefix_ok(&sql[..m], client))
}

fn polarsplit_abort_statement() -> &'static [u8] {
    b"DO $polarsplit$ BEGIN RAISE EXCEPTION 'polarsplit: transaction aborted after a failed replica read'; END $polarsplit$"
}

/// The settings replay (S-5): `SELECT pg_catalog.set_config(<hex>, <hex>, false); ` repeated,
/// where each `<hex>` is `pg_catalog.convert_from(pg_catalog.decode('<hex digits>', 'hex'),
/// 'UTF8')` — nothing of the captured state reaches the server as SQL text.
fn settings_replay_ok(sql: &[u8]) -> bool {
    const HEAD: &[u8] = b"SELECT pg_catalog.set_config(";
    const HEX_HEAD: &[u8] = b"pg_catalog.convert_from(pg_catalog.decode('";
    const HEX_TAIL: &[u8] = b"', 'hex'), 'UTF8')";
    let hex = |p: &[u8]| -> Option<usize> {
        let p2 = p.strip_prefix(HEX_HEAD)?;
        let d = p2.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        p2[d..]
            .starts_with(HEX_TAIL)
            .then_some(HEX_HEAD.len() + d + HEX_TAIL.len())
    };
    let mut i = 0;
    let mut n = 0;
    while i < sql.len() {
        let Some(p) = sql[i..].strip_prefix(HEAD) else {
            return false;
        };
        i += HEAD.len();
        let _ = p;
        let Some(a) = hex(&sql[i..]) else {
            return false;
        };
        i += a;
        if !sql[i..].starts_with(b", ") {
            return false;
        }
        i += 2;
        let Some(b) = hex(&sql[i..]) else {
            return false;
        };
        i += b;
        if !sql[i..].starts_with(b", false); ") {
            return false;
        }
        i += 10;
        n += 1;
    }
    n > 0
}

/// Statement names the engine may use: empty, its own (`polarsplit_…`), or the client's.
fn name_ok(name: &[u8], client: &[u8]) -> bool {
    name.is_empty() || name.starts_with(b"polarsplit_") || contains(client, name)
}

/// A hidden statement text of an engine-built Parse: one W-4/E-3 statement, the probe, the
/// capture, or a client statement's text.
fn parse_text_ok(sql: &[u8], client: &[u8]) -> bool {
    let mut with_sep = sql.to_vec();
    with_sep.extend_from_slice(b"; ");
    fixed_hidden(&with_sep) == Some(with_sep.len())
        || sql.starts_with(b"SELECT pg_catalog.pg_current_wal_insert_lsn()")
        || sql.starts_with(b"WITH g AS (SELECT name, setting, source, context, vartype FROM pg_catalog.pg_show_all_settings()), l (n) AS (")
        || contains(client, sql)
}

/// Engine-built frontend bytes: whole messages; Queries pass `query_ok` or are the settings
/// replay; extended-protocol messages name only the client's or the engine's statements and
/// carry only fixed text or the client's own bytes; anything else is a copy of a client message.
fn check_send_backend(bytes: &[u8], client: &[u8]) {
    let limits = Limits::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        let f = frame(rest, &limits)
            .expect("engine-built bytes frame")
            .expect("engine-built bytes are whole messages");
        let wire = &rest[..f.wire_len];
        if contains(client, wire) {
            rest = &rest[f.wire_len..];
            continue;
        }
        match FrontendMessage::parse(f.tag, f.body) {
            Ok(FrontendMessage::Query { sql }) => assert!(
                query_ok(sql, client) || settings_replay_ok(sql),
                "an engine-built Query holds bytes that are neither fixed hidden text, \
                 validated numbers nor the client's own: {:?}",
                String::from_utf8_lossy(sql)
            ),
            Ok(FrontendMessage::Parse { statement, sql, .. }) => {
                assert!(name_ok(statement, client), "Parse of a foreign name");
                assert!(
                    parse_text_ok(sql, client),
                    "an engine-built Parse holds text that is neither fixed nor the client's: {:?}",
                    String::from_utf8_lossy(sql)
                );
            }
            Ok(FrontendMessage::Bind { portal, statement }) => {
                assert!(name_ok(statement, client) && name_ok(portal, client));
                // Parameters: none (hidden statements), the capture's name list, or the
                // client's own Bind tail.
                let tail = &f.body[portal.len() + statement.len() + 2..];
                assert!(
                    tail == [0, 0, 0, 0, 0, 0]
                        || statement == b"polarsplit_capture"
                        || contains(client, tail),
                    "an engine-built Bind carries parameters that are not the client's"
                );
            }
            Ok(FrontendMessage::Describe { name, .. } | FrontendMessage::Close { name, .. }) => {
                assert!(name_ok(name, client), "Describe/Close of a foreign name")
            }
            Ok(FrontendMessage::Execute { portal, .. }) => assert!(name_ok(portal, client)),
            Ok(FrontendMessage::Sync | FrontendMessage::Flush) => {}
            other => panic!(
                "engine-built message '{}' is not a copy of a client message: {other:?}",
                f.tag as char
            ),
        }
        rest = &rest[f.wire_len..];
    }
}

fn check_startup(bytes: &[u8], reader: bool) {
    assert!(bytes.len() >= 8);
    let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    assert_eq!(len, bytes.len(), "startup length");
    match StartupPacket::parse(&bytes[4..]) {
        Ok(StartupPacket::Startup { params, .. }) => {
            for (k, _) in params.iter() {
                if k.starts_with(b"_polar_") {
                    let allowed: &[&[u8]] = if reader {
                        &[
                            b"_polar_proxy_send_lsn",
                            b"_polar_proxy_client_host",
                            b"_polar_proxy_client_port",
                            b"_polar_send_lsn",
                            b"_polar_origin_client_ip",
                            b"_polar_origin_client_port",
                        ]
                    } else {
                        &[
                            b"_polar_proxy_send_lsn",
                            b"_polar_proxy_send_xact",
                            b"_polar_proxy_client_host",
                            b"_polar_proxy_client_port",
                            b"_polar_send_lsn",
                            b"_polar_send_xact",
                            b"_polar_origin_client_ip",
                            b"_polar_origin_client_port",
                        ]
                    };
                    assert!(
                        allowed.contains(&k),
                        "startup for a {} carries {:?}",
                        if reader { "reader" } else { "writer" },
                        String::from_utf8_lossy(k)
                    );
                }
            }
        }
        other => panic!("engine-built startup packet does not parse: {other:?}"),
    }
}

fn key_of(k: &polarsplit::ReaderKey) -> [u64; 4] {
    [
        k.profile_generation,
        k.auth_hash,
        k.startup_identity_hash,
        k.startup_options_hash,
    ]
}

impl State {
    fn conn_mut(&mut self, c: ConnId) -> &mut Conn {
        self.conns.entry(c).or_default()
    }

    fn assert_open(&self, c: ConnId, what: &str) {
        let open = self.conns.get(&c).is_some_and(|x| x.open);
        assert!(
            open,
            "{what} to connection {c}, which the session does not hold"
        );
    }

    /// Carries out a byte action on the streams (panics where it covers bytes the host does
    /// not have); returns the bytes it moved to their destination.
    fn carry(&mut self, a: &Action<'_>) -> Vec<u8> {
        if let Err(e) = self.streams.apply(a) {
            panic!("{e}");
        }
        match *a {
            Action::ForwardClient { conn, .. } | Action::SendBackend { conn, .. } => {
                std::mem::take(&mut self.streams.backend(conn).sent)
            }
            _ => std::mem::take(&mut self.streams.to_client),
        }
    }

    fn client_acted(&self) -> u64 {
        self.streams.client_forwarded + self.streams.client_discarded
    }

    fn send_to_client(&mut self, bytes: &[u8], owner: Option<ConnId>) {
        assert!(
            !self.client_closed,
            "bytes for the client after CloseClient"
        );
        self.to_client.feed(bytes, owner);
    }

    fn note(&mut self, line: std::fmt::Arguments<'_>) {
        if self.trace {
            eprintln!("{line}");
        }
        let _ = self.log.write_fmt(line);
        self.log.push('\n');
    }

    fn apply(&mut self, a: &Action<'_>) {
        self.note(format_args!("  {a:?}"));
        match *a {
            Action::ClientEncryptionRequest { .. } => {
                // The host refuses encryption with one untagged byte, between messages.
                assert!(self.to_client.at_boundary());
            }
            Action::CancelRequest { secret, .. } => {
                assert!((4..=256).contains(&secret.len()));
            }
            Action::ConnectWriter { startup } => {
                check_startup(startup, false);
                self.connect_requested = true;
            }
            Action::Decision(_) => {}
            Action::AcquireReader {
                server,
                key,
                startup,
            } => {
                check_startup(startup, true);
                self.acquire = Some((server, key_of(&key)));
            }
            Action::ForwardClient { conn, .. } => {
                self.assert_open(conn, "ForwardClient");
                let b = self.carry(a);
                self.conn_mut(conn).sent.feed(&b, None);
            }
            Action::DiscardClient { .. } => {
                self.carry(a);
            }
            Action::SendBackend { conn, bytes } => {
                self.assert_open(conn, "SendBackend");
                assert!(
                    self.conn_mut(conn).sent.at_boundary(),
                    "SendBackend inside a message being forwarded to {conn}"
                );
                let b = self.carry(a);
                self.conn_mut(conn).sent.feed(&b, None);
                check_send_backend(bytes, &self.client_all);
            }
            Action::ForwardBackend { conn, .. } => {
                let b = self.carry(a);
                if self.facts {
                    // Whole messages the host holds: the client stream stays framed.
                    assert!(
                        !self.client_closed,
                        "bytes for the client after CloseClient"
                    );
                    assert!(self.to_client.at_boundary());
                } else {
                    self.send_to_client(&b, Some(conn));
                }
            }
            Action::DiscardBackend { .. } => {
                self.carry(a);
            }
            Action::SendClient { bytes } => {
                assert!(
                    self.to_client.at_boundary(),
                    "SendClient inside a message being forwarded to the client"
                );
                let limits = Limits::default();
                let mut rest = bytes;
                while !rest.is_empty() {
                    let f = frame(rest, &limits)
                        .expect("engine-built client bytes frame")
                        .expect("engine-built client bytes are whole messages");
                    rest = &rest[f.wire_len..];
                }
                let b = self.carry(a);
                self.send_to_client(&b, None);
            }
            Action::ReleaseReader { conn, needs_reset } => {
                assert_ne!(conn, WRITER, "the writer released as a reader");
                self.assert_open(conn, "ReleaseReader");
                let c = self.conn_mut(conn);
                c.open = false;
                c.pooled = Some(needs_reset);
            }
            Action::PinWriter { .. } => {}
            Action::CloseBackend { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.open = false;
                    c.pooled = None;
                }
            }
            Action::CloseClient => self.client_closed = true,
            _ => {}
        }
    }
}

impl Host {
    /// Polls and applies every action; with `stop_after`, stops early and checks the drain rule.
    fn drain(&mut self, stop_after: Option<usize>) {
        let mut n = 0;
        loop {
            if stop_after == Some(n) && self.session.has_actions() {
                let before = self.st.log.len();
                let r = self.session.recv_client(b"Q", self.st.now);
                assert_eq!(
                    r,
                    Err(SessionError::ActionsPending),
                    "input accepted while actions pending"
                );
                let r = self.session.recv_backend(WRITER, b"Z", self.st.now);
                assert_eq!(r, Err(SessionError::ActionsPending));
                let r = self
                    .session
                    .on_backend_event(WRITER, Event::ConnectionLost, self.st.now);
                assert_eq!(r, Err(SessionError::ActionsPending));
                assert!(self.session.has_actions());
                assert_eq!(self.st.log.len(), before);
            }
            let Some(a) = self.session.poll_action() else {
                break;
            };
            self.st.apply(&a);
            n += 1;
        }
        // Released readers carry nothing more of this session.
        for (id, c) in &self.st.conns {
            if c.pooled.is_some() {
                assert!(
                    self.st
                        .streams
                        .backends
                        .get(id)
                        .is_none_or(|b| b.pending.is_empty()),
                    "released reader {id} still has unacted bytes"
                );
            }
        }
        assert!(self.st.client_acted() <= self.st.streams.client_fed);
    }

    fn result(&mut self, what: &str, r: Result<(), SessionError>) {
        self.st.note(format_args!("{what} -> {r:?}"));
        match r {
            Ok(()) => {}
            Err(SessionError::ActionsPending) => panic!("ActionsPending after a full drain"),
            // A fact the host built wrong is refused and changes nothing.
            Err(SessionError::Protocol { .. }) if what == "fact" => {}
            Err(SessionError::Protocol { .. }) => {
                // A reader's violation is absorbed; a client's or the writer's ends the session.
                assert!(
                    self.session.is_closed(),
                    "protocol error but the session is open"
                );
            }
            Err(_) => {}
        }
    }

    fn feed_client(&mut self, bytes: &[u8], stop_after: Option<usize>) {
        if self.st.client_closed {
            return;
        }
        self.st.client_backlog.extend_from_slice(bytes);
        let backlog = std::mem::take(&mut self.st.client_backlog);
        self.st.note(format_args!(
            "client {:?}",
            String::from_utf8_lossy(&backlog)
        ));
        let r = self.session.recv_client(&backlog, self.st.now);
        let consumed = match &r {
            Ok(n) => *n,
            // On an error the session consumed what it framed: the host stops talking to it.
            Err(SessionError::Protocol { .. }) => backlog.len(),
            Err(_) => 0,
        };
        assert!(consumed <= backlog.len());
        if matches!(r, Err(SessionError::Protocol { .. })) {
            // Bytes after the violation are not the session's business; count what it saw.
            self.st.streams.fed_client(&backlog);
            self.st.client_all.extend_from_slice(&backlog);
        } else {
            self.st.streams.fed_client(&backlog[..consumed]);
            if self.st.client_all.len() < 1 << 18 {
                self.st.client_all.extend_from_slice(&backlog[..consumed]);
            }
            self.st.client_backlog = backlog[consumed..].to_vec();
        }
        self.result("client", r.map(|_| ()));
        self.drain(stop_after);
    }

    fn feed_backend(&mut self, conn: ConnId, bytes: &[u8], stop_after: Option<usize>) {
        self.st.note(format_args!(
            "backend {conn} {:?}",
            String::from_utf8_lossy(bytes)
        ));
        let r = self.session.recv_backend(conn, bytes, self.st.now);
        if !matches!(
            r,
            Err(SessionError::UnknownConnection(_)
                | SessionError::Closed
                | SessionError::ActionsPending)
        ) {
            self.st.conn_mut(conn);
            self.st.streams.fed_backend(conn, bytes);
        }
        self.result("backend", r);
        self.drain(stop_after);
    }

    fn feed_fact(&mut self, conn: ConnId, fact: BackendFact<'_>, stop_after: Option<usize>) {
        self.st.note(format_args!("fact {conn} {fact:?}"));
        let was_closed = self.session.is_closed();
        let r = self.session.recv_backend_fact(conn, fact, self.st.now);
        // Taken: accepted, or it broke the protocol and ended the session (a refused fact, or
        // one for a closed session, was not taken).
        if r.is_ok() || (!was_closed && self.session.is_closed()) {
            self.st.conn_mut(conn);
            self.st.streams.fed_backend(conn, &[0]);
        }
        self.result("fact", r);
        self.drain(stop_after);
    }

    fn event(&mut self, conn: ConnId, e: Event, stop_after: Option<usize>) {
        self.st.note(format_args!("event {conn} {e:?}"));
        let r = self.session.on_backend_event(conn, e, self.st.now);
        if r.is_ok() {
            match e {
                Event::WriterConnected => {
                    let c = self.st.conn_mut(conn);
                    c.open = true;
                    c.pooled = None;
                }
                Event::ReaderAttached { .. } => {
                    let key = self.st.acquire.take().map(|(_, k)| k);
                    let c = self.st.conn_mut(conn);
                    c.open = true;
                    c.pooled = None;
                    c.key = key;
                    c.sent = Framing::default();
                }
                Event::ConnectionLost => {
                    if let Some(c) = self.st.conns.get_mut(&conn) {
                        c.open = false;
                    }
                }
                _ => {}
            }
        }
        self.result("event", r);
        self.drain(stop_after);
    }
}

/// Builds one client message (or raw bytes) from the input.
fn client_bytes(inp: &mut Input<'_>, out: &mut Vec<u8>) {
    match inp.u8() % 16 {
        0..=3 => {
            let sql = *inp.pick(SQL);
            out.extend(fe::query(sql));
        }
        4 => {
            // Query with fuzzer text (not necessarily UTF-8, maybe with NULs).
            let text = inp.chunk(64);
            out.extend(fe::query_bytes(text));
        }
        5 => {
            // An extended batch: Parse/Bind/Describe/Execute/Sync, named or not.
            let named = inp.bool();
            let sql = *inp.pick(SQL);
            let name = if named { "s1" } else { "" };
            out.extend(fe::parse(name, sql));
            out.extend(fe::bind("", name));
            out.extend(fe::describe(true, ""));
            out.extend(fe::execute(""));
            if inp.u8() % 4 != 0 {
                out.extend(fe::sync());
            }
        }
        6 => out.extend(msg(*inp.pick(b"SHXcd"), b"")),
        7 => {
            out.extend(fe::copy_data(inp.chunk(32)));
        }
        8 => out.extend(fe::copy_fail("no")),
        9 => {
            // PasswordMessage / SASL response with a recognisable secret.
            out.extend(fe::password(b"hunter2-SECRET"));
        }
        10 => {
            // A startup-phase packet.
            let code: u32 = *inp.pick(&[
                fe::PROTOCOL_3_0,
                fe::SSL_REQUEST_CODE,
                fe::GSSENC_REQUEST_CODE,
                fe::CANCEL_REQUEST_CODE,
                131_072,
            ]);
            match code {
                fe::PROTOCOL_3_0 => {
                    let user = *inp.pick(USERS);
                    let mut params = vec![("user", text(user)), ("database", "db")];
                    if inp.bool() {
                        params.push(("_polar_proxy_send_lsn", "1"));
                    }
                    if inp.bool() {
                        params.push(("options", "-c default_transaction_isolation=serializable"));
                    }
                    out.extend(fe::startup(&params));
                }
                fe::CANCEL_REQUEST_CODE => {
                    let mut body = 7i32.to_be_bytes().to_vec();
                    body.extend_from_slice(inp.bytes(8));
                    out.extend(fe::untagged(code, &body));
                }
                _ => out.extend(fe::untagged(code, &[])),
            }
        }
        11 => {
            // A header declaring a large body, then part of it.
            let t = *inp.pick(b"QPBdpFfX?");
            let len = inp.u32() % (1 << 31);
            out.push(t);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(inp.chunk(256));
        }
        12 => out.extend(fe::function_call(1)),
        _ => out.extend_from_slice(inp.chunk(128)),
    }
}

fn rfq_body(inp: &mut Input<'_>) -> Vec<u8> {
    let mut b = vec![*inp.pick(b"IITTEEQ")];
    match inp.u8() % 5 {
        0 => {}
        1 => b.extend_from_slice(&inp.u64().to_be_bytes()),
        2 => {
            b.extend_from_slice(&(0x1000 + u64::from(inp.u16())).to_be_bytes());
            b.push(*inp.pick(b"xxwq"));
            let x = *inp.pick(XIDS);
            b.extend_from_slice(x);
            b.push(0);
        }
        3 => {
            b.extend_from_slice(&u64::from(inp.u16()).to_be_bytes());
            b.push(b'x');
            b.extend_from_slice(inp.chunk(40));
            b.push(0);
        }
        _ => b.extend_from_slice(inp.chunk(12)),
    }
    b
}

/// Builds one backend message (or raw bytes) from the input.
fn backend_bytes(inp: &mut Input<'_>, out: &mut Vec<u8>) {
    match inp.u8() % 24 {
        0 => out.extend(be::auth_ok()),
        1 => {
            let code: i32 = *inp.pick(&[3, 5, 10, 11, 12, 7, 99]);
            out.extend(be::auth(code, inp.chunk(24)));
        }
        2 => out.extend(be::param_status("in_hot_standby", "off")),
        3 => out.extend(be::backend_key(7, 8)),
        4..=7 => out.extend(msg(b'Z', &rfq_body(inp))),
        8 | 9 => {
            let tag = *inp.pick(TAGS);
            out.extend(be::command_complete(tag));
        }
        10 => out.extend(be::row_description(&[Column::untyped("c")])),
        11 => {
            let n = inp.below(8);
            for _ in 0..n {
                out.extend(be::data_row(&[Some("7")]));
            }
        }
        12 | 13 => {
            let sev = *inp.pick(SEVERITIES);
            let sev = text(sev);
            let code = *inp.pick(SQLSTATES);
            let mut f = vec![(b'S', sev), (b'V', sev), (b'C', code), (b'M', "boom")];
            if code == "72000" {
                f.push((b'D', "polar_proxy_lsn_wait_timeout"));
                f.push((b'R', "polar_proxy_wait_for_lsn"));
            }
            out.extend(be::fields(false, &f));
        }
        14 => out.extend(be::fields(
            true,
            &[(b'S', "WARNING"), (b'C', "01000"), (b'M', "note")],
        )),
        15 => out.extend(msg(*inp.pick(b"123nsIc"), b"")),
        16 => out.extend(be::copy_response(b'G', 0)),
        17 => out.extend(be::copy_response(b'H', 0)),
        18 => out.extend(be::copy_data(inp.chunk(16))),
        19 => out.extend(be::notification(1, "c", "p")),
        20 => {
            // A header declaring a large body, then part of it.
            let t = *inp.pick(b"DTdZCEKRA");
            let len = inp.u32() % (1 << 31);
            out.push(t);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(inp.chunk(256));
        }
        21 => out.extend(be::parameter_description(&[])),
        _ => out.extend_from_slice(inp.chunk(64)),
    }
}

/// Builds one backend fact from the input; `None` means an ErrorResponse whose fields were put
/// into `fields` (they borrow from the input, so the caller owns the vector).
fn backend_fact<'a>(
    inp: &mut Input<'a>,
    fields: &mut Vec<(u8, &'a [u8])>,
) -> Option<BackendFact<'a>> {
    Some(match inp.u8() % 8 {
        0 | 1 => BackendFact::ReadyForQuery {
            status: *inp.pick(&[TxStatus::Idle, TxStatus::InTransaction, TxStatus::Failed]),
            lsn: match inp.u8() % 3 {
                0 => LsnField::Missing,
                1 => LsnField::Zero,
                _ => LsnField::At(Lsn(0x1000 + u64::from(inp.u16()))),
            },
            xact: match inp.u8() % 4 {
                0 => None,
                1 => Some((Marker::Splittable, *inp.pick(XIDS))),
                2 => Some((Marker::WalPending, *inp.pick(XIDS))),
                _ => Some((Marker::Splittable, inp.chunk(24))),
            },
        },
        2 => BackendFact::CommandComplete {
            tag: inp.pick(TAGS).as_bytes(),
        },
        3 => {
            let sev = *inp.pick(SEVERITIES);
            fields.push((b'S', sev));
            fields.push((b'V', sev));
            fields.push((b'C', inp.pick(SQLSTATES).as_bytes()));
            fields.push((b'M', b"boom"));
            if inp.bool() {
                fields.push((b'D', b"polar_proxy_lsn_wait_timeout"));
                fields.push((b'R', b"polar_proxy_wait_for_lsn"));
            }
            if inp.bool() {
                fields.push((inp.u8(), inp.chunk(8)));
            }
            return None;
        }
        4 => BackendFact::Notice {
            fields: &[(b'S', b"WARNING"), (b'C', b"01000"), (b'M', b"note")],
        },
        5 => BackendFact::ParameterStatus {
            name: b"in_hot_standby",
            value: inp.chunk(8),
        },
        _ => BackendFact::Other { tag: inp.u8() },
    })
}

/// Feeds `bytes` in pieces chosen by the input.
fn pieces<'b>(inp: &mut Input<'_>, bytes: &'b [u8]) -> Vec<&'b [u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    let split = inp.u8();
    while !rest.is_empty() {
        let n = if split & 0x80 == 0 {
            rest.len()
        } else {
            (usize::from(inp.u8() % 16) + 1).min(rest.len())
        };
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

fn config(inp: &mut Input<'_>) -> polarsplit::Config {
    const SETTINGS: &[(&str, &[&str])] = &[
        ("consistency", &["session", "global", "eventual", "off"]),
        ("txn_split", &["on", "off"]),
        ("server_dialect", &["awide", "polardb", "stock"]),
        ("startup_profile", &["v15", "legacy", "off"]),
        (
            "on_wait_timeout",
            &["primary", "error", "disconnect", "warning"],
        ),
        (
            "on_replica_loss",
            &[
                "replica_then_primary",
                "replica_then_error",
                "primary",
                "error",
                "disconnect",
            ],
        ),
        ("on_replica_error", &["primary", "error", "disconnect"]),
        ("on_missing_lsn", &["primary", "warning", "error"]),
        ("read_fallback", &["primary", "error"]),
        ("reader_retry_limit", &["0", "1", "3"]),
        ("classify_cache_capacity", &["0", "16"]),
        ("max_inspected_message_bytes", &["64", "1048576"]),
        ("warmup", &["off", "demand", "begin", "both"]),
        ("lsn_probe", &["adaptive", "on", "off"]),
        ("wait_timeout_ms", &["0", "1", "4294967295"]),
    ];
    let mut b = ConfigBuilder::new();
    let n = inp.below(5);
    for _ in 0..n {
        let (name, values) = *inp.pick(SETTINGS);
        let v = *inp.pick(values);
        let _ = b.set(name, v);
    }
    b.build()
        .unwrap_or_else(|_| polarsplit_test_support::default_config())
}

fn run_once(data: &[u8]) -> String {
    let mut inp = Input::new(data);
    let cfg = config(&mut inp);
    let alt = config(&mut inp);
    let engine = Engine::new(cfg);
    engine.add_reader(1, 1);
    engine.add_reader(2, 1);
    // One byte: bit 0 the client's address known, bits 1-2 both set: facts input.
    let flags = inp.u8();
    let info = if flags & 1 == 1 {
        ClientInfo {
            client_addr: Some(("10.0.0.7".into(), 40000)),
            proxy_addr: Some(("127.0.0.1".into(), 6432)),
            writer_hostgroup: None,
        }
    } else {
        ClientInfo::default()
    };
    let session = Session::new(engine.clone(), info);
    let facts = flags & 6 == 6;
    let mut h = Host {
        engine,
        session,
        st: State {
            client_backlog: Vec::new(),
            streams: Streams::new(),
            client_all: Vec::new(),
            to_client: Framing::default(),
            client_closed: false,
            conns: BTreeMap::new(),
            connect_requested: false,
            acquire: None,
            next_conn: 200,
            now: 1_000,
            log: String::new(),
            trace: std::env::var_os("POLARSPLIT_FUZZ_TRACE").is_some(),
            facts,
        },
    };

    // Usually start from a connected, authenticated session.
    if inp.u8() % 4 != 0 {
        h.feed_client(&fe::startup_plain("app", "db"), None);
        h.event(WRITER, Event::WriterConnected, None);
        if h.st.facts {
            h.feed_fact(WRITER, BackendFact::Other { tag: b'R' }, None);
            let rfq = BackendFact::ReadyForQuery {
                status: TxStatus::Idle,
                lsn: LsnField::At(Lsn(0x1000)),
                xact: None,
            };
            h.feed_fact(WRITER, rfq, None);
        } else {
            let mut auth = be::auth_ok();
            auth.extend(be::backend_key(7, 8));
            auth.extend(be::rfq(b'I', Some(0x1000), None));
            h.feed_backend(WRITER, &auth, None);
        }
    }

    let mut ops = 0;
    while !inp.is_empty() && ops < 200 {
        ops += 1;
        let op = inp.u8();
        let stop_after = (op & 0x80 != 0).then(|| usize::from(inp.u8() % 4));
        h.st.now += u64::from(inp.u8());
        match op % 8 {
            0 | 1 => {
                let mut b = Vec::new();
                for _ in 0..=inp.below(3) {
                    client_bytes(&mut inp, &mut b);
                }
                for p in pieces(&mut inp, &b) {
                    h.feed_client(p, stop_after);
                }
            }
            2..=4 => {
                let open: Vec<ConnId> =
                    h.st.conns
                        .iter()
                        .filter(|(_, c)| c.open)
                        .map(|(&i, _)| i)
                        .collect();
                let conn = match inp.u8() % 8 {
                    0 => STRANGER,
                    1 => WRITER,
                    k if !open.is_empty() => open[usize::from(k) % open.len()],
                    _ => WRITER,
                };
                if h.st.facts && (conn != WRITER || inp.bool()) {
                    for _ in 0..=inp.below(4) {
                        let mut fields: Vec<(u8, &[u8])> = Vec::new();
                        let fact = backend_fact(&mut inp, &mut fields);
                        match fact {
                            Some(f) => h.feed_fact(conn, f, stop_after),
                            None => {
                                let f = BackendFact::Error { fields: &fields };
                                h.feed_fact(conn, f, stop_after)
                            }
                        }
                    }
                } else if !h.st.facts {
                    let mut b = Vec::new();
                    for _ in 0..=inp.below(4) {
                        backend_bytes(&mut inp, &mut b);
                    }
                    for p in pieces(&mut inp, &b) {
                        h.feed_backend(conn, p, stop_after);
                    }
                }
            }
            5 | 6 => {
                let e = inp.u8() % 8;
                match e {
                    0 => h.event(WRITER, Event::WriterConnected, stop_after),
                    1 => h.event(WRITER, Event::WriterConnectFailed, stop_after),
                    2..=4 => {
                        let (server, key) = match h.st.acquire {
                            Some((s, k)) if inp.u8() % 8 != 0 => (s, Some(k)),
                            _ => (u32::from(inp.u8() % 4), None),
                        };
                        // A pooled connection with the same key, else a fresh one.
                        let pooled =
                            h.st.conns
                                .iter()
                                .find(|(_, c)| c.pooled.is_some() && key.is_some() && c.key == key)
                                .map(|(&id, c)| (id, c.pooled == Some(true)));
                        let (conn, fresh, needs_reset) = match pooled {
                            Some((id, r)) if inp.bool() => (id, false, r),
                            _ => {
                                h.st.next_conn += 1;
                                (h.st.next_conn, true, false)
                            }
                        };
                        let conn = if inp.u8() % 16 == 0 { WRITER } else { conn };
                        h.event(
                            conn,
                            Event::ReaderAttached {
                                server,
                                fresh,
                                needs_reset,
                            },
                            stop_after,
                        );
                    }
                    5 => {
                        let no_credentials = inp.bool();
                        h.event(
                            STRANGER,
                            Event::ReaderUnavailable { no_credentials },
                            stop_after,
                        )
                    }
                    _ => {
                        let ids: Vec<ConnId> = h.st.conns.keys().copied().collect();
                        let conn = if ids.is_empty() || inp.u8() % 8 == 0 {
                            STRANGER
                        } else {
                            ids[inp.below(ids.len())]
                        };
                        h.event(conn, Event::ConnectionLost, stop_after);
                    }
                }
            }
            _ => {
                // Engine-wide changes between inputs (other sessions, the monitor, the admin).
                let server = u32::from(inp.u8() % 3);
                match inp.u8() % 8 {
                    0 => {
                        h.engine.writer_changed(0);
                    }
                    1 => {
                        let lsn = Lsn(inp.u64());
                        h.engine.reader_sample(server, lsn, h.st.now);
                    }
                    2 => {
                        let ok = inp.bool();
                        h.engine.set_reader_health(server, ok);
                    }
                    3 => {
                        h.engine.remove_reader(server);
                    }
                    4 => h.engine.add_reader(server, 1),
                    5 => h.engine.replace_config(alt.clone()),
                    6 => {
                        let lsn = Lsn(inp.u64());
                        if inp.bool() {
                            let g = h.engine.writer_view(0).generation;
                            h.engine.observe_writer_lsn(0, g, lsn);
                        } else {
                            h.engine.writer_sample(0, lsn, h.st.now);
                        }
                    }
                    7 if inp.bool() => {
                        let v = *inp.pick(&[150_018u32, 190_000, 0, u32::MAX]);
                        h.engine.set_server_version(server, v);
                    }
                    _ => {
                        let _ = h.session.executing_connection();
                        let _ = h.session.backend_key();
                        let _ = h.session.lsn_state();
                    }
                }
            }
        }
    }
    h.st.log
}

pub fn run(data: &[u8]) {
    let first = run_once(data);
    let second = run_once(data);
    assert!(first == second, "the same inputs gave different actions");
}
