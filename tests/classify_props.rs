//! Property tests for the classifier (SPEC §7): no input panics, the cache never changes an
//! answer, comments and whitespace never change a verdict, `a; b` is `a` then `b`, and hostile
//! inputs are refused quickly. Also: cache hits (and cold point selects) do not allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use polarsplit::internals::classify::{
    classify, classify_with_limits, Classification, Classifier, Effects, Kind, Limits, NotSafe,
    StatementInfo, WriteFunctions,
};
use proptest::prelude::*;

// ---- allocation counting (per thread, so parallel tests do not disturb each other) ----

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCS.with(|c| c.get());
    let out = f();
    let after = ALLOCS.with(|c| c.get());
    (out, after - before)
}

const PGBENCH_SELECT: &str = "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;";

#[test]
fn s7_cache_hit_and_cold_point_select_do_not_allocate() {
    let wf = WriteFunctions::defaults();
    // Building a classifier prepares the built-in table's lookup maps (once per process).
    let cl = Classifier::new(wf.clone(), 1000);
    let multi = "BEGIN; SELECT 1; COMMIT";
    // A text is cached on its second sighting (the cache's doorkeeper).
    for _ in 0..2 {
        assert!(cl.classify(PGBENCH_SELECT).is_replica_safe());
        cl.classify(multi);
    }
    for sql in [PGBENCH_SELECT, multi] {
        let (hit, n) = allocations(|| cl.classify(sql));
        assert_eq!(n, 0, "cache hit for {sql:?} allocated");
        assert_eq!(hit, classify(sql, &wf));
    }
    for sql in [
        PGBENCH_SELECT,
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "SELECT * FROM t FOR UPDATE",
        "WITH x AS (SELECT 1) SELECT nextval('s') FROM x",
        "COMMIT",
    ] {
        let (_, n) = allocations(|| classify(sql, &wf));
        assert_eq!(n, 0, "cold classification of {sql:?} allocated");
    }
    // SET resolves its variable through `Var::from_name`, which lower-cases into a String.
    let (_, n) = allocations(|| classify("SET search_path = public", &wf));
    assert!(n <= 1, "{n}");
}

// ---- generators ----

/// Pieces that exercise every lexer state and every classifier rule when glued at random.
const FRAGMENTS: &[&str] = &[
    "SELECT",
    "select",
    "FROM",
    "t",
    "WHERE",
    "x",
    "=",
    "1",
    "$1",
    "'",
    "''",
    "'a'",
    "E'",
    "\\",
    "\\'",
    "\"",
    "\"q\"",
    "U&\"",
    "U&'",
    "B'",
    "X'",
    "$$",
    "$a$",
    "$",
    "/*",
    "*/",
    "--",
    "\n",
    ";",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "::",
    "FOR",
    "UPDATE",
    "NO",
    "KEY",
    "SHARE",
    "WITH",
    "AS",
    "INSERT",
    "DELETE",
    "MERGE",
    "INTO",
    "TEMP",
    "pg_temp",
    "nextval",
    "nextval(",
    "set_config(",
    "pg_advisory_lock(",
    "pg_advisory_unlock_all()",
    "EXPLAIN",
    "ANALYZE",
    "VALUES",
    "TABLE",
    "BEGIN",
    "ATOMIC",
    "END",
    "CASE",
    "CREATE",
    "FUNCTION",
    "COMMIT",
    "ROLLBACK",
    "TO",
    "SET",
    "RESET",
    "LOCAL",
    "SESSION",
    "TIME",
    "ZONE",
    "DECLARE",
    "CURSOR",
    "HOLD",
    "PREPARE",
    "route=primary",
    "é",
    "\0",
    "{",
    "1for",
    "0x",
    "1e",
    ".5",
    "-",
    "+",
    "*",
    "ALL",
    "DISCARD",
];

fn fragment_sql() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(FRAGMENTS),
            prop::sample::select(&["", " ", "\n", "\t"][..]),
        ),
        0..40,
    )
    .prop_map(|v| v.into_iter().map(|(a, b)| format!("{a}{b}")).collect())
}

