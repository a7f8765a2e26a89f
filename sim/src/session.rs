//! Per-connection state of a simulated backend: settings (GUCs, transactional as in PostgreSQL),
//! the transaction with its subtransactions, and the connection's buffers and running query.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use polarsplit::protocol::{Lsn, RfqExtensions};

use crate::config::{ConnId, ServerId};
use crate::fault::Injection;
use crate::history::{WaitOutcome, WaitRecord};
use crate::sql::{Isolation, Parsed};
use crate::store::Xid;

/// A setting's value and the Query (by the connection's `query_seq`) that set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GucVal {
    pub value: String,
    pub query_seq: u64,
}

/// Settings in three layers, looked up in order: `SET LOCAL` values (until the transaction ends),
/// session values (`SET`), startup values (the connection's reset values). Below them, the
/// built-in defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gucs {
    pub local: BTreeMap<String, GucVal>,
    pub session: BTreeMap<String, GucVal>,
}

impl Gucs {
    pub fn get<'a>(&'a self, startup: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
        self.local
            .get(name)
            .or_else(|| self.session.get(name))
            .map(|v| v.value.as_str())
            .or_else(|| startup.get(name).map(String::as_str))
    }

    pub fn get_val(&self, name: &str) -> Option<&GucVal> {
        self.local.get(name).or_else(|| self.session.get(name))
    }

    /// Forgets a setting in both transaction-scoped layers (one-shot settings, imports cleared
    /// by the server).
    pub fn remove(&mut self, name: &str) {
        self.local.remove(name);
        self.session.remove(name);
    }
}

/// Built-in settings: lowercase name, default, and the name reported in ParameterStatus.
pub(crate) const KNOWN_GUCS: &[(&str, &str, Option<&str>)] = &[
    ("application_name", "", Some("application_name")),
    ("client_encoding", "UTF8", Some("client_encoding")),
    ("client_min_messages", "notice", None),
    ("datestyle", "ISO, MDY", Some("DateStyle")),
    ("default_transaction_isolation", "read committed", None),
    (
        "default_transaction_read_only",
        "off",
        Some("default_transaction_read_only"),
    ),
    ("extra_float_digits", "1", None),
    ("idle_in_transaction_session_timeout", "0", None),
    ("intervalstyle", "postgres", Some("IntervalStyle")),
    ("lock_timeout", "0", None),
    ("role", "none", None),
    ("search_path", "\"$user\", public", None),
    (
        "standard_conforming_strings",
        "on",
        Some("standard_conforming_strings"),
    ),
    ("statement_timeout", "0", None),
    ("synchronous_commit", "on", None),
    ("timezone", "UTC", Some("TimeZone")),
    ("work_mem", "4MB", None),
];

/// Settings that exist but cannot be changed (55P02), with what they report.
pub(crate) const FIXED_GUCS: &[&str] = &[
    "server_version",
    "server_encoding",
    "integer_datetimes",
    "in_hot_standby",
    "is_superuser",
    "session_authorization",
];

pub(crate) fn known_default(name: &str) -> Option<&'static str> {
    KNOWN_GUCS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, d, _)| *d)
}

/// Parses a time setting (`statement_timeout`, `polar_proxy_wait_timeout_ms`): an integer in
/// ms, or with a unit `ms`/`s`/`min`.
pub(crate) fn parse_ms(v: &str) -> Option<u64> {
    let v = v.trim();
    let digits = v.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let n: u64 = v[..digits].parse().ok()?;
    match v[digits..].trim() {
        "" | "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "min" => n.checked_mul(60_000),
        _ => None,
    }
}

/// One level of the transaction: the top level or a savepoint.
#[derive(Clone, Debug)]
pub(crate) struct Level {
    pub name: String,
    pub xid: Option<Xid>,
    /// XIDs of released (committed) subtransactions merged into this level, in order.
    pub children: Vec<Xid>,
    /// Settings when the savepoint was made (restored by ROLLBACK TO).
    pub gucs: Gucs,
}

