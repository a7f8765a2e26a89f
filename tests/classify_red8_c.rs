//! SPEC §7 F-policy, S-6, S-7: a call written as an XMLTABLE column's PATH expression
//! (`COLUMNS x text PATH f(…)`, a `b_expr` PostgreSQL evaluates when the statement runs) is a call
//! like any other: a statement calling a write/session-state/server-dependent function there is
//! never a replica-safe read (an examiner's finding, red8 area c; the e2e proof is
//! `tests/e2e/test_red8_c.py`).

use polarsplit::internals::classify::{classify, WriteFunctions};

const XT: &str = "SELECT * FROM XMLTABLE('/a' PASSING xml '<a>v</a>' COLUMNS ";

#[test]
fn f_policy_a_call_as_an_xmltable_column_path_is_judged() {
    let mut wrong = Vec::new();
    for path in [
        "x text PATH set_config('app.x', '.', false))",
        "x text PATH pg_try_advisory_lock(1)::text)",
        "x text PATH pg_advisory_lock(1)::text)",
        "x text PATH nextval('seq')::text)",
        "x text PATH current_setting('transaction_read_only'))",
        "x text PATH pg_is_in_recovery()::text)",
        "x text NOT NULL PATH set_config('app.x', '.', false))",
        "x text PATH set_config('app.x', '.', false) NOT NULL)",
        "x int PATH set_config('app.x', '.', false))",
        "x text PATH '.', y text PATH set_config('app.x', '.', false))",
        "x text path set_config('app.x', '.', false))",
        "x text \"path\" set_config('app.x', '.', false))",
    ] {
        let sql = format!("{XT}{path}");
        if classify(&sql, &WriteFunctions::defaults()).is_replica_safe() {
            wrong.push(sql);
        }
    }
    assert!(wrong.is_empty(), "judged replica-safe reads: {wrong:#?}");
}

#[test]
fn f_policy_the_forms_that_held_still_hold() {
    for path in [
        "x text PATH '.' || set_config('app.x', '.', false))",
        "x text PATH (SELECT set_config('app.x', '.', false)))",
        "x text PATH '.' DEFAULT set_config('app.x', '.', false))",
        "x text PATH pg_catalog.set_config('app.x', '.', false))",
    ] {
        let sql = format!("{XT}{path}");
        assert!(
            !classify(&sql, &WriteFunctions::defaults()).is_replica_safe(),
            "{sql:?}"
        );
    }
    // A plain XMLTABLE read stays a read.
    let sql = format!("{XT}x text PATH '.')");
    assert!(
        classify(&sql, &WriteFunctions::defaults()).is_replica_safe(),
        "{sql:?}"
    );
}

/// The fix does not cost the offload of an alias with a column list: only a table reference
/// takes one, and these stay replica-safe reads.
#[test]
fn f_policy_alias_column_lists_stay_reads() {
    for sql in [
        "SELECT * FROM t a(x, y)",
        "SELECT * FROM t AS a(x)",
        "SELECT * FROM s.t a(x)",
        "SELECT * FROM \"T\" a(x)",
        "SELECT * FROM ONLY t a(x)",
        "SELECT * FROM t /* c */ a(x)",
        "SELECT * FROM a, t b(x)",
        "SELECT * FROM a JOIN t b(x) ON true",
        "SELECT * FROM (t a(x) JOIN u ON true)",
        "SELECT * FROM (a JOIN b ON true) j(x)",
        "SELECT * FROM generate_series(1, 3) g(i)",
        "SELECT * FROM (SELECT 1) s(a)",
        "SELECT * FROM unnest(ARRAY[1]) WITH ORDINALITY o(v, n)",
        "SELECT * FROM ROWS FROM (generate_series(1, 2)) WITH ORDINALITY r(a, n)",
        "SELECT * FROM json_to_record('{}') AS t(a int, b mytype(3))",
        "SELECT * FROM XMLTABLE('/a' PASSING xml '<a>v</a>' COLUMNS x text PATH '.') t(y)",
        "SELECT interval '1' second(3)",
    ] {
        assert!(
            classify(sql, &WriteFunctions::defaults()).is_replica_safe(),
            "{sql:?}"
        );
    }
}
