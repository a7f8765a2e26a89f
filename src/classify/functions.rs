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
//!
//! And it reports the objects whose use runs code a statement's text does not show (S-6, S-5):
//! views, tables under row-level security, domains with CHECK constraints, user casts and user
//! operators, each under the name a statement invokes it by and with a definition text (the view's
//! query, the policies' or the CHECK's expressions, a call of the cast's or operator's function).
//! The engine classifies each definition as it classifies a statement, finished against the
//! database's functions, sequences and the other objects (to a fixed point: a view over a view),
//! and a statement naming an object takes that verdict as if the text were its own: a view over
//! `set_config` is not replica-safe and changes session state, a domain whose CHECK calls a user
//! function runs user code. Verdicts are computed when something of the database is reported,
//! never per statement.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use super::builtins::{self, BuiltinTable};
use super::ident::MAX_NAME;
use super::{Classification, Effects, Kind, Limits, NotSafe, Statements, WriteFunctions};

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
        // Code the database may run for any statement, whatever it names (see
        // [`EVERY_STATEMENT`]).
        let every = catalog.and_then(DbCatalog::every_statement);
        let calls = c.calls.take();
        if calls.is_none() && every.is_none() {
            return c;
        }
        let mut changes: Vec<(u32, Verdict)> = Vec::new();
        for call in calls.iter().flat_map(|c| c.iter()) {
            let (stmt, verdict) = self.resolve(call, catalog);
            if let Some(v) = verdict {
                changes.push((stmt, v));
            }
        }
        if let Some(v) = every {
            for (i, s) in c.statements().iter().enumerate() {
                if s.kind != Kind::Empty {
                    changes.push((i as u32, v));
                }
            }
        }
        if changes.is_empty() {
            return c;
        }
        let apply = |s: &mut super::StatementInfo, v: Verdict| {
            if v.effects.contains(Effects::CALLS_SET_CONFIG) {
                // set_config called by a definition the statement runs: its text does not
                // name the setting.
                s.effects = s.effects.without(Effects::UNAMBIGUOUS_ONLY);
            }
            s.effects |= v.effects;
            if s.not_safe == NotSafe::SessionFunction && v.why == NotSafe::None {
                // The catalogue has something of a name the statement calls or mentions (a
                // user function sharing a session-only built-in's name, any reported object):
                // no longer known to call only the built-ins.
                s.not_safe_for(NotSafe::UserFunction);
            }
            s.not_safe_for(v.why);
        };
        match &mut c.statements {
            Statements::One(s) => {
                for (_, v) in changes {
                    apply(s, v);
                }
            }
            Statements::Many(v) => {
                let mut owned = v.to_vec();
                for (i, verdict) in changes {
                    if let Some(s) = owned.get_mut(i as usize) {
                        apply(s, verdict);
                    }
                }
                *v = Arc::from(owned);
            }
        }
        c
    }

    /// What one call adds to its statement (`None`: nothing).
    fn resolve(&self, call: &Call, catalog: Option<&DbCatalog>) -> (u32, Option<Verdict>) {
        let (stmt, verdict) = self.resolve_call(call, catalog);
        match call {
            Call::Names { hashes, .. } => {
                let objects = catalog
                    .and_then(DbCatalog::object_set)
                    .map(|o| o.verdict_of(hashes));
                (stmt, join_opt(verdict, objects.flatten()))
            }
            _ => (stmt, verdict),
        }
    }

    /// What one call adds of the functions and sequences: `None` nothing; otherwise a reason
    /// (`NotSafe::None` for none) and effects: [`Effects::RUNS_CODE`] where user code may run,
    /// with [`Effects::UNSEEN_CODE`] where nothing judged that code read-safe.
    fn resolve_call(&self, call: &Call, catalog: Option<&DbCatalog>) -> (u32, Option<Verdict>) {
        // A function on the write list is never judged read-safe, whatever the catalogue says
        // (for a read the write list already decided its routing; this is its code's verdict):
        // a user function so at its scan, a shadowed built-in here.
        let code = |why: NotSafe, never_safe: bool| {
            if why != NotSafe::None || never_safe {
                Effects::RUNS_CODE | Effects::UNSEEN_CODE
            } else {
                Effects::RUNS_CODE
            }
        };
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
                        Verdict {
                            why,
                            effects: code(why, self.write_functions.contains(name)),
                        }
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
                // RUNS_CODE was set from the text already, and UNSEEN_CODE for a function on
                // the write list.
                let effects = code(why, false).without(Effects::RUNS_CODE);
                (
                    *stmt,
                    (effects != Effects::NONE).then_some(Verdict { why, effects }),
                )
            }
            Call::Attr {
                stmt,
                hash,
                hint,
                never_safe,
            } => {
                let verdict = catalog
                    .and_then(DbCatalog::function_set)
                    .and_then(|f| f.attrs.get(hash))
                    .map(|&safe| {
                        let why = if safe || *hint {
                            NotSafe::None
                        } else {
                            NotSafe::UserFunction
                        };
                        Verdict {
                            why,
                            effects: code(why, *never_safe),
                        }
                    });
                (*stmt, verdict)
            }
            Call::Names { stmt, hashes, hint } => {
                // `/* route=reader */` accepts S-7 answers, as it does for the server-dependent
                // relations; it does not accept the code an object hides.
                let names_sequence = !*hint
                    && catalog
                        .and_then(DbCatalog::sequence_set)
                        .is_some_and(|s| hashes.iter().any(|h| s.hashes.contains(h)));
                (
                    *stmt,
                    names_sequence.then_some(Verdict {
                        why: NotSafe::ServerDependent,
                        effects: Effects::NONE,
                    }),
                )
            }
        }
    }
}

