//! The F-policy (SPEC §7): which function calls a replica may run, and the per-database catalogue
//! of user functions that the host reports.
//!
//! A call is read-safe only if **every** function of that name the engine knows of — built-in or
//! reported, in any schema, any overload — is known read-safe. Most of that is decided from the
//! text alone when a statement is first classified (the result is cached by text): the configured
//! lists, the built-in table and its reviewed lists (`builtins`). What depends on the database is
//! left as a short list of [`Call`]s on the classification and finished per statement by
//! [`FunctionPolicy::finish`] against the database's [`DbCatalog`]: a built-in name that a user
//! function shares, a name that is not a built-in (known safe only if the catalogue says so,
//! otherwise `unknown_functions` decides), and attribute-notation names (`(x).f` calls `f(x)`)
//! that a user function may answer to. Most statements call no function at all, and most calls
//! are of built-ins in a database whose catalogue shadows none: then finishing costs nothing.
//!
//! The host also reports each database's sequences (S-7: a standby holds a sequence WAL-logged
//! ahead of the primary). A read carries the hashes of the names it mentions as one more
//! [`Call`] ([`Call::Names`]), finished the same way: naming a reported sequence makes it
//! server-dependent. While no database has sequences, that costs no catalogue lookup.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use super::builtins::{self, BuiltinTable};
use super::ident::MAX_NAME;
use super::{Classification, Effects, Kind, NotSafe, Statements, WriteFunctions};

/// `unknown_functions` (SPEC §8): where a statement goes that calls a function the engine knows
/// nothing of (not built-in, not reported, not configured).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UnknownFunctions {
    /// Not read-safe (the default).
    #[default]
    Primary,
    /// Read-safe; a standby's refusal is retried on the primary (F-2).
    Replica,
}

impl UnknownFunctions {
    /// All accepted spellings, in declaration order.
    pub const NAMES: &'static [&'static str] = &["primary", "replica"];

    /// The value spelled `s` (surrounding blanks and letter case ignored), or `None` when `s` is
    /// none of [`UnknownFunctions::NAMES`].
    pub fn parse(s: &str) -> Option<UnknownFunctions> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("primary") {
            Some(UnknownFunctions::Primary)
        } else if s.eq_ignore_ascii_case("replica") {
            Some(UnknownFunctions::Replica)
        } else {
            None
        }
    }

    /// The value's spelling in `ConfigBuilder::set` and config files.
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownFunctions::Primary => "primary",
            UnknownFunctions::Replica => "replica",
        }
    }
}

/// `read_functions` (SPEC §8): names declared read-safe by the operator — every function of such
/// a name, built-in or not, whatever its volatility or S-7 status. Never-safe built-ins and
/// `write_functions` names cannot be declared read-safe (the configuration refuses them).
/// A trailing `*` makes a prefix; names are compared as normalised, unquoted ones fold case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadFunctions(WriteFunctions);

/// For [`super::classify`], which borrows everything.
static NO_READ_FUNCTIONS: ReadFunctions = ReadFunctions::new();

impl ReadFunctions {
    /// An empty list (the default).
    pub const fn new() -> ReadFunctions {
        ReadFunctions(WriteFunctions::empty())
    }

    /// Adds a configured name (see [`WriteFunctions::add`]).
    pub fn add(&mut self, name: &str) -> bool {
        self.0.add(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The configured entries (prefixes end with `*`), for validation and logs.
    pub fn entries(&self) -> Vec<String> {
        self.0.entries()
    }
}

/// Whether a configured `read_functions` entry (`name` or `prefix*`) stays clear of every
/// never-safe built-in (SPEC §7: those are never read-safe, whatever is configured).
pub fn may_be_read_function(entry: &str) -> bool {
    let e = entry.trim().to_ascii_lowercase();
    let split = |s: &str| -> (String, bool) {
        match s.strip_suffix('*') {
            Some(b) => (b.to_string(), true),
            None => (s.to_string(), false),
        }
    };
    let (base, prefix) = split(&e);
    !builtins::NEVER_SAFE.iter().any(|n| {
        let (nb, np) = split(n);
        match (prefix, np) {
            (false, false) => base == nb,
            (false, true) => base.starts_with(&nb),
            (true, false) => nb.starts_with(&base),
            (true, true) => base.starts_with(&nb) || nb.starts_with(&base),
        }
    })
}

/// Everything the F-policy needs besides the database's catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionPolicy {
    pub write_functions: WriteFunctions,
    pub read_functions: ReadFunctions,
    pub unknown_functions: UnknownFunctions,
    pub(crate) builtins: &'static BuiltinTable,
}

impl Default for FunctionPolicy {
    fn default() -> FunctionPolicy {
        FunctionPolicy::new(WriteFunctions::defaults())
    }
}

impl FunctionPolicy {
    /// The default policy with these write functions: no read functions, unknown functions to
    /// the primary, PostgreSQL 15's built-ins.
    pub fn new(write_functions: WriteFunctions) -> FunctionPolicy {
        FunctionPolicy {
            write_functions,
            read_functions: ReadFunctions::new(),
            unknown_functions: UnknownFunctions::Primary,
            builtins: builtins::default_table(),
        }
    }

