//! Splitting a Query string into statements and classifying each one (SPEC §7, S-3, S-4).
//!
//! Pass 1 (`scan.rs`) walks the token stream once, splits at top-level `;` and records, per
//! statement, the few facts the read/not-read verdict needs. A statement that starts like a read
//! is decided from those facts alone — the common case, with no allocation and no AST. Other
//! statements get pass 2 (`head.rs`): a small strict parse of their head. Whatever the parse does
//! not recognise is `Unknown`, which is never replica-safe.
//!
//! The result is a function of the text and the F-policy only, so it is cached by text;
//! the calls whose verdict depends on the database are carried on it and finished per database
//! (`functions.rs`).

use std::sync::Arc;

use super::builtins;
use super::functions::{Call, Rules};
use super::head::{head, Cursor};
use super::ident::normalise;
use super::keywords::{is_read_start, kw_of, Kw};
use super::lexer::{Lexer, Tok, Token};
use super::scan::{bytes, hint_of, text_effects, Hint, Scan};
use super::{Classification, Effects, Kind, Limits, NotSafe, Span, StatementInfo, Statements};

/// Collects statements without allocating for the usual single one.
struct List {
    first: Option<StatementInfo>,
    rest: Vec<StatementInfo>,
    calls: Vec<Call>,
    /// Some statement's verdict read its raw text, literals and comments included.
    reads_text: bool,
}

impl List {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn push(&mut self, (s, reads_text): (StatementInfo, bool), calls: Vec<Call>) {
        self.reads_text |= reads_text;
        let i = self.len() as u32;
        if self.first.is_none() {
            self.first = Some(s);
        } else {
            self.rest.push(s);
        }
        if self.calls.is_empty() && i == 0 {
            self.calls = calls;
        } else {
            self.calls
                .extend(calls.into_iter().map(|c| c.in_statement(i)));
        }
    }

    /// Ends statement `cur`: its classification and calls join the list, and the names it
    /// mentions (S-7: judged against the database's sequences; S-6: its objects that hide code),
    /// when `names` asks.
    fn end(&mut self, cur: &mut Scan, sql: &str, backslash_quotes: bool, names: bool) {
        let info = finish(cur, sql, backslash_quotes);
        let mut calls = std::mem::take(&mut cur.calls);
        if names {
            if let Some(c) = std::mem::take(&mut cur.names).into_call(cur.hint_reader) {
                calls.push(c);
            }
        }
        self.push(info, calls);
    }

    fn into_statements(self, whole: Span) -> (Statements, Option<Arc<[Call]>>) {
        let calls = (!self.calls.is_empty()).then(|| Arc::from(self.calls));
        let statements = match self.first {
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
        };
        (statements, calls)
    }
}

pub(crate) fn too_complex() -> Classification {
    Classification::single(StatementInfo::unknown(NotSafe::TooComplex))
}

/// One lexing of the whole string: the classification, whether a plain string held a
/// backslash, and whether a verdict read raw text. `Err` = a limit was exceeded.
fn run(
    sql: &str,
    policy: Rules<'_>,
    limits: &Limits,
    backslash_quotes: bool,
) -> Result<(Classification, bool, bool), ()> {
    let src = sql.as_bytes();
    let mut lx = Lexer::range(sql, 0, sql.len(), backslash_quotes);
    let mut hint = None;
    let mut seen_token = false;
    let mut cur = Scan::new(false);
    let mut list = List {
        first: None,
        rest: Vec::new(),
        calls: Vec::new(),
        reads_text: false,
    };
    let reader = |h: Option<Hint>| h == Some(Hint::Reader);
    while let Some(t) = lx.next_token() {
        match t.kind {
            Tok::LineComment => continue,
            Tok::BlockComment => {
                if !seen_token && hint.is_none() {
                    hint = hint_of(bytes(src, t));
                    cur = Scan::new(reader(hint));
                }
                continue;
            }
            _ => {}
        }
        seen_token = true;
        if t.kind == Tok::Semicolon && cur.splits_at_semicolon() {
            if !cur.is_empty() {
                cur.end_calls(policy);
                list.end(&mut cur, sql, backslash_quotes, policy.record_names);
                if list.len() > limits.max_statements {
                    return Err(());
                }
            }
            cur = Scan::new(reader(hint));
            continue;
        }
        cur.feed(t, sql, policy, limits)?;
    }
    if !cur.is_empty() {
        cur.end_calls(policy);
        list.end(&mut cur, sql, backslash_quotes, policy.record_names);
        if list.len() > limits.max_statements {
            return Err(());
        }
    }
    let reads_text = list.reads_text;
    let (statements, calls) = list.into_statements(Span::new(0, sql.len()));
    Ok((
        Classification {
            statements,
            hint_primary: hint == Some(Hint::Primary),
            hint_reader: reader(hint),
            calls,
        },
        lx.saw_plain_backslash(),
        reads_text,
    ))
}

