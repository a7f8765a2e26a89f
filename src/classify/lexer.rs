//! A PostgreSQL-aware lexer: just enough of the server's `scan.l` to know where quotes, comments,
//! identifiers and statements begin and end, so that nothing inside a string, a comment or a quoted
//! identifier can change a routing verdict (SPEC §7).
//!
//! It is a single forward loop over bytes: no recursion, no allocation, O(n) in the input length
//! (dollar-quote terminators included), and it never panics. Unterminated quotes and comments
//! become one [`Tok::Error`] token that runs to the end of the input — the server rejects such a
//! Query as a whole, so the classifier calls it unparseable.
//!
//! Token boundaries are always UTF-8 character boundaries: every token starts and ends next to an
//! ASCII byte (or the ends of the input), because identifiers swallow all bytes ≥ 0x80.

/// Which kind of token was left unterminated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LexError {
    String,
    QuotedIdent,
    DollarQuote,
    Comment,
}

/// Token kinds. Keywords are plain [`Tok::Ident`]s: the classifier compares their text
/// case-insensitively, which costs no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Unquoted identifier or keyword (case-insensitive).
    Ident,
    /// `"…"` with `""` doubling; case preserved, never a keyword.
    QuotedIdent,
    /// `U&"…"`, with a trailing `UESCAPE '<c>'` clause when there is one (as the server's grammar
    /// takes it): case kept, escapes decoded by `ident::normalise`.
    UnicodeIdent,
    /// `'…'`, `E'…'`, `N'…'`, `B'…'`, `X'…'`, `U&'…'` (with its `UESCAPE '<c>'` clause).
    String,
    /// `$$…$$` or `$tag$…$tag$`.
    DollarString,
    Number,
    /// `$1`, `$2`, …
    Param,
    /// A run of operator characters (`=`, `<>`, `::`-free, `->>`, …).
    Operator,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Semicolon,
    Colon,
    Dot,
    LineComment,
    BlockComment,
    /// A byte the server's lexer would hand to the grammar as a syntax error (`{`, `\`, NUL, …).
    Other,
    Error(LexError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub(super) fn is_comment(&self) -> bool {
        matches!(self.kind, Tok::LineComment | Tok::BlockComment)
    }
}

/// Lexes `src[pos..end]`. `backslash_quotes` lexes plain `'…'` strings as the server does with
/// `standard_conforming_strings = off` (a backslash escapes the next byte).
#[derive(Clone, Debug)]
pub(crate) struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    end: usize,
    backslash_quotes: bool,
    saw_plain_backslash: bool,
}

const IDENT_START: u8 = 1;
const IDENT_CONT: u8 = 2;
const SPACE: u8 = 4;

/// Byte classes, so the hot loops do one table load per byte.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
            t[i] |= IDENT_START | IDENT_CONT;
        }
        if b.is_ascii_digit() || b == b'$' {
            t[i] |= IDENT_CONT;
        }
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            t[i] |= SPACE;
        }
        i += 1;
    }
    t
};

/// Whether a string or dollar-quoted literal (`raw`: the token's bytes, prefix and quotes
/// included) may be read as one of the date/time inputs that mean the transaction's start —
/// `now`, `today`, `tomorrow`, `yesterday`, in any case, alone or with a time — so a statement
/// using it reads a value of its transaction (`Effects::TXN_VALUE`). Errs towards yes: any of
/// the words anywhere in it, or a backslash or a `U&` prefix (an escape may spell them). The
/// shape cache keeps such literals in the key (`shape.rs`), so a cached verdict never stands for
/// a text where the word appears.
pub(crate) fn may_spell_txn_time(raw: &[u8]) -> bool {
    raw.first().is_some_and(|&b| b | 0x20 == b'u') || value_may_spell_txn_time(raw)
}

/// Whether a value a date/time input may be read from — a literal's bytes, a Bind parameter's
/// (P-5: `SELECT $1::timestamptz` with `now`) — may be one of those inputs or hold one: any of
/// the words as a word of its own (PostgreSQL's date/time parser reads a run of letters as one
/// field: `unknown` holds no `now`), in any case, as the bytes are or as backslash escapes
/// read them (an escape of the literal, of an array or record element, of a JSON string may
/// spell them: `n\ow`, `\u006eow`).
pub(crate) fn value_may_spell_txn_time(v: &[u8]) -> bool {
    spells_txn_time(v) || v.contains(&b'\\') && spells_txn_time(&unescaped(v))
}

