//! A fake host for transcript tests: real protocol bytes in, the exact action sequence out, and
//! the bytes each side actually receives (reconstructed by `polarsplit::host::Streams`).
#![allow(dead_code)]

use std::sync::Arc;

use polarsplit::classify::Isolation;
use polarsplit::cluster::readers::ServerId;
use polarsplit::config::Config;
use polarsplit::host::Streams;
use polarsplit::pool::ReaderKey;
use polarsplit::protocol::backend::BackendMessage;
use polarsplit::protocol::encode;
use polarsplit::protocol::framer::frame;
use polarsplit::protocol::{FrontendMessage, Limits, RfqExtensions, TxStatus};
use polarsplit::session::{Action, ClientInfo, ConnId, Decision, Event, Session};
use polarsplit::Engine;

pub const WRITER: ConnId = 100;

/// An owned copy of an action, for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum A {
    Encryption { gss: bool },
    Cancel { pid: i32, secret: Vec<u8> },
    ConnectWriter(Vec<u8>),
    Decision(Decision),
    Acquire { server: ServerId, key: ReaderKey },
    FwdClient { conn: ConnId, n: usize },
    DropClient(usize),
    SendBackend { conn: ConnId, bytes: Vec<u8> },
    FwdBackend { conn: ConnId, n: usize },
    DropBackend { conn: ConnId, n: usize },
    SendClient(Vec<u8>),
    Release { conn: ConnId, needs_reset: bool },
    PinWriter(bool),
    CloseBackend(ConnId),
    CloseClient,
}

fn own(a: &Action<'_>) -> A {
    match *a {
        Action::ClientEncryptionRequest { gss } => A::Encryption { gss },
        Action::CancelRequest { pid, secret } => A::Cancel {
            pid,
            secret: secret.to_vec(),
        },
        Action::ConnectWriter { startup } => A::ConnectWriter(startup.to_vec()),
        Action::Decision(d) => A::Decision(d),
        Action::AcquireReader { server, key, .. } => A::Acquire { server, key },
        Action::ForwardClient { conn, n } => A::FwdClient { conn, n },
        Action::DiscardClient { n } => A::DropClient(n),
        Action::SendBackend { conn, bytes } => A::SendBackend {
            conn,
            bytes: bytes.to_vec(),
        },
        Action::ForwardBackend { conn, n } => A::FwdBackend { conn, n },
        Action::DiscardBackend { conn, n } => A::DropBackend { conn, n },
        Action::SendClient { bytes } => A::SendClient(bytes.to_vec()),
        Action::ReleaseReader { conn, needs_reset } => A::Release { conn, needs_reset },
        Action::PinWriter { pinned } => A::PinWriter(pinned),
        Action::CloseBackend { conn } => A::CloseBackend(conn),
        Action::CloseClient => A::CloseClient,
        _ => panic!("unknown action {a:?}"),
    }
}

pub struct Host {
    pub engine: Arc<Engine>,
    pub session: Session,
    pub streams: Streams,
    pub now: u64,
    /// Every action so far.
    pub log: Vec<A>,
}

pub fn config(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    f(&mut c);
    c
}

pub fn client_info() -> ClientInfo {
    ClientInfo {
        client_addr: Some(("10.0.0.7".into(), 40000)),
        proxy_addr: Some(("127.0.0.1".into(), 6432)),
        writer_hostgroup: None,
    }
}

impl Host {
    /// An engine with readers 1 and 2 in hostgroup 1, and a session for one client.
    pub fn new(c: Config) -> Host {
        let engine = Engine::new(c);
        engine.add_reader(1, 1);
        engine.add_reader(2, 1);
        let session = Session::new(engine.clone(), client_info());
        Host {
            engine,
            session,
            streams: Streams::new(),
            now: 1_000,
            log: Vec::new(),
        }
    }

    /// A new client session on an existing engine (several sessions share its readers), at host
    /// time `now`.
    pub fn on(engine: &Arc<Engine>, now: u64) -> Host {
        let session = Session::new(engine.clone(), client_info());
        Host {
            engine: engine.clone(),
            session,
            streams: Streams::new(),
            now,
            log: Vec::new(),
        }
    }

    /// Reports that time passed (R-1b) and drains the actions.
    pub fn timeout(&mut self) -> Vec<A> {
        self.session.on_timeout(self.now).expect("on_timeout");
        self.drain()
    }

