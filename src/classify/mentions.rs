//! Which prepared statements an SQL text may name (SPEC E-2).
//!
//! The engine may prepare a client's statement on readers only. SQL run on the writer can name
//! one — `EXECUTE s`, `EXPLAIN EXECUTE s`, `CREATE TABLE t AS EXECUTE s`, `DEALLOCATE s`,
//! `PREPARE s` (which must fail with 42P05 when `s` exists) — or list them all
//! (`pg_prepared_statements`). The session prepares what is named on the writer first, so the
//! text runs as on one server. This pass over-approximates on purpose: a word read as a name
//! that names nothing the client prepared costs nothing, and one that does only prepares a
//! statement the client did prepare.

use super::ident;
use super::lexer::{Lexer, Tok};

/// What a text may name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mention {
    /// One statement, by the name the server would resolve (case-folded unless quoted).
    Name(Vec<u8>),
    /// Every named statement of the session (`pg_prepared_statements`).
    All,
}

/// Cheap first look (one pass, a byte compare per byte but at the few that start a word):
/// none of the words that can name a prepared statement appears in `sql`, in any case, so no
/// token can be one. `pg_prepared_statements` contains `prepare`.
fn may_mention(sql: &[u8]) -> bool {
    let at = |i: usize, word: &[u8]| {
        sql.get(i..i + word.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
    };
    (0..sql.len()).any(|i| match sql[i] | 0x20 {
        b'e' => at(i, b"execute"),
        b'p' => at(i, b"prepare"),
        b'd' => at(i, b"deallocate"),
        _ => false,
    })
}

/// Calls `f` for each statement `sql` may name. Strings, comments and dollar-quoted bodies name
/// nothing (the server runs none of them as a statement name); a text whose extent depends on
/// `standard_conforming_strings` is read both ways.
pub fn prepared_mentions(sql: &str, mut f: impl FnMut(Mention)) {
    if !may_mention(sql.as_bytes()) {
        return;
    }
    let plain_backslash = scan(sql, false, &mut f);
    if plain_backslash {
        scan(sql, true, &mut f);
    }
}

/// One reading; returns whether a plain string held a backslash.
fn scan(sql: &str, backslash_quotes: bool, f: &mut impl FnMut(Mention)) -> bool {
    let mut lx = Lexer::range(sql, 0, sql.len(), backslash_quotes);
    // The previous significant word, when it is one after which a statement name follows.
    let mut after_keyword = false;
    while let Some(t) = lx.next_token() {
        if t.is_comment() {
            continue;
        }
        let name = match t.kind {
            Tok::Ident | Tok::QuotedIdent | Tok::UnicodeIdent => ident::normalise(sql, t),
            _ => None,
        };
        let Some(name) = name else {
            after_keyword = false;
            continue;
        };
        if after_keyword {
            f(Mention::Name(name.as_bytes().to_vec()));
        }
        after_keyword =
            name.is_bare() && matches!(name.as_str(), "execute" | "prepare" | "deallocate");
        if name.as_str() == "pg_prepared_statements" {
            f(Mention::All);
        }
    }
    lx.saw_plain_backslash()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mentions(sql: &str) -> Vec<Mention> {
        let mut v = Vec::new();
        prepared_mentions(sql, |m| v.push(m));
        v
    }

    fn name(s: &str) -> Mention {
        Mention::Name(s.as_bytes().to_vec())
    }

    #[test]
    fn e2_sql_that_names_a_prepared_statement() {
        assert_eq!(mentions("EXECUTE foobar"), [name("foobar")]);
        assert_eq!(mentions("execute Foo(1, 'x')"), [name("foo")]);
        assert_eq!(mentions("EXPLAIN (COSTS OFF) EXECUTE q"), [name("q")]);
        assert_eq!(mentions("CREATE TABLE t AS EXECUTE q"), [name("q")]);
        assert_eq!(mentions(r#"EXECUTE "Mixed""#), [name("Mixed")]);
        assert_eq!(mentions(r#"EXECUTE U&"d\0061t""#), [name("dat")]);
        assert_eq!(mentions("DEALLOCATE s1"), [name("s1")]);
        // Over-approximated: `prepare` is taken as a name too; it names nothing harmful.
        assert_eq!(
            mentions("DEALLOCATE PREPARE s1"),
            [name("prepare"), name("s1")]
        );
        assert_eq!(mentions("PREPARE p AS SELECT 1"), [name("p")]);
        assert_eq!(
            mentions("SELECT name FROM pg_catalog.pg_prepared_statements"),
            [Mention::All]
        );
        assert_eq!(
            mentions("select 1; execute a; execute b"),
            [name("a"), name("b")]
        );
    }

    #[test]
    fn e2_strings_comments_and_bodies_name_nothing() {
        assert!(mentions("SELECT 'execute foo'").is_empty());
        assert!(mentions("SELECT 1 -- execute foo").is_empty());
        assert!(mentions("SELECT /* execute foo */ 1").is_empty());
        assert!(mentions("DO $$ BEGIN EXECUTE foo; END $$").is_empty());
        assert!(mentions(r#"SELECT "execute" foo"#).is_empty());
        assert!(mentions("INSERT INTO t VALUES (1)").is_empty());
        assert!(mentions("EXECUTE").is_empty());
    }

    #[test]
    fn e2_both_readings_of_a_backslash_string() {
        // With standard_conforming_strings off the string ends at the second quote and
        // `execute q` is SQL; on, it is inside the string. Both readings are reported.
        let m = mentions(r"SELECT 'a\' execute q --'");
        assert!(m.contains(&name("q")), "{m:?}");
    }
}
