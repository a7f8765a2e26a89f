//! SPEC §7 with the shape-keyed decision cache (issue 20): statements that differ only in
//! literals share one cached classification, and a classification served by shape is always the
//! full classification of the text — kind, reasons, effects, calls, hints and every position
//! (statement spans, SET name and value) — whatever the literals, for every statement of the
//! classification table (`tests/classify_table.rs`, read from its source) and the statements
//! below, per database (host-reported catalogues), under several F-policies and limits, and with
//! backslashes in plain literals (`standard_conforming_strings = off` reads those differently).

use std::sync::{Arc, OnceLock};

use polarsplit::internals::classify::{
    classify_with_policy, Classification, Classifier, FunctionCatalogs, FunctionPolicy, Kind,
    Limits, NotSafe, ReadFunctions, WriteFunctions,
};
use polarsplit::{UnknownFunctions, UserFunction, Volatility};
use proptest::prelude::*;

/// The first string literal of each row of the table in `classify_table.rs` (normal and raw
/// literals, with the escapes that file uses), so that every row added there is covered here.
fn table_statements() -> Vec<String> {
    let src = include_str!("classify_table.rs");
    let start = src.find("const TABLE: &[Row] = &[").expect("the table");
    let body = &src[start..];
    let end = body.find("\n];").expect("the table's end");
    let mut out = Vec::new();
    for line in body[..end].lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('(') else {
            continue;
        };
        if let Some(s) = rust_literal(rest) {
            out.push(s);
        }
    }
    out
}

/// A Rust string literal at the start of `s` (`"…"`, `r"…"`, `r#"…"#`).
fn rust_literal(s: &str) -> Option<String> {
    if let Some(raw) = s.strip_prefix("r#\"") {
        return raw.find("\"#").map(|e| raw[..e].to_string());
    }
    if let Some(raw) = s.strip_prefix("r\"") {
        return raw.find('"').map(|e| raw[..e].to_string());
    }
    let mut chars = s.strip_prefix('"')?.chars();
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                '\'' => out.push('\''),
                'u' => {
                    let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            },
            c => out.push(c),
        }
    }
}

