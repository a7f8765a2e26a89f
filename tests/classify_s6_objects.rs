//! SPEC S-6 and S-5 for code that objects hide, through the public API: "views, operators and
//! casts hide calls" — and so do domain CHECKs and row-level security policies. The host reports
//! each such object with the name a statement invokes it by and a definition
//! (`Engine::set_object_catalog`); a statement naming the object is judged as if the definition
//! were part of its text: not replica-safe where the definition is not (a view over
//! `set_config`, over a volatile function, over a sequence), with the definition's effects (a
//! session-state change is a capture on the writer, S-5; user code makes the reader connection
//! that ran it be reset before another session gets it, S-6; a transaction value keeps a read
//! in its block, P-5). These are the examiner's objects of `tests/e2e/test_red1_findings.py`.

use polarsplit::internals::classify::{Classification, Effects, Kind, NotSafe};
use polarsplit::{ConfigBuilder, Engine, UserFunction, UserObject, UserSequence, Volatility};

fn obj(name: &str, definition: &str) -> UserObject {
    UserObject {
        schema: "public".into(),
        name: name.into(),
        definition: definition.into(),
    }
}

fn func(name: &str, volatility: Volatility) -> UserFunction {
    UserFunction {
        schema: "public".into(),
        name: name.into(),
        volatility,
    }
}

fn engine() -> std::sync::Arc<Engine> {
    Engine::new(ConfigBuilder::new().build().unwrap())
}

fn first(e: &Engine, db: &[u8], sql: &str) -> (NotSafe, Effects) {
    let c: Classification = e.classifier().classify_in(db, sql);
    let s = *c.first();
    (s.not_safe, s.effects)
}

/// The red1 catalogue: views over set_config (role, placeholder), an operator, a domain and a
/// cast whose functions are STABLE user functions.
fn red1(e: &Engine) {
    e.set_function_catalog(
        b"app",
        [
            func("red1_opf", Volatility::Stable),
            func("red1_chk", Volatility::Stable),
            func("red1_castf", Volatility::Stable),
        ],
    )
    .unwrap();
    e.set_object_catalog(
        b"app",
        [
            obj(
                "red1_v_role",
                " SELECT set_config('role'::text, 'red1_rr'::text, false) AS r;",
            ),
            obj(
                "red1_v_tenant",
                " SELECT set_config('red1.tenant'::text, 'acme'::text, false) AS t;",
            ),
            obj("#+#", "SELECT public.red1_opf(NULL, NULL)"),
            obj(
                "red1_dom",
                "SELECT NULL::pg_catalog.int4, (red1_chk(VALUE))",
            ),
            obj("red1_ty", "SELECT public.red1_castf(NULL)"),
            obj("text", "SELECT public.red1_castf(NULL)"),
            obj("plain_v", " SELECT t.a, t.b FROM t WHERE t.a > 0;"),
        ],
    )
    .unwrap();
}

#[test]
fn s5_a_read_of_a_view_over_set_config_goes_to_the_writer_and_changes_state() {
    let e = engine();
    red1(&e);
    for sql in [
        "SELECT r FROM red1_v_role",
        "SELECT * FROM public.red1_v_role",
        "SELECT * FROM \"red1_v_role\"",
        "select t from RED1_V_TENANT",
        "SELECT x FROM t WHERE EXISTS (SELECT 1 FROM red1_v_tenant)",
        "WITH w AS (SELECT * FROM red1_v_role) SELECT * FROM w",
        "/* route=reader */ SELECT r FROM red1_v_role",
    ] {
        let (why, fx) = first(&e, b"app", sql);
        assert_eq!(why, NotSafe::WriteFunction, "{sql}");
        assert!(fx.contains(Effects::CALLS_SET_CONFIG), "{sql}: {fx:?}");
    }
    // A write naming it runs it on the writer too: the state change is seen (a capture follows).
    let c = e
        .classifier()
        .classify_in(b"app", "INSERT INTO log SELECT r FROM red1_v_role");
    assert_eq!(c.first().kind, Kind::Write);
    assert!(c.first().effects.contains(Effects::CALLS_SET_CONFIG));
    // Another database, or none: the names hide nothing there.
    assert_eq!(
        first(&e, b"other", "SELECT r FROM red1_v_role"),
        (NotSafe::None, Effects::NONE)
    );
    assert!(e.classify("SELECT r FROM red1_v_role").is_replica_safe());
    // Not the view: a string, a comment, another name.
    for sql in [
        "SELECT 'red1_v_role' FROM t",
        "SELECT a FROM t -- red1_v_role",
        "SELECT * FROM red1_v_role2",
    ] {
        assert_eq!(
            first(&e, b"app", sql),
            (NotSafe::None, Effects::NONE),
            "{sql}"
        );
    }
}

