//! Identifier normalisation (SPEC §7): every spelling of a name becomes the name the server would
//! look up, before any list is consulted.
//!
//! - unquoted: ASCII letters folded to lower case (the server's `downcase_identifier` in a UTF-8
//!   database leaves other bytes alone);
//! - `"quoted"`: the text between the quotes, `""` read as `"`, case kept;
//! - `U&"…"`: as quoted, then `\XXXX`, `\+XXXXXX` and `\\` decoded (UTF-16 surrogate pairs
//!   joined), with the escape character given by a trailing `UESCAPE '<c>'` when there is one
//!   (the lexer makes that clause part of the token, as the server's grammar does);
//! - every result cut to `NAMEDATALEN - 1` = 63 bytes on a character boundary, as the server
//!   truncates identifiers.
//!
//! Whatever the server would reject (a bad escape, an invalid escape character, a code point out
//! of range, a lone surrogate, an empty quoted name) yields `None`: the caller treats the
//! statement as unparseable, never as safe.

use super::lexer::{Lexer, Tok, Token};

/// The server's `NAMEDATALEN - 1`.
pub(crate) const MAX_NAME: usize = 63;

/// A normalised identifier, held inline (no allocation).
#[derive(Clone, Copy)]
pub(crate) struct Name {
    buf: [u8; MAX_NAME],
    len: u8,
    /// Truncated: nothing more is appended.
    full: bool,
    /// Written quoted (`"…"` or `U&"…"`): never a keyword.
    quoted: bool,
}

impl Name {
    fn new(quoted: bool) -> Name {
        Name {
            buf: [0; MAX_NAME],
            len: 0,
            full: false,
            quoted,
        }
    }

    /// Appends `s` unless the name is already full; a character that does not fit whole ends the
    /// name (truncation on a character boundary).
    fn push_str(&mut self, s: &str) -> &mut Name {
        let len = usize::from(self.len);
        if self.full {
            return self;
        }
        if len + s.len() <= MAX_NAME {
            self.buf[len..len + s.len()].copy_from_slice(s.as_bytes());
            self.len = (len + s.len()) as u8;
        } else {
            // Cut what is left of `s` at a character boundary.
            let room = MAX_NAME - len;
            let mut cut = room.min(s.len());
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.buf[len..len + cut].copy_from_slice(&s.as_bytes()[..cut]);
            self.len = (len + cut) as u8;
            self.full = true;
        }
        self
    }