/// Whether one of the words `now`, `today`, `tomorrow`, `yesterday` stands in `v` with no ASCII
/// letter right before or after it.
fn spells_txn_time(v: &[u8]) -> bool {
    const WORDS: [&[u8]; 4] = [b"now", b"today", b"tomorrow", b"yesterday"];
    let letter = |i: usize| v.get(i).is_some_and(u8::is_ascii_alphabetic);
    (0..v.len()).any(|i| {
        (i == 0 || !letter(i - 1))
            && WORDS.iter().any(|w| {
                v.get(i..i + w.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(w))
                    && !letter(i + w.len())
            })
    })
}

/// `v` with backslash escapes read as an escape string, an array or record element, or a JSON
/// string reads them: `\xHH`, octal `\ooo`, `\uXXXX`, `\UXXXXXXXX` (a code point beyond ASCII
/// becomes a byte that is no letter), `\b \f \n \r \t` (white space), any other byte after a
/// backslash itself.
fn unescaped(v: &[u8]) -> Vec<u8> {
    let hex = |s: &[u8], max: usize| -> (u32, usize) {
        let n = s
            .iter()
            .take(max)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let value = s[..n].iter().fold(0u32, |a, &b| {
            a.wrapping_mul(16)
                .wrapping_add((b as char).to_digit(16).unwrap_or(0))
        });
        (value, n)
    };
    let byte = |c: u32| if c < 0x80 { c as u8 } else { 0x80 };
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let (b, rest) = (v[i], &v[(i + 1).min(v.len())..]);
        if b != b'\\' || rest.is_empty() {
            out.push(b);
            i += 1;
            continue;
        }
        let (c, used) = match rest[0] {
            b'x' => {
                let (c, n) = hex(&rest[1..], 2);
                (byte(c), 1 + n)
            }
            b'u' | b'U' => {
                let (c, n) = hex(&rest[1..], if rest[0] == b'u' { 4 } else { 8 });
                (byte(c), 1 + n)
            }
            b'0'..=b'7' => {
                let n = rest
                    .iter()
                    .take(3)
                    .take_while(|b| matches!(b, b'0'..=b'7'))
                    .count();
                let c = rest[..n]
                    .iter()
                    .fold(0u32, |a, &b| a * 8 + u32::from(b - b'0'));
                (byte(c), n)
            }
            b'b' | b'f' | b'n' | b'r' | b't' => (b' ', 1),
            c => (c, 1),
        };
        out.push(c);
        i += 1 + used;
    }
    out
}

#[inline]
pub(super) fn is_ident_start(b: u8) -> bool {
    CLASS[b as usize] & IDENT_START != 0
}

