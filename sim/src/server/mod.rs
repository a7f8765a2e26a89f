//! The simulated backend: everything a connection does, at the cluster's current virtual time.
//!
//! - [`startup`]: input framing, the startup packet and its W-1 rules, CancelRequest;
//! - [`messages`]: simple Query and the extended protocol's messages;
//! - [`conn`]: the connection loop, the end of a Query or Sync, ReadyForQuery (W-2);
//! - [`step`]: running a Query's statements in order (a replica wait suspends them) and their
//!   history records;
//! - [`exec`]: one statement, dispatched by kind to [`txn`] (transaction control), [`gucs`]
//!   (settings) and [`data`] (reads, writes, functions);
//! - [`notify`]: LISTEN / NOTIFY and when notifications are sent;
//! - [`wait`]: the W-4 wait and the snapshot a statement reads through;
//! - [`error`]: the errors a server sends.

mod conn;
mod data;
mod error;
mod exec;
mod gucs;
mod messages;
mod notify;
mod startup;
mod step;
mod txn;
mod wait;

pub(crate) use error::send_fatal;

/// The vocabulary every part of the server uses.
mod prelude {
    pub(super) use std::collections::BTreeMap;

    pub(super) use polarsplit::internals::protocol::{
        frame, FrontendMessage, RfqExtensions, StartupPacket, XidList,
    };
    pub(super) use polarsplit::{Limits, Lsn};
    pub(super) use polarsplit::{Marker, TxStatus};

    pub(super) use crate::cluster::Cluster;
    pub(super) use crate::config::{ConnId, Dialect, Role};
    pub(super) use crate::harness::shape::Front;
    pub(super) use crate::history::{
        CloseReason, CommitRecord, Event, ImportRecord, SnapshotRecord, StateRecord,
        StatementRecord, StmtResult, TxRecord, WaitOutcome, WaitRecord, WriteRecord,
    };
    pub(super) use crate::session::{
        is_superuser, known_default, may_set_role, may_use_kv, parse_ms, ActiveWait, Conn, Gucs,
        Inbound, Level, Phase, Running, Tx, TxWrite, FIXED_GUCS, KNOWN_GUCS, NO_RESET_ALL, ROLES,
    };
    pub(super) use crate::sql::{
        parse_query, CaptureArg, Func, Isolation, LockMode, Parsed, RowLock, SetValue, Stmt,
        StrExpr, TxModes,
    };
    pub(super) use crate::store::{OwnView, Snapshot, WriteConflict, Xid, XidStatus};
    pub(super) use crate::wire::{self, be, oid, Column, RfqBody};

    pub(super) use super::data::columns_of;
    pub(super) use super::error::*;
    pub(super) use super::gucs::{display_name, GucKind};
    pub(super) use super::wait::lenient_lsn;
    pub(super) use super::{int4, parse_bool, truthy, tx, ExecResult, Flow, StmtInfo};
}

use prelude::*;

/// What a statement did, for its history record.
#[derive(Default)]
struct StmtInfo {
    snapshot: Option<SnapshotRecord>,
    reads: Vec<(i64, Option<i64>)>,
    rows: usize,
    warnings: Vec<(String, Option<String>)>,
    wait: Option<WaitRecord>,
    /// A row-limited Execute stopped at its limit.
    suspended: bool,
    /// The session state before it ran (when recorded).
    state: Option<Box<StateRecord>>,
}

/// Why a statement did not complete now.
enum Flow {
    Wait(ActiveWait),
    Fail(SqlError),
}

impl From<SqlError> for Flow {
    fn from(e: SqlError) -> Flow {
        Flow::Fail(e)
    }
}

/// A statement's CommandComplete tag, or why it did not complete.
type ExecResult = Result<String, Flow>;

fn tx(c: &mut Conn) -> &mut Tx {
    c.tx.as_mut().expect("statements run inside a transaction")
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "1" | "on" | "true" | "yes")
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" | "t" => Some(true),
        "0" | "off" | "false" | "no" | "f" => Some(false),
        _ => None,
    }
}

fn int4(v: i64) -> Result<i64, SqlError> {
    if i32::try_from(v).is_ok() {
        Ok(v)
    } else {
        Err(SqlError::new("22003", "integer out of range"))
    }
}
