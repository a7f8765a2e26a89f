//! SPEC §7 F-policy and S-7 through the public API: built-ins by volatility and the reviewed
//! lists, every spelling of a never-safe name, the per-database catalogue of user functions,
//! `read_functions` / `unknown_functions` / `/* route=reader */`, server-dependent functions and
//! relations, and what the call detection must keep replica-safe.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use polarsplit::internals::classify::{
    builtins, classify, classify_with_policy, Classification, Effects, FunctionPolicy, Kind,
    Limits, NotSafe, ReadFunctions, WriteFunctions,
};
use polarsplit::{ConfigBuilder, Engine};
use polarsplit::{UnknownFunctions, UserFunction, Volatility};
use proptest::prelude::*;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCS.with(|c| c.get());
    let out = f();
    (out, ALLOCS.with(|c| c.get()) - before)
}

fn why(c: &Classification) -> NotSafe {
    c.first().not_safe
}

fn default_why(sql: &str) -> NotSafe {
    let c = classify(sql, &WriteFunctions::defaults());
    assert_eq!(c.count(), 1, "{sql}");
    why(&c)
}

fn lenient() -> FunctionPolicy {
    FunctionPolicy::default().with_unknown_functions(UnknownFunctions::Replica)
}

fn with(policy: &FunctionPolicy, sql: &str) -> Classification {
    classify_with_policy(sql, policy, None, &Limits::DEFAULT)
}

fn f(schema: &str, name: &str, v: Volatility) -> UserFunction {
    UserFunction {
        schema: schema.into(),
        name: name.into(),
        volatility: v,
    }
}

/// `U&"…"` with every character escaped, in the default escape or with `UESCAPE '<esc>'`.
fn unicode_spelling(name: &str, esc: char, six: bool) -> String {
    let mut s = String::from("U&\"");
    for c in name.chars() {
        if six {
            s.push_str(&format!("{esc}+{:06X}", c as u32));
        } else {
            s.push_str(&format!("{esc}{:04X}", c as u32));
        }
    }
    s.push('"');
    if esc != '\\' {
        s.push_str(&format!(" UESCAPE '{esc}'"));
    }
    s
}

/// Every way of calling `name` the classifier must see through.
fn spellings(name: &str, schema: &str) -> Vec<String> {
    let t = builtins::default_table();
    let mut calls = vec![
        format!("\"{name}\"(1)"),
        format!("{schema}.\"{name}\"(1)"),
        format!("\"{schema}\".\"{name}\"(1)"),
        format!("{} (1)", unicode_spelling(name, '\\', false)),
        format!("{}(1)", unicode_spelling(name, '\\', true)),
        format!("{} (1)", unicode_spelling(name, '!', false)),
        format!("{schema}.{}(1)", unicode_spelling(name, '#', true)),
        format!(
            "{} /* c */ . -- c\n \"{name}\" /**/ (1)",
            schema.to_uppercase()
        ),
    ];
    let bare = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit());
    let keyword = matches!(
        t.keyword(name.as_bytes()),
        Some(builtins::flags::RESERVED | builtins::flags::COL_NAME)
    );
    if bare && !keyword {
        calls.push(format!("{name}(1)"));
        calls.push(format!("{}(1)", name.to_uppercase()));
        calls.push(format!("{}\n(1)", mixed_case(name)));
    }
    if bare {
        calls.push(format!("{schema}.{}(1)", name.to_uppercase()));
    }
    let mut out = Vec::new();
    for c in &calls {
        out.push(format!("SELECT {c}"));
        out.push(format!("SELECT x FROM t WHERE y = {c}"));
        out.push(format!("SELECT * FROM {c}"));
        out.push(format!("WITH w AS (SELECT {c}) SELECT * FROM w"));
        out.push(format!("SELECT (SELECT (SELECT {c}))"));
        out.push(format!("VALUES ({c})"));
        out.push(format!("EXPLAIN SELECT {c}"));
    }
    // Attribute notation calls a one-argument function.
    out.push(format!("SELECT (1).\"{name}\""));
    out.push(format!(
        "SELECT (1).{}",
        unicode_spelling(name, '\\', false)
    ));
    out
}