    /// Drains every action, applies the byte actions to the streams, returns them owned.
    pub fn drain(&mut self) -> Vec<A> {
        let mut out = Vec::new();
        while let Some(a) = self.session.poll_action() {
            self.streams.apply(&a).expect("contract");
            out.push(own(&a));
        }
        self.log.extend(out.iter().cloned());
        out
    }

    pub fn client(&mut self, bytes: &[u8]) -> Vec<A> {
        let n = self
            .session
            .recv_client(bytes, self.now)
            .expect("recv_client");
        assert_eq!(n, bytes.len(), "all client bytes consumed");
        self.streams.fed_client(bytes);
        self.drain()
    }

    pub fn backend(&mut self, conn: ConnId, bytes: &[u8]) -> Vec<A> {
        self.session
            .recv_backend(conn, bytes, self.now)
            .expect("recv_backend");
        self.streams.fed_backend(conn, bytes);
        self.drain()
    }

    pub fn event(&mut self, conn: ConnId, e: Event) -> Vec<A> {
        self.session
            .on_backend_event(conn, e, self.now)
            .expect("event");
        self.drain()
    }

    /// Startup, writer connected, trust auth, first RFQ (with the writer's LSN extension).
    pub fn connect(&mut self) {
        self.client(&startup(&[("user", "app"), ("database", "db")]));
        self.event(WRITER, Event::WriterConnected);
        let mut auth = auth_ok();
        auth.extend(param_status("server_version", "15.8"));
        auth.extend(backend_key(77, 88));
        auth.extend(rfq(b'I', Some(0x1000), None));
        self.backend(WRITER, &auth);
        self.take_client();
    }

    /// Bytes the client received since the last call.
    pub fn take_client(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.streams.to_client)
    }

    /// Bytes sent to a backend since the last call.
    pub fn take_sent(&mut self, conn: ConnId) -> Vec<u8> {
        std::mem::take(&mut self.streams.backend(conn).sent)
    }

    /// Attaches `conn` for the server of the last AcquireReader.
    pub fn attach(&mut self, conn: ConnId) -> Vec<A> {
        let server = self
            .log
            .iter()
            .rev()
            .find_map(|a| match a {
                A::Acquire { server, .. } => Some(*server),
                _ => None,
            })
            .expect("an AcquireReader");
        self.event(
            conn,
            Event::ReaderAttached {
                server,
                fresh: false,
                needs_reset: false,
            },
        )
    }

    pub fn decisions(&self) -> Vec<Decision> {
        self.log
            .iter()
            .filter_map(|a| match a {
                A::Decision(d) => Some(*d),
                _ => None,
            })
            .collect()
    }

    pub fn last_decision(&self) -> Decision {
        *self.decisions().last().expect("a decision")
    }

    /// The writer answers a plain statement: CommandComplete + RFQ.
    pub fn writer_answers(
        &mut self,
        tag: &str,
        status: u8,
        lsn: Option<u64>,
        xact: Option<(u8, &str)>,
    ) -> Vec<A> {
        let mut b = command_complete(tag);
        b.extend(rfq(status, lsn, xact));
        self.backend(WRITER, &b)
    }
}

pub fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut v = Vec::new();
    encode::startup_message(
        &mut v,
        3,
        0,
        params.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
    );
    v
}

pub fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

pub fn query(sql: &str) -> Vec<u8> {
    let mut v = Vec::new();
    encode::query(&mut v, &[sql.as_bytes()]);
    v
}

pub fn auth_ok() -> Vec<u8> {
    msg(b'R', &0i32.to_be_bytes())
}

pub fn param_status(k: &str, v: &str) -> Vec<u8> {
    msg(b'S', format!("{k}\0{v}\0").as_bytes())
}

pub fn backend_key(pid: i32, secret: i32) -> Vec<u8> {
    let mut b = pid.to_be_bytes().to_vec();
    b.extend_from_slice(&secret.to_be_bytes());
    msg(b'K', &b)
}

/// An RFQ: status, optional 8-byte LSN, optional marker + XID list.
pub fn rfq(status: u8, lsn: Option<u64>, xact: Option<(u8, &str)>) -> Vec<u8> {
    let mut b = vec![status];
    if let Some(l) = lsn {
        b.extend_from_slice(&l.to_be_bytes());
    }
    if let Some((m, x)) = xact {
        b.push(m);
        b.extend_from_slice(x.as_bytes());
        b.push(0);
    }
    msg(b'Z', &b)
}

pub fn command_complete(tag: &str) -> Vec<u8> {
    msg(b'C', format!("{tag}\0").as_bytes())
}

