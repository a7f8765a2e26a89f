//! The structured log a consistency checker reads: every statement every server ran, with the
//! snapshot it used and what it returned, every commit and uncommitted write on the primary,
//! refused writes, waits, faults and topology changes. Entries are in the order they happened;
//! `time` is virtual milliseconds.

use polarsplit::Lsn;

use crate::config::{ConnId, Role, ServerId};
use crate::session::SessionState;
use crate::sql::Isolation;
use crate::store::Xid;

/// One history entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Position in the history (0, 1, 2, …).
    pub seq: u64,
    pub time: u64,
    pub event: Event,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A startup completed (AuthenticationOk … ReadyForQuery sent).
    Connected {
        conn: ConnId,
        server: ServerId,
        role: Role,
        generation: u64,
        user: String,
        database: String,
        /// The connection asked for LSNs on its RFQs (W-1).
        lsn_reporting: bool,
        /// The connection asked for transaction info on its RFQs (W-1).
        xact_reporting: bool,
    },
    /// The server refused the startup with a FATAL error (or was down: `sqlstate` empty).
    ConnectionRefused {
        conn: Option<ConnId>,
        server: ServerId,
        sqlstate: String,
        message: String,
    },
    /// The server side of a connection closed.
    Closed {
        conn: ConnId,
        server: ServerId,
        reason: CloseReason,
    },
    Statement(Box<StatementRecord>),
    /// A write on the primary, not committed yet (it may never be).
    Write(WriteRecord),
    /// A transaction with an XID committed on the primary.
    Commit(CommitRecord),
    /// A transaction with an XID rolled back (explicitly, by an error, or its backend ended).
    Abort {
        server: ServerId,
        conn: ConnId,
        xid: Xid,
        /// Every XID of the transaction (top first, then subtransactions).
        xids: Vec<Xid>,
    },
    /// A reader refused a write (25006, 55000, 0A000 …) — the statement also appears as a
    /// [`Event::Statement`] with the error.
    RefusedWrite {
        server: ServerId,
        conn: ConnId,
        text: String,
        sqlstate: String,
    },
    /// `SET polar_xact_split_wait_lsn` reached a `polardb` reader: such a wait has no timeout and
    /// cannot be cancelled (W-7), so the engine must never send one.
    PolardbWaitSent {
        server: ServerId,
        conn: ConnId,
        target: Lsn,
        replay: Lsn,
    },
    /// A statement started waiting for replay (W-4).
    WaitStarted {
        server: ServerId,
        conn: ConnId,
        target: Lsn,
        replay: Lsn,
        /// When the wait times out (`None`: never).
        deadline: Option<u64>,
    },
    WaitEnded {
        server: ServerId,
        conn: ConnId,
        target: Lsn,
        replay: Lsn,
        outcome: WaitOutcome,
    },
    /// The primary's WAL was flushed up to `lsn` (a commit, the WAL writer, a shutdown).
    Flush {
        lsn: Lsn,
    },
    LagChanged {
        server: ServerId,
        lag_ms: u64,
    },
    ServerStopped {
        server: ServerId,
    },
    ServerStarted {
        server: ServerId,
        role: Role,
    },
    /// A reader became the primary; the timeline was cut at `truncated_at`.
    Failover {
        old_primary: ServerId,
        new_primary: ServerId,
        generation: u64,
        timeline: u32,
        truncated_at: Lsn,
        /// Transactions committed on the old timeline after the cut: they are gone.
        lost_xids: Vec<Xid>,
        /// Readers that had replayed past the cut and were rewound to it (their connections
        /// were broken).
        rewound: Vec<ServerId>,
    },
    /// The primary restarted on a new timeline (no data lost; connections broken).
    PrimaryRestarted {
        server: ServerId,
        generation: u64,
        timeline: u32,
    },
    /// A CancelRequest arrived. `effective`: it cancelled a running statement.
    Cancel {
        server: ServerId,
        target: Option<ConnId>,
        effective: bool,
    },
    /// SIGSTOP until `until`.
    ServerFrozen {
        server: ServerId,
        until: u64,
    },
    /// SIGCONT: the server works through what waited.
    ServerThawed {
        server: ServerId,
    },
    /// `kill -9` and restart of a reader: it redoes WAL from `restart_point`, behind the
    /// `replay_before` it had reached.
    ReaderCrashRestarted {
        server: ServerId,
        replay_before: Lsn,
        restart_point: Lsn,
    },
    /// A transaction that ran NOTIFY committed: the connections listening then.
    Notify {
        conn: ConnId,
        pid: i32,
        channel: String,
        payload: String,
        listeners: Vec<ConnId>,
    },
    /// A NotificationResponse was put on a connection's output.
    NotificationSent {
        conn: ConnId,
        pid: i32,
        channel: String,
        payload: String,
    },
}

impl Event {
    /// The statement record, when this is one.
    pub fn statement(&self) -> Option<&StatementRecord> {
        match self {
            Event::Statement(s) => Some(s),
            _ => None,
        }
    }
}