    pub fn with_read_functions(mut self, read: ReadFunctions) -> FunctionPolicy {
        self.read_functions = read;
        self
    }

    pub fn with_unknown_functions(mut self, unknown: UnknownFunctions) -> FunctionPolicy {
        self.unknown_functions = unknown;
        self
    }

    /// The built-in table of the server version the host reported (see
    /// [`builtins::for_server_version`]).
    pub fn with_builtins(mut self, table: &'static BuiltinTable) -> FunctionPolicy {
        self.builtins = table;
        self
    }

    pub fn builtins(&self) -> &'static BuiltinTable {
        self.builtins
    }

    /// The policy by reference (what classification takes).
    pub(crate) fn rules(&self) -> Rules<'_> {
        Rules {
            write_functions: &self.write_functions,
            read_functions: &self.read_functions,
            unknown_functions: self.unknown_functions,
            builtins: self.builtins,
            record_names: true,
        }
    }

    /// Finishes a text-only classification for one database (SPEC §7): the calls that depend on
    /// the database's catalogue are resolved, which may make a read not replica-safe and mark
    /// statements as running code the engine cannot see into ([`Effects::RUNS_CODE`]).
    /// `catalog` is `None` for a database whose catalogue the host has not reported.
    pub fn finish(&self, c: Classification, catalog: Option<&DbCatalog>) -> Classification {
        self.rules().finish(c, catalog)
    }
}

/// A [`FunctionPolicy`] by reference, so that classifying with a borrowed write list allocates
/// nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules<'a> {
    pub(crate) write_functions: &'a WriteFunctions,
    pub(crate) read_functions: &'a ReadFunctions,
    pub(crate) unknown_functions: UnknownFunctions,
    pub(crate) builtins: &'static BuiltinTable,
    /// Whether reads record the names they mention ([`Call::Names`]): not where no catalogue
    /// will finish the classification (which then allocates nothing for them).
    pub(crate) record_names: bool,
}

