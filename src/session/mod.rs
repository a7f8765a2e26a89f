//! The per-client session state machine: collect → plan → execute → process_result (SPEC §4).
//!
//! Inputs: [`Session::recv_client`], [`Session::recv_backend`], [`Session::on_backend_event`].
//! Output: [`Session::poll_action`] until `None` — drain every action before the next input
//! (enforced). The session never blocks, never reads a clock (`now_ms` comes with each input)
//! and never calls the host.
//!
//! Client statements are decided strictly in order; a pipelined statement waits (its bytes stay
//! in the host's buffer) until the previous one has completed, because its routing may depend on
//! the previous one's LSN.

pub mod actions;
mod backend;
mod client;
mod facts;
pub mod plan;
mod route;
mod startup;
pub mod state;
mod wrapper;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::classify::{Classification, Isolation, Kind, Var};
use crate::cluster::readers::{ChoiceRequest, Hostgroup, ServerId};
use crate::cluster::stats::Counter;
use crate::cluster::{Engine, WriterView};
use crate::config::{Config, Consistency, OnWaitTimeout, ReadFallback, ServerDialect};
use crate::policy::{self, ErrorFacts, FailureClass, Progress, Recovery};
use crate::protocol::backend::{BackendMessage, ErrorFields};
use crate::protocol::encode;
use crate::protocol::framer::{BodyMode, Framer, Step};
use crate::protocol::frontend::FrontendMessage;
use crate::protocol::startup::StartupPacket;
use crate::protocol::{tag, Lsn, LsnField, Marker, Rfq, RfqExtensions, TxStatus, XidList};

pub use crate::decision::{Decision, Outcome, Reason};
pub use actions::{Action, ConnId};
pub use facts::BackendFact;
pub use startup::{ClientInfo, Role, Startup};

use actions::ActionQueue;
use plan::{plan, PlanInput, Protocol, StatementView, TxnView};
use state::{Hazards, LsnState, Settings, TxnState};

/// Most client messages the session holds undecided (pipelining); beyond it `recv_client`
/// consumes no more until earlier statements complete.
const MAX_PENDING_MESSAGES: usize = 1024;
/// Most bytes of undecided client messages the session copies.
const MAX_PENDING_COPY: usize = 4 << 20;
/// Most bytes of held backend messages (a reader attempt's notices before its result begins).
const MAX_HELD: usize = 64 << 10;
/// Streamed messages up to this size reach the client whole (their bytes stay in the host's
/// buffer until the message is complete), so a backend that breaks mid-message never leaves the
/// client with half a message. Larger ones are forwarded as they arrive.
const STREAM_WHOLE_MAX: usize = 64 << 10;

/// An input the host reports about a backend connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The writer connection asked for by `ConnectWriter` is open and its startup packet sent.
    WriterConnected,
    /// The writer connection could not be opened.
    WriterConnectFailed,
    /// A reader connection for `AcquireReader`. `fresh`: opened for this request (its settings
    /// are the startup defaults); `needs_reset`: it still holds an XID import.
    ReaderAttached {
        server: ServerId,
        fresh: bool,
        needs_reset: bool,
    },
    /// No reader connection can be had now (`no_credentials`: this user cannot log in on the
    /// readers at all).
    ReaderUnavailable { no_credentials: bool },
    /// The connection broke.
    ConnectionLost,
}

