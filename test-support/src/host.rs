//! A fake host for transcript tests: real protocol bytes in, the exact action sequence out, and
//! the bytes each side actually receives (reconstructed by `polarsplit::Streams`).

use std::sync::Arc;

use crate::action::A;
use crate::api::{ClientInfo, Config, ConnId, Decision, Engine, Event, Session, Streams};
use crate::{be, fe};

/// The writer connection's id in every fake host.
pub const WRITER: ConnId = 100;

/// Addresses of the one test client (identity mode `client`) and of the proxy.
pub fn client_info() -> ClientInfo {
    ClientInfo {
        client_addr: Some(("10.0.0.7".into(), 40000)),
        proxy_addr: Some(("127.0.0.1".into(), 6432)),
        writer_hostgroup: None,
    }
}

/// An engine with readers 1 and 2 in hostgroup 1.
pub fn engine_with_two_readers(c: Config) -> Arc<Engine> {
    let engine = Engine::new(c);
    engine.add_reader(1, 1);
    engine.add_reader(2, 1);
    engine
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The writer's answer to the engine's capture of the session state (S-5) for a session whose
/// session user is `user`: CloseComplete, ParseComplete, BindComplete and CloseComplete (its
/// statement closed before and after its Parse and Bind, so none stays prepared), one row per
/// setting (`kind`, name and value hex-encoded), CommandComplete, an idle RFQ.
pub fn capture_answer_as(user: &str, settings: &[(&str, &str)], role: Option<&str>) -> Vec<u8> {
    capture_answer_with(user, settings, role, &[])
}

/// [`capture_answer_as`] with rows of other kinds too: `(kind, name)` with an empty value —
/// `(4, "temp")` the session has temporary objects, `(6, "prepared")` SQL-prepared statements.
pub fn capture_answer_with(
    user: &str,
    settings: &[(&str, &str)],
    role: Option<&str>,
    others: &[(u8, &str)],
) -> Vec<u8> {
    let mut b = steps_answer();
    let row = |k: &str, n: &str, v: &str| {
        be::data_row(&[Some(k), Some(hex(n).as_str()), Some(hex(v).as_str())])
    };
    for (n, v) in settings {
        b.extend(row("1", n, v));
    }
    b.extend(row("2", "session_authorization", user));
    b.extend(row("3", "role", role.unwrap_or("none")));
    for (k, n) in others {
        b.extend(row(&k.to_string(), n, ""));
    }
    b.extend(be::command_complete(&format!(
        "SELECT {}",
        settings.len() + 2 + others.len()
    )));
    b.extend(be::rfq(b'I', None, None));
    b
}

/// The writer's answers to the Close, Parse, Bind and Close in front of the engine's probe and
/// capture (W-7, S-5): CloseComplete, ParseComplete, BindComplete, CloseComplete.
pub fn steps_answer() -> Vec<u8> {
    let mut b = be::close_complete();
    b.extend(be::parse_complete());
    b.extend(be::bind_complete());
    b.extend(be::close_complete());
    b
}

/// The writer's answers to the engine's probe (W-7) up to its CommandComplete: CloseComplete,
/// ParseComplete, BindComplete, CloseComplete (its statement closed before its Parse and after
/// its Bind), the row with `lsn`, CommandComplete, and the CloseComplete of its own portal
/// `in_block`.
pub fn probe_answer_rows(lsn: &str, in_block: bool) -> Vec<u8> {
    let mut b = steps_answer();
    b.extend(be::data_row(&[Some(lsn)]));
    b.extend(be::command_complete("SELECT 1"));
    if in_block {
        b.extend(be::close_complete());
    }
    b
}

/// Whether `bytes` (sent to the writer) hold the engine's capture (a Bind of it).
pub fn sends_capture(bytes: &[u8]) -> bool {
    crate::decode::messages(bytes)
        .iter()
        .any(|(t, b)| *t == b'B' && b.windows(18).any(|w| w == b"polarsplit_capture"))
}

/// The writer's answer to a startup: AuthenticationOk, `extra` (ParameterStatus, BackendKeyData),
/// and an idle RFQ with LSN 0x1000.
/// The writer's answers to the P-5 touch before its RFQ: ParseComplete, BindComplete, one row,
/// CommandComplete, and the CloseCompletes of its portal and statement.
pub fn touch_answer() -> Vec<u8> {
    let mut b = be::parse_complete();
    b.extend(be::bind_complete());
    b.extend(be::data_row(&[Some("1")]));
    b.extend(be::command_complete("SELECT 1"));
    b.extend(be::close_complete());
    b.extend(be::close_complete());
    b
}

/// Whether `bytes` end with the engine's P-5 touch of the writer's block (`polarsplit_touch`
/// parsed, bound, run and closed, then a Sync): never a simple Query or anything unnamed.
pub fn ends_with_touch(bytes: &[u8]) -> bool {
    let m = crate::decode::messages(bytes);
    let Some(tail) = m.len().checked_sub(6).map(|i| &m[i..]) else {
        return false;
    };
    let tags: Vec<u8> = tail.iter().map(|(t, _)| *t).collect();
    tags == b"PBECCS"
        && tail[0].1.starts_with(b"polarsplit_touch\0")
        && tail[1]
            .1
            .starts_with(b"polarsplit_touch\0polarsplit_touch\0")
        && tail[2].1.starts_with(b"polarsplit_touch\0")
        && tail[3].1 == b"Ppolarsplit_touch\0"
        && tail[4].1 == b"Spolarsplit_touch\0"
}

/// Whether `bytes` are the engine's F-3 abort of the writer's block: `polarsplit_abort` parsed,
/// bound, closed and run (it raises), then a Sync — never a simple Query.
pub fn is_abort(bytes: &[u8]) -> bool {
    let m = crate::decode::messages(bytes);
    let tags: Vec<u8> = m.iter().map(|(t, _)| *t).collect();
    tags == b"PBCES"
        && m[0].1.starts_with(b"polarsplit_abort\0DO $polarsplit$")
        && m[1].1.starts_with(b"polarsplit_abort\0polarsplit_abort\0")
        && m[2].1 == b"Spolarsplit_abort\0"
        && m[3].1.starts_with(b"polarsplit_abort\0")
}

/// Whether `bytes` are the engine's keepalive of an idle writer: one lone Sync.
pub fn is_keepalive(bytes: &[u8]) -> bool {
    crate::decode::messages(bytes) == [(b'S', Vec::new())]
}

pub fn writer_auth(extra: &[Vec<u8>]) -> Vec<u8> {
    let mut auth = be::auth_ok();
    for m in extra {
        auth.extend_from_slice(m);
    }
    auth.extend(be::rfq(b'I', Some(0x1000), None));
    auth
}

pub struct Host {
    pub engine: Arc<Engine>,
    pub session: Session,
    pub streams: Streams,
    pub now: u64,
    /// Every action so far.
    pub log: Vec<A>,
}

impl Host {
    /// An engine with readers 1 and 2 in hostgroup 1, and a session for one client.
    pub fn new(c: Config) -> Host {
        let engine = engine_with_two_readers(c);
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
            out.push(A::of(&a));
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
        self.client(&fe::startup(&[("user", "app"), ("database", "db")]));
        self.event(WRITER, Event::WriterConnected);
        let auth = writer_auth(&[
            be::param_status("server_version", "15.8"),
            be::backend_key(77, 88),
        ]);
        self.backend(WRITER, &auth);
        self.writer_answers_startup_capture(&[]);
        self.take_client();
    }

    /// The writer answers the capture the engine sends right behind the writer's startup RFQ
    /// (S-5: the settings the writer session got at login, from `ALTER ROLE/DATABASE … SET`),
    /// for the session user `app`, with `settings` as its login-time settings. Asserts that the
    /// capture is what the writer was sent since the startup, and takes those bytes.
    pub fn writer_answers_startup_capture(&mut self, settings: &[(&str, &str)]) -> Vec<A> {
        let sent = self.take_sent(WRITER);
        let tags = crate::decode::tags(&sent);
        assert!(
            sends_capture(&sent) && tags == "CPBCES",
            "the capture follows the writer's startup RFQ, alone: {tags}"
        );
        self.backend(WRITER, &capture_answer_as("app", settings, None))
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
        self.attach_as(conn, false)
    }

    /// [`Host::attach`] with a connection the host opened for it (`fresh`: its startup state).
    pub fn attach_fresh(&mut self, conn: ConnId) -> Vec<A> {
        self.attach_as(conn, true)
    }

    /// When the first bytes sent to `conn` are the settings replay of a session with nothing
    /// to replay — only its role (`none`) and the login check (S-5), which the engine sends to
    /// every fresh reader connection — answers it as a reader whose login matches the writer's
    /// does, and takes those bytes: the transcript goes on as on a connection with nothing to
    /// replay. Returns the answer's actions (`None`: no such replay there).
    pub fn answer_bare_replay(&mut self, conn: ConnId) -> Option<Vec<A>> {
        let sent = &self.streams.backend(conn).sent;
        if sent.len() < 5 || sent[0] != b'Q' {
            return None;
        }
        let len = 1 + u32::from_be_bytes([sent[1], sent[2], sent[3], sent[4]]) as usize;
        let text = String::from_utf8_lossy(&sent[5..len.min(sent.len())]).into_owned();
        let role_none = "SELECT pg_catalog.set_config(pg_catalog.convert_from(pg_catalog.decode('726f6c65', 'hex'), 'UTF8'), pg_catalog.convert_from(pg_catalog.decode('6e6f6e65', 'hex'), 'UTF8'), false); SELECT ('polarsplit: the reader connection has ";
        if !text.starts_with(role_none) || !text.contains("'{}'::pg_catalog.text[]") {
            return None;
        }
        self.streams.backend(conn).sent.drain(..len);
        let mut b = be::command_complete("SELECT 1");
        b.extend(be::command_complete("SELECT 0"));
        b.extend(be::rfq(b'I', None, None));
        Some(self.backend(conn, &b))
    }

    fn attach_as(&mut self, conn: ConnId, fresh: bool) -> Vec<A> {
        let server = self
            .log
            .iter()
            .rev()
            .find_map(|a| match a {
                A::Acquire { server, .. } => Some(*server),
                _ => None,
            })
            .expect("an AcquireReader");
        let mut acts = self.event(
            conn,
            Event::ReaderAttached {
                server,
                fresh,
                needs_reset: false,
            },
        );
        if fresh {
            if let Some(more) = self.answer_bare_replay(conn) {
                acts.extend(more);
            }
        }
        acts
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
        let mut b = be::command_complete(tag);
        b.extend(be::rfq(status, lsn, xact.map(|(m, x)| (m, x.as_bytes()))));
        self.backend(WRITER, &b)
    }

    /// The writer answers the engine's keepalive outside a transaction block (a lone Sync while
    /// the session reads on a reader): its RFQ.
    pub fn writer_answers_touch_idle(&mut self) -> Vec<A> {
        self.backend(WRITER, &be::rfq(b'I', Some(0x1000), None))
    }

    /// The writer answers the hidden `SELECT 1` a read split off its transaction block sent
    /// (P-5; parsed, bound, run and closed under the engine's name): one row, then its RFQ
    /// (`T`, with `lsn` and `xact`).
    pub fn writer_answers_touch(&mut self, lsn: Option<u64>, xact: Option<(u8, &str)>) -> Vec<A> {
        let mut b = touch_answer();
        b.extend(be::rfq(b'T', lsn, xact.map(|(m, x)| (m, x.as_bytes()))));
        self.backend(WRITER, &b)
    }
}
