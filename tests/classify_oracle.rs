//! SPEC §7 checked against an independent parser (issue 15): whenever the classifier calls a
//! statement replica-safe and `sqlparser` (PostgreSQL dialect) parses it, the AST holds one
//! query and no locking clause, no `SELECT INTO`, no data-modifying CTE, no call of a write-list
//! (configured or never-safe) or server-dependent function and no server-dependent relation.
//! `sqlparser` rejects some valid PostgreSQL (NOTES.md); those cases are skipped, and the test
//! asserts that enough cases were really checked, so it cannot pass vacuously.

use std::ops::ControlFlow;

use polarsplit::internals::classify::{builtins, classify, WriteFunctions};
use proptest::prelude::*;
use sqlparser::ast::{
    Expr, ObjectName, ObjectNamePart, Query, SetExpr, Statement, TableFactor, Visit, Visitor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// The write list the classifier uses by default, plus the reviewed never-safe built-ins and
/// S-7's server-dependent functions: none may be called by a replica-safe statement.
fn forbidden_function(name: &str) -> bool {
    let wf = WriteFunctions::defaults();
    let listed = |list: &[&str]| {
        list.iter().any(|e| match e.strip_suffix('*') {
            Some(p) => name.starts_with(p),
            None => *e == name,
        })
    };
    wf.contains(name) || listed(builtins::NEVER_SAFE) || listed(builtins::SERVER_DEPENDENT)
}

fn forbidden_relation(name: &str) -> bool {
    builtins::SERVER_DEPENDENT_RELATIONS
        .iter()
        .any(|e| match e.strip_suffix('*') {
            Some(p) => name.starts_with(p),
            None => *e == name,
        })
}

/// The name PostgreSQL looks up: unquoted folds to lower case.
fn last_name(n: &ObjectName) -> String {
    match n.0.last() {
        Some(ObjectNamePart::Identifier(i)) if i.quote_style.is_some() => i.value.clone(),
        Some(ObjectNamePart::Identifier(i)) => i.value.to_ascii_lowercase(),
        _ => String::new(),
    }
}

struct Oracle {
    problems: Vec<String>,
}

impl Visitor for Oracle {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if !q.locks.is_empty() {
            self.problems.push("locking clause".into());
        }
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                if matches!(
                    *cte.query.body,
                    SetExpr::Insert(_)
                        | SetExpr::Update(_)
                        | SetExpr::Delete(_)
                        | SetExpr::Merge(_)
                ) {
                    self.problems.push("data-modifying CTE".into());
                }
            }
        }
        if let SetExpr::Select(s) = &*q.body {
            if s.into.is_some() {
                self.problems.push("SELECT INTO".into());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if let Expr::Function(f) = e {
            let name = last_name(&f.name);
            if forbidden_function(&name) {
                self.problems.push(format!("calls {name}"));
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
        let name = match t {
            TableFactor::Table { name, .. } | TableFactor::Function { name, .. } => last_name(name),
            _ => return ControlFlow::Continue(()),
        };
        if forbidden_function(&name) {
            self.problems.push(format!("table function {name}"));
        }
        if forbidden_relation(&name) {
            self.problems.push(format!("relation {name}"));
        }
        ControlFlow::Continue(())
    }
}

/// What the oracle finds wrong in a statement judged replica-safe (`None`: sqlparser could not
/// parse it, nothing checked).
fn oracle(sql: &str) -> Option<Vec<String>> {
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
    let mut o = Oracle {
        problems: Vec::new(),
    };
    if stmts.len() != 1 {
        o.problems.push(format!("{} statements", stmts.len()));
    }
    for s in &stmts {
        if !matches!(s, Statement::Query(_)) {
            o.problems.push("not a query".into());
        }
        let _ = s.visit(&mut o);
    }
    Some(o.problems)
}

// ---- a generator of PostgreSQL reads with hazards in real and decoy positions ----

const SAFE_CALLS: &[&str] = &[
    "lower(a)",
    "upper('x')",
    "coalesce(a, 1)",
    "length(b)",
    "abs(-1)",
    "now()",
    "random()",
    "count(*)",
    "max(a)",
    "pg_catalog.lower(b)",
    "inet_server_port()",
    "current_setting('work_mem')",
];

/// Calls that must keep a statement off readers, in several spellings.
const HAZARD_CALLS: &[&str] = &[
    "nextval('s')",
    "pg_catalog.nextval('s')",
    "\"nextval\"('s')",
    "setval('s', 1)",
    "set_config('a.b', 'c', false)",
    "PG_CATALOG.SET_CONFIG('a.b', 'c', true)",
    "pg_advisory_lock(1)",
    "pg_try_advisory_xact_lock(1, 2)",
    "txid_current()",
    "pg_notify('c', 'x')",
    "lo_import('/etc/passwd')",
    "pg_terminate_backend(1)",
    "pg_stat_reset()",
    "brin_summarize_new_values('i')",
    "pg_is_in_recovery()",
    "pg_backend_pid()",
    "pg_current_wal_lsn()",
    "pg_last_wal_replay_lsn()",
    "U&\"\\0073etval\"('s', 1)",
];

/// Texts that look dangerous but are not (strings, comments, quoted column names).
const DECOYS: &[&str] = &[
    "'for update'",
    "'nextval(1)'",
    "\"insert\"",
    "$$ DELETE FROM t $$",
    "'select into x'",
    "a /* FOR UPDATE */",
    "b -- set_config(1)\n",
    "\"set_config\"",
    "E'\\' pg_advisory_lock(1)'",
];

const LOCKS: &[&str] = &[
    " FOR UPDATE",
    " FOR SHARE",
    " FOR UPDATE OF t NOWAIT",
    " FOR SHARE SKIP LOCKED",
];

const DML_CTES: &[&str] = &[
    "INSERT INTO t (a) VALUES (1) RETURNING a",
    "UPDATE t SET a = 1 RETURNING a",
    "DELETE FROM t WHERE a = 1 RETURNING a",
];

const RELATIONS: &[&str] = &[
    "t",
    "public.u",
    "pg_class",
    "pg_stat_activity",
    "pg_locks",
    "\"T\"",
];

fn pick(list: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(list)
}

fn expr() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => pick(SAFE_CALLS).prop_map(str::to_string),
        2 => pick(HAZARD_CALLS).prop_map(str::to_string),
        3 => pick(DECOYS).prop_map(str::to_string),
        3 => prop_oneof![Just("a"), Just("b"), Just("1"), Just("'x'"), Just("t.a")]
            .prop_map(str::to_string),
    ]
}

