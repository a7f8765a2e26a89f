//! Engine-wide state shared by every session of a host process (SPEC §0, §5, §9): configuration
//! (replaceable at runtime), topology (writer hostgroups, their reader hostgroups, dialects and
//! writer generations), reader replay positions, the classification cache and counters.
//!
//! Lock order (never take an earlier lock while holding a later one): `config` → `hostgroups` →
//! `Readers`' map. Every critical section is short and none is held across a call into the host
//! (the engine never calls the host).

pub(crate) mod conns;
mod health;
#[doc(hidden)]
pub mod readers;
pub mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::classify::{
    builtins, CatalogError, Classification, Classifier, DbCatalog, FunctionCatalogs,
    FunctionPolicy, UserFunction, UserObject, UserSequence,
};
use crate::config::{Config, ServerDialect};
use crate::protocol::Lsn;
use crate::token::WriterIdentity;
use readers::{Hostgroup, Readers, ServerId};
use stats::{Counter, Stats};

const NO_HOSTGROUP: u64 = u64::MAX;
const DIALECT_DEFAULT: u8 = u8::MAX;

fn dialect_code(d: ServerDialect) -> u8 {
    match d {
        ServerDialect::Awide => 0,
        ServerDialect::PolarDb => 1,
        ServerDialect::Stock => 2,
    }
}

fn dialect_from(c: u8) -> Option<ServerDialect> {
    match c {
        0 => Some(ServerDialect::Awide),
        1 => Some(ServerDialect::PolarDb),
        2 => Some(ServerDialect::Stock),
        _ => None,
    }
}

/// A writer hostgroup: its writer generation, the writer's latest known LSN, its reader
/// hostgroup and the server dialect of the pair. Groups are created once and never removed or
/// replaced, so a session may hold its group's `Arc` for its whole life ([`Engine::group`]).
#[derive(Debug)]
pub(crate) struct WriterGroup {
    generation: AtomicU64,
    writer_lsn: AtomicU64,
    /// Host time at which the latest writer monitor sample's query was sent (0: none).
    writer_sample_at: AtomicU64,
    writer_sample_lsn: AtomicU64,
    reader_hostgroup: AtomicU64,
    dialect: AtomicU8,
    /// The writer's history as the host reported it (C-1): system identifier and timeline.
    system_id: AtomicU64,
    timeline: AtomicU64,
    /// The latest `pg_conf_load_time()` (µs since the epoch) the host's monitor read on the
    /// writer, and how many times it moved forward (S-5: a configuration reload).
    conf_loaded: AtomicU64,
    conf_epoch: AtomicU32,
}

impl WriterGroup {
    /// The writer is at least at `lsn`, as seen by a session of `generation`.
    pub(crate) fn observe_lsn(&self, generation: u64, lsn: Lsn) {
        if self.generation.load(Ordering::Acquire) == generation {
            self.writer_lsn.fetch_max(lsn.0, Ordering::AcqRel);
        }
    }