    fn push_char(&mut self, c: char) {
        let mut b = [0u8; 4];
        self.push_str(c.encode_utf8(&mut b));
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole UTF-8 characters are ever pushed.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// Written without quotes (so it may be a keyword).
    pub(crate) fn is_bare(&self) -> bool {
        !self.quoted
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The normalised name of an identifier token (`Ident`, `QuotedIdent`, `UnicodeIdent`) of `sql`,
/// or `None` when the server would not accept it as a name.
pub(crate) fn normalise(sql: &str, t: Token) -> Option<Name> {
    let text = sql.get(t.start..t.end)?;
    match t.kind {
        Tok::Ident => {
            let mut n = Name::new(false);
            let mut cut = text.len().min(MAX_NAME);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            n.buf[..cut].copy_from_slice(&text.as_bytes()[..cut]);
            // ASCII folding keeps the bytes valid UTF-8.
            n.buf[..cut].make_ascii_lowercase();
            n.len = cut as u8;
            n.full = cut < text.len();
            Some(n)
        }
        Tok::QuotedIdent => {
            let inner = text.strip_prefix('"')?.strip_suffix('"')?;
            let mut n = Name::new(true);
            undouble(inner, &mut n);
            (n.len > 0).then_some(n)
        }
        Tok::UnicodeIdent => unicode(text),
        _ => None,
    }
}

/// Appends `inner` with `""` read as `"`.
fn undouble(inner: &str, n: &mut Name) {
    let mut rest = inner;
    while let Some(i) = rest.find("\"\"") {
        n.push_str(&rest[..=i]);
        rest = &rest[i + 2..];
    }
    n.push_str(rest);
}

/// `U&"…"` with an optional `UESCAPE '<c>'` clause (whitespace and comments allowed between).
fn unicode(text: &str) -> Option<Name> {
    let body = text.get(3..)?; // after `U&"`
                               // The closing quote: the first `"` not doubled.
    let bytes = body.as_bytes();
    let mut i = 0;
    let close = loop {
        match bytes.get(i) {
            Some(b'"') if bytes.get(i + 1) == Some(&b'"') => i += 2,
            Some(b'"') => break i,
            Some(_) => i += 1,
            None => return None,
        }
    };
    let escape = uescape(body.get(close + 1..)?)?;
    let mut n = Name::new(true);
    decode(body.get(..close)?, escape, &mut n)?;
    (n.len > 0).then_some(n)
}

/// The escape character of a `UESCAPE '<c>'` tail (`\` when the tail is empty), or `None` when the
/// tail is anything else or the character is one the server refuses (`check_uescapechar`: a hex
/// digit, `+`, `'`, `"` or white space).
fn uescape(tail: &str) -> Option<char> {
    let mut lx = Lexer::range(tail, 0, tail.len(), false);
    let mut toks = std::iter::from_fn(|| lx.next_token()).filter(|t| !t.is_comment());
    let Some(kw) = toks.next() else {
        return Some('\\');
    };
    if kw.kind != Tok::Ident || !tail.get(kw.start..kw.end)?.eq_ignore_ascii_case("uescape") {
        return None;
    }
    let s = toks.next()?;
    if s.kind != Tok::String || toks.next().is_some() {
        return None;
    }
    let lit = tail.get(s.start..s.end)?.as_bytes();
    // Exactly one byte between plain quotes.
    let &[b'\'', c, b'\''] = lit else {
        return None;
    };
    let bad = c.is_ascii_hexdigit()
        || matches!(
            c,
            b'+' | b'\'' | b'"' | b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c
        )
        || !c.is_ascii();
    (!bad).then_some(c as char)
}

fn hex(s: &str, n: usize) -> Option<u32> {
    let digits = s.get(..n)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// The scanner's `""` → `"`, then the server's `str_udeescape`: `<esc><esc>` is the escape
/// character itself, `<esc>XXXX` and `<esc>+XXXXXX` code points (a high surrogate must be followed
/// by a low one). (`"` is never a valid escape character, so doing both in one pass is the same.)
fn decode(s: &str, esc: char, out: &mut Name) -> Option<()> {
    let mut rest = s;
    let mut high: Option<u32> = None;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            // Only `""` can occur inside the token.
            if high.is_some() {
                return None;
            }
            out.push_char('"');
            rest = rest.get(2..)?;
            continue;
        }
        if c != esc {
            if high.is_some() {
                return None;
            }
            out.push_char(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let after = &rest[c.len_utf8()..];
        let (cp, used) = if after.starts_with(esc) {
            if high.is_some() {
                return None;
            }
            out.push_char(esc);
            rest = &after[esc.len_utf8()..];
            continue;
        } else if let Some(six) = after.strip_prefix('+') {
            (hex(six, 6)?, 7)
        } else {
            (hex(after, 4)?, 4)
        };
        rest = &after[used..];
        let cp = match (high.take(), cp) {
            (None, 0xD800..=0xDBFF) => {
                high = Some(cp);
                continue;
            }
            (Some(h), 0xDC00..=0xDFFF) => 0x10000 + ((h - 0xD800) << 10) + (cp - 0xDC00),
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => return None,
            (None, cp) => cp,
        };
        if cp == 0 {
            return None;
        }
        out.push_char(char::from_u32(cp)?);
    }
    high.is_none().then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(sql: &str) -> Option<String> {
        let t = Lexer::range(sql, 0, sql.len(), false).next_token()?;
        assert_eq!(t.end, sql.len(), "{sql:?} is one token");
        normalise(sql, t).map(|n| n.as_str().to_string())
    }

    #[test]
    fn s7_spellings_normalise_to_the_server_name() {
        assert_eq!(norm("Set_Config").as_deref(), Some("set_config"));
        assert_eq!(norm("\"set_config\"").as_deref(), Some("set_config"));
        assert_eq!(norm("\"Set_Config\"").as_deref(), Some("Set_Config"));
        assert_eq!(norm("\"a\"\"b\"").as_deref(), Some("a\"b"));
        assert_eq!(norm(r#"U&"\0073et_config""#).as_deref(), Some("set_config"));
        assert_eq!(
            norm(r#"u&"\+000073et_config""#).as_deref(),
            Some("set_config")
        );
        assert_eq!(
            norm(r#"U&"!0073et_config" UESCAPE '!'"#).as_deref(),
            Some("set_config")
        );
        assert_eq!(
            norm("U&\"!0073et_config\" /* c */ uescape -- c\n '!'").as_deref(),
            Some("set_config")
        );
        assert_eq!(norm(r#"U&"a!!b" UESCAPE '!'"#).as_deref(), Some("a!b"));
        assert_eq!(norm(r#"U&"a\\b""#).as_deref(), Some("a\\b"));
        assert_eq!(norm(r#"U&"\D83D\DE00""#).as_deref(), Some("\u{1F600}"));
        assert_eq!(norm(r#"U&"a""b""#).as_deref(), Some("a\"b"));
        // Unquoted: only ASCII folds.
        assert_eq!(norm("ÄBC").as_deref(), Some("Äbc"));
    }

    #[test]
    fn s7_what_the_server_refuses_does_not_normalise() {
        for bad in [
            r#"U&"\00""#,
            r#"U&"\zzzz""#,
            r#"U&"\0000""#,
            r#"U&"\D83D""#,
            r#"U&"\DE00""#,
            r#"U&"\D83Dx""#,
            r#"U&"\+110000""#,
            r#"U&"x" UESCAPE 'ab'"#,
            r#"U&"x" UESCAPE 'a'"#,
            r#"U&"x" UESCAPE '+'"#,
            r#"U&"x" UESCAPE ' '"#,
            r#"U&"x" UESCAPE ''''"#,
            r#"U&"""#,
            "\"\"",
        ] {
            let t = Lexer::range(bad, 0, bad.len(), false).next_token().unwrap();
            assert!(
                t.end < bad.len() || normalise(bad, t).is_none(),
                "{bad:?} normalised"
            );
        }
    }

    #[test]
    fn long_names_are_cut_at_63_bytes_on_a_character_boundary() {
        let long = "a".repeat(70);
        assert_eq!(norm(&long).unwrap().len(), 63);
        let wide = format!("\"{}\"", "é".repeat(40));
        let n = norm(&wide).unwrap();
        assert_eq!(n.len(), 62);
        assert_eq!(n, "é".repeat(31));
        let upper = "A".repeat(100);
        assert_eq!(norm(&upper).unwrap(), "a".repeat(63));
    }
}