/// Why an input was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("actions are pending: poll them all before the next input")]
    ActionsPending,
    #[error("the session is closed")]
    Closed,
    #[error("connection {0} is not used by this session")]
    UnknownConnection(ConnId),
    #[error("event not expected now: {0}")]
    UnexpectedEvent(&'static str),
    /// A peer violated the protocol. The queued actions say what to close: drain them.
    #[error("protocol violation: {0}")]
    Protocol(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    AwaitStartup,
    AwaitWriter,
    Auth,
    Ready,
    Closed,
}

/// What the session knows of one undecided client message.
#[derive(Clone, Debug)]
enum MsgInfo {
    Query {
        class: Option<Classification>,
        why_not: Option<Reason>,
    },
    Parse {
        unnamed: bool,
        class: Option<Classification>,
    },
    Bind {
        unnamed: bool,
    },
    Execute {
        unnamed: bool,
    },
    Describe,
    Close,
    Sync,
    Flush,
    CopyData,
    CopyDone,
    CopyFail,
    FunctionCall,
    Password,
    Terminate,
}

impl MsgInfo {
    fn is_extended(&self) -> bool {
        matches!(
            self,
            MsgInfo::Parse { .. }
                | MsgInfo::Bind { .. }
                | MsgInfo::Execute { .. }
                | MsgInfo::Describe
                | MsgInfo::Close
                | MsgInfo::Sync
                | MsgInfo::Flush
        )
    }
}

#[derive(Debug)]
struct ClientMsg {
    len: usize,
    arrived: usize,
    acted: usize,
    info: MsgInfo,
    /// The message's wire bytes, when it arrived whole and may be needed after the host's
    /// buffer moved on (reader routing, retries).
    copy: Option<Vec<u8>>,
}

/// Where a statement attempt runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    Writer,
    /// Waiting for `Event::ReaderAttached` / `ReaderUnavailable`.
    AwaitReader {
        server: ServerId,
    },
    Reader {
        conn: ConnId,
        server: ServerId,
    },
    /// Answered by the engine (REJECT / engine error) and waiting for the writer's abort.
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitKind {
    Query,
    Extended,
    FunctionCall,
}

/// The statement in flight.
#[derive(Debug)]
struct Current {
    kind: UnitKind,
    decision: Decision,
    class: Option<Classification>,
    may_write: bool,
    attempt: Attempt,
    /// Reader retries so far, and readers that failed this statement.
    reader_retries: u32,
    excluded: Vec<ServerId>,
    /// The writer said CopyInResponse: client COPY data flows to it.
    copy_in: bool,
    /// An extended batch was sent to the writer before its Sync: later extended messages follow.
    extended_open: bool,
    /// An error was forwarded to the client for this statement.
    errored: bool,
    /// The decision needed the LSN state of this generation (split retries are gated on it).
    generation: u64,
    /// Statement text of Set/Reset statements (needed after completion).
    sql: Option<Vec<u8>>,
    /// Hidden statements in front of the client's on the reader.
    hidden: u16,
    /// Whether the unit contained BEGIN (and its options).
    begin: Option<Option<Isolation>>,
    /// The reader waits with a statement of its own (PostgreSQL 19's WAIT FOR LSN): a timeout
    /// is recognised by position (W-5).
    wait_statement: bool,
}

/// What a backend connection is expected to answer next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExpectKind {
    /// The writer's startup and authentication, until the first RFQ.
    Auth,
    /// The client's statement (or a batch of extended messages).
    Statement,
    /// The hidden failing statement that aborts the writer's transaction (F-3).
    Abort,
    /// The hidden post-commit `SELECT pg_current_wal_insert_lsn()` (issue 11).
    Probe,
}

#[derive(Debug)]
struct Expect {
    kind: ExpectKind,
    /// Hidden statement results (CommandComplete) still to swallow before the client's part.
    hidden_cc: u16,
    /// Hidden RFQs still to swallow (a hidden Query sent before an extended batch).
    hidden_rfq: u8,
    /// Everything is discarded until the RFQ (a failed attempt, or the hidden abort).
    discard: bool,
    /// Reader attempt: hold notices and parse/bind completions until the result begins.
    hold: bool,
    result_started: bool,
    /// Any ErrorResponse arrived (the Query's implicit transaction rolled back, W-6).
    saw_error: bool,
    failure: Option<(FailureClass, Recovery)>,
    /// Engine-built error detail for a failure that cannot be forwarded as is.
    failure_text: Option<String>,
}

impl Expect {
    fn new(kind: ExpectKind) -> Expect {
        Expect {
            kind,
            hidden_cc: 0,
            hidden_rfq: 0,
            discard: matches!(kind, ExpectKind::Abort | ExpectKind::Probe),
            hold: false,
            result_started: false,
            saw_error: false,
            failure: None,
            failure_text: None,
        }
    }
}

