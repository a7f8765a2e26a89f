//! The vocabulary of classification: what a statement is, why it is not replica-safe, and what it
//! does to session state. Results are small, cheap to clone, and hold no borrowed text: positions
//! inside the classified string are [`Span`]s, so a cached result serves every identical string.

use std::sync::Arc;

/// A byte range of the classified SQL text (always on UTF-8 character boundaries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const EMPTY: Span = Span { start: 0, end: 0 };

    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The text this span covers in `sql` (the string that was classified), or `""` when the span
    /// does not fit it.
    pub fn of<'a>(&self, sql: &'a str) -> &'a str {
        sql.get(self.start as usize..self.end as usize)
            .unwrap_or("")
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Transaction isolation levels (SPEC S-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// READ UNCOMMITTED, which PostgreSQL runs as READ COMMITTED.
    ReadUncommitted,
    /// READ COMMITTED: each statement sees what was committed before it began.
    ReadCommitted,
    /// REPEATABLE READ: the transaction keeps the snapshot of its first statement.
    RepeatableRead,
    /// SERIALIZABLE (refused by a hot standby).
    Serializable,
}

impl Isolation {
    /// PostgreSQL runs READ UNCOMMITTED as READ COMMITTED.
    pub fn effective(self) -> Isolation {
        match self {
            Isolation::ReadUncommitted => Isolation::ReadCommitted,
            other => other,
        }
    }

    /// Parses the words PostgreSQL accepts (`read committed`, `'repeatable read'`, any case and
    /// spacing, with or without quotes).
    pub fn parse(text: &str) -> Option<Isolation> {
        let t = text.trim().trim_matches(|c| c == '\'' || c == '"');
        let mut words = t.split_ascii_whitespace();
        let a = words.next()?.to_ascii_lowercase();
        let b = words.next().map(|w| w.to_ascii_lowercase());
        if words.next().is_some() {
            return None;
        }
        match (a.as_str(), b.as_deref()) {
            ("read", Some("uncommitted")) => Some(Isolation::ReadUncommitted),
            ("read", Some("committed")) => Some(Isolation::ReadCommitted),
            ("repeatable", Some("read")) => Some(Isolation::RepeatableRead),
            ("serializable", None) => Some(Isolation::Serializable),
            _ => None,
        }
    }
}

/// Transaction access mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

/// Options of BEGIN / START TRANSACTION / SET TRANSACTION / SET SESSION CHARACTERISTICS.
/// `None` means "not given" (the session or server default applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxnOptions {
    pub isolation: Option<Isolation>,
    pub access: Option<Access>,
    pub deferrable: Option<bool>,
}

/// Session settings the engine recognises and tracks (SPEC S-4). Anything else set at session
/// level is [`Var::Other`], a session hazard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Var {
    SearchPath,
    TimeZone,
    DateStyle,
    IntervalStyle,
    ClientEncoding,
    ApplicationName,
    StatementTimeout,
    LockTimeout,
    IdleInTransactionSessionTimeout,
    ExtraFloatDigits,
    ByteaOutput,
    StandardConformingStrings,
    Role,
    SessionAuthorization,
    /// `default_transaction_isolation` (feeds S-3's session default isolation).
    DefaultTransactionIsolation,
    DefaultTransactionReadOnly,
    DefaultTransactionDeferrable,
    /// `transaction_isolation` (as SET TRANSACTION ISOLATION LEVEL when inside a transaction).
    TransactionIsolation,
    TransactionReadOnly,
    /// Any `polar_*` setting a client sets itself. Never replayed on readers; see SPEC P-5.
    Polar,
    /// A dotted name (`app.tenant`, an extension's `pg_trgm.similarity_threshold`): a
    /// placeholder or an extension's setting, which the capture asks for by name (S-5) and which
    /// no parse of a statement text reads (E-2), as `set_config` of such a name counts.
    Placeholder,
    /// Not recognised: a session hazard when set at session level.
    Other,
}

