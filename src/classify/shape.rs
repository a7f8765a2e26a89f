//! The shape of a statement text: the text with every literal whose value cannot change a
//! verdict (and every comment after the first token) replaced by a one-byte marker, so that
//! statements that differ only in such literals — every pgbench statement, most ORM traffic —
//! share one cached classification (`cache.rs`).
//!
//! The shape is found in one pass over the bytes that takes the common tokens by the lexer's own
//! rules and every other token from the lexer itself (the same token boundaries the
//! classification sees), hashing as it goes; the key bytes are only written out when an entry is
//! stored. A text may also be matched along a known key ([`Shape::scan_as`], for keys that pass
//! [`guidable`]): the kept bytes compared as they are and only the elided tokens lexed. What stays in the key, because the classification inspects it by value (SPEC §7):
//! - every token that is not a string, dollar-quoted string or number: identifiers (including
//!   `U&"…" UESCAPE '<c>'`, which the lexer makes one token), keywords, operators, parameters;
//! - the comments before the first token (`/* route=… */` hints are read there);
//! - a literal right after `(` after `current_setting`, `set_config`, a quoted name or a `U&`
//!   name: the argument of `current_setting` decides S-7, and `set_config`'s first says which
//!   setting it changes, S-5 (a quoted or `U&` name may spell them);
//! - a string or dollar-quoted literal that may spell a date/time input of the transaction's
//!   start (`now`, `today`, `tomorrow`, `yesterday`; any with a backslash or a `U&` prefix):
//!   it makes a read unsplittable (`lexer::may_spell_txn_time`, P-5);
//! - white space (it moves positions, and a line comment ends at a newline).
//!
//! Texts the shape cannot stand for are not shaped at all: a plain literal with a backslash (with
//! `standard_conforming_strings = off` the server reads different string boundaries, so the
//! classifier checks both readings), an unterminated token, more literals than [`MAX_ELIDED`].
//! Verdicts that read the raw text of a statement — a DO body, SQL text passed to a built-in —
//! are reported by the classifier and never stored under a shape (`statement.rs`).
//!
//! Positions in a cached classification (statement spans, SET name and value) are kept in the
//! shape's coordinates — each elided token one byte long — and mapped back onto each text.

use std::hash::Hasher;

use rustc_hash::FxHasher;

use super::lexer::{self, Lexer, Tok, Token};
use super::{Classification, Kind, Span, StatementInfo, Statements};

/// Most elided tokens a shaped text may have (a longer `IN (…)` list is classified by text).
pub(super) const MAX_ELIDED: usize = 48;

/// Marker bytes: never in UTF-8 text, so a key cannot be confused with text.
const MARK_NUMBER: u8 = 0xF8;
const MARK_STRING: u8 = 0xF9;
const MARK_ESTRING: u8 = 0xFA;
const MARK_NSTRING: u8 = 0xFB;
const MARK_BITSTRING: u8 = 0xFC;
const MARK_USTRING: u8 = 0xFD;
const MARK_DOLLAR: u8 = 0xFE;
const MARK_COMMENT: u8 = 0xFF;

/// The shape of one text: its hash and where its elided tokens are.
pub(super) struct Shape {
    pub(super) hash: u64,
    /// Length of the key (the shape's bytes).
    pub(super) key_len: usize,
    n: usize,
    /// `(start, len)` of each elided token, in order (texts are at most 64 KiB here).
    elided: [(u16, u16); MAX_ELIDED],
}

/// Whether a name token may spell `current_setting` or `set_config`: a literal right after
/// `name (` is then kept in the key (a quoted or `U&` name may spell them too).
fn may_name_setting(src: &[u8], t: Token) -> bool {
    match t.kind {
        Tok::QuotedIdent | Tok::UnicodeIdent => true,
        Tok::Ident => src.get(t.start..t.end).is_some_and(names_setting_function),
        _ => false,
    }
}

/// `current_setting` (its argument decides S-7) or `set_config` (its first argument says which
/// setting it changes, S-5), in any case.
#[inline(always)]
fn names_setting_function(word: &[u8]) -> bool {
    match word.len() {
        15 => word.eq_ignore_ascii_case(b"current_setting"),
        10 => word.eq_ignore_ascii_case(b"set_config"),
        _ => false,
    }
}

