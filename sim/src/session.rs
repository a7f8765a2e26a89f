//! Per-connection state of a simulated backend: settings (GUCs, transactional as in PostgreSQL),
//! the transaction with its subtransactions, and the connection's buffers and running query.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use polarsplit::internals::protocol::RfqExtensions;
use polarsplit::Lsn;

use crate::config::{ConnId, ServerId};
use crate::fault::Injection;
use crate::harness::shape::Front;
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
    // Reported, but computed (the session user): see `reported_params`.
    ("session_authorization", "", None),
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
];

/// Settings `RESET ALL` leaves alone (PostgreSQL's `GUC_NO_RESET_ALL`; NOTES.md).
pub(crate) const NO_RESET_ALL: &[&str] = &["role", "session_authorization"];

/// Whether a role is a superuser: every user but the unprivileged roles of [`ROLES`].
pub(crate) fn is_superuser(role: &str) -> bool {
    !ROLES.iter().any(|(r, _, _)| *r != "app" && *r == role)
}

/// Whether `role` may read and write `kv`.
pub(crate) fn may_use_kv(role: &str) -> bool {
    ROLES
        .iter()
        .find(|(r, _, _)| *r == role)
        .is_none_or(|(_, ok, _)| *ok)
}

/// Whether `user` may `SET ROLE role` (superusers may become anyone; others their groups).
pub(crate) fn may_set_role(user: &str, role: &str) -> bool {
    user == role
        || is_superuser(user)
        || ROLES
            .iter()
            .any(|(r, _, member_of)| *r == user && member_of.contains(&role))
}

/// The roles the simulated servers know: (name, may read and write `kv`, roles it is a member
/// of). The login user `app` is a superuser (it may become any role).
pub(crate) const ROLES: &[(&str, bool, &[&str])] = &[
    ("app", true, &[]),
    ("ru", true, &["rr"]),
    ("rr", false, &[]),
    ("nobody", false, &[]),
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
    /// NOTIFY (channel, payload) pairs sent at commit, each pair once.
    pub notifies: Vec<(String, String)>,
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
            notifies: Vec::new(),
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

/// The session state of a connection at one moment (S-5): settings that differ from their
/// defaults, `current_user`, `session_user`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    pub settings: BTreeMap<String, String>,
    pub current_user: String,
    pub session_user: String,
}

/// A frontend message as the simulated server receives it: one a client's script can send
/// ([`Front`], the harness's own type), or one that ends or that the simulator does not serve.
#[derive(Clone, Debug)]
pub(crate) enum Inbound {
    Msg(Front),
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
    /// An Execute with a row limit: the portal and the limit (rows beyond it wait in the
    /// portal behind PortalSuspended).
    pub limit: Option<(String, usize)>,
}

/// A prepared statement: the text as parsed (with `$n` placeholders), the statement with
/// placeholders read as 0 (for Describe), and how many parameters it takes.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub text: String,
    pub stmt: Option<Parsed>,
    pub params: usize,
}

/// A portal: the bound statement, and the rows of a suspended Execute still to send.
#[derive(Clone, Debug)]
pub(crate) struct Portal {
    pub stmt: Option<Parsed>,
    pub suspended: Option<Suspended>,
}

/// What a row-limited Execute left in its portal.
#[derive(Clone, Debug)]
pub(crate) struct Suspended {
    pub rows: VecDeque<Vec<Option<String>>>,
    pub sent: usize,
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
    pub prepared: BTreeMap<String, Prepared>,
    pub portals: BTreeMap<String, Portal>,
    pub skip_until_sync: bool,
    pub advisory: BTreeSet<i64>,
    /// A `CREATE TEMP` ran (the simulated server keeps no temporary relations; the capture
    /// reports them, S-4) — until `DISCARD ALL`.
    pub temp: bool,
    /// LISTEN channels.
    pub listening: BTreeSet<String>,
    /// Notifications not yet sent: (notifying pid, channel, payload).
    pub notifies: VecDeque<(i32, String, String)>,
    /// Output from here on is held until Sync or Flush (`ClusterConfig::hold_until_flush`).
    pub hold_from: Option<usize>,
    /// Who the host says this connection serves (for the session-state ground truth).
    pub owner: Option<u64>,
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
            temp: false,
            listening: BTreeSet::new(),
            notifies: VecDeque::new(),
            hold_from: None,
            owner: None,
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

    /// The session user: `SET SESSION AUTHORIZATION`, else the login user.
    pub fn session_user(&self) -> String {
        match self.guc("session_authorization") {
            Some(u) if !u.is_empty() => u.to_string(),
            _ => self.user.clone(),
        }
    }

    /// The current user: `SET ROLE`, else the session user.
    pub fn current_user(&self) -> String {
        match self.guc("role") {
            Some(r) if !r.is_empty() && r != "none" => r.to_string(),
            _ => self.session_user(),
        }
    }

    /// Output a host may read: everything up to a held part.
    pub fn visible_end(&self) -> usize {
        self.hold_from.unwrap_or(self.out.len()).max(self.out_pos)
    }

    /// The session state a read runs with: every setting not at its default (the PolarDB
    /// wait and import settings excluded: they are the engine's, per query), and the users.
    pub fn state(&self) -> SessionState {
        let mut settings = BTreeMap::new();
        for (name, _) in self.gucs.session.iter().chain(self.gucs.local.iter()) {
            if name.starts_with("polar_") || NO_RESET_ALL.contains(&name.as_str()) {
                continue;
            }
            settings.insert(name.clone(), self.guc_or_default(name));
        }
        for (name, v) in &self.startup_gucs {
            if !name.starts_with("polar_") && !NO_RESET_ALL.contains(&name.as_str()) {
                settings
                    .entry(name.clone())
                    .or_insert_with(|| self.guc(name).unwrap_or(v).to_string());
            }
        }
        settings.retain(|name, v| known_default(name) != Some(v.as_str()));
        SessionState {
            settings,
            current_user: self.current_user(),
            session_user: self.session_user(),
        }
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