impl Var {
    /// Recognises a setting by its (case-insensitive, unquoted) name.
    pub fn from_name(name: &str) -> Var {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "search_path" => Var::SearchPath,
            "timezone" | "time zone" => Var::TimeZone,
            "datestyle" => Var::DateStyle,
            "intervalstyle" => Var::IntervalStyle,
            "client_encoding" | "names" => Var::ClientEncoding,
            "application_name" => Var::ApplicationName,
            "statement_timeout" => Var::StatementTimeout,
            "lock_timeout" => Var::LockTimeout,
            "idle_in_transaction_session_timeout" => Var::IdleInTransactionSessionTimeout,
            "extra_float_digits" => Var::ExtraFloatDigits,
            "bytea_output" => Var::ByteaOutput,
            "standard_conforming_strings" => Var::StandardConformingStrings,
            "role" => Var::Role,
            "session_authorization" | "session authorization" => Var::SessionAuthorization,
            "default_transaction_isolation" => Var::DefaultTransactionIsolation,
            "default_transaction_read_only" => Var::DefaultTransactionReadOnly,
            "default_transaction_deferrable" => Var::DefaultTransactionDeferrable,
            "transaction_isolation" => Var::TransactionIsolation,
            "transaction_read_only" => Var::TransactionReadOnly,
            l if l.starts_with("polar_") || l.starts_with("_polar_") => Var::Polar,
            l if l.contains('.') => Var::Placeholder,
            _ => Var::Other,
        }
    }

    /// Whether a setting leaves the parse of a statement text as it was (E-2): a server
    /// re-parses a prepared statement itself when `search_path` changed, and the others only
    /// decide how results are written, which limits apply, or who runs it (checked at
    /// execution). Every other setting — `standard_conforming_strings`, `TimeZone`, `DateStyle`,
    /// `IntervalStyle`, `client_encoding`, and any the engine does not know
    /// (`transform_null_equals`, `array_nulls`, `timezone_abbreviations`, …) — may decide what
    /// the parse of a literal or an expression is.
    pub fn leaves_parse_alone(self) -> bool {
        matches!(
            self,
            Var::SearchPath
                | Var::ApplicationName
                | Var::StatementTimeout
                | Var::LockTimeout
                | Var::IdleInTransactionSessionTimeout
                | Var::ExtraFloatDigits
                | Var::ByteaOutput
                | Var::Role
                | Var::SessionAuthorization
                | Var::DefaultTransactionIsolation
                | Var::DefaultTransactionReadOnly
                | Var::DefaultTransactionDeferrable
                | Var::TransactionIsolation
                | Var::TransactionReadOnly
                | Var::Polar
                | Var::Placeholder
        )
    }

    /// Whether a session-level SET of this variable is tracked (replayable on readers) rather
    /// than a hazard.
    pub fn is_tracked(self) -> bool {
        !matches!(self, Var::Other | Var::Polar | Var::Placeholder)
    }
}

/// The name of a cursor or a notification channel as the server reads it (unquoted names folded
/// to lower case, quoted ones kept, `U&"…"` decoded, cut to 63 bytes), as a 64-bit digest keyed
/// per process: what the S-4 hazards that end (open `WITH HOLD` cursors, channels listened) are
/// made of. A digest rather than the text, so a classification stays small and holds no text and
/// an extended-protocol Execute, whose statement text is gone by the time its effects apply,
/// still names its cursor or channel. [`NameKey::UNREADABLE`]: a name the classifier could not
/// read as the server would (the server refuses it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NameKey([u32; 2]);

impl NameKey {
    pub const UNREADABLE: NameKey = NameKey([0, 0]);

    /// The key of a name as the server reads it (already normalised).
    pub fn of(name: &[u8]) -> NameKey {
        let h = crate::pool::KeyedHash::new()
            .bytes(b"S-4 name")
            .field(name)
            .finish();
        // Never the unreadable key.
        let h = if h == 0 { 1 } else { h };
        NameKey([(h >> 32) as u32, h as u32])
    }