impl<'a> Rules<'a> {
    /// The default policy around a borrowed write list.
    pub(crate) fn with_write(write_functions: &'a WriteFunctions) -> Rules<'a> {
        Rules {
            write_functions,
            read_functions: &NO_READ_FUNCTIONS,
            unknown_functions: UnknownFunctions::Primary,
            builtins: builtins::default_table(),
            record_names: false,
        }
    }

    /// See [`FunctionPolicy::finish`].
    pub(crate) fn finish(
        &self,
        mut c: Classification,
        catalog: Option<&DbCatalog>,
    ) -> Classification {
        let Some(calls) = c.calls.take() else {
            return c;
        };
        let mut changes: Vec<(u32, NotSafe, bool)> = Vec::new();
        for call in calls.iter() {
            let (stmt, verdict) = self.resolve(call, catalog);
            if let Some((why, unseen)) = verdict {
                changes.push((stmt, why, unseen));
            }
        }
        if changes.is_empty() {
            return c;
        }
        let apply = |s: &mut super::StatementInfo, why: NotSafe, unseen: bool| {
            if unseen {
                s.effects |= Effects::RUNS_CODE;
            }
            if why != NotSafe::None && s.kind == Kind::Read && s.not_safe == NotSafe::None {
                s.kind = Kind::ReadNotSafe;
                s.not_safe = why;
            }
        };
        match &mut c.statements {
            Statements::One(s) => {
                for (_, why, unseen) in changes {
                    apply(s, why, unseen);
                }
            }
            Statements::Many(v) => {
                let mut owned = v.to_vec();
                for (i, why, unseen) in changes {
                    if let Some(s) = owned.get_mut(i as usize) {
                        apply(s, why, unseen);
                    }
                }
                *v = Arc::from(owned);
            }
        }
        c
    }

    /// What one call adds: `None` nothing; `Some((why, unseen))` a reason (`NotSafe::None` for
    /// none) and whether user code may run.
    fn resolve(&self, call: &Call, catalog: Option<&DbCatalog>) -> (u32, Option<(NotSafe, bool)>) {
        match call {
            Call::Builtin { stmt, id, hint } => {
                let name = self.builtins.name_at(*id);
                let verdict = catalog
                    .and_then(DbCatalog::function_set)
                    .filter(|f| f.shadows_builtins)
                    .and_then(|f| f.names.get(name))
                    .map(|&safe| {
                        // A user function shares the built-in's name: it may be the one called.
                        let why = if safe || *hint {
                            NotSafe::None
                        } else {
                            NotSafe::UserFunction
                        };
                        (why, true)
                    });
                (*stmt, verdict)
            }
            Call::User { stmt, name, hint } => {
                let why = match catalog
                    .and_then(DbCatalog::function_set)
                    .and_then(|f| f.names.get(&**name))
                {
                    _ if *hint => NotSafe::None,
                    Some(true) => NotSafe::None,
                    Some(false) => NotSafe::UserFunction,
                    None => match self.unknown_functions {
                        UnknownFunctions::Primary => NotSafe::UnknownFunction,
                        UnknownFunctions::Replica => NotSafe::None,
                    },
                };
                // RUNS_CODE was set from the text already.
                (*stmt, (why != NotSafe::None).then_some((why, false)))
            }
            Call::Attr { stmt, hash, hint } => {
                let verdict = catalog
                    .and_then(DbCatalog::function_set)
                    .and_then(|f| f.attrs.get(hash))
                    .map(|&safe| {
                        let why = if safe || *hint {
                            NotSafe::None
                        } else {
                            NotSafe::UserFunction
                        };
                        (why, true)
                    });
                (*stmt, verdict)
            }
            Call::Names { stmt, hashes } => {
                let names_sequence = catalog
                    .and_then(DbCatalog::sequence_set)
                    .is_some_and(|s| hashes.iter().any(|h| s.hashes.contains(h)));
                (
                    *stmt,
                    names_sequence.then_some((NotSafe::ServerDependent, false)),
                )
            }
        }
    }
}

/// A call whose verdict depends on the database (kept on a cached classification).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Call {
    /// A read-safe built-in (its index in the policy's table): unsafe only if a user function of
    /// the database shares the name and is not known read-safe.
    Builtin { stmt: u32, id: u16, hint: bool },
    /// Not a built-in: read-safe only if the database's catalogue knows the name and every
    /// function of it is read-safe (or `unknown_functions = replica` for a name it does not know).
    User {
        stmt: u32,
        name: Box<str>,
        hint: bool,
    },
    /// `x.name` that is not a built-in: a column, unless the catalogue has a function of the name.
    Attr { stmt: u32, hash: u64, hint: bool },
    /// The [`short_name_hash`]es of the names a read mentions — every identifier but the reserved
    /// keywords, wherever it stands (FROM, JOIN, a subquery, a CTE, a column; sorted, distinct):
    /// not replica-safe if one is a sequence of the database (S-7: a standby holds a sequence
    /// WAL-logged ahead of the primary). A column or alias that shares a sequence's name only
    /// costs offload. Not recorded under `/* route=reader */`, which accepts S-7 answers as it
    /// does for the server-dependent relations, nor by the classification entry points that
    /// never see a catalogue.
    Names { stmt: u32, hashes: Box<[u32]> },
}

impl Call {
    /// The same call, attributed to statement `i` of its Query string.
    pub(crate) fn in_statement(self, i: u32) -> Call {
        match self {
            Call::Builtin { id, hint, .. } => Call::Builtin { stmt: i, id, hint },
            Call::User { name, hint, .. } => Call::User {
                stmt: i,
                name,
                hint,
            },
            Call::Attr { hash, hint, .. } => Call::Attr {
                stmt: i,
                hash,
                hint,
            },
            Call::Names { hashes, .. } => Call::Names { stmt: i, hashes },
        }
    }
}

/// The hash attribute names are recorded by (a collision only makes a read go to the primary).
pub(crate) fn name_hash(name: &str) -> u64 {
    FxBuildHasher.hash_one(name)
}