#[test]
fn s6_an_operator_a_domain_or_a_cast_runs_user_code_on_the_reader() {
    let e = engine();
    red1(&e);
    for sql in [
        "SELECT 1 #+# 2",
        "SELECT a FROM t WHERE a #+# 1 > 0",
        "SELECT 5::red1_dom",
        "SELECT CAST(5 AS red1_dom)",
        "SELECT ROW(1)::red1_ty::text",
        "SELECT a::text FROM t",
    ] {
        let (why, fx) = first(&e, b"app", sql);
        assert_eq!(
            why,
            NotSafe::None,
            "{sql}: a STABLE user function is read-safe"
        );
        assert!(fx.contains(Effects::RUNS_CODE), "{sql}: {fx:?}");
    }
    for sql in ["SELECT 1 + 2", "SELECT 5::int", "SELECT a FROM plain_v"] {
        assert_eq!(
            first(&e, b"app", sql),
            (NotSafe::None, Effects::NONE),
            "{sql}"
        );
    }
}

/// An examiner's finding (2026-12-05): with a user `=` operator in the database (citext's), `SET
/// name = value` was taken for code the engine cannot see, and the session's reads stayed on the
/// primary for good. No expression is evaluated in SET or RESET; a read's `=` is still judged.
#[test]
fn s6_a_user_equals_operator_is_not_called_by_set() {
    let e = engine();
    e.set_function_catalog(b"app", [func("citext_eq", Volatility::Immutable)])
        .unwrap();
    e.set_object_catalog(b"app", [obj("=", "SELECT public.citext_eq(NULL, NULL)")])
        .unwrap();
    for sql in [
        "SET search_path = public",
        "set work_mem = '8MB'",
        "SET LOCAL statement_timeout = 0",
    ] {
        let (_, fx) = first(&e, b"app", sql);
        assert!(!fx.contains(Effects::RUNS_CODE), "{sql}: {fx:?}");
    }
    let (why, fx) = first(&e, b"app", "SELECT a FROM t WHERE a = 'x'");
    assert_eq!(why, NotSafe::None);
    assert!(fx.contains(Effects::RUNS_CODE), "{fx:?}");
}

/// An examiner's finding (2026-12-05): a volatile user operator named `=` or `~~` (a schema
/// ahead of `pg_catalog` in `search_path`, a user type) ran on the standby for spellings that do
/// not show it: `LIKE` calls `~~`, `IN` and `NULLIF` call `=`, `BETWEEN` and `ORDER BY` the
/// comparisons.
#[test]
fn s6_operators_called_without_their_symbol_are_judged() {
    let e = engine();
    e.set_function_catalog(
        b"app",
        [
            func("h_eq", Volatility::Volatile),
            func("h_like", Volatility::Volatile),
        ],
    )
    .unwrap();
    e.set_object_catalog(
        b"app",
        [
            obj("=", "SELECT public.h_eq(NULL, NULL)"),
            obj("<", "SELECT public.h_eq(NULL, NULL)"),
            obj("~~", "SELECT public.h_like(NULL, NULL)"),
        ],
    )
    .unwrap();
    for sql in [
        "SELECT 'a' LIKE 'b'",
        "SELECT 'a' NOT ILIKE 'b'",
        "SELECT 1 IN (1, 2)",
        "SELECT NULLIF(1, 2)",
        "SELECT CASE 1 WHEN 1 THEN 'x' END",
        "SELECT 1 IS DISTINCT FROM 2",
        "SELECT 2 BETWEEN 1 AND 3",
        "SELECT a FROM t ORDER BY a",
        "SELECT DISTINCT a FROM t",
        "SELECT a FROM t GROUP BY a",
        "SELECT a FROM t JOIN u USING (a)",
        "SELECT 1 UNION SELECT 2",
        "SELECT greatest(1, 2)",
        "SELECT max(a) FROM t",
    ] {
        assert_eq!(first(&e, b"app", sql).0, NotSafe::UserFunction, "{sql}");
    }
    for sql in ["SELECT a FROM t", "SELECT 1 + 2", "SELECT a FROM t LIMIT 1"] {
        assert_eq!(first(&e, b"app", sql).0, NotSafe::None, "{sql}");
    }
}