    pub fn is_readable(self) -> bool {
        self != NameKey::UNREADABLE
    }

    /// As one number (non-zero when readable).
    pub fn get(self) -> u64 {
        (u64::from(self.0[0]) << 32) | u64::from(self.0[1])
    }
}

/// What `DISCARD` discards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiscardWhat {
    All,
    Temp,
    Plans,
    Sequences,
}

/// What a statement is, as far as routing and session tracking care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// SELECT / VALUES / TABLE, or EXPLAIN without ANALYZE of one, containing nothing of SPEC §7's
    /// list. Whether it is replica-safe also depends on `not_safe` being `None`.
    Read,
    /// A SELECT-like query that is **not** replica-safe (see `not_safe`: locking clause,
    /// data-modifying CTE, SELECT INTO, write-list function, EXPLAIN ANALYZE …).
    ReadNotSafe,
    /// SHOW.
    Show,
    /// BEGIN / START TRANSACTION with its options.
    Begin(TxnOptions),
    /// COMMIT / END (also COMMIT AND CHAIN: `chain`).
    Commit {
        chain: bool,
    },
    /// ROLLBACK / ABORT (not ROLLBACK TO SAVEPOINT).
    Rollback {
        chain: bool,
    },
    Savepoint,
    ReleaseSavepoint,
    RollbackToSavepoint,
    /// SET TRANSACTION … (inside a transaction).
    SetTransaction(TxnOptions),
    /// SET SESSION CHARACTERISTICS AS TRANSACTION …
    SetSessionCharacteristics(TxnOptions),
    /// SET [SESSION | LOCAL] name { = | TO } value, SET TIME ZONE, SET ROLE, SET SESSION
    /// AUTHORIZATION, SET NAMES. `name` and `value` point into the text (value as written, quotes
    /// included); `local` is true for SET LOCAL.
    Set {
        var: Var,
        name: Span,
        value: Span,
        local: bool,
    },
    /// RESET name.
    Reset {
        var: Var,
        name: Span,
    },
    /// RESET ALL.
    ResetAll,
    Discard(DiscardWhat),
    /// LISTEN channel.
    Listen {
        channel: NameKey,
    },
    /// UNLISTEN channel / UNLISTEN * (`all`, `channel` unreadable).
    Unlisten {
        all: bool,
        channel: NameKey,
    },
    /// DECLARE name … CURSOR [WITH HOLD].
    DeclareCursor {
        with_hold: bool,
        cursor: NameKey,
    },
    /// FETCH / MOVE.
    Fetch,
    /// CLOSE name / CLOSE ALL (`all`, `cursor` unreadable).
    Close {
        all: bool,
        cursor: NameKey,
    },
    /// SQL-level PREPARE.
    Prepare,
    /// SQL-level EXECUTE.
    Execute,
    /// DEALLOCATE name / DEALLOCATE ALL.
    Deallocate {
        all: bool,
    },
    /// LOCK TABLE.
    Lock,
    /// COPY (either direction).
    Copy,
    /// DML, DDL, CALL, DO, VACUUM, NOTIFY, CHECKPOINT, PREPARE TRANSACTION … anything that may
    /// write or changes state the engine does not model.
    Write,
    /// Only whitespace and comments.
    Empty,
    /// The classifier could not understand it. Never replica-safe.
    Unknown,
}