/// A function's volatility, as `pg_proc.provolatile` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Volatility {
    /// `provolatile = 'i'`: the result depends on the arguments only; read-safe.
    Immutable,
    /// `provolatile = 's'`: fixed within a statement; read-safe.
    Stable,
    /// `provolatile = 'v'`: its result may change at any call, or it has side effects; a read
    /// calling any function of this name goes to the writer.
    Volatile,
}

impl Volatility {
    /// From `pg_proc.provolatile` (`i`, `s`, `v`).
    pub fn from_provolatile(c: u8) -> Option<Volatility> {
        match c {
            b'i' => Some(Volatility::Immutable),
            b's' => Some(Volatility::Stable),
            b'v' => Some(Volatility::Volatile),
            _ => None,
        }
    }

    fn read_safe(self) -> bool {
        !matches!(self, Volatility::Volatile)
    }
}

/// One user function the host reports from the writer's catalogue (`pg_proc` outside the
/// built-in schemas): every overload is reported; the name is `pg_proc.proname` as stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserFunction {
    /// `pg_namespace.nspname`. Recorded for the host's logs; the F-policy matches names in any
    /// schema (a `search_path` may put a user function ahead of `pg_catalog`).
    pub schema: String,
    /// `pg_proc.proname`, as stored.
    pub name: String,
    /// `pg_proc.provolatile`.
    pub volatility: Volatility,
}

/// One sequence relation the host reports from the writer's catalogue (`pg_class` rows of
/// `relkind = 'S'`): S-7, a standby holds a sequence WAL-logged ahead of the primary (`nextval`
/// logs 32 values in advance), so a read of the relation answers values the primary has not
/// handed out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserSequence {
    /// `pg_namespace.nspname`. Recorded for the host's logs; a statement is matched by the name
    /// in any schema (a `search_path` may resolve an unqualified name to any of them).
    pub schema: String,
    /// `pg_class.relname`, as stored.
    pub name: String,
}

/// Why a reported catalogue was refused (nothing of it is kept).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    #[error("function name {0:?} is empty or longer than 63 bytes")]
    /// A function name is empty or longer than 63 bytes (PostgreSQL's `NAMEDATALEN - 1`).
    BadName(String),
    #[error("more than {0} functions in one database")]
    /// One database reported more functions than the engine keeps (the limit is given).
    TooManyFunctions(usize),
    #[error("more than {0} databases")]
    /// More databases have catalogues than the engine keeps (the limit is given).
    TooManyDatabases(usize),
    #[error("sequence name {0:?} is empty or longer than 63 bytes")]
    /// A sequence name is empty or longer than 63 bytes.
    BadSequenceName(String),
    #[error("more than {0} sequences in one database")]
    /// One database reported more sequences than the engine keeps (the limit is given).
    TooManySequences(usize),
}

/// The user functions of one database, by name.
#[derive(Debug, Default)]
struct FunctionSet {
    /// Name → whether every reported function of that name is read-safe.
    names: FxHashMap<Box<str>, bool>,
    /// The same by [`name_hash`], for attribute notation.
    attrs: FxHashMap<u64, bool>,
    /// Some reported name is also a built-in's.
    shadows_builtins: bool,
    functions: usize,
}

/// The sequence relations of one database, by [`short_name_hash`] (a collision only keeps a
/// read on the primary).
#[derive(Debug, Default)]
struct SequenceSet {
    hashes: FxHashSet<u32>,
    sequences: usize,
}

/// What the host reported of one database: its user functions and its sequences, each replaced
/// (or forgotten) on its own.
#[derive(Debug, Default)]
pub struct DbCatalog {
    functions: Option<Arc<FunctionSet>>,
    sequences: Option<Arc<SequenceSet>>,
}