/// Statements where a literal's value or a comment matters, or positions move, beyond the table.
const EXTRA: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = 48213",
    "UPDATE pgbench_accounts SET abalance = abalance + -2748 WHERE aid = 48213",
    "UPDATE pgbench_tellers SET tbalance = tbalance + 17 WHERE tid = 3",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (3, 1, 48213, -2748, CURRENT_TIMESTAMP)",
    "SELECT o.order_id, c.name FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE o.order_id = 91724 AND c.country = 'DE'",
    "SELECT * FROM t WHERE ts > now() - interval '30 days' AND s IN ('paid', 'shipped') LIMIT 500 OFFSET 0",
    "SELECT current_setting('in_hot_standby')",
    "SELECT current_setting('work_mem')",
    "SELECT current_setting('transaction_read_only'), 1 FROM t WHERE a = 'x'",
    "SELECT pg_catalog.current_setting('is_superuser', true)",
    "SELECT \"current_setting\"('in_hot_standby')",
    "SELECT CURRENT_SETTING ( 'server_version' ) FROM t WHERE id = 2",
    "SELECT current_setting /* c */ ('in_hot_standby')",
    "SELECT current_setting('in_hot_standby' || '')",
    "SELECT current_setting(E'in_hot_standby')",
    "SELECT ('in_hot_standby'::text).current_setting",
    "SELECT set_config('a.b', '1', false)",
    "SELECT U&\"!0061\" UESCAPE '!' FROM t WHERE a = 1",
    "SELECT U&\"!006Eextval\" UESCAPE '!'('s')",
    "SELECT U&\"d\\0061t\" FROM t WHERE x = 'y'",
    "SELECT U&'d!0061t' UESCAPE '!', 2",
    "/* route=reader */ SELECT myfn(1), lower('A')",
    "/* route=primary */ SELECT 1",
    "/* x */ /* route=reader */ SELECT touch(5)",
    "-- c\n/* route=reader */ SELECT myfn(2)",
    "SELECT 1 /* route=reader */",
    "SELECT a FROM t /* trace=abc */ WHERE b = 'x' -- c\n AND c = 2",
    "DO $$BEGIN PERFORM set_config('a', 'b', false); END$$",
    "DO 'BEGIN PERFORM pg_advisory_lock(1); END'",
    "SELECT query_to_xml('select nextval(''s'')', true, true, '')",
    "SET search_path = 'abc', public",
    "SET statement_timeout = 5000",
    "SET TIME ZONE 'UTC'",
    "SET LOCAL lock_timeout TO '1s'",
    "SET application_name = 'x'",
    "SET default_transaction_isolation = 'serializable'",
    "SET NAMES 'UTF8'",
    "SET SESSION AUTHORIZATION 'alice'",
    "RESET search_path",
    "RESET /* a */ search_path",
    "SET /* note 1 */ search_path /* 2 */ = /* 3 */ 'x', 'y' /* 4 */",
    "SET SESSION /* a */ TIME ZONE 'UTC'",
    "SELECT 1 /* a */ ; /* b */ SELECT 2",
    "SELECT 1; SELECT 2",
    "BEGIN; UPDATE t SET a = 1; COMMIT",
    "SELECT 'x\\', ' ; DELETE FROM t; --'",
    "SELECT 'xy', ' ; DELETE FROM t; --'",
    "SELECT lower('A'), myfn(1), (t.x).attr FROM t",
    "SELECT report_total(5), touch(2) FROM t",
    "SELECT * FROM t WHERE id = 7 FOR UPDATE",
    "SELECT 'x' FOR UPDATE",
    "EXPLAIN SELECT * FROM t WHERE a = 1",
    "EXPLAIN ANALYZE SELECT * FROM t WHERE a = 1",
    "DECLARE c CURSOR FOR SELECT * FROM t WHERE a = 1",
    "PREPARE TRANSACTION 'gid'",
    "COMMIT PREPARED 'x'",
    "SELECT $1::int + 5, $$a$$, $q$b$q$, B'0101', X'ff', N'n', e'\\n'",
    "SELECT 1.5e-3, .5, 0xFF, 1_000, 7",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT * FROM t WHERE a IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50)",
    "WITH x AS (SELECT 1 AS a) SELECT * FROM x WHERE a = 1",
    "SELECT nextval('s')",
    "SELECT pg_advisory_lock(42)",
    "SELECT * FROM pg_stat_replication WHERE pid = 5",
    "CREATE TEMP TABLE tt AS SELECT 1",
];

fn catalogs() -> Arc<FunctionCatalogs> {
    let c = FunctionCatalogs::new();
    let f = |name: &str, v| UserFunction {
        schema: "public".into(),
        name: name.into(),
        volatility: v,
    };
    c.set(
        b"app",
        [
            f("myfn", Volatility::Stable),
            f("report_total", Volatility::Stable),
            f("touch", Volatility::Volatile),
            f("attr", Volatility::Volatile),
        ],
    )
    .unwrap();
    // A user function sharing a built-in's name.
    c.set(b"shadow", [f("lower", Volatility::Volatile)])
        .unwrap();
    Arc::new(c)
}

const DATABASES: &[&[u8]] = &[b"app", b"shadow", b"none", b""];

/// Classifiers sharing one set of catalogues, each with its policy and limits.
struct Fixture {
    catalogs: Arc<FunctionCatalogs>,
    classifiers: Vec<Classifier>,
}

fn policies() -> Vec<(FunctionPolicy, Limits)> {
    let mut read = ReadFunctions::new();
    read.add("touch");
    let mut write = WriteFunctions::defaults();
    write.add("report_*");
    vec![
        (FunctionPolicy::default(), Limits::DEFAULT),
        (
            FunctionPolicy::new(write)
                .with_read_functions(read)
                .with_unknown_functions(UnknownFunctions::Replica),
            Limits::DEFAULT,
        ),
        (
            FunctionPolicy::default(),
            Limits {
                max_sql_len: 80,
                max_paren_depth: 2,
                max_statements: 1,
            },
        ),
    ]
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let catalogs = catalogs();
        let classifiers = policies()
            .into_iter()
            .map(|(p, l)| Classifier::with_policy(p, 4096, l, catalogs.clone()))
            .collect();
        Fixture {
            catalogs,
            classifiers,
        }
    })
}