/// Why a statement is not replica-safe. `None` only for a replica-safe read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NotSafe {
    None,
    /// Not a SELECT/VALUES/TABLE/EXPLAIN at all.
    NotARead,
    LockingClause,
    DataModifyingCte,
    SelectInto,
    WriteFunction,
    ExplainAnalyze,
    /// Could not be parsed or lexed (unterminated quote, …).
    Unparseable,
    /// Exceeded a classifier limit (length, nesting, token count).
    TooComplex,
    /// Calls a function or names a relation whose answer depends on the server that answers
    /// (SPEC S-7).
    ServerDependent,
    /// Calls a volatile built-in that is not on the reviewed read-safe list (F-policy).
    VolatileFunction,
    /// Calls a function the engine knows nothing of: not built-in, not in the database's
    /// reported catalogue, not configured (F-policy, `unknown_functions = primary`).
    UnknownFunction,
    /// Calls a name under which the database's reported catalogue has a function that is not
    /// read-safe (volatile), possibly shadowing a built-in (F-policy).
    UserFunction,
    /// A session ran DDL in the database since the host last reported its catalogue: the
    /// catalogue may be stale (a new view, a function shadowing a built-in, a sequence).
    CatalogChanged,
    /// A prepared statement with a literal the server reads as the clock when it parses the
    /// statement (`'now'::timestamptz`, `'today'`): the statement holds the time of the
    /// client's own Parse, which only the writer's parse has (E-2).
    ClockLiteral,
    /// A SELECT of nothing but calls of [`crate::classify::builtins::SESSION_ONLY`] built-ins with
    /// constant arguments (`SELECT set_config('app.tenant', $1, false)`, asyncpg's `SELECT
    /// pg_advisory_unlock_all()`): the writer's alone, as any call on the write list (reported
    /// as `WRITE_FUNCTION`), but it writes nothing and reads no data, so it is no write of SPEC
    /// P-6 — no position is probed behind it. Given by the statement's own text only; any reason
    /// found later (the catalogue, an ambiguous lexing, user-typed parameters) replaces it
    /// ([`StatementInfo::not_safe_for`]), and code that runs it hidden is a write function.
    SessionFunction,
}

/// Side effects on session state the engine tracks (SPEC S-3, S-4), as bit flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Effects(pub u32);