fn mixed_case(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// SPEC §7 / S-7 must-show: `U&`/`UESCAPE`/quoted/qualified spellings of every never-safe and
/// every server-dependent built-in are not replica-safe, for the reason of its list.
#[test]
fn s7_every_spelling_of_every_never_safe_builtin_is_not_replica_safe() {
    let t = builtins::default_table();
    let policies = [FunctionPolicy::default(), lenient()];
    let mut checked = (0, 0);
    for name in t.names() {
        let want = match t.verdict_name(name) {
            Some("WRITE_FUNCTION") => NotSafe::WriteFunction,
            Some("SERVER_DEPENDENT") => NotSafe::ServerDependent,
            _ => continue,
        };
        let schema = "pg_catalog";
        for sql in spellings(name, schema) {
            // P-6: a plain SELECT of one call of a session-only built-in, however spelt, is
            // the writer's but writes nothing; every other form of it may write.
            let want = if want == NotSafe::WriteFunction
                && builtins::SESSION_ONLY.contains(&name)
                && sql.starts_with("SELECT ")
                && !sql.starts_with("SELECT (")
                && !sql.contains("FROM")
            {
                NotSafe::SessionFunction
            } else {
                want
            };
            for p in &policies {
                let c = with(p, &sql);
                assert!(!c.is_replica_safe(), "{sql:?} judged replica-safe");
                assert_eq!(why(&c), want, "{sql:?}");
                assert_eq!(c.may_write(), want != NotSafe::SessionFunction, "{sql:?}");
            }
            // The reader hint declares functions read-safe, never the never-safe ones.
            let hinted = with(&lenient(), &format!("/* route=reader */ {sql}"));
            if matches!(want, NotSafe::WriteFunction | NotSafe::SessionFunction) {
                assert_eq!(why(&hinted), want, "{sql:?}");
            }
            checked.0 += 1;
        }
        checked.1 += 1;
    }
    assert!(checked.1 > 150, "only {} names", checked.1);
    eprintln!(
        "{} spellings of {} never-safe or server-dependent built-ins",
        checked.0, checked.1
    );
}

#[test]
fn s7_the_issue_16_uescape_spellings_are_write_functions() {
    for sql in [
        "SELECT U&\"!0073et_config\" UESCAPE '!' ('a.b','1',false)",
        "SELECT U&\"!0070g_advisory_lock\" UESCAPE '!' (1)",
        "SELECT U&\"\\0073et_config\"('a.b','1',false)",
        "SELECT pg_catalog.set_config('a.b','1',false)",
        "SELECT \"pg_catalog\".\"set_config\"('a.b','1',false)",
        "SELECT u&\"pg_catalog\".u&\"set\\005Fconfig\"('a.b','1',false)",
    ] {
        // set_config's spellings: the writer's, but no write (P-6); the lock's: a write.
        let want = if sql.contains("lock") {
            NotSafe::WriteFunction
        } else {
            NotSafe::SessionFunction
        };
        assert_eq!(default_why(sql), want, "{sql}");
        assert_eq!(why(&with(&lenient(), sql)), want, "{sql}");
    }
    // The session effects follow the normalised name too.
    let c = classify(
        "SELECT U&\"!0073et_config\" UESCAPE '!' ('a.b','1',false)",
        &WriteFunctions::defaults(),
    );
    assert!(c.effects().contains(Effects::CALLS_SET_CONFIG));
    // What cannot be normalised is not replica-safe.
    for sql in [
        "SELECT U&\"!0073et_config\" UESCAPE 'ab' (1)",
        "SELECT U&\"\\zzzz\"(1)",
        "SELECT U&\"\\D800\"(1)",
        "SELECT U&\"x\" UESCAPE '+'",
        "SELECT U&\"x\" UESCAPE 1",
    ] {
        let c = with(&lenient(), sql);
        assert!(!c.is_replica_safe(), "{sql}");
        assert_eq!(why(&c), NotSafe::Unparseable, "{sql}");
    }
}

// ---- the property test: no spelling of a write-list name is ever safe ----

fn write_list_names() -> Vec<String> {
    let mut names: Vec<String> = WriteFunctions::defaults().entries();
    names.extend(builtins::NEVER_SAFE.iter().map(|s| s.to_string()));
    names.push("audit_*".into());
    names.push("my_writer".into());
    names.sort();
    names.dedup();
    names
}

fn configured() -> WriteFunctions {
    let mut wf = WriteFunctions::defaults();
    assert!(wf.add("audit_*"));
    assert!(wf.add("my_writer"));
    wf
}

prop_compose! {
    fn listed_name()(entry in proptest::sample::select(write_list_names()),
                     suffix in "[a-z0-9_]{0,6}") -> String {
        match entry.strip_suffix('*') {
            Some(prefix) => format!("{prefix}{suffix}"),
            None => entry,
        }
    }
}

/// One spelling of `name`: a random mix of case (unquoted), quotes, `U&` escapes with a random
/// escape character, qualification, white space and comments.
fn spell(name: &str, form: u8, esc: char, mask: u64, schema: &str, gap: &str) -> String {
    let escaped = |six: bool| {
        let mut s = String::from("U&\"");
        for (i, c) in name.chars().enumerate() {
            if mask >> (i % 64) & 1 == 1 {
                if six {
                    s.push_str(&format!("{esc}+{:06x}", c as u32));
                } else {
                    s.push_str(&format!("{esc}{:04x}", c as u32));
                }
            } else if c == esc {
                // The escape character itself is written twice.
                s.push(c);
                s.push(c);
            } else {
                s.push(c);
            }
        }
        s.push('"');
        if esc != '\\' {
            s.push_str(&format!("{gap}UESCAPE{gap}'{esc}'"));
        }
        s
    };
    let cased: String = name
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    let base = match form % 4 {
        0 => cased,
        1 => format!("\"{name}\""),
        2 => escaped(false),
        _ => escaped(true),
    };
    match form / 4 % 3 {
        0 => base,
        1 => format!("{schema}{gap}.{gap}{base}"),
        _ => format!("\"{schema}\".{base}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// SPEC §7: a name on the write list (configured or never-safe), spelled any way the server
    /// reads as that name, in any position, is never replica-safe — whatever `unknown_functions`
    /// and `read_functions` say, and under the reader hint.
    #[test]
    fn s7_no_spelling_of_a_write_list_name_is_ever_safe(
        name in listed_name(),
        form in 0u8..12,
        esc in proptest::sample::select(vec!['\\', '!', '#', '%', '&', 'z', '~']),
        mask in any::<u64>(),
        schema in proptest::sample::select(vec!["pg_catalog", "public", "s"]),
        gap in proptest::sample::select(vec![" ", "", "\n", " /* x */ ", " -- c\n"]),
        ctx in 0usize..8,
        hint in any::<bool>(),
    ) {
        let call = format!("{}{gap}(1, 'a')", spell(&name, form, esc, mask, schema, gap));
        let sql = match ctx {
            0 => format!("SELECT {call}"),
            1 => format!("SELECT a FROM t WHERE b = {call}"),
            2 => format!("SELECT * FROM {call} AS x(a)"),
            3 => format!("WITH w(a) AS (SELECT {call}) SELECT * FROM w"),
            4 => format!("SELECT (SELECT max(a) FROM t WHERE {call} IS NULL)"),
            5 => format!("VALUES (1), ({call})"),
            6 => format!("SELECT (1).{}", spell(&name, form, esc, mask, schema, gap).rsplit('.').next().unwrap_or("")),
            _ => format!("TABLE t UNION SELECT {call}"),
        };
        let sql = if hint { format!("/* route=reader */ {sql}") } else { sql };
        let mut read = ReadFunctions::new();
        read.add("harmless_report");
        for policy in [
            FunctionPolicy::new(configured()),
            FunctionPolicy::new(configured())
                .with_unknown_functions(UnknownFunctions::Replica)
                .with_read_functions(read.clone()),
        ] {
            let c = with(&policy, &sql);
            prop_assert!(!c.is_replica_safe(), "{:?} judged replica-safe", sql);
        }
    }
}

// ---- built-ins ----

#[test]
fn f_policy_builtins_follow_volatility_and_the_reviewed_lists() {
    for (sql, want) in [
        // Immutable and stable built-ins.
        ("SELECT lower(name), now(), length(x) FROM t", NotSafe::None),
        (
            "SELECT to_char(now(), 'YYYY'), format('%s', 1)",
            NotSafe::None,
        ),
        (
            "SELECT count(*), array_agg(x), row_number() OVER () FROM t",
            NotSafe::None,
        ),
        (
            "SELECT information_schema._pg_char_max_length(1, 2)",
            NotSafe::None,
        ),
        // Volatile built-ins on the reviewed read-safe list.
        (
            "SELECT random(), clock_timestamp(), timeofday(), gen_random_uuid()",
            NotSafe::None,
        ),
        (
            "SELECT pg_sleep(0.1), pg_sleep_for('1 ms'), pg_sleep_until(now())",
            NotSafe::None,
        ),
        ("SELECT * FROM t TABLESAMPLE BERNOULLI (5)", NotSafe::None),
        // Volatile and not reviewed.
        ("SELECT txid_status(1)", NotSafe::VolatileFunction),
        (
            "SELECT cursor_to_xml('c', 1, true, false, '')",
            NotSafe::VolatileFunction,
        ),
        (
            "SELECT pg_xact_commit_timestamp('1')",
            NotSafe::VolatileFunction,
        ),
        // Never safe, stable in pg_proc or not.
        ("SELECT txid_current()", NotSafe::WriteFunction),
        ("SELECT pg_current_xact_id()", NotSafe::WriteFunction),
        (
            "SELECT brin_summarize_new_values('i')",
            NotSafe::WriteFunction,
        ),
        (
            "SELECT brin_desummarize_range('i', 0)",
            NotSafe::WriteFunction,
        ),
        ("SELECT gin_clean_pending_list('i')", NotSafe::WriteFunction),
        ("SELECT pg_promote()", NotSafe::WriteFunction),
        ("SELECT pg_wal_replay_pause()", NotSafe::WriteFunction),
        ("SELECT pg_reload_conf()", NotSafe::WriteFunction),
        ("SELECT pg_switch_wal()", NotSafe::WriteFunction),
        (
            "SELECT pg_create_physical_replication_slot('s')",
            NotSafe::WriteFunction,
        ),
        ("SELECT pg_export_snapshot()", NotSafe::WriteFunction),
        ("SELECT pg_stat_reset()", NotSafe::WriteFunction),
        ("SELECT pg_stat_reset_shared('wal')", NotSafe::WriteFunction),
        (
            "SELECT pg_log_backend_memory_contexts(1)",
            NotSafe::WriteFunction,
        ),
        (
            "SELECT pg_terminate_backend(pg_backend_pid())",
            NotSafe::WriteFunction,
        ),
        ("SELECT pg_cancel_backend(1)", NotSafe::WriteFunction),
        ("SELECT lo_get(1)", NotSafe::WriteFunction),
        ("SELECT setseed(0.5)", NotSafe::SessionFunction),
        ("SELECT setseed(0.5) FROM t", NotSafe::WriteFunction),
    ] {
        assert_eq!(default_why(sql), want, "{sql}");
    }
    // The table is the real server's, not a sample.
    let t = builtins::default_table();
    assert_eq!(t.major(), 15);
    assert!(
        t.len() > 2500 && t.rows() > 3000,
        "{} names, {} rows",
        t.len(),
        t.rows()
    );
}

/// S-7 (issue 17 point 6).
#[test]
fn s7_server_dependent_functions_and_relations_go_to_the_writer() {
    for sql in [
        "SELECT pg_is_in_recovery()",
        "SELECT pg_last_wal_replay_lsn(), pg_last_xact_replay_timestamp()",
        "SELECT pg_current_wal_lsn()",
        "SELECT pg_backend_pid()",
        // The reader connection's client address and port are not the writer's (red5).
        "SELECT inet_client_port()",
        "SELECT pg_catalog.inet_client_addr()",
        "SELECT pg_postmaster_start_time(), pg_conf_load_time()",
        // The server's build and installation: a standby of another minor release or host.
        "SELECT version()",
        "SELECT pg_catalog.version()",
        "SELECT * FROM pg_config()",
        "SELECT * FROM pg_config",
        "SELECT name FROM pg_available_extensions()",
        "SELECT * FROM pg_available_extensions WHERE name = 'plpgsql'",
        "SELECT * FROM pg_catalog.pg_available_extension_versions",
        "SELECT * FROM pg_extension_update_paths('plpgsql')",
        "SELECT pg_tablespace_location(oid) FROM pg_tablespace",
        "SELECT * FROM pg_tablespace_databases(1663)",
        "SELECT pg_current_snapshot()",
        "SELECT txid_current_snapshot()",
        "SELECT * FROM pg_control_checkpoint()",
        "SELECT pg_read_file('postgresql.conf')",
        "SELECT * FROM pg_ls_waldir()",
        "SELECT pg_stat_get_numscans(1259)",
        "SELECT pg_relation_size('t')",
        "SELECT * FROM pg_stat_activity",
        "SELECT * FROM pg_catalog.pg_stat_replication",
        "SELECT * FROM \"pg_stat_wal_receiver\"",
        "SELECT count(*) FROM pg_replication_slots",
        "SELECT * FROM pg_prepared_xacts",
        "SELECT * FROM pg_locks l JOIN pg_class c ON c.oid = l.relation",
        "SELECT name, setting FROM pg_settings",
        "SELECT * FROM pg_statio_user_tables",
        "SELECT * FROM t WHERE EXISTS (SELECT 1 FROM pg_stat_user_tables)",
        "SELECT current_setting('transaction_read_only')",
        "SELECT current_setting('Default_Transaction_Read_Only')",
        "SELECT current_setting('in_hot_standby', true)",
        "SELECT pg_catalog.current_setting(name) FROM t",
        "SELECT current_setting('in_hot' || '_standby')",
        "SELECT current_setting(E'in_hot_standby')",
        "SELECT current_setting($1)",
        "SELECT ('in_hot_standby'::text).current_setting",
        "SELECT current_setting('in_hot_standby'::text, true)",
        "SELECT current_setting('app.x'::varchar)",
        "SELECT current_setting('app.x'::text::int)",
        "SELECT current_setting('app.x'::pg_catalog.name)",
        // The server's own settings (pg_settings.context other than user/superuser), and a name
        // the table does not know.
        "SELECT current_setting('port')",
        "SELECT current_setting('Data_Directory')",
        "SELECT current_setting('primary_conninfo', true)",
        "SELECT current_setting('max_connections'), current_setting('work_mem')",
        "SELECT current_setting('shared_buffers')",
        "SELECT current_setting('server_version')",
        "SELECT current_setting('polar_no_such_setting', true)",
    ] {
        assert_eq!(default_why(sql), NotSafe::ServerDependent, "{sql}");
    }
    // Not server-dependent: where a read ran (on purpose), catalogue data, other settings.
    for sql in [
        "SELECT inet_server_addr(), inet_server_port()",
        "SELECT * FROM pg_stats WHERE tablename = 't'",
        "SELECT current_setting('work_mem'), current_setting('search_path', true)",
        "SELECT current_setting('TimeZone'), current_setting('datestyle')",
        "SELECT current_setting('myapp.tenant', true)",
        // As `pg_get_expr` prints a row-level security policy's call (the examiners' multi-tenant
        // tables: every read of them stayed on the primary, 2026-12-05).
        "SELECT current_setting('myapp.tenant'::text, true)",
        "SELECT * FROM t WHERE tenant = current_setting('myapp.tenant'::pg_catalog.text)",
        "SELECT * FROM pg_class WHERE relname = 'pg_stat_activity'",
    ] {
        assert_eq!(default_why(sql), NotSafe::None, "{sql}");
    }
    // SHOW is never replica-safe.
    assert!(!classify("SHOW transaction_read_only", &WriteFunctions::defaults()).is_replica_safe());
}

/// S-7 (red5): `age(xid)` is `next XID - xid` of the server that answers, and a standby's next
/// XID lags the primary's (43 there, 44 on the primary). The classifier sees no argument types:
/// every one-argument `age` — `age(timestamp)` too — goes to the writer, in every spelling, as
/// does `mxid_age` (one overload, the multixact counter).
#[test]
fn s7_age_of_one_argument_goes_to_the_primary() {
    for sql in [
        "SELECT age(datfrozenxid) FROM pg_database",
        "SELECT datname, AGE(datfrozenxid) FROM pg_database ORDER BY 2 DESC",
        "SELECT pg_catalog.age(relfrozenxid) FROM pg_class",
        "SELECT \"age\" (x) FROM t",
        "SELECT U&\"\\0061ge\"(x) FROM t",
        "SELECT (datfrozenxid).age FROM pg_database",
        "SELECT $1.age",
        "SELECT x[1].age FROM t",
        "SELECT 1 FROM t WHERE age(x) > 10",
        "SELECT age(ts) FROM t",
        "SELECT age(timestamp '2001-04-10')",
        "SELECT age(ARRAY[a, b][1]) FROM t",
        "SELECT age('a,b')",
        "SELECT age(/* , */ x -- ,\n) FROM t",
        "SELECT age((SELECT a FROM t WHERE b IN (1, 2) LIMIT 1))",
        "SELECT age(coalesce(a, b)) FROM t",
        "SELECT age(x, age(y)) FROM t",
        "SELECT age(age(x), y) FROM t",
        // No overload takes these counts (the server refuses them): the worst of the name.
        "SELECT age() FROM t",
        "SELECT age(a, b, c) FROM t",
        "SELECT age(a, b",
        "SELECT mxid_age(datminmxid) FROM pg_database",
        "SELECT (datminmxid).mxid_age FROM pg_database",
    ] {
        assert_eq!(default_why(sql), NotSafe::ServerDependent, "{sql}");
    }
}

/// `age(a, b)` — `age(timestamp, timestamp)`, `age(timestamptz, timestamptz)` — is immutable and
/// stays on a reader; so does a column named `age`.
#[test]
fn s7_age_of_two_arguments_stays_on_a_reader() {
    for sql in [
        "SELECT age(now(), created_at) FROM t",
        "SELECT age(timestamp '2001-04-10', timestamp '1957-06-13')",
        "SELECT pg_catalog.age(a, b) FROM t",
        "SELECT \"age\" (a, (b)) FROM t",
        "SELECT age(a, coalesce(b, c)) FROM t",
        "SELECT age(ARRAY[a, b][1], c) FROM t",
        "SELECT age(a, b) FROM t WHERE x IN (1, 2)",
        "SELECT age(age(a, b)::timestamp, c) FROM t",
        "SELECT u.age, u.name FROM users u",
        "SELECT age FROM users WHERE age > 30",
        "SELECT 'age(x)', \"age\" FROM t",
    ] {
        assert_eq!(default_why(sql), NotSafe::None, "{sql}");
    }
    // A user function named age may answer a two-argument call: the catalogue's verdict.
    let engine = Engine::new(ConfigBuilder::new().build().unwrap());
    let cl = engine.classifier();
    let sql = "SELECT age(a, b) FROM t";
    assert!(cl.classify_in(b"app", sql).is_replica_safe());
    engine
        .set_function_catalog(b"app", [f("public", "age", Volatility::Volatile)])
        .unwrap();
    assert_eq!(why(&cl.classify_in(b"app", sql)), NotSafe::UserFunction);
    // `/* route=reader */` accepts S-7 answers, as for the other server-dependent functions.
    assert_eq!(
        default_why("/* route=reader */ SELECT age(datfrozenxid) FROM pg_database"),
        NotSafe::None
    );
}

/// The decision and shape caches key on the statement's tokens: one and two arguments are
/// different keys, whatever the literals.
#[test]
fn s7_age_verdicts_survive_the_caches() {
    let cl = polarsplit::internals::classify::Classifier::new(WriteFunctions::defaults(), 64);
    for _ in 0..3 {
        for (sql, why_) in [
            (
                "SELECT age('2001-04-10'::timestamp)",
                NotSafe::ServerDependent,
            ),
            (
                "SELECT age('2001-04-10'::timestamp, '1957-06-13'::timestamp)",
                NotSafe::None,
            ),
            (
                "SELECT age('2002-04-10'::timestamp)",
                NotSafe::ServerDependent,
            ),
            (
                "SELECT age('2002-04-10'::timestamp, '1958-06-13'::timestamp)",
                NotSafe::None,
            ),
            ("SELECT age(ARRAY[1, 2][1])", NotSafe::ServerDependent),
            ("SELECT age(ARRAY[3, 4][1])", NotSafe::ServerDependent),
        ] {
            assert_eq!(why(&cl.classify(sql)), why_, "{sql}");
        }
    }
}

/// An argument of a by-arity built-in, with commas of its own (in parentheses, brackets,
/// strings, comments, quoted names) that separate no arguments.
fn arity_argument() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "x",
        "t.x",
        "$1",
        "'a, b'",
        "$$,$$",
        "\"a,b\"",
        "ARRAY[1, 2]",
        "ARRAY[[1, 2], [3, 4]][1:2]",
        "x[1]",
        "(1, 2)",
        "ROW(a, b)",
        "lower(a || ',')",
        "coalesce(a, b, c)",
        "(SELECT a, b FROM u LIMIT 1)",
        "CASE WHEN a IN (1, 2) THEN b ELSE c END",
        "a::numeric(10, 2)",
        "/* , */ x",
        "x -- ,\n",
        "now() - interval '1 day'",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// S-7: a call of every built-in judged by its number of arguments gets the verdict of that
    /// number, whatever its arguments hold and however it is spelled.
    #[test]
    fn s7_by_arity_builtins_are_judged_by_the_arguments_they_really_have(
        pick in any::<prop::sample::Index>(),
        args in prop::collection::vec(arity_argument(), 0..5),
        qualified in any::<bool>(),
    ) {
        let t = builtins::default_table();
        let names: Vec<&str> = t.by_arity_names().collect();
        prop_assert!(!names.is_empty());
        let name = names[pick.index(names.len())];
        let prefix = if qualified { "pg_catalog." } else { "" };
        let sql = format!("SELECT {prefix}\"{name}\"({}) FROM t", args.join(", "));
        let want = match t.verdict_name_at(name, Some(args.len() as u32)) {
            None => NotSafe::None,
            Some("SERVER_DEPENDENT") => NotSafe::ServerDependent,
            Some("VOLATILE_FUNCTION") => NotSafe::VolatileFunction,
            Some(other) => panic!("{name}: {other}"),
        };
        prop_assert_eq!(default_why(&sql), want, "{}", sql);
    }
}

/// Common reads whose `name (` is no call: they must stay replica-safe (offload), and the
/// places where a name after a keyword *is* a call must not be missed.
#[test]
fn f_policy_call_detection_keeps_offload_and_misses_no_call() {
    for sql in [
        "SELECT * FROM generate_series(1, 3) g(i)",
        "SELECT * FROM generate_series(1, 3) AS g (i)",
        "SELECT * FROM t x(a, b) JOIN u \"Y\"(c) ON x.a = \"Y\".c",
        "SELECT * FROM (VALUES (1, 2)) v(a, b)",
        "SELECT * FROM unnest(ARRAY[1]) WITH ORDINALITY AS u(x, n)",
        "WITH t(a) AS (SELECT 1), u(b) AS MATERIALIZED (SELECT 2) SELECT * FROM t, u",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 9) SELECT * FROM r",
        "EXPLAIN WITH t(a) AS (SELECT 1) SELECT * FROM t",
        "SELECT x::numeric(10, 2), y::pg_catalog.varchar(3), CAST(z AS decimal(5)) FROM t",
        "SELECT z::character varying(3), w::bit varying(8), v::timestamp(3) with time zone FROM t",
        "SELECT interval '1' day to second(3), interval '1' second (2)",
        "SELECT a FROM t LEFT JOIN (SELECT 1) s ON true CROSS JOIN (SELECT 2) u",
        "SELECT a FROM t JOIN (SELECT 1) s ON true",
        "SELECT * FROM t WHERE a LIKE (b) AND c NOT ILIKE (d) AND e SIMILAR TO (f)",
        "SELECT * FROM t WHERE a IN (1, 2) AND EXISTS (SELECT 1) AND b = ANY (ARRAY[1])",
        "SELECT count(*) FILTER (WHERE a > 0) OVER (PARTITION BY b) FROM t",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FROM t",
        "SELECT a FROM t GROUP BY GROUPING SETS ((a), ())",
        "SELECT a FROM t GROUP BY ROLLUP (a)",
        "SELECT a FROM t GROUP BY CUBE (a, b)",
        "SELECT * FROM t FETCH FIRST (3) ROWS ONLY",
        "SELECT 1 OPERATOR(pg_catalog.+) 2",
        "SELECT * FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (1)",
        "SELECT DISTINCT ON (a) a FROM t",
        "SELECT xmlelement(name foo, xmlattributes('x' AS bar)), substring('abc' from 2)",
        "SELECT ROW(1, 2), COALESCE(a, b), GREATEST(1, 2), NULLIF(a, 0) FROM t",
        "SELECT t.a, s.b FROM public.t JOIN s USING (id)",
        "EXPLAIN (COSTS OFF, FORMAT JSON) SELECT 1",
        "SELECT left('abc', 1), right('abc', 1), current_schema()",
    ] {
        assert_eq!(default_why(sql), NotSafe::None, "{sql}");
    }
    for sql in [
        "SELECT ts AT TIME ZONE my_tz(x) FROM t",
        "SELECT a FROM t ORDER BY cube(a)",
        // Conservative: a grouping set after a comma is taken for a call (offload lost only).
        "SELECT a FROM t GROUP BY a, cube(b)",
        "SELECT * FROM t WHERE a = some_fn(b)",
        "SELECT my_fn(1)",
        "SELECT \"select\"(1)",
        "SELECT s.my_fn(1)",
        "SELECT * FROM my_srf(1) AS x(a int)",
        "SELECT * FROM t, my_srf(1) AS (a int)",
        "SELECT a FROM t WHERE b BETWEEN f(1) AND 2",
        "SELECT CASE WHEN x THEN f(1) END FROM t",
        "SELECT x FROM t WHERE NOT f(x)",
    ] {
        assert_eq!(default_why(sql), NotSafe::UnknownFunction, "{sql}");
    }
}

// ---- user functions, per database ----

#[test]
fn f_policy_user_functions_come_from_the_catalogue_of_each_database() {
    let engine = Engine::new(ConfigBuilder::new().build().unwrap());
    let cl = engine.classifier();
    let sql = "SELECT report_total(1), lower(x) FROM t";
    let in_db = |db: &str, sql: &str| cl.classify_in(db.as_bytes(), sql);
    // Not reported: unknown, not read-safe (unknown_functions = primary), and unseen code.
    assert_eq!(why(&in_db("app", sql)), NotSafe::UnknownFunction);
    assert!(in_db("app", sql).effects().contains(Effects::RUNS_CODE));
    let n = engine
        .set_function_catalog(
            b"app",
            [
                f("public", "report_total", Volatility::Stable),
                f("public", "touch", Volatility::Volatile),
                f("s1", "mixed", Volatility::Immutable),
                f("s2", "mixed", Volatility::Volatile),
            ],
        )
        .unwrap();
    assert_eq!(n, 4);
    assert!(in_db("app", sql).is_replica_safe());
    // Still code the engine cannot see into (S-6: the reader is state-checked).
    assert!(in_db("app", sql).effects().contains(Effects::RUNS_CODE));
    // Per database: another database does not know it.
    assert_eq!(why(&in_db("other", sql)), NotSafe::UnknownFunction);
    assert_eq!(why(&in_db("app", "SELECT touch()")), NotSafe::UserFunction);
    // Any overload in any schema counts.
    assert_eq!(
        why(&in_db("app", "SELECT s1.mixed(1)")),
        NotSafe::UserFunction
    );
    // Attribute notation of a user function that is not read-safe.
    assert_eq!(
        why(&in_db("app", "SELECT (t.*).touch FROM t")),
        NotSafe::UserFunction
    );
    assert!(in_db("app", "SELECT t.touched FROM t").is_replica_safe());
    // Replaced at runtime: what the new report says, and nothing of the old one.
    engine
        .set_function_catalog(b"app", [f("public", "touch", Volatility::Stable)])
        .unwrap();
    assert!(in_db("app", "SELECT touch()").is_replica_safe());
    assert_eq!(why(&in_db("app", sql)), NotSafe::UnknownFunction);
    assert!(engine.remove_function_catalog(b"app"));
    assert_eq!(
        why(&in_db("app", "SELECT touch()")),
        NotSafe::UnknownFunction
    );
    assert!(!engine.remove_function_catalog(b"app"));
}

#[test]
fn f_policy_a_user_function_sharing_a_builtin_name_counts() {
    // A search_path may put public.lower ahead of pg_catalog.lower.
    let engine = Engine::new(ConfigBuilder::new().build().unwrap());
    let cl = engine.classifier();
    let sql = "SELECT lower(x) FROM t";
    assert!(cl.classify_in(b"app", sql).is_replica_safe());
    assert!(!cl
        .classify_in(b"app", sql)
        .effects()
        .contains(Effects::RUNS_CODE));
    engine
        .set_function_catalog(b"app", [f("public", "lower", Volatility::Volatile)])
        .unwrap();
    let c = cl.classify_in(b"app", sql);
    assert_eq!(why(&c), NotSafe::UserFunction);
    assert!(c.effects().contains(Effects::RUNS_CODE));
    assert!(cl.classify_in(b"other", sql).is_replica_safe());
    engine
        .set_function_catalog(b"app", [f("public", "lower", Volatility::Immutable)])
        .unwrap();
    let c = cl.classify_in(b"app", sql);
    assert!(c.is_replica_safe());
    assert!(
        c.effects().contains(Effects::RUNS_CODE),
        "user code may run"
    );
    // A user function never makes a never-safe built-in name safe.
    engine
        .set_function_catalog(b"app", [f("public", "nextval", Volatility::Immutable)])
        .unwrap();
    assert_eq!(
        why(&cl.classify_in(b"app", "SELECT nextval('s')")),
        NotSafe::WriteFunction
    );
}

#[test]
fn f_policy_configured_lists_and_the_reader_hint() {
    let mut b = ConfigBuilder::new();
    b.set("read_functions", "report_*, txid_status").unwrap();
    b.set("write_functions", "report_purge")
        .unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::new(b.build().unwrap());
    let cl = engine.classifier();
    let c = cl.classify_in(b"app", "SELECT report_daily(1), txid_status(1)");
    assert!(c.is_replica_safe(), "{c:?}");
    assert!(c.effects().contains(Effects::RUNS_CODE));
    assert_eq!(
        why(&cl.classify_in(b"app", "SELECT report_purge()")),
        NotSafe::WriteFunction
    );
    // unknown_functions = replica.
    let mut b = ConfigBuilder::new();
    b.set("unknown_functions", "replica").unwrap();
    let engine = Engine::new(b.build().unwrap());
    let c = engine.classifier().classify_in(b"app", "SELECT my_fn(1)");
    assert!(c.is_replica_safe());
    assert!(c.effects().contains(Effects::RUNS_CODE));
    // The runtime replacement of the configuration rebuilds the classifier.
    let mut b = ConfigBuilder::from_config(&engine.config());
    b.set("unknown_functions", "primary").unwrap();
    engine.replace_config(b.build().unwrap());
    assert_eq!(
        why(&engine.classifier().classify_in(b"app", "SELECT my_fn(1)")),
        NotSafe::UnknownFunction
    );
    // `/* route=reader */`: functions declared read-safe; the other rules still apply.
    let wf = WriteFunctions::defaults();
    let hinted = |sql: &str| classify(&format!("/* route=reader */ {sql}"), &wf);
    assert!(hinted("SELECT my_fn(1)").is_replica_safe());
    assert!(hinted("SELECT txid_status(1), pg_is_in_recovery()").is_replica_safe());
    assert!(hinted("SELECT my_fn(1)").hint_reader);
    assert_eq!(
        why(&hinted("SELECT set_config('a', 'b', false)")),
        NotSafe::SessionFunction
    );
    assert_eq!(
        why(&hinted("SELECT my_fn(1) FROM t FOR UPDATE")),
        NotSafe::LockingClause
    );
    assert_eq!(
        hinted("UPDATE t SET a = my_fn(1)").first().kind,
        Kind::Write
    );
    assert!(!classify("SELECT 1 /* route=reader */, my_fn(1)", &wf).is_replica_safe());
}

/// SPEC §7: the cache stays text-keyed and a cache hit stays free: finishing a statement that
/// calls no function, or only built-ins in a database whose catalogue shadows none, costs no
/// allocation and no catalogue lookup.
#[test]
fn f_policy_finishing_is_free_without_database_dependent_calls() {
    let engine = Engine::new(ConfigBuilder::new().build().unwrap());
    engine
        .set_function_catalog(b"app", [f("public", "report_total", Volatility::Stable)])
        .unwrap();
    let cl = engine.classifier();
    for sql in [
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        "SELECT lower(x), now() FROM t WHERE y = $1",
    ] {
        for _ in 0..2 {
            cl.classify_in(b"app", sql);
        }
        let (c, n) = allocations(|| cl.classify_in(b"app", sql));
        assert!(c.is_replica_safe());
        assert_eq!(n, 0, "{sql:?} allocated");
    }
}

#[test]
fn f_policy_catalogue_bounds_are_enforced() {
    let engine = Engine::new(ConfigBuilder::new().build().unwrap());
    let long = "x".repeat(64);
    assert!(engine
        .set_function_catalog(b"app", [f("public", &long, Volatility::Stable)])
        .is_err());
    assert!(engine
        .set_function_catalog(b"app", [f("public", "", Volatility::Stable)])
        .is_err());
    assert!(
        engine.function_catalog(b"app").is_none(),
        "nothing kept on error"
    );
    assert_eq!(Volatility::from_provolatile(b's'), Some(Volatility::Stable));
    assert_eq!(Volatility::from_provolatile(b'x'), None);
}

/// The calls of the code property below: (text, whether nothing judges its code read-safe
/// without the hint, with it).
const CODE_CALLS: &[(&str, bool, bool)] = &[
    ("lower(x)", false, false),
    // Shadowed built-ins (`citext`): `replace` reported immutable, `strpos` volatile.
    ("replace(x, 'a', 'b')", false, false),
    ("strpos(x, 'a')", true, false),
    ("stable_fn(x)", false, false),
    ("volatile_fn(x)", true, false),
    ("unknown_fn(x)", true, false),
    // On the write list, reported stable: never judged read-safe, not even under the hint.
    ("listed_fn(x)", true, true),
    // On the `read_functions` list.
    ("report_x(x)", false, false),
    ("clock_timestamp()", false, false),
    ("now()", false, false),
];

/// The same expression in statements routed to the writer for other reasons (a write, a
/// server-dependent answer, a locking clause) and in a plain read.
const CODE_FORMS: &[&str] = &[
    "SELECT {e}",
    "UPDATE t SET x = {e}",
    "INSERT INTO t SELECT {e}",
    "DELETE FROM t WHERE x = {e} RETURNING x",
    "SELECT {e}, pg_is_in_recovery()",
    "SELECT {e} FROM t FOR UPDATE",
    "WITH w AS (UPDATE t SET x = 1 RETURNING x) SELECT {e} FROM w",
];

fn code_engine() -> std::sync::Arc<Engine> {
    let mut b = ConfigBuilder::new();
    b.set("read_functions", "report_*").unwrap();
    b.set("write_functions", "listed_fn").unwrap();
    let engine = Engine::new(b.build().unwrap());
    engine
        .set_function_catalog(
            b"app",
            [
                f("public", "replace", Volatility::Immutable),
                f("public", "strpos", Volatility::Volatile),
                f("public", "stable_fn", Volatility::Stable),
                f("public", "volatile_fn", Volatility::Volatile),
                f("public", "listed_fn", Volatility::Stable),
            ],
        )
        .unwrap();
    engine
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// SPEC S-4, S-5, F-policy: whether a statement runs code nothing judged read-safe
    /// (`UNSEEN_CODE`: a capture, and a hazard for the session) is the verdict of its calls, the
    /// same in every statement they stand in — a read, a write, a read kept on the writer for
    /// another reason — and never set where a report, the configuration or the hint judged all
    /// of them (an UPDATE calling `citext`'s `replace` kept a session off the standby for good).
    /// While DDL is unreported, code a report judged is marked as judged before it, in every form.
    #[test]
    fn s5_the_code_verdict_is_the_calls_not_the_statements_routing(
        calls in proptest::collection::vec(0..CODE_CALLS.len(), 1..4),
        hint in any::<bool>(),
        ddl in any::<bool>(),
    ) {
        let engine = code_engine();
        let cl = engine.classifier();
        if ddl {
            cl.catalogs().mark_changed(b"app");
        }
        let e = calls.iter().map(|&i| CODE_CALLS[i].0).collect::<Vec<_>>().join(" || ");
        let unseen = calls
            .iter()
            .any(|&i| if hint { CODE_CALLS[i].2 } else { CODE_CALLS[i].1 });
        let user_code = calls.iter().any(|&i| CODE_CALLS[i].0 != "lower(x)"
            && !CODE_CALLS[i].0.ends_with("()"));
        for form in CODE_FORMS {
            let sql = format!("{}{}", if hint { "/* route=reader */ " } else { "" },
                form.replace("{e}", &e));
            let c = cl.classify_in(b"app", &sql);
            let fx = c.effects();
            prop_assert_eq!(fx.contains(Effects::UNSEEN_CODE), unseen, "{}", sql);
            prop_assert_eq!(fx.contains(Effects::RUNS_CODE), user_code, "{}", sql);
            prop_assert_eq!(fx.contains(Effects::CODE_JUDGED_BEFORE_DDL), ddl && user_code,
                "{}", sql);
            if form == &"SELECT {e}" && !ddl {
                // A plain read: replica-safe exactly when no call is unjudged (the clock's
                // volatile built-ins are on the reviewed list).
                prop_assert_eq!(c.is_replica_safe(), !unseen, "{}", sql);
            }
        }
    }
}