    /// The writer's configuration was (re)loaded at `micros` (`pg_conf_load_time()`, µs since
    /// the epoch), as the host's monitor read it. A time later than any known moves the epoch:
    /// sessions whose state was captured before it capture it again (S-5). One source only:
    /// the time is the backend's own — when *it* applied the reload, at its next command — so
    /// two backends report one reload at two times (sessions' captures must not feed it, or
    /// each would move the epoch past the others').
    pub(crate) fn config_loaded(&self, micros: u64) {
        if micros > self.conf_loaded.fetch_max(micros, Ordering::AcqRel) {
            self.conf_epoch.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many times the writer's configuration was known to be reloaded (see
    /// `config_loaded`), modulo 2^16: sessions compare it for equality only.
    pub(crate) fn config_epoch(&self) -> u16 {
        self.conf_epoch.load(Ordering::Acquire) as u16
    }

    fn new(reader_hostgroup: Option<Hostgroup>) -> WriterGroup {
        WriterGroup {
            generation: AtomicU64::new(1),
            writer_lsn: AtomicU64::new(0),
            writer_sample_at: AtomicU64::new(0),
            writer_sample_lsn: AtomicU64::new(0),
            reader_hostgroup: AtomicU64::new(reader_hostgroup.map_or(NO_HOSTGROUP, u64::from)),
            dialect: AtomicU8::new(DIALECT_DEFAULT),
            system_id: AtomicU64::new(0),
            timeline: AtomicU64::new(0),
            conf_loaded: AtomicU64::new(0),
            conf_epoch: AtomicU32::new(0),
        }
    }
}

/// What a session needs to know about its writer hostgroup at one moment. Internal: for this
/// workspace's tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterView {
    pub generation: u64,
    pub writer_lsn: Lsn,
    /// The latest monitor sample of the writer's LSN and the host time its query was sent.
    pub writer_sample: Option<(Lsn, u64)>,
    pub reader_hostgroup: Option<Hostgroup>,
    pub dialect: ServerDialect,
    /// The writer's history for causal tokens (C-1); `{0, 0}` when the host reported none.
    pub identity: WriterIdentity,
}

/// The classifier for a configuration and the writer's reported version (0: not reported).
fn build_classifier(
    config: &Config,
    server_version_num: u32,
    catalogs: &Arc<FunctionCatalogs>,
) -> Classifier {
    let policy = FunctionPolicy::new(config.write_functions.clone())
        .with_read_functions(config.read_functions.clone())
        .with_unknown_functions(config.unknown_functions)
        .with_builtins(builtins::for_server_version(server_version_num));
    // The objects' definitions are judged under the policy statements are.
    catalogs.set_policy(policy.clone(), crate::classify::Limits::DEFAULT);
    Classifier::with_policy(
        policy,
        config.classify_cache_capacity,
        crate::classify::Limits::DEFAULT,
        catalogs.clone(),
    )
}

/// The engine: one per host process, shared by all threads.
#[derive(Debug)]
pub struct Engine {
    config: RwLock<Arc<Config>>,
    /// Rebuilt with each configuration (the function lists change verdicts) and when the writer's
    /// major version picks another built-in table.
    classifier: RwLock<Arc<Classifier>>,
    /// The user functions of each database, as the host reports them (F-policy); shared with
    /// every classifier, so a new catalogue takes effect at the next statement.
    catalogs: Arc<FunctionCatalogs>,
    /// The writer's `server_version_num` as the host reported it (0: not yet: PostgreSQL 15).
    writer_version: AtomicU32,
    config_generation: AtomicU64,
    profile_generation: AtomicU64,
    /// The configured dialect, readable without the config lock (hot path).
    default_dialect: AtomicU8,
    hostgroups: RwLock<BTreeMap<Hostgroup, Arc<WriterGroup>>>,
    readers: Readers,
    /// Readers that refused the wait statements (F-1): they get no more waits.
    no_wait: RwLock<BTreeSet<ServerId>>,
    /// `server_version_num` of readers, as the host reports it (PostgreSQL ≥ 19 can wait).
    versions: RwLock<BTreeMap<ServerId, u32>>,
    /// The latest `pg_conf_load_time()` (µs) the host's monitor read on each reader (S-5).
    reader_conf: RwLock<BTreeMap<ServerId, u64>>,
    /// Bumped whenever a reader's configuration load time moved forward: part of every reader
    /// key, so no connection pooled before a standby reloaded its configuration serves a
    /// session again (its settings may have changed since the replay checked them).
    reader_conf_epoch: AtomicU64,
    /// What pooled reader connections have prepared (E-2).
    conns: conns::Conns,
    stats: Stats,
}

impl Engine {
    /// An engine with the configured writer hostgroup mapped to the configured reader hostgroup.
    pub fn new(config: Config) -> Arc<Engine> {
        let mut hostgroups = BTreeMap::new();
        hostgroups.insert(
            config.writer_hostgroup,
            Arc::new(WriterGroup::new(config.reader_hostgroup)),
        );
        let catalogs = Arc::new(FunctionCatalogs::new());
        let classifier = build_classifier(&config, 0, &catalogs);
        let default_dialect = AtomicU8::new(dialect_code(config.server_dialect));
        Arc::new(Engine {
            classifier: RwLock::new(Arc::new(classifier)),
            catalogs,
            writer_version: AtomicU32::new(0),
            config: RwLock::new(Arc::new(config)),
            config_generation: AtomicU64::new(1),
            profile_generation: AtomicU64::new(1),
            default_dialect,
            hostgroups: RwLock::new(hostgroups),
            readers: Readers::new(),
            no_wait: RwLock::new(BTreeSet::new()),
            versions: RwLock::new(BTreeMap::new()),
            reader_conf: RwLock::new(BTreeMap::new()),
            reader_conf_epoch: AtomicU64::new(0),
            conns: conns::Conns::default(),
            stats: Stats::default(),
        })
    }