/// Well-formed single statements of every kind (no line comments, no backslashes in plain
/// strings, no hints), for the composition properties.
const STATEMENTS: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
    "SELECT 'for update'",
    "SELECT $$;$$",
    "SELECT 1 /* ; */",
    "SELECT * FROM t FOR UPDATE",
    "SELECT * FROM t FOR NO KEY UPDATE",
    "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
    "WITH RECURSIVE r(n) AS (VALUES (1) UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
    "SELECT * INTO TEMP x FROM t",
    "SELECT nextval('s')",
    "SELECT \"nextval\"('s')",
    "SELECT nextval FROM t",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_advisory_xact_lock(1)",
    "SELECT pg_advisory_unlock_all()",
    "SELECT set_config('a.b', 'c', false)",
    "SELECT E'\\';drop'",
    "SELECT 1 /* /* */ FOR UPDATE */",
    "TABLE t",
    "VALUES (1), (2)",
    "(SELECT 1)",
    "EXPLAIN SELECT 1",
    "EXPLAIN ANALYZE SELECT 1",
    "EXPLAIN DELETE FROM t",
    "UPDATE t SET a = 1",
    "INSERT INTO t VALUES (1)",
    "CREATE TEMP TABLE x (a int)",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END",
    "BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY",
    "START TRANSACTION",
    "COMMIT AND CHAIN",
    "ROLLBACK",
    "SAVEPOINT a",
    "ROLLBACK TO SAVEPOINT a",
    "RELEASE a",
    "SET search_path = public, \"$user\"",
    "SET LOCAL statement_timeout = 1000",
    "SET TIME ZONE 'UTC'",
    "SET SESSION AUTHORIZATION DEFAULT",
    "SET myapp.x = 'y'",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "RESET ALL",
    "RESET search_path",
    "SHOW search_path",
    "DISCARD ALL",
    "LISTEN c",
    "UNLISTEN *",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "FETCH 1 FROM c",
    "CLOSE ALL",
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "DEALLOCATE ALL",
    "LOCK TABLE t",
    "COPY t TO STDOUT",
    "VACUUM",
    "SELECT 'unterminated",
    "SELECT (1; 2)",
];

/// Reads (safe and not) for the comment-wrapping property.
fn read_statement() -> impl Strategy<Value = &'static str> {
    prop::sample::select(
        STATEMENTS
            .iter()
            .copied()
            .filter(|s| {
                let c = classify(s, &WriteFunctions::defaults());
                matches!(c.first().kind, Kind::Read | Kind::ReadNotSafe)
            })
            .collect::<Vec<_>>(),
    )
}

/// Separators that may land inside a string or quoted identifier without ending it.
fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(
        &[
            " ",
            "\n",
            "\t \r\n",
            "/* c */",
            "/* ; */",
            "/* nested /* ; */ FOR UPDATE */",
            "/**/",
        ][..],
    )
}

fn comment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(
        &[
            " ",
            "\n",
            "\t \r\n",
            "/* c */",
            "/* ; */",
            "/* nested /* ; */ FOR UPDATE */",
            "/**/",
            " /* 'x */ ",
        ][..],
    )
}

/// What must survive composition: everything but absolute positions.
fn view(sql: &str, s: &StatementInfo) -> (String, NotSafe, Effects, String, String) {
    let (kind, extra) = match s.kind {
        Kind::Set {
            var,
            name,
            value,
            local,
        } => (
            format!("Set({var:?},{local})"),
            format!("{}={}", name.of(sql), value.of(sql)),
        ),
        Kind::Reset { var, name } => (format!("Reset({var:?})"), name.of(sql).to_string()),
        k => (format!("{k:?}"), String::new()),
    };
    (
        kind,
        s.not_safe,
        s.effects,
        s.span.of(sql).to_string(),
        extra,
    )
}

