//! Causal tokens (SPEC §11): a session's position as text an application can carry to another
//! connection or another proxy process — `ps1:<system identifier>.<timeline>:<X>/<Y>`.
//!
//! The history part names the writer's history (its system identifier and the timeline it
//! writes), so every proxy process serving the same cluster formats and accepts the same token
//! (C-3). A host that reports no writer identity gets history `0.0`: such tokens mean something
//! only to proxies that see the same writer, and the documentation says so.
//!
//! Parsing is strict: a string parses only if formatting the value gives back exactly that
//! string (no leading zeros, upper-case hexadecimal as PostgreSQL prints LSNs, nothing around it).

use std::fmt;

use crate::protocol::Lsn;

/// The writer's history: the system identifier from `pg_control_system()` and the timeline it
/// writes now (C-1). `{0, 0}`: unknown (tokens valid where the same writer is seen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WriterIdentity {
    /// The system identifier (`pg_control_system().system_identifier`); 0 when unknown.
    pub system_id: u64,
    /// The timeline the writer writes on; 0 when unknown.
    pub timeline: u32,
}

/// A parsed token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    /// The writer history the position belongs to.
    pub history: WriterIdentity,
    /// The WAL position a read presenting the token must see.
    pub lsn: Lsn,
}

const PREFIX: &str = "ps1:";

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}{}.{}:{:X}/{:X}",
            self.history.system_id,
            self.history.timeline,
            self.lsn.0 >> 32,
            self.lsn.0 & 0xffff_ffff
        )
    }
}

/// A decimal number in canonical form (no sign, no leading zero unless it is `0`).
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

/// Upper-case hexadecimal in canonical form, at most 8 digits (one half of an LSN).
fn hex_half(s: &str) -> Option<u64> {
    if s.is_empty()
        || s.len() > 8
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
        || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

impl Token {
    /// Parses a token; `None` unless `s` is exactly a token's canonical text.
    pub fn parse(s: &str) -> Option<Token> {
        let rest = s.strip_prefix(PREFIX)?;
        let (history, lsn) = rest.split_once(':')?;
        let (sys, tli) = history.split_once('.')?;
        let (hi, lo) = lsn.split_once('/')?;
        let timeline = u32::try_from(decimal(tli)?).ok()?;
        let t = Token {
            history: WriterIdentity {
                system_id: decimal(sys)?,
                timeline,
            },
            lsn: Lsn(hex_half(hi)? << 32 | hex_half(lo)?),
        };
        // Canonical or nothing (e.g. `0A/1` is refused above; this also catches anything the
        // pieces accept but formatting would not give back).
        (t.to_string() == s).then_some(t)
    }
}

/// A statement about the token that the engine answers itself (C-1, C-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenCommand {
    /// `SHOW polarsplit.causal_token`
    Show,
    /// `SET [SESSION] polarsplit.causal_token {=|TO} '<value>'` — the value as written
    /// (unquoted; `None` when it is not a plain string literal).
    Set(Option<String>),
}

/// The setting's name, lower-case.
pub const SETTING: &str = "polarsplit.causal_token";
/// The startup option that asks for the token as a ParameterStatus.
pub const REPORT_OPTION: &str = "polarsplit.report_token";

/// Whether `text` may start a token statement: `token::command` recognises only texts that
/// start, after blanks, with `SHOW` or `SET` in any case, or with a comment. Looks at a few
/// bytes only (no UTF-8 check of the whole text): the head of every extended batch is asked
/// whether it is a token statement each time a message of its batch arrives (issue 20's
/// profile: 13% of an extended read cycle). `text` may run on past the statement text (a
/// Parse body's rest): only its first bytes are read.
pub(crate) fn may_be_command(text: &[u8]) -> bool {
    let start = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c))
        .unwrap_or(text.len());
    match text.get(start..start + 3) {
        Some(&[a, b, c]) => {
            matches!(
                [a | 0x20, b | 0x20, c | 0x20],
                [b's', b'h', b'o'] | [b's', b'e', b't']
            ) || matches!([a, b], [b'/', b'*'] | [b'-', b'-'])
        }
        _ => false,
    }
}