#[inline]
fn is_ident_cont(b: u8) -> bool {
    CLASS[b as usize] & IDENT_CONT != 0
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Per byte lane of `v` (every lane < 0x80): 0x80 where `lo <= lane <= hi`, else 0.
#[inline]
fn lanes_in(v: u64, lo: u8, hi: u8) -> u64 {
    let ge = v + LO * u64::from(0x80 - lo);
    let gt = v + LO * u64::from(0x7f - hi);
    ge & !gt & HI
}

/// The end of the run of identifier-continuation bytes (`[A-Za-z0-9_$]` and every byte ≥ 0x80)
/// starting at `i`: eight bytes at a time (this is most of what the lexer reads).
#[inline]
pub(super) fn ident_end(src: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = src.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let x = u64::from_le_bytes(w);
        let high = x & HI;
        let v = x & !HI;
        let ident = high
            | lanes_in(v | (LO * 0x20), b'a', b'z')
            | lanes_in(v, b'0', b'9')
            | lanes_in(v, b'_', b'_')
            | lanes_in(v, b'$', b'$');
        let stop = !ident & HI;
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < src.len() && is_ident_cont(src[i]) {
        i += 1;
    }
    i
}

/// `scan.l`'s `dolq_cont`: identifier characters without `$`.
fn is_dolq_cont(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

pub(super) fn is_op_char(b: u8) -> bool {
    matches!(
        b,
        b'~' | b'!'
            | b'@'
            | b'#'
            | b'^'
            | b'&'
            | b'|'
            | b'`'
            | b'?'
            | b'+'
            | b'-'
            | b'*'
            | b'/'
            | b'%'
            | b'<'
            | b'>'
            | b'='
    )
}

#[inline]
pub(super) fn is_space(b: u8) -> bool {
    CLASS[b as usize] & SPACE != 0
}

// The token rules below are free functions over the lexed bytes (`src` ends where the lexer's
// range ends), so that the shape scanner (`shape.rs`) finds exactly the lexer's boundaries.

#[inline]
fn at(src: &[u8], i: usize) -> u8 {
    src.get(i).copied().unwrap_or(0)
}

/// The end (after the closing quote) of a quoted run starting after the opening quote at
/// `from`; `''`/`""` doubling always, and a backslash escape when `backslash` is set. `None`:
/// unterminated. `saw_backslash` is set when the run holds a backslash.
#[inline]
pub(super) fn quoted_end(
    src: &[u8],
    from: usize,
    quote: u8,
    backslash: bool,
    saw_backslash: &mut bool,
) -> Option<usize> {
    let mut i = from;
    while let Some(&b) = src.get(i) {
        if b == quote {
            if src.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        if b == b'\\' {
            *saw_backslash = true;
            if backslash {
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    None
}

/// The end of the number starting at `start` (a digit, or `.` before a digit).
#[inline]
pub(super) fn number_end(src: &[u8], start: usize) -> usize {
    let has = |i: usize| i < src.len();
    let mut i = start;
    let radix = if at(src, i) == b'0' {
        match at(src, i + 1) {
            b'x' | b'X' => Some(16),
            b'o' | b'O' => Some(8),
            b'b' | b'B' => Some(2),
            _ => None,
        }
    } else {
        None
    };
    if let Some(r) = radix {
        i += 2;
        while has(i) && (at(src, i) == b'_' || (at(src, i) as char).is_digit(r)) {
            i += 1;
        }
        return i.min(src.len());
    }
    let digits = |i: usize| {
        let rest = src.get(i..).unwrap_or(&[]);
        i + rest
            .iter()
            .position(|&b| !(b.is_ascii_digit() || b == b'_'))
            .unwrap_or(rest.len())
    };
    i = digits(i);
    if has(i) && at(src, i) == b'.' && at(src, i + 1) != b'.' {
        i = digits(i + 1);
    }
    if has(i) && matches!(at(src, i), b'e' | b'E') {
        let mut k = i + 1;
        if matches!(at(src, k), b'+' | b'-') {
            k += 1;
        }
        if has(k) && at(src, k).is_ascii_digit() {
            i = digits(k);
        }
    }
    i.min(src.len())
}

/// The end of the operator starting at `start` (an operator character that does not start a
/// comment).
#[inline]
pub(super) fn operator_end(src: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < src.len() && is_op_char(at(src, i)) {
        // `--` and `/*` start a comment even inside an operator (as in the server).
        if i > start
            && ((at(src, i) == b'-' && at(src, i + 1) == b'-')
                || (at(src, i) == b'/' && at(src, i + 1) == b'*'))
        {
            break;
        }
        i += 1;
    }
    // The server strips trailing `+`/`-` from a multi-char operator unless it contains one
    // of `~!@#^&|`?%` (so `=-1` is `=` then `-1`).
    let op = src.get(start..i).unwrap_or(&[]);
    if op.len() > 1
        && !op.iter().any(|b| {
            matches!(
                b,
                b'~' | b'!' | b'@' | b'#' | b'^' | b'&' | b'|' | b'`' | b'?' | b'%'
            )
        })
    {
        while i > start + 1 && matches!(at(src, i - 1), b'+' | b'-') {
            i -= 1;
        }
    }
    i
}

impl<'a> Lexer<'a> {
    #[cfg(test)]
    pub(super) fn new(sql: &'a str) -> Lexer<'a> {
        Lexer::range(sql, 0, sql.len(), false)
    }

    /// A lexer over `sql[start..end]` (clamped to the text); `start` must be a token start.
    pub(super) fn range(
        sql: &'a str,
        start: usize,
        end: usize,
        backslash_quotes: bool,
    ) -> Lexer<'a> {
        let bytes = sql.as_bytes();
        let end = end.min(bytes.len());
        Lexer {
            // Sliced to `end` so every access needs only the one bounds check.
            src: bytes.get(..end).unwrap_or(&[]),
            pos: start.min(end),
            end,
            backslash_quotes,
            saw_plain_backslash: false,
        }
    }

    /// Whether a plain (non-`E`) string literal contained a backslash: its extent then depends on
    /// `standard_conforming_strings`, so the classifier double-checks with the other reading.
    pub(super) fn saw_plain_backslash(&self) -> bool {
        self.saw_plain_backslash
    }

    #[inline]
    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    #[inline]
    fn has(&self, i: usize) -> bool {
        i < self.end
    }

    fn tok(&mut self, kind: Tok, start: usize, end: usize) -> Token {
        let end = end.min(self.end);
        self.pos = end;
        Token { kind, start, end }
    }

    /// A quoted run starting after the opening quote at `from` (see [`quoted_end`]).
    fn quoted(&mut self, from: usize, quote: u8, backslash: bool, note: bool) -> Option<usize> {
        let mut saw = false;
        let e = quoted_end(self.src, from, quote, backslash, &mut saw);
        if note && saw {
            self.saw_plain_backslash = true;
        }
        e
    }

    #[inline(never)]
    fn string(&mut self, start: usize, from: usize, backslash: bool, note: bool) -> Token {
        match self.quoted(from, b'\'', backslash, note) {
            Some(e) => self.tok(Tok::String, start, e),
            None => self.tok(Tok::Error(LexError::String), start, self.end),
        }
    }

    #[inline(never)]
    fn quoted_ident(&mut self, start: usize, from: usize, kind: Tok) -> Token {
        match self.quoted(from, b'"', false, false) {
            Some(e) => self.tok(kind, start, e),
            None => self.tok(Tok::Error(LexError::QuotedIdent), start, self.end),
        }
    }

    #[inline(never)]
    fn line_comment(&mut self, start: usize) -> Token {
        let mut i = start + 2;
        while self.has(i) && !matches!(self.at(i), b'\n' | b'\r') {
            i += 1;
        }
        self.tok(Tok::LineComment, start, i)
    }

    #[inline(never)]
    fn block_comment(&mut self, start: usize) -> Token {
        let mut depth = 1usize;
        let mut i = start + 2;
        while i + 1 < self.end {
            let (a, b) = (self.at(i), self.at(i + 1));
            if a == b'/' && b == b'*' {
                depth += 1;
                i += 2;
            } else if a == b'*' && b == b'/' {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return self.tok(Tok::BlockComment, start, i);
                }
            } else {
                i += 1;
            }
        }
        self.tok(Tok::Error(LexError::Comment), start, self.end)
    }

    /// `$` at `start`: a parameter, a dollar quote, or (like the server) a lone `$`.
    #[inline(never)]
    fn dollar(&mut self, start: usize) -> Token {
        let mut i = start + 1;
        if self.at(i).is_ascii_digit() && self.has(i) {
            while self.has(i) && self.at(i).is_ascii_digit() {
                i += 1;
            }
            return self.tok(Tok::Param, start, i);
        }
        if self.has(i) && self.at(i) != b'$' {
            if !is_ident_start(self.at(i)) || self.at(i).is_ascii_digit() {
                return self.tok(Tok::Other, start, start + 1);
            }
            while self.has(i) && is_dolq_cont(self.at(i)) {
                i += 1;
            }
            if !(self.has(i) && self.at(i) == b'$') {
                return self.tok(Tok::Other, start, start + 1);
            }
        } else if !self.has(i) {
            return self.tok(Tok::Other, start, start + 1);
        }
        // The opening tag is src[start..=i]; its interior holds no `$`, so after a failed
        // comparison the next candidate can only start at the mismatch position: linear time.
        let tag_len = i + 1 - start;
        let mut j = i + 1;
        while j < self.end {
            if self.at(j) != b'$' {
                j += 1;
                continue;
            }
            let mut k = 0;
            while k < tag_len && self.has(j + k) && self.at(j + k) == self.at(start + k) {
                k += 1;
            }
            if k == tag_len {
                return self.tok(Tok::DollarString, start, j + k);
            }
            // Mismatch at j+k (or end of input). k ≥ 1 because src[j] == '$'.
            if self.has(j + k) && self.at(j + k) == b'$' {
                j += k;
            } else {
                j += k + 1;
            }
        }
        self.tok(Tok::Error(LexError::DollarQuote), start, self.end)
    }

    #[inline(never)]
    fn number(&mut self, start: usize) -> Token {
        let i = number_end(self.src, start);
        self.tok(Tok::Number, start, i)
    }

    #[inline(never)]
    fn operator(&mut self, start: usize) -> Token {
        let i = operator_end(self.src, start);
        self.tok(Tok::Operator, start, i)
    }

    /// After a `U&` token: the server's grammar takes a following `UESCAPE '<c>'` (comments and
    /// white space allowed between) as part of it, so the token grows to cover it. `UESCAPE` not
    /// followed by a string literal is a syntax error on the server: the token becomes `Other`.
    #[inline(never)]
    fn uescape(&mut self, t: Token) -> Token {
        if matches!(t.kind, Tok::Error(_)) {
            return t;
        }
        let mut ahead = self.clone();
        let mut next = || loop {
            match ahead.next_token() {
                Some(n) if n.is_comment() => continue,
                other => return other,
            }
        };
        let Some(kw) = next() else { return t };
        let word = self.src.get(kw.start..kw.end).unwrap_or(&[]);
        if kw.kind != Tok::Ident || !word.eq_ignore_ascii_case(b"uescape") {
            return t;
        }
        match next() {
            Some(lit) if lit.kind == Tok::String => self.tok(t.kind, t.start, lit.end),
            _ => self.tok(Tok::Other, t.start, kw.end),
        }
    }

    /// The next token (comments included, whitespace skipped), or `None` at the end.
    #[inline(always)]
    pub(super) fn next_token(&mut self) -> Option<Token> {
        while self.has(self.pos) && is_space(self.at(self.pos)) {
            self.pos += 1;
        }
        if !self.has(self.pos) {
            return None;
        }
        let s = self.pos;
        let b = self.at(s);
        let b1 = self.at(s + 1);
        let has1 = self.has(s + 1);
        let t = match b {
            b'-' if b1 == b'-' && has1 => self.line_comment(s),
            b'/' if b1 == b'*' && has1 => self.block_comment(s),
            b'\'' => {
                let bq = self.backslash_quotes;
                self.string(s, s + 1, bq, true)
            }
            b'"' => self.quoted_ident(s, s + 1, Tok::QuotedIdent),
            b'e' | b'E' if b1 == b'\'' && has1 => self.string(s, s + 2, true, false),
            b'n' | b'N' if b1 == b'\'' && has1 => {
                let bq = self.backslash_quotes;
                self.string(s, s + 2, bq, true)
            }
            b'b' | b'B' | b'x' | b'X' if b1 == b'\'' && has1 => self.string(s, s + 2, false, false),
            b'u' | b'U' if b1 == b'&' && has1 && self.has(s + 2) && self.at(s + 2) == b'\'' => {
                let t = self.string(s, s + 3, false, false);
                self.uescape(t)
            }
            b'u' | b'U' if b1 == b'&' && has1 && self.has(s + 2) && self.at(s + 2) == b'"' => {
                let t = self.quoted_ident(s, s + 3, Tok::UnicodeIdent);
                self.uescape(t)
            }
            b'$' => self.dollar(s),
            b'0'..=b'9' => self.number(s),
            b'.' if b1.is_ascii_digit() && has1 => self.number(s),
            b'(' => self.tok(Tok::LParen, s, s + 1),
            b')' => self.tok(Tok::RParen, s, s + 1),
            b'[' => self.tok(Tok::LBracket, s, s + 1),
            b']' => self.tok(Tok::RBracket, s, s + 1),
            b',' => self.tok(Tok::Comma, s, s + 1),
            b';' => self.tok(Tok::Semicolon, s, s + 1),
            b':' => self.tok(Tok::Colon, s, s + 1),
            b'.' => self.tok(Tok::Dot, s, s + 1),
            _ if is_ident_start(b) => {
                let i = ident_end(self.src, s + 1);
                self.tok(Tok::Ident, s, i)
            }
            _ if is_op_char(b) => self.operator(s),
            _ => self.tok(Tok::Other, s, s + 1),
        };
        Some(t)
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;
    fn next(&mut self) -> Option<Token> {
        self.next_token()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p5_a_value_that_may_be_the_transactions_start() {
        for v in [
            &b"now"[..],
            b" NOW ",
            b"Today",
            b"tomorrow 10:00",
            b"{yesterday}",
            b"{\"t\": \"\\u006eow\"}",
            b"n\\ow",
            b"'now1'",
            b"(Now)",
            b"n\\x6fw",
            b"\\156ow",
            b"\\U0000006Eow",
            b"E'to\\day'",
        ] {
            assert!(
                value_may_spell_txn_time(v),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
        for v in [
            &b""[..],
            b"7",
            b"2026-12-07 10:00",
            b"no",
            b"w",
            b"epoch",
            // A run of letters is one field to the date/time parser.
            b"unknown",
            b"nowhere",
            b"'known issues'",
            b"Todays",
            b"a\\_b%",
            b"\\x41",
        ] {
            assert!(
                !value_may_spell_txn_time(v),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
        // A literal's prefix counts as well.
        assert!(may_spell_txn_time(b"U&'x'"));
        assert!(!may_spell_txn_time(b"'x'"));
    }

    fn kinds(sql: &str) -> Vec<(Tok, &str)> {
        Lexer::new(sql)
            .map(|t| (t.kind, sql.get(t.start..t.end).unwrap_or("<bad span>")))
            .collect()
    }

    #[test]
    fn simple_select() {
        assert_eq!(
            kinds("SELECT a, b FROM t WHERE x = $1;"),
            vec![
                (Tok::Ident, "SELECT"),
                (Tok::Ident, "a"),
                (Tok::Comma, ","),
                (Tok::Ident, "b"),
                (Tok::Ident, "FROM"),
                (Tok::Ident, "t"),
                (Tok::Ident, "WHERE"),
                (Tok::Ident, "x"),
                (Tok::Operator, "="),
                (Tok::Param, "$1"),
                (Tok::Semicolon, ";"),
            ]
        );
    }

    #[test]
    fn comments_nest_and_hide_everything() {
        assert_eq!(
            kinds("/* a /* b */ ; */ x -- ; y\nz"),
            vec![
                (Tok::BlockComment, "/* a /* b */ ; */"),
                (Tok::Ident, "x"),
                (Tok::LineComment, "-- ; y"),
                (Tok::Ident, "z"),
            ]
        );
        assert_eq!(
            kinds("/* /* */ x"),
            vec![(Tok::Error(LexError::Comment), "/* /* */ x")]
        );
    }

    #[test]
    fn strings_double_quotes_and_escapes() {
        assert_eq!(kinds("'a''b'"), vec![(Tok::String, "'a''b'")]);
        assert_eq!(
            kinds(r"E'\';drop' x"),
            vec![(Tok::String, r"E'\';drop'"), (Tok::Ident, "x")]
        );
        // Without E, a backslash is an ordinary character (standard_conforming_strings = on).
        assert_eq!(
            kinds(r"'\' x"),
            vec![(Tok::String, r"'\'"), (Tok::Ident, "x")]
        );
        let mut lx = Lexer::new(r"'\' x");
        while lx.next_token().is_some() {}
        assert!(lx.saw_plain_backslash());
        // ... and with standard_conforming_strings = off it escapes the quote.
        let sql = r"'\' x";
        let v: Vec<Tok> = Lexer::range(sql, 0, sql.len(), true)
            .map(|t| t.kind)
            .collect();
        assert_eq!(v, vec![Tok::Error(LexError::String)]);
        assert_eq!(
            kinds("B'01' X'ff' N'n' U&'d\\0061t' u&\"x\""),
            vec![
                (Tok::String, "B'01'"),
                (Tok::String, "X'ff'"),
                (Tok::String, "N'n'"),
                (Tok::String, "U&'d\\0061t'"),
                (Tok::UnicodeIdent, "u&\"x\""),
            ]
        );
        assert_eq!(kinds("'abc"), vec![(Tok::Error(LexError::String), "'abc")]);
        assert_eq!(
            kinds("E'abc\\'"),
            vec![(Tok::Error(LexError::String), "E'abc\\'")]
        );
    }

    #[test]
    fn quoted_identifiers() {
        assert_eq!(
            kinds(r#""Ne""xt"(1)"#),
            vec![
                (Tok::QuotedIdent, r#""Ne""xt""#),
                (Tok::LParen, "("),
                (Tok::Number, "1"),
                (Tok::RParen, ")"),
            ]
        );
        assert_eq!(
            kinds("\"abc"),
            vec![(Tok::Error(LexError::QuotedIdent), "\"abc")]
        );
    }

    #[test]
    fn dollar_quotes_and_params() {
        assert_eq!(kinds("$$;$$"), vec![(Tok::DollarString, "$$;$$")]);
        assert_eq!(
            kinds("$a$ $b$ ; $a$ x"),
            vec![(Tok::DollarString, "$a$ $b$ ; $a$"), (Tok::Ident, "x")]
        );
        assert_eq!(
            kinds("$1 $23x"),
            vec![(Tok::Param, "$1"), (Tok::Param, "$23"), (Tok::Ident, "x")]
        );
        // `$` inside an identifier is part of it, not a quote.
        assert_eq!(
            kinds("a$b$ c"),
            vec![(Tok::Ident, "a$b$"), (Tok::Ident, "c")]
        );
        assert_eq!(
            kinds("$tag$abc$ta$tag$"),
            vec![(Tok::DollarString, "$tag$abc$ta$tag$")]
        );
        assert_eq!(
            kinds("$x$abc"),
            vec![(Tok::Error(LexError::DollarQuote), "$x$abc")]
        );
        assert_eq!(kinds("$ 1"), vec![(Tok::Other, "$"), (Tok::Number, "1")]);
        assert_eq!(kinds("$"), vec![(Tok::Other, "$")]);
    }

    #[test]
    fn numbers_and_operators() {
        assert_eq!(
            kinds("1.5e-3 .5 0xFF 1for"),
            vec![
                (Tok::Number, "1.5e-3"),
                (Tok::Number, ".5"),
                (Tok::Number, "0xFF"),
                (Tok::Number, "1"),
                (Tok::Ident, "for"),
            ]
        );
        assert_eq!(
            kinds("x=-1 a->>'k' b::int c<>d"),
            vec![
                (Tok::Ident, "x"),
                (Tok::Operator, "="),
                (Tok::Operator, "-"),
                (Tok::Number, "1"),
                (Tok::Ident, "a"),
                (Tok::Operator, "->>"),
                (Tok::String, "'k'"),
                (Tok::Ident, "b"),
                (Tok::Colon, ":"),
                (Tok::Colon, ":"),
                (Tok::Ident, "int"),
                (Tok::Ident, "c"),
                (Tok::Operator, "<>"),
                (Tok::Ident, "d"),
            ]
        );
        assert_eq!(
            kinds("1+--c\n2"),
            vec![
                (Tok::Number, "1"),
                (Tok::Operator, "+"),
                (Tok::LineComment, "--c"),
                (Tok::Number, "2"),
            ]
        );
    }

    #[test]
    fn odd_bytes_never_panic_and_spans_are_char_boundaries() {
        let sql = "SELECT \0 ü€ 'é\0' \"ß\" {x} \\ $é$ ü $é$";
        for t in Lexer::new(sql) {
            assert!(sql.get(t.start..t.end).is_some(), "{t:?}");
            assert!(t.end > t.start);
        }
        let v: Vec<Tok> = Lexer::new(sql).map(|t| t.kind).collect();
        assert!(v.contains(&Tok::Other));
        assert_eq!(v.last(), Some(&Tok::DollarString));
    }

    #[test]
    fn identifier_runs_end_where_the_byte_loop_ends() {
        // Every byte value at every position of a chunk, after identifier bytes.
        for b in 0..=255u8 {
            for at in 0..20 {
                let mut v = "abcdefghij_$09ZzYyé".as_bytes().to_vec();
                v.truncate(at.min(v.len()));
                v.push(b);
                v.extend_from_slice(b"xyz+ q");
                let mut slow = 0;
                while slow < v.len() && is_ident_cont(v[slow]) {
                    slow += 1;
                }
                assert_eq!(ident_end(&v, 0), slow, "{b:#x} at {at}");
            }
        }
    }

    #[test]
    fn adversarial_dollar_tags_are_linear() {
        let tag = "a".repeat(50_000);
        let mut sql = format!("${tag}$");
        for _ in 0..20 {
            sql.push('$');
            sql.push_str(&tag[1..]);
        }
        let t0 = std::time::Instant::now();
        let v: Vec<Tok> = Lexer::new(&sql).map(|t| t.kind).collect();
        assert_eq!(v, vec![Tok::Error(LexError::DollarQuote)]);
        assert!(t0.elapsed().as_secs() < 2);
    }
}