#[derive(Debug)]
struct Backend {
    conn: ConnId,
    server: Option<ServerId>,
    ext: RfqExtensions,
    framer: Framer,
    expect: VecDeque<Expect>,
    /// Disposition of the body of the streamed message in progress: forward (true) or discard.
    streaming: Option<bool>,
    /// Bytes of the streamed message in progress to forward, not yet covered by an action:
    /// a message reaches the client whole unless it is larger than `STREAM_WHOLE_MAX`.
    held_fwd: usize,
    /// Part of the message in progress already went to the client: if the connection breaks
    /// now, the client's stream is cut mid-message and can only be closed.
    partial_out: bool,
    /// Holds an XID import (awide keeps imports: P-7).
    dirty: bool,
    /// The Query in flight resets the import: clean once it succeeds.
    clean_on_success: bool,
    /// The Query in flight brings the settings in line: if it fails, the connection's settings
    /// are unknown and it must not be pooled under the session's key.
    settings_pending: bool,
}

/// The transaction's pinned reader (P-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pin {
    conn: ConnId,
    server: ServerId,
    hostgroup: Hostgroup,
    generation: u64,
    profile_generation: u64,
    config_generation: u64,
    /// Last replay LSN the reader reported on its RFQ.
    replay: Lsn,
}

/// One client's session. Used by one thread at a time; may move between threads.
#[derive(Debug)]
pub struct Session {
    engine: Arc<Engine>,
    config: Arc<Config>,
    classifier: Arc<crate::classify::Classifier>,
    config_generation: u64,
    /// Until the startup packet: then its addresses live on in the startup's identity.
    info: Option<Box<ClientInfo>>,
    writer_hostgroup: Hostgroup,
    now: u64,
    phase: Phase,
    client_framer: Framer,
    queue: VecDeque<ClientMsg>,
    queue_copied: usize,
    /// Conn the client's streamed message in progress is forwarded to (None: discarded).
    client_streaming: Option<Option<ConnId>>,
    startup: Option<Startup>,
    writer: Option<Backend>,
    readers: Vec<Backend>,
    current: Option<Current>,
    lsn: LsnState,
    txn: TxnState,
    writer_status: TxStatus,
    hazards: Hazards,
    protocol_statements: bool,
    pinned_writer: bool,
    settings: Settings,
    /// Cached reader key and reader StartupMessage for (profile generation, settings version).
    reader_startup: Option<((u64, u64), crate::pool::ReaderKey, Vec<u8>)>,
    /// Released reader backends, kept for their buffers.
    spare_backends: Vec<Backend>,
    session_isolation: Option<Isolation>,
    backend_key: Option<(i32, Box<[u8]>)>,
    /// The client's user cannot log in on the readers: never ask again.
    readers_forbidden: bool,
    pin: Option<Pin>,
    held: Vec<u8>,
    held_writer: Vec<u8>,
    /// Host time the writer acknowledged a write whose position is unknown (issue 11).
    write_ack_ms: Option<u64>,
    /// The LSN the in-flight probe answered with.
    probe_lsn: Option<Lsn>,
    orig: Vec<u8>,
    /// The server dialect as of the last collect (P-2).
    dialect: ServerDialect,
    out: ActionQueue,
    last_error: String,
    salt: u64,
}

fn wire(tag: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(body);
}