impl DbCatalog {
    /// Functions reported.
    pub fn len(&self) -> usize {
        self.functions.as_ref().map_or(0, |f| f.functions)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every reported function named `name` is read-safe (`None`: none of that name).
    pub fn read_safe(&self, name: &str) -> Option<bool> {
        self.function_set()?.names.get(name).copied()
    }

    /// Sequences reported.
    pub fn sequences(&self) -> usize {
        self.sequences.as_ref().map_or(0, |s| s.sequences)
    }

    /// Whether a reported sequence is named `name` (as stored; a hash collision says yes).
    pub fn is_sequence(&self, name: &str) -> bool {
        self.sequence_set()
            .is_some_and(|s| s.hashes.contains(&short_name_hash(name)))
    }

    fn function_set(&self) -> Option<&FunctionSet> {
        self.functions.as_deref()
    }

    fn sequence_set(&self) -> Option<&SequenceSet> {
        self.sequences.as_deref().filter(|s| s.sequences > 0)
    }

    fn shadows_builtins(&self) -> bool {
        self.function_set().is_some_and(|f| f.shadows_builtins)
    }

    fn has_sequences(&self) -> bool {
        self.sequence_set().is_some()
    }
}

/// Bounds of what the host may report (every buffer bounded).
pub const MAX_FUNCTIONS_PER_DATABASE: usize = 1 << 20;
pub const MAX_SEQUENCES_PER_DATABASE: usize = 1 << 20;
pub const MAX_DATABASES: usize = 1 << 16;

/// The host-reported catalogues of every database, shared by the engine and its classifiers
/// (and replaceable at runtime, one database at a time). Classifications are cached by text
/// only; what a catalogue decides is applied per statement ([`Rules::finish`]), so a report
/// takes effect at the next statement, whatever the caches hold.
#[derive(Debug, Default)]
pub struct FunctionCatalogs {
    dbs: RwLock<BTreeMap<Box<[u8]>, Arc<DbCatalog>>>,
    /// Reported databases whose catalogue shares a name with a built-in: while 0, built-in calls
    /// are finished without looking a catalogue up.
    shadowing: AtomicUsize,
    /// Reported databases with at least one sequence: while 0, the names a statement mentions
    /// are not looked up.
    sequenced: AtomicUsize,
}

impl FunctionCatalogs {
    pub fn new() -> FunctionCatalogs {
        FunctionCatalogs::default()
    }

    /// Replaces the catalogue of user functions of `database` with `functions` (all of them: a
    /// name missing from the report is unknown afterwards); its sequences are kept. Returns how
    /// many functions were recorded.
    pub fn set(
        &self,
        database: &[u8],
        functions: impl IntoIterator<Item = UserFunction>,
    ) -> Result<usize, CatalogError> {
        let mut cat = FunctionSet::default();
        for f in functions {
            if f.name.is_empty() || f.name.len() > MAX_NAME {
                return Err(CatalogError::BadName(f.name));
            }
            if cat.functions == MAX_FUNCTIONS_PER_DATABASE {
                return Err(CatalogError::TooManyFunctions(MAX_FUNCTIONS_PER_DATABASE));
            }
            cat.functions += 1;
            let safe = f.volatility.read_safe();
            // Against every table: the writer's version may be reported later.
            cat.shadows_builtins |= builtins::in_any_table(&f.name);
            let h = name_hash(&f.name);
            cat.names
                .entry(f.name.into_boxed_str())
                .and_modify(|s| *s &= safe)
                .or_insert(safe);
            cat.attrs
                .entry(h)
                .and_modify(|s| *s &= safe)
                .or_insert(safe);
        }
        let n = cat.functions;
        let functions = Some(Arc::new(cat));
        self.replace(database, |old| DbCatalog {
            functions,
            sequences: old.and_then(|o| o.sequences.clone()),
        })?;
        Ok(n)
    }

    /// Replaces the sequences of `database` with `sequences` (all of them: a name missing from the
    /// report is not a sequence afterwards); its functions are kept. Returns how many sequences
    /// were recorded.
    pub fn set_sequences(
        &self,
        database: &[u8],
        sequences: impl IntoIterator<Item = UserSequence>,
    ) -> Result<usize, CatalogError> {
        let mut set = SequenceSet::default();
        for s in sequences {
            if s.name.is_empty() || s.name.len() > MAX_NAME {
                return Err(CatalogError::BadSequenceName(s.name));
            }
            if set.sequences == MAX_SEQUENCES_PER_DATABASE {
                return Err(CatalogError::TooManySequences(MAX_SEQUENCES_PER_DATABASE));
            }
            set.sequences += 1;
            set.hashes.insert(short_name_hash(&s.name));
        }
        let n = set.sequences;
        let sequences = Some(Arc::new(set));
        self.replace(database, |old| DbCatalog {
            functions: old.and_then(|o| o.functions.clone()),
            sequences,
        })?;
        Ok(n)
    }

    /// Forgets the user functions of `database` (they are unknown again). Whether it had some.
    pub fn remove(&self, database: &[u8]) -> bool {
        let mut had = false;
        let _ = self.replace(database, |old| {
            had = old.is_some_and(|o| o.functions.is_some());
            DbCatalog {
                functions: None,
                sequences: old.and_then(|o| o.sequences.clone()),
            }
        });
        had
    }