    /// The host closed backend connection `conn` (an idle pooled connection timed out, a
    /// server went away): the engine forgets what it knew of it, so the id may be reused.
    /// Connections the engine itself asks to close (`CloseBackend`) need no report.
    pub fn connection_closed(&self, conn: crate::ids::ConnId) {
        self.conns.forget(conn);
    }

    pub(crate) fn conns(&self) -> &conns::Conns {
        &self.conns
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<Config> {
        self.config.read().clone()
    }

    /// Bumped on every configuration replacement (sessions adopt the new one at their next
    /// statement).
    pub fn config_generation(&self) -> u64 {
        self.config_generation.load(Ordering::Acquire)
    }

    /// Bumped when a replacement changes what reader connections are opened with (startup
    /// profile, identity, dialect): pooled readers of an older profile become incompatible (P-9).
    pub fn profile_generation(&self) -> u64 {
        self.profile_generation.load(Ordering::Acquire)
    }

    /// Replaces the configuration at runtime.
    pub fn replace_config(&self, new: Config) {
        let mut cur = self.config.write();
        let profile_changed = cur.startup_profile != new.startup_profile
            || cur.identity_mode != new.identity_mode
            || cur.identity_host != new.identity_host
            || cur.identity_port != new.identity_port
            || cur.server_dialect != new.server_dialect;
        if cur.write_functions != new.write_functions
            || cur.read_functions != new.read_functions
            || cur.unknown_functions != new.unknown_functions
            || cur.classify_cache_capacity != new.classify_cache_capacity
        {
            let version = self.writer_version.load(Ordering::Acquire);
            *self.classifier.write() = Arc::new(build_classifier(&new, version, &self.catalogs));
        }
        self.default_dialect
            .store(dialect_code(new.server_dialect), Ordering::Release);
        *cur = Arc::new(new);
        if profile_changed {
            self.profile_generation.fetch_add(1, Ordering::AcqRel);
        }
        self.config_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The engine-wide counters (SPEC §9), shared by every session; read them with [`Stats::get`]
    /// or take a [`Stats::snapshot`].
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    #[doc(hidden)] // internal: the reader registry, for this workspace's tests
    pub fn readers(&self) -> &Readers {
        &self.readers
    }

    /// The statement classifier (with its shared decision cache) of the current configuration.
    /// Internal: the classifier's types are not part of the API.
    #[doc(hidden)]
    pub fn classifier(&self) -> Arc<Classifier> {
        self.classifier.read().clone()
    }

    /// Classifies a Query string with the current configuration (cached). Internal, like
    /// [`Engine::classifier`].
    #[doc(hidden)]
    pub fn classify(&self, sql: &str) -> Classification {
        self.classifier.read().classify(sql)
    }

    /// Replaces the catalogue of user functions of `database` (SPEC §7 F-policy): every function
    /// the writer's `pg_proc` has outside the built-in schemas, with its volatility, as the host
    /// loads it at start and on demand (e.g. after DDL it forwarded). Sessions of that database
    /// classify against it from their next statement (a statement already parsed keeps the
    /// verdict it had). Returns how many functions were recorded; on an error nothing changes.
    ///
    /// The host's query, on a connection to that database: the second result of
    /// [`crate::CATALOG_QUERY`] (extension functions installed into `pg_catalog` count as user
    /// functions; built-ins do not).
    pub fn set_function_catalog(
        &self,
        database: &[u8],
        functions: impl IntoIterator<Item = UserFunction>,
    ) -> Result<usize, CatalogError> {
        self.catalogs.set(database, functions)
    }

    /// Forgets the catalogue of `database`: its user functions are unknown again.
    pub fn remove_function_catalog(&self, database: &[u8]) -> bool {
        self.catalogs.remove(database)
    }

    /// Replaces the sequences of `database` (SPEC S-7): every sequence relation of the writer's
    /// `pg_class` (`relkind = 'S'`), which a standby holds WAL-logged ahead of the primary, so a
    /// read naming one (any schema, a name a `search_path` may resolve) stays on the writer.
    /// Sessions of that database classify against it from their next statement; the database's
    /// function catalogue is kept. Returns how many sequences were recorded; on an error
    /// nothing changes.
    ///
    /// The host's query, on a connection to that database:
    /// ```sql
    /// SELECT n.nspname, c.relname
    /// FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    /// WHERE c.relkind = 'S'
    /// ```
    pub fn set_sequence_catalog(
        &self,
        database: &[u8],
        sequences: impl IntoIterator<Item = UserSequence>,
    ) -> Result<usize, CatalogError> {
        self.catalogs.set_sequences(database, sequences)
    }

    /// Forgets the sequences of `database`: a read of one is not recognised again.
    pub fn remove_sequence_catalog(&self, database: &[u8]) -> bool {
        self.catalogs.remove_sequences(database)
    }

    /// Replaces the objects of `database` whose use runs code a statement's text does not show
    /// (SPEC S-6, S-5): views, tables under row-level security, domains, user casts' types, user
    /// operators, each with its definition (the host's query is documented at
    /// `polarsplit_engine_set_object_catalog`). A statement naming one takes the verdict of its
    /// definition, classified here under this engine's policy. Sessions of that database classify
    /// against it from their next statement; its functions and sequences are kept. Returns how
    /// many objects were recorded; on an error nothing changes.
    pub fn set_object_catalog(
        &self,
        database: &[u8],
        objects: impl IntoIterator<Item = UserObject>,
    ) -> Result<usize, CatalogError> {
        self.catalogs.set_objects(database, objects)
    }

    /// Forgets the objects of `database` that hide code: their code is not seen again.
    pub fn remove_object_catalog(&self, database: &[u8]) -> bool {
        self.catalogs.remove_objects(database)
    }

    /// Whether a session ran DDL (CREATE, ALTER or DROP of anything but an index, a role, a
    /// database or a tablespace; a DO body that says so) in `database` since the host last
    /// reported its catalogue: until the host reports its function catalogue from a load that
    /// started after that DDL, no read of the database is replica-safe
    /// (`Reason::CatalogChanged`) — a view, a function shadowing a built-in or a sequence it
    /// created would otherwise be judged by a catalogue without it. A host polls it and loads
    /// the database's catalogue at once when it says yes.
    pub fn catalog_changed(&self, database: &[u8]) -> bool {
        self.catalogs.is_changed(database)
    }

    /// DDL that ran on the writer through another engine — another process of the same host
    /// serving that writer (e.g. another Pgpool-II child), which shares what its sessions ran
    /// ([`Engine::sessions_ddl`]) with this one: exactly as if a session of this engine had run
    /// it in `database`. Until the host reports the database's function catalogue from a load
    /// that started after this call, no read of the database is replica-safe
    /// (`Reason::CatalogChanged`), and statements pooled reader connections prepared before it
    /// are prepared again (E-2). Nothing for the catalogue of a database without a report (its
    /// first load is the host's to make).
    pub fn catalog_changed_elsewhere(&self, database: &[u8]) {
        self.catalogs.mark_changed(database);
        self.catalogs.names_moved();
        self.conns.ddl_elsewhere();
    }

    /// How many DDL statements (the kinds [`Engine::catalog_changed`] follows) this engine's
    /// sessions have run, in any database, since it was created: a host running one engine per
    /// process shares it with the others (one atomic load), which report it to theirs with
    /// [`Engine::catalog_changed_elsewhere`]. DDL reported that way is not counted.
    pub fn sessions_ddl(&self) -> u64 {
        self.conns.sessions_ddl()
    }

    /// The host starts a load of `database`'s catalogues (before its query is sent): its
    /// function catalogue report then ends the staleness of the DDL seen before now only, so
    /// DDL that ran during the load keeps the database's reads on the writer until the next.
    /// A host that never calls it has each function catalogue report taken as covering all.
    pub fn catalog_load_started(&self, database: &[u8]) {
        self.catalogs.load_started(database)
    }

    /// The catalogue the host reported for `database`. Internal: the catalogue's type is not
    /// part of the API.
    #[doc(hidden)]
    pub fn function_catalog(&self, database: &[u8]) -> Option<Arc<DbCatalog>> {
        self.catalogs.get(database)
    }

    /// The writer's `server_version_num` (from its ParameterStatus or a query): picks the table
    /// of built-in functions classification uses (the same major's, else the nearest lower one).
    /// Until the host reports one, PostgreSQL 15's table is used; it is the only one generated
    /// today, so this changes nothing yet.
    pub fn set_writer_server_version(&self, server_version_num: u32) {
        let old = self
            .writer_version
            .swap(server_version_num, Ordering::AcqRel);
        if builtins::for_server_version(old) != builtins::for_server_version(server_version_num) {
            let config = self.config.read();
            *self.classifier.write() = Arc::new(build_classifier(
                &config,
                server_version_num,
                &self.catalogs,
            ));
        }
    }

    /// A writer hostgroup's group (`None` while the hostgroup is unknown); a session may hold
    /// it, since groups are never replaced.
    pub(crate) fn group(&self, hg: Hostgroup) -> Option<Arc<WriterGroup>> {
        self.hostgroups.read().get(&hg).cloned()
    }

    fn group_or_create(&self, hg: Hostgroup) -> Arc<WriterGroup> {
        if let Some(g) = self.group(hg) {
            return g;
        }
        self.hostgroups
            .write()
            .entry(hg)
            .or_insert_with(|| Arc::new(WriterGroup::new(None)))
            .clone()
    }

    /// The state of a writer hostgroup (an unknown one has no readers). Internal: for this
    /// workspace's tests.
    #[doc(hidden)]
    pub fn writer_view(&self, writer_hostgroup: Hostgroup) -> WriterView {
        let groups = self.hostgroups.read();
        self.view_of(groups.get(&writer_hostgroup).map(|g| &**g))
    }

    /// The view of a group held (`None`: an unknown hostgroup) — what [`Engine::writer_view`]
    /// gives, without the map's lock and lookup.
    pub(crate) fn view_of(&self, group: Option<&WriterGroup>) -> WriterView {
        let default_dialect = dialect_from(self.default_dialect.load(Ordering::Acquire))
            .unwrap_or(ServerDialect::Awide);
        match group {
            Some(g) => WriterView {
                generation: g.generation.load(Ordering::Acquire),
                writer_lsn: Lsn(g.writer_lsn.load(Ordering::Acquire)),
                writer_sample: {
                    let at = g.writer_sample_at.load(Ordering::Acquire);
                    let l = g.writer_sample_lsn.load(Ordering::Acquire);
                    (at != 0 && l != 0).then_some((Lsn(l), at))
                },
                reader_hostgroup: match g.reader_hostgroup.load(Ordering::Acquire) {
                    NO_HOSTGROUP => None,
                    v => Some(v as Hostgroup),
                },
                dialect: dialect_from(g.dialect.load(Ordering::Acquire)).unwrap_or(default_dialect),
                identity: WriterIdentity {
                    system_id: g.system_id.load(Ordering::Acquire),
                    timeline: g.timeline.load(Ordering::Acquire) as u32,
                },
            },
            None => WriterView {
                generation: 0,
                writer_lsn: Lsn::ZERO,
                writer_sample: None,
                reader_hostgroup: None,
                dialect: default_dialect,
                identity: WriterIdentity::default(),
            },
        }
    }

    /// Maps a writer hostgroup to its reader hostgroup (or none). A change releases sessions'
    /// pinned readers at their next statement (P-7).
    pub fn set_reader_hostgroup(&self, writer_hostgroup: Hostgroup, reader: Option<Hostgroup>) {
        let g = self.group_or_create(writer_hostgroup);
        g.reader_hostgroup
            .store(reader.map_or(NO_HOSTGROUP, u64::from), Ordering::Release);
    }

    /// Sets the server dialect of a writer hostgroup's pair (W-7), e.g. as confirmed by the host
    /// from `pg_settings`. `None` returns to the configured default.
    pub fn set_dialect(&self, writer_hostgroup: Hostgroup, dialect: Option<ServerDialect>) {
        let g = self.group_or_create(writer_hostgroup);
        g.dialect.store(
            dialect.map_or(DIALECT_DEFAULT, dialect_code),
            Ordering::Release,
        );
    }

    /// The writer of `writer_hostgroup` changed identity (failover, switchover): bump its
    /// generation. LSNs of different generations are never compared (S-2).
    pub fn writer_changed(&self, writer_hostgroup: Hostgroup) -> u64 {
        let g = self.group_or_create(writer_hostgroup);
        g.writer_lsn.store(0, Ordering::Release);
        g.writer_sample_at.store(0, Ordering::Release);
        g.writer_sample_lsn.store(0, Ordering::Release);
        // Another server's configuration: its load time is not comparable with the old one's.
        g.conf_loaded.store(0, Ordering::Release);
        g.generation.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The writer's `pg_conf_load_time()` as the host's monitor reads it on its one connection
    /// (µs since the epoch): when it moves forward the writer reloaded its configuration, which
    /// changes settings the sessions have from it without telling them (only settings the server
    /// reports come with a ParameterStatus): each session captures its state again before its
    /// next read (S-5).
    pub fn writer_config_loaded(&self, writer_hostgroup: Hostgroup, micros: u64) {
        self.group_or_create(writer_hostgroup).config_loaded(micros);
    }

    /// A reader's `pg_conf_load_time()` as the host's monitor reads it on its one connection to
    /// that reader (µs since the epoch). When it moves forward the standby reloaded its
    /// configuration (`ALTER SYSTEM`, `postgresql.conf`: neither replicated), which changes the
    /// settings of every connection to it, pooled ones too, at their next command: the reader
    /// configuration epoch moves, every session's reader key with it, so connections pooled
    /// before never serve again and fresh ones are checked by the settings replay (S-5).
    pub fn reader_config_loaded(&self, server: ServerId, micros: u64) {
        let mut m = self.reader_conf.write();
        let known = m.entry(server).or_insert(0);
        if micros > *known {
            *known = micros;
            self.reader_conf_epoch.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many times a reader's configuration was seen reloaded ([`Engine::reader_config_loaded`]).
    pub fn reader_config_epoch(&self) -> u64 {
        self.reader_conf_epoch.load(Ordering::Acquire)
    }

    /// The writer's history (C-1): its system identifier (`pg_control_system()`) and the
    /// timeline it writes now (e.g. from `pg_walfile_name(pg_current_wal_insert_lsn())`), as the
    /// host's monitor reads them, so every proxy process formats the same causal tokens (C-3).
    /// A different identity than the one known before is a new writer history: the writer
    /// generation is bumped (S-2), as `writer_changed` does. Returns the generation.
    pub fn set_writer_identity(
        &self,
        writer_hostgroup: Hostgroup,
        identity: WriterIdentity,
    ) -> u64 {
        let g = self.group_or_create(writer_hostgroup);
        let old_sys = g.system_id.swap(identity.system_id, Ordering::AcqRel);
        let old_tli = g
            .timeline
            .swap(u64::from(identity.timeline), Ordering::AcqRel);
        let changed = (old_sys, old_tli) != (identity.system_id, u64::from(identity.timeline));
        if changed && (old_sys, old_tli) != (0, 0) {
            return self.writer_changed(writer_hostgroup);
        }
        g.generation.load(Ordering::Acquire)
    }

    /// A writer LSN learned from a monitor sample or a writer RFQ of the given generation.
    pub fn observe_writer_lsn(&self, writer_hostgroup: Hostgroup, generation: u64, lsn: Lsn) {
        if let Some(g) = self.group(writer_hostgroup) {
            g.observe_lsn(generation, lsn);
        }
    }

    /// A monitor sample of the writer's LSN whose query was *sent* at host time `sent_at_ms`.
    /// Besides feeding `global` mode, such a sample positions a session's write that the client
    /// saw acknowledged strictly before `sent_at_ms` (issue 11: stock PostgreSQL reports no LSN).
    pub fn writer_sample(&self, writer_hostgroup: Hostgroup, lsn: Lsn, sent_at_ms: u64) {
        let g = self.group_or_create(writer_hostgroup);
        g.writer_lsn.fetch_max(lsn.0, Ordering::AcqRel);
        if sent_at_ms >= g.writer_sample_at.load(Ordering::Acquire) {
            // The LSN is stored before the time and read after it: a reader that sees the new
            // time also sees the new LSN; one that sees the old time may pair it with the newer
            // LSN, which is conservative (a later sample is never smaller).
            g.writer_sample_lsn.store(lsn.0, Ordering::Release);
            g.writer_sample_at.store(sent_at_ms, Ordering::Release);
        }
    }

    /// Registers (or moves) a reader server.
    pub fn add_reader(&self, server: ServerId, hostgroup: Hostgroup) {
        self.readers.upsert(server, hostgroup);
        // What is known of its wait support survives a removal (keyed by server).
        let refused = self.no_wait.read().contains(&server);
        let version = self.versions.read().get(&server).copied();
        self.readers.set_wait_support(server, refused, version);
    }

    /// Removes reader `server` from reader choice (its pooled connections are the host's to
    /// close). Returns whether it was known.
    pub fn remove_reader(&self, server: ServerId) -> bool {
        self.readers.remove(server)
    }

    /// The host's health verdict for a reader. R-1a: a change either way is an outage, dated
    /// by the latest host time the engine has seen; prefer [`Engine::set_reader_health_at`].
    pub fn set_reader_health(&self, server: ServerId, healthy: bool) -> bool {
        let at = self.readers.clock().unwrap_or(0);
        self.set_reader_health_at(server, healthy, at)
    }

    /// The host's health verdict for a reader at host time `now_ms`. R-1a: a change either way
    /// is an outage: only evidence taken after `now_ms` gives the reader a position again.
    pub fn set_reader_health_at(&self, server: ServerId, healthy: bool, now_ms: u64) -> bool {
        let c = self.readers.set_health_at(server, healthy, now_ms);
        if c.outage {
            self.stats.inc(Counter::ReaderOutages);
        }
        c.found
    }

    /// The generation of the writer hostgroup whose reader hostgroup holds `server`.
    fn generation_for_reader(&self, server: ServerId) -> Option<u64> {
        let hg = self.readers.snapshot(server)?.hostgroup;
        self.hostgroups
            .read()
            .values()
            .find(|g| g.reader_hostgroup.load(Ordering::Acquire) == u64::from(hg))
            .map(|g| g.generation.load(Ordering::Acquire))
    }

    /// A monitor sample of a reader's replay LSN whose query was *sent* at host time `at_ms`
    /// (R-1, R-1a): it replaces what is known of the reader's position — it may lower it — unless
    /// it was taken at or before the reader's latest outage. R-1b: a sample taken after the
    /// reader's latest failure lets a held-out reader back in and lifts its back-off. Returns
    /// whether the reader is known (under a writer hostgroup).
    pub fn reader_sample(&self, server: ServerId, lsn: Lsn, at_ms: u64) -> bool {
        let Some(generation) = self.generation_for_reader(server) else {
            return false;
        };
        self.stats.inc(Counter::MonitorSamples);
        let c = self.readers.observe_sample(server, generation, lsn, at_ms);
        if c.before_outage {
            self.stats.inc(Counter::SamplesBeforeOutage);
        }
        if c.back_in {
            self.stats.inc(Counter::ReadersBackIn);
        }
        c.found
    }

    /// R-1a, R-1b: the host's monitor query to `server` failed or timed out at host time
    /// `now_ms` (its connection broke, refused, or answered nothing in the host's monitor
    /// timeout). An outage — nothing known of the position before `now_ms` counts — and a
    /// failure toward the hold-out.
    pub fn reader_monitor_failed(&self, server: ServerId, now_ms: u64) {
        self.stats.inc(Counter::MonitorFailures);
        self.outage_and_failure(server, None, now_ms);
    }

    /// R-1a, R-1b: a connection to reader `server` broke at host time `now_ms` (sessions report
    /// theirs with `Event::ConnectionLost`; hosts report pooled idle connections here). An
    /// outage and a failure.
    pub fn reader_lost(&self, server: ServerId, now_ms: u64) {
        self.outage_and_failure(server, None, now_ms);
    }

    /// R-1a, R-1b: a new connection to reader `server` could not be opened at host time
    /// `now_ms` — refused, failed, timed out, or refused with 57P03 (`starting_up`: the standby
    /// accepts no connections yet). An outage and a failure. Sessions report theirs with
    /// `Event::ReaderConnectFailed`; hosts report their own attempts (warmups, pool refills) here.
    pub fn reader_connect_failed(&self, server: ServerId, now_ms: u64, starting_up: bool) {
        self.reader_connect_failed_since(server, None, now_ms, starting_up);
    }

    /// [`Self::reader_connect_failed`] of an attempt that began at host time `began` (a
    /// session's: when it asked for the connection). R-1b: an attempt begun after a monitor
    /// sample showed the server answering, that failed all the same, keeps the back-off on
    /// whatever later samples say, until the reader answers a statement.
    pub fn reader_connect_failed_since(
        &self,
        server: ServerId,
        began: Option<u64>,
        now_ms: u64,
        starting_up: bool,
    ) {
        self.stats.inc(Counter::ReaderConnectFailures);
        if starting_up {
            self.stats.inc(Counter::ReaderStartingUp);
        }
        self.outage_and_failure(server, began, now_ms);
    }

    /// R-1a: reader `server` was out at host time `now_ms` in a way the host noticed and no other
    /// call names (it restarted, was re-cloned or changed timeline — e.g. its monitor query saw
    /// `pg_postmaster_start_time()` or the timeline change): nothing known of its position
    /// before `now_ms` counts. Not a failure.
    pub fn reader_outage(&self, server: ServerId, now_ms: u64) {
        if self.readers.outage(server, now_ms) {
            self.stats.inc(Counter::ReaderOutages);
        }
    }

    fn outage_and_failure(&self, server: ServerId, began: Option<u64>, now_ms: u64) {
        if !self.readers.outage(server, now_ms) {
            return;
        }
        self.stats.inc(Counter::ReaderOutages);
        self.stats.inc(Counter::ReaderFailures);
        let threshold = self.config.read().reader_failure_threshold;
        if self
            .readers
            .failed_since(server, began, now_ms, threshold)
            .held_out
        {
            self.stats.inc(Counter::ReadersHeldOut);
        }
    }

    /// R-1b: the earliest host time at which the host should open a new connection to reader
    /// `server` — for pool refills, warmups, and an `AcquireReader` it has no pooled connection
    /// for (answer `ReaderUnavailable` until then). `None`: any time. See
    /// [`readers::Readers::retry_after`].
    pub fn reader_retry_after(&self, server: ServerId) -> Option<u64> {
        self.readers.retry_after(server)
    }

    /// R-1b: whether reader `server` is held out of reader choice (until a monitor sample taken
    /// after its latest failure).
    pub fn reader_held_out(&self, server: ServerId) -> bool {
        self.readers.is_held_out(server)
    }

    /// Records a reader's `server_version_num` (e.g. 150008, 190000) from its ParameterStatus
    /// or a query: stock PostgreSQL 19 and later can wait with `WAIT FOR LSN` (issue 11).
    pub fn set_server_version(&self, server: ServerId, version_num: u32) {
        self.versions.write().insert(server, version_num);
        self.readers
            .set_wait_support(server, self.waits_unsupported(server), Some(version_num));
    }

    /// The `server_version_num` last recorded for `server` with [`Engine::set_server_version`].
    pub fn server_version(&self, server: ServerId) -> Option<u32> {
        self.versions.read().get(&server).copied()
    }

    /// Whether `server` refused the wait statements before.
    pub fn waits_unsupported(&self, server: ServerId) -> bool {
        self.no_wait.read().contains(&server)
    }

    /// Remembers that `server` refused a wait statement; returns whether this is news.
    pub fn mark_waits_unsupported(&self, server: ServerId) -> bool {
        let news = self.no_wait.write().insert(server);
        self.readers.set_wait_support(server, true, None);
        news
    }

    /// Forgets that (e.g. after the host upgraded or replaced the server).
    pub fn clear_waits_unsupported(&self, server: ServerId) {
        self.no_wait.write().remove(&server);
        self.readers.set_wait_support(server, false, None);
    }

    /// R-1b: a reader answered a statement: its consecutive failures restart from zero.
    pub(crate) fn reader_answered(&self, r: &mut readers::ReaderRef, server: ServerId) {
        self.readers.answered_via(r, server);
    }

    /// A replay position a reader reported on the RFQ ending a statement sent at host time
    /// `sent_at_ms`, under a known generation (R-1a: raises only when newer than the latest
    /// sample and the latest outage).
    pub(crate) fn reader_rfq_lsn(
        &self,
        r: &mut readers::ReaderRef,
        server: ServerId,
        generation: u64,
        lsn: Lsn,
        sent_at_ms: u64,
    ) {
        self.stats.inc(Counter::ReaderRfqLsns);
        self.readers
            .observe_rfq_via(r, server, generation, lsn, sent_at_ms);
    }

    /// Every counter, outcome and reason, and per-reader gauges (known position, lag behind the
    /// writer, health, hold-out, consecutive failures, active statements), in the Prometheus
    /// text exposition format (SPEC §9).
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        self.stats.write_prometheus(&mut out);
        let writers: Vec<(Option<Hostgroup>, u64, u64)> = self
            .hostgroups
            .read()
            .values()
            .map(|g| {
                let hg = match g.reader_hostgroup.load(Ordering::Acquire) {
                    NO_HOSTGROUP => None,
                    v => Some(v as Hostgroup),
                };
                (
                    hg,
                    g.generation.load(Ordering::Acquire),
                    g.writer_lsn.load(Ordering::Acquire),
                )
            })
            .collect();
        let readers = self.readers.all();
        stats::write_reader_gauges(&mut out, &readers, |hg| {
            writers
                .iter()
                .find(|(h, _, _)| *h == Some(hg))
                .map(|&(_, generation, lsn)| (generation, Lsn(lsn)))
        });
        out
    }
}