fn config_seed(engine: &Engine) -> u64 {
    engine.config().seed
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Session {
    /// A session for a new client connection.
    pub fn new(engine: Arc<Engine>, info: ClientInfo) -> Session {
        let config = engine.config();
        let config_generation = engine.config_generation();
        let writer_hostgroup = info.writer_hostgroup.unwrap_or(config.writer_hostgroup);
        let limits = config.limits;
        let generation = engine.writer_view(writer_hostgroup).generation;
        Session {
            classifier: engine.classifier(),
            config,
            config_generation,
            writer_hostgroup,
            info: Some(Box::new(info)),
            now: 0,
            phase: Phase::AwaitStartup,
            client_framer: Framer::new_startup(limits),
            // Almost always one message at a time: room for one, grown only by pipelining.
            queue: VecDeque::with_capacity(1),
            queue_copied: 0,
            client_streaming: None,
            startup: None,
            writer: None,
            readers: Vec::new(),
            current: None,
            lsn: LsnState {
                generation,
                ..LsnState::default()
            },
            txn: TxnState::default(),
            writer_status: TxStatus::Idle,
            hazards: Hazards::default(),
            protocol_statements: false,
            pinned_writer: false,
            settings: Settings::default(),
            reader_startup: None,
            spare_backends: Vec::new(),
            session_isolation: None,
            backend_key: None,
            readers_forbidden: false,
            pin: None,
            held: Vec::new(),
            held_writer: Vec::new(),
            write_ack_ms: None,
            probe_lsn: None,
            orig: Vec::new(),
            dialect: ServerDialect::Awide,
            out: ActionQueue::default(),
            last_error: String::new(),
            // Deterministic: the configured seed, mixed per statement.
            salt: config_seed(&engine),
            engine,
        }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The next action, or `None` when everything is drained.
    pub fn poll_action(&mut self) -> Option<Action<'_>> {
        // The reader StartupMessage is the session's cached one (valid until its next input).
        let startup = self
            .reader_startup
            .as_ref()
            .map_or(&[][..], |(_, _, b)| b.as_slice());
        self.out.poll(startup)
    }

    /// Whether actions are waiting to be polled.
    pub fn has_actions(&self) -> bool {
        !self.out.is_empty()
    }

    /// The backend connection executing the client's current statement (for CancelRequest).
    pub fn executing_connection(&self) -> Option<ConnId> {
        let cur = self.current.as_ref()?;
        match cur.attempt {
            Attempt::Writer | Attempt::Local => self.writer.as_ref().map(|w| w.conn),
            Attempt::Reader { conn, .. } => Some(conn),
            Attempt::AwaitReader { .. } => None,
        }
    }

    /// The writer's BackendKeyData as forwarded to the client (to match CancelRequests).
    pub fn backend_key(&self) -> Option<(i32, &[u8])> {
        self.backend_key.as_ref().map(|(p, s)| (*p, &s[..]))
    }

    /// The client's startup, once received.
    pub fn startup(&self) -> Option<&Startup> {
        self.startup.as_ref()
    }

    /// A complete StartupMessage for a new backend connection of `role` (W-1).
    pub fn startup_message(&self, role: Role) -> Option<Vec<u8>> {
        let s = self.startup.as_ref()?;
        let mut out = Vec::new();
        s.encode_for(role, &mut out);
        Some(out)
    }

    /// S-1 state, for hosts' logs and tests.
    pub fn lsn_state(&self) -> LsnState {
        self.lsn
    }

    /// Whether the client is inside an explicit transaction (writer status `T`/`E`).
    pub fn in_transaction(&self) -> bool {
        self.txn.active
    }

    /// The pinned reader connection of the current transaction, if any (P-7).
    pub fn pinned_reader(&self) -> Option<ConnId> {
        self.pin.map(|p| p.conn)
    }

    /// The last error text (protocol violations, refused inputs).
    pub fn last_error(&self) -> &str {
        &self.last_error
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    fn check_input(&mut self, now: u64) -> Result<(), SessionError> {
        if !self.out.is_empty() {
            return Err(SessionError::ActionsPending);
        }
        if self.phase == Phase::Closed {
            return Err(SessionError::Closed);
        }
        self.now = self.now.max(now);
        Ok(())
    }

    /// Adopts a replaced configuration (and its classifier) at the next statement.
    fn refresh_config(&mut self) {
        let cg = self.engine.config_generation();
        if cg != self.config_generation {
            self.config = self.engine.config();
            self.classifier = self.engine.classifier();
            self.config_generation = cg;
        }
    }

    fn fail(&mut self, e: SessionError) -> SessionError {
        self.last_error = e.to_string();
        e
    }
}

impl Drop for Session {
    /// A session freed with a reader statement in flight gives back that reader's load count
    /// (R-2 balances on it).
    fn drop(&mut self) {
        for r in &self.readers {
            if !r.expect.is_empty() {
                if let Some(s) = r.server {
                    self.engine.readers().end_use(s);
                }
            }
        }
    }
}
