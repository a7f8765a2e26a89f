//! Pass 2 of classification: a small strict parse of the head of a statement that does not start
//! like a read (BEGIN options, SET name and value, RESET, DISCARD, DECLARE … WITH HOLD, PREPARE,
//! EXPLAIN's options, CREATE TEMP …), over a fresh lexer on the statement's span. Whatever it does
//! not recognise is `None`, which the caller turns into `Unknown` — never replica-safe.

use super::ident::normalise;
use super::keywords::{is_read_start, kw_of, Kw};
use super::lexer::{Lexer, Tok, Token};
use super::scan::{bytes, starts_with_pg_temp, Scan};
use super::statement::read_verdict;
use super::{
    Access, DiscardWhat, Effects, Isolation, Kind, NameKey, NotSafe, Span, TxnOptions, Var,
};

/// A token cursor over one statement, comments skipped.
pub(super) struct Cursor<'a> {
    sql: &'a str,
    src: &'a [u8],
    lx: Lexer<'a>,
    last_end: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(sql: &'a str, scan: &Scan, bq: bool) -> Cursor<'a> {
        Cursor {
            sql,
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

    /// A name, and its key as the server reads it (S-4).
    fn name_key(&mut self) -> Option<NameKey> {
        let t = self.name()?;
        Some(normalise(self.sql, t).map_or(NameKey::UNREADABLE, |n| NameKey::of(n.as_bytes())))
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

pub(super) type Head = (Kind, NotSafe, Effects);

fn write() -> Option<Head> {
    Some((Kind::Write, NotSafe::NotARead, Effects::NONE))
}

fn not_read(kind: Kind) -> Option<Head> {
    Some((kind, NotSafe::NotARead, Effects::NONE))
}

/// After ALTER/DROP: whether the object kind is one no catalogue the host reports holds (an
/// index, a role, a database, a tablespace, the system's configuration), so the statement leaves
/// the catalogues as they were: ALTER INDEX changes no predicate or expression, and an index
/// dropped only leaves a verdict stricter than it need be until the next report. (CREATE INDEX:
/// [`index_effects`].) Consumes nothing.
fn changes_no_catalogue(c: &Cursor) -> bool {
    let Some(t) = c.peek() else {
        return false;
    };
    let w = c.text(t);
    [
        &b"index"[..],
        b"role",
        b"user",
        b"group",
        b"database",
        b"tablespace",
        b"system",
    ]
    .iter()
    .any(|k| w.eq_ignore_ascii_case(k))
}

/// Pass 2: the head of a statement that does not start like a read. `None` = not understood.
pub(super) fn head(c: &mut Cursor, scan: &Scan) -> Option<Head> {
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
            // The prepared transaction may have run DDL: the catalogues change now.
            return Some((Kind::Write, NotSafe::NotARead, Effects::CHANGES_CATALOG));
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
        let channel = c.name_key()?;
        c.end()?;
        not_read(Kind::Listen { channel })
    } else if is("unlisten") {
        let (all, channel) = if c.is_op(c.peek(), b"*") {
            c.next();
            (true, NameKey::UNREADABLE)
        } else {
            (false, c.name_key()?)
        };
        c.end()?;
        not_read(Kind::Unlisten { all, channel })
    } else if is("declare") {
        declare(c)
    } else if is("fetch") || is("move") {
        not_read(Kind::Fetch)
    } else if is("close") {
        let (all, cursor) = if c.eat_kw("all") {
            (true, NameKey::UNREADABLE)
        } else {
            (false, c.name_key()?)
        };
        c.end()?;
        not_read(Kind::Close { all, cursor })
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
    } else if is("alter") || is("drop") {
        let fx = if changes_no_catalogue(c) {
            Effects::NONE
        } else {
            Effects::CHANGES_CATALOG
        };
        Some((Kind::Write, NotSafe::NotARead, fx))
    } else if is("load") {
        Some((Kind::Write, NotSafe::NotARead, Effects::LOADS_LIBRARY))
    } else if is("import") {
        // IMPORT FOREIGN SCHEMA creates foreign tables.
        Some((Kind::Write, NotSafe::NotARead, Effects::CHANGES_CATALOG))
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
        } else if scan.has_into && !scan.has_dml {
            fx |= Effects::CHANGES_CATALOG;
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
    let seeds = var == Var::Other && names_seed(c, name);
    let mut head = set_kind(var, name, value, local)?;
    if seeds {
        head.2 |= Effects::SEEDS_RANDOM;
    }
    Some(head)
}

/// `seed`, in any case, quoted or not: `SET seed` / `RESET seed` call `setseed()`. It is a
/// setting `pg_settings` does not list, so no capture sees it (S-4: BACKEND_LOCAL, like `setseed()`).
fn names_seed(c: &Cursor, name: Span) -> bool {
    let raw = c
        .src
        .get(name.start as usize..name.end as usize)
        .unwrap_or(&[]);
    let raw = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .unwrap_or(raw);
    raw.eq_ignore_ascii_case(b"seed")
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
        // Placeholder and extension settings (`myapp.x`): never one of ours, unless a `polar_*`
        // prefix.
        let raw = c.src.get(first.start..last.end).unwrap_or(&[]);
        let s: String = String::from_utf8_lossy(raw)
            .chars()
            .filter(|&ch| ch != '"')
            .collect();
        Var::from_name(&s)
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
            // A dollar-quoted string is a string constant to the server's grammar too.
            Tok::Number
            | Tok::String
            | Tok::DollarString
            | Tok::Ident
            | Tok::QuotedIdent
            | Tok::UnicodeIdent => {}
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
            Tok::Number
            | Tok::String
            | Tok::DollarString
            | Tok::Ident
            | Tok::LParen
            | Tok::RParen => {}
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
        if var == Var::Other && names_seed(c, name) {
            c.end()?;
            return Some((
                Kind::Reset { var, name },
                NotSafe::NotARead,
                Effects::SEEDS_RANDOM,
            ));
        }
        Kind::Reset { var, name }
    };
    c.end()?;
    not_read(kind)
}

/// `DECLARE name [BINARY] [ASENSITIVE|INSENSITIVE] [[NO] SCROLL] CURSOR [WITH|WITHOUT HOLD] FOR q`
fn declare(c: &mut Cursor) -> Option<Head> {
    let cursor = c.name_key()?;
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
    not_read(Kind::DeclareCursor { with_hold, cursor })
}

/// `PREPARE TRANSACTION 'gid'` (two-phase commit: a write) or `PREPARE name [(types)] AS stmt`.
fn prepare(c: &mut Cursor) -> Option<Head> {
    if c.peek_kw("transaction") && matches!(c.peek2(), Some(t) if t.kind == Tok::String) {
        return Some((Kind::Write, NotSafe::NotARead, Effects::PREPARES_TXN));
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

/// CREATE [UNIQUE] INDEX …: the host's catalogue links a table to the functions of its indexes'
/// predicates and expressions, and to the btree operator families of their operators (a
/// planner folds an IMMUTABLE predicate and proves a read's condition implies it: a standby
/// whose function answers otherwise answers from an index that lacks rows), so an index with a
/// `WHERE` or an element in parentheses of its own (`lower(x)`, `(a + b)`; an operator class's
/// parameters count too) changes the verdicts of its table's reads. One over plain columns
/// changes none. Neither makes a name resolve otherwise ([`Effects::KEEPS_NAMES`]).
fn index_effects(c: &mut Cursor) -> Effects {
    let changes = Effects(Effects::CHANGES_CATALOG.0 | Effects::KEEPS_NAMES.0);
    let mut depth = 0u32;
    while let Some(t) = c.next() {
        match t.kind {
            Tok::LParen => {
                depth += 1;
                if depth >= 2 {
                    return changes;
                }
            }
            Tok::RParen => depth = depth.saturating_sub(1),
            Tok::Ident if depth == 0 && c.text(t).eq_ignore_ascii_case(b"where") => return changes,
            _ => {}
        }
    }
    Effects::NONE
}

/// CREATE [OR REPLACE] [GLOBAL|LOCAL] TEMP|TEMPORARY …, or an object named `pg_temp*.x` in the
/// statement's head (before the first `(` or `AS`): a temporary object; any other CREATE but of
/// an index, a role, a database or a tablespace may change the host's catalogues.
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
    if c.eat_kw("unique") || c.eat_kw("index") {
        return index_effects(c);
    }
    if changes_no_catalogue(c) {
        return Effects::NONE;
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
    Effects::CHANGES_CATALOG
}
