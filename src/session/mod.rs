//! The per-client session state machine: collect → plan → execute → process_result (SPEC §4).
//!
//! Inputs: [`Session::recv_client`], [`Session::recv_backend`] (or
//! [`Session::recv_backend_fact`]), [`Session::on_backend_event`], [`Session::on_timeout`].
//! Output: [`Session::poll_action`] until `None` — drain every action before the next input
//! (enforced) — and [`Session::next_deadline`]. The session never blocks, never reads a clock
//! (`now_ms` comes with each input) and never calls the host.
//!
//! Where each step lives:
//! - `client`: client bytes → framing → the queue of undecided messages; `pump` decides them in
//!   order, into *units* (a simple Query, an extended-protocol batch up to its Sync, a
//!   FunctionCall).
//! - `batch` and `statements`: extended-protocol batches (E-1) and the client's prepared
//!   statements (E-2).
//! - `route`: collect (P-2), plan (`plan`, P-3/P-5, a pure function), bind a reader (P-4) and
//!   send the unit — with the hidden statements of `hidden` in front of it — to the writer or a
//!   reader; failures and retries (§6).
//! - `backend`: backend bytes → framing → `response` (which request each message answers, and
//!   whose it is) → forward, swallow or hold; `writer` and `reader` apply what answers mean to
//!   the session's state (`state`, `effects`).
//!
//! Client units are decided strictly in order. A unit bound for the writer may be sent while
//! earlier units are still running there (pipelining); a read waits until everything before
//! it has answered, because its target depends on what they wrote (and a batch moves to another
//! connection only after its predecessor's ReadyForQuery, E-1).

mod actions;
mod backend;
mod batch;
mod bind;
mod client;
mod effects;
mod facts;
mod finish;
mod hidden;
#[doc(hidden)]
pub mod plan;
mod reader;
mod response;
mod route;
mod shapes;
mod startup;
#[doc(hidden)]
pub mod state;
mod statements;
mod tokens;
mod units;
mod writer;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::classify::{Classification, Isolation};
use crate::cluster::readers::ReaderRef;
use crate::cluster::Engine;
use crate::config::{Config, ServerDialect};
use crate::ids::{Hostgroup, ServerId};
use crate::policy::{self, FailureClass, Recovery};
use crate::protocol::framer::Framer;
use crate::protocol::frontend::Names;
use crate::protocol::{Lsn, ProtocolError, RfqExtensions, TxStatus};

pub use crate::decision::{Decision, Outcome, Reason};
pub use actions::{Action, ConnId};
pub use facts::BackendFact;
pub use startup::{ClientInfo, Params, Role, Startup};

use actions::ActionQueue;
use response::Responses;
use state::{Hazards, LsnState, ProbeCredit, SessionSettings, TxnState};
use statements::{ClientStatements, ConnStatements};

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
// `Backend::held_fwd` holds fewer bytes than this in a `u16`.
const _: () = assert!(STREAM_WHOLE_MAX <= 1 << 16);
/// P-5: a read split off a transaction block touches the writer's block when it was last touched
/// this long ago (ms) or never: often enough for any sensible idle_in_transaction_session_timeout,
/// once per block for one that reads in a burst.
const TOUCH_INTERVAL_MS: u64 = 100;
/// C-1: how long a token-reporting client's RFQ waits for a writer sample to position a write
/// committed where no probe may follow it (a block left open), and how often it looks.
const HELD_RFQ_SAMPLE_WAIT_MS: u64 = 1000;
const HELD_RFQ_SAMPLE_POLL_MS: u64 = 2;

/// An input the host reports about a backend connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The writer connection asked for by `ConnectWriter` is open and its startup packet sent.
    WriterConnected,
    /// The writer connection could not be opened.
    WriterConnectFailed,
    /// A reader connection for `AcquireReader`. `fresh`: opened for this request (its settings
    /// are the startup defaults and nothing is prepared on it); `needs_reset`: it still holds
    /// an XID import.
    ReaderAttached {
        /// The reader the connection is to (the one `AcquireReader` named).
        server: ServerId,
        /// Opened for this request rather than taken from a pool.
        fresh: bool,
        /// It still holds an XID import from its last user.
        needs_reset: bool,
    },
    /// No reader connection can be had now (`no_credentials`: this user cannot log in on the
    /// readers at all). Not a failure of the reader: the pool is empty, the back-off of
    /// `Engine::reader_retry_after` says not yet, a connection limit was reached.
    ReaderUnavailable {
        /// This user cannot log in on the readers at all (the host has no credentials for
        /// them).
        no_credentials: bool,
    },
    /// The connection `AcquireReader` asked for could not be opened: refused, failed, timed out
    /// (the host's connect timeout), or refused with SQLSTATE 57P03 (`starting_up`: the standby
    /// accepts no connections yet). The writer answers, as for `ReaderUnavailable`, and the
    /// reader has an outage (R-1a) and a failure toward its hold-out (R-1b).
    ReaderConnectFailed {
        /// The standby refused with SQLSTATE 57P03: it is starting up.
        starting_up: bool,
    },
    /// The connection broke.
    ConnectionLost,
}

