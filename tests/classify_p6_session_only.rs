//! SPEC P-6 through the public API: a statement "may have written" unless it is proven not to.
//! A SELECT of nothing but calls of the session-only built-ins (`builtins::SESSION_ONLY`:
//! `set_config`, `setseed`, the advisory-lock releases) with constant arguments is proven: the
//! writer's, for a reason reported as WRITE_FUNCTION, but no write (`NotSafe::SessionFunction`).
//! Anything more — a FROM, a clause, a cast, a nested call, an operator, another schema's
//! function, a lock's acquire — may write again, and so does the proven form once the database's
//! catalogue, a second lexing or a Parse's parameter types say something of it.

use polarsplit::internals::classify::{
    builtins, classify, Classification, NotSafe, WriteFunctions,
};
use polarsplit::{ConfigBuilder, Engine, Reason, UserFunction, UserObject, Volatility};
use proptest::prelude::*;

fn c(sql: &str) -> Classification {
    classify(sql, &WriteFunctions::defaults())
}

fn assert_session_only(sql: &str, c: &Classification) {
    assert_eq!(c.first().not_safe, NotSafe::SessionFunction, "{sql}");
    assert!(!c.is_replica_safe(), "{sql}");
    assert!(!c.may_write(), "{sql}");
    assert_eq!(
        Reason::from_not_safe(c.first().not_safe),
        Reason::WriteFunction,
        "{sql}"
    );
}

fn assert_may_write(sql: &str, c: &Classification) {
    assert!(!c.is_replica_safe(), "{sql}");
    assert!(c.may_write(), "{sql}: {:?}", c.first());
    assert_ne!(c.first().not_safe, NotSafe::SessionFunction, "{sql}");
}

#[test]
fn p6_session_only_calls_with_constants_write_nothing() {
    for sql in [
        "SELECT pg_advisory_unlock_all()",
        "select PG_ADVISORY_UNLOCK_ALL ( )",
        "SELECT pg_catalog.pg_advisory_unlock_all()",
        "SELECT \"pg_catalog\" . \"pg_advisory_unlock_all\"()",
        "SELECT pg_advisory_unlock(1), pg_advisory_unlock_shared(2, -3)",
        "SELECT pg_advisory_unlock($1)",
        "SELECT set_config('app.tenant', 't1', false)",
        "SELECT set_config('app.tenant', $1, true), set_config($2, $3, TRUE)",
        "SELECT set_config('search_path', E'a,\\'b\\'', false)",
        "SELECT set_config('app.x', $$v$$, false)",
        "SELECT set_config('app.x', NULL, false)",
        "/* pool reset */ SELECT setseed(0.5) -- seeded",
        "SELECT setseed(-0.5)",
    ] {
        assert_session_only(sql, &c(sql));
    }
    // asyncpg's Pool reset: no statement of it may write.
    let reset = c("SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;");
    assert_eq!(reset.count(), 4);
    assert!(!reset.may_write());
    assert_eq!(reset.first().not_safe, NotSafe::SessionFunction);
}

#[test]
fn p6_anything_more_than_session_only_calls_may_write() {
    for sql in [
        // Acquires order the session after the lock's last holder: probed as writes.
        "SELECT pg_advisory_lock(1)",
        "SELECT pg_try_advisory_lock(1)",
        "SELECT pg_advisory_xact_lock(1)",
        "SELECT pg_advisory_unlock_all(), pg_advisory_lock(1)",
        // Other never-safe built-ins.
        "SELECT pg_advisory_unlock_all(), nextval('s')",
        "SELECT currval('s')",
        "SELECT pg_notify('c', 'x')",
        // Data, clauses, nesting, operators, casts, aliases.
        "SELECT set_config('app.t', v, false) FROM t",
        "SELECT set_config('app.t', 'x', false) WHERE true",
        "SELECT set_config('app.t', (SELECT v FROM t), false)",
        "SELECT set_config('app.t', lower('X'), false)",
        "SELECT set_config('app.t', 'a' || 'b', false)",
        "SELECT set_config('app.t', 'x'::text, false)",
        "SELECT set_config('app.t', $1::my_domain, false)",
        "SELECT set_config('app.t', 'x', false) AS s",
        "SELECT set_config('app.t', 'x', false) t",
        "SELECT DISTINCT set_config('app.t', 'x', false)",
        "SELECT setseed(- -1)",
        "SELECT setseed(+1)",
        "SELECT set_config('app.t' 'x', false)",
        "SELECT set_config('app.t', 'x', false),",
        "SELECT set_config('app.t', 'x', false) FOR UPDATE",
        "SELECT set_config('app.t', 'x', false) INTO t2",
        "SELECT (pg_advisory_unlock_all())",
        "SELECT (1).pg_advisory_unlock",
        // Not the built-in: another schema's, or another name once quoted.
        "SELECT myschema.pg_advisory_unlock_all()",
        "SELECT pg_catalog.x.pg_advisory_unlock_all()",
        "SELECT \"PG_ADVISORY_UNLOCK_ALL\"()",
        "SELECT \"Set_Config\"('a', 'b', false)",
        // Not a SELECT of its own.
        "EXPLAIN ANALYZE SELECT pg_advisory_unlock_all()",
        "WITH w AS (SELECT 1) SELECT pg_advisory_unlock_all()",
        "VALUES (pg_advisory_unlock_all())",
        "CALL pg_advisory_unlock_all()",
        "DECLARE c CURSOR FOR SELECT pg_advisory_unlock_all()",
    ] {
        assert_may_write(sql, &c(sql));
    }
}