/// Why a connection closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent Terminate.
    Terminate,
    /// FATAL during startup.
    StartupFatal,
    /// A fault: `kill` (the host's network cut).
    Killed,
    /// The server was stopped: FATAL 57P01 was sent first.
    ServerStopped,
    /// The server crashed or the writer failed over: no message.
    Broken,
    /// A FATAL error (injected).
    Fatal,
    /// A CancelRequest connection is closed right after the request.
    CancelRequest,
}

/// How a replica wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    Reached,
    /// `polar_proxy_wait_timeout_ms` elapsed.
    TimedOut,
    /// `statement_timeout` elapsed (57014).
    StatementTimeout,
    /// A CancelRequest (57014).
    Cancelled,
    /// The connection or server went away while waiting.
    Aborted,
}

/// One statement, recorded when it finished (successfully or not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatementRecord {
    pub server: ServerId,
    pub conn: ConnId,
    pub role: Role,
    pub generation: u64,
    /// Which Query message (or extended-protocol batch up to Sync) of this connection: 1, 2, …
    pub query_seq: u64,
    /// Position of the statement in its Query.
    pub index: usize,
    /// Number of statements in its Query.
    pub of: usize,
    pub text: String,
    /// A `SET polar_*` (the kind of statement the engine hides in front of a client's query).
    pub polar_set: bool,
    /// One of the engine's own statements no client writes: the capture of the writer's
    /// session state and the settings replay's encoded `set_config` (S-5).
    pub engine: bool,
    /// Sent through the extended protocol.
    pub extended: bool,
    /// Virtual time the statement began (the entry's `time` is when it ended).
    pub started: u64,
    /// The transaction it ran in.
    pub tx: TxRecord,
    /// The snapshot it read through, when it read the table.
    pub snapshot: Option<SnapshotRecord>,
    /// What it read from `kv`: `(k, Some(v))` per row returned, `(k, None)` for a point
    /// SELECT that found no row.
    pub reads: Vec<(i64, Option<i64>)>,
    /// Data rows returned.
    pub rows: usize,
    pub result: StmtResult,
    /// Warnings sent before its result (SQLSTATE, DETAIL).
    pub warnings: Vec<(String, Option<String>)>,
    pub wait: Option<WaitRecord>,
    /// A write a reader refused.
    pub refused_write: bool,
    /// With `ClusterConfig::record_session_state`: the session state it ran with (and left),
    /// and that of its client's writer connection when it began.
    pub state: Option<Box<StateRecord>>,
}

/// The session state a statement ran with (S-5) and its client's writer's at that moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateRecord {
    /// The client the host said the connection serves.
    pub owner: Option<u64>,
    /// Before the statement ran, and after.
    pub own: SessionState,
    pub after: SessionState,
    /// The client's writer connection: its state, and whether it was idle (no statement
    /// running or queued — otherwise its state is between two of the client's statements).
    pub writer: Option<(SessionState, bool)>,
}

/// The transaction a statement ran in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRecord {
    /// Inside BEGIN … COMMIT (false: an implicit transaction).
    pub explicit: bool,
    pub isolation: Isolation,
    /// Top-level XID when it has one (after the statement).
    pub xid: Option<Xid>,
}

/// A snapshot as a checker needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// Commits with a commit record at or below this LSN are visible: the insert position on
    /// the primary, the replay position on a reader.
    pub lsn: Lsn,
    /// On a reader, the XID import in effect.
    pub import: Option<ImportRecord>,
    /// The snapshot is the transaction's first one, kept (REPEATABLE READ).
    pub reused: bool,
}

/// An XID import (`SET polar_xact_split_xids`) in effect for a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportRecord {
    pub cid: u32,
    pub xids: Vec<Xid>,
    /// The import was set by an earlier Query of the connection: it *leaked* into this one
    /// (P-7 says it must not).
    pub from_earlier_query: bool,
}

/// How a statement ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StmtResult {
    /// CommandComplete with this tag.
    Ok { tag: String },
    Error {
        sqlstate: String,
        message: String,
        /// The error was injected (a fault), not produced by the statement.
        injected: bool,
    },
}

impl StmtResult {
    pub fn is_ok(&self) -> bool {
        matches!(self, StmtResult::Ok { .. })
    }

    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            StmtResult::Ok { .. } => None,
            StmtResult::Error { sqlstate, .. } => Some(sqlstate),
        }
    }
}

/// A replica wait a statement went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitRecord {
    pub target: Lsn,
    pub started: u64,
    pub ended: u64,
    pub outcome: WaitOutcome,
}

/// An uncommitted write on the primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub server: ServerId,
    pub conn: ConnId,
    /// The (sub)transaction XID that wrote.
    pub xid: Xid,
    pub top_xid: Xid,
    pub cid: u32,
    pub k: i64,
    /// `None`: deleted.
    pub v: Option<i64>,
    /// End of the WAL record.
    pub lsn: Lsn,
}

/// A commit on the primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub server: ServerId,
    pub conn: ConnId,
    pub generation: u64,
    pub xid: Xid,
    /// Committed subtransaction XIDs.
    pub subxids: Vec<Xid>,
    /// End of the commit record.
    pub commit_lsn: Lsn,
    /// Final `(k, v)` per key it wrote (`None`: deleted), ordered by key; writes of rolled-back
    /// subtransactions excluded.
    pub writes: Vec<(i64, Option<i64>)>,
}
