//! PostgreSQL's built-in functions as the F-policy (SPEC §7) sees them, and S-7's server-dependent
//! functions and relations.
//!
//! Two kinds of data live here:
//! - **Generated** tables, one per supported major version (`pg15.rs`): every function name of
//!   `pg_catalog` and `information_schema` with the volatilities of its overloads, the argument
//!   counts of the names whose overloads take several (with each count's volatilities), and the
//!   keyword list, read from a real server's `pg_proc` and `pg_get_keywords()` by `scripts/gen-builtins.py`
//!   (see `scripts/gen-builtins.md`). Never edited by hand; a live test fails when it is stale.
//! - **Reviewed** lists, short and commented, below: volatile built-ins that are read-safe, built-ins
//!   that are never read-safe whatever their volatility, and S-7's server-dependent functions and
//!   relations. Names are matched after normalisation (`ident.rs`), in any schema: the F-policy
//!   looks at names, not at qualified names — and at a call's number of arguments where the
//!   overloads that take different numbers fare differently ([`Builtin::ByArity`], S-7's
//!   `age/1`).
//!
//! Which table: the one of the writer's major version ([`for_server_version`]); the host reports
//! `server_version_num` (`Engine::set_writer_server_version`). Until it does, and for a major
//! version without a table of its own, the nearest lower table is used — today PostgreSQL 15 for
//! everything. A function added in a later major is then unknown, hence not read-safe by default
//! (`unknown_functions = primary`): the safe direction.

mod pg15;

/// Flag bits of a function name in a generated table, and keyword categories.
pub mod flags {
    /// Some overload is immutable.
    pub const IMM: u8 = 1 << 0;
    /// Some overload is stable.
    pub const STA: u8 = 1 << 1;
    /// Some overload is volatile.
    pub const VOL: u8 = 1 << 2;
    /// Some overload is an aggregate.
    pub const AGG: u8 = 1 << 3;
    /// Some overload is a window function.
    pub const WIN: u8 = 1 << 4;
    /// Some overload is a procedure (PostgreSQL 15 has no built-in procedure).
    #[allow(dead_code)]
    pub const PROC: u8 = 1 << 5;
    /// Some overload lives in `information_schema` (the rest in `pg_catalog`).
    pub const INFO_SCHEMA: u8 = 1 << 6;

    /// The open end of a variadic overload's argument counts in [`super::BuiltinTable`]'s arities.
    pub const ANY_ARITY: u8 = u8::MAX;

    /// `pg_get_keywords()` categories.
    pub const UNRESERVED: u8 = 1;
    pub const COL_NAME: u8 = 2;
    pub const TYPE_FUNC_NAME: u8 = 3;
    pub const RESERVED: u8 = 4;
}

use flags::*;
use rustc_hash::FxHashMap;

/// The built-in functions and keywords of one PostgreSQL major version (generated).
#[derive(Debug)]
pub struct BuiltinTable {
    pub(crate) major: u32,
    /// Lookup structures and the reviewed lists' verdict on each function, computed once, on
    /// first use (a pure function of this table and the lists: nothing that varies at runtime).
    pub(crate) memo: std::sync::OnceLock<Memo>,
    /// `pg_proc` rows the table was generated from.
    pub(crate) rows: usize,
    /// Sorted by name (bytewise); flags from [`flags`].
    pub(crate) functions: &'static [(&'static str, u8)],
    /// Sorted by name: for each name whose overloads are all plain functions and take more than
    /// one number of arguments, the runs `(lo, hi, flags)` of argument counts over which the
    /// overloads a call may resolve to have the same volatilities ([`ANY_ARITY`]: no upper
    /// bound). A count no overload takes is not listed (such a call fails on every server).
    pub(crate) arities: &'static [(&'static str, &'static [ArityRun])],
    /// Sorted by word; category from [`flags`].
    pub(crate) keywords: &'static [(&'static str, u8)],
    /// The settings a session has of its own (`pg_settings.context` `user` or `superuser`),
    /// sorted bytewise: `current_setting` of any other literal name is the server's (S-7).
    pub(crate) session_settings: &'static [&'static str],
}

/// Argument counts `lo..=hi` and the volatility [`flags`] of the overloads that take them.
pub(crate) type ArityRun = (u8, u8, u8);

/// One table per major version: equal majors are the same table.
impl PartialEq for BuiltinTable {
    fn eq(&self, other: &BuiltinTable) -> bool {
        self.major == other.major
    }
}

impl Eq for BuiltinTable {}