fn check_invariants(sql: &str, c: &Classification) {
    assert!(c.count() >= 1);
    for s in c.statements() {
        assert!(
            sql.get(s.span.start as usize..s.span.end as usize)
                .is_some(),
            "span {:?} of {sql:?}",
            s.span
        );
        if let Kind::Set { name, value, .. } = s.kind {
            assert!(sql.get(name.start as usize..name.end as usize).is_some());
            assert!(sql.get(value.start as usize..value.end as usize).is_some());
        }
        // A verdict of "safe" is only ever given to a read with no reason against it.
        assert_eq!(
            s.is_replica_safe(),
            s.kind == Kind::Read && s.not_safe == NotSafe::None
        );
        if s.kind == Kind::Read {
            assert_eq!(s.not_safe, NotSafe::None, "{sql:?}");
        }
    }
    if c.is_replica_safe() {
        assert_eq!(c.count(), 1);
        assert!(!c.hint_primary);
        assert!(!c.may_write());
    }
}

/// A [`Classifier`] answers from its caches exactly what it answers without them. It records
/// the names a statement mentions (for a database's catalogue, S-6/S-7), which plain [`classify`]
/// does not: where a backslash lets two lexings of the text differ only in those names, the
/// Classifier takes them as ambiguous (nothing safe, the other reading's effects added) — more
/// careful than `classify`, never less.
fn cache_agrees(sql: &str, c: &Classification, wf: &WriteFunctions) -> Result<(), TestCaseError> {
    let uncached = Classifier::new(wf.clone(), 0).classify(sql);
    let cl = Classifier::new(wf.clone(), 8);
    prop_assert_eq!(&cl.classify(sql), &uncached);
    prop_assert_eq!(&cl.classify(sql), &uncached);
    prop_assert!(
        !uncached.is_replica_safe() || c.is_replica_safe(),
        "{:?}",
        sql
    );
    prop_assert!(uncached.may_write() || !c.may_write(), "{:?}", sql);
    Ok(())
}