/// Recognises the token statements (one statement, an optional trailing `;`). Anything else —
/// including other spellings that would reach a server — is `None`.
pub fn command(sql: &str) -> Option<TokenCommand> {
    // Cheap exit for everything else (the hot path): three bytes reject a SELECT.
    if !may_be_command(sql.as_bytes()) {
        return None;
    }
    crate::classify::token_command(sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn c1_format_is_canonical() {
        let t = Token {
            history: WriterIdentity {
                system_id: 7_301_234_567_890_123_456,
                timeline: 3,
            },
            lsn: Lsn(0x16_B374_D848),
        };
        assert_eq!(t.to_string(), "ps1:7301234567890123456.3:16/B374D848");
        assert_eq!(Token::parse(&t.to_string()), Some(t));
        for bad in [
            "ps1:1.1:0/0 ",
            " ps1:1.1:0/0",
            "ps1:01.1:0/0",
            "ps1:1.01:0/0",
            "ps1:1.1:00/0",
            "ps1:1.1:0/0a",
            "ps1:1.1:0/+1",
            "ps1:1.1:123456789/0",
            "ps1:1.4294967296:0/0",
            "ps1:-1.1:0/0",
            "ps2:1.1:0/0",
            "ps1:1:0/0",
            "",
        ] {
            assert_eq!(Token::parse(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn c1_any_string_parses_to_its_canonical_form_or_not_at_all(s in ".{0,40}") {
            if let Some(t) = Token::parse(&s) {
                prop_assert_eq!(t.to_string(), s);
            }
        }

        #[test]
        fn c1_near_misses_of_tokens_parse_only_when_canonical(
            sys in any::<u64>(), tli in any::<u32>(), lsn in any::<u64>(),
            edit in 0usize..40, with in "[0-9A-Fa-f.:/ps1 +-]{0,2}",
        ) {
            let t = Token { history: WriterIdentity { system_id: sys, timeline: tli }, lsn: Lsn(lsn) };
            let s = t.to_string();
            prop_assert_eq!(Token::parse(&s), Some(t));
            let cut = edit.min(s.len());
            let mutated = format!("{}{}{}", &s[..cut], with, &s[cut..]);
            if let Some(p) = Token::parse(&mutated) {
                prop_assert_eq!(p.to_string(), mutated);
            }
        }
    }

    #[test]
    fn c2_commands_are_recognised_and_nothing_else() {
        assert_eq!(
            command("SHOW polarsplit.causal_token"),
            Some(TokenCommand::Show)
        );
        assert_eq!(
            command("  show POLARSPLIT.CAUSAL_TOKEN ;"),
            Some(TokenCommand::Show)
        );
        assert_eq!(
            command("SET polarsplit.causal_token = 'ps1:1.1:0/10'"),
            Some(TokenCommand::Set(Some("ps1:1.1:0/10".into())))
        );
        assert_eq!(
            command("set session polarsplit.causal_token to 'it''s'"),
            Some(TokenCommand::Set(Some("it's".into())))
        );
        assert_eq!(
            command("SET polarsplit.causal_token = 12"),
            Some(TokenCommand::Set(None))
        );
        assert_eq!(command("SELECT 'polarsplit.causal_token'"), None);
        assert_eq!(command("SHOW polarsplit.causal_tokens"), None);
        assert_eq!(command("SET LOCAL polarsplit.causal_token = 'x'"), None);
        assert_eq!(
            command("SET polarsplit.causal_token = 'a'; SELECT 1"),
            Some(TokenCommand::Set(None))
        );
        assert_eq!(command("SELECT 1"), None);
    }

    /// C-2, §7: every spelling the server takes for the same statement is the engine's (an
    /// examiner's probe of 2026-12-05 found comments, quoted names and blanks around the dot
    /// forwarded to the primary, which took them as a placeholder SET and ignored the token).
    #[test]
    fn c2_every_spelling_of_the_token_statements_is_recognised() {
        let set = Some(TokenCommand::Set(Some("ps1:1.1:0/10".into())));
        for sql in [
            "/* app:checkout */ SET polarsplit.causal_token = 'ps1:1.1:0/10'",
            "-- lead\nSET polarsplit.causal_token = 'ps1:1.1:0/10'",
            "SET \"polarsplit\".\"causal_token\" = 'ps1:1.1:0/10'",
            "SET polarsplit . causal_token = 'ps1:1.1:0/10'",
            "SET polarsplit.causal_token = 'ps1:1.1:0/10' -- trailing",
            "SET polarsplit.causal_token /* c */ = 'ps1:1.1:0/10';",
            "SET polarsplit.causal_token = E'ps1:1.1:0/10'",
            "\x0cSET SESSION polarsplit.causal_token TO 'ps1:1.1:0/10'",
        ] {
            assert_eq!(command(sql), set, "{sql:?}");
        }
        for sql in [
            "/* c */ SHOW polarsplit.causal_token",
            "SHOW \"polarsplit\".\"causal_token\"",
            "SHOW polarsplit.causal_token -- c",
        ] {
            assert_eq!(command(sql), Some(TokenCommand::Show), "{sql:?}");
        }
        // One quoted name holding the dot is the same setting to the server.
        assert_eq!(
            command("SHOW \"polarsplit.causal_token\""),
            Some(TokenCommand::Show)
        );
        // Setting names compare without case on the server, quoted or not.
        assert_eq!(
            command("SHOW \"Polarsplit\".CAUSAL_token"),
            Some(TokenCommand::Show)
        );
        assert_eq!(command("SHOW polarsplit.causal_token2"), None);
        assert_eq!(
            command("/* SET polarsplit.causal_token = 'x' */ SELECT 1"),
            None
        );
    }
}