/// What a table derives from itself once: name → index, keyword → category, verdicts by index.
#[derive(Debug)]
pub(crate) struct Memo {
    index: FxHashMap<&'static str, u16>,
    keywords: FxHashMap<&'static [u8], u8>,
    verdicts: Box<[Builtin]>,
    /// The verdicts of the names whose verdict depends on the number of arguments
    /// ([`Builtin::ByArity`] indexes it).
    by_arity: Box<[ByArity]>,
}

/// The verdict on a call of one name by its number of arguments (see [`Builtin::ByArity`]).
#[derive(Debug)]
struct ByArity {
    /// `(lo, hi, verdict)`, ascending, for the counts some overload takes.
    runs: Box<[(u8, u8, Builtin)]>,
    /// The worst of them: for a call whose arguments could not be counted, and for a count no
    /// overload takes.
    worst: Builtin,
}

/// Every generated table, oldest major first.
static TABLES: &[&BuiltinTable] = &[&pg15::TABLE];

/// The table for a server reporting `server_version_num` (e.g. 150018): its own major's, else the
/// nearest lower one, else the oldest. `0` (not reported) gives the default, PostgreSQL 15.
pub fn for_server_version(server_version_num: u32) -> &'static BuiltinTable {
    let major = server_version_num / 10_000;
    TABLES
        .iter()
        .rev()
        .find(|t| t.major <= major)
        .copied()
        .unwrap_or(TABLES[0])
}

/// Whether `name` is a built-in function of any supported version.
pub(crate) fn in_any_table(name: &str) -> bool {
    TABLES.iter().any(|t| t.contains(name))
}

/// The table used until the host reports a server version: PostgreSQL 15.
pub fn default_table() -> &'static BuiltinTable {
    for_server_version(150_000)
}

/// How a normalised function name fares under the built-in half of the F-policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    /// Never read-safe (state, signalling, WAL control, maintenance, statistics resets, fails
    /// on a standby), whatever `pg_proc` says.
    NeverSafe,
    /// S-7: its answer depends on which server answers.
    ServerDependent,
    /// A built-in with a volatile overload that is not on the reviewed read-safe list.
    Volatile,
    /// A built-in whose every overload is immutable or stable, or on the reviewed list: read-safe
    /// unless a user function shares the name (checked per database). The index into the table.
    Safe(u16),
    /// Not a built-in of this version.
    Unknown,
    /// The overloads that take different numbers of arguments fare differently (`age(xid)` is
    /// server-dependent, `age(timestamp, timestamp)` is not): the call's arguments decide,
    /// [`BuiltinTable::at_arity`]. Never one of the name-wide verdicts (those come first).
    ByArity(u16),
}

impl Builtin {
    /// Worse first: never safe, server-dependent, volatile, read-safe.
    fn rank(self) -> u8 {
        match self {
            Builtin::NeverSafe => 4,
            Builtin::ServerDependent => 3,
            Builtin::Volatile | Builtin::ByArity(_) | Builtin::Unknown => 2,
            Builtin::Safe(_) => 1,
        }
    }
}

/// What every prefix entry of [`NEVER_SAFE`] and [`SERVER_DEPENDENT`] starts with (a unit test
/// keeps it complete).
const PREFIX_STARTS: &[&str] = &["binary_upgrade_", "lo_", "pg_"];

/// A list entry: an exact name, or a prefix when it ends with `*`. (An entry `name/N` of
/// [`SERVER_DEPENDENT`] names the overloads that take N arguments: [`arity_entries`].)
fn matches(list: &[&str], name: &str) -> bool {
    list.iter().any(|e| match e.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *e == name,
    })
}

/// The argument counts `N` of the [`SERVER_DEPENDENT`] entries `name/N`.
fn arity_entries(name: &str) -> impl Iterator<Item = u8> + '_ {
    SERVER_DEPENDENT.iter().filter_map(move |e| {
        let (n, a) = e.split_once('/')?;
        (n == name).then(|| a.parse().ok()).flatten()
    })
}

/// Volatile built-ins that are read-safe: they read nothing the primary would answer differently
/// and change no state. Reviewed one by one against PostgreSQL 15's sources.
pub const READ_SAFE_VOLATILE: &[&str] = &[
    // TABLESAMPLE methods (`TABLESAMPLE SYSTEM (10)`): sampling is a read.
    "bernoulli",
    // The reader's clock: as good as the writer's for a read.
    "clock_timestamp",
    "gen_random_uuid",
    // Catalogue reads declared volatile only because they scan pg_inherits.
    "pg_partition_ancestors",
    "pg_partition_tree",
    // Sleeping holds nothing on a standby (no locks, no XID).
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",
    // The session's random state: a reader's is as random as the writer's (`setseed` is never
    // safe: that state lives on the writer).
    "random",
    "system",
    "timeofday",
];