/// What something the database holds adds to a statement that uses it: a reason it is not
/// replica-safe (`NotSafe::None`: none) and effects (S-4, S-5, S-6, P-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    why: NotSafe,
    effects: Effects,
}

impl Verdict {
    const NONE: Verdict = Verdict {
        why: NotSafe::None,
        effects: Effects::NONE,
    };

    /// Both: the first reason, every effect.
    fn join(self, other: Verdict) -> Verdict {
        Verdict {
            why: if self.why == NotSafe::None {
                other.why
            } else {
                self.why
            },
            effects: self.effects | other.effects,
        }
    }

    /// What running the statements of `c` adds to a statement that runs them hidden: their
    /// effects, and the first reason one is not a replica-safe read (a text that is not a read
    /// at all, none, or that the classifier cannot read, is `Unparseable`: never on a replica).
    fn of(c: &Classification) -> Verdict {
        let mut v = Verdict::NONE;
        let mut any = false;
        for s in c.statements() {
            if s.kind == Kind::Empty {
                continue;
            }
            any = true;
            // What a definition's own text names is not what the statement that runs it names.
            let mut effects = s.effects.without(Effects::UNAMBIGUOUS_ONLY);
            let why = match s.kind {
                Kind::Read => NotSafe::None,
                // Session-only calls inside code a statement runs hidden are that statement's
                // write functions: only a statement's own text can show it writes nothing.
                Kind::ReadNotSafe if s.not_safe == NotSafe::SessionFunction => {
                    NotSafe::WriteFunction
                }
                Kind::ReadNotSafe => s.not_safe,
                _ => {
                    // Not a read, or not read at all (a body that may write, one the scan
                    // cannot read): code the engine cannot see into, whatever it does to the
                    // session's state (S-5). Without the mark, a function whose body sets a
                    // placeholder ran on the writer and left no hazard: the session's next read
                    // went to a reader without the setting (an examiner's finding of
                    // 2026-12-07).
                    effects |= Effects::RUNS_CODE | Effects::UNSEEN_CODE;
                    NotSafe::Unparseable
                }
            };
            v = v.join(Verdict { why, effects });
        }
        if !any {
            v.why = NotSafe::Unparseable;
            v.effects |= Effects::RUNS_CODE | Effects::UNSEEN_CODE;
        }
        v
    }
}

