//! A lean host that drives a session by counts only: it never holds the bytes it forwards, so
//! the memory a test measures is the engine's.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::api::{Action, Config, ConnId, Decision, Engine, Event, Session, SessionError};
use crate::host::{capture_answer_as, client_info, engine_with_two_readers, writer_auth, WRITER};
use crate::{be, contains, fe};

/// What the lean host keeps of the actions: counts, decisions, and (with `copy`) the bytes the
/// engine built.
#[derive(Debug, Default)]
pub struct Seen {
    pub client_fwd: BTreeMap<ConnId, u64>,
    pub client_drop: u64,
    pub backend_fwd: BTreeMap<ConnId, u64>,
    pub backend_drop: BTreeMap<ConnId, u64>,
    pub send_backend: Vec<(ConnId, Vec<u8>)>,
    pub send_client: Vec<u8>,
    pub acquire: Option<u32>,
    pub decisions: Vec<Decision>,
    pub releases: Vec<ConnId>,
    pub closes: Vec<ConnId>,
    pub close_client: bool,
    pub actions: usize,
}

/// A host that drives a session by counts only: it never holds the bytes it forwards, so the
/// memory a test measures is the engine's. With `copy` off it copies no byte at all (decisions
/// are small plain values and are always kept).
pub struct Lean {
    /// Byte strings no action may carry (checked on the borrowed bytes, never copied).
    pub forbid: Vec<&'static [u8]>,
    pub forbidden_seen: usize,
    pub engine: Arc<Engine>,
    pub session: Session,
    pub now: u64,
    pub copy: bool,
    pub seen: Seen,
    pub client_fed: u64,
    pub backend_fed: BTreeMap<ConnId, u64>,
}

impl Lean {
    pub fn new(c: Config) -> Lean {
        let engine = engine_with_two_readers(c);
        let session = Session::new(engine.clone(), client_info());
        Lean {
            forbid: Vec::new(),
            forbidden_seen: 0,
            engine,
            session,
            now: 1_000,
            copy: true,
            seen: Seen::default(),
            client_fed: 0,
            backend_fed: BTreeMap::new(),
        }
    }

    pub fn drain(&mut self) {
        while let Some(a) = self.session.poll_action() {
            let bytes: &[u8] = match a {
                Action::SendBackend { bytes, .. } | Action::SendClient { bytes } => bytes,
                Action::ConnectWriter { startup } | Action::AcquireReader { startup, .. } => {
                    startup
                }
                Action::CancelRequest { secret, .. } => secret,
                _ => &[],
            };
            if self.forbid.iter().any(|f| contains(bytes, f)) {
                self.forbidden_seen += 1;
            }
            let s = &mut self.seen;
            s.actions += 1;
            match a {
                Action::ForwardClient { conn, n } => {
                    *s.client_fwd.entry(conn).or_default() += n as u64
                }
                Action::DiscardClient { n } => s.client_drop += n as u64,
                Action::ForwardBackend { conn, n } => {
                    *s.backend_fwd.entry(conn).or_default() += n as u64
                }
                Action::DiscardBackend { conn, n } => {
                    *s.backend_drop.entry(conn).or_default() += n as u64
                }
                Action::SendBackend { conn, bytes } if self.copy => {
                    s.send_backend.push((conn, bytes.to_vec()))
                }
                Action::SendClient { bytes } if self.copy => s.send_client.extend_from_slice(bytes),
                Action::AcquireReader { server, .. } => s.acquire = Some(server),
                Action::Decision(d) => s.decisions.push(d),
                Action::ReleaseReader { conn, .. } => s.releases.push(conn),
                Action::CloseBackend { conn } => s.closes.push(conn),
                Action::CloseClient => s.close_client = true,
                _ => {}
            }
        }
    }

    /// Feeds client bytes; returns how many the session took.
    pub fn client(&mut self, bytes: &[u8]) -> Result<usize, SessionError> {
        let r = self.session.recv_client(bytes, self.now);
        if let Ok(n) = r {
            self.client_fed += n as u64;
        }
        self.drain();
        r
    }

    pub fn backend(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SessionError> {
        let r = self.session.recv_backend(conn, bytes, self.now);
        if r.is_ok() || matches!(r, Err(SessionError::Protocol { .. })) {
            *self.backend_fed.entry(conn).or_default() += bytes.len() as u64;
        }
        self.drain();
        r
    }

    pub fn event(&mut self, conn: ConnId, e: Event) -> Result<(), SessionError> {
        let r = self.session.on_backend_event(conn, e, self.now);
        self.drain();
        r
    }

    /// Startup, writer connected, trust auth, first RFQ with an LSN.
    pub fn connect(&mut self) {
        self.client(&fe::startup_plain("app", "db"))
            .expect("startup");
        self.event(WRITER, Event::WriterConnected).expect("writer");
        self.backend(WRITER, &writer_auth(&[be::backend_key(7, 8)]))
            .expect("auth");
        self.writer_answers_startup_capture();
    }

    /// The writer answers the capture of its session's login-time state that follows its
    /// startup RFQ (S-5), for the session user `app`, with no settings.
    pub fn writer_answers_startup_capture(&mut self) {
        self.backend(WRITER, &capture_answer_as("app", &[], None))
            .expect("the startup capture's answer");
    }

    /// Client bytes acted on (forwarded anywhere + discarded).
    pub fn client_acted(&self) -> u64 {
        self.seen.client_fwd.values().sum::<u64>() + self.seen.client_drop
    }

    pub fn backend_acted(&self, conn: ConnId) -> u64 {
        self.seen.backend_fwd.get(&conn).copied().unwrap_or(0)
            + self.seen.backend_drop.get(&conn).copied().unwrap_or(0)
    }
}