/// One change to `kv` a transaction made.
#[derive(Clone, Debug)]
pub(crate) struct TxWrite {
    pub xid: Xid,
    pub k: i64,
    pub v: Option<i64>,
}

/// A transaction in progress on a connection.
#[derive(Clone, Debug)]
pub(crate) struct Tx {
    /// Inside BEGIN … COMMIT.
    pub explicit: bool,
    /// The implicit transaction block of a multi-statement Query.
    pub multi: bool,
    pub failed: bool,
    pub isolation: Isolation,
    pub read_only: bool,
    /// A snapshot has been taken (isolation can no longer change).
    pub snapshot_taken: bool,
    /// REPEATABLE READ: the first snapshot's LSN, kept.
    pub rr_lsn: Option<Lsn>,
    pub top: Level,
    pub subs: Vec<Level>,
    /// Current command id.
    pub cid: u32,
    pub cid_used: bool,
    pub writes: Vec<TxWrite>,
    /// End of the last WAL record the transaction wrote.
    pub last_wal: Option<Lsn>,
    /// LOCK TABLE ran or an error happened: no RFQ marker for the rest of it (W-7).
    pub unsplittable: bool,
    pub gucs_at_start: Gucs,
}

impl Tx {
    pub fn new(isolation: Isolation, read_only: bool, multi: bool, gucs: Gucs) -> Tx {
        Tx {
            explicit: false,
            multi,
            failed: false,
            isolation,
            read_only,
            snapshot_taken: false,
            rr_lsn: None,
            top: Level {
                name: String::new(),
                xid: None,
                children: Vec::new(),
                gucs: gucs.clone(),
            },
            subs: Vec::new(),
            cid: 0,
            cid_used: false,
            writes: Vec::new(),
            last_wal: None,
            unsplittable: false,
            gucs_at_start: gucs,
        }
    }

    /// Every live XID: top first, then subtransactions (open and released).
    pub fn all_xids(&self) -> Vec<Xid> {
        let mut v = Vec::new();
        for l in std::iter::once(&self.top).chain(self.subs.iter()) {
            v.extend(l.xid);
            v.extend(l.children.iter().copied());
        }
        v
    }

    pub fn own_set(&self) -> BTreeSet<Xid> {
        self.all_xids().into_iter().collect()
    }

    /// The W-3 list: command id, the current level's XID, then the others (inner levels first,
    /// each followed by its released children). Empty before the first XID.
    pub fn xid_list(&self) -> String {
        if self.top.xid.is_none() {
            return String::new();
        }
        let mut s = self.cid.to_string();
        for l in self.subs.iter().rev().chain(std::iter::once(&self.top)) {
            for x in l.xid.iter().chain(l.children.iter()) {
                s.push(',');
                s.push_str(&x.to_string());
            }
        }
        s
    }
}

/// A frontend message, owned.
#[derive(Clone, Debug)]
pub(crate) enum Inbound {
    Query(String),
    Parse {
        name: String,
        sql: String,
    },
    Bind {
        portal: String,
        statement: String,
    },
    Describe {
        portal: bool,
        name: String,
    },
    Execute {
        portal: String,
    },
    Sync,
    Flush,
    Close {
        portal: bool,
        name: String,
    },
    Terminate,
    /// A message type the simulator does not serve (FunctionCall, COPY …).
    Unsupported(u8),
}

/// A replica wait in progress.
#[derive(Clone, Debug)]
pub(crate) struct ActiveWait {
    pub target: Lsn,
    pub started: u64,
    /// `polar_proxy_wait_timeout_ms` deadline.
    pub wait_deadline: Option<u64>,
    /// `statement_timeout` deadline.
    pub stmt_deadline: Option<u64>,
}