/// The verdict follows the function catalogue: the same objects over a function reported
/// volatile afterwards keep reads on the writer, without a new object report.
#[test]
fn s6_object_verdicts_are_judged_again_when_the_functions_are_reported() {
    let e = engine();
    red1(&e);
    assert_eq!(first(&e, b"app", "SELECT 1 #+# 2").0, NotSafe::None);
    e.set_function_catalog(b"app", [func("red1_opf", Volatility::Volatile)])
        .unwrap();
    assert_eq!(first(&e, b"app", "SELECT 1 #+# 2").0, NotSafe::UserFunction);
    // red1_chk is not reported any more: unknown, and unknown functions go to the primary.
    assert_eq!(
        first(&e, b"app", "SELECT 5::red1_dom").0,
        NotSafe::UnknownFunction
    );
    assert!(e.remove_object_catalog(b"app"));
    assert!(!e.remove_object_catalog(b"app"));
    assert_eq!(
        first(&e, b"app", "SELECT 1 #+# 2"),
        (NotSafe::None, Effects::NONE)
    );
}

/// Views over views, over sequences, over transaction values; a domain over a domain; cycles end.
#[test]
fn s6_definitions_are_judged_against_each_other_to_a_fixed_point() {
    let e = engine();
    e.set_sequence_catalog(
        b"app",
        [UserSequence {
            schema: "public".into(),
            name: "order_seq".into(),
        }],
    )
    .unwrap();
    e.set_object_catalog(
        b"app",
        [
            obj("v3", "SELECT * FROM v2"),
            obj("v2", "SELECT * FROM v1 JOIN t USING (a)"),
            obj("v1", "SELECT set_config('app.tenant', 'x', false)"),
            obj("v_seq", "SELECT last_value FROM order_seq"),
            obj("v_now", "SELECT now() AS t"),
            obj("outer_dom", "SELECT NULL::public.inner_dom"),
            obj(
                "inner_dom",
                "SELECT NULL::int4, (pg_advisory_lock(1) IS NULL)",
            ),
            obj("cyc_a", "SELECT * FROM cyc_b"),
            obj("cyc_b", "SELECT * FROM cyc_a, v1"),
            obj("bad", "DELETE FROM t"),
            obj("junk", "SELECT 'unterminated"),
        ],
    )
    .unwrap();
    let (why, fx) = first(&e, b"app", "SELECT * FROM v3");
    assert_eq!(why, NotSafe::WriteFunction);
    assert!(fx.contains(Effects::CALLS_SET_CONFIG));
    assert_eq!(
        first(&e, b"app", "SELECT * FROM v_seq").0,
        NotSafe::ServerDependent
    );
    let (why, fx) = first(&e, b"app", "SELECT * FROM v_now");
    assert_eq!(why, NotSafe::None);
    assert!(fx.contains(Effects::TXN_VALUE), "{fx:?}");
    let (why, fx) = first(&e, b"app", "SELECT 1::outer_dom");
    assert_ne!(why, NotSafe::None);
    assert!(fx.contains(Effects::ADVISORY_LOCK), "{fx:?}");
    for sql in ["SELECT * FROM cyc_a", "SELECT * FROM cyc_b"] {
        assert!(
            first(&e, b"app", sql).1.contains(Effects::CALLS_SET_CONFIG),
            "{sql}"
        );
    }
    assert_eq!(
        first(&e, b"app", "SELECT * FROM bad").0,
        NotSafe::Unparseable
    );
    assert_eq!(
        first(&e, b"app", "SELECT * FROM junk").0,
        NotSafe::Unparseable
    );
}

/// A chain longer than the fixed point's rounds is judged the worst, never read-safe.
#[test]
fn s6_a_chain_of_views_longer_than_the_rounds_is_not_replica_safe() {
    let e = engine();
    let mut objects = vec![obj("v0", "SELECT set_config('a.b', 'c', false)")];
    for i in 1..40 {
        objects.push(obj(&format!("v{i}"), &format!("SELECT * FROM v{}", i - 1)));
    }
    e.set_object_catalog(b"app", objects).unwrap();
    for i in [0, 1, 15, 39] {
        let (why, fx) = first(&e, b"app", &format!("SELECT * FROM v{i}"));
        assert_ne!(why, NotSafe::None, "v{i}");
        assert!(
            fx.contains(Effects::CALLS_SET_CONFIG) || fx.contains(Effects::RUNS_CODE),
            "v{i}: {fx:?}"
        );
    }
}