/// The full classification, no cache.
fn full(c: &Classifier, catalogs: &FunctionCatalogs, db: &[u8], sql: &str) -> Classification {
    classify_with_policy(sql, c.policy(), catalogs.get(db).as_deref(), c.limits())
}

/// Literal-looking ranges of `sql`, found by the test's own crude scanner (independent of the
/// library's lexer): quoted strings with their prefix, dollar quotes, numbers. It skips
/// comments and quoted identifiers. Being crude is fine: whatever it replaces, the cached and the
/// full classification of the result are compared.
fn literal_ranges(sql: &str) -> Vec<(usize, usize, bool)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    while i < b.len() {
        let c = b[i];
        let prev_ident = i > 0 && (ident(b[i - 1]) || b[i - 1] == b'$');
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let s = i;
            i = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            // A comment after the first word (a leading one may be a hint).
            if !sql[..s].trim().is_empty()
                && !sql[s..i].contains("/*/")
                && sql[s + 2..i].find("/*").is_none()
            {
                out.push((s, i, true));
            }
        } else if c == b'"' {
            i = sql[i + 1..].find('"').map_or(b.len(), |e| i + 1 + e + 1);
        } else if c == b'\''
            || (!prev_ident
                && matches!(c | 0x20, b'e' | b'n' | b'b' | b'x')
                && b.get(i + 1) == Some(&b'\''))
        {
            let s = i;
            let q = if c == b'\'' { i } else { i + 1 };
            let esc = c | 0x20 == b'e';
            let mut j = q + 1;
            while j < b.len() {
                if esc && b[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if b[j] == b'\'' {
                    if b.get(j + 1) == Some(&b'\'') {
                        j += 2;
                        continue;
                    }
                    break;
                }
                j += 1;
            }
            let e = (j + 1).min(b.len());
            out.push((s, e, false));
            i = e;
        } else if c == b'$' && !prev_ident {
            let tag_end = sql[i + 1..].find('$').map(|e| i + 1 + e);
            match tag_end {
                Some(te)
                    if sql[i + 1..te]
                        .bytes()
                        .all(|c| c.is_ascii_alphabetic() || c == b'_') =>
                {
                    let tag = &sql[i..=te];
                    match sql[te + 1..].find(tag) {
                        Some(e) => {
                            let e = te + 1 + e + tag.len();
                            out.push((i, e, false));
                            i = e;
                        }
                        None => i = b.len(),
                    }
                }
                _ => i += 1,
            }
        } else if c.is_ascii_digit() && !prev_ident {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            out.push((s, i, false));
        } else {
            i += 1;
        }
    }
    out
}

/// Pieces random literal texts are made of: verdict words, quotes, backslashes, separators.
const PIECES: &[&str] = &[
    "a",
    "Z",
    "0",
    " ",
    ";",
    "''",
    "\\",
    "é",
    "FOR UPDATE",
    "set_config(",
    "pg_advisory_lock",
    "in_hot_standby",
    "transaction_read_only",
    "work_mem",
    "*/",
    "/*",
    "--",
    "$$",
    "\n",
    "!",
    "#",
    "route=reader",
    "DELETE FROM t",
    "\"",
    "nextval",
    "now",
    "Today",
    "tomorrow 10:00",
    "YESTERDAY",
];

fn string_body(parts: &[u8]) -> String {
    parts
        .iter()
        .map(|&p| PIECES[p as usize % PIECES.len()])
        .collect()
}