/// Built-ins never read-safe, whatever their volatility (several are stable in `pg_proc`:
/// `txid_current`, `pg_current_xact_id`). SPEC §7; NOTES.md has what a standby does with them.
pub const NEVER_SAFE: &[&str] = &[
    // Sequences and the session's sequence state (standby: 25006, or currval's 55000).
    "nextval",
    "setval",
    "currval",
    "lastval",
    // Session state a standby accepts and keeps (S-4, S-6).
    "set_config",
    "setseed",
    "pg_advisory_*",
    "pg_try_advisory_*",
    // XIDs: assigning one fails on a standby.
    "txid_current",
    "txid_current_if_assigned",
    "pg_current_xact_id",
    "pg_current_xact_id_if_assigned",
    // Notifications and logical messages are WAL.
    "pg_notify",
    "pg_logical_emit_message",
    // Large objects (lo_create: XX000 on a standby; reads hold descriptors of the session).
    "lo_*",
    "loread",
    "lowrite",
    // Index maintenance.
    "brin_summarize_new_values",
    "brin_summarize_range",
    "brin_desummarize_range",
    "gin_clean_pending_list",
    // Server control and signalling.
    "pg_promote",
    "pg_wal_replay_pause",
    "pg_wal_replay_resume",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile*",
    "pg_log_backend_memory_contexts",
    // Statistics resets (the standby's own counters would be reset).
    "pg_stat_reset*",
    // WAL control, backups, replication slots and origins, snapshots exported by a session.
    "pg_switch_wal",
    "pg_create_*",
    "pg_copy_*",
    "pg_drop_replication_slot",
    "pg_replication_slot_advance",
    "pg_logical_slot_*",
    "pg_replication_origin_*",
    "pg_export_snapshot",
    "pg_backup_start",
    "pg_backup_stop",
    // Catalogue writes.
    "pg_import_system_collations",
    "pg_nextoid",
    "pg_stop_making_pinned_objects",
    "pg_extension_config_dump",
    "binary_upgrade_*",
];

/// Never-safe built-ins whose only effect is the calling session's own state: they write no
/// WAL, change nothing another session can see and read no data (PostgreSQL 15's sources:
/// `set_config_by_name`, `setseed`'s backend PRNG, `LockRelease` of advisory tags, which are
/// never WAL-logged; measured on PostgreSQL 15 here: 500 calls of each, and of a lock with its
/// release, moved the WAL insert position by 0 bytes, 500 of `txid_current()` by 20,048). A
/// SELECT of nothing but their calls with constant arguments is the
/// writer's, but no write of SPEC P-6 (`NotSafe::SessionFunction`). The advisory-lock
/// *acquires* are left out on purpose: a session that takes a lock must then see what the
/// lock's last holder committed, which the position probed behind the acquire covers.
pub const SESSION_ONLY: &[&str] = &[
    "set_config",
    "setseed",
    "pg_advisory_unlock",
    "pg_advisory_unlock_shared",
    "pg_advisory_unlock_all",
];

/// Built-ins that run SQL given as text (verified on PostgreSQL 15: `query_to_xml('select
/// pg_advisory_lock(1)', …)` takes the lock; `ts_rewrite(q, 'select …')` runs its query too), or
/// code of objects named by a value. What they run cannot be seen: never read-safe, and code the
/// engine cannot see into (S-5).
pub const RUNS_SQL_TEXT: &[&str] = &[
    "query_to_xml",
    "query_to_xml_and_xmlschema",
    "query_to_xmlschema",
    "ts_rewrite",
    "ts_stat",
    // `SELECT * FROM` a relation named by a string (a regclass or schema literal), and for the
    // schema and database forms every table and view in it: the classifier never sees the
    // relation, so neither S-7's server-dependent relations (verified on PostgreSQL 15:
    // `table_to_xml('pg_catalog.pg_locks', …)` on a standby lists the standby's locks) nor a
    // view's code (a view calling set_config left its placeholder on a pooled reader). The
    // `*_to_xmlschema` forms read only the catalogue and stay safe.
    "table_to_xml",
    "table_to_xml_and_xmlschema",
    "schema_to_xml",
    "schema_to_xml_and_xmlschema",
    "database_to_xml",
    "database_to_xml_and_xmlschema",
    // A type's input code, for a type given by OID (`array_in('{42}', 'd'::regtype, -1)`, a
    // number, `to_regtype(…)`): for a domain, an array of one or a composite with one, the
    // domain's CHECK runs, and it may be any code. The classifier never sees the type's name
    // (an examiner's finding of 2026-12-07, red14-d: a CHECK calling `set_config` left its
    // setting on a pooled reader for 3 of 3 later clients; one calling `nextval` failed with
    // 25006 on the standby after rows had reached the client; `pg_is_in_recovery()` in a CHECK
    // answered otherwise). `enum_in` reads only the enum's labels.
    "array_in",
    "record_in",
    "domain_in",
    "range_in",
    "multirange_in",
];

