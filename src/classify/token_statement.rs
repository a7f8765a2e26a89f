//! C-2: the causal-token statements recognised with the classifier's own lexer, so every
//! spelling the server would take as the same statement is the engine's: comments anywhere,
//! quoted names (`"polarsplit"."causal_token"`), blanks around the dot, `E'…'` values.

use super::ident::normalise;
use super::lexer::{Lexer, Tok, Token};
use crate::token::{TokenCommand, SETTING};

/// The statement's tokens without comments.
fn words(sql: &str) -> std::iter::Peekable<impl Iterator<Item = Token> + '_> {
    Lexer::range(sql, 0, sql.len(), false)
        .filter(|t| !t.is_comment())
        .peekable()
}

fn is_kw(sql: &str, t: Option<Token>, kw: &str) -> bool {
    t.is_some_and(|t| t.kind == Tok::Ident && sql[t.start..t.end].eq_ignore_ascii_case(kw))
}

/// `polarsplit.causal_token` in any spelling the server looks up as that setting: two name
/// parts joined by a dot, or one quoted name holding the dot.
fn names_setting(sql: &str, it: &mut std::iter::Peekable<impl Iterator<Item = Token>>) -> bool {
    let Some(a) = it.next().and_then(|t| normalise(sql, t)) else {
        return false;
    };
    if it.peek().map(|t| t.kind) != Some(Tok::Dot) {
        return a.as_str().eq_ignore_ascii_case(SETTING);
    }
    it.next();
    let Some(b) = it.next().and_then(|t| normalise(sql, t)) else {
        return false;
    };
    let (want_a, want_b) = SETTING.split_once('.').unwrap_or((SETTING, ""));
    // Setting names compare without case on the server, quoted or not.
    a.as_str().eq_ignore_ascii_case(want_a) && b.as_str().eq_ignore_ascii_case(want_b)
}

/// The value of a string literal token: `'…'` with `''` doubled, or `E'…'` with the escapes a
/// token's characters could need (`\\`, `\'`); `None` for anything else.
fn string_value(text: &str) -> Option<String> {
    let (escapes, body) = match text.as_bytes().first()? {
        b'\'' => (false, &text[1..]),
        b'e' | b'E' if text.as_bytes().get(1) == Some(&b'\'') => (true, &text[2..]),
        _ => return None,
    };
    let body = body.strip_suffix('\'')?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                if chars.next() != Some('\'') {
                    return None;
                }
                out.push('\'');
            }
            '\\' if escapes => match chars.next()? {
                e @ ('\\' | '\'') => out.push(e),
                _ => return None,
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// `SHOW polarsplit.causal_token` or `SET [SESSION] polarsplit.causal_token {=|TO} '…'`, one
/// statement with an optional `;`; `Set(None)` when the value is not a string literal.
pub(crate) fn token_command(sql: &str) -> Option<TokenCommand> {
    let mut it = words(sql);
    let first = it.next();
    let cmd = if is_kw(sql, first, "show") {
        if !names_setting(sql, &mut it) {
            return None;
        }
        TokenCommand::Show
    } else if is_kw(sql, first, "set") {
        it = words(sql);
        // Past SET [SESSION].
        it.next();
        if is_kw(sql, words(sql).nth(1), "session") {
            it.next();
        }
        if !names_setting(sql, &mut it) {
            return None;
        }
        let op = it.next()?;
        let eq = op.kind == Tok::Operator && &sql[op.start..op.end] == "=";
        if !eq && !is_kw(sql, Some(op), "to") {
            return None;
        }
        match it.next() {
            Some(v) if v.kind == Tok::String => {
                TokenCommand::Set(string_value(&sql[v.start..v.end]))
            }
            Some(_) => TokenCommand::Set(None),
            None => return None,
        }
    } else {
        return None;
    };
    match it.next() {
        None => Some(cmd),
        Some(t) if t.kind == Tok::Semicolon && it.next().is_none() => Some(cmd),
        Some(_) if matches!(cmd, TokenCommand::Set(_)) => Some(TokenCommand::Set(None)),
        Some(_) => None,
    }
}