/// What the shape scanner needs to know about a token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A string, dollar-quoted string or number.
    Literal,
    Comment,
    LParen,
    /// A name that may spell `current_setting`.
    Setting,
    /// Anything else that stays in the key.
    Kept,
}

/// The token at `i` (a token start, not white space): its end and class, found by the lexer's
/// rules in the lexer's order (inline for the common tokens, the lexer itself for the rest).
/// `None`: the text is not shaped (an unterminated token, a plain literal with a backslash).
#[inline(always)]
fn token_at(sql: &str, i: usize) -> Option<(usize, Class)> {
    let src = sql.as_bytes();
    let b = *src.get(i)?;
    let b1 = src.get(i + 1).copied().unwrap_or(0);
    Some(match b {
        b'0'..=b'9' => (lexer::number_end(src, i), Class::Literal),
        b'.' if b1.is_ascii_digit() => (lexer::number_end(src, i), Class::Literal),
        b'\'' => {
            let mut backslash = false;
            match lexer::quoted_end(src, i + 1, b'\'', false, &mut backslash) {
                // A plain literal with a backslash is not shaped (module documentation).
                Some(e) if !backslash => (e, literal_class(&src[i..e])),
                _ => return None,
            }
        }
        b'(' => (i + 1, Class::LParen),
        b')' | b'[' | b']' | b',' | b';' | b':' | b'.' => (i + 1, Class::Kept),
        // Prefixed strings and `U&` names, comments: the lexer's.
        b'e' | b'E' | b'n' | b'N' | b'b' | b'B' | b'x' | b'X' if b1 == b'\'' => lexed(sql, i)?,
        b'u' | b'U' if b1 == b'&' => lexed(sql, i)?,
        _ if lexer::is_ident_start(b) => {
            let e = lexer::ident_end(src, i + 1);
            let word = src.get(i..e).unwrap_or(&[]);
            if names_setting_function(word) {
                (e, Class::Setting)
            } else {
                (e, Class::Kept)
            }
        }
        b'-' if b1 == b'-' => lexed(sql, i)?,
        b'/' if b1 == b'*' => lexed(sql, i)?,
        _ if lexer::is_op_char(b) => (lexer::operator_end(src, i), Class::Kept),
        _ => lexed(sql, i)?,
    })
}

/// The lexer's next token from `at` (a token start): its end and class.
#[inline(never)]
fn lexed(sql: &str, at: usize) -> Option<(usize, Class)> {
    let mut lx = Lexer::range(sql, at, sql.len(), false);
    let t = lx.next_token()?;
    if lx.saw_plain_backslash() || t.start != at || t.end <= at {
        return None;
    }
    Some((t.end, class_of(sql.as_bytes(), t)?))
}

/// A string literal's class: kept in the key when it may spell a date/time input of the
/// transaction's start, which the classification reads by value (`Effects::TXN_VALUE`).
fn literal_class(raw: &[u8]) -> Class {
    if lexer::may_spell_txn_time(raw) {
        Class::Kept
    } else {
        Class::Literal
    }
}

fn class_of(src: &[u8], t: Token) -> Option<Class> {
    Some(match t.kind {
        Tok::String | Tok::DollarString => literal_class(src.get(t.start..t.end)?),
        Tok::Number => Class::Literal,
        Tok::LineComment | Tok::BlockComment => Class::Comment,
        Tok::LParen => Class::LParen,
        Tok::Error(_) => return None,
        _ if may_name_setting(src, t) => Class::Setting,
        _ => Class::Kept,
    })
}

impl Shape {
    /// An empty shape, to be filled by [`Shape::scan`].
    pub(super) const EMPTY: Shape = Shape {
        hash: 0,
        key_len: 0,
        n: 0,
        elided: [(0, 0); MAX_ELIDED],
    };

    /// The shape of `sql`, or `None` when no shape may stand for it (see the module
    /// documentation).
    #[cfg(test)]
    pub(super) fn of(sql: &str) -> Option<Shape> {
        let mut sh = Shape::EMPTY;
        sh.scan(sql).then_some(sh)
    }