/// Classifies `sql` from its text alone (see [`super::classify`]); the result still has to be
/// finished for a database (`Rules::finish`).
pub(crate) fn classify_str(sql: &str, policy: Rules<'_>, limits: &Limits) -> Classification {
    classify_str_ext(sql, policy, limits).0
}

/// [`classify_str`], and whether the verdict read a statement's raw text (a DO body, SQL text a
/// built-in runs: literals and comments included), so that it depends on more than the text's
/// shape (`shape.rs`).
pub(crate) fn classify_str_ext(
    sql: &str,
    policy: Rules<'_>,
    limits: &Limits,
) -> (Classification, bool) {
    if sql.len() > limits.max_sql_len || sql.len() > u32::MAX as usize {
        return (too_complex(), false);
    }
    if !encoding_ambiguous(sql) {
        return classify_lexed(sql, policy, limits);
    }
    // The server may read some of these bytes as the second byte of a character (see
    // [`encoding_ambiguous`]): nothing is safe, the statement may run code the engine cannot
    // see, and what the other reading calls counts (a set_config, an advisory lock).
    let (on, on_reads) = classify_lexed(sql, policy, limits);
    let mut alt = sql.as_bytes().to_vec();
    for i in 1..alt.len() {
        if alt[i - 1] >= 0x80 && is_non_ident_trail(alt[i]) {
            alt[i] = b'x';
        }
    }
    // ASCII replaced by ASCII: still UTF-8.
    let Ok(alt) = String::from_utf8(alt) else {
        return (too_complex(), true);
    };
    let (other, other_reads) = classify_lexed(&alt, policy, limits);
    (merge_ambiguous(on, &other, true), on_reads || other_reads)
}

/// Whether `sql` holds a byte that a client-only multibyte encoding may read as the second byte
/// of a character and that would change a token boundary if it did: an ASCII byte in
/// 0x40..=0x7E that is not an identifier character (backslash, `@`, `[`, `]`, `^`, backtick,
/// `{`, `|`, `}`, `~`), right after a byte with the high bit set. In SJIS, BIG5, GBK, GB18030, UHC and JOHAB the second byte of a character
/// may be any of them; the server converts the Query string to UTF-8 before it lexes it, so
/// where the engine, which sees only bytes, reads `E'…\'` as an escaped quote, the server reads
/// a character and the end of the string (measured: under client_encoding SJIS, `SELECT
/// E'ﾃ―', set_config(…) --'` ran set_config on a reader). The bytes are valid UTF-8 (a
/// multibyte character followed by, say, a backslash), so the encoding cannot be told from them.
pub(crate) fn encoding_ambiguous(sql: &str) -> bool {
    if sql.is_ascii() {
        return false;
    }
    sql.as_bytes()
        .windows(2)
        .any(|w| w[0] >= 0x80 && is_non_ident_trail(w[1]))
}

fn is_non_ident_trail(b: u8) -> bool {
    matches!(
        b,
        b'@' | b'[' | b'\\' | b']' | b'^' | b'`' | b'{' | b'|' | b'}' | b'~'
    )
}

/// [`classify_str_ext`] for a text whose bytes every client encoding reads alike.
fn classify_lexed(sql: &str, policy: Rules<'_>, limits: &Limits) -> (Classification, bool) {
    let Ok((on, saw_backslash, reads_text)) = run(sql, policy, limits, false) else {
        return (too_complex(), false);
    };
    if !saw_backslash {
        return (on, reads_text);
    }
    // A plain string held a backslash: with `standard_conforming_strings = off` the server
    // would see different string boundaries. Only agree to "safe" if both readings agree.
    let Ok((off, _, off_reads)) = run(sql, policy, limits, true) else {
        return (too_complex(), true);
    };
    let reads_text = reads_text || off_reads;
    if on == off {
        return (on, reads_text);
    }
    (merge_ambiguous(on, &off, false), reads_text)
}

