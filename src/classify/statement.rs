//! Splitting a Query string into statements and classifying each one (SPEC §7, S-3, S-4).
//!
//! Pass 1 walks the token stream once, splits at top-level `;` and records, per statement, the
//! few facts the read/not-read verdict needs (locking clause, data-modifying CTE, INTO, calls to
//! write-list functions, effects). A statement that starts like a read is decided from those facts
//! alone — the common case, with no allocation and no AST. Other statements get pass 2: a small
//! strict parse of their head (BEGIN options, SET name/value, DECLARE … WITH HOLD, …) on a fresh
//! lexer over the statement's span. Whatever the parse does not recognise is `Unknown`, which is
//! never replica-safe.
//!
//! The rules are deliberately conservative (a false "not safe" only loses offload; a false "safe"
//! can send `set_config` or an advisory lock to a standby, which accepts them):
//! - any unquoted `INSERT`/`UPDATE`/`DELETE`/`MERGE` in a read ⇒ data-modifying CTE;
//! - any unquoted `INTO` in a read ⇒ SELECT INTO;
//! - `FOR` followed by `UPDATE`/`SHARE`/`NO`/`KEY` ⇒ locking clause;
//! - `name (` with `name` on the write list, whatever its qualification or quoting ⇒ write function;
//!   a `U&"…"(` call cannot be checked and counts as one.

use std::sync::Arc;

use super::lexer::{Lexer, Tok, Token};
use super::{
    Access, Classification, DiscardWhat, Effects, Isolation, Kind, Limits, NotSafe, Span,
    StatementInfo, Statements, TxnOptions, Var, WriteFunctions,
};

/// Keywords pass 1 cares about, recognised without allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kw {
    With,
    Insert,
    Update,
    Delete,
    Merge,
    Into,
    For,
    No,
    Key,
    Share,
    Select,
    Values,
    Table,
    Temp,
    Temporary,
    Global,
    Local,
    Unlogged,
    Begin,
    Atomic,
    Case,
    End,
    Create,
    Other,
}

/// Packs up to 8 bytes, ASCII-lower-cased by `| 0x20` (exact for letters; no other identifier
/// byte becomes a letter), so a keyword test is one integer compare.
const fn pack(b: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < b.len() && i < 8 {
        v |= ((b[i] | 0x20) as u64) << (8 * i);
        i += 1;
    }
    v
}

fn kw_of(b: &[u8]) -> Kw {
    if b.len() > 8 {
        return if b.eq_ignore_ascii_case(b"temporary") {
            Kw::Temporary
        } else {
            Kw::Other
        };
    }
    const NO: u64 = pack(b"no");
    const FOR: u64 = pack(b"for");
    const KEY: u64 = pack(b"key");
    const END: u64 = pack(b"end");
    const WITH: u64 = pack(b"with");
    const INTO: u64 = pack(b"into");
    const TEMP: u64 = pack(b"temp");
    const CASE: u64 = pack(b"case");
    const MERGE: u64 = pack(b"merge");
    const SHARE: u64 = pack(b"share");
    const TABLE: u64 = pack(b"table");
    const LOCAL: u64 = pack(b"local");
    const BEGIN: u64 = pack(b"begin");
    const INSERT: u64 = pack(b"insert");
    const UPDATE: u64 = pack(b"update");
    const DELETE: u64 = pack(b"delete");
    const SELECT: u64 = pack(b"select");
    const VALUES: u64 = pack(b"values");
    const GLOBAL: u64 = pack(b"global");
    const ATOMIC: u64 = pack(b"atomic");
    const CREATE: u64 = pack(b"create");
    const UNLOGGED: u64 = pack(b"unlogged");
    // Equal packs mean equal words: `x | 0x20` is a given lower-case letter only for that letter
    // in either case, and is never 0, so a longer identifier never packs like a shorter keyword.
    match pack(b) {
        NO => Kw::No,
        FOR => Kw::For,
        KEY => Kw::Key,
        END => Kw::End,
        WITH => Kw::With,
        INTO => Kw::Into,
        TEMP => Kw::Temp,
        CASE => Kw::Case,
        MERGE => Kw::Merge,
        SHARE => Kw::Share,
        TABLE => Kw::Table,
        LOCAL => Kw::Local,
        BEGIN => Kw::Begin,
        INSERT => Kw::Insert,
        UPDATE => Kw::Update,
        DELETE => Kw::Delete,
        SELECT => Kw::Select,
        VALUES => Kw::Values,
        GLOBAL => Kw::Global,
        ATOMIC => Kw::Atomic,
        CREATE => Kw::Create,
        UNLOGGED => Kw::Unlogged,
        _ => Kw::Other,
    }
}

fn is_read_start(k: Kw) -> bool {
    matches!(k, Kw::Select | Kw::Values | Kw::Table | Kw::With)
}