    /// Fills `self` with the shape of `sql`; `false` when no shape may stand for it (see the
    /// module documentation).
    ///
    /// One pass over the bytes, hashing the key as it goes. The common tokens (white space,
    /// names, numbers, plain strings, operators, punctuation) are found inline by the lexer's
    /// own rules (`lexer.rs`'s `ident_end`, `number_end`, `quoted_end`, `operator_end`, chosen
    /// in the lexer's order); every other token is handed to the lexer itself, one token from
    /// its start: the boundaries are the lexer's, token for token.
    pub(super) fn scan(&mut self, sql: &str) -> bool {
        let src = sql.as_bytes();
        if src.len() > u16::MAX as usize {
            return false;
        }
        self.n = 0;
        self.key_len = 0;
        let mut h = FxHasher::default();
        let mut last = 0usize;
        let mut i = 0usize;
        // About the two non-comment tokens before this one: whether there was one, whether the
        // last was `(`, whether the one before it may name `current_setting`.
        let mut seen_token = false;
        let (mut prev_lparen, mut prev_setting, mut prev2_setting) = (false, false, false);
        loop {
            while src.get(i).is_some_and(|&b| lexer::is_space(b)) {
                i += 1;
            }
            if i >= src.len() {
                break;
            }
            let start = i;
            let Some((end, class)) = token_at(sql, i) else {
                return false;
            };
            i = end;
            let elide = match class {
                Class::Comment => seen_token,
                Class::Literal => !(prev_lparen && prev2_setting),
                _ => false,
            };
            if class != Class::Comment {
                seen_token = true;
                prev2_setting = prev_setting;
                prev_setting = class == Class::Setting;
                prev_lparen = class == Class::LParen;
            }
            if !elide {
                continue;
            }
            let Some(e) = self.elided.get_mut(self.n) else {
                return false;
            };
            *e = (start as u16, (i - start) as u16);
            self.n += 1;
            let seg = src.get(last..start).unwrap_or(&[]);
            h.write(seg);
            h.write_u8(marker_at(src, start));
            self.key_len += seg.len() + 1;
            last = i;
        }
        let seg = src.get(last..).unwrap_or(&[]);
        h.write(seg);
        self.key_len += seg.len();
        self.hash = mix(h.finish() ^ self.n as u64);
        true
    }

    /// Fills `self` with the shape of `sql` if `key` is its key, walking the text along the
    /// key: every kept segment compared as it is, the token at each marker lexed by the
    /// scanner's rules and checked to be an elided token of the marker's kind that ends where
    /// the next segment starts. `false`: `key` is not this text's key (or cannot be checked
    /// this way), never a different shape. `key` must pass [`guidable`]; `hash` is its hash.
    ///
    /// Why this gives [`Shape::scan`]'s shape: the text is the key's segments with tokens of
    /// the markers' kinds between them, so it lexes token for token like the text the key was
    /// made from — a kept token's extent could only differ where it looks at the bytes after
    /// it, i.e. into the next elided token, and [`guidable`] admits only keys where no kept
    /// token right before a marker does (white space, one-byte punctuation, an operator before
    /// a non-comment, which stops at any byte a literal can start with). The same tokens have
    /// the same classes, so the same are elided; and the key is compared exactly, in full.
    pub(super) fn scan_as(&mut self, sql: &str, key: &[u8], hash: u64) -> bool {
        let src = sql.as_bytes();
        if src.len() > u16::MAX as usize {
            return false;
        }
        self.n = 0;
        let (mut i, mut k) = (0usize, 0usize);
        loop {
            // The kept segment: the text and the key agree byte for byte up to the key's next
            // marker. A text is UTF-8, which has no byte from 0xF8 up, so no run of agreeing
            // bytes contains a marker: compare eight at a time, then byte by byte.
            while let (Some(a), Some(b)) = (src.get(i..i + 8), key.get(k..k + 8)) {
                let x = word(a) ^ word(b);
                if x != 0 {
                    let j = (x.trailing_zeros() / 8) as usize;
                    i += j;
                    k += j;
                    break;
                }
                i += 8;
                k += 8;
            }
            while let (Some(a), Some(b)) = (src.get(i), key.get(k)) {
                if a != b {
                    break;
                }
                i += 1;
                k += 1;
            }
            let Some(&m) = key.get(k) else { break };
            if m < MARK_NUMBER {
                // A kept byte differs (or the text ended before it).
                return false;
            }
            k += 1;
            // The token here must start here (not after white space) and be elided as `m`.
            if src.get(i).is_none_or(|&b| lexer::is_space(b)) || marker_at(src, i) != m {
                return false;
            }
            let Some((end, class)) = token_at(sql, i) else {
                return false;
            };
            let want = if m == MARK_COMMENT {
                Class::Comment
            } else {
                Class::Literal
            };
            if class != want {
                return false;
            }
            let Some(e) = self.elided.get_mut(self.n) else {
                return false;
            };
            *e = (i as u16, (end - i) as u16);
            self.n += 1;
            i = end;
        }
        if i != src.len() {
            return false;
        }
        self.key_len = key.len();
        self.hash = hash;
        true
    }