/// The two lexings disagree: keep the standard reading's statements, but nothing is safe, no
/// lock release is believed, and the other reading's effects are added (and, with `runs_code`,
/// code the engine cannot see into: neither reading need be the server's).
fn merge_ambiguous(on: Classification, off: &Classification, runs_code: bool) -> Classification {
    let mut extra = Effects(off.effects().0 & !Effects::UNAMBIGUOUS_ONLY.0);
    if runs_code {
        extra |= Effects::RUNS_CODE | Effects::UNSEEN_CODE;
    }
    let mut v: Vec<StatementInfo> = on.statements().to_vec();
    for (i, s) in v.iter_mut().enumerate() {
        s.not_safe_for(NotSafe::Unparseable);
        if s.not_safe == NotSafe::None {
            s.not_safe = NotSafe::Unparseable;
        }
        s.effects = Effects(s.effects.0 & !Effects::UNAMBIGUOUS_ONLY.0);
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
        hint_reader: on.hint_reader && off.hint_reader,
        // Nothing is safe any more; the calls still say what code may run.
        calls: on.calls,
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

/// Whether a DO body says CREATE, ALTER or DROP anywhere, between bytes that end a word — `$`
/// among them, so `$e$CREATE …$e$` counts (over-reporting only moves E-2's epoch of names).
fn says_ddl(text: &[u8]) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    [&b"create"[..], b"alter", b"drop"].iter().any(|w| {
        text.windows(w.len()).enumerate().any(|(i, win)| {
            win.eq_ignore_ascii_case(w)
                && (i == 0 || !ident(text[i - 1]))
                && text.get(i + w.len()).is_none_or(|&b| !ident(b))
        })
    })
}

/// The verdict for a statement whose first word (or EXPLAIN's inner first word) starts a read,
/// as far as the text tells (the database's catalogue may still make it not safe).
pub(super) fn read_verdict(scan: &Scan, first_kw: Kw) -> (Kind, NotSafe) {
    if first_kw == Kw::With
        && matches!(
            scan.main0,
            Some(Kw::Insert | Kw::Update | Kw::Delete | Kw::Merge)
        )
    {
        return (Kind::Write, NotSafe::NotARead);
    }
    // `/* route=reader */` declares the statement's functions read-safe: not the never-safe
    // ones, and none of the other rules.
    let declared = scan.hint_reader;
    let why = if scan.has_dml {
        NotSafe::DataModifyingCte
    } else if scan.has_into {
        NotSafe::SelectInto
    } else if scan.lock {
        NotSafe::LockingClause
    } else if scan.write_fn {
        NotSafe::WriteFunction
    } else if scan.bad_ident {
        NotSafe::Unparseable
    } else if scan.server_dependent && !declared {
        NotSafe::ServerDependent
    } else if scan.volatile_fn && !declared {
        NotSafe::VolatileFunction
    } else {
        return (Kind::Read, NotSafe::None);
    };
    (Kind::ReadNotSafe, why)
}

/// Whether `sql[start..end]` is `SELECT` of one or more calls, each of a
/// [`builtins::SESSION_ONLY`] built-in — unqualified or `pg_catalog.`-qualified, spelt as the
/// server folds it — with constant arguments only: strings, numbers (a leading `-` the server's
/// grammar folds into the constant), parameters, `TRUE`, `FALSE`, `NULL`. Nothing else: no
/// FROM, no clause, no alias, no cast (a user type's input code), no nested call, no operator —
/// the statement then reads no data and runs no code but the built-ins' (SPEC P-6,
/// [`NotSafe::SessionFunction`]).
fn only_session_calls(sql: &str, start: usize, end: usize, bq: bool) -> bool {
    let src = sql.as_bytes();
    let mut lx = Lexer::range(sql, start, end, bq);
    let mut next = move || loop {
        match lx.next_token() {
            Some(t) if t.is_comment() => continue,
            t => return t,
        }
    };
    let word = |t: Option<Token>, w: &[u8]| {
        t.is_some_and(|t| t.kind == Tok::Ident && bytes(src, t).eq_ignore_ascii_case(w))
    };
    let name = |t: Token| {
        matches!(t.kind, Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent)
            .then(|| normalise(sql, t))
            .flatten()
    };
    if !word(next(), b"select") {
        return false;
    }
    loop {
        // [pg_catalog .] name (
        let Some(mut t) = next() else { return false };
        if name(t).is_some_and(|n| n.as_str() == "pg_catalog") {
            if !matches!(next(), Some(d) if d.kind == Tok::Dot) {
                return false;
            }
            let Some(after) = next() else { return false };
            t = after;
        }
        if !name(t).is_some_and(|n| builtins::SESSION_ONLY.contains(&n.as_str())) {
            return false;
        }
        if !matches!(next(), Some(p) if p.kind == Tok::LParen) {
            return false;
        }
        // [constant {, constant}] )
        let mut t = next();
        if !matches!(t, Some(p) if p.kind == Tok::RParen) {
            loop {
                if matches!(t, Some(o) if o.kind == Tok::Operator && bytes(src, o) == b"-") {
                    t = next();
                    if !matches!(t, Some(n) if n.kind == Tok::Number) {
                        return false;
                    }
                }
                let constant = match t {
                    Some(c) => {
                        matches!(
                            c.kind,
                            Tok::String | Tok::DollarString | Tok::Number | Tok::Param
                        ) || [&b"true"[..], b"false", b"null"]
                            .iter()
                            .any(|w| word(Some(c), w))
                    }
                    None => false,
                };
                if !constant {
                    return false;
                }
                match next() {
                    Some(c) if c.kind == Tok::Comma => t = next(),
                    Some(p) if p.kind == Tok::RParen => break,
                    _ => return false,
                }
            }
        }
        // , another call — or the end
        match next() {
            None => return true,
            Some(c) if c.kind == Tok::Comma => {}
            Some(_) => return false,
        }
    }
}

/// A statement's classification, and whether it read the statement's raw text.
fn finish(scan: &Scan, sql: &str, bq: bool) -> (StatementInfo, bool) {
    let mut reads_text = false;
    let i = finish_into(scan, sql, bq, &mut reads_text);
    (i, reads_text)
}

fn finish_into(scan: &Scan, sql: &str, bq: bool, reads_text: &mut bool) -> StatementInfo {
    let src = sql.as_bytes();
    let span = scan.span();
    let mut fx = scan.effects;
    let first_is = |w: &[u8]| {
        matches!(scan.first_word, Some(t) if t.kind == Tok::Ident
            && bytes(src, t).eq_ignore_ascii_case(w))
    };
    let is_do = first_is(b"do");
    if scan.executes_sql || is_do {
        *reads_text = true;
        fx |= text_effects(src.get(scan.start..scan.end).unwrap_or(&[]));
    }
    if is_do {
        // A DO block may run DDL whatever its words say: built by `format()` or a string
        // concatenated at run time, behind a dollar quote, or in a function it calls (an
        // examiner's probe, 2026-12-07: `DO $$BEGIN PERFORM mk(); END$$` replaced a function
        // that the standby then ran for every new session until the next periodic report).
        // The engine cannot see into it, so it counts as DDL: the database's reads stay on the
        // writer until the host reports the catalogue again. It moves E-2's epoch of names only
        // when its words say CREATE, ALTER or DROP: moving it for every DO kept every session's
        // writer-parsed statements on the primary for good after a DO that ran only DML (a
        // review's probe, 2026-12-07: 0 of 60 reads offloaded).
        fx |= Effects::CHANGES_CATALOG;
        if !says_ddl(src.get(scan.start..scan.end).unwrap_or(&[])) {
            fx |= Effects::KEEPS_NAMES;
        }
    }
    // S-5/S-6: code the engine cannot see into (EXECUTE runs a prepared statement whose calls
    // are not tracked).
    if scan.executes_sql || scan.listed_code || is_do || first_is(b"call") || first_is(b"execute") {
        fx |= Effects::RUNS_CODE | Effects::UNSEEN_CODE;
    } else if scan.unseen {
        // Functions: judged when the classification is finished for a database.
        fx |= Effects::RUNS_CODE;
    }
    if fx.contains(Effects::CALLS_SET_CONFIG)
        && scan.set_config_named > 0
        && !scan.set_config_opaque
        && scan.set_config_attributes == 0
        && !scan.executes_sql
        && !is_do
    {
        fx |= Effects::SETS_CONFIG_BY_NAME;
        if scan.set_config_placeholder {
            fx |= Effects::SETS_PLACEHOLDER_BY_NAME;
        }
        if scan.set_config_parse_setting {
            fx |= Effects::SETS_PARSE_SETTING_BY_NAME;
        }
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
        let (kind, mut why) = read_verdict(scan, first_kw);
        if why == NotSafe::WriteFunction
            && first_kw == Kw::Select
            && only_session_calls(sql, scan.start, scan.end, bq)
        {
            why = NotSafe::SessionFunction;
        }
        if kind != Kind::Write {
            // SELECT … INTO creates a table: a temporary one (S-4), or one in the database's
            // catalogue, which may shadow a name other statements resolved (S-6, E-2).
            if scan.into_temp {
                fx |= Effects::CREATES_TEMP;
            } else if why == NotSafe::SelectInto {
                fx |= Effects::CHANGES_CATALOG;
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