impl Effects {
    pub const NONE: Effects = Effects(0);
    /// Calls `set_config(…)` (any third argument: the engine treats it as a SET inside a
    /// transaction, S-3, and as a hazard outside one).
    pub const CALLS_SET_CONFIG: Effects = Effects(1 << 0);
    /// Takes a session-level advisory lock (`pg_advisory_lock`, `…_shared`, `pg_try_advisory_lock…`).
    pub const ADVISORY_LOCK: Effects = Effects(1 << 1);
    /// Takes a transaction-level advisory lock (`pg_advisory_xact_lock…`).
    pub const ADVISORY_XACT_LOCK: Effects = Effects(1 << 2);
    /// `pg_advisory_unlock_all()`.
    pub const ADVISORY_UNLOCK_ALL: Effects = Effects(1 << 3);
    /// Creates a temporary object (CREATE TEMP/TEMPORARY TABLE/VIEW/SEQUENCE, SELECT INTO TEMP,
    /// CREATE TABLE pg_temp.…).
    pub const CREATES_TEMP: Effects = Effects(1 << 4);
    /// Runs code other than the built-ins (DO, CALL, and — with the F-policy — any function
    /// that is not a built-in, or that a reported user function of the database may answer to;
    /// EXECUTE of a prepared statement; SQL text a built-in runs, `query_to_xml`): even code
    /// judged read-safe may change session state (S-6: a reader that ran it is state-checked or
    /// reset before another session gets it). Whether nothing judged it, so that a capture
    /// follows it on the writer and it is a hazard for the session (S-5, S-4), is
    /// [`Effects::UNSEEN_CODE`].
    pub const RUNS_CODE: Effects = Effects(1 << 5);
    /// Reads a value of the client's transaction (P-5, S-7): its start time (`now()`,
    /// `transaction_timestamp()`, `CURRENT_TIMESTAMP`/`CURRENT_DATE`/`CURRENT_TIME`,
    /// `LOCALTIME[STAMP]`, a literal that may be the date/time input `now`, `today`, `tomorrow`
    /// or `yesterday`, see [`may_spell_txn_time`](super::lexer::may_spell_txn_time)) or its
    /// characteristics (`current_setting` of `transaction_isolation` or
    /// `transaction_deferrable`). Outside a transaction block a reader's own transaction has the
    /// same values; inside one only the writer's transaction has them, so such a read is not split.
    pub const TXN_VALUE: Effects = Effects(1 << 6);
    /// Calls `setseed(…)`: the session's random sequence is then the writer's alone (a reader's
    /// `random()` is unseeded, and `DISCARD ALL` does not reset the seed), so the session's reads
    /// stay on the writer (S-5, S-4).
    pub const SEEDS_RANDOM: Effects = Effects(1 << 7);
    /// `LOAD`: a library loaded into the writer's backend acts on every later statement there
    /// (its hooks: `auto_explain`'s notices), and no reader has it; nothing unloads it, `DISCARD
    /// ALL` included — the session's reads stay on the writer (S-4, S-5).
    pub const LOADS_LIBRARY: Effects = Effects(1 << 15);
    /// DDL that may change what the host's catalogues report (CREATE, ALTER or DROP of anything
    /// but an index, a role, a database or a tablespace; CREATE INDEX with a predicate or an
    /// expression; every DO block): until the host reports the database's catalogue again, no
    /// read of it is judged by a stale one (S-6, S-7, F-policy).
    pub const CHANGES_CATALOG: Effects = Effects(1 << 8);
    /// `PREPARE TRANSACTION`: the session's transaction commits when any session runs `COMMIT
    /// PREPARED`, at a time and position the session never learns (S-1a): its reads stay on the
    /// writer from then on.
    pub const PREPARES_TXN: Effects = Effects(1 << 9);
    /// With [`Effects::CALLS_SET_CONFIG`]: every `set_config` call of the statement's own text
    /// names its setting as a literal the capture follows (S-5) — the statement changes the
    /// session's state as a SET of those names would, and no code the engine cannot see does.
    /// Never from a definition the statement runs (a view's, a function's body).
    pub const SETS_CONFIG_BY_NAME: Effects = Effects(1 << 10);
    /// With [`Effects::SETS_CONFIG_BY_NAME`]: one of those names is a placeholder (`app.tenant`),
    /// which the capture asks for by name: the session notes the names from the text
    /// ([`set_config_names`](super::set_config_names)) before the statement is sent.
    pub const SETS_PLACEHOLDER_BY_NAME: Effects = Effects(1 << 11);
    /// With [`Effects::SETS_CONFIG_BY_NAME`]: one of those names is a built-in setting that may
    /// change how a statement text parses ([`Var::leaves_parse_alone`], E-2). A placeholder
    /// changes no parse.
    pub const SETS_PARSE_SETTING_BY_NAME: Effects = Effects(1 << 12);
    /// With [`Effects::RUNS_CODE`]: some of that code nothing judged read-safe — DO, CALL,
    /// EXECUTE, SQL text a built-in runs, a function on the `write_functions` list, or one that
    /// neither the database's reported catalogue, the `read_functions` list, a hint nor
    /// `unknown_functions = replica` makes read-safe (F-policy). It may change the session's
    /// state in ways no text shows (S-5). Kept apart from the routing reason, which a write or a
    /// read kept off readers for another reason records first (found running SQLAlchemy's suite,
    /// 2026-12-06: an `UPDATE … SET x = replace(x, …)` in a database with `citext`, whose
    /// `replace` the catalogue reports immutable, counted as code the engine could not see into and
    /// kept every later read of the session on the primary).
    pub const UNSEEN_CODE: Effects = Effects(1 << 13);
    /// With [`Effects::RUNS_CODE`]: the report that judged that code is older than DDL a session
    /// ran in the database since (F-policy, `CATALOG_CHANGED`): the code may have been replaced.
    pub const CODE_JUDGED_BEFORE_DDL: Effects = Effects(1 << 14);
    /// With [`Effects::CHANGES_CATALOG`]: the DDL makes no name a statement resolves resolve
    /// otherwise (an index: E-2's epoch of names does not move), though what the catalogue
    /// reports of a table does change (the functions of its indexes' predicates and
    /// expressions).
    pub const KEEPS_NAMES: Effects = Effects(1 << 16);
    /// A string literal that may be a date/time input the server reads as the clock while it
    /// parses the statement (`'now'`, `'today'`, `'tomorrow'`, `'yesterday'`, see
    /// [`may_spell_txn_time`](super::lexer::may_spell_txn_time)): with
    /// [`Effects::TXN_VALUE`]. A prepared statement keeps the value of its parse — the time of
    /// the client's Parse on the primary alone; a reader's statement of the same text would
    /// hold the time of another parse, another client's too (E-2,
    /// [`Classification::as_prepared`]).
    pub const CLOCK_LITERAL: Effects = Effects(1 << 17);