/// A user cast is reported by its types' stored names; a statement may write a built-in type by
/// its SQL spelling.
#[test]
fn s6_a_cast_to_a_built_in_type_matches_its_sql_spellings() {
    let e = engine();
    e.set_function_catalog(b"app", [func("to_int", Volatility::Stable)])
        .unwrap();
    e.set_object_catalog(b"app", [obj("int4", "SELECT public.to_int(NULL)")])
        .unwrap();
    for sql in [
        "SELECT x::int4 FROM t",
        "SELECT x::integer FROM t",
        "SELECT CAST(x AS int) FROM t",
    ] {
        assert!(
            first(&e, b"app", sql).1.contains(Effects::RUNS_CODE),
            "{sql}"
        );
    }
    assert_eq!(first(&e, b"app", "SELECT x::int8 FROM t").1, Effects::NONE);
}

#[test]
fn s6_bad_object_reports_are_refused_whole() {
    let e = engine();
    e.set_object_catalog(b"app", [obj("v", "SELECT set_config('a.b', 'c', false)")])
        .unwrap();
    assert!(e.set_object_catalog(b"app", [obj("", "SELECT 1")]).is_err());
    assert!(e
        .set_object_catalog(b"app", [obj(&"x".repeat(64), "SELECT 1")])
        .is_err());
    // Nothing changed.
    assert_eq!(
        first(&e, b"app", "SELECT * FROM v").0,
        NotSafe::WriteFunction
    );
}

/// DDL that may change the catalogues is marked, and every DO block (what runs inside is code the
/// engine cannot see into); what cannot (an index over plain columns, a role, a temporary
/// object) is not.
#[test]
fn s6_ddl_that_may_change_the_catalogues_is_marked() {
    let e = engine();
    for sql in [
        "CREATE VIEW v AS SELECT set_config('a.b', 'c', false)",
        "create or replace function initcap(text) returns text language sql as $$select 1$$",
        "CREATE TABLE t (id serial)",
        "CREATE SEQUENCE s",
        "CREATE POLICY p ON t USING (true)",
        "ALTER TABLE t ENABLE ROW LEVEL SECURITY",
        "ALTER VIEW v RENAME TO w",
        "DROP FUNCTION f(int)",
        "CREATE EXTENSION citext",
        "DO $$ BEGIN EXECUTE 'create view v2 as select 1'; END $$",
        // Red10-b: DDL behind a dollar quote, in a function the block calls, or in no word.
        "DO $d$BEGIN EXECUTE $e$CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'select 1'$e$; END$d$",
        "DO $$BEGIN PERFORM mk(); END$$",
        "DO $$ BEGIN PERFORM created_at FROM t; END $$",
    ] {
        let c = e.classifier().classify_in(b"app", sql);
        assert!(
            c.first().effects.contains(Effects::CHANGES_CATALOG),
            "{sql}: {:?}",
            c.first().effects
        );
    }
    for sql in [
        "CREATE INDEX i ON t (a)",
        "CREATE UNIQUE INDEX i ON t (a)",
        "DROP INDEX i",
        "CREATE TEMP TABLE tt (a int)",
        "CREATE TEMPORARY VIEW tv AS SELECT 1",
        "ALTER ROLE r SET search_path = a",
        "DROP DATABASE d",
        "INSERT INTO t VALUES (1)",
        "SELECT 1",
    ] {
        let c = e.classifier().classify_in(b"app", sql);
        assert!(
            !c.first().effects.contains(Effects::CHANGES_CATALOG),
            "{sql}"
        );
    }
}

/// E-2 (a review of red10-b's fix): a DO block whose words say no CREATE, ALTER or DROP keeps
/// the epoch of names (it still changes the catalogue); one that says so — behind a dollar
/// quote too — moves it.
#[test]
fn e2_a_do_block_moves_names_only_when_its_words_say_ddl() {
    let e = engine();
    for (sql, moves) in [
        ("DO $$BEGIN PERFORM mk(); END$$", false),
        ("DO $$BEGIN UPDATE t SET a = 1; END$$", false),
        (
            "DO $d$BEGIN EXECUTE $e$CREATE TABLE x (a int)$e$; END$d$",
            true,
        ),
        ("DO $$ BEGIN EXECUTE 'drop view v'; END $$", true),
    ] {
        let fx = e.classifier().classify_in(b"app", sql).first().effects;
        assert!(fx.contains(Effects::CHANGES_CATALOG), "{sql}: {fx:?}");
        assert_eq!(!fx.contains(Effects::KEEPS_NAMES), moves, "{sql}: {fx:?}");
    }
}