fn join_opt(a: Option<Verdict>, b: Option<Verdict>) -> Option<Verdict> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.join(b)),
        (a, b) => a.or(b),
    }
}

/// `c` with every replica-safe read made not replica-safe for `why` (a database-wide reason).
/// With `NotSafe::CatalogChanged`, the code any statement runs was also judged by a report
/// DDL may have outdated ([`Effects::CODE_JUDGED_BEFORE_DDL`]).
pub(crate) fn keep_reads_off_replicas(mut c: Classification, why: NotSafe) -> Classification {
    let mark = |s: &mut super::StatementInfo| {
        s.not_safe_for(why);
        if why == NotSafe::CatalogChanged && s.effects.contains(Effects::RUNS_CODE) {
            s.effects |= Effects::CODE_JUDGED_BEFORE_DDL;
        }
    };
    match &mut c.statements {
        Statements::One(s) => mark(s),
        Statements::Many(v) => {
            let mut owned = v.to_vec();
            owned.iter_mut().for_each(mark);
            *v = Arc::from(owned);
        }
    }
    c
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
    /// Also a built-in that is never read-safe (`never_safe`: `set_config`) called where a user
    /// function of its name may be the one called: that function is code nothing judged safe,
    /// whatever the catalogue reports of it — it stands in for one that changes the session's
    /// state (S-5).
    Attr {
        stmt: u32,
        hash: u64,
        hint: bool,
        never_safe: bool,
    },
    /// The [`short_name_hash`]es of the names a statement mentions — every identifier but the
    /// reserved keywords, wherever it stands (FROM, JOIN, a subquery, a CTE, a column, a type
    /// after `::`), and every operator symbol (sorted, distinct): a read is not replica-safe if
    /// one is a sequence of the database (S-7: a standby holds a sequence WAL-logged ahead of the
    /// primary), and any statement takes the verdict of a reported object it names (S-6: the
    /// code a view, a policy, a domain, a cast or an operator hides). A column or alias that
    /// shares such a name only costs offload. `hint`: under `/* route=reader */`, which accepts
    /// S-7 answers (sequences are not judged) but not hidden code. Not recorded by the
    /// classification entry points that never see a catalogue.
    Names {
        stmt: u32,
        hashes: Box<[u32]>,
        hint: bool,
    },
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
            Call::Attr {
                hash,
                hint,
                never_safe,
                ..
            } => Call::Attr {
                stmt: i,
                hash,
                hint,
                never_safe,
            },
            Call::Names { hashes, hint, .. } => Call::Names {
                stmt: i,
                hashes,
                hint,
            },
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

/// One object of the writer's catalogue whose use runs code the statement's text does not show
/// (S-6, S-5): a view (its query), a table under row-level security (its policies'
/// expressions), a domain with CHECK constraints (their expressions), a user cast (a call of its
/// function, under the source and the target type's names) or a user operator (a call of its
/// function, under its symbol). A statement that names `name` — in any schema, anywhere in its
/// text — is judged as if it also ran `definition`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserObject {
    /// `pg_namespace.nspname`. Recorded for the host's logs; a statement is matched by the name
    /// in any schema.
    pub schema: String,
    /// The name a statement invokes it by, as stored: `pg_class.relname`, `pg_type.typname`,
    /// `pg_operator.oprname`. The built-in types' SQL spellings (`integer` for `int4`, …) are
    /// matched too.
    pub name: String,
    /// SQL the engine classifies as a statement: `pg_get_viewdef`, or `SELECT` with the
    /// expressions (`SELECT (policy_qual), (policy_check)`, `SELECT f(NULL)` for a cast's or
    /// operator's function `f`). A text the classifier cannot take as one read (longer than its
    /// limit, not a query) keeps every statement naming the object off replicas.
    pub definition: String,
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
    #[error("object name {0:?} is empty or longer than 63 bytes")]
    /// An object name is empty or longer than 63 bytes.
    BadObjectName(String),
    #[error("more than {0} objects in one database")]
    /// One database reported more objects than the engine keeps (the limit is given).
    TooManyObjects(usize),
}