    /// What only a text read one way is believed to do: a lock release, settings named in it.
    pub const UNAMBIGUOUS_ONLY: Effects = Effects(
        Effects::ADVISORY_UNLOCK_ALL.0
            | Effects::SETS_CONFIG_BY_NAME.0
            | Effects::SETS_PLACEHOLDER_BY_NAME.0
            | Effects::SETS_PARSE_SETTING_BY_NAME.0,
    );

    pub fn contains(self, other: Effects) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// These effects without `other`'s.
    pub fn without(self, other: Effects) -> Effects {
        Effects(self.0 & !other.0)
    }
}

impl std::ops::BitOr for Effects {
    type Output = Effects;
    fn bitor(self, rhs: Effects) -> Effects {
        Effects(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Effects {
    fn bitor_assign(&mut self, rhs: Effects) {
        self.0 |= rhs.0;
    }
}

/// One statement of a Query string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatementInfo {
    pub kind: Kind,
    pub not_safe: NotSafe,
    pub effects: Effects,
    /// The statement's text inside the classified string (without the terminating `;`).
    pub span: Span,
}

impl StatementInfo {
    pub fn unknown(why: NotSafe) -> StatementInfo {
        StatementInfo {
            kind: Kind::Unknown,
            not_safe: why,
            effects: Effects::NONE,
            span: Span::EMPTY,
        }
    }

    /// A replica-safe read (SPEC §7) on its own.
    pub fn is_replica_safe(&self) -> bool {
        self.kind == Kind::Read && self.not_safe == NotSafe::None
    }

    /// A reason the statement is not replica-safe, found after its text was scanned (the
    /// database's catalogue, a second lexing, the types of a Parse's parameters): a replica-safe
    /// read is so no longer, and a statement of session-only calls is no longer known to be only
    /// that. Any other reason already given stands.
    pub(crate) fn not_safe_for(&mut self, why: NotSafe) {
        if why == NotSafe::None {
            return;
        }
        if self.kind == Kind::Read && self.not_safe == NotSafe::None {
            self.kind = Kind::ReadNotSafe;
            self.not_safe = why;
        } else if self.not_safe == NotSafe::SessionFunction {
            self.not_safe = why;
        }
    }

    /// SPEC P-6: a statement "may have written" unless it is proven not to. COMMIT/ROLLBACK are
    /// reported here as possibly writing; the session knows whether the transaction wrote. A
    /// statement of session-only calls ([`NotSafe::SessionFunction`]) writes nothing.
    pub fn may_write(&self) -> bool {
        if self.not_safe == NotSafe::SessionFunction {
            return false;
        }
        match self.kind {
            Kind::Read
            | Kind::Show
            | Kind::Set { .. }
            | Kind::Reset { .. }
            | Kind::ResetAll
            | Kind::Begin(_)
            | Kind::Savepoint
            | Kind::ReleaseSavepoint
            | Kind::SetTransaction(_)
            | Kind::SetSessionCharacteristics(_)
            | Kind::Discard(_)
            | Kind::Deallocate { .. }
            | Kind::Close { .. }
            | Kind::Listen { .. }
            | Kind::Unlisten { .. }
            | Kind::Prepare
            | Kind::Empty => false,
            // A SELECT that is not replica-safe may still be a pure read (a locking clause, say),
            // but it may call a writing function: count it as a possible write.
            _ => true,
        }
    }
}

/// The statements of one Query string: almost always exactly one, kept inline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statements {
    One(StatementInfo),
    Many(Arc<[StatementInfo]>),
}

/// The classification of a whole simple-protocol Query string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classification {
    pub statements: Statements,
    /// A leading block comment whose trimmed text is `route=primary` (case-insensitive).
    pub hint_primary: bool,
    /// A leading block comment whose trimmed text is `route=reader`: the statement's functions
    /// are declared read-safe (the never-safe built-ins and `write_functions` excepted; locking
    /// clauses, DML and the other rules of SPEC §7 still apply).
    pub hint_reader: bool,
    /// Calls still to be judged against the database's catalogue (only on a classification that
    /// was not finished yet; see `functions.rs`).
    pub(crate) calls: Option<Arc<[super::functions::Call]>>,
}