/// Whatever is found after the text was scanned takes the proof back.
#[test]
fn p6_what_the_catalogue_a_second_lexing_or_parameter_types_say_takes_the_proof_back() {
    let e = Engine::new(ConfigBuilder::new().build().unwrap());
    let sql = "SELECT set_config('app.t', 'x', false)";
    assert_session_only(sql, &e.classifier().classify_in(b"app", sql));
    // A user function sharing the name (another schema's, ahead on a search_path): it may be
    // the one called, and it may write — whatever volatility the catalogue reports.
    for v in [Volatility::Volatile, Volatility::Stable] {
        e.set_function_catalog(
            b"app",
            [UserFunction {
                schema: "public".into(),
                name: "pg_advisory_unlock_all".into(),
                volatility: v,
            }],
        )
        .unwrap();
        let got = e
            .classifier()
            .classify_in(b"app", "SELECT pg_advisory_unlock_all()");
        assert_may_write("pg_advisory_unlock_all shadowed", &got);
        // Its neighbour is still only the built-in.
        assert_session_only(sql, &e.classifier().classify_in(b"app", sql));
    }
    // A view whose body is only session-only calls: the statement reading it runs that code
    // hidden — a write function, not a proof.
    e.set_object_catalog(
        b"app",
        [UserObject {
            schema: "public".into(),
            name: "v_tenant".into(),
            definition: "SELECT set_config('app.t', 'x', false)".into(),
        }],
    )
    .unwrap();
    let got = e.classifier().classify_in(b"app", "SELECT * FROM v_tenant");
    assert_eq!(got.first().not_safe, NotSafe::WriteFunction);
    assert!(got.may_write());
    // A Parse whose parameter types name a user type: its input code runs.
    let got = e
        .classifier()
        .classify_in(b"app", "SELECT set_config('app.t', $1, false)")
        .with_user_typed_parameters();
    assert_eq!(got.first().not_safe, NotSafe::UserFunction);
    assert!(got.may_write());
    // Two lexings that differ (a backslash in a plain string): neither need be the server's.
    let sql = "SELECT set_config('app.t', 'x\\', '1')";
    assert_may_write(sql, &c(sql));
}

#[test]
fn p6_every_session_only_name_is_a_never_safe_built_in() {
    let t = builtins::default_table();
    for name in builtins::SESSION_ONLY {
        assert_eq!(t.verdict_name(name), Some("WRITE_FUNCTION"), "{name}");
    }
}

// ---- the property: session-only calls with constants, however spelt, write nothing; one
// ---- ingredient more, wherever it goes, may write

fn spelt(name: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(name.to_string()),
        Just(name.to_uppercase()),
        Just(format!("pg_catalog.{name}")),
        Just(format!("\"pg_catalog\".\"{name}\"")),
        Just(format!("PG_CATALOG /* c */ . {name}")),
        Just(format!("\"{name}\"")),
    ]
}

fn constant() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("'x'".to_string()),
        Just("E'a\\'b'".to_string()),
        Just("$$v$$".to_string()),
        Just("$t$v$t$".to_string()),
        Just("NULL".to_string()),
        Just("true".to_string()),
        Just("FALSE".to_string()),
        Just("$1".to_string()),
        Just("$12".to_string()),
        Just("42".to_string()),
        Just("-0.5".to_string()),
        Just("1e3".to_string()),
    ]
}

fn session_call() -> impl Strategy<Value = String> {
    (
        prop::sample::select(builtins::SESSION_ONLY),
        prop::collection::vec(constant(), 0..4),
    )
        .prop_flat_map(|(name, args)| {
            spelt(name).prop_map(move |n| format!("{n}({})", args.join(", ")))
        })
}

fn session_statement() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(session_call(), 1..4),
        prop::sample::select(&["", " ", "\n", " /* x */ ", " -- y\n"][..]),
    )
        .prop_map(|(calls, gap)| format!("SELECT{gap} {}{gap}", calls.join(&format!(",{gap}"))))
}

/// What makes the statement more than session-only calls with constants.
const MORE: &[&str] = &[
    " FROM t",
    " WHERE true",
    " AS a",
    "::text",
    " || 'x'",
    ", nextval('s')",
    ", pg_advisory_lock(1)",
    ", v",
    ", (SELECT 1)",
    ", lower('x')",
    " LIMIT 1",
    " FOR UPDATE",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn p6_session_only_statements_write_nothing(sql in session_statement()) {
        let c = c(&sql);
        prop_assert_eq!(c.first().not_safe, NotSafe::SessionFunction, "{}", &sql);
        prop_assert!(!c.may_write(), "{}", &sql);
        prop_assert!(!c.is_replica_safe(), "{}", &sql);
    }

    #[test]
    fn p6_one_ingredient_more_may_write(
        sql in session_statement(),
        more in prop::sample::select(MORE),
        at in any::<prop::sample::Index>(),
    ) {
        // After a call's `)` (or the end): every such place is where an ingredient may stand.
        let ends: Vec<usize> = sql.match_indices(')').map(|(i, _)| i + 1).collect();
        let i = ends[at.index(ends.len())];
        let poisoned = format!("{}{more}{}", &sql[..i], &sql[i..]);
        let c = c(&poisoned);
        prop_assert!(c.may_write(), "{}: {:?}", &poisoned, c.first());
    }
}