#[test]
fn s7_cache_agrees_where_names_make_two_lexings_differ() {
    // Found by the property below: the names recorded for the catalogue differ between the two
    // lexings of a backslash string, so the Classifier merges the readings.
    let wf = WriteFunctions::defaults();
    for sql in [
        ");\\'\\''a'SELECT $$",
        "x;\\'\\''now'",
        "SELECT '\\' FROM t --'",
    ] {
        let c = classify(sql, &wf);
        cache_agrees(sql, &c, &wf).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn s7_random_strings_never_panic(sql in any::<String>()) {
        let c = classify(&sql, &WriteFunctions::defaults());
        check_invariants(&sql, &c);
    }

    #[test]
    fn s7_random_sql_fragments_never_panic_and_cache_agrees(sql in fragment_sql()) {
        let wf = WriteFunctions::defaults();
        let c = classify(&sql, &wf);
        check_invariants(&sql, &c);
        cache_agrees(&sql, &c, &wf)?;
    }

    #[test]
    fn s7_comments_and_whitespace_around_a_read_do_not_change_the_verdict(
        stmt in read_statement(),
        pre in comment(),
        post in comment(),
        semicolon in any::<bool>(),
    ) {
        let wf = WriteFunctions::defaults();
        let base = classify(stmt, &wf);
        let wrapped = format!("{pre}{stmt}{post}{}", if semicolon { ";" } else { "" });
        let c = classify(&wrapped, &wf);
        prop_assert_eq!(c.count(), 1);
        prop_assert_eq!(view(&wrapped, c.first()), view(stmt, base.first()));
        prop_assert_eq!(c.is_replica_safe(), base.is_replica_safe());
    }

    #[test]
    fn s7_comments_between_tokens_do_not_change_the_verdict(
        stmt in prop::sample::select(STATEMENTS),
        sep in separator(),
    ) {
        let wf = WriteFunctions::defaults();
        let base = classify(stmt, &wf);
        let spaced = stmt.replace(' ', sep);
        let c = classify(&spaced, &wf);
        prop_assert_eq!(c.count(), base.count());
        for (a, b) in c.statements().iter().zip(base.statements()) {
            prop_assert_eq!((a.kind == Kind::Read, a.not_safe, a.effects), (b.kind == Kind::Read, b.not_safe, b.effects), "{:?}", spaced);
        }
        prop_assert_eq!(c.is_replica_safe(), base.is_replica_safe());
    }

    #[test]
    fn s7_splitting_a_then_b_classifies_a_then_b(
        a in prop::sample::select(STATEMENTS),
        b in prop::sample::select(STATEMENTS),
        sep in prop::sample::select(&[";", "; ", " ;\n", ";;", "; /* x */ "][..]),
    ) {
        // An unterminated quote swallows what follows, so it can only come last.
        prop_assume!(!a.contains("'unterminated") && !a.contains("(1; 2)"));
        let wf = WriteFunctions::defaults();
        let sql = format!("{a}{sep}{b}");
        let c = classify(&sql, &wf);
        let (ca, cb) = (classify(a, &wf), classify(b, &wf));
        let want: Vec<_> = ca.statements().iter().map(|s| view(a, s))
            .chain(cb.statements().iter().map(|s| view(b, s))).collect();
        let got: Vec<_> = c.statements().iter().map(|s| view(&sql, s)).collect();
        prop_assert_eq!(got, want);
        prop_assert!(!c.is_replica_safe());
    }
}

// ---- hostile inputs ----

fn timed(sql: &str) -> (Classification, Duration) {
    let t0 = Instant::now();
    let c = classify(sql, &WriteFunctions::defaults());
    (c, t0.elapsed())
}

/// Generous even for an unoptimised build: the point is "linear", not "fast".
const QUICK: Duration = Duration::from_secs(3);

fn assert_too_complex(c: &Classification) {
    assert_eq!(c.count(), 1);
    assert_eq!(
        (c.first().kind, c.first().not_safe),
        (Kind::Unknown, NotSafe::TooComplex)
    );
}

#[test]
fn s7_hostile_10mb_sql_is_too_complex_immediately() {
    let sql = format!("SELECT {}1", "1 + ".repeat(10 << 20 >> 2));
    let (c, dt) = timed(&sql);
    assert_too_complex(&c);
    assert!(dt < Duration::from_millis(50), "{dt:?}");
}

#[test]
fn s7_hostile_100k_nested_parens_is_too_complex() {
    let sql = format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let (c, dt) = timed(&sql);
    assert_too_complex(&c);
    assert!(dt < QUICK, "{dt:?}");
    // Within the limit it is an ordinary read.
    let ok = format!("SELECT {}1{}", "(".repeat(1_000), ")".repeat(1_000));
    assert!(timed(&ok).0.is_replica_safe());
}

#[test]
fn s7_hostile_100k_statements_is_too_complex() {
    let sql = "SELECT 1;".repeat(100_000);
    let (c, dt) = timed(&sql);
    assert_too_complex(&c);
    assert!(dt < QUICK, "{dt:?}");
    let ok = "SELECT 1;".repeat(10_000);
    let (c, _) = timed(&ok);
    assert_eq!(c.count(), 10_000);
}

#[test]
fn s7_hostile_inputs_under_the_limits_get_a_correct_verdict_quickly() {
    let wf = WriteFunctions::defaults();
    let cases: Vec<(String, Kind, NotSafe)> = vec![
        (
            format!("SELECT {}1", "1 + ".repeat(250_000)),
            Kind::Read,
            NotSafe::None,
        ),
        (
            format!("SELECT 1 {}", "/*".repeat(500_000)),
            Kind::Unknown,
            NotSafe::Unparseable,
        ),
        (
            format!("SELECT '{}'", "''".repeat(500_000)),
            Kind::Read,
            NotSafe::None,
        ),
        (
            format!("SELECT ${}$ {}", "a".repeat(100_000), "$".repeat(800_000)),
            Kind::Unknown,
            NotSafe::Unparseable,
        ),
        (
            format!("SELECT {}", "\0".repeat(1_000_000)),
            Kind::Unknown,
            NotSafe::Unparseable,
        ),
        (
            format!(
                "SELECT 1 FROM t {} FOR UPDATE",
                "WHERE x = 1 AND ".repeat(50_000)
            ),
            Kind::ReadNotSafe,
            NotSafe::LockingClause,
        ),
        (
            format!("{}SELECT nextval('s')", "/* c */".repeat(100_000)),
            Kind::ReadNotSafe,
            NotSafe::WriteFunction,
        ),
        (
            format!("DO $${}$$", "pg_try_".repeat(140_000)),
            Kind::Write,
            NotSafe::NotARead,
        ),
        (
            format!("SELECT ts_stat('{}')", "pg_try_advisory_".repeat(60_000)),
            Kind::ReadNotSafe,
            NotSafe::WriteFunction,
        ),
        (
            format!("SET x.y = {}1", "1, ".repeat(200_000)),
            Kind::Set {
                var: polarsplit::internals::classify::Var::Placeholder,
                name: polarsplit::internals::classify::Span::new(4, 7),
                value: polarsplit::internals::classify::Span::new(10, 600_011),
                local: false,
            },
            NotSafe::NotARead,
        ),
    ];
    for (sql, kind, why) in cases {
        assert!(sql.len() <= Limits::DEFAULT.max_sql_len, "{}", sql.len());
        let t0 = Instant::now();
        let c = classify(&sql, &wf);
        let dt = t0.elapsed();
        assert_eq!(
            (c.count(), c.first().kind, c.first().not_safe),
            (1, kind, why),
            "{}",
            &sql[..40]
        );
        assert!(dt < QUICK, "{dt:?} for {}", &sql[..40]);
    }
}

#[test]
fn s7_configured_limits_apply() {
    let wf = WriteFunctions::defaults();
    let limits = Limits {
        max_sql_len: 100,
        max_paren_depth: 3,
        max_statements: 2,
    };
    assert_too_complex(&classify_with_limits(&"x".repeat(101), &wf, &limits));
    assert_too_complex(&classify_with_limits("SELECT ((((1))))", &wf, &limits));
    assert!(classify_with_limits("SELECT (((1)))", &wf, &limits).is_replica_safe());
    assert_too_complex(&classify_with_limits(
        "SELECT 1; SELECT 2; SELECT 3",
        &wf,
        &limits,
    ));
    assert_eq!(
        classify_with_limits("SELECT 1; SELECT 2;;", &wf, &limits).count(),
        2
    );
    let cl = Classifier::with_limits(wf, 10, limits);
    assert_too_complex(&cl.classify("SELECT ((((1))))"));
    assert_eq!(cl.limits(), &limits);
}

// ---- timing (run with: cargo test --release --test classify_props -- --ignored --nocapture) ----

#[test]
#[ignore = "timing; run in release"]
fn timing_cold_classify_vs_sqlparser() {
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;
    use std::hint::black_box;

    let wf = WriteFunctions::defaults();
    let cl = Classifier::new(wf.clone(), 10_000);
    let sqls = [
        "SELECT abalance FROM pgbench_accounts WHERE aid = 48213",
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1",
        "SELECT a.x, b.y FROM a JOIN b ON a.id = b.id WHERE a.z > 10 ORDER BY a.x LIMIT 20",
        "WITH x AS (SELECT id, sum(v) AS s FROM t GROUP BY id) SELECT * FROM x WHERE s > 0",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "SET search_path = public, \"$user\"",
    ];
    let bench = |f: &dyn Fn()| {
        for _ in 0..10_000 {
            f();
        }
        let n = 200_000u32;
        let t0 = Instant::now();
        for _ in 0..n {
            f();
        }
        t0.elapsed() / n
    };
    for sql in sqls {
        let cold = bench(&|| {
            black_box(classify(black_box(sql), &wf));
        });
        cl.classify(sql);
        let hit = bench(&|| {
            black_box(cl.classify(black_box(sql)));
        });
        let dialect = PostgreSqlDialect {};
        let n = 20_000u32;
        let t0 = Instant::now();
        for _ in 0..n {
            let _ = black_box(Parser::parse_sql(&dialect, black_box(sql)));
        }
        let sp = t0.elapsed() / n;
        println!(
            "{sql:<90} cold {:>6} ns  cached {:>5} ns  sqlparser {:>7} ns  ratio {:.1}x",
            cold.as_nanos(),
            hit.as_nanos(),
            sp.as_nanos(),
            sp.as_nanos() as f64 / cold.as_nanos().max(1) as f64
        );
    }
}