impl Classification {
    pub fn single(info: StatementInfo) -> Classification {
        Classification {
            statements: Statements::One(info),
            hint_primary: false,
            hint_reader: false,
            calls: None,
        }
    }

    /// The classification of a Parse whose parameter types name a user type
    /// ([`crate::protocol::frontend::names_user_type`]): the server runs that type's code (a
    /// domain's `CHECK`, a type's input function) as it reads the parameters, code the text
    /// does not show — no read of it is replica-safe, and it ran code the engine cannot see
    /// into (S-5, S-6).
    pub fn with_user_typed_parameters(mut self) -> Classification {
        let mark = |s: &mut StatementInfo| {
            s.not_safe_for(NotSafe::UserFunction);
            if s.kind != Kind::Empty {
                s.effects |= Effects::RUNS_CODE | Effects::UNSEEN_CODE;
            }
        };
        match &mut self.statements {
            Statements::One(s) => mark(s),
            Statements::Many(v) => {
                let mut all = v.to_vec();
                all.iter_mut().for_each(mark);
                *v = all.into();
            }
        }
        self
    }

    /// The classification of the text of a Parse: a prepared statement. Its reads are not
    /// replica-safe when a literal is read as the clock at parse time
    /// ([`Effects::CLOCK_LITERAL`]): the statement holds the time of the client's own Parse,
    /// which a reader's parse of it — later, or another client's kept on a pooled connection —
    /// does not (an examiner's finding of 2026-12-07: `'now'::timestamptz = now()` false for
    /// every later client). A simple Query parses afresh where it runs, and keeps its reads.
    pub fn as_prepared(self) -> Classification {
        if self.effects().contains(Effects::CLOCK_LITERAL) {
            super::functions::keep_reads_off_replicas(self, NotSafe::ClockLiteral)
        } else {
            self
        }
    }

    /// All statements, in order. Empty statements (`;;`, trailing `;`) are not listed unless the
    /// whole string is empty, which is one [`Kind::Empty`] statement.
    pub fn statements(&self) -> &[StatementInfo] {
        match &self.statements {
            Statements::One(s) => std::slice::from_ref(s),
            Statements::Many(v) => v,
        }
    }

    pub fn count(&self) -> usize {
        self.statements().len()
    }

    /// The first statement (every classification has at least one).
    pub fn first(&self) -> &StatementInfo {
        match &self.statements {
            Statements::One(s) => s,
            Statements::Many(v) => &v[0],
        }
    }

    /// SPEC §7: exactly one statement, a replica-safe read, and no primary hint.
    pub fn is_replica_safe(&self) -> bool {
        !self.hint_primary && self.count() == 1 && self.first().is_replica_safe()
    }

    /// SPEC P-6 over all statements.
    pub fn may_write(&self) -> bool {
        self.statements().iter().any(|s| s.may_write())
    }

    /// Union of every statement's effects.
    pub fn effects(&self) -> Effects {
        self.statements()
            .iter()
            .fold(Effects::NONE, |acc, s| acc | s.effects)
    }
}