    /// The shape as the lexer's token stream gives it: the reference the scanner is tested
    /// against.
    #[cfg(test)]
    fn of_by_lexer(sql: &str) -> Option<Shape> {
        let src = sql.as_bytes();
        if src.len() > u16::MAX as usize {
            return None;
        }
        let mut lx = Lexer::range(sql, 0, src.len(), false);
        let mut h = FxHasher::default();
        let mut shape = Shape::EMPTY;
        let mut last = 0usize;
        let mut seen_token = false;
        let (mut prev_lparen, mut prev_setting, mut prev2_setting) = (false, false, false);
        while let Some(t) = lx.next_token() {
            let elide = match t.kind {
                Tok::LineComment | Tok::BlockComment => seen_token,
                Tok::String | Tok::DollarString
                    if lexer::may_spell_txn_time(&src[t.start..t.end]) =>
                {
                    false
                }
                Tok::String | Tok::DollarString | Tok::Number => !(prev_lparen && prev2_setting),
                Tok::Error(_) => return None,
                _ => false,
            };
            if !t.is_comment() {
                seen_token = true;
                prev2_setting = prev_setting;
                prev_setting = may_name_setting(src, t);
                prev_lparen = t.kind == Tok::LParen;
            }
            if !elide {
                continue;
            }
            let e = shape.elided.get_mut(shape.n)?;
            *e = (t.start as u16, (t.end - t.start) as u16);
            shape.n += 1;
            let seg = src.get(last..t.start)?;
            h.write(seg);
            h.write_u8(marker_at(src, t.start));
            shape.key_len += seg.len() + 1;
            last = t.end;
        }
        if lx.saw_plain_backslash() {
            return None;
        }
        let seg = src.get(last..)?;
        h.write(seg);
        shape.key_len += seg.len();
        shape.hash = mix(h.finish() ^ shape.n as u64);
        Some(shape)
    }

    fn elided(&self) -> &[(u16, u16)] {
        self.elided.get(..self.n).unwrap_or(&[])
    }

    /// The key: the text with each elided token replaced by its marker.
    pub(super) fn key(&self, sql: &str) -> Box<[u8]> {
        let src = sql.as_bytes();
        let mut k = Vec::with_capacity(self.key_len);
        let mut last = 0;
        for &(s, l) in self.elided() {
            let (s, l) = (s as usize, l as usize);
            k.extend_from_slice(src.get(last..s).unwrap_or(&[]));
            k.push(marker_at(src, s));
            last = s + l;
        }
        k.extend_from_slice(src.get(last..).unwrap_or(&[]));
        k.into_boxed_slice()
    }

    /// Whether `key` is this text's key (compared in place, without building it).
    pub(super) fn matches(&self, sql: &str, key: &[u8]) -> bool {
        if key.len() != self.key_len {
            return false;
        }
        let src = sql.as_bytes();
        let mut last = 0;
        let mut k = 0;
        for &(s, l) in self.elided() {
            let (s, l) = (s as usize, l as usize);
            let seg = src.get(last..s).unwrap_or(&[]);
            if key.get(k..k + seg.len()) != Some(seg)
                || key.get(k + seg.len()) != Some(&marker_at(src, s))
            {
                return false;
            }
            k += seg.len() + 1;
            last = s + l;
        }
        key.get(k..) == src.get(last..)
    }

    /// A position of the text (a token boundary) in the shape's coordinates; `None` inside an
    /// elided token.
    fn in_shape(&self, p: u32) -> Option<u32> {
        let mut d = 0u32;
        for &(s, l) in self.elided() {
            let (s, l) = (u32::from(s), u32::from(l));
            if s + l <= p {
                d += l - 1;
            } else if s < p {
                return None;
            } else {
                break;
            }
        }
        Some(p - d)
    }