/// S-7: functions whose answer depends on the server that answers (some are stable in
/// `pg_proc`). `current_setting` is decided by its argument (see [`SERVER_DEPENDENT_SETTINGS`]).
/// `inet_server_addr()`/`inet_server_port()` are *not* here on purpose: they say where a read
/// ran, which operators and tests use to see offload.
///
/// An entry `name/N` makes only the overloads of `name` that take N arguments server-dependent,
/// where its other overloads take other numbers of arguments (the generated table's arities): a
/// call with N arguments, or whose arguments cannot be counted, goes to the writer; a call with
/// another number is judged as those overloads are. The classifier knows no argument types, so
/// every overload that takes N arguments shares the verdict.
pub const SERVER_DEPENDENT: &[&str] = &[
    // Recovery and WAL positions.
    "pg_is_in_recovery",
    "pg_is_wal_replay_paused",
    "pg_get_wal_replay_pause_state",
    "pg_current_wal_*",
    "pg_last_wal_*",
    "pg_last_xact_replay_timestamp",
    "pg_last_committed_xact",
    // Uses the server's timeline; fails during recovery.
    "pg_walfile_name*",
    "pg_control_*",
    // The backend and the server process.
    "pg_backend_pid",
    // The address and port the backend sees its client at: a reader connection's are not the
    // writer connection's the primary would report for the session (red5; `inet_server_*` stay
    // replica-safe on purpose, see above).
    "inet_client_addr",
    "inet_client_port",
    "pg_postmaster_start_time",
    "pg_conf_load_time",
    "pg_current_logfile",
    "pg_current_snapshot",
    "txid_current_snapshot",
    // `next XID - xid` and `next multixact - mxid` of the server that answers: a standby learns
    // of assigned XIDs only from WAL, so its counter lags the primary's (red5: `age(datfrozenxid)`
    // answered 43 on the standby, 44 on the primary). `age(timestamp)` and `age(timestamptz)`
    // (against the session's current_date) also take one argument and share the verdict;
    // `age(timestamp, timestamp)` and `age(timestamptz, timestamptz)` stay read-safe.
    "age/1",
    "mxid_age",
    // Activity and statistics (also the functions behind the pg_stat_* views).
    "pg_stat_*",
    "pg_lock_status",
    "pg_blocking_pids",
    "pg_safe_snapshot_blocking_pids",
    "pg_isolation_test_session_is_blocked",
    "pg_prepared_xact",
    "pg_notification_queue_usage",
    "pg_get_backend_memory_contexts",
    "pg_get_shmem_allocations",
    "pg_get_replication_slots",
    "pg_show_replication_origin_status",
    // Session objects that live on the writer connection only.
    "pg_prepared_statement",
    "pg_cursor",
    "pg_listening_channels",
    "pg_my_temp_schema",
    "pg_is_other_temp_schema",
    // `current_schemas(true)` lists the backend's temporary schema from the first temporary
    // object it made to its end (DISCARD TEMP or ALL, dropping the objects, keep it): a reader
    // connection never has one (probe of 2026-12-04: `{pg_temp_5,pg_catalog,public}` on the
    // primary after DISCARD TEMP, `{pg_catalog,public}` on the standby).
    "current_schemas",
    // A reader's Query string also holds the engine's hidden wait statements (W-4).
    "current_query",
    // Settings and configuration files of the server.
    "pg_show_all_settings",
    "pg_show_all_file_settings",
    "pg_hba_file_rules",
    "pg_ident_file_mappings",
    // The server's files (an unlogged relation is empty on a standby).
    "pg_read_*",
    "pg_stat_file",
    "pg_ls_*",
    "pg_relation_size",
    "pg_table_size",
    "pg_indexes_size",
    "pg_total_relation_size",
    "pg_database_size",
    "pg_tablespace_size",
    // The server's C library.
    "pg_collation_actual_version",
    "pg_database_collation_actual_version",
    // The server's build and installation: a standby on another host or a later minor release
    // (a rolling upgrade), with other extension packages installed or tablespaces mapped
    // elsewhere, answers its own (`current_setting('server_version')` already goes to the
    // writer). The pair the e2e tests run shares one installation, so no test sees a difference.
    "version",
    "pg_config",
    "pg_available_extension*",
    "pg_extension_update_paths",
    "pg_tablespace_location",
    "pg_tablespace_databases",
];