/// A literal of one of PostgreSQL's spellings, from random choices.
fn literal(form: u8, parts: &[u8], n: u64) -> String {
    let body = string_body(parts);
    match form % 10 {
        0..=2 => n.to_string(),
        3 => format!("{}.{}", n % 1000, n % 97),
        4 => format!("{}e{}", n % 100, n % 20),
        5 => format!("'{}'", body.replace('\'', "''")),
        6 => format!("'{}'", body),
        7 => format!("E'{}'", body.replace('\'', "\\'")),
        8 => format!("$x${}$x$", body.replace("$x$", "")),
        _ => format!("'{}'", body.replace(['\'', '\\'], "")),
    }
}

/// `sql` with some of its literals replaced.
fn substitute(sql: &str, choices: &[(bool, u8, Vec<u8>, u64)]) -> String {
    let ranges = literal_ranges(sql);
    let mut out = String::new();
    let mut last = 0;
    for (k, &(s, e, comment)) in ranges.iter().enumerate() {
        let Some((replace, form, parts, n)) = choices.get(k % choices.len().max(1)) else {
            break;
        };
        if !replace || !sql.is_char_boundary(s) || !sql.is_char_boundary(e) {
            continue;
        }
        out.push_str(&sql[last..s]);
        if comment {
            let body = string_body(parts).replace("*/", "").replace("/*", "");
            out.push_str(&format!("/*{body}{}*/", "x".repeat(*n as usize % 7)));
        } else {
            out.push_str(&literal(*form, parts, *n));
        }
        last = e;
    }
    out.push_str(&sql[last..]);
    out
}

fn all_statements() -> Vec<String> {
    let mut v = table_statements();
    v.extend(EXTRA.iter().map(|s| s.to_string()));
    v
}

/// Classifies `sql` through every classifier of the fixture for `db`, cached, and compares with
/// the full classification.
fn check(sql: &str, db: &[u8]) -> Result<(), TestCaseError> {
    let f = fixture();
    for c in &f.classifiers {
        let want = full(c, &f.catalogs, db, sql);
        let got = c.classify_in(db, sql);
        prop_assert_eq!(&got, &want, "{:?} in {:?} with {:?}", sql, db, c.limits());
    }
    Ok(())
}