/// The user functions of one database, by name.
#[derive(Debug, Default, PartialEq)]
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
#[derive(Debug, Default, PartialEq)]
struct SequenceSet {
    hashes: FxHashSet<u32>,
    sequences: usize,
}

/// The objects of one database that hide code, with their definitions and what naming each adds
/// (by [`short_name_hash`]: a collision only joins two verdicts).
#[derive(Debug, Default, PartialEq)]
struct ObjectSet {
    /// Each object's name hash (one per SQL spelling of a built-in type's name) and definition,
    /// kept to judge again when the database's functions or sequences, or the policy, change.
    defs: Vec<(u32, Arc<str>)>,
    /// What naming each name adds, for the names whose objects add something.
    verdicts: FxHashMap<u32, Verdict>,
}

impl ObjectSet {
    /// What naming `hashes` adds (`None`: no reported object is named).
    fn verdict_of(&self, hashes: &[u32]) -> Option<Verdict> {
        hashes
            .iter()
            .filter_map(|h| self.verdicts.get(h).copied())
            .reduce(Verdict::join)
    }
}

/// What the host reported of one database: its user functions, its sequences and its objects
/// that hide code, each replaced (or forgotten) on its own.
#[derive(Debug, Default, PartialEq)]
pub struct DbCatalog {
    functions: Option<Arc<FunctionSet>>,
    sequences: Option<Arc<SequenceSet>>,
    objects: Option<Arc<ObjectSet>>,
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

    /// Names of reported objects that hide code (with the SQL spellings of built-in types).
    pub fn objects(&self) -> usize {
        self.objects.as_ref().map_or(0, |o| o.defs.len())
    }

    /// What naming `name` adds to a statement, if a reported object has that name (as stored):
    /// whether it keeps a read off replicas and the effects it has. For tests and logs.
    pub fn object_verdict(&self, name: &str) -> Option<(NotSafe, Effects)> {
        self.object_set()?
            .verdict_of(&[short_name_hash(name)])
            .map(|v| (v.why, v.effects))
    }

    fn function_set(&self) -> Option<&FunctionSet> {
        self.functions.as_deref()
    }

    fn object_set(&self) -> Option<&ObjectSet> {
        self.objects.as_deref().filter(|o| !o.verdicts.is_empty())
    }

    fn sequence_set(&self) -> Option<&SequenceSet> {
        self.sequences.as_deref().filter(|s| s.sequences > 0)
    }

    fn shadows_builtins(&self) -> bool {
        self.function_set().is_some_and(|f| f.shadows_builtins)
    }

    /// What the database's code adds to every statement ([`EVERY_STATEMENT`]), if anything.
    fn every_statement(&self) -> Option<Verdict> {
        self.object_set()?
            .verdicts
            .get(&short_name_hash(EVERY_STATEMENT))
            .copied()
    }

    /// Whether the names a statement mentions must be looked up.
    fn has_names(&self) -> bool {
        self.sequence_set().is_some() || self.object_set().is_some()
    }
}

/// The object name under which the host reports code the database may run for any statement,
/// whatever the statement names (S-7, S-5, S-6): a user cast between two built-in types that
/// the server applies unasked from a type whose values a statement makes without naming
/// anything — a literal (`1`, `1.5`, `'x'` resolved to text, `true`), a keyword
/// (`CURRENT_DATE`, `CURRENT_USER`). Every statement of the database takes its verdict: no
/// name of a statement spells it (it is no identifier or operator), so only this matches.
pub(crate) const EVERY_STATEMENT: &str = "polarsplit: every statement";

