//! SPEC §7 F-policy, S-6, S-7: a call written as the right operand of an `OPERATOR(schema.op)`
//! clause (`'x' OPERATOR(pg_catalog.||) f(…)`, `OPERATOR(pg_catalog.-) f(…)`) is a call like any
//! other. `Scan::is_alias_column_list` takes every `name (` after a `)` for an alias's column list
//! (`FROM f(1) g(i)`), but `OPERATOR(…)`'s `)` ends an operator, not a table reference (an
//! examiner's finding, red9 area b; the e2e proof is `tests/e2e/test_red9_b.py`).
//!
//! §7 (offload): the red8-c fix takes `a (` for an alias's column list only when the relation's
//! name before `a` is a non-keyword identifier; a relation named by an unreserved keyword
//! (`data`, `version`, `options`, `comments`, …: valid unquoted table names), or the legacy
//! `t*`, now makes `FROM data d(x)` a call of an unknown function `d` — a plain read sent to the
//! primary (a replica-safe read before the fix; `FROM data AS d(x)` and `FROM "data" d(x)` still are).

use polarsplit::internals::classify::{classify, WriteFunctions};

#[test]
fn f_policy_a_call_after_an_operator_clause_is_judged() {
    let mut wrong = Vec::new();
    for sql in [
        "SELECT 1 OPERATOR(pg_catalog.+) nextval('s')",
        "SELECT OPERATOR(pg_catalog.-) nextval('s')",
        "SELECT 1 OPERATOR(+) pg_advisory_lock(1)::text::int",
        "SELECT 1 OPERATOR(pg_catalog.+) /* c */ nextval('s')",
        "SELECT 'a' OPERATOR(pg_catalog.||) set_config('a.b', '1', false)",
        "SELECT 'a' OPERATOR(pg_catalog.||) \"set_config\"('a.b', '1', false)",
        "SELECT 'x' OPERATOR(pg_catalog.||) current_setting('transaction_read_only')",
        "SELECT 'x' OPERATOR(pg_catalog.||) pg_is_in_recovery()",
        "SELECT 'x' OPERATOR(pg_catalog.||) txid_current()",
        "SELECT 1 WHERE true OPERATOR(pg_catalog.=) pg_try_advisory_lock(1)",
        "SELECT * FROM t WHERE a = 1 OPERATOR(pg_catalog.+) currval('s')",
        "SELECT 1 OPERATOR(pg_catalog.+) myfunc(1)",
        "SELECT 1 OPERATOR(pg_catalog.+) public.myfunc(1)",
    ] {
        if classify(sql, &WriteFunctions::defaults()).is_replica_safe() {
            wrong.push(sql);
        }
    }
    assert!(wrong.is_empty(), "judged replica-safe reads: {wrong:#?}");
}

/// What held: type modifiers, TABLESAMPLE, alias and CTE column lists stay reads.
#[test]
fn f_policy_reads_with_type_modifiers_and_column_lists_stay_reads() {
    for sql in [
        "SELECT CAST(x AS varchar(20)) FROM t",
        "SELECT CAST(x AS timestamp(3)) FROM t",
        "SELECT x::interval(6) FROM t",
        "SELECT CAST(x AS numeric(10,2)) FROM t",
        "SELECT CAST(x AS time(3) with time zone) FROM t",
        "SELECT x::bit varying(3) FROM t",
        "SELECT x::varchar(3)[] FROM t",
        "SELECT CAST(x AS pg_catalog.varchar(20)) FROM t",
        "SELECT x::\"varchar\"(20) FROM t",
        "SELECT interval(3) '1 s'",
        "SELECT * FROM t TABLESAMPLE SYSTEM(10)",
        "SELECT * FROM t TABLESAMPLE BERNOULLI(10) REPEATABLE(1)",
        "SELECT * FROM json_to_recordset('[]') AS t(a varchar(20), b numeric(10,2))",
        "WITH x(a,b) AS (SELECT 1,2), y(c) AS (SELECT 3) SELECT * FROM x, y",
        "SELECT * FROM (VALUES (1,2)) v(a,b)",
        "SELECT * FROM t1 NATURAL JOIN t2 b(x)",
        "SELECT * FROM ROWS FROM (generate_series(1,2), generate_series(1,3)) r(a,b)",
        "SELECT 1 OPERATOR(pg_catalog.+) 2",
    ] {
        assert!(
            classify(sql, &WriteFunctions::defaults()).is_replica_safe(),
            "{sql:?}"
        );
    }
}

/// A relation whose name is an unreserved keyword takes an alias with a column list like any
/// other: these are plain reads (they were before the red8-c fix).
#[test]
fn section7_a_keyword_named_relation_with_an_alias_column_list_stays_a_read() {
    let mut wrong = Vec::new();
    for sql in [
        "SELECT * FROM data d(x)",
        "SELECT * FROM public.data d(x)",
        "SELECT * FROM t1 JOIN data d(x) ON true",
        "SELECT * FROM version v(x)",
        "SELECT * FROM comments c(id) WHERE c.id = 1",
        "SELECT * FROM options o(x)",
        "SELECT * FROM t* a(x)",
    ] {
        if !classify(sql, &WriteFunctions::defaults()).is_replica_safe() {
            wrong.push(sql);
        }
    }
    assert!(
        wrong.is_empty(),
        "plain reads judged not replica-safe: {wrong:#?}"
    );
}