/// The functions whose call makes a statement not replica-safe (SPEC §7): exact names and name
/// prefixes, lower-case, compared against the unqualified, case-folded function name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFunctions {
    exact: Vec<String>,
    prefixes: Vec<String>,
    /// The first three bytes of every entry, sorted: a name whose first three bytes are not here
    /// is on no list (most names a statement mentions are rejected without a string compare).
    heads: Vec<[u8; 3]>,
    /// Some entry is shorter than three bytes: the filter is off.
    short: bool,
}

impl WriteFunctions {
    /// SPEC §7's default list.
    pub fn defaults() -> WriteFunctions {
        let exact = [
            "nextval",
            "setval",
            "currval",
            "lastval",
            "set_config",
            "setseed",
            "txid_current",
            "txid_current_if_assigned",
            "pg_current_xact_id",
            "pg_current_xact_id_if_assigned",
            "pg_notify",
            "pg_logical_emit_message",
        ];
        let prefixes = ["pg_advisory_", "pg_try_advisory_", "lo_", "dblink"];
        let mut wf = WriteFunctions::empty();
        for name in exact {
            wf.add(name);
        }
        for p in prefixes {
            wf.add(&format!("{p}*"));
        }
        wf
    }

    /// An empty list.
    pub const fn empty() -> WriteFunctions {
        WriteFunctions {
            exact: Vec::new(),
            prefixes: Vec::new(),
            heads: Vec::new(),
            short: false,
        }
    }

    fn rebuild_heads(&mut self) {
        self.short = self.exact.iter().chain(&self.prefixes).any(|e| e.len() < 3);
        self.heads = self
            .exact
            .iter()
            .chain(&self.prefixes)
            .filter_map(|e| e.as_bytes().get(..3).and_then(|h| h.try_into().ok()))
            .collect();
        self.heads.sort_unstable();
        self.heads.dedup();
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty()
    }

    /// Every entry, exact names then prefixes (with their `*`).
    pub fn entries(&self) -> Vec<String> {
        self.exact
            .iter()
            .cloned()
            .chain(self.prefixes.iter().map(|p| format!("{p}*")))
            .collect()
    }

    /// Adds a configured name; a trailing `*` makes it a prefix. Names are case-folded.
    /// Returns false (and adds nothing) for an empty or non-identifier name.
    pub fn add(&mut self, name: &str) -> bool {
        let name = name.trim().to_ascii_lowercase();
        let (base, prefix) = match name.strip_suffix('*') {
            Some(b) => (b.to_string(), true),
            None => (name, false),
        };
        let valid = !base.is_empty()
            && base
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80);
        if !valid {
            return false;
        }
        if prefix {
            if !self.prefixes.contains(&base) {
                self.prefixes.push(base);
            }
        } else if let Err(pos) = self.exact.binary_search(&base) {
            self.exact.insert(pos, base);
        }
        self.rebuild_heads();
        true
    }

    /// Whether calling `name` (unqualified; compared case-insensitively) is on the list.
    pub fn contains(&self, name: &str) -> bool {
        if !name.bytes().any(|b| b.is_ascii_uppercase()) {
            return self.contains_slow(name);
        }
        let mut buf = [0u8; 64];
        let lower: &str = if name.len() <= buf.len() && name.is_ascii() {
            let b = &mut buf[..name.len()];
            b.copy_from_slice(name.as_bytes());
            b.make_ascii_lowercase();
            std::str::from_utf8(b).unwrap_or("")
        } else {
            return self.contains_slow(&name.to_ascii_lowercase());
        };
        self.contains_slow(lower)
    }

    fn contains_slow(&self, lower: &str) -> bool {
        if !self.short {
            let head: Option<[u8; 3]> = lower.as_bytes().get(..3).and_then(|h| h.try_into().ok());
            match head {
                Some(h) if self.heads.binary_search(&h).is_ok() => {}
                _ => return false,
            }
        }
        self.exact
            .binary_search_by(|e| e.as_str().cmp(lower))
            .is_ok()
            || self.prefixes.iter().any(|p| lower.starts_with(p.as_str()))
    }
}

impl Default for WriteFunctions {
    fn default() -> Self {
        WriteFunctions::defaults()
    }
}