/// Bounds of what the host may report (every buffer bounded).
pub const MAX_FUNCTIONS_PER_DATABASE: usize = 1 << 20;
pub const MAX_SEQUENCES_PER_DATABASE: usize = 1 << 20;
pub const MAX_OBJECTS_PER_DATABASE: usize = 1 << 16;
pub const MAX_DATABASES: usize = 1 << 16;

/// Rounds of the objects' fixed point (a view over a view over …): an object whose verdict still
/// grows after them is judged not replica-safe and running code.
const MAX_OBJECT_ROUNDS: usize = 16;

/// The SQL spellings of built-in type names (`pg_type.typname`, as a cast reports it) that a
/// statement may write instead (`::integer` is a cast to `int4`). Multi-word spellings
/// (`double precision`, `character varying`) are recorded by each word.
fn type_aliases(typname: &str) -> &'static [&'static str] {
    match typname {
        "int2" => &["smallint"],
        "int4" => &["int", "integer"],
        "int8" => &["bigint"],
        "float4" => &["real", "float"],
        "float8" => &["double", "float"],
        "bool" => &["boolean"],
        "numeric" => &["decimal", "dec"],
        "bpchar" => &["char", "character", "nchar"],
        "varchar" => &["varchar", "character", "char", "varying", "nchar"],
        "varbit" => &["bit", "varying"],
        "timestamptz" | "timestamp" => &["timestamp"],
        "timetz" | "time" => &["time"],
        _ => &[],
    }
}

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
    /// Reported databases with a sequence or an object that hides code: while 0, the names a
    /// statement mentions are not looked up.
    named: AtomicUsize,
    /// Reported databases with code run for every statement ([`EVERY_STATEMENT`]): while 0, a
    /// statement that calls and names nothing is not looked up.
    everywhere: AtomicUsize,
    /// The policy objects' definitions are classified under (the engine's, see
    /// [`FunctionCatalogs::set_policy`]; the default one until then).
    policy: RwLock<Option<(FunctionPolicy, Limits)>>,
    /// DDL sessions ran per reported database, against the host's loads.
    changes: parking_lot::Mutex<BTreeMap<Box<[u8]>, Changes>>,
    /// Counts every change of what a classification is finished against — a report, DDL seen,
    /// the end of a catalogue's staleness, a new policy — in any database: verdicts kept from
    /// before (a session's queued messages') are finished again, and statements on pooled
    /// readers prepared again, once it moved ([`Self::generation`]).
    generation: AtomicU64,
    /// Counts the DDL after which a server's kept parse of a prepared statement may resolve
    /// its names otherwise than a fresh one ([`Self::names_epoch`], E-2).
    names_epoch: AtomicU64,
    /// Databases whose catalogue a session's DDL may have made stale: while 0, no statement
    /// looks its database up for that.
    stale: AtomicUsize,
}

/// The DDL of one database against the host's loads of its catalogue.
#[derive(Clone, Copy, Debug, Default)]
struct Changes {
    /// DDL statements seen (the epoch a load must start at or after to cover them).
    epoch: u64,
    /// The epoch when the host's load in progress started, if it said so.
    load_started: Option<u64>,
    /// DDL ran since the last report a load covered: reads stay on the writer.
    stale: bool,
}

impl FunctionCatalogs {
    pub fn new() -> FunctionCatalogs {
        FunctionCatalogs::default()
    }

