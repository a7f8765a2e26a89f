//! Pass 1 of classification: one walk over a statement's tokens recording the facts the
//! read/not-read verdict needs (SPEC §7) — locking clause, data-modifying CTE, INTO, and every
//! function call judged by the F-policy — and the session effects of S-3/S-4/S-5.
//!
//! The rules err towards "not replica-safe" (a false "not safe" only loses offload; a false
//! "safe" can send `set_config` or an advisory lock to a standby, which accepts them):
//! - any unquoted `INSERT`/`UPDATE`/`DELETE`/`MERGE` in a read ⇒ data-modifying CTE;
//! - any unquoted `INTO` in a read ⇒ SELECT INTO;
//! - `FOR` followed by `UPDATE`/`SHARE`/`NO`/`KEY` ⇒ locking clause;
//! - `name (` is a function call unless the grammar says it cannot be one (a reserved or
//!   column-name keyword, an alias's column list, a type modifier, a CTE's column list, …: see
//!   [`Scan::is_call`]); the name — unquoted, quoted, `U&"…" [UESCAPE '<c>']`, qualified — is
//!   normalised (`ident.rs`) and judged by the F-policy (`functions.rs`, `builtins`);
//! - `x.name` may call `name(x)` (attribute notation): judged as a call of a listed name;
//! - any identifier naming one of S-7's server-dependent relations ⇒ server-dependent;
//! - every other identifier (reserved keywords aside), and every operator symbol, is recorded by
//!   hash: a read naming a sequence of the database's reported catalogue is server-dependent
//!   (S-7), and a statement naming a reported object that hides code (a view, a table under
//!   row-level security, a domain, a cast's type, an operator) takes its verdict (S-6,
//!   `functions.rs`);
//! - an identifier that cannot be normalised ⇒ unparseable.

use super::builtins::{self, flags, Builtin, BuiltinTable};
use super::functions::{name_hash, short_name_hash, Call, NameSet, Rules};
use super::ident::{normalise, Name};
use super::keywords::{kw_of, Kw};
use super::lexer::{self, Lexer, Tok, Token};
use super::{Effects, Limits, Span, Var};

/// Effects of calling a function by its normalised name (S-4). Independent of the configured
/// lists: the session tracks these whatever else is listed. Compared case-insensitively: a
/// quoted `"PG_ADVISORY_LOCK"` is another function on the server, but over-reporting an effect
/// only keeps a session on the writer (lock *release* is believed only of the real spelling).
fn call_effects(name: &str) -> (Effects, bool) {
    // Every name below is 7 to 32 bytes and starts with `s` or `p`.
    if !(7..=32).contains(&name.len()) || !matches!(name.as_bytes()[0] | 0x20, b's' | b'p') {
        return (Effects::NONE, false);
    }
    let mut buf = [0u8; 40];
    let lower = match buf.get_mut(..name.len()) {
        Some(b) if name.is_ascii() => {
            b.copy_from_slice(name.as_bytes());
            b.make_ascii_lowercase();
            std::str::from_utf8(b).unwrap_or("")
        }
        _ => return (Effects::NONE, false),
    };
    if lower == "pg_advisory_unlock_all" && name != lower {
        return (Effects::NONE, false);
    }
    match lower {
        "set_config" => (Effects::CALLS_SET_CONFIG, false),
        "setseed" => (Effects::SEEDS_RANDOM, false),
        "pg_advisory_lock"
        | "pg_advisory_lock_shared"
        | "pg_try_advisory_lock"
        | "pg_try_advisory_lock_shared" => (Effects::ADVISORY_LOCK, false),
        "pg_advisory_xact_lock"
        | "pg_advisory_xact_lock_shared"
        | "pg_try_advisory_xact_lock"
        | "pg_try_advisory_xact_lock_shared" => (Effects::ADVISORY_XACT_LOCK, false),
        "pg_advisory_unlock_all" => (Effects::NONE, true),
        _ => (Effects::NONE, false),
    }
}

/// Built-ins that run SQL given as text: whatever the configured lists say, never safe.
fn executes_sql_text(name: &str) -> bool {
    builtins::RUNS_SQL_TEXT.contains(&name)
}

/// The SQL value functions that answer the transaction's start (`CURRENT_TIMESTAMP`, …): reserved
/// keywords, so an unquoted one is always the function (`Effects::TXN_VALUE`).
fn is_txn_time_keyword(b: &[u8]) -> bool {
    matches!(b.len(), 9..=17)
        && matches!(b[0] | 0x20, b'c' | b'l')
        && [
            &b"current_timestamp"[..],
            b"current_date",
            b"current_time",
            b"localtime",
            b"localtimestamp",
        ]
        .iter()
        .any(|k| b.eq_ignore_ascii_case(k))
}

fn starts_ci(t: &[u8], p: &[u8]) -> bool {
    t.len() >= p.len() && t[..p.len()].eq_ignore_ascii_case(p)
}

/// Effects named anywhere in `text` (strings and comments included), for statements that run
/// code we cannot parse: a DO block, or SQL text passed to a built-in. Over-reporting only keeps
/// a session on the primary; lock release is never inferred. Linear: at most a few short
/// comparisons per byte.
pub(super) fn text_effects(text: &[u8]) -> Effects {
    let mut fx = Effects::NONE;
    for i in 0..text.len() {
        let t = &text[i..];
        match t[0] | 0x20 {
            b's' if starts_ci(t, b"set_config") => fx |= Effects::CALLS_SET_CONFIG,
            b's' if starts_ci(t, b"setseed") => fx |= Effects::SEEDS_RANDOM,
            b'p' if starts_ci(t, b"pg_") => {
                let rest = &t[3..];
                let rest = if starts_ci(rest, b"try_") {
                    &rest[4..]
                } else {
                    rest
                };
                if starts_ci(rest, b"advisory_lock") {
                    fx |= Effects::ADVISORY_LOCK;
                } else if starts_ci(rest, b"advisory_xact_lock") {
                    fx |= Effects::ADVISORY_XACT_LOCK;
                }
            }
            _ => {}
        }
    }
    fx
}

pub(super) fn starts_with_pg_temp(b: &[u8]) -> bool {
    b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"pg_temp")
}

/// A leading routing hint (SPEC §7, §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hint {
    /// `/* route=primary */`
    Primary,
    /// `/* route=reader */`: the statement's functions are declared read-safe.
    Reader,
}

/// Whether a block comment is a routing hint. Spaces around `=` are tolerated: a false primary
/// hint only sends a statement to the primary, and a reader hint never overrides the rules that
/// keep writes and session state off readers.
pub(super) fn hint_of(comment: &[u8]) -> Option<Hint> {
    let inner = comment
        .strip_prefix(b"/*")
        .and_then(|c| c.strip_suffix(b"*/"))
        .unwrap_or(&[]);
    let text = inner.trim_ascii();
    let eq = text.iter().position(|&b| b == b'=')?;
    let (k, v) = (&text[..eq], text[eq + 1..].trim_ascii());
    if !k.trim_ascii().eq_ignore_ascii_case(b"route") {
        return None;
    }
    if v.eq_ignore_ascii_case(b"primary") {
        Some(Hint::Primary)
    } else if v.eq_ignore_ascii_case(b"reader") {
        Some(Hint::Reader)
    } else {
        None
    }
}