    /// A position in the shape's coordinates back in the text.
    fn in_text(&self, q: u32) -> u32 {
        let mut d = 0u32;
        for &(s, l) in self.elided() {
            let (s, l) = (u32::from(s), u32::from(l));
            if q <= s - d {
                break;
            }
            d += l - 1;
        }
        q + d
    }

    /// The classification of this text in the shape's coordinates, if it may be stored under
    /// the shape: one statement whose positions all map (and map back).
    pub(super) fn store(&self, c: &Classification) -> Option<Classification> {
        let Statements::One(s) = &c.statements else {
            return None;
        };
        let map = |sp: Span| -> Option<Span> {
            let m = Span {
                start: self.in_shape(sp.start)?,
                end: self.in_shape(sp.end)?,
            };
            (self.in_text(m.start) == sp.start && self.in_text(m.end) == sp.end).then_some(m)
        };
        let stored = map_spans(s, map)?;
        Some(Classification {
            statements: Statements::One(stored),
            hint_primary: c.hint_primary,
            hint_reader: c.hint_reader,
            calls: c.calls.clone(),
        })
    }

    /// A stored classification mapped onto this text.
    pub(super) fn restore(&self, c: &Classification) -> Option<Classification> {
        let Statements::One(s) = &c.statements else {
            return None;
        };
        let map = |sp: Span| {
            Some(Span {
                start: self.in_text(sp.start),
                end: self.in_text(sp.end),
            })
        };
        Some(Classification {
            statements: Statements::One(map_spans(s, map)?),
            hint_primary: c.hint_primary,
            hint_reader: c.hint_reader,
            calls: c.calls.clone(),
        })
    }
}

fn marker_at(src: &[u8], start: usize) -> u8 {
    // Re-derived from the token's first byte, as `marker` does from its kind.
    match src.get(start) {
        Some(b'0'..=b'9' | b'.') => MARK_NUMBER,
        Some(b'$') => MARK_DOLLAR,
        Some(b'-' | b'/') => MARK_COMMENT,
        Some(&b) => match b | 0x20 {
            b'e' => MARK_ESTRING,
            b'n' => MARK_NSTRING,
            b'b' | b'x' => MARK_BITSTRING,
            b'u' => MARK_USTRING,
            _ => MARK_STRING,
        },
        None => MARK_STRING,
    }
}

/// Whether texts may be matched against `key` directly ([`Shape::scan_as`]): the byte before
/// each marker is none, another marker (an elided token, whose extent `scan_as` checks), white
/// space, one-byte punctuation, or an operator character before a marker other than a comment
/// (an operator stops at every byte a string, dollar-quoted string or number starts with, and
/// only looks further for `--` or `/*`). Identifier characters (`x1` is one name), `.` (`.5` is
/// a number), quotes (`'a''b'` is one string) and `$` (`$12` is one parameter) are not.
pub(super) fn guidable(key: &[u8]) -> bool {
    let mut prev: Option<u8> = None;
    for &b in key {
        if b >= MARK_NUMBER {
            let ok = match prev {
                None => true,
                Some(p) if p >= MARK_NUMBER || lexer::is_space(p) => true,
                Some(b'(' | b')' | b'[' | b']' | b',' | b';' | b':') => true,
                Some(p) => lexer::is_op_char(p) && b != MARK_COMMENT,
            };
            if !ok {
                return false;
            }
        }
        prev = Some(b);
    }
    true
}

/// Every position a statement carries, mapped.
fn map_spans(s: &StatementInfo, f: impl Fn(Span) -> Option<Span>) -> Option<StatementInfo> {
    let kind = match s.kind {
        Kind::Set {
            var,
            name,
            value,
            local,
        } => Kind::Set {
            var,
            name: f(name)?,
            value: f(value)?,
            local,
        },
        Kind::Reset { var, name } => Kind::Reset {
            var,
            name: f(name)?,
        },
        k => k,
    };
    Some(StatementInfo {
        kind,
        span: f(s.span)?,
        ..*s
    })
}