/// S-7 (red10-b): the catalogue links a table to the functions of its indexes' predicates and
/// expressions (a planner folds an IMMUTABLE predicate and answers from the index), so CREATE
/// INDEX with either changes the verdicts of the table's reads; it moves no name (E-2).
#[test]
fn s7_an_index_with_a_predicate_or_an_expression_changes_the_catalogue_and_keeps_names() {
    let e = engine();
    for sql in [
        "CREATE INDEX i ON t (x) WHERE x > cut()",
        "CREATE UNIQUE INDEX IF NOT EXISTS i ON ONLY t USING btree (a) INCLUDE (b) WHERE a IS NOT NULL",
        "CREATE INDEX ON t (lower(a))",
        "create unique index concurrently i on t ((a + 1), b)",
        "CREATE INDEX i ON t USING gist (a gist_trgm_ops(siglen = 32))",
    ] {
        let fx = e.classifier().classify_in(b"app", sql).first().effects;
        assert!(fx.contains(Effects::CHANGES_CATALOG), "{sql}: {fx:?}");
        assert!(fx.contains(Effects::KEEPS_NAMES), "{sql}: {fx:?}");
    }
    for sql in [
        "CREATE INDEX i ON t (a)",
        "CREATE UNIQUE INDEX i ON t (a, b DESC NULLS LAST) WITH (fillfactor = 70)",
        "CREATE INDEX i ON t (a COLLATE \"C\" text_pattern_ops)",
    ] {
        let fx = e.classifier().classify_in(b"app", sql).first().effects;
        assert!(!fx.contains(Effects::CHANGES_CATALOG), "{sql}: {fx:?}");
    }
    // Other DDL moves names.
    let fx = e
        .classifier()
        .classify_in(b"app", "CREATE TABLE t2 (a int)")
        .first()
        .effects;
    assert!(!fx.contains(Effects::KEEPS_NAMES), "{fx:?}");
}

/// After a session's DDL the database's reads stay on the writer until the host reports its
/// function catalogue from a load that started after the DDL.
#[test]
fn s6_reads_after_ddl_wait_for_a_load_that_started_after_it() {
    let e = engine();
    let cats = e.classifier().catalogs().clone();
    let plain = "SELECT a FROM t";
    // A database with no report: nothing to make stale.
    cats.mark_changed(b"app");
    assert!(!e.catalog_changed(b"app"));
    e.set_function_catalog(b"app", []).unwrap();
    cats.mark_changed(b"app");
    assert!(e.catalog_changed(b"app"));
    assert!(!e.catalog_changed(b"other"));
    assert_eq!(first(&e, b"app", plain).0, NotSafe::CatalogChanged);
    assert_eq!(first(&e, b"other", plain).0, NotSafe::None);
    // A load that started before more DDL does not end it.
    e.catalog_load_started(b"app");
    cats.mark_changed(b"app");
    e.set_object_catalog(b"app", []).unwrap();
    e.set_function_catalog(b"app", []).unwrap();
    assert_eq!(first(&e, b"app", plain).0, NotSafe::CatalogChanged);
    // One that started after it does; objects alone do not (functions end a load).
    e.catalog_load_started(b"app");
    e.set_object_catalog(b"app", []).unwrap();
    assert!(e.catalog_changed(b"app"));
    e.set_function_catalog(b"app", []).unwrap();
    assert!(!e.catalog_changed(b"app"));
    assert_eq!(first(&e, b"app", plain).0, NotSafe::None);
    // A host that never says when loads start: each function report covers what was seen.
    cats.mark_changed(b"app");
    e.set_function_catalog(b"app", []).unwrap();
    assert_eq!(first(&e, b"app", plain).0, NotSafe::None);
}