/// What a literal first argument of `current_setting` says (S-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    None,
    /// Just after `current_setting(`.
    Open,
    /// After `current_setting('<name>'`: whether the name is server-dependent.
    Literal(bool),
    /// After the literal, `:`, `::`, `::pg_catalog`, `::pg_catalog.` of a cast to `text` (the
    /// form `pg_get_expr` and `pg_get_viewdef` print a policy's or a view's call in: `'app.x'::text`).
    Cast(bool, u8),
}

/// What the first argument of a `set_config` call is (S-5): a name written as a literal tells
/// which setting the call changes, so the capture can follow it as after a SET of that name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigName {
    None,
    /// Just after `set_config(`.
    Open,
    /// After `set_config('<name>'`.
    Literal,
    /// Inside a cast of the literal to `text` (the steps of [`text_cast_step`]).
    Cast(u8),
}

/// One token of a cast of a literal to `text` — `::text`, `::pg_catalog.text` — from step 1
/// (after its first `:`): the next step, 0 once the cast is whole, `None` when it is no such cast.
/// Built-in date/time types a text may be cast to by name (`P-5`, `Scan::joined_text`).
const DATE_TIME_TYPES: &[&[u8]] = &[b"date", b"time", b"timetz", b"timestamp", b"timestamptz"];
/// What a cast of text to keeps it text (`pg_catalog` qualifies the type that follows).
const TEXT_TYPES: &[&[u8]] = &[
    b"text",
    b"varchar",
    b"bpchar",
    b"char",
    b"character",
    b"name",
    b"pg_catalog",
];

fn text_cast_step(step: u8, t: Token, sql: &str) -> Option<u8> {
    let word = |w: &str| {
        matches!(t.kind, Tok::Ident | Tok::QuotedIdent)
            && normalise(sql, t).is_some_and(|n| n.as_str() == w)
    };
    match (step, t.kind) {
        (1, Tok::Colon) => Some(2),
        (2 | 4, _) if word("text") => Some(0),
        (2, _) if word("pg_catalog") => Some(3),
        (3, Tok::Dot) => Some(4),
        _ => None,
    }
}

/// Whether `set_config('<name>', …)` changes a setting the capture can follow as it follows a
/// SET of that name (S-5): a built-in setting (no dot: `pg_settings` lists it, or the capture
/// asks for it as `role`), or a placeholder (`app.tenant`) whose name the session then notes.
/// Not `seed` (the random sequence, which no capture sees: as `setseed()`), not PolarDB's own
/// settings (never replayed, P-5), not a name the server may read otherwise than as written.
fn config_name_followed(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !lower.is_empty()
        && lower
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        && lower != "seed"
        && !lower.starts_with("polar_")
        && !lower.starts_with("_polar_")
}

/// The settings the `set_config` calls of one statement's text name as literals, as written
/// (S-5: the session notes the placeholders among them, which the capture asks for by name).
/// `None` when one call does not name its setting so ([`config_name_followed`]), or when the
/// server may read the text's strings with other boundaries (a backslash in a plain literal).
pub fn set_config_names(stmt: &str) -> Option<Vec<String>> {
    let mut lx = Lexer::range(stmt, 0, stmt.len(), false);
    let mut names = Vec::new();
    let mut prev: Option<Token> = None;
    let mut expect_name = false;
    while let Some(t) = lx.next_token() {
        if matches!(t.kind, Tok::LineComment | Tok::BlockComment) {
            continue;
        }
        if std::mem::take(&mut expect_name) {
            match plain_literal(stmt, t) {
                Some(n) if config_name_followed(&n) => names.push(n),
                _ => return None,
            }
        }
        expect_name = t.kind == Tok::LParen
            && prev.is_some_and(|p| {
                matches!(p.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent)
                    && normalise(stmt, p)
                        .is_some_and(|n| n.as_str().eq_ignore_ascii_case("set_config"))
            });
        prev = Some(t);
    }
    (!lx.saw_plain_backslash() && !expect_name).then_some(names)
}

/// A call of a name whose verdict depends on its number of arguments ([`Builtin::ByArity`]),
/// open: its arguments are counted up to its `)`.
#[derive(Clone, Copy, Debug)]
struct ArityCall {
    /// The statement's paren depth inside the call's parentheses.
    depth: u32,
    /// Commas at that depth outside brackets: argument separators.
    commas: u32,
    /// Open `[` at that depth (`ARRAY[a, b]`: its commas separate no arguments).
    brackets: u32,
    /// The statement's token index of its `(` (`f()` has no argument: `)` comes next).
    open: u32,
    by_arity: u16,
}

/// Calls counted at once (nested inside one another); a call beyond them is judged as if its
/// arguments could not be counted.
const MAX_ARITY_CALLS: usize = 16;

/// The operators PostgreSQL calls for spellings that do not show them, by the names it looks
/// them up with: `LIKE`/`ILIKE`/`SIMILAR TO` (`~~`, `~~*`, `~` and their negations), `IN`,
/// `NULLIF`, `CASE x WHEN`, `IS DISTINCT FROM`, `JOIN … USING`, `NATURAL`, `ANY`/`SOME`/`ALL`,
/// `DISTINCT`, `GROUP BY`, `UNION`/`INTERSECT`/`EXCEPT` (`=`, `<>`), `BETWEEN`, `ORDER BY`,
/// `GREATEST`/`LEAST`, `min`/`max` (the comparisons). A user operator under one of these names
/// (a schema ahead of `pg_catalog` in `search_path`, a user type's operators) runs its function
/// for them (an examiner's finding, 2026-12-05). Operators of a default operator class under
/// other names are not covered.
const UNSPELLED_OPERATORS: [&str; 12] = [
    "=", "<>", "<", ">", "<=", ">=", "~~", "!~~", "~~*", "!~~*", "~", "!~",
];

fn calls_operators_unspelled(word: &[u8]) -> bool {
    const WORDS: [&[u8]; 22] = [
        b"like",
        b"ilike",
        b"similar",
        b"in",
        b"nullif",
        b"case",
        b"distinct",
        b"using",
        b"natural",
        b"any",
        b"some",
        b"all",
        b"group",
        b"union",
        b"intersect",
        b"except",
        b"between",
        b"order",
        b"greatest",
        b"least",
        b"min",
        b"max",
    ];
    word.len() <= 9 && WORDS.iter().any(|w| word.eq_ignore_ascii_case(w))
}