pub fn row_description(cols: u16) -> Vec<u8> {
    let mut b = cols.to_be_bytes().to_vec();
    for i in 0..cols {
        b.extend_from_slice(format!("c{i}\0").as_bytes());
        b.extend_from_slice(&[0; 18]);
    }
    msg(b'T', &b)
}

pub fn data_row(vals: &[&str]) -> Vec<u8> {
    let mut b = (vals.len() as u16).to_be_bytes().to_vec();
    for v in vals {
        b.extend_from_slice(&(v.len() as i32).to_be_bytes());
        b.extend_from_slice(v.as_bytes());
    }
    msg(b'D', &b)
}

/// A complete SELECT answer: RowDescription, rows, CommandComplete.
pub fn select_result(rows: &[&str]) -> Vec<u8> {
    let mut b = row_description(1);
    for r in rows {
        b.extend(data_row(&[r]));
    }
    b.extend(command_complete(&format!("SELECT {}", rows.len())));
    b
}

pub fn error(
    severity: &str,
    code: &str,
    message: &str,
    detail: Option<&str>,
    routine: Option<&str>,
) -> Vec<u8> {
    let mut b = format!("S{severity}\0V{severity}\0C{code}\0M{message}\0");
    if let Some(d) = detail {
        b.push_str(&format!("D{d}\0"));
    }
    if let Some(r) = routine {
        b.push_str(&format!("R{r}\0"));
    }
    b.push('\0');
    msg(b'E', b.as_bytes())
}

pub fn notice(severity: &str, message: &str, detail: Option<&str>) -> Vec<u8> {
    let mut b = format!("S{severity}\0V{severity}\0C01000\0M{message}\0");
    if let Some(d) = detail {
        b.push_str(&format!("D{d}\0"));
    }
    b.push('\0');
    msg(b'N', b.as_bytes())
}

/// The wait-timeout error of W-5.
pub fn wait_timeout_error() -> Vec<u8> {
    error(
        "ERROR",
        "72000",
        "canceling statement due to lsn wait timeout",
        Some("polar_proxy_lsn_wait_timeout"),
        Some("polar_proxy_wait_for_lsn"),
    )
}

/// Splits a byte stream into messages (tag, body).
pub fn messages(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(f) = frame(bytes, &Limits::default()).expect("framing") {
        out.push((f.tag, f.body.to_vec()));
        bytes = &bytes[f.wire_len..];
    }
    assert!(bytes.is_empty(), "trailing partial message");
    out
}

/// The SQL of the Query messages in a frontend byte stream.
pub fn sent_queries(bytes: &[u8]) -> Vec<String> {
    messages(bytes)
        .into_iter()
        .filter_map(|(t, b)| match FrontendMessage::parse(t, &b) {
            Ok(FrontendMessage::Query { sql }) => Some(String::from_utf8_lossy(sql).into_owned()),
            _ => None,
        })
        .collect()
}

/// Tags of the messages in a byte stream, as a string (e.g. "TDDCZ").
pub fn tags(bytes: &[u8]) -> String {
    messages(bytes).iter().map(|(t, _)| *t as char).collect()
}

/// Every RFQ the client received is the standard 6-byte one (P-8): returns their statuses.
pub fn client_rfq_statuses(bytes: &[u8]) -> Vec<u8> {
    messages(bytes)
        .into_iter()
        .filter(|(t, _)| *t == b'Z')
        .map(|(_, b)| {
            assert_eq!(b.len(), 1, "an extended RFQ reached the client");
            b[0]
        })
        .collect()
}

/// Parses an RFQ the client got (for clients that asked for LSNs).
pub fn parse_client_rfq(body: &[u8]) -> (TxStatus, Option<u64>) {
    match BackendMessage::parse(
        b'Z',
        body,
        RfqExtensions {
            lsn: true,
            xact: false,
        },
    )
    .unwrap()
    {
        BackendMessage::ReadyForQuery(r) => (r.status, r.lsn.lsn().map(|l| l.0)),
        _ => unreachable!(),
    }
}