/// After `schema.` any keyword names an object (`public.order`, `public.left`), and a
/// type/function-name keyword names a function unqualified (`verbose()`): each is looked up like
/// any other name (an examiner's finding of 2026-12-07, `tests/e2e/test_red6_reads.py`: such a
/// view, sequence or function was never judged, and its code ran on the standby).
#[test]
fn s6_objects_named_by_keywords_are_judged() {
    let e = engine();
    // `verbose` a STABLE user function: only its definition (reported as an object, as the
    // example proxy reports function bodies) says it is server-dependent.
    e.set_function_catalog(b"app", [func("verbose", Volatility::Stable)])
        .unwrap();
    e.set_object_catalog(
        b"app",
        [
            obj(
                "left",
                " SELECT set_config('app.x'::text, 'leaked'::text, false) AS r;",
            ),
            obj("order", " SELECT pg_is_in_recovery() AS r;"),
            obj("verbose", " SELECT pg_is_in_recovery();"),
        ],
    )
    .unwrap();
    for sql in [
        "SELECT r FROM public.left",
        "SELECT * FROM public . \"order\"",
        "SELECT r FROM public.order",
        "SELECT verbose()",
        "SELECT public.verbose()",
    ] {
        assert_ne!(first(&e, b"app", sql).0, NotSafe::None, "{sql}");
    }
    // A keyword where it is one names nothing: plain reads stay plain.
    for sql in [
        "SELECT a FROM t ORDER BY a",
        "SELECT a FROM t LEFT JOIN u USING (a)",
    ] {
        assert_eq!(first(&e, b"app", sql).0, NotSafe::None, "{sql}");
    }
}

/// A Parse whose parameter types name a user type runs that type's code as the server reads
/// the parameters (a domain's CHECK): no read of it is replica-safe, and it is code the engine
/// cannot see into (S-6, §7).
#[test]
fn s6_a_parse_with_user_typed_parameters_is_no_replica_read() {
    let e = engine();
    let c = e.classifier().classify_in(b"app", "SELECT $1::text");
    assert!(c.is_replica_safe());
    let c = c.with_user_typed_parameters();
    assert!(!c.is_replica_safe());
    assert_eq!(c.first().not_safe, NotSafe::UserFunction);
    assert!(c
        .first()
        .effects
        .contains(Effects::RUNS_CODE | Effects::UNSEEN_CODE));
    // A write stays a write, with the same mark.
    let w = e
        .classifier()
        .classify_in(b"app", "INSERT INTO t VALUES ($1)")
        .with_user_typed_parameters();
    assert_eq!(w.first().kind, Kind::Write);
    assert!(w.first().effects.contains(Effects::UNSEEN_CODE));
}

/// `LOAD` loads a library into the writer's backend for good (S-4): the session's reads stay
/// on the writer.
#[test]
fn s4_load_is_a_write_that_loads_a_library() {
    let e = engine();
    let (why, fx) = first(&e, b"app", "LOAD 'auto_explain'");
    assert_eq!(why, NotSafe::NotARead);
    assert!(fx.contains(Effects::LOADS_LIBRARY));
}

/// A prepared statement holds what its parse read: a literal the server reads as the clock at
/// parse time (`'now'::timestamptz`) is the time of the client's own Parse, which only the
/// writer's statement has — a reader's kept statement of the same text is another client's
/// parse (an examiner's finding, 2026-12-07). A simple Query parses afresh where it runs and
/// keeps its reads; words inside a run of letters (`'unknown'`) are no date/time input.
#[test]
fn e2_a_prepared_statement_with_a_clock_literal_is_no_replica_read() {
    let e = engine();
    for sql in [
        "SELECT 'now'::timestamptz",
        "SELECT * FROM t WHERE ts > 'today'",
        "SELECT timestamptz 'tomorrow', $1::int",
        "SELECT E'n\\x6fw'::timestamptz",
    ] {
        let c = e.classifier().classify_in(b"app", sql);
        assert!(c.is_replica_safe(), "{sql}: as a simple Query");
        assert!(c.effects().contains(Effects::CLOCK_LITERAL), "{sql}");
        let c = c.as_prepared();
        assert!(!c.is_replica_safe(), "{sql}: prepared");
        assert_eq!(c.first().not_safe, NotSafe::ClockLiteral, "{sql}");
    }
    for sql in [
        "SELECT * FROM t WHERE status = 'unknown'",
        "SELECT 'nowhere', 'a\\_b'",
        "SELECT now(), $1::timestamptz",
    ] {
        let c = e.classifier().classify_in(b"app", sql).as_prepared();
        assert!(c.is_replica_safe(), "{sql}");
        assert!(!c.effects().contains(Effects::CLOCK_LITERAL), "{sql}");
    }
}