/// The facts pass 1 records for one statement.
#[derive(Clone, Debug)]
pub(super) struct Scan {
    pub(super) start: usize,
    pub(super) end: usize,
    ntok: u32,
    /// First token (may be `(`) and the first token that is not `(`.
    pub(super) first: Option<Token>,
    pub(super) first_word: Option<Token>,
    /// The operators [`UNSPELLED_OPERATORS`] are recorded as names (once per statement).
    unspelled_operators: bool,
    pub(super) lead_parens: u32,
    depth: u32,
    pub(super) error: bool,
    pub(super) semicolon_in_parens: bool,
    pub(super) has_dml: bool,
    pub(super) has_into: bool,
    pub(super) into_temp: bool,
    pub(super) lock: bool,
    /// Calls a never-safe built-in or a `write_functions` name.
    pub(super) write_fn: bool,
    /// Calls an S-7 server-dependent function or names a server-dependent relation.
    pub(super) server_dependent: bool,
    /// Calls a volatile built-in that is not on the reviewed read-safe list.
    pub(super) volatile_fn: bool,
    /// An identifier the classifier cannot normalise.
    pub(super) bad_ident: bool,
    /// Calls a built-in that runs SQL text (see [`executes_sql_text`]).
    pub(super) executes_sql: bool,
    /// Runs code the engine cannot see into (a function that is not a built-in, SQL text).
    pub(super) unseen: bool,
    /// Calls a user function on the `write_functions` list.
    pub(super) listed_code: bool,
    pub(super) effects: Effects,
    /// A string or dollar-quoted literal so far, and a `||` so far: text joined from literals
    /// may spell what none of them spells (`joined_text`).
    saw_string: bool,
    saw_concat: bool,
    /// Text joined from literals (`joined_text`), not yet known to be read as a date/time.
    joined: bool,
    /// A cast to something but text (`::t`, `CAST`), or a date/time type named (`timestamptz(…)`,
    /// `timestamp with time zone`): what joined text could become a date/time through.
    converts: bool,
    pub(super) unlock_all: bool,
    /// Calls whose verdict depends on the database (`functions.rs`).
    pub(super) calls: Vec<Call>,
    /// The names the statement mentions (S-7: one may be a sequence of the database).
    pub(super) names: NameSet,
    /// First SELECT/VALUES/TABLE/INSERT/UPDATE/DELETE/MERGE at depth 0 after the first token:
    /// for `WITH …` statements, the main statement.
    pub(super) main0: Option<Kw>,
    for_at: u32,
    lock_tail_until: u32,
    /// 1: just after INTO; 2: after INTO + GLOBAL/LOCAL/TABLE/UNLOGGED; 3: after INTO … pg_temp*.
    into_state: u8,
    is_create: bool,
    first_is_insert: bool,
    begin_at: u32,
    atomic_seen: bool,
    atomic_depth: u32,
    /// Bit d: a WITH list is open at depth d (its CTE names are not calls).
    with_lists: u64,
    /// Bit d: the parenthesis open at depth d is an `OPERATOR(…)` clause's.
    operator_parens: u64,
    /// Where the `)` that last closed an `OPERATOR(…)` clause starts: an operand follows it,
    /// never an alias (`'x' OPERATOR(pg_catalog.||) f(…)` calls `f`).
    operator_close: Option<usize>,
    setting: Setting,
    /// The first argument of an open `set_config(` call.
    config_name: ConfigName,
    /// Calls `set_config` with names as literals ([`config_name_followed`]): how many, and
    /// whether one of them is a placeholder (has a dot).
    pub(super) set_config_named: u32,
    pub(super) set_config_placeholder: bool,
    /// One of those names is a setting that may change how a statement parses (E-2).
    pub(super) set_config_parse_setting: bool,
    /// Calls `set_config` in a way whose setting the text does not say.
    pub(super) set_config_opaque: bool,
    /// `x.set_config` names not (yet) followed by their `(`.
    pub(super) set_config_attributes: u32,
    /// Open calls whose arguments are counted (innermost last).
    arity_calls: Vec<ArityCall>,
    /// `x.name` of [`Builtin::ByArity`] names (the token index of `name`), judged when the
    /// statement ends: `x.name(…)` is a qualified call (taken off here by its `(`), anything
    /// else attribute notation, one argument.
    attr_arity: Vec<(u32, u16)>,
    prev: Option<Token>,
    prev2: Option<Token>,
    prev3: Option<Token>,
    /// The two tokens before the current dotted name (`a.b.c`) began.
    chain_pred: Option<Token>,
    chain_pred2: Option<Token>,
    in_chain: bool,
    /// A leading `/* route=reader */`.
    pub(super) hint_reader: bool,
}