/// Effects of calling a function by its unqualified name (S-4). Independent of the configured
/// write list: the session tracks these whatever else is listed.
fn call_effects(name: &[u8]) -> (Effects, bool) {
    let eq = |k: &[u8]| name.eq_ignore_ascii_case(k);
    if eq(b"set_config") {
        return (Effects::CALLS_SET_CONFIG, false);
    }
    if eq(b"pg_advisory_lock")
        || eq(b"pg_advisory_lock_shared")
        || eq(b"pg_try_advisory_lock")
        || eq(b"pg_try_advisory_lock_shared")
    {
        return (Effects::ADVISORY_LOCK, false);
    }
    if eq(b"pg_advisory_xact_lock")
        || eq(b"pg_advisory_xact_lock_shared")
        || eq(b"pg_try_advisory_xact_lock")
        || eq(b"pg_try_advisory_xact_lock_shared")
    {
        return (Effects::ADVISORY_XACT_LOCK, false);
    }
    (Effects::NONE, eq(b"pg_advisory_unlock_all"))
}

/// Built-ins that run SQL given as text (verified on PostgreSQL 15: `query_to_xml('select
/// pg_advisory_lock(1)', …)` takes the lock). What they run cannot be seen, so a read calling
/// them is never replica-safe, whatever the configured write list says.
fn executes_sql_text(name: &[u8]) -> bool {
    let eq = |k: &[u8]| name.eq_ignore_ascii_case(k);
    eq(b"query_to_xml")
        || eq(b"query_to_xmlschema")
        || eq(b"query_to_xml_and_xmlschema")
        || eq(b"ts_stat")
}

fn starts_ci(t: &[u8], p: &[u8]) -> bool {
    t.len() >= p.len() && t[..p.len()].eq_ignore_ascii_case(p)
}