fn select() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(expr(), 1..4),
        pick(RELATIONS),
        proptest::option::weighted(0.4, expr()),
        proptest::option::weighted(0.15, pick(LOCKS)),
        proptest::option::weighted(0.1, Just(" INTO new_t")),
        proptest::option::weighted(0.3, expr()),
    )
        .prop_map(|(items, from, cond, lock, into, sub)| {
            let mut s = format!("SELECT {}", items.join(", "));
            if let Some(i) = into {
                s.push_str(i);
            }
            s.push_str(&format!(" FROM {from}"));
            if let Some(c) = cond {
                s.push_str(&format!(" WHERE {c} IS NOT NULL"));
            }
            if let Some(e) = sub {
                s.push_str(&format!(" AND a IN (SELECT {e} FROM t)"));
            }
            if let Some(l) = lock {
                s.push_str(l);
            }
            s
        })
}

fn statement() -> impl Strategy<Value = String> {
    (
        proptest::option::weighted(
            0.35,
            (select(), proptest::option::weighted(0.4, pick(DML_CTES))),
        ),
        select(),
        proptest::option::weighted(0.15, select()),
    )
        .prop_map(|(cte, main, union)| {
            let mut s = String::new();
            if let Some((q, dml)) = cte {
                s.push_str(&format!("WITH c AS ({}) ", dml.map_or(q, str::to_string)));
            }
            s.push_str(&main);
            if let Some(u) = union {
                s.push_str(&format!(" UNION ALL ({u})"));
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn s7_replica_safe_statements_have_a_clean_ast(sql in statement()) {
        if classify(&sql, &WriteFunctions::defaults()).is_replica_safe() {
            if let Some(problems) = oracle(&sql) {
                prop_assert!(problems.is_empty(), "{:?} judged replica-safe: {:?}", sql, problems);
            }
        }
    }
}

/// The oracle itself sees what it must (a negative control), and the property above really
/// checked statements.
#[test]
fn s7_the_oracle_catches_each_hazard() {
    for (sql, what) in [
        ("SELECT a FROM t FOR UPDATE", "locking clause"),
        ("SELECT a INTO x FROM t", "SELECT INTO"),
        (
            "WITH c AS (DELETE FROM t RETURNING a) SELECT * FROM c",
            "data-modifying CTE",
        ),
        ("SELECT pg_catalog.nextval('s')", "calls nextval"),
        ("SELECT \"set_config\"('a', 'b', false)", "calls set_config"),
        (
            "SELECT * FROM pg_stat_activity",
            "relation pg_stat_activity",
        ),
        ("SELECT pg_is_in_recovery()", "calls pg_is_in_recovery"),
    ] {
        let problems = oracle(sql).unwrap_or_else(|| panic!("sqlparser rejects {sql}"));
        assert!(problems.iter().any(|p| p == what), "{sql}: {problems:?}");
        assert!(
            !classify(sql, &WriteFunctions::defaults()).is_replica_safe(),
            "{sql}"
        );
    }
    assert_eq!(
        oracle("SELECT lower(a) FROM t WHERE b = 'for update'"),
        Some(vec![])
    );
}

#[test]
fn s7_the_oracle_checks_thousands_of_replica_safe_statements() {
    // Run the same generator outside proptest's harness to count what it checks.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::default());
    let (mut total, mut safe, mut parsed) = (0, 0, 0);
    let strategy = statement();
    for _ in 0..3000 {
        let sql = strategy.new_tree(&mut runner).unwrap().current();
        total += 1;
        if classify(&sql, &WriteFunctions::defaults()).is_replica_safe() {
            safe += 1;
            if let Some(problems) = oracle(&sql) {
                parsed += 1;
                assert!(
                    problems.is_empty(),
                    "{sql:?} judged replica-safe: {problems:?}"
                );
            }
        }
    }
    eprintln!(
        "{total} statements, {safe} judged replica-safe, {parsed} of those checked by sqlparser"
    );
    assert!(
        safe * 10 >= total,
        "only {safe} of {total} safe: the generator is too hazardous"
    );
    assert!(
        parsed * 2 >= safe,
        "sqlparser parsed only {parsed} of {safe}"
    );
}

/// A census for the issue-16 measurement, not part of the test command: for each statement of
/// `$POLARSPLIT_SAFE_SQL` (NUL-separated; e.g. the statements of PostgreSQL's regression SQL that
/// some classifier judged replica-safe), the functions sqlparser finds in it are judged by the
/// F-policy (no catalogue: every user function is unknown). Prints how many statements call a
/// function that is not read-safe, by reason.
#[test]
#[ignore = "measurement: needs $POLARSPLIT_SAFE_SQL"]
fn census_of_functions_called_by_replica_safe_statements() {
    struct Names(Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                self.0.push(last_name(&f.name));
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
            match t {
                TableFactor::Table {
                    name,
                    args: Some(_),
                    ..
                }
                | TableFactor::Function { name, .. } => self.0.push(last_name(name)),
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let Ok(path) = std::env::var("POLARSPLIT_SAFE_SQL") else {
        panic!("set POLARSPLIT_SAFE_SQL");
    };
    let text = std::fs::read_to_string(path).unwrap();
    let table = builtins::default_table();
    let (mut total, mut parsed) = (0, 0);
    let mut by_reason = std::collections::BTreeMap::<&str, u32>::new();
    let mut examples = Vec::new();
    for sql in text.split('\0').filter(|s| !s.trim().is_empty()) {
        total += 1;
        let Ok(stmts) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else {
            continue;
        };
        parsed += 1;
        let mut names = Names(Vec::new());
        let _ = stmts.visit(&mut names);
        // Reserved and column-name keywords (`ARRAY(…)`, `ROW(…)`, `NULLIF(…)`, `ALL (…)`) are
        // grammar, not calls, in PostgreSQL.
        let grammar = |n: &str| {
            matches!(
                table.keyword(n.as_bytes()),
                Some(builtins::flags::RESERVED | builtins::flags::COL_NAME)
            )
        };
        let worst = names
            .0
            .iter()
            .filter(|n| !grammar(n))
            .filter_map(|n| table.verdict_name(n).map(|r| (r, n.clone())))
            .next();
        if let Some((reason, name)) = worst {
            *by_reason.entry(reason).or_default() += 1;
            if examples.len() < 40 {
                examples.push(format!(
                    "{reason} {name}: {}",
                    sql.trim().replace('\n', " ")
                ));
            }
        }
    }
    println!("{total} statements, {parsed} parsed by sqlparser, calling a function not read-safe: {by_reason:?}");
    for e in examples {
        println!("  {}", &e[..e.len().min(200)]);
    }
}
