//! The catalogue rows PostgreSQL 15 returns for the examiner's red7 objects
//! (`tests/e2e/test_red7_reads.py`, `test_red7_review.py`), as `CATALOG_QUERY` reports them, judged
//! through the public API (SPEC S-5, S-6, S-7, P-1, §7 F-policy): code the server runs for a
//! call that the statement's text does not show — a user cast into a function's parameter or
//! result type, a user implicit cast between two built-in types behind a built-in's result, a
//! cursor a function opens, a SQL-standard body, attribute notation and user operators in a
//! volatile body, a SET clause, a call of a non-ASCII name — is never judged a plain read.

use polarsplit::internals::classify::{Effects, Kind, NotSafe};
use polarsplit::{ConfigBuilder, Engine, UserFunction, UserObject, Volatility};

fn engine() -> std::sync::Arc<Engine> {
    let e = Engine::new(ConfigBuilder::new().build().unwrap());
    let funcs = [
        ("red7_plain", Volatility::Stable),
        ("red7_i2e", Volatility::Immutable),
        ("red7_takes", Volatility::Stable),
        ("red7_mk", Volatility::Stable),
        ("red7_p2i", Volatility::Immutable),
        ("red7_i2e2", Volatility::Immutable),
        ("red7_takes2", Volatility::Stable),
        ("red7_open", Volatility::Stable),
        ("red7_inner", Volatility::Volatile),
        ("red7_outer_v", Volatility::Volatile),
        ("red7_outer_s", Volatility::Stable),
        ("red7_proc_atomic", Volatility::Volatile),
        ("red7_ddl_attr", Volatility::Volatile),
        ("red7_ddl_op", Volatility::Volatile),
        ("red7_outer_attr", Volatility::Volatile),
        ("red7_outer_op", Volatility::Volatile),
        ("red7_rw", Volatility::Stable),
        ("red7_ph", Volatility::Stable),
        ("red7_atomic", Volatility::Stable),
        ("red7_ret", Volatility::Stable),
        ("red7_recovery_ñ", Volatility::Stable),
        ("red7_leak_ñ", Volatility::Volatile),
        ("red7_uni_recovery", Volatility::Stable),
        ("red7_uni_leak", Volatility::Stable),
    ];
    // The fourth result's rows for them (PostgreSQL 15.20, a C-locale UTF8 database).
    let objects = [
        ("int4", "SELECT public.red7_i2e(NULL)"),
        ("point", "SELECT public.red7_p2i(NULL)"),
        ("int4", "SELECT public.red7_p2i(NULL)"),
        ("int4", "SELECT public.red7_i2e2(NULL)"),
        ("red7_e", "SELECT public.red7_i2e(NULL)"),
        ("red7_e2", "SELECT public.red7_i2e2(NULL)"),
        ("%%%", "SELECT public.red7_ddl_op(NULL, NULL)"),
        ("red7_plain", "SELECT 1"),
        (
            "red7_proc_atomic",
            r#"SELECT NULL, red7_inner() FROM "as", "end", "select", atomic, begin, red7_inner"#,
        ),
        (
            "red7_i2e",
            r#"SELECT NULL, pg_is_in_recovery() FROM "case", "else", "end", "primary", "then", "when", begin, pg_is_in_recovery, return, standby"#,
        ),
        ("red7_takes", "SELECT v::text"),
        ("red7_mk", "SELECT 1"),
        (
            "red7_p2i",
            "SELECT CASE WHEN pg_is_in_recovery() THEN -1 ELSE 1 END",
        ),
        (
            "red7_i2e2",
            r#"SELECT NULL, set_config() FROM "end", "false", a, app, begin, globex, perform, red7_tenant, return, set_config"#,
        ),
        ("red7_takes2", "SELECT v::text"),
        ("red7_open", "polarsplit: the function body may write"),
        ("red7_inner", "DO $polarsplit$ CREATE $polarsplit$"),
        (
            "red7_outer_v",
            r#"SELECT NULL, red7_inner() FROM "as", "end", "select", atomic, begin, red7_inner"#,
        ),
        (
            "red7_outer_s",
            r#"SELECT NULL, red7_inner() FROM "as", "end", "select", atomic, begin, red7_inner"#,
        ),
        (
            "red7_ddl_attr",
            r#"SELECT NULL, red7_inner() FROM "from", "select", red7_inner, x"#,
        ),
        (
            "red7_ddl_op",
            r#"SELECT NULL, red7_inner() FROM "from", "select", red7_inner, x"#,
        ),
        (
            "red7_outer_attr",
            r#"SELECT NULL FROM "from", "select", "where", a, accounts, id, red7_ddl_attr"#,
        ),
        (
            "red7_outer_op",
            r#"SELECT NULL, public.red7_ddl_op(NULL, NULL) FROM "end", begin, return"#,
        ),
        ("red7_rw", "SELECT 1"),
        ("red7_ph", "SELECT 1"),
        (
            "red7_atomic",
            r#"SELECT NULL, pg_is_in_recovery() FROM "end", "not", "select", atomic, begin, pg_is_in_recovery"#,
        ),
        (
            "red7_ret",
            r#"SELECT NULL, pg_is_in_recovery() FROM "not", pg_is_in_recovery, return"#,
        ),
        ("red7_recovery_ñ", "SELECT pg_is_in_recovery()"),
        (
            "red7_leak_ñ",
            r#"SELECT NULL FROM "false", "select", app, red7_uni, set_config, t"#,
        ),
        (
            "red7_uni_recovery",
            r#"SELECT NULL, "red7_recovery_ñ"() FROM "end", "red7_recovery_ñ", begin, return"#,
        ),
        (
            "red7_uni_leak",
            r#"SELECT NULL, "red7_leak_ñ"() FROM "end", "red7_leak_ñ", begin, leaked, return"#,
        ),
        ("red7_rw", "polarsplit: the function has a SET clause"),
        ("red7_ph", "SELECT pg_catalog.set_config(NULL, NULL, NULL)"),
        ("+", "SELECT NULL, public.red7_p2i(NULL)"),
        ("center", "SELECT NULL, public.red7_p2i(NULL)"),
        ("point", "SELECT NULL, public.red7_p2i(NULL)"),
        ("red7_i2e", "SELECT NULL, public.red7_i2e(NULL)"),
        ("red7_i2e2", "SELECT NULL, public.red7_i2e2(NULL)"),
        ("red7_mk", "SELECT NULL, public.red7_i2e(NULL)"),
        ("red7_p2i", "SELECT NULL, public.red7_p2i(NULL)"),
        ("red7_takes", "SELECT NULL, public.red7_i2e(NULL)"),
        ("red7_takes2", "SELECT NULL, public.red7_i2e2(NULL)"),
    ];
    e.set_function_catalog(
        b"app",
        funcs.iter().map(|&(name, volatility)| UserFunction {
            schema: "public".into(),
            name: name.into(),
            volatility,
        }),
    )
    .unwrap();
    e.set_object_catalog(
        b"app",
        objects.iter().map(|&(name, def)| UserObject {
            schema: "public".into(),
            name: name.into(),
            definition: def.into(),
        }),
    )
    .unwrap();
    e
}