impl Scan {
    pub(super) fn new(hint_reader: bool) -> Scan {
        Scan {
            start: 0,
            end: 0,
            ntok: 0,
            first: None,
            first_word: None,
            unspelled_operators: false,
            lead_parens: 0,
            depth: 0,
            error: false,
            semicolon_in_parens: false,
            has_dml: false,
            has_into: false,
            into_temp: false,
            lock: false,
            write_fn: false,
            server_dependent: false,
            volatile_fn: false,
            bad_ident: false,
            executes_sql: false,
            unseen: false,
            listed_code: false,
            effects: Effects::NONE,
            saw_string: false,
            saw_concat: false,
            joined: false,
            converts: false,
            unlock_all: false,
            calls: Vec::new(),
            names: NameSet::default(),
            main0: None,
            for_at: u32::MAX,
            lock_tail_until: 0,
            into_state: 0,
            is_create: false,
            first_is_insert: false,
            begin_at: u32::MAX,
            atomic_seen: false,
            atomic_depth: 0,
            with_lists: 0,
            operator_parens: 0,
            operator_close: None,
            setting: Setting::None,
            config_name: ConfigName::None,
            set_config_named: 0,
            set_config_placeholder: false,
            set_config_parse_setting: false,
            set_config_opaque: false,
            set_config_attributes: 0,
            arity_calls: Vec::new(),
            attr_arity: Vec::new(),
            prev: None,
            prev2: None,
            prev3: None,
            chain_pred: None,
            chain_pred2: None,
            in_chain: false,
            hint_reader,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// A `;` ends the statement only outside parentheses and outside a `BEGIN ATOMIC` body
    /// (the server parses the whole string; this mirrors psql's splitting).
    pub(super) fn splits_at_semicolon(&self) -> bool {
        self.depth == 0 && self.atomic_depth == 0
    }

    fn with_list_open(&self) -> bool {
        self.depth < 64 && self.with_lists & (1u64 << self.depth) != 0
    }

    fn set_with_list(&mut self, open: bool) {
        if self.depth < 64 {
            let bit = 1u64 << self.depth;
            if open {
                self.with_lists |= bit;
            } else {
                self.with_lists &= !bit;
            }
        }
    }

    pub(super) fn feed(
        &mut self,
        t: Token,
        sql: &str,
        policy: Rules<'_>,
        limits: &Limits,
    ) -> Result<(), ()> {
        let src = sql.as_bytes();
        let idx = self.ntok;
        self.ntok = self.ntok.saturating_add(1);
        if self.first.is_none() {
            self.first = Some(t);
            self.start = t.start;
        }
        self.end = t.end;
        if self.first_word.is_none() {
            if t.kind == Tok::LParen {
                self.lead_parens = self.lead_parens.saturating_add(1);
            } else {
                self.first_word = Some(t);
                if t.kind == Tok::Ident {
                    let k = kw_of(bytes(src, t));
                    self.is_create = k == Kw::Create;
                    self.first_is_insert = k == Kw::Insert;
                }
            }
        }
        self.setting_arg(t, sql, policy.builtins);
        self.config_name_arg(t, sql);
        let name_like = matches!(t.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent);
        if name_like {
            if !(self.in_chain && matches!(self.prev, Some(p) if p.kind == Tok::Dot)) {
                self.chain_pred = self.prev;
                self.chain_pred2 = self.prev2;
            }
            self.in_chain = true;
            self.relation(t, sql, policy.record_names);
        } else if t.kind != Tok::Dot {
            self.in_chain = false;
        }
        let into_state = std::mem::take(&mut self.into_state);
        self.joined_text(t, src);
        match t.kind {
            Tok::Error(_) | Tok::Other => self.error = true,
            Tok::LParen => {
                self.call(sql, policy);
                if self.depth < 64
                    && self.prev.is_some_and(|p| {
                        p.kind == Tok::Ident && bytes(src, p).eq_ignore_ascii_case(b"operator")
                    })
                {
                    self.operator_parens |= 1 << self.depth;
                }
                self.depth = self.depth.saturating_add(1);
                self.set_with_list(false);
                if self.depth > limits.max_paren_depth {
                    return Err(());
                }
            }
            Tok::RParen => {
                if !self.arity_calls.is_empty() {
                    self.close_arity_call(idx, policy);
                }
                self.set_with_list(false);
                self.depth = self.depth.saturating_sub(1);
                if self.depth < 64 && self.operator_parens & (1 << self.depth) != 0 {
                    self.operator_parens &= !(1 << self.depth);
                    self.operator_close = Some(t.start);
                }
            }
            Tok::Comma | Tok::LBracket | Tok::RBracket if !self.arity_calls.is_empty() => {
                self.count_argument(t.kind)
            }
            Tok::Semicolon if self.depth > 0 => self.semicolon_in_parens = true,
            Tok::Dot if into_state == 3 => self.into_temp = true,
            Tok::QuotedIdent if into_state == 1 || into_state == 2 => {
                let inner = bytes(src, t).get(1..).unwrap_or(&[]);
                if starts_with_pg_temp(inner) {
                    self.into_state = 3;
                }
            }
            Tok::Ident => {
                if policy.record_names
                    && !self.unspelled_operators
                    && calls_operators_unspelled(bytes(src, t))
                {
                    // S-6: the operators these spellings call, looked up like a spelled one.
                    self.unspelled_operators = true;
                    for op in UNSPELLED_OPERATORS {
                        self.names.insert(short_name_hash(op));
                    }
                }
                self.keyword(t, idx, src, into_state)
            }
            // S-6: a user operator hides its function; recorded by its symbol like a name. Not
            // in `SET name = value` / `RESET`: no expression is evaluated there, and an `=` taken
            // for a user operator (citext's) made every SET code the engine cannot see, keeping
            // the session on the primary for good (an examiner's finding, 2026-12-05).
            Tok::Operator
                if policy.record_names && !self.first_word_is(src, &[b"set", b"reset"]) =>
            {
                if let Ok(op) = std::str::from_utf8(bytes(src, t)) {
                    self.names.insert(short_name_hash(op));
                }
            }
            Tok::String | Tok::DollarString if lexer::may_spell_txn_time(bytes(src, t)) => {
                self.effects |= Effects::TXN_VALUE | Effects::CLOCK_LITERAL;
            }
            _ => {}
        }
        if name_like && matches!(self.prev, Some(p) if p.kind == Tok::Dot) {
            self.attribute(t, sql, policy);
        }
        self.prev3 = self.prev2;
        self.prev2 = self.prev;
        self.prev = Some(t);
        Ok(())
    }

    /// P-5: a date/time input of the transaction's start that no one literal spells, joined
    /// from several — a literal continued on the next line (`'no'⏎'w'`, two string tokens in a
    /// row: one string to the server) or literals and `||` in one statement (`'no' || 'w'`,
    /// `'no'::text || 'w'`, `OPERATOR(pg_catalog.||)`) — makes the statement read a value of
    /// its transaction (`Effects::TXN_VALUE`), whatever the literals hold. Token kinds only, so
    /// a shape (which keeps `||`, white space and each literal's kind) stands for the verdict.
    ///
    /// Only with a way for that text to become a date/time: a cast to anything but a text type
    /// (a domain may be a date/time), `CAST`, or a date/time type named — text never becomes
    /// one implicitly (`ts > 'no' || 'w'` is an error). Without this, every read in a block
    /// that concatenated a literal (`'lit:' || $1::text`) stayed on the writer
    /// (`tests/e2e/test_e2_s5_reads_after_unreported_ddl.py`).
    fn joined_text(&mut self, t: Token, src: &[u8]) {
        match t.kind {
            Tok::String | Tok::DollarString => {
                let continued =
                    t.kind == Tok::String && matches!(self.prev, Some(p) if p.kind == Tok::String);
                if continued || self.saw_concat {
                    self.joined = true;
                }
                self.saw_string = true;
            }
            Tok::Operator if bytes(src, t).windows(2).any(|w| w == b"||") => {
                if self.saw_string {
                    self.joined = true;
                }
                self.saw_concat = true;
            }
            Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent => {
                let b = bytes(src, t);
                let any = |words: &[&[u8]]| words.iter().any(|x| b.eq_ignore_ascii_case(x));
                let after_cast = matches!((self.prev, self.prev2), (Some(a), Some(c))
                    if a.kind == Tok::Colon && c.kind == Tok::Colon);
                if any(&[b"cast"]) || any(DATE_TIME_TYPES) || after_cast && !any(TEXT_TYPES) {
                    self.converts = true;
                }
            }
            _ => {}
        }
        if self.joined && self.converts {
            self.effects |= Effects::TXN_VALUE;
        }
    }

    /// Whether the statement's first word is one of `words` (lower case).
    fn first_word_is(&self, src: &[u8], words: &[&[u8]]) -> bool {
        self.first_word.is_some_and(|f| {
            f.kind == Tok::Ident && words.iter().any(|w| bytes(src, f).eq_ignore_ascii_case(w))
        })
    }

    fn keyword(&mut self, t: Token, idx: u32, src: &[u8], into_state: u8) {
        let b = bytes(src, t);
        if is_txn_time_keyword(b) {
            self.effects |= Effects::TXN_VALUE;
        }
        let k = kw_of(b);
        let in_lock = idx <= self.lock_tail_until && self.lock;
        match k {
            Kw::For => self.for_at = idx,
            Kw::Update | Kw::Share if idx == self.for_at.wrapping_add(1) => {
                self.lock = true;
            }
            Kw::No | Kw::Key if idx == self.for_at.wrapping_add(1) => {
                self.lock = true;
                self.lock_tail_until = idx.saturating_add(2);
            }
            Kw::Into => {
                self.has_into = true;
                self.into_state = 1;
            }
            Kw::Global | Kw::Local | Kw::Table | Kw::Unlogged
                if into_state == 1 || into_state == 2 =>
            {
                self.into_state = 2;
            }
            Kw::Temp | Kw::Temporary if into_state == 1 || into_state == 2 => {
                self.into_temp = true;
            }
            // A WITH that opens a statement (not `WITH ORDINALITY`, `WITH TIME ZONE`, …): the
            // names of its list are CTE names, `name (cols)` there is not a call.
            Kw::With
                if match self.prev {
                    None => true,
                    Some(p) if p.kind == Tok::LParen => true,
                    Some(p) => {
                        p.kind == Tok::Ident
                            && (bytes(src, p).eq_ignore_ascii_case(b"explain")
                                || bytes(src, p).eq_ignore_ascii_case(b"verbose"))
                    }
                } =>
            {
                self.set_with_list(true)
            }
            _ => {
                if (into_state == 1 || into_state == 2) && starts_with_pg_temp(b) {
                    self.into_state = 3;
                }
            }
        }
        // `UPDATE` right after `FOR` / `FOR NO KEY` is a lock strength, not a statement.
        let update_is_dml = k == Kw::Update && !in_lock && idx != self.for_at.wrapping_add(1);
        if matches!(k, Kw::Insert | Kw::Delete | Kw::Merge) || update_is_dml {
            self.has_dml = true;
        }
        let main_kw = matches!(
            k,
            Kw::Select | Kw::Values | Kw::Table | Kw::Insert | Kw::Delete | Kw::Merge
        ) || update_is_dml;
        if main_kw {
            // The list's main statement begins: what follows is no CTE name.
            self.set_with_list(false);
        }
        if main_kw && self.depth == 0 && idx > 0 && self.main0.is_none() {
            self.main0 = Some(k);
        }
        if self.is_create {
            match k {
                Kw::Begin if self.atomic_depth > 0 => {
                    self.atomic_depth = self.atomic_depth.saturating_add(1)
                }
                Kw::Begin if self.depth == 0 => self.begin_at = idx,
                Kw::Atomic
                    if !self.atomic_seen
                        && self.atomic_depth == 0
                        && self.depth == 0
                        && idx == self.begin_at.wrapping_add(1) =>
                {
                    self.atomic_seen = true;
                    self.atomic_depth = 1;
                }
                Kw::Case if self.atomic_depth > 0 => {
                    self.atomic_depth = self.atomic_depth.saturating_add(1)
                }
                Kw::End if self.atomic_depth > 0 => self.atomic_depth -= 1,
                _ => {}
            }
        }
    }

    /// S-7: an identifier naming a server-dependent relation, anywhere in the statement (most
    /// identifiers are ruled out by their first bytes), and the names that may be a sequence of
    /// the database (recorded by hash, judged per database: `functions.rs`). A name is normalised
    /// as the server does (unquoted folded, quoted as written, truncated to 63 bytes); the
    /// reserved keywords cannot name a relation unquoted and are not recorded.
    fn relation(&mut self, t: Token, sql: &str, record_names: bool) {
        let b = bytes(sql.as_bytes(), t);
        let candidate = match t.kind {
            Tok::Ident => starts_ci(b, b"pg_"),
            Tok::QuotedIdent => b.starts_with(b"\"pg_"),
            _ => true,
        };
        let record = record_names;
        if !candidate && !record {
            return;
        }
        // After `schema.` PostgreSQL takes any keyword as a name (`public.order`, `public.left`
        // name a sequence, a view): recorded like any other (an examiner's finding of
        // 2026-12-07: such objects were never looked up, and their code ran on the standby).
        let qualified = matches!(self.prev, Some(p) if p.kind == Tok::Dot);
        match normalise(sql, t) {
            Some(n) if candidate && builtins::is_server_dependent_relation(n.as_str()) => {
                self.server_dependent = true
            }
            Some(n)
                if record && !(t.kind == Tok::Ident && !qualified && is_reserved(n.as_str())) =>
            {
                self.names.insert(short_name_hash(n.as_str()));
            }
            Some(_) => {}
            None if candidate => self.bad_ident = true,
            None => {}
        }
    }

    /// S-7: `current_setting('<name>' …)` is server-dependent for S-7's names, and for any
    /// argument that is not a plain literal.
    fn setting_arg(&mut self, t: Token, sql: &str, table: &BuiltinTable) {
        match std::mem::replace(&mut self.setting, Setting::None) {
            Setting::None => {}
            Setting::Open => match plain_literal(sql, t) {
                Some(name) => {
                    if builtins::is_transaction_setting(&name) {
                        self.effects |= Effects::TXN_VALUE;
                    }
                    self.setting =
                        Setting::Literal(builtins::is_server_dependent_setting(table, &name))
                }
                None => self.server_dependent = true,
            },
            Setting::Literal(sd) if !sd && t.kind == Tok::Colon => {
                self.setting = Setting::Cast(sd, 1)
            }
            Setting::Literal(sd) => {
                if sd || !matches!(t.kind, Tok::RParen | Tok::Comma) {
                    self.server_dependent = true;
                }
            }
            Setting::Cast(sd, step) => {
                self.setting = match text_cast_step(step, t, sql) {
                    Some(0) => Setting::Literal(sd),
                    Some(next) => Setting::Cast(sd, next),
                    None => {
                        self.server_dependent = true;
                        Setting::None
                    }
                };
            }
        }
    }

    /// S-5: `set_config('<name>', …)` — a literal name, perhaps cast to `text`, then the next
    /// argument — says which setting the call changes; anything else does not.
    fn config_name_arg(&mut self, t: Token, sql: &str) {
        match std::mem::replace(&mut self.config_name, ConfigName::None) {
            ConfigName::None => {}
            ConfigName::Open => match plain_literal(sql, t) {
                Some(name) if config_name_followed(&name) => {
                    if name.contains('.') {
                        self.set_config_placeholder = true;
                    } else if !Var::from_name(&name).leaves_parse_alone() {
                        self.set_config_parse_setting = true;
                    }
                    self.config_name = ConfigName::Literal;
                }
                _ => self.set_config_opaque = true,
            },
            ConfigName::Literal => match t.kind {
                Tok::Comma => {
                    self.set_config_named = self.set_config_named.saturating_add(1);
                    // A user function of the name (another schema's, an overload taking other
                    // arguments) may be the one called, and run code the engine cannot see:
                    // the catalogue decides (`Call::Attr`: user code when it has one).
                    self.push(Call::Attr {
                        stmt: 0,
                        hash: name_hash("set_config"),
                        hint: self.hint_reader,
                        never_safe: true,
                    });
                }
                Tok::Colon => self.config_name = ConfigName::Cast(1),
                _ => self.set_config_opaque = true,
            },
            ConfigName::Cast(step) => match text_cast_step(step, t, sql) {
                Some(0) => self.config_name = ConfigName::Literal,
                Some(next) => self.config_name = ConfigName::Cast(next),
                None => self.set_config_opaque = true,
            },
        }
    }

    /// `x.name`: PostgreSQL's attribute notation calls a one-argument function `name(x)` —
    /// `(1::bigint).pg_advisory_lock` takes the lock, `('s'::regclass).nextval` advances the
    /// sequence (verified on PostgreSQL 15) — so a name after a dot is judged as a call of the
    /// lists' names even without parentheses (it is a column otherwise). Lock *release* is never
    /// inferred from it.
    fn attribute(&mut self, t: Token, sql: &str, policy: Rules<'_>) {
        let Some(name) = normalise(sql, t) else {
            self.bad_ident = true;
            return;
        };
        let s = name.as_str();
        let fx = call_effects(s).0;
        self.effects |= fx;
        if fx.contains(Effects::CALLS_SET_CONFIG) {
            // Attribute notation passes one argument, no literal name; a qualified call
            // (`pg_catalog.set_config(…)`) takes this back at its `(`.
            self.set_config_attributes = self.set_config_attributes.saturating_add(1);
        }
        if s == "current_setting" {
            // `('in_hot_standby'::text).current_setting`: the argument is not a plain literal.
            self.server_dependent = true;
        }
        self.function(s, policy, false);
    }

    /// A `(` after a name may be a function call: judge it by the F-policy and track its effects.
    fn call(&mut self, sql: &str, policy: Rules<'_>) {
        let Some(p) = self.prev else { return };
        if !matches!(p.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent) {
            return;
        }
        let Some(name) = normalise(sql, p) else {
            self.bad_ident = true;
            return;
        };
        if !self.is_call(sql, &name, policy.builtins) {
            return;
        }
        let s = name.as_str();
        if policy.record_names && p.kind == Tok::Ident && is_reserved(s) {
            // A type/function-name keyword calls a function unqualified too (`verbose()`,
            // `left(…)`): its name is recorded as a call's, which `relation` skipped.
            self.names.insert(short_name_hash(s));
        }
        let (fx, unlock_all) = call_effects(s);
        self.effects |= fx;
        if s.eq_ignore_ascii_case("now") || s.eq_ignore_ascii_case("transaction_timestamp") {
            self.effects |= Effects::TXN_VALUE;
        }
        if unlock_all {
            // Only the real one clears the locks: unqualified or pg_catalog-qualified.
            let qualified = matches!(self.prev2, Some(d) if d.kind == Tok::Dot);
            let pg_catalog = qualified
                && matches!(self.prev3, Some(s) if matches!(s.kind, Tok::Ident | Tok::QuotedIdent)
                    && normalise(sql, s).is_some_and(|n| n.as_str() == "pg_catalog"));
            if !qualified || pg_catalog {
                self.unlock_all = true;
            }
        }
        self.function(s, policy, true);
        if s == "current_setting" {
            self.setting = Setting::Open;
        }
        if fx.contains(Effects::CALLS_SET_CONFIG) {
            // A call inside the first argument of another is no literal name for that one.
            if self.config_name != ConfigName::None {
                self.set_config_opaque = true;
            }
            if matches!(self.prev2, Some(d) if d.kind == Tok::Dot) {
                self.set_config_attributes = self.set_config_attributes.saturating_sub(1);
            }
            self.config_name = ConfigName::Open;
        }
    }

    /// The F-policy's verdict on a call of `name` (`call`: with parentheses; otherwise attribute
    /// notation).
    fn function(&mut self, s: &str, policy: Rules<'_>, call: bool) {
        let stmt = 0; // set when the statement is listed
        let hint = self.hint_reader;
        let verdict = policy.builtins.verdict(s);
        if verdict != Builtin::NeverSafe && policy.write_functions.contains(s) {
            self.write_fn = true;
            // A user function on the write list: code never judged read-safe (S-5).
            self.listed_code |= call && verdict == Builtin::Unknown;
        }
        match verdict {
            Builtin::NeverSafe => {
                self.write_fn = true;
                if call && builtins::SESSION_ONLY.contains(&s) {
                    // A user function of the name may be the one called (another schema's
                    // ahead of `pg_catalog` on the search_path, an overload): the catalogue
                    // decides whether the statement calls only the built-in (P-6: it writes
                    // nothing; `NotSafe::SessionFunction`).
                    self.push(Call::Attr {
                        stmt,
                        hash: name_hash(s),
                        hint,
                        never_safe: true,
                    });
                }
                if executes_sql_text(s) {
                    self.executes_sql = true;
                    self.unseen = true;
                }
            }
            _ if !policy.read_functions.is_empty() && policy.read_functions.contains(s) => {
                if !policy.builtins.contains(s) {
                    self.unseen |= call;
                }
            }
            // Judged at its `)`, when its arguments are counted.
            Builtin::ByArity(k) if call => {
                // `x.name(`: the name was taken for attribute notation as it came.
                let name_at = self.ntok.saturating_sub(2);
                if self.attr_arity.last().is_some_and(|a| a.0 == name_at) {
                    self.attr_arity.pop();
                }
                if self.arity_calls.len() < MAX_ARITY_CALLS {
                    self.arity_calls.push(ArityCall {
                        depth: self.depth.saturating_add(1),
                        commas: 0,
                        brackets: 0,
                        open: self.ntok.saturating_sub(1),
                        by_arity: k,
                    });
                } else {
                    self.builtin(policy.builtins.at_arity(k, None), true);
                }
            }
            // `(v).name`, `$1.name`, `a[1].name` call `name(v)`, one argument, unless `(`
            // follows (a qualified call). After a name (`t.name`, `s.t.name`) it is a column,
            // or a call on a whole row that no overload of a by-arity built-in takes (verified
            // on PostgreSQL 15: `datfrozenxid.age` is "missing FROM-clause entry"): not judged.
            Builtin::ByArity(k) => {
                if !matches!(
                    self.prev2,
                    Some(q) if matches!(q.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent)
                ) {
                    self.attr_arity.push((self.ntok.saturating_sub(1), k));
                }
            }
            Builtin::ServerDependent | Builtin::Volatile | Builtin::Safe(_) => {
                self.builtin(verdict, call)
            }
            Builtin::Unknown if call => {
                self.unseen = true;
                self.push(Call::User {
                    stmt,
                    name: Box::from(s),
                    hint,
                });
            }
            Builtin::Unknown => self.push(Call::Attr {
                stmt,
                hash: name_hash(s),
                hint,
                never_safe: false,
            }),
        }
    }

    /// A verdict on a built-in's call that is neither never-safe nor unknown.
    fn builtin(&mut self, verdict: Builtin, call: bool) {
        match verdict {
            Builtin::ServerDependent => self.server_dependent = true,
            Builtin::Volatile => self.volatile_fn = true,
            Builtin::Safe(id) => {
                if call {
                    self.push(Call::Builtin {
                        stmt: 0,
                        id,
                        hint: self.hint_reader,
                    });
                }
            }
            // `at_arity` gives none of these; the safe direction if it ever did.
            Builtin::NeverSafe | Builtin::Unknown | Builtin::ByArity(_) => self.write_fn = true,
        }
    }

    /// A comma or bracket while a by-arity call is open: counts the arguments of the innermost
    /// one when it stands at that call's depth. PostgreSQL's argument list is expressions
    /// separated by commas; a plain function's parentheses hold nothing else that is not inside
    /// parentheses or brackets of its own (`ORDER BY`, `*` and `DISTINCT` are an aggregate's,
    /// and aggregates have no arities in the table).
    fn count_argument(&mut self, kind: Tok) {
        let depth = self.depth;
        let Some(c) = self.arity_calls.last_mut() else {
            return;
        };
        if depth != c.depth {
            return;
        }
        match kind {
            Tok::Comma if c.brackets == 0 => c.commas = c.commas.saturating_add(1),
            Tok::LBracket => c.brackets = c.brackets.saturating_add(1),
            Tok::RBracket => c.brackets = c.brackets.saturating_sub(1),
            _ => {}
        }
    }

    /// A `)` (token `idx`, before it lowers the depth) while a by-arity call is open: if it
    /// closes the innermost one, judges that call by its number of arguments.
    fn close_arity_call(&mut self, idx: u32, policy: Rules<'_>) {
        let Some(&c) = self.arity_calls.last() else {
            return;
        };
        if self.depth != c.depth {
            return;
        }
        self.arity_calls.pop();
        let empty = idx == c.open.saturating_add(1);
        let n = (c.brackets == 0).then_some(if empty { 0 } else { c.commas + 1 });
        self.builtin(policy.builtins.at_arity(c.by_arity, n), true);
    }

    /// The statement ends: an `x.name` not followed by `(` was attribute notation; calls still open
    /// (unbalanced parentheses: the server refuses it) are judged as if their arguments could
    /// not be counted.
    pub(super) fn end_calls(&mut self, policy: Rules<'_>) {
        while let Some((_, k)) = self.attr_arity.pop() {
            self.builtin(policy.builtins.at_arity(k, Some(1)), false);
        }
        while let Some(c) = self.arity_calls.pop() {
            self.builtin(policy.builtins.at_arity(c.by_arity, None), true);
        }
    }

    fn push(&mut self, c: Call) {
        if !self.calls.contains(&c) {
            self.calls.push(c);
        }
    }

    /// Whether `name (` calls a function. Not when the grammar cannot read it as a call — the
    /// safe direction for each case is argued here, because a wrong "not a call" hides a function:
    /// - a reserved or column-name keyword (`IN (`, `VALUES (`, `EXISTS (`, `CAST(`,
    ///   `substring(`, `numeric(10,2)` …): never a function name unless quoted or qualified, and
    ///   the special forms call fixed, immutable or stable `pg_catalog` functions;
    /// - `JOIN (` after a join keyword or a table, `LIKE`/`ILIKE`/`SIMILAR (` after an operand or
    ///   NOT, `GROUPING SETS (`, `GROUP BY CUBE|ROLLUP (`, `OPERATOR(…)`, `CHARACTER VARYING(n)`,
    ///   `… TO SECOND(p)`, `INTERVAL '1' SECOND(p)`, `FETCH FIRST (n)`, an INSERT's
    ///   `ON CONFLICT (cols)`, MERGE's `THEN INSERT (cols)`;
    /// - a name at the start of the statement (`EXPLAIN (…)`, `VACUUM (…)`: utility options);
    /// - a type after `::`, a name after `AS` (alias, cast type), `INTO`/`TABLE`/`COPY`/
    ///   `REFERENCES`/`FUNCTION`… (a relation's or routine's column or argument list);
    /// - a name where a table reference ends: an alias with a column list (`generate_series(1,3)
    ///   g(i)`, `FROM t a(x)`; see [`Scan::is_alias_column_list`]);
    /// - a CTE name in a WITH list (`WITH t(n) AS …`, `…, u(m) AS …`).
    ///
    /// Everything else — including names after unreserved keywords (`AT TIME ZONE f(x)`), which
    /// may be identifiers — is a call.
    fn is_call(&self, sql: &str, name: &Name, table: &BuiltinTable) -> bool {
        let qualified = matches!(self.prev2, Some(d) if d.kind == Tok::Dot);
        let pred = self.chain_pred;
        let pred_word = pred
            .filter(|p| p.kind == Tok::Ident)
            .and_then(|p| normalise(sql, p));
        let pw = pred_word.as_ref().map(|n| n.as_str());
        let operand = pred.is_some_and(|p| is_operand(sql, p, table));
        if !qualified && name.is_bare() {
            let w = name.as_bytes();
            if matches!(table.keyword(w), Some(flags::RESERVED | flags::COL_NAME)) {
                return false;
            }
            let not_a_call = match w {
                b"join" => {
                    operand
                        || matches!(
                            pw,
                            Some(
                                "left" | "right" | "full" | "inner" | "cross" | "natural" | "outer"
                            )
                        )
                }
                b"like" | b"ilike" | b"similar" => operand || pw == Some("not"),
                b"sets" => pw == Some("grouping"),
                // `GROUP BY CUBE (a, b)` is a grouping set (`ORDER BY cube(x)` a call).
                b"cube" | b"rollup" => {
                    pw == Some("by")
                        && self.chain_pred2.is_some_and(|g| {
                            g.kind == Tok::Ident
                                && bytes(sql.as_bytes(), g).eq_ignore_ascii_case(b"group")
                        })
                }
                b"operator" => true,
                b"varying" => matches!(pw, Some("character" | "char" | "nchar" | "bit")),
                // `INTERVAL '1' SECOND(3)`: a precision.
                b"second" => pw == Some("to") || pred.is_some_and(|p| p.kind == Tok::String),
                b"first" | b"next" => pw == Some("fetch"),
                b"conflict" => pw == Some("on") && self.first_is_insert,
                b"insert" => pw == Some("then"),
                b"materialized" => pw == Some("not"),
                _ => false,
            };
            if not_a_call {
                return false;
            }
        }
        let Some(p) = pred else {
            return false;
        };
        if p.kind == Tok::Colon && matches!(self.chain_pred2, Some(c) if c.kind == Tok::Colon) {
            return false;
        }
        if matches!(
            pw,
            Some(
                "as" | "into"
                    | "table"
                    | "exists"
                    | "prepare"
                    | "execute"
                    | "copy"
                    | "references"
                    | "function"
                    | "procedure"
                    | "routine"
                    | "aggregate"
            )
        ) {
            return false;
        }
        if self.is_alias_column_list(sql, p, table) {
            return false;
        }
        if self.with_list_open()
            && (p.kind == Tok::Comma || matches!(pw, Some("with" | "recursive")))
        {
            return false;
        }
        true
    }

    /// Whether `name (`, after the token `p`, is an alias with a column list: only a table
    /// reference in FROM (or USING) takes one, so only where one ends — a `)` (`FROM f(1) g(i)`,
    /// `FROM (SELECT …) s(a)`, `FROM (a JOIN b ON …) j(x)`), `WITH ORDINALITY` (`FROM unnest(a)
    /// WITH ORDINALITY o(v, n)`), or a relation's name (a non-keyword or quoted identifier) where
    /// one starts: after `FROM`, `JOIN`, `ONLY`, `USING`, `,`, `(` or a qualifier's `.` (`FROM t
    /// a(x)`, `JOIN s.t a(x)`; a column definition's type modifier, `AS f(a int, b t(3))`, looks
    /// the same and calls nothing either).
    ///
    /// PostgreSQL has no postfix operators (removed in 14), but a word before a call is not
    /// always a name that ends an operand: the grammar takes some option names as plain
    /// identifiers followed by an expression — XMLTABLE's `COLUMNS x text PATH f(…)`
    /// (`xmltable_column_option_el: IDENT b_expr`; `"path"` too) — so a word anywhere else, and
    /// a literal, a parameter or a `]` (no valid statement has an alias there), is taken for
    /// what precedes a call: a call judged where the scan cannot tell is only an offload cost
    /// (an examiner's finding, red8 area c).
    fn is_alias_column_list(&self, sql: &str, p: Token, table: &BuiltinTable) -> bool {
        let src = sql.as_bytes();
        match p.kind {
            // (Not the end of an `OPERATOR(…)` clause: its operand follows.)
            Tok::RParen => self.operator_close != Some(p.start),
            Tok::Ident if bytes(src, p).eq_ignore_ascii_case(b"ordinality") => {
                self.chain_pred2.is_some_and(|w| {
                    w.kind == Tok::Ident && bytes(src, w).eq_ignore_ascii_case(b"with")
                })
            }
            Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent
                if is_relation_name(sql, p, self.chain_pred2, table) =>
            {
                self.chain_pred2.is_some_and(|b| match b.kind {
                    Tok::Comma | Tok::LParen | Tok::Dot => true,
                    Tok::Ident => {
                        let w = bytes(src, b);
                        [&b"from"[..], b"join", b"only", b"using"]
                            .iter()
                            .any(|k| w.eq_ignore_ascii_case(k))
                    }
                    _ => false,
                })
            }
            _ => false,
        }
    }

    pub(super) fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }
}

/// Whether the word `t` (after `before`) can be a relation's name in a FROM list: a quoted name,
/// a word after a qualifier's `.` (any keyword: `ColLabel`), or otherwise a `ColId` — a
/// non-keyword or an unreserved or column-name keyword (`FROM data d(x)`, `FROM version v(x)`:
/// tables may be named so without quotes).
fn is_relation_name(sql: &str, t: Token, before: Option<Token>, table: &BuiltinTable) -> bool {
    match t.kind {
        Tok::QuotedIdent | Tok::UnicodeIdent => true,
        Tok::Ident if before.is_some_and(|b| b.kind == Tok::Dot) => true,
        Tok::Ident => normalise(sql, t).is_some_and(|w| {
            matches!(
                table.keyword(w.as_bytes()),
                None | Some(flags::UNRESERVED | flags::COL_NAME)
            )
        }),
        _ => false,
    }
}

/// An operand directly before a name: a non-keyword identifier, a quoted name, `)`, `]`, a
/// literal or a parameter.
fn is_operand(sql: &str, t: Token, table: &BuiltinTable) -> bool {
    match t.kind {
        Tok::QuotedIdent
        | Tok::UnicodeIdent
        | Tok::RParen
        | Tok::RBracket
        | Tok::String
        | Tok::DollarString
        | Tok::Number
        | Tok::Param => true,
        Tok::Ident => normalise(sql, t).is_some_and(|w| table.keyword(w.as_bytes()).is_none()),
        _ => false,
    }
}

/// The text of a plain `'…'` literal (`''` read as `'`), or `None` for anything else: an `E''`,
/// `U&''` or dollar-quoted string, or a literal with a backslash, whose value would depend on
/// `standard_conforming_strings`.
fn plain_literal(sql: &str, t: Token) -> Option<String> {
    if t.kind != Tok::String {
        return None;
    }
    let text = sql.get(t.start..t.end)?;
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    if inner.contains('\\') {
        return None;
    }
    Some(inner.replace("''", "'"))
}

pub(super) fn bytes(src: &[u8], t: Token) -> &[u8] {
    src.get(t.start..t.end).unwrap_or(&[])
}

/// PostgreSQL's reserved and type/function-name keywords (`pg_keywords`, PostgreSQL 15; 16 adds
/// `system_user`): an unquoted one never names a relation. Lower case, as normalised.
fn is_reserved(w: &str) -> bool {
    matches!(
        w,
        "all"
            | "analyse"
            | "analyze"
            | "and"
            | "any"
            | "array"
            | "as"
            | "asc"
            | "asymmetric"
            | "authorization"
            | "binary"
            | "both"
            | "case"
            | "cast"
            | "check"
            | "collate"
            | "collation"
            | "column"
            | "concurrently"
            | "constraint"
            | "create"
            | "cross"
            | "current_catalog"
            | "current_date"
            | "current_role"
            | "current_schema"
            | "current_time"
            | "current_timestamp"
            | "current_user"
            | "default"
            | "deferrable"
            | "desc"
            | "distinct"
            | "do"
            | "else"
            | "end"
            | "except"
            | "false"
            | "fetch"
            | "for"
            | "foreign"
            | "freeze"
            | "from"
            | "full"
            | "grant"
            | "group"
            | "having"
            | "ilike"
            | "in"
            | "initially"
            | "inner"
            | "intersect"
            | "into"
            | "is"
            | "isnull"
            | "join"
            | "lateral"
            | "leading"
            | "left"
            | "like"
            | "limit"
            | "localtime"
            | "localtimestamp"
            | "natural"
            | "not"
            | "notnull"
            | "null"
            | "offset"
            | "on"
            | "only"
            | "or"
            | "order"
            | "outer"
            | "overlaps"
            | "placing"
            | "primary"
            | "references"
            | "returning"
            | "right"
            | "select"
            | "session_user"
            | "similar"
            | "some"
            | "symmetric"
            | "system_user"
            | "table"
            | "tablesample"
            | "then"
            | "to"
            | "trailing"
            | "true"
            | "union"
            | "unique"
            | "user"
            | "using"
            | "variadic"
            | "verbose"
            | "when"
            | "where"
            | "window"
            | "with"
    )
}
