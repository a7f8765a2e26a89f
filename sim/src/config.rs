//! Cluster configuration and the small identifier types.

use std::fmt;

use polarsplit::Lsn;

/// Which server product the cluster speaks (SPEC W-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dialect {
    /// Everything in W-2…W-5: `'x'` with an empty list, `'w'`, one-shot bounded waits,
    /// `strict`/`best_effort`, persistent XID imports.
    Awide,
    /// Upstream PolarDB for PostgreSQL 15 as observed (NOTES.md): no `'w'`, no marker before
    /// the first XID, unbounded uncancellable waits, imports cleared at the end of the query.
    Polardb,
    /// Plain PostgreSQL 15: no `_polar_*` startup keys, no RFQ extension, no `polar_*` settings.
    Stock,
}

/// A server of the cluster (index in creation order: 0 is the initial primary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub u32);

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server{}", self.0)
    }
}

/// Where [`crate::Cluster::connect`] connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerRef {
    /// Whichever server is the primary now.
    Primary,
    /// The `n`-th server that is a reader now (in server-id order).
    Reader(usize),
    Id(ServerId),
}

impl From<ServerId> for ServerRef {
    fn from(id: ServerId) -> ServerRef {
        ServerRef::Id(id)
    }
}

/// A connection (unique across the whole simulation, never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn{}", self.0)
    }
}

/// A server's current role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Primary,
    Reader,
}

/// Everything that shapes a simulation. Same configuration + same calls ⇒ same bytes and
/// history.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub seed: u64,
    pub dialect: Dialect,
    /// Number of hot standbys (servers 1..=readers; server 0 is the primary).
    pub readers: usize,
    /// `kv` is pre-populated with keys `1..=initial_keys`, value = key × 10, committed at start.
    pub initial_keys: u32,
    /// The WAL insert position at start (above 0, like a real cluster).
    pub initial_lsn: Lsn,
    /// The first XID handed out (a fresh PostgreSQL 15 cluster is in the 730s).
    pub first_xid: u64,
    /// Size range of one WAL record in bytes (each record is 8-byte aligned).
    pub wal_record_min: u64,
    pub wal_record_max: u64,
    /// The WAL writer flushes pending WAL at every multiple of this (0: only commits flush).
    pub flush_interval_ms: u64,
    /// Reader replay lag range: each reader replays the flushed WAL as of `now - lag`.
    pub min_lag_ms: u64,
    pub max_lag_ms: u64,
    /// Every this many ms each reader draws a new lag (0: the lag never changes by itself).
    pub lag_change_interval_ms: u64,
    /// Probability (per million RFQs on connections that asked for LSNs) that an RFQ is sent
    /// without its LSN (the 5-byte *missing* form, P-6).
    pub missing_lsn_per_million: u32,
    /// Default `polar_proxy_wait_timeout_ms` on awide readers (0 = wait forever).
    pub default_wait_timeout_ms: u64,
    /// What every server reports as `server_version` (ParameterStatus and SHOW).
    pub server_version: String,
    /// Hold the answers to extended-protocol messages until Sync or Flush, as a real backend
    /// buffers them (off: every answer is readable at once, the model the CI scenarios were
    /// counted with).
    pub hold_until_flush: bool,
    /// Record each statement's session state and that of its client's writer connection
    /// (S-5; [`crate::history::StatementRecord::state`]).
    pub record_session_state: bool,
    /// How long a restarted reader refuses connections with 57P03 ("starting up").
    pub startup_refusal_ms: u64,
    /// How fast a restarted reader redoes WAL from its restart point, in bytes per ms.
    pub redo_bytes_per_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seed: 1,
            dialect: Dialect::Awide,
            readers: 2,
            initial_keys: 100,
            initial_lsn: Lsn(0x4000_0000),
            first_xid: 732,
            wal_record_min: 64,
            wal_record_max: 400,
            flush_interval_ms: 1000,
            min_lag_ms: 5,
            max_lag_ms: 200,
            lag_change_interval_ms: 1000,
            missing_lsn_per_million: 0,
            default_wait_timeout_ms: 0,
            server_version: "15.8".to_string(),
            hold_until_flush: false,
            record_session_state: false,
            startup_refusal_ms: 20,
            redo_bytes_per_ms: 16,
        }
    }
}