    /// A session ran DDL in `database` (S-6, S-7, F-policy: a new view, a function shadowing a
    /// built-in, a sequence may be missing from the reported catalogue): until the host reports
    /// its function catalogue from a load that started after this, no read of the database is
    /// replica-safe ([`NotSafe::CatalogChanged`]). Nothing for a database without a report (its
    /// first load is the host's to make).
    pub fn mark_changed(&self, database: &[u8]) {
        if !self.dbs.read().contains_key(database) {
            return;
        }
        let mut changes = self.changes.lock();
        let c = changes.entry(Box::from(database)).or_default();
        c.epoch += 1;
        if !c.stale {
            c.stale = true;
            self.stale.fetch_add(1, Ordering::AcqRel);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// E-2: DDL that may make a name resolve otherwise ran — through a session of this engine
    /// (not one that only creates temporary objects: those are its own session's, whose reads
    /// stay on the writer; not a statement the engine could not read, which marks the
    /// catalogue changed but would otherwise move this for every unreadable statement), through
    /// another engine (the host said so), or directly on the primary (a catalogue report
    /// differs from the last of its kind, while no DDL seen through the engine awaited it).
    pub fn names_moved(&self) {
        self.names_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// E-2: how many times [`Self::names_moved`] (any database). A server keeps a prepared
    /// statement's resolution of the names it read — a table created since earlier on the
    /// `search_path`, a closer overload, does not make it look again — so a statement the
    /// writer parsed in an earlier epoch runs where its parse is.
    pub fn names_epoch(&self) -> u64 {
        self.names_epoch.load(Ordering::Acquire)
    }

    /// How many times what classifications are finished against changed (any database): what
    /// was judged or prepared before it moved is judged or prepared again, so DDL and a new
    /// report reach it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The host starts a load of `database`'s catalogue: its report ends the staleness of DDL
    /// seen before now, not of DDL seen while it runs.
    pub fn load_started(&self, database: &[u8]) {
        let mut changes = self.changes.lock();
        if let Some(c) = changes.get_mut(database) {
            c.load_started = Some(c.epoch);
        }
    }

    /// Whether a session's DDL may have made the catalogue of `database` stale (one atomic load
    /// while no database's is).
    pub fn is_changed(&self, database: &[u8]) -> bool {
        self.stale.load(Ordering::Acquire) > 0
            && self.changes.lock().get(database).is_some_and(|c| c.stale)
    }

    /// The function catalogue of `database` was reported: the last piece of a load (hosts report
    /// sequences and objects first), so DDL the load covers no longer keeps reads off replicas.
    fn load_reported(&self, database: &[u8]) {
        let mut changes = self.changes.lock();
        if let Some(c) = changes.get_mut(database) {
            // A host that does not say when its loads start: its report is taken as covering.
            if c.stale && c.load_started.is_none_or(|e| e == c.epoch) {
                c.stale = false;
                self.stale.fetch_sub(1, Ordering::AcqRel);
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            c.load_started = None;
        }
    }

    /// Replaces the catalogue of user functions of `database` with `functions` (all of them: a
    /// name missing from the report is unknown afterwards); its sequences and objects are kept.
    /// Returns how many functions were recorded.
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
            ..old.map(DbCatalog::shallow).unwrap_or_default()
        })?;
        self.load_reported(database);
        Ok(n)
    }

    /// Replaces the sequences of `database` with `sequences` (all of them: a name missing from the
    /// report is not a sequence afterwards); its functions and objects are kept. Returns how many
    /// sequences were recorded.
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
            sequences,
            ..old.map(DbCatalog::shallow).unwrap_or_default()
        })?;
        Ok(n)
    }

    /// Replaces the objects of `database` that hide code with `objects` (all of them: a name
    /// missing from the report hides nothing afterwards); its functions and sequences are kept.
    /// Each definition is classified here, under the engine's policy; returns how many objects
    /// were recorded.
    pub fn set_objects(
        &self,
        database: &[u8],
        objects: impl IntoIterator<Item = UserObject>,
    ) -> Result<usize, CatalogError> {
        let mut set = ObjectSet::default();
        let mut n = 0;
        for o in objects {
            if o.name.is_empty() || o.name.len() > MAX_NAME {
                return Err(CatalogError::BadObjectName(o.name));
            }
            if n == MAX_OBJECTS_PER_DATABASE {
                return Err(CatalogError::TooManyObjects(MAX_OBJECTS_PER_DATABASE));
            }
            n += 1;
            let text: Arc<str> = Arc::from(o.definition);
            for alias in type_aliases(&o.name) {
                set.defs.push((short_name_hash(alias), text.clone()));
            }
            set.defs.push((short_name_hash(&o.name), text));
        }
        let objects = Some(Arc::new(set));
        self.replace(database, |old| DbCatalog {
            objects,
            ..old.map(DbCatalog::shallow).unwrap_or_default()
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
                ..old.map(DbCatalog::shallow).unwrap_or_default()
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
                sequences: None,
                ..old.map(DbCatalog::shallow).unwrap_or_default()
            }
        });
        had
    }

    /// Forgets the objects of `database` that hide code (the code is not seen again). Whether it
    /// had some reported.
    pub fn remove_objects(&self, database: &[u8]) -> bool {
        let mut had = false;
        let _ = self.replace(database, |old| {
            had = old.is_some_and(|o| o.objects.is_some());
            DbCatalog {
                objects: None,
                ..old.map(DbCatalog::shallow).unwrap_or_default()
            }
        });
        had
    }

    /// The policy the objects' definitions are classified under: the engine sets its own each
    /// time it builds a classifier (configuration, the writer's version). Every database's
    /// objects are judged again under it.
    pub fn set_policy(&self, policy: FunctionPolicy, limits: Limits) {
        *self.policy.write() = Some((policy, limits));
        let dbs: Vec<Box<[u8]>> = self
            .dbs
            .read()
            .iter()
            .filter(|(_, c)| c.objects.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for db in dbs {
            let _ = self.replace(&db, |old| old.map(DbCatalog::shallow).unwrap_or_default());
        }
    }

    fn policy_rules(&self) -> (FunctionPolicy, Limits) {
        self.policy
            .read()
            .clone()
            .unwrap_or_else(|| (FunctionPolicy::default(), Limits::DEFAULT))
    }

    /// Replaces the entry of `database` with what `make` builds from the old one, under the
    /// write lock, its objects judged against what else it holds; an entry with nothing
    /// reported is removed.
    fn replace(
        &self,
        database: &[u8],
        make: impl FnOnce(Option<&DbCatalog>) -> DbCatalog,
    ) -> Result<(), CatalogError> {
        let (policy, limits) = self.policy_rules();
        // DDL seen through the engine awaits this report: a difference is that DDL's, already
        // counted (E-2, `names_epoch`). (Taken before the write lock: never both held.)
        let awaited = self.changes.lock().get(database).is_some_and(|c| c.stale);
        let mut dbs = self.dbs.write();
        let mut new = make(dbs.get(database).map(|a| &**a));
        let keep = new.functions.is_some() || new.sequences.is_some() || new.objects.is_some();
        if keep && !dbs.contains_key(database) && dbs.len() >= MAX_DATABASES {
            return Err(CatalogError::TooManyDatabases(MAX_DATABASES));
        }
        new.judge_objects(&policy, &limits);
        let (shadows, named, every) = (
            new.shadows_builtins(),
            new.has_names(),
            new.every_statement().is_some(),
        );
        // A host reloads every catalogue on a timer: a report like the last changes no verdict.
        let same = keep && dbs.get(database).is_some_and(|o| **o == new);
        // A report that differs from the last of its kind shows DDL (a first report does not).
        let moved = !awaited
            && dbs.get(database).is_some_and(|o| {
                (o.functions.is_some() && o.functions != new.functions)
                    || (o.sequences.is_some() && o.sequences != new.sequences)
                    || (o.objects.is_some() && o.objects != new.objects)
            });
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
        count(&self.named, old.is_some_and(DbCatalog::has_names), named);
        count(
            &self.everywhere,
            old.is_some_and(|o| o.every_statement().is_some()),
            every,
        );
        if !same {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        if moved {
            self.names_moved();
        }
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
        if self.everywhere.load(Ordering::Acquire) > 0 {
            return true;
        }
        match &c.calls {
            None => false,
            Some(calls) => {
                let shadowing = self.shadowing.load(Ordering::Acquire) > 0;
                let named = self.named.load(Ordering::Acquire) > 0;
                calls.iter().any(|c| match c {
                    Call::Builtin { .. } => shadowing,
                    Call::Names { .. } => named,
                    Call::User { .. } | Call::Attr { .. } => true,
                })
            }
        }
    }
}

impl DbCatalog {
    /// The same reports, shared (for a replacement of one of them).
    fn shallow(&self) -> DbCatalog {
        DbCatalog {
            functions: self.functions.clone(),
            sequences: self.sequences.clone(),
            objects: self.objects.clone(),
        }
    }

    /// Judges the objects' definitions against the functions and sequences of this catalogue and
    /// against each other, to a fixed point (verdicts only grow, so it ends; after
    /// [`MAX_OBJECT_ROUNDS`] what still grows is judged the worst). Classifies every definition:
    /// the cost of a report, under the catalogues' write lock, never of a statement.
    fn judge_objects(&mut self, policy: &FunctionPolicy, limits: &Limits) {
        let Some(objects) = self.objects.take() else {
            return;
        };
        let rules = Rules {
            record_names: true,
            ..policy.rules()
        };
        let classified: Vec<(u32, Classification)> = objects
            .defs
            .iter()
            .map(|(h, text)| (*h, super::statement::classify_str(text, rules, limits)))
            .collect();
        let mut verdicts: FxHashMap<u32, Verdict> = FxHashMap::default();
        let mut settled = false;
        for _ in 0..MAX_OBJECT_ROUNDS {
            let view = DbCatalog {
                functions: self.functions.clone(),
                sequences: self.sequences.clone(),
                objects: Some(Arc::new(ObjectSet {
                    defs: Vec::new(),
                    verdicts: verdicts.clone(),
                })),
            };
            let mut next: FxHashMap<u32, Verdict> = FxHashMap::default();
            for (h, c) in &classified {
                let v = Verdict::of(&rules.finish(c.clone(), Some(&view)));
                if v != Verdict::NONE || verdicts.contains_key(h) {
                    next.entry(*h).and_modify(|w| *w = w.join(v)).or_insert(v);
                }
            }
            if next == verdicts {
                settled = true;
                break;
            }
            verdicts = next;
        }
        if !settled {
            // Every object: one not judged yet may be the next link of the chain.
            let worst = Verdict {
                why: NotSafe::TooComplex,
                effects: Effects(Effects::RUNS_CODE.0 | Effects::UNSEEN_CODE.0),
            };
            for (h, _) in &classified {
                let v = verdicts.entry(*h).or_insert(worst);
                *v = v.join(worst);
            }
        }
        verdicts.retain(|_, v| *v != Verdict::NONE);
        self.objects = Some(Arc::new(ObjectSet {
            defs: objects.defs.clone(),
            verdicts,
        }));
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

    /// The names as a call to finish per database (`None`: no name); `hint`: the statement has
    /// a `/* route=reader */` hint.
    pub(crate) fn into_call(self, hint: bool) -> Option<Call> {
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
            hint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(definition: &str) -> UserObject {
        UserObject {
            schema: "pg_catalog".into(),
            name: EVERY_STATEMENT.into(),
            definition: definition.into(),
        }
    }

    /// S-7: code a database runs for every statement (a user cast from a literal's type) is
    /// looked up for a statement that calls and names nothing, and only while a database has
    /// some.
    #[test]
    fn s7_code_for_every_statement_is_looked_up_only_while_reported() {
        let cats = FunctionCatalogs::new();
        let write = WriteFunctions::defaults();
        let rules = Rules::with_write(&write);
        let bare = super::super::statement::classify_str("SELECT 1", rules, &Limits::DEFAULT);
        assert!(!cats.needed_for(&bare));
        cats.set_objects(b"db", [every("SELECT pg_is_in_recovery()")])
            .unwrap();
        assert!(cats.needed_for(&bare));
        let c = FunctionPolicy::default().finish(bare.clone(), cats.get(b"db").as_deref());
        assert_eq!(c.first().not_safe, NotSafe::ServerDependent);
        assert!(cats.remove_objects(b"db"));
        assert!(!cats.needed_for(&bare));
    }
}