/// Why an input was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error("actions are pending: poll them all before the next input")]
    /// An input arrived while actions were still queued: poll them all first (the drain rule).
    ActionsPending,
    #[error("the session is closed")]
    /// The session has closed (or was poisoned by a panic): only dropping it is left.
    Closed,
    #[error("connection {0} is not used by this session")]
    /// The input named a backend connection this session does not use.
    UnknownConnection(ConnId),
    #[error("event not expected now: {0}")]
    /// The event does not fit the session's state now (the text says which it was).
    UnexpectedEvent(&'static str),
    /// A peer violated the protocol. Every byte of the input is consumed; the queued actions say
    /// what to send and close: drain them.
    #[error("protocol violation by the {peer}: {source}")]
    Protocol {
        /// Who broke it: "client", "primary" or "reader".
        peer: &'static str,
        #[source]
        /// What was wrong with the bytes.
        source: ProtocolError,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    AwaitStartup,
    AwaitWriter,
    Auth,
    Ready,
    Closed,
}

/// What the session knows of one undecided client message. Names and texts are read again
/// from the message's copy when needed (no allocation per message).
#[derive(Clone, Debug)]
enum MsgInfo {
    Query {
        class: Option<Classification>,
        why_not: Option<Reason>,
        /// A causal-token statement the engine answers itself (C-1, C-2).
        token: Option<crate::token::TokenCommand>,
    },
    Parse {
        class: Option<Classification>,
    },
    Bind,
    Execute,
    Describe,
    Close,
    Sync,
    Flush,
    CopyData,
    CopyDone,
    CopyFail,
    /// The function's object ID (`None`: too large to inspect, or too short to hold one).
    FunctionCall(Option<u32>),
    /// A Parse or Bind too large to inspect: streamed by count. Its names as they begin its
    /// body (a Parse's statement, a Bind's portal and statement, each with its NUL; `None`:
    /// longer than the framer reads).
    LargeExtended(Option<Box<[u8]>>),
    Password,
    Terminate,
}

impl MsgInfo {
    fn is_extended(&self) -> bool {
        matches!(
            self,
            MsgInfo::Parse { .. }
                | MsgInfo::Bind
                | MsgInfo::Execute
                | MsgInfo::Describe
                | MsgInfo::Close
                | MsgInfo::Sync
                | MsgInfo::Flush
                | MsgInfo::LargeExtended(_)
        )
    }

    fn is_copy(&self) -> bool {
        matches!(
            self,
            MsgInfo::CopyData | MsgInfo::CopyDone | MsgInfo::CopyFail
        )
    }
}

/// One undecided client message. Its bytes stay in the host's buffer until an action covers
/// them; a copy is kept in `Session::pending` when the message may be needed after the host's
/// buffer moved on (reader routing, rewriting, retries).
#[derive(Debug)]
struct ClientMsg {
    tag: u8,
    /// Where a Parse's text or a Bind's statement name ends: its copy is read again without a
    /// scan of its text (`FrontendMessage::reread`). (Beside `tag`, in its padding.)
    names: Names,
    /// A Parse whose text may be a causal-token statement (`token::may_be_command`, C-1, C-2):
    /// read once on arrival, not each time the pump looks at the batch's head.
    may_be_token: bool,
    len: usize,
    arrived: usize,
    acted: usize,
    info: MsgInfo,
    /// Where the copy is in `Session::pending`.
    copy: Option<std::ops::Range<usize>>,
}

/// Where a unit's current attempt runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    Writer,
    /// Waiting for `Event::ReaderAttached` / `ReaderUnavailable`.
    AwaitReader {
        server: ServerId,
        /// When the connection was asked for (R-1b: when a connect attempt for it began).
        since: u64,
    },
    Reader {
        conn: ConnId,
        server: ServerId,
    },
    /// Answered by the engine (REJECT, an engine error) and waiting for the writer's abort.
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitKind {
    Query,
    Batch,
    FunctionCall,
}

/// A decided unit of client messages, in flight. Units complete in order.
#[derive(Debug)]
struct Unit {
    id: u32,
    kind: UnitKind,
    decision: Decision,
    /// Query: the classification of its string.
    class: Option<Classification>,
    /// Batch: the classifications of the statements its Executes run, in order (for their
    /// effects on session state once the writer ran them).
    execs: Vec<Option<Classification>>,
    attempt: Attempt,
    /// Reader retries so far, and readers that failed this unit.
    /// (A byte: `reader_retry_limit` is at most 16; saturates.)
    reader_retries: u8,
    excluded: Vec<ServerId>,
    /// A batch whose Sync has not arrived: the client's next extended messages join it.
    open: bool,
    /// A statement that drops every prepared statement (`DEALLOCATE ALL`, `DISCARD ALL`) of
    /// this unit was sent to the writer: what the unit parses after it is a new statement, not
    /// one in use (E-2).
    clears_sent: bool,
    /// The writer said CopyInResponse: client COPY data flows to it.
    copy_in: bool,
    /// An error was forwarded to the client for this unit.
    errored: bool,
    /// Something of this attempt's result reached the client (F-3: no retry).
    forwarded: bool,
    /// A Flush released the held completions of a reader attempt (E-3: no retry).
    released: bool,
    /// The decision needed the LSN state of this generation (split retries are gated on it).
    generation: u64,
    /// Statement text of a Query with SET/RESET (needed after completion).
    sql: Option<Box<[u8]>>,
    /// Whether the unit contained BEGIN (and its options).
    begin: Option<Option<Isolation>>,
    /// The reader waits with a statement of its own (PostgreSQL 19's WAIT FOR LSN): a timeout
    /// is recognised by position (W-5).
    wait_statement: bool,
    /// Host time the current attempt was sent (R-1b).
    sent_at: u64,
    /// A failure decided while the attempt's answer is still arriving.
    failure: Option<(FailureClass, Recovery)>,
    /// The attempt's answer began (its first row or completion).
    result_started: bool,
    /// E-4: a reader attempt's first Execute has this row limit inside a transaction block:
    /// its answers are held until it ends (`Session::row_limited_answer`). -1: it suspended or
    /// outgrew what may be held, and the batch runs again on the writer at the RFQ; -2: the
    /// attempt's answer outgrew what is held before its result began (same).
    row_limit: i32,
    /// Any ErrorResponse arrived for the attempt (its implicit transaction rolled back, W-6).
    saw_error: bool,
    /// Whether a hidden probe/capture follows this unit on the writer (W-7, S-5).
    probe_after: bool,
    /// The unit may leave a transaction block open (BEGIN, or something unknown): hidden
    /// writer work cannot be pipelined behind it.
    may_open_txn: bool,
    /// Reader attempt: the settings replay is in flight; the unit's own messages follow its
    /// success (`Some(needs_reset)`).
    after_replay: Option<bool>,
    /// The reader attempt of an open batch was closed by the engine's own Sync (E-1), or the
    /// writer's `BEGIN` cut off the head of a batch was (`begin_split_point`): its RFQ is the
    /// engine's, not the client's.
    hidden_sync: bool,
    /// A reader answered it with an error (F-2): when the writer runs it again, its read
    /// classification is not trusted for P-6 — the refusal may have been a write's (a hint, a
    /// mislabelled STABLE function, a view over a writing function), so it counts as a
    /// statement that may have written. Connection losses and wait timeouts say nothing of the
    /// statement and leave it as classified.
    reader_refused: bool,
    /// The host forwarded the client's CancelRequest to the reader running it (F-1): if that
    /// attempt breaks (a lost or frozen reader), the unit is answered as cancelled, never run
    /// again elsewhere — the cancel may never have reached the reader, and a retry would
    /// answer rows where the primary alone answers 57014 (an examiner's finding, 2026-12-05).
    cancel_forwarded: bool,
    /// Sent to the writer again once the check of a statement's row shape there answered
    /// (E-2), for this reason.
    check_then: Option<Reason>,
    /// Batch: its Executes noted on the writer so far (the next one runs `execs[execs_sent]`;
    /// saturates).
    execs_sent: u16,
    /// What few units have (portals bound in an open batch, Binds waiting for a Describe, a
    /// failure's text): boxed, as the texts above — units stay allocated in an idle session's
    /// queue (issue 20).
    extra: Option<Box<UnitExtra>>,
}

/// The rarely used part of a [`Unit`].
#[derive(Debug, Default)]
struct UnitExtra {
    /// An open writer batch's portals and what they were bound to, latest last: an Execute
    /// joining after a Flush is judged by it (E-1).
    bound: Vec<(Box<[u8]>, Option<Classification>)>,
    /// E-2: the unit's Binds of statements whose row shape is unknown, by connection and
    /// portal, until a Describe of the portal is sent (`Session::learn_on_portal_describe`).
    /// Kept with the unit, not among the session's notes in flight: a client that pipelines
    /// thousands of batches binding such a statement (an INSERT never described) has one per
    /// batch, and every Bind and every RFQ looked through all of them.
    portal_notes: Vec<shapes::ShapeNote>,
    /// The text of the failure decided while the attempt's answer is still arriving.
    failure_text: Option<Box<str>>,
}

impl Unit {
    /// A client's simple Query or FunctionCall sent to the writer (E-1: the server discards it
    /// after an extended-protocol error before the Sync).
    fn is_writer_query(&self) -> bool {
        self.attempt == Attempt::Writer
            && matches!(self.kind, UnitKind::Query | UnitKind::FunctionCall)
    }

    fn extra_mut(&mut self) -> &mut UnitExtra {
        self.extra.get_or_insert_default()
    }

    fn failure_text(&self) -> Option<&str> {
        self.extra.as_deref()?.failure_text.as_deref()
    }

    fn set_failure_text(&mut self, text: Option<Box<str>>) {
        match text {
            Some(t) => self.extra_mut().failure_text = Some(t),
            None => {
                if let Some(x) = self.extra.as_deref_mut() {
                    x.failure_text = None;
                }
            }
        }
    }
}

#[derive(Debug)]
struct Backend {
    conn: ConnId,
    server: Option<ServerId>,
    ext: RfqExtensions,
    framer: Framer,
    resp: Responses,
    /// Disposition of the body of the streamed message in progress: forward (true) or discard.
    streaming: Option<bool>,
    /// Bytes of the streamed message in progress to forward, not yet covered by an action:
    /// a message reaches the client whole unless it is larger than `STREAM_WHOLE_MAX`. (Fewer
    /// than that, forwarded once there are more: a `u16`, in the padding beside the flags, pays
    /// for `Responses`' counts of a long queue and for `answered_ms`, issue 20.)
    held_fwd: u16,
    /// Part of the message in progress already went to the client: if the connection breaks
    /// now, the client's stream is cut mid-message and can only be closed.
    partial_out: bool,
    /// Holds an XID import (awide keeps imports: P-7).
    dirty: bool,
    /// The hidden reset in flight clears `dirty` once it succeeds.
    clean_on_success: bool,
    /// The settings replay in flight (S-5): if it fails, the connection's state is unknown and
    /// it must not be pooled under the session's key.
    settings_pending: bool,
    /// Statements the engine prepared on this connection (E-2).
    prepared: ConnStatements,
    /// Parses in flight, in wire order (E-2).
    parses: VecDeque<statements::ParseNote>,
    /// A cancel was forwarded to this connection (F-1: closed, never pooled).
    cancelled: bool,
    /// Code the engine cannot see into ran on this reader connection (S-6: closed, not pooled).
    ran_code: bool,
    /// A statement on this reader connection answered 0A000: a statement the engine prepared
    /// there keeps a plan whose result type changed since (E-2), and every session would meet
    /// it again. Closed, not pooled.
    stale_plans: bool,
    /// The low 32 bits of the host time of the connection's last bytes (or of its attach):
    /// R-1b's deadline counts from it — a reader that keeps answering (a long report
    /// streaming) is never treated as lost ([`Backend::answered_at`]). 32 bits: it shares the
    /// padding after the flags (a `u64` made the idle session 8 bytes larger, issue 20).
    answered_ms: u32,
    /// `server`'s entry in the engine's reader registry, held across this connection's
    /// statements (and kept with a spare backend): its load count and evidence are updated
    /// without a topology lookup while the topology is unchanged.
    reader_ref: ReaderRef,
}

impl Backend {
    /// The host time of the connection's last bytes, given the time `now`: read back from its
    /// low 32 bits (exact for anything in the last 49 days).
    fn answered_at(&self, now: u64) -> u64 {
        now.saturating_sub(u64::from((now as u32).wrapping_sub(self.answered_ms)))
    }

    /// Notes bytes of the connection at host time `now`.
    fn answered(&mut self, now: u64) {
        self.answered_ms = now as u32;
    }

    fn new(conn: ConnId, server: Option<ServerId>, ext: RfqExtensions, config: &Config) -> Backend {
        Backend {
            conn,
            server,
            ext,
            framer: Framer::new(config.limits),
            resp: Responses::default(),
            streaming: None,
            held_fwd: 0,
            partial_out: false,
            dirty: false,
            clean_on_success: false,
            settings_pending: false,
            prepared: ConnStatements::default(),
            parses: VecDeque::new(),
            cancelled: false,
            ran_code: false,
            stale_plans: false,
            answered_ms: 0,
            reader_ref: ReaderRef::default(),
        }
    }
}

/// F-1: a cancel taken while the client's work was held ([`Session::cancel_unplaced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CancelWait {
    None,
    /// Forwarded once the held work runs on a connection.
    Held,
    /// The held batch went to the writer with the engine's Flush in front of its first Execute:
    /// forwarded once the writer answered what precedes that Execute. PostgreSQL drops a cancel
    /// that reaches a backend between messages (it is reading a command), so a cancel sent with
    /// the batch's bytes could land before the backend started its statements and be lost.
    Flushed,
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

/// The reader StartupMessage and key for one (profile generation, settings version).
#[derive(Debug)]
struct ReaderStartup {
    stamp: (u64, u64, u64),
    key: crate::pool::ReaderKey,
    bytes: Vec<u8>,
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
    /// `writer_hostgroup`'s group once it exists (groups are never replaced): read for every
    /// statement without the engine's hostgroup lock.
    writer_group: Option<Arc<crate::cluster::WriterGroup>>,
    now: u64,
    phase: Phase,
    client_framer: Framer,
    queue: VecDeque<ClientMsg>,
    /// Copies of queued messages (`ClientMsg::copy`); reset when the queue runs empty.
    pending: Vec<u8>,
    /// Conn the client's streamed message in progress is forwarded to (`Some(None)`: discarded).
    client_streaming: Option<Option<ConnId>>,
    /// The client's input is over — its Terminate was read, or its end
    /// ([`Session::client_eof`]): nothing after it is read, and the session closes once
    /// everything before it has answered (as PostgreSQL runs and answers what it read first).
    client_ended: bool,
    /// The writer's server said it is closing the connection (a shutdown warning, 57P01/57P02,
    /// was forwarded or held for the client): its loss then needs no error of the engine's —
    /// the primary alone sends only that warning before the connection closes.
    writer_farewell: bool,
    startup: Option<Startup>,
    writer: Option<Backend>,
    /// Boxed, as the spares: a reader connection's backend moves between the two lists on
    /// every attach and release, as a pointer rather than its ~250 bytes.
    #[allow(clippy::vec_box)]
    readers: Vec<Box<Backend>>,
    /// Released reader backends, kept for their buffers.
    #[allow(clippy::vec_box)]
    spare_backends: Vec<Box<Backend>>,
    /// A finished batch's list of Execute classifications, emptied, for the next batch (its
    /// routing then allocates nothing).
    spare_execs: Vec<Option<Classification>>,
    /// Decided units in flight, oldest first.
    units: units::Units,
    next_unit: u32,
    lsn: LsnState,
    txn: TxnState,
    /// DDL ran in the open transaction block: the catalogue is marked changed again when it ends.
    ddl_in_block: bool,
    writer_status: TxStatus,
    hazards: Hazards,
    /// What the `WITH HOLD` cursor and `LISTEN` hazards are made of (S-4), only while either
    /// exists or a block's outcome still decides one. (Its 8 bytes are paid for by
    /// `Startup::causal_token`'s boxed slot.)
    held_names: Option<Box<state::HeldNames>>,
    settings: SessionSettings,
    statements: ClientStatements,
    /// Boxed: most sessions never read, and this one holds 72 bytes (a reading session pays
    /// 8 more and one allocation when it first acquires a reader).
    reader_startup: Option<Box<ReaderStartup>>,
    session_isolation: Option<Isolation>,
    backend_key: Option<(i32, Box<[u8]>)>,
    /// The client's user cannot log in on the readers: never ask again.
    readers_forbidden: bool,
    /// A reader answered the client since the writer last went idle: the client has been idle
    /// for less time than the writer's backend, whose idle timeout must not end the session
    /// first (see `keep_writer_alive`).
    reader_answered_since_writer: bool,
    /// The classifier's catalogue generation the queued messages' verdicts were finished at
    /// (its low 32 bits; see `judge_kept_verdicts_again`).
    catalog_generation: u32,
    pin: Option<Pin>,
    /// A reader attempt's messages held until its result begins.
    held: Vec<u8>,
    /// Set while all of `held` is the end of the last action (a DiscardBackend of that
    /// connection, unchanged since: its mark); flushing it then turns those bytes into a forward
    /// instead of a copy for the client. Every append to `held` sets or clears it.
    held_tail: Option<(ConnId, actions::TailMark)>,
    /// Asynchronous writer messages held while a reader answers the client.
    held_writer: Vec<u8>,
    /// Host time the writer last answered without a position a write (W-7) or, on a server
    /// that reports none, a read (S-1a): a writer sample sent after it positions the session.
    /// (`u64::MAX`: none; an `Option` would cost an idle session 8 bytes more.)
    write_ack_ms: u64,
    /// S-1a on a server that reports no positions: the reader that last served the session a
    /// read, and the host time its answer ended, until evidence of that reader taken later
    /// positions what the read showed, or an outage of it since makes it unknown
    /// ([`Session::settle_reader_read`]); `u64::MAX`: none. (Two fields, not a pair: the
    /// server's 4 bytes fill a hole in the session rather than pad the pair.)
    reader_read_server: ServerId,
    reader_read_at: u64,
    /// Host time the writer last answered a request (its RFQ) or was touched: while the session
    /// reads on a reader, the writer's backend counts as idle since then.
    writer_idle_at: u64,
    /// The LSN the probe in flight answered with (`Lsn::ZERO`: none — a probe's answer is never
    /// zero, `probe_value`; an `Option` would cost an idle session 8 bytes more).
    probe_lsn: Lsn,
    /// F-1: the reader connection asked for a statement the client cancelled before it had one
    /// ([`Session::cancel_unplaced`]); the host's answer to that request is still to come.
    abandoned_acquire: Option<ServerId>,
    /// F-1: the client cancelled while its work was held undecided (a batch without its Sync,
    /// a unit waiting for the probe, the capture or its reader connection): the held messages
    /// are placed as at a Flush, and once they run on a connection the session asks the host
    /// to forward the cancel there (a `CancelRequest` action, `deliver_pending_cancel`).
    cancel: CancelWait,
    /// Whether probes pay (`lsn_probe = adaptive`, W-7).
    probe_credit: ProbeCredit,
    /// The client bytes of the reader unit in flight (for wrapping and retries), and the
    /// offsets of its messages (with where their names end, to read them again without a scan).
    orig: Vec<u8>,
    orig_msgs: Vec<(std::ops::Range<usize>, Names)>,
    /// The server dialect as of the last collect (P-2).
    dialect: ServerDialect,
    /// Describes in flight whose answers are read for their row shape, and Binds whose portal's
    /// Describe would be, in wire order per connection (E-2, `shapes.rs`).
    shape_notes: Vec<shapes::ShapeNote>,
    /// An open writer batch was followed by a Query without Sync: the next unit runs in the
    /// same implicit transaction, on the writer.
    writer_continuation: bool,
    /// An error ended a batch the client had not closed with a Sync yet: its messages are
    /// discarded up to its Sync, which the engine answers (as a server skips to the Sync).
    skip_to_sync: bool,
    /// The token last reported or shown to the client (C-1).
    reported_token: Option<Lsn>,
    /// The client's RFQ held until the probe answers, so the token reported with it covers
    /// the write (C-1, stock dialect).
    held_rfq: Option<TxStatus>,
    /// A batch of token statements being answered by the engine (C-1, C-2).
    local_batch: Option<tokens::LocalBatch>,
    /// What the PinWriter action last said (S-4).
    pinned_writer: bool,
    /// The capture's rows so far `(kind, name, value)`, and whether it failed.
    capture_rows: Vec<(u8, state::Setting)>,
    capture_failed: bool,
    /// A committed write's probe waits for the client's requests pipelined behind the write to
    /// be answered (W-7: hidden work goes to the writer only when nothing of the client's is
    /// queued there).
    probe_owed: bool,
    /// When a failed capture is tried again, and a replay refused twice (S-5).
    capture_retry: state::Backoff,
    replay_retry: state::Backoff,
    /// When a capture asks again whether temporary objects, SQL-prepared statements or
    /// advisory locks are left (S-4).
    hazard_check: state::Backoff,
    /// The capture in flight asks whether the session holds an advisory lock (S-4).
    capture_asked_advisory: bool,
    /// The capture that follows the writer's startup is in flight (S-5): once it answers, the
    /// action arena gives back the room its Parse took (an idle session keeps none of it).
    startup_capture: bool,
    /// Until the writer's startup RFQ is handled: the writer reported a `server_version` before
    /// 17, where nothing runs SQL at login, so the capture sent right behind that RFQ leaves out
    /// the hazard kinds (S-4, S-5; `hidden::CAPTURE_LOGIN_STATEMENT`).
    login_capture: bool,
    out: ActionQueue,
    last_error: Box<str>,
    salt: u64,
}

impl Session {
    /// A session for a new client connection.
    pub fn new(engine: Arc<Engine>, info: ClientInfo) -> Session {
        let config = engine.config();
        let config_generation = engine.config_generation();
        let writer_hostgroup = info.writer_hostgroup.unwrap_or(config.writer_hostgroup);
        let limits = config.limits;
        let generation = engine.writer_view(writer_hostgroup).generation;
        let salt = config.seed;
        Session {
            classifier: engine.classifier(),
            config,
            config_generation,
            writer_hostgroup,
            writer_group: None,
            info: Some(Box::new(info)),
            now: 0,
            phase: Phase::AwaitStartup,
            client_framer: Framer::new_startup(limits),
            // Almost always one message at a time: room for one on first use (`reserve_one`),
            // grown only by pipelining; nothing for a session that never sent a statement.
            queue: VecDeque::new(),
            pending: Vec::new(),
            client_streaming: None,
            client_ended: false,
            writer_farewell: false,
            startup: None,
            writer: None,
            readers: Vec::new(),
            spare_backends: Vec::new(),
            spare_execs: Vec::new(),
            units: units::Units::default(),
            next_unit: 1,
            lsn: LsnState {
                generation,
                ..LsnState::default()
            },
            txn: TxnState::default(),
            ddl_in_block: false,
            writer_status: TxStatus::Idle,
            hazards: Hazards::default(),
            held_names: None,
            settings: SessionSettings::default(),
            statements: ClientStatements::default(),
            reader_startup: None,
            session_isolation: None,
            backend_key: None,
            readers_forbidden: false,
            reader_answered_since_writer: false,
            catalog_generation: 0,
            pin: None,
            held: Vec::new(),
            held_tail: None,
            held_writer: Vec::new(),
            write_ack_ms: u64::MAX,
            reader_read_server: 0,
            reader_read_at: u64::MAX,
            writer_idle_at: 0,
            probe_lsn: Lsn::ZERO,
            abandoned_acquire: None,
            cancel: CancelWait::None,
            probe_credit: ProbeCredit::default(),
            orig: Vec::new(),
            orig_msgs: Vec::new(),
            dialect: ServerDialect::Awide,
            shape_notes: Vec::new(),
            writer_continuation: false,
            skip_to_sync: false,
            reported_token: None,
            held_rfq: None,
            local_batch: None,
            pinned_writer: false,
            capture_rows: Vec::new(),
            capture_failed: false,
            probe_owed: false,
            capture_retry: state::Backoff::default(),
            replay_retry: state::Backoff::default(),
            hazard_check: state::Backoff::default(),
            capture_asked_advisory: false,
            startup_capture: false,
            login_capture: false,
            out: ActionQueue::default(),
            last_error: Box::default(),
            // Deterministic: the configured seed, mixed per statement.
            salt,
            engine,
        }
    }

    /// The engine this session belongs to.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The next action, or `None` when everything is drained.
    pub fn poll_action(&mut self) -> Option<Action<'_>> {
        // The reader key and StartupMessage are the session's cached ones (valid until its
        // next input).
        self.out.poll(self.reader_startup.as_deref())
    }

    /// Whether actions are waiting to be polled.
    pub fn has_actions(&self) -> bool {
        !self.out.is_empty()
    }

    /// The backend connection executing the client's current statement (for CancelRequest).
    /// After forwarding a cancel there, tell the session with [`Session::cancel_forwarded`].
    pub fn executing_connection(&self) -> Option<ConnId> {
        let u = self.units.front()?;
        match u.attempt {
            Attempt::Writer | Attempt::Local => self.writer.as_ref().map(|w| w.conn),
            Attempt::Reader { conn, .. } => Some(conn),
            Attempt::AwaitReader { .. } => None,
        }
    }

    /// The client sent a CancelRequest while [`Session::executing_connection`] names no
    /// connection: no server has the client's current work yet (F-1). An input (drain after it).
    /// What the primary alone would be doing now is running the statements the client has sent,
    /// so the engine does what it takes for the cancel to meet them:
    ///
    /// - A simple Query waiting for its reader connection is answered at once with the server's
    ///   57014 "canceling statement due to user request" — inside a transaction block the block
    ///   fails, as on the primary — and nothing runs it. The connection asked for is still the
    ///   host's to answer: attached, it is closed unused (a CloseBackend action); unavailable,
    ///   nothing more happens. Until then the session starts nothing new (its client's next
    ///   statements wait).
    /// - Any other work the session holds — an extended batch whose Sync (or Flush) has not
    ///   arrived, a unit waiting for the probe or the capture (W-7, S-5) or for the check of a
    ///   row shape (E-2), a batch waiting for its reader connection — is placed as the client's
    ///   Flush would place it (E-1: what is held of a batch is decided now and the rest follows
    ///   to the same connection), as soon as what it waits for allows; and once it runs on a
    ///   connection the session emits a [`Action::CancelRequest`] with its own BackendKeyData,
    ///   after the bytes that place it: the host forwards the cancel to the connection
    ///   [`Session::executing_connection`] then names, as for any cancel (and tells
    ///   [`Session::cancel_forwarded`]). Work the engine answers itself instead (a causal-token
    ///   statement, a REJECT) is not cancelled: nothing runs it on a server.
    ///
    /// Returns whether the cancel was taken (drain, and forward the cancel when the session asks
    /// for it); false when the session holds no client work (PostgreSQL, too, ignores a cancel
    /// that reaches a backend waiting for a command).
    pub fn cancel_unplaced(&mut self, now_ms: u64) -> Result<bool, SessionError> {
        self.check_input(now_ms)?;
        if self.phase != Phase::Ready {
            return Ok(false);
        }
        match self.units.front() {
            Some(u) => match (u.kind, u.attempt) {
                (UnitKind::Query, Attempt::AwaitReader { server, .. }) => {
                    let id = u.id;
                    self.abandoned_acquire = Some(server);
                    self.answer_cancelled(id);
                    return Ok(true);
                }
                (_, Attempt::AwaitReader { .. }) => {}
                // Something runs (or the engine answers it): the host forwards the cancel to
                // what `executing_connection` names.
                _ => return Ok(false),
            },
            None if !self.holds_client_work() => return Ok(false),
            None => {}
        }
        self.cancel = CancelWait::Held;
        self.pump(None);
        Ok(true)
    }

    /// Whether the head of the client's queue is a statement (or part of a batch) the session
    /// has not placed yet — not the COPY data, password or Terminate that follow other work.
    fn holds_client_work(&self) -> bool {
        self.queue.front().is_some_and(|m| {
            m.arrived >= m.len
                && (m.info.is_extended()
                    || matches!(m.info, MsgInfo::Query { .. } | MsgInfo::FunctionCall(_)))
        })
    }

    /// F-1: a cancel taken while the client's work was held ([`Session::cancel_unplaced`]):
    /// once that work runs on a connection, the host is asked to forward the cancel there (its
    /// bytes are already queued ahead of this action). Work the engine answered itself ends the
    /// wait with nothing to cancel.
    pub(super) fn deliver_pending_cancel(&mut self) {
        if self.cancel == CancelWait::None || self.phase != Phase::Ready {
            return;
        }
        let runs = match self.units.front().map(|u| (u.id, u.attempt, u.errored)) {
            Some((id, attempt @ (Attempt::Writer | Attempt::Reader { .. }), errored)) => {
                let b = match attempt {
                    Attempt::Reader { conn, .. } => self.backend_index(conn),
                    _ => Some(0),
                };
                let waits = self.cancel == CancelWait::Flushed
                    && !errored
                    && b.is_some_and(|i| self.backend(i).resp.answers_before_execute(id));
                if waits {
                    return;
                }
                !errored
            }
            Some((_, Attempt::AwaitReader { .. }, _)) => return,
            Some((_, Attempt::Local, _)) => false,
            None if self.holds_client_work() => return,
            None => false,
        };
        self.cancel = CancelWait::None;
        if runs {
            if let Some((pid, secret)) = &self.backend_key {
                self.out.cancel_request(*pid, secret);
            }
        }
    }

    /// F-1: a message of a held batch a cancel places (on the writer, or a reader), about to be
    /// sent to `conn`: a first Execute gets the engine's Flush in front of it, so the server
    /// answers what precedes it and the cancel is forwarded once the Execute is what the
    /// backend runs (`deliver_pending_cancel`).
    pub(super) fn flush_before_cancelled_execute(&mut self, conn: ConnId, execute: bool) {
        if execute && self.cancel == CancelWait::Held {
            self.out.send_backend_with(conn, |o| wire(b'H', &[], o));
            self.cancel = CancelWait::Flushed;
        }
    }

    /// The host forwarded a CancelRequest to `conn` (F-1). A reader connection that may have
    /// received one is closed when the session is done with it, never handed to another
    /// session: the cancel's signal may land after the statement it was meant for has ended.
    /// Not an input: it queues no action and needs no drain.
    pub fn cancel_forwarded(&mut self, conn: ConnId) {
        if let Some(b) = self.readers.iter_mut().find(|b| b.conn == conn) {
            b.cancelled = true;
        }
        for i in 0..self.units.len() {
            let u = self.units.at_mut(i);
            if matches!(u.attempt, Attempt::Reader { conn: c, .. } if c == conn) {
                u.cancel_forwarded = true;
            }
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

    /// S-1 state (the session's write and observed positions). Internal: its type is not part
    /// of the API; for this workspace's tests.
    #[doc(hidden)]
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

    /// Whether the session has ended (only freeing it remains).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// The earliest host time at which the session needs [`Session::on_timeout`] (R-1b): a
    /// reader that has answered nothing for `reader_response_timeout_ms` while its monitor did
    /// not answer either. `None`: no deadline. It moves later whenever the reader's monitor
    /// answers: ask again after every input and after each monitor sample.
    ///
    /// Also, while the session reads on a reader or after a reader answered it, when its writer
    /// session has an idle timeout, the time the writer must be touched by (see
    /// `keep_writer_alive`).
    pub fn next_deadline(&self) -> Option<u64> {
        let timeout = self.config.reader_response_timeout_ms;
        let readers = if timeout == 0 || !self.units.any_on_reader() {
            None
        } else {
            self.units
                .iter()
                .filter_map(|u| match u.attempt {
                    Attempt::Reader { conn, server } => {
                        Some(self.reader_deadline(u.sent_at, conn, server, timeout))
                    }
                    _ => None,
                })
                .min()
        };
        let due = match (readers, self.writer_touch_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // C-1: an RFQ held for a writer sample, or a token statement waiting for one (queued
        // while the session's position is unknown), looks again every few milliseconds.
        let unknown = self.lsn.write_unknown || self.lsn.observed_unknown;
        let token_waits = unknown
            && !self.queue.is_empty()
            && self.units.is_empty()
            && self.sample_may_still_come();
        if self.held_rfq.is_some() && !self.learning() || token_waits {
            let again = self.now.saturating_add(HELD_RFQ_SAMPLE_POLL_MS);
            return Some(due.map_or(again, |d| d.min(again)));
        }
        due
    }

    /// When the writer must be touched next: half its session's idle timeout after it went
    /// idle, while a unit runs on a reader or after one answered the client, and the writer has
    /// nothing in flight (`None`: no idle timeout, no reader since the writer went idle, or the
    /// writer busy — its answer moves the time — or in a failed block, where a statement only
    /// errors and no read is split off).
    fn writer_touch_due(&self) -> Option<u64> {
        let t = u64::from(self.settings.idle_timeout_ms);
        let idle = self
            .writer
            .as_ref()
            .is_some_and(|w| w.resp.is_empty() && self.writer_status != TxStatus::Failed);
        let reader = self.reader_answered_since_writer || self.reader_in_flight();
        (t > 0 && idle && reader && !self.writer_mid_batch())
            .then(|| self.writer_idle_at.saturating_add(t / 2))
    }

    /// The writer's server skips to the client's next Sync after an extended-protocol error:
    /// nothing hidden goes there meanwhile — its own Sync would end the skip early, and what
    /// the client sends before its Sync would run where the primary alone runs nothing (E-1).
    pub(super) fn writer_skipping(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| w.resp.skipping())
    }

    /// The writer's server is inside something only the client closes: skipping to its Sync
    /// after an error, or the implicit transaction of extended messages sent without a Sync
    /// that a simple Query behind them runs in. Hidden work of the engine's own accord (the
    /// capture a change of state made due, a touch before an idle timeout) waits: its Sync would
    /// end that transaction early — a write the client's failing statement should roll back
    /// would commit (an examiner's differential test, 2026-12-06: the capture due after an
    /// unsynced `SET` ran between it and the Query behind it). It follows the Query's answer.
    pub(super) fn writer_mid_batch(&self) -> bool {
        self.writer_skipping() || self.writer_continuation
    }

    /// C-1: whether a writer sample that positions the session's last acknowledged statement
    /// is still waited for: at most [`HELD_RFQ_SAMPLE_WAIT_MS`] after its acknowledgement.
    pub(super) fn sample_may_still_come(&self) -> bool {
        self.write_ack_ms != u64::MAX
            && self.now.saturating_sub(self.write_ack_ms) < HELD_RFQ_SAMPLE_WAIT_MS
    }

    /// The one guard of all hidden work that goes to the writer with a Sync of its own (the
    /// probe and the capture, the mirror of reader-only statements, the reservation of the
    /// engine's names, the touch of a block, the keep-alive): the writer's server must be
    /// somewhere such a batch runs as if the client had sent nothing — not inside something
    /// only the client closes ([`Self::writer_mid_batch`]: the Sync would commit an implicit
    /// transaction a later failure must roll back, or end a skip early), not in a failed block
    /// (every hidden statement is refused there, and what it was to make is not made), and not
    /// behind a unit that may be in, or about to enter, COPY IN ([`Self::writer_may_copy_in`]:
    /// the server reads the hidden messages as the client's COPY data and ends the session —
    /// examiners' finding of 2026-12-07, a capture pipelined behind a Sync the client sent
    /// inside its COPY). What it skips follows the writer's next ReadyForQuery, or is not needed.
    pub(super) fn writer_takes_hidden_sync(&self) -> bool {
        !self.writer_mid_batch()
            && self.writer_status != TxStatus::Failed
            && !self.writer_may_copy_in()
    }

    /// Whether a unit the writer still owes an answer may be in COPY IN or may enter it
    /// ([`units::may_copy_in`]). Judged on every unit queued there, not only the one just sent:
    /// a lone Sync the client sent inside its COPY (which the server ignores) is a unit of its
    /// own, sent before the CopyInResponse came. Counted, not scanned: a client may pipeline
    /// thousands of units (`tests/pipeline_scaling.rs`).
    pub(super) fn writer_may_copy_in(&self) -> bool {
        let n = self.units.count_may_copy_in();
        if n == 0 {
            return false;
        }
        // The front unit may be one whose ReadyForQuery is being handled (it leaves the queue
        // after): out of its COPY, the writer owes it nothing.
        let answered_front = self.units.front().is_some_and(|u| {
            units::may_copy_in(u) && !self.writer.as_ref().is_some_and(|w| w.resp.has_unit(u.id))
        });
        n > usize::from(answered_front)
    }

    /// The writer went idle now: it answered a request or was touched.
    pub(super) fn writer_went_idle(&mut self) {
        self.writer_idle_at = self.now;
        self.reader_answered_since_writer = false;
    }

    /// `idle_session_timeout` and `idle_in_transaction_session_timeout` count the writer
    /// backend's idle time, and while the session reads on a reader its writer sees nothing.
    /// The client's idle time starts at its last answer; the writer's must never pass its
    /// timeout while the client's has not, or the client is disconnected where the primary
    /// alone would not disconnect it (examiners' probes, 2026-12-05: a client busy reading,
    /// and a client whose pauses between reads were each shorter than the timeout). So while a
    /// unit runs on a reader, and after one answered the client, the writer is touched once it
    /// has been idle half its timeout: a lone hidden Sync (its ReadyForQuery swallowed; the
    /// backend reads a message and starts its idle time again, and nothing of the client's —
    /// its unnamed statement, which a simple Query drops, its portals — is touched), at a reader
    /// unit's start and at the deadline [`Session::next_deadline`] gives. The last touch comes
    /// within half the timeout after the client's last answer, so the writer's backend ends
    /// the session no earlier than the primary alone would, and at most half the timeout later.
    pub(super) fn keep_writer_alive(&mut self) {
        let Some(due) = self.writer_touch_due() else {
            return;
        };
        if self.now < due || !self.writer_takes_hidden_sync() {
            return;
        }
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let conn = w.conn;
        w.resp.push(response::Req::Sync, response::Who::Touch, 0);
        self.out.send_backend_with(conn, hidden::sync);
        self.writer_went_idle();
        self.engine.stats().inc(crate::Counter::WriterKeepalives);
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

    /// Looks the writer hostgroup's group up until it exists; held from then on.
    fn hold_writer_group(&mut self) {
        if self.writer_group.is_none() {
            self.writer_group = self.engine.group(self.writer_hostgroup);
        }
    }

    /// The writer hostgroup's state, through the group held once it exists.
    pub(super) fn writer_view(&mut self) -> crate::cluster::WriterView {
        self.hold_writer_group();
        self.engine.view_of(self.writer_group.as_deref())
    }

    /// The writer is at least at `lsn` (as this session's generation sees it).
    pub(super) fn observe_writer_lsn(&mut self, lsn: Lsn) {
        self.hold_writer_group();
        if let Some(g) = &self.writer_group {
            g.observe_lsn(self.lsn.generation, lsn);
        }
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
        self.last_error = e.to_string().into();
        e
    }

    /// Classifies statement text for this session's database (the F-policy finishes verdicts
    /// against the database's function catalogue, SPEC §7).
    fn classify_sql(&self, sql: &str) -> Classification {
        let db = self.startup.as_ref().map_or(&[][..], |s| &s.database[..]);
        self.classifier.classify_in(db, sql)
    }

    /// The epoch of names now ([`crate::classify::FunctionCatalogs::names_epoch`], E-2; 32
    /// bits, compared for equality only).
    fn ddl_epoch(&self) -> u32 {
        self.classifier.catalogs().names_epoch() as u32
    }

    /// A Parse's text and parameter type OIDs (4 bytes each), classified for this session.
    fn classify_parse(&self, sql: &str, types: &[u8]) -> Classification {
        let db = self.startup.as_ref().map_or(&[][..], |s| &s.database[..]);
        classify_parse_in(
            &self.classifier,
            db,
            sql,
            crate::protocol::frontend::oids_name_user_type(types),
        )
    }

    /// The verdicts the session keeps — its prepared statements', and those of the queued
    /// messages that may still go to a reader — were finished against the catalogue of their
    /// time. Once it changed (DDL this session or another one ran, a report, a new policy:
    /// [`crate::classify::FunctionCatalogs::generation`]) they are finished again before any of
    /// them routes another statement; one atomic load otherwise. (A server plans a prepared
    /// statement again after DDL on what it names: an examiner's probe of 2026-12-05 had a
    /// statement prepared before a view was made to read `pg_is_in_recovery()` run the new view
    /// on the standby.)
    fn judge_kept_verdicts_again(&mut self) {
        let generation = self.classifier.catalogs().generation() as u32;
        if generation == self.catalog_generation {
            return;
        }
        self.catalog_generation = generation;
        let classifier = &self.classifier;
        let db = self.startup.as_ref().map_or(&[][..], |s| &s.database[..]);
        self.statements
            .judge_again(|t, user_types| classify_parse_in(classifier, db, t, user_types));
        for m in self.queue.iter_mut() {
            let (MsgInfo::Query { class: Some(c), .. } | MsgInfo::Parse { class: Some(c) }) =
                &mut m.info
            else {
                continue;
            };
            // A message queued without its bytes is one that may not leave the writer.
            let Some(body) = m
                .copy
                .clone()
                .and_then(|r| self.pending.get(r.start + 5..r.end))
            else {
                continue;
            };
            let (text, types) = match crate::protocol::FrontendMessage::reread(m.tag, body, m.names)
            {
                Ok(crate::protocol::FrontendMessage::Query { sql }) => (sql, &[][..]),
                Ok(crate::protocol::FrontendMessage::Parse { sql, types, .. }) => (sql, types),
                _ => continue,
            };
            if let Ok(t) = std::str::from_utf8(text) {
                let user_types = crate::protocol::frontend::oids_name_user_type(types);
                *c = classify_parse_in(classifier, db, t, user_types);
            }
        }
    }

    fn new_unit_id(&mut self) -> u32 {
        let id = self.next_unit;
        self.next_unit = self.next_unit.wrapping_add(1).max(1);
        id
    }

    /// Unit `id` (found by its distance from the oldest: O(1)).
    fn unit(&self, id: u32) -> Option<&Unit> {
        self.units.get(id)
    }

    /// Unit `id`, to change (the queue counts it again before its next change).
    fn unit_mut(&mut self, id: u32) -> Option<&mut Unit> {
        self.units.get_mut(id)
    }

    /// Runs `f` on the engine with backend `i`'s server and its held registry entry (nothing
    /// for a backend without a server).
    fn with_reader_ref(&mut self, i: usize, f: impl FnOnce(&Engine, &mut ReaderRef, ServerId)) {
        let b = match i {
            0 => self.writer.as_mut(),
            _ => self.readers.get_mut(i - 1).map(|b| &mut **b),
        };
        if let Some(b) = b {
            if let Some(s) = b.server {
                f(&self.engine, &mut b.reader_ref, s);
            }
        }
    }
}

impl Backend {
    /// A statement on this connection's reader ended (R-2's load count).
    fn end_use(&mut self, engine: &Engine) {
        if let Some(s) = self.server {
            engine.readers().end_use_via(&mut self.reader_ref, s);
        }
    }
}

impl Drop for Session {
    /// A session freed with a reader statement in flight gives back that reader's load count
    /// (R-2 balances on it).
    fn drop(&mut self) {
        for r in &mut self.readers {
            if !r.resp.is_empty() {
                r.end_use(&self.engine);
            }
        }
    }
}

/// Appends a wire message built from a tag and a body.
fn wire(tag: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(body);
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Room for one more element, exactly one on first use (a plain `push_back` would allocate four:
/// the queues of units and client messages hold one almost always).
fn reserve_one<T>(q: &mut VecDeque<T>) {
    if q.capacity() == 0 {
        q.reserve_exact(1);
    }
}

/// A statement's text classified for database `db` — a Parse's with what its parameter types
/// add (`user_types`: one names a user type, whose input or `CHECK` the server runs as it reads
/// the parameters; [`Classification::with_user_typed_parameters`]) and what a prepared statement
/// holds from its parse ([`Classification::as_prepared`]). The one place the rules are
/// applied: at a Parse, and when kept verdicts are finished again after the catalogue moved.
fn classify_parse_in(
    classifier: &crate::classify::Classifier,
    db: &[u8],
    sql: &str,
    user_types: bool,
) -> Classification {
    let c = classifier.classify_in(db, sql).as_prepared();
    if user_types {
        c.with_user_typed_parameters()
    } else {
        c
    }
}