pub fn isolation_rc() -> Option<Isolation> {
    Some(Isolation::ReadCommitted)
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The writer's answer to the engine's capture of the session state (S-5): ParseComplete when
/// the capture statement is parsed for the first time on the connection, BindComplete, one
/// row per setting (`kind`, name and value hex-encoded), CommandComplete, RFQ.
pub fn capture_answer(parsed: bool, settings: &[(&str, &str)], role: Option<&str>) -> Vec<u8> {
    capture_answer_as(parsed, "app", settings, role)
}

/// `capture_answer` for a session whose session user is `user`.
pub fn capture_answer_as(
    parsed: bool,
    user: &str,
    settings: &[(&str, &str)],
    role: Option<&str>,
) -> Vec<u8> {
    let mut b = Vec::new();
    if parsed {
        b.extend(msg(b'1', b""));
    }
    b.extend(msg(b'2', b""));
    let mut n = 0;
    for (k, v) in settings {
        b.extend(data_row(&["1", &hex(k), &hex(v)]));
        n += 1;
    }
    b.extend(data_row(&["2", &hex("session_authorization"), &hex(user)]));
    b.extend(data_row(&["3", &hex("role"), &hex(role.unwrap_or("none"))]));
    b.extend(command_complete(&format!("SELECT {}", n + 2)));
    b.extend(rfq(b'I', None, None));
    b
}

/// Whether `bytes` (sent to the writer) hold the engine's capture (a Bind of it).
pub fn sends_capture(bytes: &[u8]) -> bool {
    messages(bytes)
        .iter()
        .any(|(t, b)| *t == b'B' && b.windows(18).any(|w| w == b"polarsplit_capture"))
}

// --- Extended-protocol client messages --------------------------------------------------------

pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut b = format!("{name}\0{sql}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes());
    msg(b'P', &b)
}

/// A Bind of `stmt` to `portal` with one text parameter `7`.
pub fn bind(portal: &str, stmt: &str) -> Vec<u8> {
    let mut b = format!("{portal}\0{stmt}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes()); // parameter formats
    b.extend_from_slice(&1i16.to_be_bytes()); // one parameter
    b.extend_from_slice(&1i32.to_be_bytes());
    b.push(b'7');
    b.extend_from_slice(&0i16.to_be_bytes()); // result formats
    msg(b'B', &b)
}

pub fn describe(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'D', &b)
}

pub fn execute(portal: &str) -> Vec<u8> {
    execute_rows(portal, 0)
}

pub fn execute_rows(portal: &str, max_rows: i32) -> Vec<u8> {
    let mut b = format!("{portal}\0").into_bytes();
    b.extend_from_slice(&max_rows.to_be_bytes());
    msg(b'E', &b)
}

pub fn close(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'C', &b)
}

pub fn sync() -> Vec<u8> {
    msg(b'S', b"")
}

pub fn flush() -> Vec<u8> {
    msg(b'H', b"")
}

/// psycopg's shape for a query with parameters: Parse, Bind, Describe portal, Execute, Sync.
pub fn unnamed_batch(sql: &str) -> Vec<u8> {
    let mut b = parse("", sql);
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}

/// A named statement executed: Bind, Describe portal, Execute, Sync (psycopg after
/// `prepare_threshold`, asyncpg, JDBC).
pub fn named_execute(stmt: &str) -> Vec<u8> {
    let mut b = bind("", stmt);
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}

/// The backend's answer to Bind/Describe/Execute/Sync of a one-column read.
pub fn bound_answer(rows: &[&str], lsn: Option<u64>) -> Vec<u8> {
    let mut b = msg(b'2', b"");
    b.extend(row_description(1));
    for r in rows {
        b.extend(data_row(&[r]));
    }
    b.extend(command_complete(&format!("SELECT {}", rows.len())));
    b.extend(rfq(b'I', lsn, None));
    b
}

/// ParseComplete then `bound_answer`.
pub fn parsed_answer(rows: &[&str], lsn: Option<u64>) -> Vec<u8> {
    let mut b = msg(b'1', b"");
    b.extend(bound_answer(rows, lsn));
    b
}

/// Statement names in a frontend byte stream, per message: (tag, name).
pub fn named(bytes: &[u8]) -> Vec<(char, String)> {
    messages(bytes)
        .into_iter()
        .filter_map(|(t, b)| {
            let name = match t {
                b'P' | b'D' | b'C' => {
                    let start = usize::from(matches!(t, b'D' | b'C'));
                    let end = b[start..].iter().position(|&x| x == 0)? + start;
                    String::from_utf8_lossy(&b[start..end]).into_owned()
                }
                b'B' => {
                    let p = b.iter().position(|&x| x == 0)?;
                    let e = b[p + 1..].iter().position(|&x| x == 0)? + p + 1;
                    String::from_utf8_lossy(&b[p + 1..e]).into_owned()
                }
                _ => String::new(),
            };
            Some((t as char, name))
        })
        .collect()
}