/// MurmurHash3's fmix64: every bit of the result depends on every bit of the input.
pub(super) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Eight bytes as one word, for comparing in steps of eight (`b` has at least eight).
fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sql: &str) -> Option<Vec<u8>> {
        Shape::of(sql).map(|s| s.key(sql).into_vec())
    }

    #[test]
    fn literals_share_a_shape_and_the_rest_does_not() {
        let sql = "SELECT * FROM t WHERE a = 1 AND b = 'x'";
        let other = "SELECT * FROM t WHERE a = 123456 AND b = 'it''s'";
        let (a, b) = (Shape::of(sql).unwrap(), Shape::of(other).unwrap());
        assert_eq!(a.hash, b.hash);
        assert_eq!(key(sql), key(other));
        assert!(b.matches(other, &a.key(sql)));
        assert!(!b.matches(other, &Shape::of("SELECT 1").unwrap().key("SELECT 1")));
        for other in [
            "SELECT * FROM t WHERE a = 1 AND c = 'x'",
            "SELECT * FROM t WHERE a = 1 AND b = E'x'",
            "SELECT * FROM t WHERE a = 1 AND b = $$x$$",
            "SELECT * FROM t WHERE a = 1  AND b = 'x'",
            "SELECT * FROM t WHERE a = 'x' AND b = 1",
            "SELECT * FROM t WHERE a = $1 AND b = 'x'",
        ] {
            assert_ne!(key(other), key(sql), "{other}");
        }
    }

    #[test]
    fn verdict_literals_and_leading_comments_stay_in_the_key() {
        assert_ne!(
            key("SELECT current_setting('in_hot_standby')"),
            key("SELECT current_setting('work_mem')")
        );
        assert_ne!(
            key("SELECT \"current_setting\"('in_hot_standby')"),
            key("SELECT \"current_setting\"('work_mem')")
        );
        assert_ne!(
            key("SELECT U&\"x\" UESCAPE '!' FROM t"),
            key("SELECT U&\"x\" UESCAPE '#' FROM t")
        );
        assert_ne!(
            key("/* route=reader */ SELECT 1"),
            key("/* route=other */ SELECT 1")
        );
        // Later comments are elided.
        assert_eq!(key("SELECT 1 /* a */"), key("SELECT 2 /* trace=99 */"));
    }

    #[test]
    fn unshapeable_texts() {
        assert!(Shape::of(r"SELECT 'a\' FROM t").is_none());
        assert!(Shape::of("SELECT 'abc").is_none());
        let many = format!(
            "SELECT * FROM t WHERE a IN ({})",
            vec!["1"; MAX_ELIDED + 1].join(",")
        );
        assert!(Shape::of(&many).is_none());
        assert!(Shape::of(r"SELECT E'\'' FROM t").is_some());
    }

    #[test]
    fn positions_map_both_ways() {
        let sql = "SET search_path = 'abc', 12345";
        let s = Shape::of(sql).unwrap();
        // `'abc'` starts at 18 and ends at 23; `12345` starts at 25 and ends at 30.
        assert_eq!(s.in_shape(18), Some(18));
        assert_eq!(s.in_shape(23), Some(19));
        assert_eq!(s.in_shape(25), Some(21));
        assert_eq!(s.in_shape(30), Some(22));
        assert_eq!(s.in_shape(20), None);
        for p in [0, 18, 23, 25, 30] {
            assert_eq!(s.in_text(s.in_shape(p).unwrap()), p);
        }
    }

    /// The scanner against the lexer's token stream: the same verdict (shaped or not), the
    /// same elided tokens, key length and hash.
    fn same_as_lexer(sql: &str) -> Result<(), String> {
        let (a, b) = (Shape::of(sql), Shape::of_by_lexer(sql));
        match (&a, &b) {
            (None, None) => Ok(()),
            (Some(a), Some(b))
                if a.elided() == b.elided() && a.key_len == b.key_len && a.hash == b.hash =>
            {
                if a.key(sql).len() != a.key_len {
                    return Err(format!("key length of {sql:?}"));
                }
                Ok(())
            }
            _ => Err(format!(
                "{sql:?}: scanner {:?}, lexer {:?}",
                a.as_ref().map(|s| s.elided().to_vec()),
                b.as_ref().map(|s| s.elided().to_vec())
            )),
        }
    }

    /// Fragments that meet every rule of the scanner and of the lexer it follows.
    const PIECES: &[&str] = &[
        " ",
        "\n",
        "\t",
        "\r",
        "\x0b",
        "\x0c",
        "SELECT",
        "x",
        "e",
        "E",
        "n",
        "N",
        "b",
        "B",
        "X",
        "u",
        "U",
        "&",
        "'",
        "''",
        "\\",
        "\"",
        "\"\"",
        "$",
        "$$",
        "$a$",
        "$1",
        "1",
        "0",
        "0x1F",
        "0o7",
        "0b1",
        "1.5",
        ".5",
        "..",
        "1e5",
        "1e-",
        "1E+3",
        "_",
        "(",
        ")",
        "[",
        "]",
        ",",
        ";",
        ":",
        "::",
        ".",
        "=",
        "-",
        "--",
        "+",
        "*",
        "/",
        "/*",
        "*/",
        "<>",
        "=-",
        "->>",
        "~",
        "@",
        "%",
        "!",
        "current_setting",
        "CURRENT_SETTING",
        "current_settings",
        "UESCAPE",
        "uescape '!'",
        "{",
        "\0",
        "é",
        "ü€",
        "a1e'",
        "x'",
        "U&'",
        "U&\"",
        "'a'",
        "'a''b'",
        "E'\\''",
        "N'n'",
        "$$x$$",
        "/* c */",
        "-- c\n",
        "\\'",
        "-/* c */",
        "x.5",
        "$1.5",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(20_000))]

        #[test]
        fn the_scanner_finds_the_lexers_shape(
            picks in proptest::collection::vec(0..PIECES.len(), 0..24)
        ) {
            let sql: String = picks.iter().map(|&i| PIECES[i]).collect();
            proptest::prop_assert!(same_as_lexer(&sql).is_ok(), "{}", same_as_lexer(&sql).unwrap_err());
        }

        #[test]
        fn the_scanner_finds_the_lexers_shape_in_any_text(sql in "\\PC{0,40}") {
            proptest::prop_assert!(same_as_lexer(&sql).is_ok(), "{}", same_as_lexer(&sql).unwrap_err());
        }
    }

    #[test]
    fn the_scanner_finds_the_lexers_shape_for_every_short_ascii_text() {
        // Every text of up to three bytes from a set that reaches each branch.
        let bytes = b" \n'\"$0.5eEnNbBxXuU&-/*(),;:[]=+!cq\\{\x80";
        let mut buf = Vec::new();
        for len in 0..=3u32 {
            for mut code in 0..(bytes.len() as u64).pow(len) {
                buf.clear();
                for _ in 0..len {
                    buf.push(bytes[(code % bytes.len() as u64) as usize]);
                    code /= bytes.len() as u64;
                }
                let Ok(sql) = std::str::from_utf8(&buf) else {
                    continue;
                };
                if let Err(e) = same_as_lexer(sql) {
                    panic!("{e}");
                }
            }
        }
        for sql in [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 0048213",
            "UPDATE pgbench_accounts SET abalance = abalance + -2748 WHERE aid = 1",
            "SELECT current_setting('in_hot_standby'), \"current_setting\"('x'), 1",
            "SELECT U&\"x\" UESCAPE '!', U&'d\\0061t' UESCAPE '#' /* c */ FROM t -- c",
            "SELECT $$a$$, $q$b$q$, $1, E'\\'', N'x', B'01', X'ff', 1e-3, .5, 0x1F",
            "/* route=reader */ SELECT 1 /* trace */ FOR UPDATE",
        ] {
            if let Err(e) = same_as_lexer(sql) {
                panic!("{e}");
            }
        }
    }

    /// Literals (and comments) put in place of a text's elided tokens: the ones that fit, and
    /// the ones that run into what follows or lex otherwise.
    const LITERALS: &[&str] = &[
        "1",
        "0048213",
        ".5",
        "1.5",
        "1e5",
        "1e-3",
        "0x1F",
        "0x1for",
        "0b1",
        "5.",
        "1..2",
        "'a'",
        "''",
        "'a''b'",
        "'it''s'",
        "'\\'",
        "'",
        "E'x'",
        "e'\\''",
        "N'n'",
        "n'",
        "B'01'",
        "X'ff'",
        "x'",
        "U&'d'",
        "U&'d' UESCAPE '!'",
        "$$y$$",
        "$q$z$q$",
        "$1",
        "$",
        "/* c */",
        "/*",
        "-- c\n",
        "--",
        " 1",
        "1 ",
        "a",
        "a1",
        "\"q\"",
        "(",
        "-1",
        "=1",
        "1=",
        "é",
    ];

    /// `scan_as` with the key of `template` on a text where each elided token of `template` is
    /// replaced: when it matches, the text's own shape is that key, with the same tokens
    /// elided. Returns whether it matched.
    fn scan_as_agrees(template: &str, picks: &[usize]) -> Result<bool, String> {
        let Some(t) = Shape::of(template) else {
            return Ok(false);
        };
        let key = t.key(template);
        if !guidable(&key) {
            return Ok(false);
        }
        let mut text = String::new();
        let mut last = 0;
        for (j, &(s, l)) in t.elided().iter().enumerate() {
            text.push_str(&template[last..s as usize]);
            text.push_str(LITERALS[picks[j % picks.len()] % LITERALS.len()]);
            last = (s + l) as usize;
        }
        text.push_str(&template[last..]);
        let mut g = Shape::EMPTY;
        if !g.scan_as(&text, &key, t.hash) {
            return Ok(false);
        }
        match Shape::of(&text) {
            Some(own)
                if own.key(&text) == key
                    && own.hash == g.hash
                    && own.key_len == g.key_len
                    && own.elided() == g.elided() =>
            {
                Ok(true)
            }
            other => Err(format!(
                "{template:?} -> {text:?}: scan_as {:?}, scan {:?}",
                g.elided().to_vec(),
                other.map(|o| o.elided().to_vec())
            )),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(20_000))]

        #[test]
        fn a_text_matched_along_a_key_has_that_key_as_its_shape(
            template in proptest::collection::vec(0..PIECES.len(), 0..16),
            picks in proptest::collection::vec(0..LITERALS.len(), 1..6),
        ) {
            let template: String = template.iter().map(|&i| PIECES[i]).collect();
            let r = scan_as_agrees(&template, &picks);
            proptest::prop_assert!(r.is_ok(), "{}", r.unwrap_err());
        }
    }

    #[test]
    fn texts_are_matched_along_keys() {
        // Not vacuous: the common statements match, with the literals that fit.
        let mut matched = 0;
        for template in [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1",
            "UPDATE pgbench_accounts SET abalance = abalance + -2748 WHERE aid = 1",
            "SELECT * FROM t WHERE a IN (1,2,'x') AND b=-1 /* c */",
            "SELECT * FROM t WHERE a = 1 FOR UPDATE",
        ] {
            for p in 0..LITERALS.len() {
                matched += usize::from(scan_as_agrees(template, &[p]).unwrap());
            }
        }
        assert!(matched > 20, "{matched}");
        // Keys a text cannot be matched along.
        for sql in [
            "SELECT x.5",
            "SELECT a'b'",
            "SELECT \"q\"'a'",
            "SELECT 1 +/* c */",
        ] {
            let s = Shape::of(sql).unwrap();
            assert!(!guidable(&s.key(sql)), "{sql}");
        }
        let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = 1";
        let s = Shape::of(sql).unwrap();
        let key = s.key(sql);
        assert!(guidable(&key));
        let mut g = Shape::EMPTY;
        for other in [
            "SELECT abalance FROM pgbench_accounts WHERE aid =  1",
            "SELECT abalance FROM pgbench_accounts WHERE aid = 'x'",
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1x",
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1 ",
            "SELECT abalance FROM pgbench_accounts WHERE aid = ",
            "SELECT abalance FROM pgbench_accounts WHERE aid = '\\'",
        ] {
            assert!(!g.scan_as(other, &key, s.hash), "{other}");
        }
        assert!(g.scan_as(
            "SELECT abalance FROM pgbench_accounts WHERE aid = 77",
            &key,
            s.hash
        ));
        assert_eq!(g.elided(), &[(50, 2)]);
    }

    #[test]
    fn keys_that_are_not_guidable_would_be_matched_wrongly() {
        // Each rule of `guidable` is needed: along these keys `scan_as` would accept a text
        // whose own shape is another one.
        for (template, text) in [
            ("SELECT x.5", "SELECT x5"),
            ("SELECT x..5", "SELECT x.5"),
            ("SELECT $1.5", "SELECT $15"),
            ("SELECT 1 -/* c */", "SELECT 1 --- c"),
        ] {
            let t = Shape::of(template).unwrap();
            let key = t.key(template);
            assert!(!guidable(&key), "{template}");
            let mut g = Shape::EMPTY;
            assert!(g.scan_as(text, &key, t.hash), "{text}");
            assert_ne!(
                Shape::of(text).map(|s| s.key(text).into_vec()),
                Some(key.into_vec())
            );
        }
    }
}