/// S-7: settings whose `current_setting` differs on a standby. `current_setting` of any other
/// literal name is read-safe; of a name that is not a plain literal it is server-dependent.
pub const SERVER_DEPENDENT_SETTINGS: &[&str] = &[
    "default_transaction_read_only",
    "in_hot_standby",
    "transaction_read_only",
];

/// S-7: relations (views) whose rows depend on the server, referenced anywhere in a statement.
pub const SERVER_DEPENDENT_RELATIONS: &[&str] = &[
    "pg_stat_*",
    "pg_statio_*",
    "pg_replication_slots",
    "pg_replication_origin_status",
    "pg_prepared_xacts",
    "pg_prepared_statements",
    "pg_cursors",
    "pg_locks",
    "pg_settings",
    "pg_file_settings",
    "pg_hba_file_rules",
    "pg_ident_file_mappings",
    "pg_backend_memory_contexts",
    "pg_shmem_allocations",
    // A standby's sequence values run ahead of the primary's (logged in advance).
    "pg_sequences",
    // The server's build and installation (see `SERVER_DEPENDENT`).
    "pg_config",
    "pg_available_extension*",
];

impl BuiltinTable {
    /// The major version (15, 16, …).
    pub fn major(&self) -> u32 {
        self.major
    }

    /// Distinct function names.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// `pg_proc` rows the table was generated from.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Every built-in function name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.functions.iter().map(|(n, _)| *n)
    }

    /// Builds the lookup structures now (the engine does, when it builds a classifier) rather
    /// than at the first statement that calls a function.
    pub fn prepare(&self) {
        self.memo();
    }

    fn memo(&self) -> &Memo {
        self.memo.get_or_init(|| self.build_memo())
    }

    fn build_memo(&self) -> Memo {
        let mut by_arity = Vec::new();
        let verdicts = self
            .functions
            .iter()
            .enumerate()
            .map(|(i, (n, _))| {
                let name_wide = self.reviewed(n, Some(i));
                match name_wide {
                    Builtin::NeverSafe | Builtin::ServerDependent => name_wide,
                    _ => match self.by_arity(n, i) {
                        Some(a) if a.runs.iter().any(|r| r.2 != a.worst) => {
                            by_arity.push(a);
                            Builtin::ByArity((by_arity.len() - 1) as u16)
                        }
                        // The same verdict at every count: the name's.
                        _ => name_wide,
                    },
                }
            })
            .collect();
        Memo {
            index: self
                .functions
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (*n, i as u16))
                .collect(),
            keywords: self
                .keywords
                .iter()
                .map(|(w, c)| (w.as_bytes(), *c))
                .collect(),
            verdicts,
            by_arity: by_arity.into_boxed_slice(),
        }
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.memo().index.get(name).map(|&i| usize::from(i))
    }

    /// Whether `name` (normalised) is a built-in function of this version.
    pub fn contains(&self, name: &str) -> bool {
        self.index(name).is_some()
    }

    /// Whether some overload of the built-in `name` is volatile (`None`: not a built-in).
    pub fn any_volatile(&self, name: &str) -> Option<bool> {
        self.index(name).map(|i| self.functions[i].1 & VOL != 0)
    }

    /// Every function name with its [`flags`] (volatilities, kinds, schema), sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, u8)> + '_ {
        self.functions.iter().copied()
    }

    /// The names whose verdict depends on a call's number of arguments (S-7's `name/N`
    /// entries, overloads whose volatilities differ by arity), sorted.
    pub fn by_arity_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.functions
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| matches!(self.verdict(n), Builtin::ByArity(_)))
    }

    /// Every keyword with its category ([`flags::RESERVED`] …), sorted.
    pub fn keywords(&self) -> impl Iterator<Item = (&'static str, u8)> + '_ {
        self.keywords.iter().copied()
    }

    pub(crate) fn name_at(&self, id: u16) -> &'static str {
        self.functions.get(usize::from(id)).map_or("", |(n, _)| n)
    }

    /// The keyword category of a lower-case word (`None`: not a keyword).
    pub fn keyword(&self, word: &[u8]) -> Option<u8> {
        self.memo().keywords.get(word).copied()
    }

    /// The built-in half of the F-policy for a normalised name (SPEC §7, S-7).
    pub(crate) fn verdict(&self, name: &str) -> Builtin {
        let memo = self.memo();
        match memo.index.get(name) {
            Some(&i) => memo
                .verdicts
                .get(usize::from(i))
                .copied()
                .unwrap_or(Builtin::Unknown),
            // Every exact entry of the lists names a built-in (a unit test says so): only the
            // prefixes can match another name.
            None if PREFIX_STARTS.iter().any(|p| name.starts_with(p)) => self.reviewed(name, None),
            None => Builtin::Unknown,
        }
    }

    /// The verdicts of `name` (at `index`) by number of arguments, from the generated arities
    /// and the `name/N` entries of [`SERVER_DEPENDENT`]; `None` when the table has no arities
    /// for it (its overloads all take the same counts, or one is an aggregate).
    fn by_arity(&self, name: &str, index: usize) -> Option<ByArity> {
        let runs = self
            .arities
            .binary_search_by(|(n, _)| (*n).cmp(name))
            .ok()
            .and_then(|k| self.arities.get(k))?
            .1;
        let listed: Vec<u8> = arity_entries(name).collect();
        let at = |flags: u8| {
            if flags & VOL != 0 && !READ_SAFE_VOLATILE.contains(&name) {
                Builtin::Volatile
            } else {
                Builtin::Safe(index as u16)
            }
        };
        let mut out: Vec<(u8, u8, Builtin)> = Vec::new();
        for &(lo, hi, flags) in runs {
            // Split the run at each listed count inside it.
            let mut start = lo;
            loop {
                let next = listed
                    .iter()
                    .copied()
                    .filter(|&a| a >= start && a <= hi)
                    .min();
                match next {
                    Some(a) => {
                        if a > start {
                            out.push((start, a - 1, at(flags)));
                        }
                        out.push((a, a, Builtin::ServerDependent));
                        if a == hi {
                            break;
                        }
                        start = a + 1;
                    }
                    None => {
                        out.push((start, hi, at(flags)));
                        break;
                    }
                }
            }
        }
        let worst = out
            .iter()
            .map(|r| r.2)
            .max_by_key(|v| v.rank())
            .unwrap_or(Builtin::Unknown);
        Some(ByArity {
            runs: out.into_boxed_slice(),
            worst,
        })
    }

    /// The verdict on a call of a [`Builtin::ByArity`] name with `args` arguments (`None`: not
    /// counted). A count no overload takes gets the worst verdict of the name (the call fails on
    /// every server, unless a user function of the name takes it: that is the catalogue's).
    pub(crate) fn at_arity(&self, k: u16, args: Option<u32>) -> Builtin {
        let Some(a) = self.memo().by_arity.get(usize::from(k)) else {
            return Builtin::Unknown;
        };
        let Some(n) = args else { return a.worst };
        a.runs
            .iter()
            .find(|(lo, hi, _)| u32::from(*lo) <= n && (n <= u32::from(*hi) || *hi == ANY_ARITY))
            .map_or(a.worst, |r| r.2)
    }

    /// The lists, then the volatility, for `name` (at `index` in the table, if a built-in).
    fn reviewed(&self, name: &str, index: Option<usize>) -> Builtin {
        if matches(NEVER_SAFE, name) || RUNS_SQL_TEXT.contains(&name) {
            return Builtin::NeverSafe;
        }
        if matches(SERVER_DEPENDENT, name) {
            return Builtin::ServerDependent;
        }
        match index {
            None => Builtin::Unknown,
            Some(i) if self.functions[i].1 & VOL != 0 && !READ_SAFE_VOLATILE.contains(&name) => {
                Builtin::Volatile
            }
            Some(i) => Builtin::Safe(i as u16),
        }
    }

    /// What the engine says of calling the built-in `name` (for tests and the live check):
    /// `None` when read-safe, otherwise why not.
    pub fn verdict_name(&self, name: &str) -> Option<&'static str> {
        self.verdict_name_at(name, None)
    }

    /// [`BuiltinTable::verdict_name`] of a call with `args` arguments (`None`: not counted,
    /// the worst of the name's overloads).
    pub fn verdict_name_at(&self, name: &str, args: Option<u32>) -> Option<&'static str> {
        let v = match self.verdict(name) {
            Builtin::ByArity(k) => self.at_arity(k, args),
            v => v,
        };
        match v {
            Builtin::NeverSafe => Some("WRITE_FUNCTION"),
            Builtin::ServerDependent => Some("SERVER_DEPENDENT"),
            Builtin::Volatile => Some("VOLATILE_FUNCTION"),
            Builtin::Safe(_) => None,
            Builtin::Unknown | Builtin::ByArity(_) => Some("UNKNOWN_FUNCTION"),
        }
    }
}