fn first(e: &Engine, sql: &str) -> (Kind, NotSafe, Effects) {
    let c = e.classifier().classify_in(b"app", sql);
    let s = *c.first();
    (s.kind, s.not_safe, s.effects)
}

fn not_a_replica_read(e: &Engine, sql: &str) -> (NotSafe, Effects) {
    let (kind, why, fx) = first(e, sql);
    assert!(
        kind != Kind::Read,
        "{sql}: judged a plain read ({why:?}, {fx:?})"
    );
    (why, fx)
}

#[test]
fn s7_a_user_cast_a_functions_parameter_or_result_type_runs_keeps_the_call_off_readers() {
    let e = engine();
    for sql in [
        "SELECT red7_takes(1), inet_server_port()",
        "SELECT red7_mk()::text, inet_server_port()",
        "SELECT CASE center(circle '<(1,2),3>') + 1 WHEN 2 THEN 'primary' ELSE 'standby' END",
    ] {
        let (why, fx) = not_a_replica_read(&e, sql);
        assert_eq!(why, NotSafe::ServerDependent, "{sql}");
        assert!(fx.contains(Effects::RUNS_CODE), "{sql}: {fx:?}");
    }
    // Still offloaded: the same database's reads that reach no such code.
    for sql in [
        "SELECT red7_plain(), inet_server_port()",
        "SELECT a FROM t WHERE a > 1",
    ] {
        assert_eq!(first(&e, sql).1, NotSafe::None, "{sql}");
    }
}