/// Effects named anywhere in `text` (strings and comments included), for statements that run
/// code we cannot parse: a DO block, or SQL text passed to a built-in. Over-reporting only keeps
/// a session on the primary; lock release is never inferred. Linear: at most a few short
/// comparisons per byte.
fn text_effects(text: &[u8]) -> Effects {
    let mut fx = Effects::NONE;
    for i in 0..text.len() {
        let t = &text[i..];
        match t[0] | 0x20 {
            b's' if starts_ci(t, b"set_config") => fx |= Effects::CALLS_SET_CONFIG,
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

fn starts_with_pg_temp(b: &[u8]) -> bool {
    b.len() >= 7 && b[..7].eq_ignore_ascii_case(b"pg_temp")
}

/// Whether a block comment is the routing hint (SPEC §8). Spaces around `=` are tolerated: a
/// false hint only sends a statement to the primary.
fn is_hint(comment: &[u8]) -> bool {
    let inner = comment
        .strip_prefix(b"/*")
        .and_then(|c| c.strip_suffix(b"*/"))
        .unwrap_or(&[]);
    let text = inner.trim_ascii();
    let Some(eq) = text.iter().position(|&b| b == b'=') else {
        return false;
    };
    let (k, v) = (&text[..eq], &text[eq + 1..]);
    k.trim_ascii().eq_ignore_ascii_case(b"route") && v.trim_ascii().eq_ignore_ascii_case(b"primary")
}

/// The facts pass 1 records for one statement.
#[derive(Clone, Debug)]
struct Scan {
    start: usize,
    end: usize,
    ntok: u32,
    /// First token (may be `(`) and the first token that is not `(`.
    first: Option<Token>,
    first_word: Option<Token>,
    lead_parens: u32,
    depth: u32,
    error: bool,
    semicolon_in_parens: bool,
    has_dml: bool,
    has_into: bool,
    into_temp: bool,
    lock: bool,
    write_fn: bool,
    /// Calls a built-in that runs SQL text (see [`executes_sql_text`]).
    executes_sql: bool,
    effects: Effects,
    unlock_all: bool,
    /// First SELECT/VALUES/TABLE/INSERT/UPDATE/DELETE/MERGE at depth 0 after the first token:
    /// for `WITH …` statements, the main statement.
    main0: Option<Kw>,
    for_at: u32,
    lock_tail_until: u32,
    /// 1: just after INTO; 2: after INTO + GLOBAL/LOCAL/TABLE/UNLOGGED; 3: after INTO … pg_temp*.
    into_state: u8,
    is_create: bool,
    begin_at: u32,
    atomic_seen: bool,
    atomic_depth: u32,
    prev: Option<Token>,
    prev2: Option<Token>,
    prev3: Option<Token>,
}

impl Scan {
    fn new() -> Scan {
        Scan {
            start: 0,
            end: 0,
            ntok: 0,
            first: None,
            first_word: None,
            lead_parens: 0,
            depth: 0,
            error: false,
            semicolon_in_parens: false,
            has_dml: false,
            has_into: false,
            into_temp: false,
            lock: false,
            write_fn: false,
            executes_sql: false,
            effects: Effects::NONE,
            unlock_all: false,
            main0: None,
            for_at: u32::MAX,
            lock_tail_until: 0,
            into_state: 0,
            is_create: false,
            begin_at: u32::MAX,
            atomic_seen: false,
            atomic_depth: 0,
            prev: None,
            prev2: None,
            prev3: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// A `;` ends the statement only outside parentheses and outside a `BEGIN ATOMIC` body
    /// (the server parses the whole string; this mirrors psql's splitting).
    fn splits_at_semicolon(&self) -> bool {
        self.depth == 0 && self.atomic_depth == 0
    }

    fn feed(
        &mut self,
        t: Token,
        src: &[u8],
        wf: &WriteFunctions,
        limits: &Limits,
    ) -> Result<(), ()> {
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
                    self.is_create = kw_of(bytes(src, t)) == Kw::Create;
                }
            }
        }
        let into_state = std::mem::take(&mut self.into_state);
        match t.kind {
            Tok::Error(_) | Tok::Other => self.error = true,
            Tok::LParen => {
                self.depth = self.depth.saturating_add(1);
                if self.depth > limits.max_paren_depth {
                    return Err(());
                }
                self.call(src, wf);
            }
            Tok::RParen => self.depth = self.depth.saturating_sub(1),
            Tok::Semicolon if self.depth > 0 => self.semicolon_in_parens = true,
            Tok::Dot if into_state == 3 => self.into_temp = true,
            Tok::QuotedIdent if into_state == 1 || into_state == 2 => {
                let inner = bytes(src, t).get(1..).unwrap_or(&[]);
                if starts_with_pg_temp(inner) {
                    self.into_state = 3;
                }
            }
            Tok::Ident => self.keyword(t, idx, src, into_state),
            _ => {}
        }
        if matches!(t.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent)
            && matches!(self.prev, Some(p) if p.kind == Tok::Dot)
        {
            self.attribute(t, src, wf);
        }
        self.prev3 = self.prev2;
        self.prev2 = self.prev;
        self.prev = Some(t);
        Ok(())
    }

    fn keyword(&mut self, t: Token, idx: u32, src: &[u8], into_state: u8) {
        let b = bytes(src, t);
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

    /// `x.name`: PostgreSQL's attribute notation calls a one-argument function `name(x)` —
    /// `(1::bigint).pg_advisory_lock` takes the lock, `('s'::regclass).nextval` advances the
    /// sequence (verified on PostgreSQL 15) — so a listed name after a dot counts as a call
    /// even without parentheses. Lock *release* is never inferred from it.
    fn attribute(&mut self, t: Token, src: &[u8], wf: &WriteFunctions) {
        if t.kind == Tok::UnicodeIdent {
            self.write_fn = true;
            return;
        }
        let name = name_of(src, t);
        if wf.contains(std::str::from_utf8(name).unwrap_or("")) {
            self.write_fn = true;
        }
        if executes_sql_text(name) {
            self.write_fn = true;
            self.executes_sql = true;
        }
        self.effects |= call_effects(name).0;
    }

    /// A `(` after a name is a function call: check the write list and the tracked effects.
    fn call(&mut self, src: &[u8], wf: &WriteFunctions) {
        let Some(p) = self.prev else { return };
        let name = match p.kind {
            Tok::Ident | Tok::QuotedIdent => name_of(src, p),
            Tok::UnicodeIdent => {
                // Its name needs escape processing: assume the worst.
                self.write_fn = true;
                return;
            }
            _ => return,
        };
        let name_str = std::str::from_utf8(name).unwrap_or("");
        if wf.contains(name_str) {
            self.write_fn = true;
        }
        if executes_sql_text(name) {
            self.write_fn = true;
            self.executes_sql = true;
        }
        let (fx, unlock_all) = call_effects(name);
        self.effects |= fx;
        if unlock_all {
            // Only the real one clears the locks: unqualified or pg_catalog-qualified.
            let qualified = matches!(self.prev2, Some(d) if d.kind == Tok::Dot);
            let pg_catalog = qualified
                && matches!(self.prev3, Some(s) if s.kind == Tok::Ident
                    && bytes(src, s).eq_ignore_ascii_case(b"pg_catalog"));
            if !qualified || pg_catalog {
                self.unlock_all = true;
            }
        }
    }

    fn span(&self) -> Span {
        Span::new(self.start, self.end)
    }
}

fn bytes(src: &[u8], t: Token) -> &[u8] {
    src.get(t.start..t.end).unwrap_or(&[])
}

/// An identifier's name: as written when unquoted (compared case-insensitively later), the text
/// between the quotes when quoted (`""` left doubled: no listed name contains a quote).
fn name_of(src: &[u8], t: Token) -> &[u8] {
    let b = bytes(src, t);
    if t.kind == Tok::QuotedIdent {
        b.get(1..b.len().saturating_sub(1)).unwrap_or(&[])
    } else {
        b
    }
}

/// Collects statements without allocating for the usual single one.
struct List {
    first: Option<StatementInfo>,
    rest: Vec<StatementInfo>,
}

impl List {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn push(&mut self, s: StatementInfo) {
        if self.first.is_none() {
            self.first = Some(s);
        } else {
            self.rest.push(s);
        }
    }

    fn into_statements(self, whole: Span) -> Statements {
        match self.first {
            None => Statements::One(StatementInfo {
                kind: Kind::Empty,
                not_safe: NotSafe::NotARead,
                effects: Effects::NONE,
                span: whole,
            }),
            Some(f) if self.rest.is_empty() => Statements::One(f),
            Some(f) => {
                let mut v = Vec::with_capacity(self.rest.len() + 1);
                v.push(f);
                v.extend(self.rest);
                Statements::Many(Arc::from(v))
            }
        }
    }
}

pub(crate) fn too_complex() -> Classification {
    Classification::single(StatementInfo::unknown(NotSafe::TooComplex))
}

/// One lexing of the whole string. `Err` = a limit was exceeded.
fn run(
    sql: &str,
    wf: &WriteFunctions,
    limits: &Limits,
    backslash_quotes: bool,
) -> Result<(Classification, bool), ()> {
    let src = sql.as_bytes();
    let mut lx = Lexer::range(sql, 0, sql.len(), backslash_quotes);
    let mut hint = false;
    let mut seen_token = false;
    let mut cur = Scan::new();
    let mut list = List {
        first: None,
        rest: Vec::new(),
    };
    while let Some(t) = lx.next_token() {
        match t.kind {
            Tok::LineComment => continue,
            Tok::BlockComment => {
                if !seen_token && !hint && is_hint(bytes(src, t)) {
                    hint = true;
                }
                continue;
            }
            _ => {}
        }
        seen_token = true;
        if t.kind == Tok::Semicolon && cur.splits_at_semicolon() {
            if !cur.is_empty() {
                list.push(finish(&cur, sql, backslash_quotes));
                if list.len() > limits.max_statements {
                    return Err(());
                }
            }
            cur = Scan::new();
            continue;
        }
        cur.feed(t, src, wf, limits)?;
    }
    if !cur.is_empty() {
        list.push(finish(&cur, sql, backslash_quotes));
        if list.len() > limits.max_statements {
            return Err(());
        }
    }
    let statements = list.into_statements(Span::new(0, sql.len()));
    Ok((
        Classification {
            statements,
            hint_primary: hint,
        },
        lx.saw_plain_backslash(),
    ))
}

/// Classifies `sql` under `limits` (see [`super::classify`]).
pub(crate) fn classify_str(sql: &str, wf: &WriteFunctions, limits: &Limits) -> Classification {
    if sql.len() > limits.max_sql_len || sql.len() > u32::MAX as usize {
        return too_complex();
    }
    let Ok((on, saw_backslash)) = run(sql, wf, limits, false) else {
        return too_complex();
    };
    if !saw_backslash {
        return on;
    }
    // A plain string held a backslash: with `standard_conforming_strings = off` the server
    // would see different string boundaries. Only agree to "safe" if both readings agree.
    let Ok((off, _)) = run(sql, wf, limits, true) else {
        return too_complex();
    };
    if on == off {
        return on;
    }
    merge_ambiguous(on, &off)
}

/// The two lexings disagree: keep the standard reading's statements, but nothing is safe, no
/// lock release is believed, and the other reading's effects are added.
fn merge_ambiguous(on: Classification, off: &Classification) -> Classification {
    let extra = Effects(off.effects().0 & !Effects::ADVISORY_UNLOCK_ALL.0);
    let mut v: Vec<StatementInfo> = on.statements().to_vec();
    for (i, s) in v.iter_mut().enumerate() {
        if s.kind == Kind::Read {
            s.kind = Kind::ReadNotSafe;
        }
        if s.not_safe == NotSafe::None {
            s.not_safe = NotSafe::Unparseable;
        }
        s.effects = Effects(s.effects.0 & !Effects::ADVISORY_UNLOCK_ALL.0);
        if i == 0 {
            s.effects |= extra;
        }
    }
    let statements = if v.len() == 1 {
        Statements::One(v[0])
    } else {
        Statements::Many(Arc::from(v))
    };
    Classification {
        statements,
        hint_primary: on.hint_primary || off.hint_primary,
    }
}

fn info(kind: Kind, not_safe: NotSafe, effects: Effects, span: Span) -> StatementInfo {
    StatementInfo {
        kind,
        not_safe,
        effects,
        span,
    }
}

/// The verdict for a statement whose first word (or EXPLAIN's inner first word) starts a read.
fn read_verdict(scan: &Scan, first_kw: Kw) -> (Kind, NotSafe) {
    if first_kw == Kw::With
        && matches!(
            scan.main0,
            Some(Kw::Insert | Kw::Update | Kw::Delete | Kw::Merge)
        )
    {
        return (Kind::Write, NotSafe::NotARead);
    }
    if scan.has_dml {
        (Kind::ReadNotSafe, NotSafe::DataModifyingCte)
    } else if scan.has_into {
        (Kind::ReadNotSafe, NotSafe::SelectInto)
    } else if scan.lock {
        (Kind::ReadNotSafe, NotSafe::LockingClause)
    } else if scan.write_fn {
        (Kind::ReadNotSafe, NotSafe::WriteFunction)
    } else {
        (Kind::Read, NotSafe::None)
    }
}

fn finish(scan: &Scan, sql: &str, bq: bool) -> StatementInfo {
    let src = sql.as_bytes();
    let span = scan.span();
    let mut fx = scan.effects;
    let is_do = matches!(scan.first_word, Some(t) if t.kind == Tok::Ident
        && bytes(src, t).eq_ignore_ascii_case(b"do"));
    let is_call = matches!(scan.first_word, Some(t) if t.kind == Tok::Ident
        && bytes(src, t).eq_ignore_ascii_case(b"call"));
    if scan.executes_sql || is_do {
        fx |= text_effects(src.get(scan.start..scan.end).unwrap_or(&[]));
    }
    if is_do || is_call {
        fx |= Effects::RUNS_CODE;
    }
    if scan.error || scan.semicolon_in_parens {
        return info(Kind::Unknown, NotSafe::Unparseable, fx, span);
    }
    let Some(fw) = scan.first_word else {
        return info(Kind::Unknown, NotSafe::Unparseable, fx, span);
    };
    let first_kw = if fw.kind == Tok::Ident {
        kw_of(bytes(src, fw))
    } else {
        Kw::Other
    };
    if is_read_start(first_kw) {
        let (kind, why) = read_verdict(scan, first_kw);
        if kind != Kind::Write {
            if scan.into_temp {
                fx |= Effects::CREATES_TEMP;
            }
            if scan.unlock_all {
                fx |= Effects::ADVISORY_UNLOCK_ALL;
            }
        }
        return info(kind, why, fx, span);
    }
    if scan.lead_parens > 0 || fw.kind != Tok::Ident {
        return info(Kind::Unknown, NotSafe::Unparseable, fx, span);
    }
    let mut c = Cursor::new(sql, scan, bq);
    let (kind, why, extra) =
        head(&mut c, scan).unwrap_or((Kind::Unknown, NotSafe::Unparseable, Effects::NONE));
    info(kind, why, fx | extra, span)
}

/// A token cursor over one statement, comments skipped.
struct Cursor<'a> {
    src: &'a [u8],
    lx: Lexer<'a>,
    last_end: usize,
}

impl<'a> Cursor<'a> {
    fn new(sql: &'a str, scan: &Scan, bq: bool) -> Cursor<'a> {
        Cursor {
            src: sql.as_bytes(),
            lx: Lexer::range(sql, scan.start, scan.end, bq),
            last_end: scan.start,
        }
    }

    fn peek(&self) -> Option<Token> {
        let mut lx = self.lx.clone();
        lx.find(|t| !t.is_comment())
    }

    fn peek2(&self) -> Option<Token> {
        let mut lx = self.lx.clone();
        let mut it = lx.by_ref().filter(|t| !t.is_comment());
        it.next()?;
        it.next()
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.lx.find(|t| !t.is_comment())?;
        self.last_end = t.end;
        Some(t)
    }

    fn is_kw(&self, t: Option<Token>, kw: &str) -> bool {
        matches!(t, Some(t) if t.kind == Tok::Ident && bytes(self.src, t).eq_ignore_ascii_case(kw.as_bytes()))
    }

    fn peek_kw(&self, kw: &str) -> bool {
        self.is_kw(self.peek(), kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.peek_kw(kw) {
            self.next();
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Option<()> {
        self.eat_kw(kw).then_some(())
    }

    fn eat(&mut self, kind: Tok) -> Option<Token> {
        match self.peek() {
            Some(t) if t.kind == kind => self.next(),
            _ => None,
        }
    }

    fn at_end(&self) -> bool {
        self.peek().is_none()
    }

    fn end(&self) -> Option<()> {
        self.at_end().then_some(())
    }

    fn text(&self, t: Token) -> &'a [u8] {
        bytes(self.src, t)
    }

    fn is_op(&self, t: Option<Token>, op: &[u8]) -> bool {
        matches!(t, Some(t) if t.kind == Tok::Operator && bytes(self.src, t) == op)
    }

    /// A ColId: identifier or quoted identifier.
    fn name(&mut self) -> Option<Token> {
        match self.peek() {
            Some(t) if matches!(t.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent) => {
                self.next()
            }
            _ => None,
        }
    }

    /// `ALL` (true) or a name (false), as CLOSE and DEALLOCATE take.
    fn all_or_name(&mut self) -> Option<bool> {
        if self.eat_kw("all") {
            Some(true)
        } else {
            self.name().map(|_| false)
        }
    }
}

type Head = (Kind, NotSafe, Effects);

fn write() -> Option<Head> {
    Some((Kind::Write, NotSafe::NotARead, Effects::NONE))
}

fn not_read(kind: Kind) -> Option<Head> {
    Some((kind, NotSafe::NotARead, Effects::NONE))
}

/// Pass 2: the head of a statement that does not start like a read. `None` = not understood.
fn head(c: &mut Cursor, scan: &Scan) -> Option<Head> {
    let first = c.next()?;
    let word = c.text(first);
    let is = |k: &str| word.eq_ignore_ascii_case(k.as_bytes());
    if is("explain") {
        explain(c, scan)
    } else if is("begin") {
        if !c.eat_kw("work") {
            c.eat_kw("transaction");
        }
        not_read(Kind::Begin(txn_modes(c, false)?))
    } else if is("start") {
        c.expect_kw("transaction")?;
        not_read(Kind::Begin(txn_modes(c, false)?))
    } else if is("commit") || is("end") {
        if is("commit") && c.eat_kw("prepared") {
            return write();
        }
        if !c.eat_kw("work") {
            c.eat_kw("transaction");
        }
        not_read(Kind::Commit { chain: chain(c)? })
    } else if is("rollback") || is("abort") {
        if is("rollback") && c.eat_kw("prepared") {
            return write();
        }
        if !c.eat_kw("work") {
            c.eat_kw("transaction");
        }
        // `ABORT TO …` is a syntax error on the server; only ROLLBACK has the TO form.
        if is("rollback") && c.eat_kw("to") {
            c.eat_kw("savepoint");
            c.name()?;
            c.end()?;
            return not_read(Kind::RollbackToSavepoint);
        }
        not_read(Kind::Rollback { chain: chain(c)? })
    } else if is("savepoint") {
        c.name()?;
        c.end()?;
        not_read(Kind::Savepoint)
    } else if is("release") {
        c.eat_kw("savepoint");
        c.name()?;
        c.end()?;
        not_read(Kind::ReleaseSavepoint)
    } else if is("set") {
        set(c)
    } else if is("reset") {
        reset(c)
    } else if is("show") {
        c.peek()?;
        not_read(Kind::Show)
    } else if is("discard") {
        let what = if c.eat_kw("all") {
            DiscardWhat::All
        } else if c.eat_kw("plans") {
            DiscardWhat::Plans
        } else if c.eat_kw("sequences") {
            DiscardWhat::Sequences
        } else if c.eat_kw("temp") || c.eat_kw("temporary") {
            DiscardWhat::Temp
        } else {
            return None;
        };
        c.end()?;
        not_read(Kind::Discard(what))
    } else if is("listen") {
        c.name()?;
        c.end()?;
        not_read(Kind::Listen)
    } else if is("unlisten") {
        let all = if c.is_op(c.peek(), b"*") {
            c.next();
            true
        } else {
            c.name()?;
            false
        };
        c.end()?;
        not_read(Kind::Unlisten { all })
    } else if is("declare") {
        declare(c)
    } else if is("fetch") || is("move") {
        not_read(Kind::Fetch)
    } else if is("close") {
        let all = c.all_or_name()?;
        c.end()?;
        not_read(Kind::Close { all })
    } else if is("prepare") {
        prepare(c)
    } else if is("execute") {
        c.name()?;
        not_read(Kind::Execute)
    } else if is("deallocate") {
        c.eat_kw("prepare");
        let all = c.all_or_name()?;
        c.end()?;
        not_read(Kind::Deallocate { all })
    } else if is("lock") {
        not_read(Kind::Lock)
    } else if is("copy") {
        not_read(Kind::Copy)
    } else if is("create") {
        Some((Kind::Write, NotSafe::NotARead, create_effects(c)))
    } else {
        // INSERT/UPDATE/DELETE/MERGE/ALTER/DROP/…/NOTIFY/CALL/DO/VACUUM/ANALYZE/…: or any
        // word we do not know. Never a read.
        write()
    }
}

/// `[AND [NO] CHAIN]` then the end of the statement.
fn chain(c: &mut Cursor) -> Option<bool> {
    let chain = if c.eat_kw("and") {
        let no = c.eat_kw("no");
        c.expect_kw("chain")?;
        !no
    } else {
        false
    };
    c.end()?;
    Some(chain)
}

/// `transaction_mode_list`: items separated by commas or just spaces, up to the statement end.
fn txn_modes(c: &mut Cursor, require_one: bool) -> Option<TxnOptions> {
    let mut o = TxnOptions::default();
    let mut n = 0;
    loop {
        if c.at_end() {
            break;
        }
        if n > 0 && c.eat(Tok::Comma).is_some() && c.at_end() {
            return None;
        }
        if c.eat_kw("isolation") {
            c.expect_kw("level")?;
            let iso = if c.eat_kw("serializable") {
                Isolation::Serializable
            } else if c.eat_kw("repeatable") {
                c.expect_kw("read")?;
                Isolation::RepeatableRead
            } else if c.eat_kw("read") {
                if c.eat_kw("committed") {
                    Isolation::ReadCommitted
                } else if c.eat_kw("uncommitted") {
                    Isolation::ReadUncommitted
                } else {
                    return None;
                }
            } else {
                return None;
            };
            o.isolation = Some(iso);
        } else if c.eat_kw("read") {
            o.access = Some(if c.eat_kw("only") {
                Access::ReadOnly
            } else if c.eat_kw("write") {
                Access::ReadWrite
            } else {
                return None;
            });
        } else if c.eat_kw("deferrable") {
            o.deferrable = Some(true);
        } else if c.eat_kw("not") {
            c.expect_kw("deferrable")?;
            o.deferrable = Some(false);
        } else {
            return None;
        }
        n += 1;
    }
    if require_one && n == 0 {
        return None;
    }
    Some(o)
}

fn explain(c: &mut Cursor, scan: &Scan) -> Option<Head> {
    let mut analyze = false;
    let options_follow = c.peek().is_some_and(|t| t.kind == Tok::LParen)
        && !c.peek2().is_some_and(|t| {
            t.kind == Tok::LParen || (t.kind == Tok::Ident && is_read_start(kw_of(c.text(t))))
        });
    if options_follow {
        c.next();
        let mut depth = 1u32;
        loop {
            let t = c.next()?;
            match t.kind {
                Tok::LParen => depth += 1,
                Tok::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Ident => {
                    let w = c.text(t);
                    if w.eq_ignore_ascii_case(b"analyze") || w.eq_ignore_ascii_case(b"analyse") {
                        // Even `ANALYZE false`: being wrong here only loses offload.
                        analyze = true;
                    }
                }
                _ => {}
            }
        }
    } else {
        loop {
            if c.eat_kw("analyze") || c.eat_kw("analyse") {
                analyze = true;
            } else if !c.eat_kw("verbose") {
                break;
            }
        }
    }
    let mut inner = c.next()?;
    while inner.kind == Tok::LParen {
        inner = c.next()?;
    }
    let k = if inner.kind == Tok::Ident {
        kw_of(c.text(inner))
    } else {
        Kw::Other
    };
    if analyze {
        // EXPLAIN ANALYZE runs the statement: SELECT INTO TEMP / CREATE TEMP … AS create.
        let mut fx = Effects::NONE;
        if k == Kw::Create {
            fx |= create_effects(c);
        } else if scan.into_temp {
            fx |= Effects::CREATES_TEMP;
        }
        return Some((Kind::ReadNotSafe, NotSafe::ExplainAnalyze, fx));
    }
    if !is_read_start(k) {
        return write();
    }
    // EXPLAIN without ANALYZE runs nothing, so no SELECT INTO TEMP or lock release effects.
    let (kind, why) = read_verdict(scan, k);
    Some((kind, why, Effects::NONE))
}

fn set(c: &mut Cursor) -> Option<Head> {
    let mut local = false;
    let next_is = |c: &Cursor, k: &str| c.is_kw(c.peek2(), k);
    if c.peek_kw("session") && !next_is(c, "authorization") && !next_is(c, "characteristics") {
        c.next();
    } else if c.eat_kw("local") {
        local = true;
    }
    let t = c.peek()?;
    let generic_follows = |c: &Cursor| {
        let n = c.peek2();
        c.is_op(n, b"=") || c.is_kw(n, "to")
    };
    if c.peek_kw("transaction") && !generic_follows(c) {
        c.next();
        if c.eat_kw("snapshot") {
            // Imports a snapshot of the primary: state the engine does not model.
            return write();
        }
        return not_read(Kind::SetTransaction(txn_modes(c, true)?));
    }
    if c.peek_kw("session") && next_is(c, "characteristics") {
        c.next();
        c.next();
        c.expect_kw("as")?;
        c.expect_kw("transaction")?;
        return not_read(Kind::SetSessionCharacteristics(txn_modes(c, true)?));
    }
    if c.peek_kw("session") && next_is(c, "authorization") {
        c.next();
        let n = c.next()?;
        let name = Span::new(t.start, n.end);
        let value = value_list(c)?;
        return set_kind(Var::SessionAuthorization, name, value, local);
    }
    if c.peek_kw("time") && next_is(c, "zone") {
        c.next();
        let n = c.next()?;
        let name = Span::new(t.start, n.end);
        let value = zone_value(c)?;
        return set_kind(Var::TimeZone, name, value, local);
    }
    if c.peek_kw("constraints") && !generic_follows(c) {
        // Transaction-scoped constraint timing; not a session setting.
        return write();
    }
    if c.peek_kw("xml") && next_is(c, "option") {
        c.next();
        let n = c.next()?;
        let name = Span::new(t.start, n.end);
        let value = value_list(c)?;
        return set_kind(Var::Other, name, value, local);
    }
    for (word, var, may_be_empty) in [
        ("role", Var::Role, false),
        ("names", Var::ClientEncoding, true),
        // `SET SCHEMA 'x'` is the SQL-standard spelling of search_path.
        ("schema", Var::SearchPath, false),
    ] {
        if c.peek_kw(word) && !generic_follows(c) {
            c.next();
            let name = Span::new(t.start, t.end);
            let value = if may_be_empty && c.at_end() {
                Span::new(t.end, t.end)
            } else {
                value_list(c)?
            };
            return set_kind(var, name, value, local);
        }
    }
    // Generic: var_name { = | TO } var_list | DEFAULT.
    let (var, name) = var_name(c)?;
    if !(c.is_op(c.peek(), b"=") || c.peek_kw("to")) {
        return None;
    }
    c.next();
    let value = value_list(c)?;
    set_kind(var, name, value, local)
}

fn set_kind(var: Var, name: Span, value: Span, local: bool) -> Option<Head> {
    not_read(Kind::Set {
        var,
        name,
        value,
        local,
    })
}

/// `ColId ('.' ColId)*` → the recognised variable and its span as written.
fn var_name(c: &mut Cursor) -> Option<(Var, Span)> {
    let first = c.name()?;
    let mut last = first;
    let mut dotted = false;
    while c.eat(Tok::Dot).is_some() {
        last = c.name()?;
        dotted = true;
    }
    let name_text = |t: Token| -> &[u8] {
        let b = c.text(t);
        if t.kind == Tok::Ident {
            b
        } else {
            b.get(1..b.len().saturating_sub(1)).unwrap_or(&[])
        }
    };
    let var = if dotted {
        // Placeholder settings (`myapp.x`): never one of ours, unless a `polar_*` prefix.
        let raw = c.src.get(first.start..last.end).unwrap_or(&[]);
        let s: String = String::from_utf8_lossy(raw)
            .chars()
            .filter(|&ch| ch != '"')
            .collect();
        match Var::from_name(&s) {
            Var::Polar => Var::Polar,
            _ => Var::Other,
        }
    } else if first.kind == Tok::UnicodeIdent {
        Var::Other
    } else {
        Var::from_name(std::str::from_utf8(name_text(first)).unwrap_or(""))
    };
    Some((var, Span::new(first.start, last.end)))
}

/// `var_list`: items (`[+|-] number`, string, name) separated by commas, to the statement end.
fn value_list(c: &mut Cursor) -> Option<Span> {
    let start = c.peek()?.start;
    loop {
        let t = c.next()?;
        match t.kind {
            Tok::Operator if c.text(t) == b"-" || c.text(t) == b"+" => {
                let n = c.next()?;
                if n.kind != Tok::Number {
                    return None;
                }
            }
            Tok::Number | Tok::String | Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent => {}
            _ => return None,
        }
        if c.at_end() {
            break;
        }
        c.eat(Tok::Comma)?;
    }
    Some(Span::new(start, c.last_end))
}

/// `zone_value`: a string, a name, a signed number, `INTERVAL '…' [HOUR TO MINUTE]`,
/// `INTERVAL(p) '…'`, LOCAL, DEFAULT.
fn zone_value(c: &mut Cursor) -> Option<Span> {
    let start = c.peek()?.start;
    while let Some(t) = c.next() {
        match t.kind {
            Tok::Number | Tok::String | Tok::Ident | Tok::LParen | Tok::RParen => {}
            Tok::Operator if c.text(t) == b"-" || c.text(t) == b"+" => {}
            _ => return None,
        }
    }
    Some(Span::new(start, c.last_end))
}

fn reset(c: &mut Cursor) -> Option<Head> {
    let t = c.peek()?;
    let kind = if c.eat_kw("all") {
        Kind::ResetAll
    } else if c.peek_kw("time") && c.is_kw(c.peek2(), "zone") {
        c.next();
        let n = c.next()?;
        Kind::Reset {
            var: Var::TimeZone,
            name: Span::new(t.start, n.end),
        }
    } else if c.peek_kw("session") && c.is_kw(c.peek2(), "authorization") {
        c.next();
        let n = c.next()?;
        Kind::Reset {
            var: Var::SessionAuthorization,
            name: Span::new(t.start, n.end),
        }
    } else if c.peek_kw("transaction") && c.is_kw(c.peek2(), "isolation") {
        c.next();
        c.next();
        let n = c.next()?;
        if !c.is_kw(Some(n), "level") {
            return None;
        }
        Kind::Reset {
            var: Var::TransactionIsolation,
            name: Span::new(t.start, n.end),
        }
    } else {
        let (var, name) = var_name(c)?;
        Kind::Reset { var, name }
    };
    c.end()?;
    not_read(kind)
}

/// `DECLARE name [BINARY] [ASENSITIVE|INSENSITIVE] [[NO] SCROLL] CURSOR [WITH|WITHOUT HOLD] FOR q`
fn declare(c: &mut Cursor) -> Option<Head> {
    c.name()?;
    loop {
        if c.eat_kw("cursor") {
            break;
        }
        if !(c.eat_kw("binary")
            || c.eat_kw("insensitive")
            || c.eat_kw("asensitive")
            || c.eat_kw("scroll")
            || c.eat_kw("no"))
        {
            return None;
        }
    }
    let with_hold = if c.eat_kw("with") {
        c.expect_kw("hold")?;
        true
    } else {
        if c.eat_kw("without") {
            c.expect_kw("hold")?;
        }
        false
    };
    c.expect_kw("for")?;
    c.peek()?;
    not_read(Kind::DeclareCursor { with_hold })
}

/// `PREPARE TRANSACTION 'gid'` (two-phase commit: a write) or `PREPARE name [(types)] AS stmt`.
fn prepare(c: &mut Cursor) -> Option<Head> {
    if c.peek_kw("transaction") && matches!(c.peek2(), Some(t) if t.kind == Tok::String) {
        return write();
    }
    c.name()?;
    if c.eat(Tok::LParen).is_some() {
        let mut depth = 1u32;
        while depth > 0 {
            match c.next()?.kind {
                Tok::LParen => depth += 1,
                Tok::RParen => depth -= 1,
                _ => {}
            }
        }
    }
    c.expect_kw("as")?;
    c.peek()?;
    not_read(Kind::Prepare)
}

/// CREATE [OR REPLACE] [GLOBAL|LOCAL] TEMP|TEMPORARY …, or an object named `pg_temp*.x` in the
/// statement's head (before the first `(` or `AS`).
fn create_effects(c: &mut Cursor) -> Effects {
    if c.eat_kw("or") {
        c.eat_kw("replace");
    }
    if !c.eat_kw("global") {
        c.eat_kw("local");
    }
    if c.eat_kw("temp") || c.eat_kw("temporary") {
        return Effects::CREATES_TEMP;
    }
    let mut prev_temp_schema = false;
    while let Some(t) = c.next() {
        match t.kind {
            Tok::LParen => break,
            Tok::Ident if c.text(t).eq_ignore_ascii_case(b"as") => break,
            Tok::Dot if prev_temp_schema => return Effects::CREATES_TEMP,
            _ => {}
        }
        let b = c.text(t);
        prev_temp_schema = match t.kind {
            Tok::Ident => starts_with_pg_temp(b),
            Tok::QuotedIdent => starts_with_pg_temp(b.get(1..).unwrap_or(&[])),
            _ => false,
        };
    }
    Effects::NONE
}