/// Whether a normalised relation name is one of S-7's server-dependent relations.
pub(crate) fn is_server_dependent_relation(name: &str) -> bool {
    matches(SERVER_DEPENDENT_RELATIONS, name)
}

/// Whether `current_setting` of this literal names a characteristic of the current transaction
/// (P-5: only the writer's transaction has the client's block's).
pub(crate) fn is_transaction_setting(name: &str) -> bool {
    ["transaction_isolation", "transaction_deferrable"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name))
}

/// Whether `current_setting` of this literal (compared case-insensitively, as GUC names are) is
/// server-dependent (S-7): one of [`SERVER_DEPENDENT_SETTINGS`], or a setting that is not the
/// session's own — the server's port, data directory, connection to the primary, any setting a
/// configuration file or the server start sets (`pg_settings.context` other than `user` and
/// `superuser`), and any name `table` does not know. A custom (dotted) name is the session's: it
/// exists only where a session or an extension defined it, and a reader replays the session's
/// (S-5).
pub(crate) fn is_server_dependent_setting(table: &BuiltinTable, name: &str) -> bool {
    if SERVER_DEPENDENT_SETTINGS
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name))
    {
        return true;
    }
    if name.contains('.') {
        return false;
    }
    !table
        .session_settings
        .iter()
        .any(|s| s.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> &'static BuiltinTable {
        default_table()
    }

    #[test]
    fn generated_tables_are_sorted_and_plausible() {
        for table in TABLES {
            assert!(table.functions.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(table.keywords.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(table.len() > 2000 && table.rows() > table.len());
            assert!(table.len() < usize::from(u16::MAX));
            assert!(table
                .functions
                .iter()
                .all(|(_, f)| f & (IMM | STA | VOL) != 0));
            assert_eq!(table.keyword(b"select"), Some(RESERVED));
            assert_eq!(table.keyword(b"substring"), Some(COL_NAME));
            assert_eq!(table.keyword(b"left"), Some(TYPE_FUNC_NAME));
            assert_eq!(table.keyword(b"zone"), Some(UNRESERVED));
            assert_eq!(table.keyword(b"lower"), None);
        }
    }

    #[test]
    fn prefix_starts_cover_every_prefix_entry() {
        for e in NEVER_SAFE.iter().chain(SERVER_DEPENDENT) {
            if e.ends_with('*') {
                assert!(PREFIX_STARTS.iter().any(|p| e.starts_with(p)), "{e}");
            }
        }
        let t = t();
        assert_eq!(
            t.verdict("pg_stat_statements_reset"),
            Builtin::ServerDependent
        );
        assert_eq!(t.verdict("lo_mine"), Builtin::NeverSafe);
        assert_eq!(t.verdict("binary_upgrade_x"), Builtin::NeverSafe);
    }

    #[test]
    fn major_version_choice_defaults_to_15() {
        assert_eq!(for_server_version(150018).major(), 15);
        assert_eq!(for_server_version(0).major(), 15);
        assert_eq!(for_server_version(140011).major(), 15);
        assert_eq!(for_server_version(190000).major(), 15);
        assert_eq!(default_table().major(), 15);
    }

    /// The reviewed lists name real built-ins of every table, and say something `pg_proc` does
    /// not already say (a read-safe entry that is not volatile would be dead weight).
    #[test]
    fn reviewed_lists_name_real_builtins() {
        for table in TABLES {
            for name in READ_SAFE_VOLATILE {
                assert_eq!(table.any_volatile(name), Some(true), "{name}");
                assert!(matches!(table.verdict(name), Builtin::Safe(_)), "{name}");
            }
            for list in [NEVER_SAFE, SERVER_DEPENDENT, RUNS_SQL_TEXT] {
                for entry in list {
                    if let Some((name, n)) = entry.split_once('/') {
                        // Only S-7's list takes `name/N`; N must split the name's overloads.
                        assert!(std::ptr::eq(list, SERVER_DEPENDENT), "{entry}");
                        let n: u8 = n.parse().expect(entry);
                        let Builtin::ByArity(k) = table.verdict(name) else {
                            panic!("{entry}: {name}'s overloads do not differ by arity");
                        };
                        assert_eq!(
                            table.at_arity(k, Some(u32::from(n))),
                            Builtin::ServerDependent,
                            "{entry}"
                        );
                        continue;
                    }
                    let hit = match entry.strip_suffix('*') {
                        Some(p) => table.names().any(|n| n.starts_with(p)),
                        None => table.contains(entry),
                    };
                    assert!(
                        hit,
                        "{entry} names no built-in of PostgreSQL {}",
                        table.major
                    );
                }
            }
        }
    }

    /// The generated arities are sorted, name built-ins that are no aggregates, and their runs
    /// ascend without overlapping.
    #[test]
    fn generated_arities_are_sorted_and_consistent() {
        for table in TABLES {
            assert!(table.arities.windows(2).all(|w| w[0].0 < w[1].0));
            for (name, runs) in table.arities {
                let flags = table.functions[table.index(name).expect(name)].1;
                assert_eq!(flags & (AGG | WIN), 0, "{name}");
                assert!(!runs.is_empty(), "{name}");
                assert!(runs.iter().all(|r| r.0 <= r.1), "{name}");
                assert!(runs.windows(2).all(|w| w[0].1 < w[1].0), "{name}");
                let union = runs.iter().fold(0, |f, r| f | r.2);
                assert_eq!(union, flags & (IMM | STA | VOL), "{name}");
            }
        }
    }

    /// S-7: `age(xid)` counts from the answering server's next XID; the classifier cannot tell
    /// it from `age(timestamp)` (one argument each), but `age(a, b)` is pure.
    #[test]
    fn s7_age_is_judged_by_its_number_of_arguments() {
        let t = t();
        let Builtin::ByArity(k) = t.verdict("age") else {
            panic!("age is judged by name");
        };
        let age = Builtin::Safe(t.index("age").unwrap() as u16);
        assert_eq!(t.at_arity(k, Some(1)), Builtin::ServerDependent);
        assert_eq!(t.at_arity(k, Some(2)), age);
        // Not counted, or a count no overload takes: the worst.
        assert_eq!(t.at_arity(k, None), Builtin::ServerDependent);
        assert_eq!(t.at_arity(k, Some(0)), Builtin::ServerDependent);
        assert_eq!(t.at_arity(k, Some(3)), Builtin::ServerDependent);
        assert_eq!(t.verdict_name("age"), Some("SERVER_DEPENDENT"));
        assert_eq!(t.verdict_name_at("age", Some(2)), None);
        // One overload, always server-dependent.
        assert_eq!(t.verdict("mxid_age"), Builtin::ServerDependent);
        // Arities that change no verdict leave the name's.
        assert!(matches!(t.verdict("date_trunc"), Builtin::Safe(_)));
        assert!(matches!(t.verdict("format"), Builtin::Safe(_)));
        // Name-wide lists come first: ts_rewrite(q, 'select …') runs SQL, whatever the count.
        assert_eq!(t.verdict("ts_rewrite"), Builtin::NeverSafe);
    }

    #[test]
    fn verdicts_follow_the_lists_then_volatility() {
        let t = t();
        assert_eq!(
            t.verdict("lower"),
            Builtin::Safe(t.index("lower").unwrap() as u16)
        );
        assert!(matches!(t.verdict("now"), Builtin::Safe(_)));
        assert!(matches!(t.verdict("random"), Builtin::Safe(_)));
        assert_eq!(t.verdict("nextval"), Builtin::NeverSafe);
        // Stable in pg_proc, never safe.
        assert_eq!(t.any_volatile("txid_current"), Some(false));
        assert_eq!(t.verdict("txid_current"), Builtin::NeverSafe);
        // Stable in pg_proc, server-dependent.
        assert_eq!(t.any_volatile("pg_backend_pid"), Some(false));
        assert_eq!(t.verdict("pg_backend_pid"), Builtin::ServerDependent);
        assert_eq!(t.verdict("pg_stat_get_numscans"), Builtin::ServerDependent);
        assert_eq!(t.verdict("pg_stat_reset"), Builtin::NeverSafe);
        assert_eq!(t.verdict("cursor_to_xml"), Builtin::Volatile);
        assert_eq!(
            t.verdict("inet_server_port"),
            Builtin::Safe(t.index("inet_server_port").unwrap() as u16)
        );
        assert_eq!(t.verdict("my_function"), Builtin::Unknown);
        // Names are matched as normalised: a quoted "Lower" is another function.
        assert_eq!(t.verdict("Lower"), Builtin::Unknown);
        assert!(is_server_dependent_relation("pg_stat_activity"));
        assert!(is_server_dependent_relation("pg_locks"));
        assert!(!is_server_dependent_relation("pg_stats"));
        assert!(!is_server_dependent_relation("pg_class"));
        assert!(is_server_dependent_setting(t, "IN_HOT_STANDBY"));
        assert!(!is_server_dependent_setting(t, "work_mem"));
        assert!(!is_server_dependent_setting(t, "timezone"));
        assert!(!is_server_dependent_setting(t, "app.tenant"));
        assert!(is_server_dependent_setting(t, "port"));
        assert!(is_server_dependent_setting(t, "no_such_setting"));
    }
}