impl ActiveWait {
    pub fn deadline(&self) -> Option<u64> {
        match (self.wait_deadline, self.stmt_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A Query (or an extended-protocol Execute) being executed.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub stmts: Vec<Parsed>,
    pub idx: usize,
    pub extended: bool,
    /// When the current statement began.
    pub started: u64,
    pub wait: Option<ActiveWait>,
    /// How the current statement's wait ended (set when it resumes).
    pub outcome: Option<(WaitOutcome, WaitRecord)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Startup,
    Ready,
    Closed,
}

/// A backend connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub id: ConnId,
    pub server: ServerId,
    pub pid: i32,
    pub secret: u32,
    pub phase: Phase,
    pub inbuf: Vec<u8>,
    pub inbox: VecDeque<Inbound>,
    pub out: Vec<u8>,
    pub out_pos: usize,
    pub ext: RfqExtensions,
    pub user: String,
    pub database: String,
    pub startup_gucs: BTreeMap<String, String>,
    pub gucs: Gucs,
    pub tx: Option<Tx>,
    pub running: Option<Running>,
    pub query_seq: u64,
    /// An extended-protocol batch (up to Sync) is open.
    pub batch_open: bool,
    pub reported: BTreeMap<String, String>,
    pub injections: VecDeque<Injection>,
    pub prepared: BTreeMap<String, Option<Parsed>>,
    pub portals: BTreeMap<String, Option<Parsed>>,
    pub skip_until_sync: bool,
    pub advisory: BTreeSet<i64>,
}

impl Conn {
    pub fn new(id: ConnId, server: ServerId, pid: i32, secret: u32) -> Conn {
        Conn {
            id,
            server,
            pid,
            secret,
            phase: Phase::Startup,
            inbuf: Vec::new(),
            inbox: VecDeque::new(),
            out: Vec::new(),
            out_pos: 0,
            ext: RfqExtensions::default(),
            user: String::new(),
            database: String::new(),
            startup_gucs: BTreeMap::new(),
            gucs: Gucs::default(),
            tx: None,
            running: None,
            query_seq: 0,
            batch_open: false,
            reported: BTreeMap::new(),
            injections: VecDeque::new(),
            prepared: BTreeMap::new(),
            portals: BTreeMap::new(),
            skip_until_sync: false,
            advisory: BTreeSet::new(),
        }
    }

    pub fn guc(&self, name: &str) -> Option<&str> {
        self.gucs.get(&self.startup_gucs, name)
    }

    pub fn guc_or_default(&self, name: &str) -> String {
        self.guc(name)
            .or_else(|| known_default(name))
            .unwrap_or("")
            .to_string()
    }

    pub fn default_isolation(&self) -> Isolation {
        self.guc("default_transaction_isolation")
            .and_then(Isolation::parse)
            .unwrap_or(Isolation::ReadCommitted)
    }

    pub fn default_read_only(&self) -> bool {
        matches!(
            self.guc("default_transaction_read_only"),
            Some("on" | "true" | "1" | "yes")
        )
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w3_xid_list_shapes() {
        let mut tx = Tx::new(Isolation::ReadCommitted, false, false, Gucs::default());
        assert_eq!(tx.xid_list(), "");
        tx.top.xid = Some(732);
        tx.cid = 1;
        assert_eq!(tx.xid_list(), "1,732");
        tx.subs.push(Level {
            name: "a".into(),
            xid: Some(733),
            children: vec![],
            gucs: Gucs::default(),
        });
        tx.cid = 3;
        assert_eq!(tx.xid_list(), "3,733,732");
        let l = tx.subs.pop().unwrap();
        tx.top.children.extend(l.xid);
        assert_eq!(tx.xid_list(), "3,732,733");
        assert_eq!(tx.all_xids(), vec![732, 733]);
    }

    #[test]
    fn ms_values() {
        assert_eq!(parse_ms("500"), Some(500));
        assert_eq!(parse_ms("2s"), Some(2000));
        assert_eq!(parse_ms(" 3 min"), Some(180_000));
        assert_eq!(parse_ms("x"), None);
        assert_eq!(parse_ms("-1"), None);
    }
}