    /// Forgets the sequences of `database` (a read of one is not recognised again). Whether it
    /// had some reported.
    pub fn remove_sequences(&self, database: &[u8]) -> bool {
        let mut had = false;
        let _ = self.replace(database, |old| {
            had = old.is_some_and(|o| o.sequences.is_some());
            DbCatalog {
                functions: old.and_then(|o| o.functions.clone()),
                sequences: None,
            }
        });
        had
    }

    /// Replaces the entry of `database` with what `make` builds from the old one, under the
    /// write lock; an entry with nothing reported is removed.
    fn replace(
        &self,
        database: &[u8],
        make: impl FnOnce(Option<&DbCatalog>) -> DbCatalog,
    ) -> Result<(), CatalogError> {
        let mut dbs = self.dbs.write();
        let new = make(dbs.get(database).map(|a| &**a));
        let keep = new.functions.is_some() || new.sequences.is_some();
        if keep && !dbs.contains_key(database) && dbs.len() >= MAX_DATABASES {
            return Err(CatalogError::TooManyDatabases(MAX_DATABASES));
        }
        let (shadows, sequenced) = (new.shadows_builtins(), new.has_sequences());
        let old = if keep {
            dbs.insert(Box::from(database), Arc::new(new))
        } else {
            dbs.remove(database)
        };
        let count = |c: &AtomicUsize, was: bool, is: bool| match (was, is) {
            (true, false) => {
                c.fetch_sub(1, Ordering::AcqRel);
            }
            (false, true) => {
                c.fetch_add(1, Ordering::AcqRel);
            }
            _ => {}
        };
        let old = old.as_deref();
        count(
            &self.shadowing,
            old.is_some_and(DbCatalog::shadows_builtins),
            shadows,
        );
        count(
            &self.sequenced,
            old.is_some_and(DbCatalog::has_sequences),
            sequenced,
        );
        Ok(())
    }

    /// The catalogue of `database`, if the host reported one.
    pub fn get(&self, database: &[u8]) -> Option<Arc<DbCatalog>> {
        self.dbs.read().get(database).cloned()
    }

    /// Databases with a reported catalogue.
    pub fn len(&self) -> usize {
        self.dbs.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether finishing `c` needs a catalogue at all (the fast path skips the lookup).
    pub(crate) fn needed_for(&self, c: &Classification) -> bool {
        match &c.calls {
            None => false,
            Some(calls) => {
                let shadowing = self.shadowing.load(Ordering::Acquire) > 0;
                let sequenced = self.sequenced.load(Ordering::Acquire) > 0;
                calls.iter().any(|c| match c {
                    Call::Builtin { .. } => shadowing,
                    Call::Names { .. } => sequenced,
                    Call::User { .. } | Call::Attr { .. } => true,
                })
            }
        }
    }
}

/// The 32-bit hash names are kept by for S-7's sequences ([`name_hash`] folded).
pub(crate) fn short_name_hash(name: &str) -> u32 {
    let h = name_hash(name);
    (h ^ (h >> 32)) as u32
}

/// Names a statement's scan holds before allocating.
const INLINE_NAMES: usize = 12;

/// Collects the [`short_name_hash`]es of the names a statement mentions (see [`Call::Names`]),
/// without allocating for up to [`INLINE_NAMES`] distinct ones.
#[derive(Clone, Debug, Default)]
pub(crate) struct NameSet {
    inline: [u32; INLINE_NAMES],
    len: usize,
    more: Vec<u32>,
}

impl NameSet {
    pub(crate) fn insert(&mut self, h: u32) {
        let inline = self.inline.get(..self.len).unwrap_or(&[]);
        if inline.contains(&h) {
            return;
        }
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = h;
                self.len += 1;
            }
            // Deduplicated when finished.
            None => self.more.push(h),
        }
    }

    /// The names as a call to finish per database (`None`: no name).
    pub(crate) fn into_call(self) -> Option<Call> {
        if self.len == 0 {
            return None;
        }
        let mut all = self.more;
        all.extend_from_slice(self.inline.get(..self.len).unwrap_or(&[]));
        all.sort_unstable();
        all.dedup();
        Some(Call::Names {
            stmt: 0,
            hashes: all.into_boxed_slice(),
        })
    }
}