#[test]
fn s7_the_classification_table_parses_from_its_source() {
    let t = table_statements();
    assert!(t.len() >= 300, "only {} rows read", t.len());
    assert!(t.iter().any(|s| s == r"SELECT E'\';drop'"));
    assert!(t.iter().any(|s| s == "SELECT 1\0"));
    assert!(t.iter().any(|s| s.is_empty()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// The shape cache never gives another verdict than the full classification: each case
    /// warms the caches with a statement (so its shape is stored), then classifies variants with
    /// random literals in every database.
    #[test]
    fn s7_shape_cached_equals_full_classification_with_random_literals(
        pick in 0usize..10_000,
        db in 0usize..DATABASES.len(),
        variants in proptest::collection::vec(
            proptest::collection::vec(
                (any::<bool>(), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..6), any::<u64>()),
                1..5,
            ),
            1..5,
        ),
    ) {
        let statements = all_statements();
        let sql = &statements[pick % statements.len()];
        let db = DATABASES[db];
        for _ in 0..3 {
            check(sql, db)?;
        }
        for choices in &variants {
            let v = substitute(sql, choices);
            check(&v, db)?;
            check(&v, db)?;
        }
    }
}

#[test]
fn s7_every_statement_and_a_literal_variant_agree_in_every_database() {
    let f = fixture();
    let hits_before: u64 = f.classifiers.iter().map(|c| c.shape_hits()).sum();
    for sql in all_statements() {
        let variant = substitute(
            &sql,
            &[(true, 0, vec![], 987_654_321), (true, 5, vec![0, 3], 1)],
        );
        for db in DATABASES {
            for _ in 0..3 {
                check(&sql, db).unwrap();
            }
            check(&variant, db).unwrap();
        }
    }
    let hits: u64 = f.classifiers.iter().map(|c| c.shape_hits()).sum();
    // Not vacuous: variants were served by shape.
    assert!(
        hits - hits_before > 100,
        "only {} shape hits",
        hits - hits_before
    );
}

/// A classifier of its own (the property test's are shared), with the default policy and the
/// fixture's catalogues.
fn fresh() -> Classifier {
    Classifier::with_policy(
        FunctionPolicy::default(),
        1024,
        Limits::DEFAULT,
        fixture().catalogs.clone(),
    )
}

/// Warms `c` with `a` (its shape is stored on the second sighting), then classifies `b`: the
/// verdicts differ (the literal or comment matters) and both are right.
fn differs(a: &str, b: &str, db: &[u8]) {
    let c = fresh();
    let cats = &fixture().catalogs;
    for _ in 0..3 {
        assert_eq!(c.classify_in(db, a), full(&c, cats, db, a), "{a:?}");
    }
    let got = c.classify_in(db, b);
    let want = full(&c, cats, db, b);
    assert_eq!(got, want, "{b:?} after {a:?}");
    let ca = full(&c, cats, db, a);
    let key = |x: &Classification| {
        (
            x.first().kind,
            x.first().not_safe,
            x.first().effects,
            x.count(),
            x.is_replica_safe(),
        )
    };
    assert_ne!(key(&ca), key(&want), "{a:?} and {b:?} should differ");
}

#[test]
fn s7_literals_a_verdict_reads_stay_in_the_key() {
    // The argument of current_setting (S-7), however the name is spelled.
    differs(
        "SELECT current_setting('work_mem')",
        "SELECT current_setting('in_hot_standby')",
        b"",
    );
    differs(
        "SELECT \"current_setting\"('work_mem')",
        "SELECT \"current_setting\"('in_hot_standby')",
        b"",
    );
    differs(
        "SELECT CURRENT_SETTING ('work_mem') FROM t WHERE a = 1",
        "SELECT CURRENT_SETTING ('transaction_read_only') FROM t WHERE a = 2",
        b"",
    );
    differs(
        "SELECT U&\"current!005Fsetting\" UESCAPE '!'('work_mem')",
        "SELECT U&\"current!005Fsetting\" UESCAPE '!'('in_hot_standby')",
        b"",
    );
    // The UESCAPE character decides which name `U&"…"` spells.
    differs(
        "SELECT U&\"#006Eextval\" UESCAPE '!'('s')",
        "SELECT U&\"!006Eextval\" UESCAPE '!'('s')",
        b"",
    );
    // A date/time input of the transaction's start (P-5: such a read is never split), in every
    // kind of string literal.
    differs("SELECT '2026-12-01'::date", "SELECT 'today'::date", b"");
    differs(
        "SELECT * FROM t WHERE ts < 'x' AND k = 1",
        "SELECT * FROM t WHERE ts < 'NOW' AND k = 1",
        b"",
    );
    differs(
        "SELECT $$x$$::timestamptz",
        "SELECT $$tomorrow$$::timestamptz",
        b"",
    );
    differs(
        "SELECT N'x'::timestamptz",
        "SELECT N'yesterday'::timestamptz",
        b"",
    );
    differs(
        "SELECT current_setting('work_mem')",
        "SELECT current_setting('transaction_isolation')",
        b"",
    );
    // Hint comments.
    differs(
        "/* route=other */ SELECT touch(1)",
        "/* route=reader */ SELECT touch(1)",
        b"app",
    );
    differs("/* note */ SELECT 1", "/* route=primary */ SELECT 1", b"");
    // A DO body and SQL text a built-in runs are read as text.
    differs(
        "DO $$BEGIN NULL; END$$",
        "DO $$BEGIN PERFORM pg_advisory_lock(1); END$$",
        b"",
    );
    differs(
        "SELECT query_to_xml('select 1', true, true, '')",
        "SELECT query_to_xml('select set_config(''a.b'', ''1'', false)', true, true, '')",
        b"",
    );
    // A backslash in a plain literal: with standard_conforming_strings = off the string ends
    // elsewhere and a DELETE appears.
    differs(
        "SELECT 'xy', ' ; DELETE FROM t; --'",
        "SELECT 'x\\', ' ; DELETE FROM t; --'",
        b"",
    );
}

#[test]
fn s7_statements_differing_only_in_literals_share_one_shape() {
    let c = fresh();
    for i in 0..1000u32 {
        let sql = format!(
            "SELECT abalance FROM pgbench_accounts WHERE aid = {}",
            i * 7919 % 100_000
        );
        let got = c.classify_in(b"", &sql);
        assert!(got.is_replica_safe(), "{sql}");
        assert_eq!(got.first().span.of(&sql), sql);
        let upd = format!(
            "UPDATE pgbench_accounts SET abalance = abalance + {} WHERE aid = {i}",
            i % 5000
        );
        assert_eq!(c.classify_in(b"", &upd).first().kind, Kind::Write);
    }
    assert_eq!(c.cached_shapes(), 2);
    assert!(c.shape_hits() >= 1990, "{} hits", c.shape_hits());
    // The texts themselves, seen once each, were not admitted.
    assert!(c.cached_len() < 10, "{} texts cached", c.cached_len());
    // A SET's value is found in each text.
    for v in ["'a'", "'a much longer schema name'", "public"] {
        let sql = format!("SET search_path = {v}, x");
        let got = c.classify_in(b"", &sql);
        match got.first().kind {
            Kind::Set { value, .. } => assert_eq!(value.of(&sql), format!("{v}, x")),
            k => panic!("{k:?}"),
        }
    }
}

#[test]
fn s7_the_length_limit_is_not_shared_by_shape() {
    let c = Classifier::with_policy(
        FunctionPolicy::default(),
        64,
        Limits {
            max_sql_len: 40,
            ..Limits::DEFAULT
        },
        Arc::new(FunctionCatalogs::new()),
    );
    for _ in 0..3 {
        assert!(c.classify("SELECT * FROM t WHERE a = 1").is_replica_safe());
    }
    let long = "SELECT * FROM t WHERE a = 12345678901234567890";
    assert_eq!(c.classify(long).first().not_safe, NotSafe::TooComplex);
}

/// Host threads share the classifier: each keeps its own local slots in front of the shared
/// tables, and every thread's answers stay the full classification.
#[test]
fn s7_shape_cache_shared_by_threads_agrees_with_full_classification() {
    let c = Arc::new(fresh());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                let cats = &fixture().catalogs;
                for i in 0..2000u64 {
                    let sql = match i % 4 {
                        0 => format!(
                            "SELECT abalance FROM pgbench_accounts WHERE aid = {}",
                            i * 31 + t
                        ),
                        1 => format!(
                            "UPDATE pgbench_accounts SET abalance = abalance + {i} WHERE aid = {t}"
                        ),
                        2 => format!("SELECT current_setting('in_hot_standby'), {i}"),
                        _ => format!("SET search_path = 'schema_{i}', public"),
                    };
                    for db in [&b"app"[..], b"shadow"] {
                        assert_eq!(c.classify_in(db, &sql), full(&c, cats, db, &sql), "{sql}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(c.cached_shapes() >= 4);
}

#[test]
fn s7_new_literals_one_after_another_on_one_thread_agree_with_full_classification() {
    // As a host thread runs: one classifier, each statement warmed, then a run of variants
    // with new literals. From the second variant on, a text is matched along the key of the
    // shape that served the one before (the thread's guide) before it is scanned for its own.
    let cats = &fixture().catalogs;
    for db in DATABASES {
        let c = fresh();
        let before = c.shape_hits();
        for sql in all_statements() {
            for _ in 0..3 {
                assert_eq!(c.classify_in(db, &sql), full(&c, cats, db, &sql), "{sql:?}");
            }
            for n in 0..8u64 {
                let choice = (true, (n % 10) as u8, vec![n as u8, 39, 92], n * 7919 + 1);
                let v = substitute(&sql, &[choice]);
                for _ in 0..2 {
                    assert_eq!(
                        c.classify_in(db, &v),
                        full(&c, cats, db, &v),
                        "{v:?} after {sql:?}"
                    );
                }
            }
        }
        // Not vacuous: variants were served by shape.
        let hits = c.shape_hits() - before;
        assert!(hits > 1000, "only {hits} shape hits");
    }
}