#[test]
fn s5_a_user_cast_into_a_functions_parameter_type_that_calls_set_config_changes_state() {
    let e = engine();
    let (_, fx) = not_a_replica_read(&e, "SELECT red7_takes2(1), inet_server_port()");
    assert!(fx.contains(Effects::CALLS_SET_CONFIG), "{fx:?}");
}

#[test]
fn p1_a_function_that_opens_a_cursor_is_no_replica_read() {
    let e = engine();
    not_a_replica_read(&e, "SELECT red7_open('c'), inet_server_port()");
}

#[test]
fn s6_ddl_a_sql_standard_body_or_a_volatile_bodys_attribute_or_operator_reaches_marks_the_catalogue(
) {
    let e = engine();
    for sql in [
        "SELECT red7_outer_v()",
        "SELECT red7_outer_s()",
        "CALL red7_proc_atomic()",
        "SELECT red7_outer_attr()",
        "SELECT red7_outer_op()",
    ] {
        let (_, _, fx) = first(&e, sql);
        assert!(fx.contains(Effects::CHANGES_CATALOG), "{sql}: {fx:?}");
    }
    for sql in [
        "SELECT red7_atomic(), inet_server_port()",
        "SELECT red7_ret()",
    ] {
        assert_eq!(
            not_a_replica_read(&e, sql).0,
            NotSafe::ServerDependent,
            "{sql}"
        );
    }
}

#[test]
fn p1_s5_a_functions_set_clause_is_no_replica_read_and_a_placeholders_changes_state() {
    let e = engine();
    let (_, fx) = not_a_replica_read(
        &e,
        "SELECT g, CASE WHEN g > 19000 THEN red7_rw() END FROM generate_series(1, 20000) g",
    );
    assert!(!fx.contains(Effects::CALLS_SET_CONFIG), "{fx:?}");
    let (_, fx) = not_a_replica_read(&e, "SELECT red7_ph(), inet_server_port()");
    assert!(fx.contains(Effects::CALLS_SET_CONFIG), "{fx:?}");
}

#[test]
fn s7_s6_a_call_of_a_non_ascii_name_in_a_body_is_judged() {
    let e = engine();
    assert_eq!(
        not_a_replica_read(&e, "SELECT red7_uni_recovery(), inet_server_port()").0,
        NotSafe::ServerDependent
    );
    let (_, fx) = not_a_replica_read(&e, "SELECT red7_uni_leak(), inet_server_port()");
    assert!(fx.contains(Effects::UNSEEN_CODE), "{fx:?}");
}

/// A user implicit cast from a type whose values need no name (`1 + '2'`, `CURRENT_DATE`):
/// the catalogue reports it under a name no statement spells, and every statement of the
/// database takes its verdict — a statement that calls and names nothing too.
#[test]
fn s7_a_user_cast_from_a_literals_type_is_judged_for_every_statement() {
    let e = Engine::new(ConfigBuilder::new().build().unwrap());
    let report = |def: &str| {
        e.set_object_catalog(
            b"app",
            [UserObject {
                schema: "pg_catalog".into(),
                name: "polarsplit: every statement".into(),
                definition: def.into(),
            }],
        )
        .unwrap();
    };
    report("SELECT NULL, pg_is_in_recovery()");
    for sql in [
        "SELECT 1",
        "SELECT CASE WHEN true THEN 'a' END + 1",
        "SELECT 1; SELECT 2",
    ] {
        let c = e.classifier().classify_in(b"app", sql);
        assert!(
            c.statements()
                .iter()
                .all(|s| s.kind == Kind::ReadNotSafe && s.not_safe == NotSafe::ServerDependent),
            "{sql}: {c:?}"
        );
        // Another database is not touched.
        let other = e.classifier().classify_in(b"other", sql);
        assert!(
            other.statements().iter().all(|s| s.kind == Kind::Read),
            "{sql}: {other:?}"
        );
    }
    // A read-safe cast function: still a read, which runs user code.
    report("SELECT NULL");
    let c = e.classifier().classify_in(b"app", "SELECT 1");
    assert!(c.is_replica_safe(), "{c:?}");
    e.set_object_catalog(b"app", []).unwrap();
    let c = e.classifier().classify_in(b"app", "SELECT 1");
    assert!(
        c.is_replica_safe() && c.first().effects == Effects::NONE,
        "{c:?}"
    );
}
