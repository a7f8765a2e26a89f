//! SPEC §7 / S-3 / S-4 table tests for the statement classifier: each row is a statement and its
//! expected `(Kind, NotSafe, Effects, Classification::is_replica_safe)`.

use polarsplit::internals::classify::{
    classify, classify_with_policy, Access, Classification, Classifier, DiscardWhat, Effects,
    FunctionPolicy, Kind, Limits, NameKey, NotSafe as Ns, Span, Var, WriteFunctions,
};
use polarsplit::{Isolation, UnknownFunctions};

const N: Effects = Effects::NONE;
const SC: Effects = Effects::CALLS_SET_CONFIG;
/// `set_config` of a built-in setting named by a literal (S-5: as a SET of it).
const SCN: Effects = Effects(Effects::CALLS_SET_CONFIG.0 | Effects::SETS_CONFIG_BY_NAME.0);
/// `set_config` of a placeholder named by a literal (noted by name before it is sent).
const SCP: Effects = Effects(SCN.0 | Effects::SETS_PLACEHOLDER_BY_NAME.0);
/// `set_config` of a built-in setting that may change how a statement parses (E-2).
const SCR: Effects = Effects(SCN.0 | Effects::SETS_PARSE_SETTING_BY_NAME.0);
const AL: Effects = Effects::ADVISORY_LOCK;
// Code nothing judged read-safe (the table has no catalogue: a user function is unknown).
const CODE: Effects = Effects(Effects::RUNS_CODE.0 | Effects::UNSEEN_CODE.0);
const AX: Effects = Effects::ADVISORY_XACT_LOCK;
const AU: Effects = Effects::ADVISORY_UNLOCK_ALL;
const TMP: Effects = Effects::CREATES_TEMP;
/// P-5/S-7: reads a value of the client's transaction (its start time or characteristics); the
/// backslash and `U&` rows are the predicate erring towards yes (an escape may spell `now`).
const TV: Effects = Effects::TXN_VALUE;
/// A literal the server reads as the clock at parse time: a prepared statement holds it (E-2).
const TVC: Effects = Effects(Effects::TXN_VALUE.0 | Effects::CLOCK_LITERAL.0);
/// S-6/S-7/F-policy: DDL that may change what the host's catalogues report.
const DDL: Effects = Effects::CHANGES_CATALOG;
const KN: Effects = Effects::KEEPS_NAMES;

const R: Kind = Kind::Read;
const RN: Kind = Kind::ReadNotSafe;
const W: Kind = Kind::Write;
const U: Kind = Kind::Unknown;

const fn txn(
    isolation: Option<Isolation>,
    access: Option<Access>,
    deferrable: Option<bool>,
) -> polarsplit::internals::classify::TxnOptions {
    polarsplit::internals::classify::TxnOptions {
        isolation,
        access,
        deferrable,
    }
}

const fn set(var: Var, local: bool) -> Kind {
    Kind::Set {
        var,
        name: Span::EMPTY,
        value: Span::EMPTY,
        local,
    }
}

const fn reset(var: Var) -> Kind {
    Kind::Reset {
        var,
        name: Span::EMPTY,
    }
}

const NO_OPTS: polarsplit::internals::classify::TxnOptions = txn(None, None, None);
const SER: Option<Isolation> = Some(Isolation::Serializable);
const RR: Option<Isolation> = Some(Isolation::RepeatableRead);
const RC: Option<Isolation> = Some(Isolation::ReadCommitted);
const RU: Option<Isolation> = Some(Isolation::ReadUncommitted);
const RO: Option<Access> = Some(Access::ReadOnly);
const RW: Option<Access> = Some(Access::ReadWrite);

type Row = (&'static str, Kind, Ns, Effects, bool);

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // ---- replica-safe reads ----
    ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", R, Ns::None, N, true),
    ("SELECT abalance FROM pgbench_accounts WHERE aid = 42;", R, Ns::None, N, true),
    ("select 1", R, Ns::None, N, true),
    ("  SELECT 1 ;  ;; ", R, Ns::None, N, true),
    ("TABLE t", R, Ns::None, N, true),
    ("TABLE ONLY public.t", R, Ns::None, N, true),
    ("VALUES (1), (2)", R, Ns::None, N, true),
    ("(SELECT 1)", R, Ns::None, N, true),
    ("((SELECT 1) UNION ALL (SELECT 2)) ORDER BY 1", R, Ns::None, N, true),
    ("WITH x AS (SELECT 1) SELECT * FROM x", R, Ns::None, N, true),
    ("WITH RECURSIVE t(n) AS (VALUES (1) UNION ALL SELECT n+1 FROM t WHERE n < 100) SELECT sum(n) FROM t", R, Ns::None, N, true),
    ("WITH x AS MATERIALIZED (SELECT 1), y AS NOT MATERIALIZED (SELECT 2) SELECT * FROM x, y", R, Ns::None, N, true),
    ("WITH RECURSIVE s(id) AS (SELECT 1 UNION SELECT id + 1 FROM s) SEARCH DEPTH FIRST BY id SET o CYCLE id SET c USING p SELECT * FROM s", R, Ns::None, N, true),
    ("SELECT a, rank() OVER (PARTITION BY b ORDER BY c ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM t", R, Ns::None, N, true),
    ("SELECT * FROM t WINDOW w AS (ORDER BY a)", R, Ns::None, N, true),
    ("SELECT * FROM ROWS FROM (generate_series(1,3), unnest(ARRAY[1,2])) AS r(a, b)", R, Ns::None, N, true),
    ("SELECT * FROM t WHERE a BETWEEN SYMMETRIC 10 AND 1", R, Ns::None, N, true),
    ("SELECT 'for update'", R, Ns::None, N, true),
    ("SELECT 1 /* ; */", R, Ns::None, N, true),
    ("SELECT $$;$$", R, Ns::None, N, true),
    ("SELECT $tag$ nextval('s'); DELETE FROM t $tag$", R, Ns::None, N, true),
    (r"SELECT E'\';drop'", R, Ns::None, N, true),
    (r"SELECT e'\\', 'x'", R, Ns::None, N, true),
    ("SELECT 1 /* /* */ FOR UPDATE */", R, Ns::None, N, true),
    ("SELECT 1 -- FOR UPDATE", R, Ns::None, N, true),
    ("SELECT -- comment ; DELETE\n 1", R, Ns::None, N, true),
    ("SELECT nextval FROM t", R, Ns::None, N, true),
    ("SELECT \"nextval\" FROM t", R, Ns::None, N, true),
    ("SELECT 'nextval(1)'", R, Ns::None, N, true),
    ("SELECT substring(x from 1 for 2) FROM t", R, Ns::None, N, true),
    ("SELECT overlay('abc' placing 'x' from 2 for 1)", R, Ns::None, N, true),
    ("SELECT * FROM t FOR READ ONLY", R, Ns::None, N, true),
    ("SELECT count(*) FILTER (WHERE x > 0) FROM t", R, Ns::None, N, true),
    ("SELECT x::text, y::int[] FROM t WHERE z ->> 'k' = 'v'", R, Ns::None, N, true),
    ("SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC", R, Ns::None, N, true),
    ("SELECT * FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (1)", R, Ns::None, N, true),
    ("SELECT * FROM a JOIN LATERAL (SELECT * FROM b WHERE b.id = a.id LIMIT 1) s ON true", R, Ns::None, N, true),
    ("SELECT 'it''s'", R, Ns::None, N, true),
    (r"SELECT U&'d\0061t\+000061'", R, Ns::None, TVC, true),
    ("SELECT B'1010', X'1F', N'nat'", R, Ns::None, N, true),
    ("SELECT lower(name), now(), pg_sleep(0) FROM t", R, Ns::None, TV, true),
    // Values of the client's transaction (P-5, S-7): read-safe, but never split.
    ("SELECT CURRENT_TIMESTAMP", R, Ns::None, TV, true),
    ("SELECT current_date, localtime, LOCALTIMESTAMP, Current_Time", R, Ns::None, TV, true),
    ("SELECT transaction_timestamp()", R, Ns::None, TV, true),
    ("SELECT pg_catalog.now() FROM t", R, Ns::None, TV, true),
    ("SELECT 'today'::date, x FROM t", R, Ns::None, TVC, true),
    ("SELECT * FROM t WHERE ts < 'Tomorrow 10:00'", R, Ns::None, TVC, true),
    ("SELECT ts - 'YESTERDAY'::timestamptz FROM t", R, Ns::None, TVC, true),
    ("SELECT $$ now $$::timestamptz", R, Ns::None, TVC, true),
    // P-5: text joined from literals may spell what none of them spells — a literal continued on
    // the next line (one string to the server), literals and `||` anywhere in the statement —
    // where the statement casts to something but text or names a date/time type; whatever the
    // literals hold (a cached shape stands for the verdict).
    ("SELECT 'no'\n'w'::timestamptz", R, Ns::None, TV, true),
    ("SELECT 'ab'\n'cd'::timestamptz", R, Ns::None, TV, true),
    ("SELECT 'no' -- c\n'w'::timestamptz", R, Ns::None, TV, true),
    ("SELECT ('no' || 'w')::timestamptz", R, Ns::None, TV, true),
    ("SELECT ('ab' || 'cd')::timestamptz", R, Ns::None, TV, true),
    ("SELECT ('no'::text || $$w$$)::date FROM t", R, Ns::None, TV, true),
    ("SELECT x FROM t WHERE ts < (v || 'w')::date", R, Ns::None, TV, true),
    ("SELECT ('n' OPERATOR(pg_catalog.||) 'ow')::timestamp", R, Ns::None, TV, true),
    ("SELECT CAST('no' || 'w' AS d)", R, Ns::None, TV, true),
    ("SELECT timestamptz('no' || 'w')", R, Ns::None, TV, true),
    ("SELECT ('no' || 'w')::my_domain", R, Ns::None, TV, true),
    // Joined text with no way to become a date/time (no implicit cast from text): no effect.
    ("SELECT 'n' OPERATOR(pg_catalog.||) 'ow'", R, Ns::None, N, true),
    ("SELECT inet_server_port(), 'lit:' || $1::text", R, Ns::None, N, true),
    ("SELECT 'lit:' || $1::pg_catalog.text", R, Ns::None, N, true),
    ("SELECT a || b FROM t", R, Ns::None, N, true),
    ("SELECT x FROM t WHERE a = 'x' AND b = 'y'", R, Ns::None, N, true),
    ("SELECT current_setting('TRANSACTION_ISOLATION')", R, Ns::None, TV, true),
    ("SELECT current_setting('transaction_deferrable', true)", R, Ns::None, TV, true),
    ("SELECT \"current_timestamp\", \"now\" FROM t", R, Ns::None, N, true),
    ("SELECT statement_timestamp(), clock_timestamp(), '2026-12-01'::date", R, Ns::None, N, true),
    ("SELECT x FROM t WHERE y IN (SELECT y FROM u)", R, Ns::None, N, true),
    ("SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)", R, Ns::None, N, true),
    ("SELECT (ARRAY[1,2])[1]", R, Ns::None, N, true),
    // (Joined literals may spell `now` only where cast: P-5, below.)
    ("SELECT 'a' || 'b' AS \"Update\"", R, Ns::None, N, true),
    ("SELECT * FROM t ORDER BY a NULLS LAST LIMIT 10 OFFSET 5", R, Ns::None, N, true),
    ("SELECT * FROM t FETCH FIRST 3 ROWS ONLY", R, Ns::None, N, true),
    ("SELECT c.fullname FROM customers c", R, Ns::None, N, true),
    (r"SELECT 'C:\path'", R, Ns::None, N, true),
    ("SELECT * FROM t WHERE ts > now() - interval '1 day' AND j @> '{\"a\":1}'", R, Ns::None, TV, true),
    ("SELECT CASE WHEN a THEN 1 ELSE 2 END FROM t", R, Ns::None, N, true),
    ("SELECT 1 /* route=primary */", R, Ns::None, N, true),
    ("SELECT 1 -- route=primary", R, Ns::None, N, true),
    ("/* route=replica */ SELECT 1", R, Ns::None, N, true),
    ("SELECT 1\0", U, Ns::Unparseable, N, false),
    ("EXPLAIN SELECT * FROM t", R, Ns::None, N, true),
    ("EXPLAIN (FORMAT JSON, COSTS off) SELECT 1", R, Ns::None, N, true),
    ("EXPLAIN VERBOSE SELECT 1", R, Ns::None, N, true),
    ("EXPLAIN (SELECT 1)", R, Ns::None, N, true),
    ("EXPLAIN ((SELECT 1))", R, Ns::None, N, true),
    ("EXPLAIN (COSTS OFF) (SELECT 1 FOR UPDATE)", RN, Ns::LockingClause, N, false),
    ("EXPLAIN WITH x AS (SELECT 1) SELECT * FROM x", R, Ns::None, N, true),
    ("EXPLAIN VALUES (1)", R, Ns::None, N, true),

    // ---- hints: only a leading block comment counts ----
    ("/* route=primary */ SELECT 1", R, Ns::None, N, false),
    ("/*ROUTE=PRIMARY*/SELECT 1", R, Ns::None, N, false),
    ("/* route = primary */ SELECT 1", R, Ns::None, N, false),
    ("-- c\n/* route=primary */ SELECT 1", R, Ns::None, N, false),

    // ---- locking clauses, any depth ----
    ("SELECT * FROM t FOR UPDATE", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t FOR NO KEY UPDATE", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t FOR SHARE", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t FOR KEY SHARE SKIP LOCKED", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t FOR UPDATE OF t NOWAIT", RN, Ns::LockingClause, N, false),
    ("select * from t for update", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t FOR/**/UPDATE", RN, Ns::LockingClause, N, false),
    ("SELECT 1 FOR\nUPDATE", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM (SELECT * FROM t FOR UPDATE) s", RN, Ns::LockingClause, N, false),
    ("WITH x AS (SELECT * FROM t FOR SHARE) SELECT * FROM x", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t WHERE id IN (SELECT id FROM u FOR KEY SHARE)", RN, Ns::LockingClause, N, false),
    ("(SELECT * FROM t) FOR UPDATE", RN, Ns::LockingClause, N, false),
    ("TABLE t FOR UPDATE", RN, Ns::LockingClause, N, false),
    ("SELECT * FROM t WHERE a=1for update", RN, Ns::LockingClause, N, false),

    // ---- data-modifying CTEs, any depth ----
    ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", RN, Ns::DataModifyingCte, N, false),
    ("WITH u AS (UPDATE t SET x = 1 RETURNING *) SELECT * FROM u", RN, Ns::DataModifyingCte, N, false),
    ("WITH i AS (INSERT INTO t VALUES (1) RETURNING id) SELECT id FROM i", RN, Ns::DataModifyingCte, N, false),
    ("WITH m AS (MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING *) SELECT * FROM m", RN, Ns::DataModifyingCte, N, false),
    ("WITH a AS (WITH b AS (DELETE FROM t RETURNING 1) SELECT * FROM b) SELECT * FROM a", RN, Ns::DataModifyingCte, N, false),
    ("SELECT * FROM (WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d) s", RN, Ns::DataModifyingCte, N, false),
    ("with x as (select 1), d as (delete from t) select * from x", RN, Ns::DataModifyingCte, N, false),
    // Conservative: a bare `update` anywhere in a read counts.
    ("SELECT update FROM t", RN, Ns::DataModifyingCte, N, false),

    // ---- SELECT INTO ----
    // A table in the catalogue (it may shadow a name statements resolved: an examiner's
    // probe, 2026-12-05), or a temporary one.
    ("SELECT * INTO new_t FROM t", RN, Ns::SelectInto, DDL, false),
    ("SELECT a INTO b FROM t", RN, Ns::SelectInto, DDL, false),
    ("SELECT * INTO TEMP tmp FROM t", RN, Ns::SelectInto, TMP, false),
    ("SELECT * INTO TEMPORARY TABLE tmp FROM t", RN, Ns::SelectInto, TMP, false),
    ("SELECT * INTO LOCAL TEMP tmp FROM t", RN, Ns::SelectInto, TMP, false),
    ("SELECT * INTO pg_temp.tmp FROM t", RN, Ns::SelectInto, TMP, false),
    ("SELECT * INTO TABLE \"pg_temp\".tmp FROM t", RN, Ns::SelectInto, TMP, false),
    ("SELECT * INTO UNLOGGED u FROM t", RN, Ns::SelectInto, DDL, false),
    ("WITH x AS (SELECT 1) SELECT * INTO TEMP y FROM x", RN, Ns::SelectInto, TMP, false),

    // ---- write-list functions (every default) ----
    // S-7: age(xid) counts from the answering server's next XID; one argument cannot be told
    // from age(timestamp), two are age(timestamp, timestamp) (pure). A column named age is no call.
    ("SELECT age(datfrozenxid) FROM pg_database", RN, Ns::ServerDependent, N, false),
    ("SELECT (datfrozenxid).age FROM pg_database", RN, Ns::ServerDependent, N, false),
    ("SELECT mxid_age(datminmxid) FROM pg_database", RN, Ns::ServerDependent, N, false),
    // The writer backend's temporary schema, kept after DISCARD TEMP (a reader has none).
    ("SELECT current_schemas(true)", RN, Ns::ServerDependent, N, false),
    ("SELECT age(now(), ts) FROM t", R, Ns::None, TV, true),
    ("SELECT u.age, age FROM users u WHERE age > 30", R, Ns::None, N, true),
    ("SELECT nextval('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_catalog.nextval('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT \"nextval\"('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT NEXTVAL ('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT nextval /* c */ ('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT nextval -- c\n('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT \"pg_catalog\".\"nextval\"('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT setval('s', 1)", RN, Ns::WriteFunction, N, false),
    ("SELECT currval('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT lastval()", RN, Ns::WriteFunction, N, false),
    ("SELECT set_config('a.b', 'c', false)", RN, Ns::SessionFunction, SCP, false),
    ("SELECT pg_catalog.set_config('search_path', 'x', true)", RN, Ns::SessionFunction, SCN, false),
    // S-5: a setting named by a literal (cast to text, as pg_get_expr prints it, too) is followed
    // as after a SET of it; any other first argument is code the engine cannot see into.
    ("SELECT set_config('TimeZone', 'UTC', false)", RN, Ns::SessionFunction, SCR, false),
    ("SELECT set_config('timezone'::text, 'UTC'::text, false)", RN, Ns::WriteFunction, SCR, false),
    ("SELECT set_config('statement_timeout', '5s', false)", RN, Ns::SessionFunction, SCN, false),
    ("SELECT set_config('app.tenant'::pg_catalog.text, $1, false)", RN, Ns::WriteFunction, SCP, false),
    ("SELECT \"set_config\"('work_mem', '8MB', false), set_config('app.x', 'y', true)", RN, Ns::SessionFunction, Effects(SCP.0 | SCR.0), false),
    ("SELECT set_config($1, 'UTC', false)", RN, Ns::SessionFunction, SC, false),
    ("SELECT set_config(name, 'x', false) FROM t", RN, Ns::WriteFunction, SC, false),
    ("SELECT set_config('app.' || 'x', 'y', false)", RN, Ns::WriteFunction, SC, false),
    ("SELECT set_config('TimeZone', 'UTC', false), set_config(lower('ROLE'), 'r', false)", RN, Ns::WriteFunction, SC, false),
    ("SELECT set_config('seed', '0.5', false)", RN, Ns::SessionFunction, SC, false),
    ("SELECT set_config('polar_enable_x', 'on', false)", RN, Ns::SessionFunction, SC, false),
    ("SELECT set_config('a b', 'c', false)", RN, Ns::SessionFunction, SC, false),
    ("SELECT set_config('\"A\".b', 'c', false)", RN, Ns::SessionFunction, SC, false),
    ("SELECT ('x').set_config", RN, Ns::WriteFunction, SC, false),
    ("SELECT setseed(0.5)", RN, Ns::SessionFunction, Effects::SEEDS_RANDOM, false),
    ("SELECT txid_current()", RN, Ns::WriteFunction, N, false),
    ("SELECT txid_current_if_assigned()", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_current_xact_id()", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_current_xact_id_if_assigned()", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_notify('c', 'x')", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_logical_emit_message(true, 'p', 'x')", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_advisory_lock(1)", RN, Ns::WriteFunction, AL, false),
    ("SELECT pg_advisory_lock_shared(1)", RN, Ns::WriteFunction, AL, false),
    ("SELECT pg_try_advisory_lock(1, 2)", RN, Ns::WriteFunction, AL, false),
    ("SELECT pg_try_advisory_lock_shared(1)", RN, Ns::WriteFunction, AL, false),
    ("SELECT pg_advisory_xact_lock(1)", RN, Ns::WriteFunction, AX, false),
    ("SELECT pg_advisory_xact_lock_shared(1)", RN, Ns::WriteFunction, AX, false),
    ("SELECT pg_try_advisory_xact_lock(1)", RN, Ns::WriteFunction, AX, false),
    ("SELECT pg_try_advisory_xact_lock_shared(1)", RN, Ns::WriteFunction, AX, false),
    ("SELECT pg_advisory_unlock_all()", RN, Ns::SessionFunction, AU, false),
    ("SELECT pg_catalog.pg_advisory_unlock_all()", RN, Ns::SessionFunction, AU, false),
    ("SELECT myschema.pg_advisory_unlock_all()", RN, Ns::WriteFunction, N, false),
    ("SELECT pg_advisory_unlock(1)", RN, Ns::SessionFunction, N, false),
    ("SELECT pg_advisory_unlock_shared(1)", RN, Ns::SessionFunction, N, false),
    ("SELECT pg_advisory_lock(1), pg_advisory_xact_lock(2), set_config('a.b','c',true)", RN, Ns::WriteFunction, Effects(AL.0 | AX.0 | SCP.0), false),
    ("SELECT \"PG_ADVISORY_LOCK\"(1)", RN, Ns::WriteFunction, Effects(AL.0 | CODE.0), false),
    ("SELECT lo_create(0)", RN, Ns::WriteFunction, N, false),
    ("SELECT lo_unlink(1)", RN, Ns::WriteFunction, N, false),
    ("SELECT lo_import('/x')", RN, Ns::WriteFunction, N, false),
    ("SELECT dblink('c', 'select 1')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT dblink_exec('c', 'x')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT * FROM t WHERE id = (SELECT nextval('s'))", RN, Ns::WriteFunction, N, false),
    ("WITH x AS (SELECT nextval('s')) SELECT * FROM x", RN, Ns::WriteFunction, N, false),
    ("VALUES (nextval('s'))", RN, Ns::WriteFunction, N, false),
    ("SELECT * FROM nextval('s')", RN, Ns::WriteFunction, N, false),
    ("SELECT U&\"nextval\"('s')", RN, Ns::WriteFunction, N, false),
    // Built-ins that run SQL text: never safe, and the effects named in the text count.
    ("SELECT query_to_xml('select 1', true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT query_to_xml('select pg_advisory_lock(1)', true, false, '')", RN, Ns::WriteFunction, Effects(AL.0 | CODE.0), false),
    ("SELECT pg_catalog.query_to_xml_and_xmlschema($q$select pg_try_advisory_xact_lock(1)$q$, true, false, '')", RN, Ns::WriteFunction, Effects(AX.0 | CODE.0), false),
    ("SELECT * FROM ts_stat('select to_tsvector(set_config(''a.b'',''c'',false))')", RN, Ns::WriteFunction, Effects(SC.0 | CODE.0), false),
    // ... and those that read a relation named by a string: the relation (a server-dependent
    // view, a view that runs code) is invisible to the classifier (red5).
    ("SELECT table_to_xml('pg_catalog.pg_locks', true, false, '')", RN, Ns::WriteFunction, CODE, false),
    // A type's input code for a type given by OID: a domain's CHECK (red14-d).
    ("SELECT array_in('{42}', 'd'::regtype, -1)", RN, Ns::WriteFunction, CODE, false),
    ("SELECT pg_catalog.record_in('(1)', 16416, -1)", RN, Ns::WriteFunction, CODE, false),
    ("SELECT domain_in('5', to_regtype('s.d'), -1)", RN, Ns::WriteFunction, CODE, false),
    ("SELECT range_in('[1,2)', 'r'::regtype, -1), multirange_in('{}', 'm'::regtype, -1)", RN, Ns::WriteFunction, CODE, false),
    ("SELECT enum_in('a', 'e'::regtype)", R, Ns::None, N, true),
    ("SELECT pg_catalog.table_to_xml_and_xmlschema('v', true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT schema_to_xml('pg_catalog', true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT \"schema_to_xml_and_xmlschema\"('public', true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT database_to_xml(true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT database_to_xml_and_xmlschema(true, false, '')", RN, Ns::WriteFunction, CODE, false),
    ("SELECT table_to_xmlschema('t', true, false, '')", R, Ns::None, N, true),
    // Attribute notation calls one-argument functions (verified on PostgreSQL 15).
    ("SELECT ('s'::regclass).nextval", RN, Ns::WriteFunction, N, false),
    ("SELECT (7::bigint).pg_advisory_lock", RN, Ns::WriteFunction, AL, false),
    ("SELECT (7::bigint).\"pg_try_advisory_xact_lock\"", RN, Ns::WriteFunction, AX, false),
    // ... so a column that merely shares a listed name is not safe when qualified.
    ("SELECT t.nextval FROM t", RN, Ns::WriteFunction, N, false),
    // A `U&` name is normalised (`dat`): a column, not a listed function.
    ("SELECT (x).U&\"d\\0061t\" FROM t", R, Ns::None, N, true),

    // ---- EXPLAIN ----
    ("EXPLAIN ANALYZE SELECT 1", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN ANALYSE SELECT 1", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN (ANALYZE, BUFFERS) SELECT 1", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN (analyze true) SELECT 1", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN ANALYZE VERBOSE SELECT 1", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN ANALYZE DELETE FROM t", RN, Ns::ExplainAnalyze, N, false),
    ("EXPLAIN ANALYZE SELECT pg_advisory_lock(1)", RN, Ns::ExplainAnalyze, AL, false),
    ("EXPLAIN ANALYZE SELECT * INTO TEMP x FROM t", RN, Ns::ExplainAnalyze, TMP, false),
    ("EXPLAIN ANALYZE SELECT * INTO x FROM t", RN, Ns::ExplainAnalyze, DDL, false),
    ("IMPORT FOREIGN SCHEMA s FROM SERVER f INTO public", W, Ns::NotARead, DDL, false),
    ("EXPLAIN ANALYZE CREATE TEMP TABLE x AS SELECT 1", RN, Ns::ExplainAnalyze, TMP, false),
    ("EXPLAIN SELECT * INTO TEMP x FROM t", RN, Ns::SelectInto, N, false),
    ("EXPLAIN CREATE TEMP TABLE x AS SELECT 1", W, Ns::NotARead, N, false),
    ("EXPLAIN DELETE FROM t", W, Ns::NotARead, N, false),
    ("EXPLAIN UPDATE t SET x = 1", W, Ns::NotARead, N, false),
    ("EXPLAIN INSERT INTO t VALUES (1)", W, Ns::NotARead, N, false),
    ("EXPLAIN CREATE TABLE t2 AS SELECT 1", W, Ns::NotARead, N, false),
    ("EXPLAIN WITH x AS (SELECT 1) DELETE FROM t", W, Ns::NotARead, N, false),
    ("EXPLAIN SELECT * FROM t FOR UPDATE", RN, Ns::LockingClause, N, false),
    ("EXPLAIN SELECT nextval('s')", RN, Ns::WriteFunction, N, false),
    ("EXPLAIN SELECT pg_advisory_unlock_all()", RN, Ns::WriteFunction, N, false),
    ("EXPLAIN WITH d AS (DELETE FROM t RETURNING 1) SELECT * FROM d", RN, Ns::DataModifyingCte, N, false),
    ("EXPLAIN", U, Ns::Unparseable, N, false),

    // ---- writes ----
    ("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1", W, Ns::NotARead, N, false),
    ("INSERT INTO t VALUES (1)", W, Ns::NotARead, N, false),
    ("INSERT INTO t SELECT * FROM u", W, Ns::NotARead, N, false),
    ("DELETE FROM t", W, Ns::NotARead, N, false),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = 1", W, Ns::NotARead, N, false),
    ("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", W, Ns::NotARead, N, false),
    ("WITH x AS (SELECT 1) UPDATE t SET a = 1", W, Ns::NotARead, N, false),
    ("TRUNCATE t", W, Ns::NotARead, N, false),
    ("CREATE TABLE t (a int)", W, Ns::NotARead, DDL, false),
    ("CREATE TABLE temp (a int)", W, Ns::NotARead, DDL, false),
    ("CREATE UNLOGGED TABLE u (a int)", W, Ns::NotARead, DDL, false),
    ("CREATE TEMP TABLE tt (a int)", W, Ns::NotARead, TMP, false),
    ("CREATE TEMPORARY TABLE tt AS SELECT 1", W, Ns::NotARead, TMP, false),
    ("CREATE GLOBAL TEMPORARY TABLE tt (a int)", W, Ns::NotARead, TMP, false),
    ("create local temp table tt (a int)", W, Ns::NotARead, TMP, false),
    ("CREATE TEMP VIEW v AS SELECT 1", W, Ns::NotARead, TMP, false),
    ("CREATE OR REPLACE TEMP VIEW v AS SELECT 1", W, Ns::NotARead, TMP, false),
    ("CREATE TEMP SEQUENCE s", W, Ns::NotARead, TMP, false),
    ("CREATE TABLE pg_temp.t (a int)", W, Ns::NotARead, TMP, false),
    ("CREATE TABLE IF NOT EXISTS pg_temp.t (a int)", W, Ns::NotARead, TMP, false),
    ("CREATE FUNCTION pg_temp.f() RETURNS int AS 'select 1' LANGUAGE sql", W, Ns::NotARead, TMP, false),
    ("CREATE MATERIALIZED VIEW mv AS SELECT 1", W, Ns::NotARead, DDL, false),
    ("CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END", W, Ns::NotARead, DDL, false),
    ("ALTER TABLE t ADD COLUMN b int", W, Ns::NotARead, DDL, false),
    ("DROP TABLE t", W, Ns::NotARead, DDL, false),
    ("GRANT SELECT ON t TO u", W, Ns::NotARead, N, false),
    ("COMMENT ON TABLE t IS 'x'", W, Ns::NotARead, N, false),
    ("VACUUM t", W, Ns::NotARead, N, false),
    ("ANALYZE t", W, Ns::NotARead, N, false),
    ("CLUSTER t", W, Ns::NotARead, N, false),
    ("REINDEX TABLE t", W, Ns::NotARead, N, false),
    ("REFRESH MATERIALIZED VIEW mv", W, Ns::NotARead, N, false),
    // DO and CALL run code the engine cannot see into (S-5: a capture follows them).
    ("CALL p()", W, Ns::NotARead, CODE, false),
    // Every DO block may run DDL (red10-b): its code is not the engine's to read. One whose
    // words say no DDL keeps E-2's names (a review, 2026-12-07).
    ("DO $$BEGIN PERFORM 1; END$$", W, Ns::NotARead, Effects(CODE.0 | DDL.0 | KN.0), false),
    ("DO $$BEGIN PERFORM pg_advisory_lock(1); PERFORM set_config('a.b', 'c', false); END$$", W, Ns::NotARead, Effects(AL.0 | SC.0 | CODE.0 | DDL.0 | KN.0), false),
    ("DO LANGUAGE plpgsql 'BEGIN PERFORM PG_TRY_ADVISORY_LOCK_SHARED(1); PERFORM pg_advisory_unlock_all(); END'", W, Ns::NotARead, Effects(AL.0 | CODE.0 | DDL.0 | KN.0), false),
    ("CHECKPOINT", W, Ns::NotARead, N, false),
    ("NOTIFY ch, 'x'", W, Ns::NotARead, N, false),
    // S-1a: the session never learns when its prepared transaction commits.
    ("PREPARE TRANSACTION 'g'", W, Ns::NotARead, Effects::PREPARES_TXN, false),
    // It may hold DDL: the catalogues change when it commits.
    ("COMMIT PREPARED 'g'", W, Ns::NotARead, Effects::CHANGES_CATALOG, false),
    ("ROLLBACK PREPARED 'g'", W, Ns::NotARead, N, false),
    ("SET TRANSACTION SNAPSHOT '00000003-0000001B-1'", W, Ns::NotARead, N, false),
    ("SET CONSTRAINTS ALL DEFERRED", W, Ns::NotARead, N, false),
    ("UPDATE t SET x = pg_advisory_lock(1)", W, Ns::NotARead, AL, false),
    ("INSERT INTO t VALUES (set_config('a.b','c',false))", W, Ns::NotARead, SCP, false),
    ("UPDATE t SET x = 1 WHERE pg_advisory_unlock_all() IS NOT NULL", W, Ns::NotARead, N, false),
    ("frobnicate the thing", W, Ns::NotARead, N, false),

    // ---- not understood ----
    ("'abc'", U, Ns::Unparseable, N, false),
    ("42", U, Ns::Unparseable, N, false),
    ("SELECT 'abc", U, Ns::Unparseable, N, false),
    ("SELECT 1 /* abc", U, Ns::Unparseable, N, false),
    ("SELECT 1 /* /* */", U, Ns::Unparseable, N, false),
    ("SELECT $x$abc", U, Ns::Unparseable, N, false),
    ("SELECT \"abc", U, Ns::Unparseable, N, false),
    (r"SELECT E'abc\'", U, Ns::Unparseable, N, false),
    ("SELECT 1 \\g", U, Ns::Unparseable, N, false),
    ("SELECT (1; 2)", U, Ns::Unparseable, N, false),
    ("(DELETE FROM t)", U, Ns::Unparseable, N, false),
    // Ambiguous under standard_conforming_strings = off: the string would not end.
    (r"SELECT 'a\'", RN, Ns::Unparseable, N, false),

    // ---- transaction control ----
    ("BEGIN", Kind::Begin(NO_OPTS), Ns::NotARead, N, false),
    ("BEGIN WORK", Kind::Begin(NO_OPTS), Ns::NotARead, N, false),
    ("begin transaction", Kind::Begin(NO_OPTS), Ns::NotARead, N, false),
    ("BEGIN ISOLATION LEVEL SERIALIZABLE", Kind::Begin(txn(SER, None, None)), Ns::NotARead, N, false),
    ("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY, DEFERRABLE", Kind::Begin(txn(RR, RO, Some(true))), Ns::NotARead, N, false),
    ("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE NOT DEFERRABLE", Kind::Begin(txn(RC, RW, Some(false))), Ns::NotARead, N, false),
    ("begin isolation level read uncommitted", Kind::Begin(txn(RU, None, None)), Ns::NotARead, N, false),
    ("BEGIN READ ONLY", Kind::Begin(txn(None, RO, None)), Ns::NotARead, N, false),
    ("START TRANSACTION", Kind::Begin(NO_OPTS), Ns::NotARead, N, false),
    ("START TRANSACTION READ ONLY", Kind::Begin(txn(None, RO, None)), Ns::NotARead, N, false),
    ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE", Kind::Begin(txn(SER, RW, None)), Ns::NotARead, N, false),
    ("BEGIN ISOLATION LEVEL BOGUS", U, Ns::Unparseable, N, false),
    ("BEGIN READ ONLY,", U, Ns::Unparseable, N, false),
    ("START", U, Ns::Unparseable, N, false),
    ("COMMIT", Kind::Commit { chain: false }, Ns::NotARead, N, false),
    ("COMMIT WORK", Kind::Commit { chain: false }, Ns::NotARead, N, false),
    ("END", Kind::Commit { chain: false }, Ns::NotARead, N, false),
    ("END TRANSACTION", Kind::Commit { chain: false }, Ns::NotARead, N, false),
    ("COMMIT AND CHAIN", Kind::Commit { chain: true }, Ns::NotARead, N, false),
    ("COMMIT AND NO CHAIN", Kind::Commit { chain: false }, Ns::NotARead, N, false),
    ("END AND CHAIN", Kind::Commit { chain: true }, Ns::NotARead, N, false),
    ("ROLLBACK", Kind::Rollback { chain: false }, Ns::NotARead, N, false),
    ("ABORT", Kind::Rollback { chain: false }, Ns::NotARead, N, false),
    ("ROLLBACK WORK", Kind::Rollback { chain: false }, Ns::NotARead, N, false),
    ("ROLLBACK AND CHAIN", Kind::Rollback { chain: true }, Ns::NotARead, N, false),
    ("ABORT AND NO CHAIN", Kind::Rollback { chain: false }, Ns::NotARead, N, false),
    ("COMMIT junk", U, Ns::Unparseable, N, false),
    ("ABORT TO sp1", U, Ns::Unparseable, N, false),
    ("SAVEPOINT sp1", Kind::Savepoint, Ns::NotARead, N, false),
    ("SAVEPOINT \"Sp 1\"", Kind::Savepoint, Ns::NotARead, N, false),
    ("RELEASE sp1", Kind::ReleaseSavepoint, Ns::NotARead, N, false),
    ("RELEASE SAVEPOINT sp1", Kind::ReleaseSavepoint, Ns::NotARead, N, false),
    ("ROLLBACK TO sp1", Kind::RollbackToSavepoint, Ns::NotARead, N, false),
    ("ROLLBACK TO SAVEPOINT sp1", Kind::RollbackToSavepoint, Ns::NotARead, N, false),
    ("ROLLBACK TRANSACTION TO SAVEPOINT sp1", Kind::RollbackToSavepoint, Ns::NotARead, N, false),
    ("ROLLBACK WORK TO sp1", Kind::RollbackToSavepoint, Ns::NotARead, N, false),
    ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", Kind::SetTransaction(txn(SER, None, None)), Ns::NotARead, N, false),
    ("SET TRANSACTION READ ONLY, DEFERRABLE", Kind::SetTransaction(txn(None, RO, Some(true))), Ns::NotARead, N, false),
    ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", Kind::SetTransaction(txn(RC, None, None)), Ns::NotARead, N, false),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ", Kind::SetSessionCharacteristics(txn(RR, None, None)), Ns::NotARead, N, false),
    ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", Kind::SetSessionCharacteristics(txn(None, RO, None)), Ns::NotARead, N, false),
    ("SET TRANSACTION", U, Ns::Unparseable, N, false),

    // ---- SET / RESET (names and values are checked in s3_set_variants_name_and_value_text) ----
    ("SET search_path = public, \"$user\"", set(Var::SearchPath, false), Ns::NotARead, N, false),
    ("SET LOCAL statement_timeout = '5s'", set(Var::StatementTimeout, true), Ns::NotARead, N, false),
    ("SET TIME ZONE 'UTC'", set(Var::TimeZone, false), Ns::NotARead, N, false),
    ("SET ROLE admin", set(Var::Role, false), Ns::NotARead, N, false),
    ("SET SESSION AUTHORIZATION 'bob'", set(Var::SessionAuthorization, false), Ns::NotARead, N, false),
    ("SET NAMES 'UTF8'", set(Var::ClientEncoding, false), Ns::NotARead, N, false),
    ("SET SCHEMA 'app'", set(Var::SearchPath, false), Ns::NotARead, N, false),
    ("SET myapp.user_id = 42", set(Var::Placeholder, false), Ns::NotARead, N, false),
    ("SET polar_consistency_mode = 'strict'", set(Var::Polar, false), Ns::NotARead, N, false),
    // `seed` is setseed() (S-4 SEEDED), in any case, quoted or not; `seedx` is any other name.
    ("SET seed = 0.5", set(Var::Other, false), Ns::NotARead, Effects::SEEDS_RANDOM, false),
    ("SET \"SEED\" TO -0.5", set(Var::Other, false), Ns::NotARead, Effects::SEEDS_RANDOM, false),
    ("SET LOCAL Seed TO 0", set(Var::Other, true), Ns::NotARead, Effects::SEEDS_RANDOM, false),
    ("SET seedx = 1", set(Var::Other, false), Ns::NotARead, N, false),
    ("SET x", U, Ns::Unparseable, N, false),
    ("SET x =", U, Ns::Unparseable, N, false),
    ("SET search_path = $$s2$$, public", set(Var::SearchPath, false), Ns::NotARead, N, false),
    ("SET myapp.tenant = $t$a'b$t$", set(Var::Placeholder, false), Ns::NotARead, N, false),
    ("SET TIME ZONE $$Asia/Tokyo$$", set(Var::TimeZone, false), Ns::NotARead, N, false),
    ("SET x = (1)", U, Ns::Unparseable, N, false),
    ("SET x = 1 2", U, Ns::Unparseable, N, false),
    ("RESET search_path", reset(Var::SearchPath), Ns::NotARead, N, false),
    ("RESET ALL", Kind::ResetAll, Ns::NotARead, N, false),
    ("RESET TIME ZONE", reset(Var::TimeZone), Ns::NotARead, N, false),
    ("RESET SESSION AUTHORIZATION", reset(Var::SessionAuthorization), Ns::NotARead, N, false),
    ("RESET ROLE", reset(Var::Role), Ns::NotARead, N, false),
    ("RESET myapp.x", reset(Var::Placeholder), Ns::NotARead, N, false),
    ("RESET seed", reset(Var::Other), Ns::NotARead, Effects::SEEDS_RANDOM, false),
    ("RESET TRANSACTION ISOLATION LEVEL", reset(Var::TransactionIsolation), Ns::NotARead, N, false),
    ("RESET", U, Ns::Unparseable, N, false),

    // ---- SHOW, DISCARD, LISTEN, cursors, prepared statements, LOCK, COPY ----
    ("SHOW search_path", Kind::Show, Ns::NotARead, N, false),
    ("SHOW ALL", Kind::Show, Ns::NotARead, N, false),
    ("SHOW TIME ZONE", Kind::Show, Ns::NotARead, N, false),
    ("DISCARD ALL", Kind::Discard(DiscardWhat::All), Ns::NotARead, N, false),
    ("DISCARD TEMP", Kind::Discard(DiscardWhat::Temp), Ns::NotARead, N, false),
    ("discard temporary", Kind::Discard(DiscardWhat::Temp), Ns::NotARead, N, false),
    ("DISCARD PLANS", Kind::Discard(DiscardWhat::Plans), Ns::NotARead, N, false),
    ("DISCARD SEQUENCES", Kind::Discard(DiscardWhat::Sequences), Ns::NotARead, N, false),
    ("DISCARD", U, Ns::Unparseable, N, false),
    ("DISCARD everything", U, Ns::Unparseable, N, false),
    ("LISTEN ch", Kind::Listen { channel: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("LISTEN \"Ch\"", Kind::Listen { channel: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("UNLISTEN ch", Kind::Unlisten { all: false, channel: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("UNLISTEN *", Kind::Unlisten { all: true, channel: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("DECLARE c CURSOR FOR SELECT 1", Kind::DeclareCursor { with_hold: false, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("DECLARE c BINARY INSENSITIVE NO SCROLL CURSOR WITH HOLD FOR SELECT * FROM t", Kind::DeclareCursor { with_hold: true, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("DECLARE c SCROLL CURSOR WITHOUT HOLD FOR SELECT 1", Kind::DeclareCursor { with_hold: false, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("DECLARE c CURSOR WITH HOLD FOR SELECT pg_advisory_lock(1)", Kind::DeclareCursor { with_hold: true, cursor: NameKey::UNREADABLE }, Ns::NotARead, AL, false),
    ("DECLARE c CURSOR FOR SELECT pg_advisory_unlock_all()", Kind::DeclareCursor { with_hold: false, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("FETCH 10 FROM c", Kind::Fetch, Ns::NotARead, N, false),
    ("FETCH ALL IN c", Kind::Fetch, Ns::NotARead, N, false),
    ("MOVE NEXT IN c", Kind::Fetch, Ns::NotARead, N, false),
    ("CLOSE c", Kind::Close { all: false, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("CLOSE ALL", Kind::Close { all: true, cursor: NameKey::UNREADABLE }, Ns::NotARead, N, false),
    ("PREPARE p AS SELECT 1", Kind::Prepare, Ns::NotARead, N, false),
    ("PREPARE p (int, text) AS SELECT $1, $2", Kind::Prepare, Ns::NotARead, N, false),
    ("PREPARE p AS UPDATE t SET x = 1", Kind::Prepare, Ns::NotARead, N, false),
    ("EXECUTE p", Kind::Execute, Ns::NotARead, CODE, false),
    ("EXECUTE p (1, 'a')", Kind::Execute, Ns::NotARead, CODE, false),
    ("DEALLOCATE p", Kind::Deallocate { all: false }, Ns::NotARead, N, false),
    ("DEALLOCATE PREPARE p", Kind::Deallocate { all: false }, Ns::NotARead, N, false),
    ("DEALLOCATE ALL", Kind::Deallocate { all: true }, Ns::NotARead, N, false),
    ("DEALLOCATE PREPARE ALL", Kind::Deallocate { all: true }, Ns::NotARead, N, false),
    ("LOCK t", Kind::Lock, Ns::NotARead, N, false),
    ("LOCK TABLE t IN ACCESS SHARE MODE", Kind::Lock, Ns::NotARead, N, false),
    ("COPY t TO STDOUT", Kind::Copy, Ns::NotARead, N, false),
    ("COPY t FROM STDIN", Kind::Copy, Ns::NotARead, N, false),
    ("COPY (SELECT 1) TO STDOUT", Kind::Copy, Ns::NotARead, N, false),

    // ---- empty ----
    ("", Kind::Empty, Ns::NotARead, N, false),
    ("   \n\t", Kind::Empty, Ns::NotARead, N, false),
    ("-- only a comment", Kind::Empty, Ns::NotARead, N, false),
    ("/* c */ ;; ;", Kind::Empty, Ns::NotARead, N, false),
    ("/* route=primary */", Kind::Empty, Ns::NotARead, N, false),
];

/// Spans are checked elsewhere; compare SET/RESET by variable and scope only.
/// The table's rows compare kinds without their spans and name keys (`s4_names_…` checks those).
fn norm(k: Kind) -> Kind {
    const X: NameKey = NameKey::UNREADABLE;
    match k {
        Kind::Set { var, local, .. } => set(var, local),
        Kind::Reset { var, .. } => reset(var),
        Kind::Listen { .. } => Kind::Listen { channel: X },
        Kind::Unlisten { all, .. } => Kind::Unlisten { all, channel: X },
        Kind::DeclareCursor { with_hold, .. } => Kind::DeclareCursor {
            with_hold,
            cursor: X,
        },
        Kind::Close { all, .. } => Kind::Close { all, cursor: X },
        k => k,
    }
}

/// S-4: the name a LISTEN, UNLISTEN, DECLARE or CLOSE names, as the server reads it: unquoted
/// folded to lower case, quoted kept, `U&"…"` decoded; `*` and `ALL` name none; a name the
/// server refuses is unreadable (and the statement fails there).
#[test]
fn s4_names_of_cursors_and_channels_are_the_servers() {
    fn key(sql: &str) -> NameKey {
        match one(sql).first().kind {
            Kind::Listen { channel } | Kind::Unlisten { channel, .. } => channel,
            Kind::DeclareCursor { cursor, .. } | Kind::Close { cursor, .. } => cursor,
            k => panic!("{sql:?}: {k:?}"),
        }
    }
    let of = |n: &str| NameKey::of(n.as_bytes());
    for (sql, name) in [
        ("LISTEN ch", "ch"),
        ("listen CH", "ch"),
        ("LISTEN \"ch\"", "ch"),
        ("LISTEN \"Ch\"", "Ch"),
        ("LISTEN /* c */ \"a\"\"b\"", "a\"b"),
        ("UNLISTEN Ch", "ch"),
        ("UNLISTEN U&\"C\\0068\"", "Ch"),
        ("DECLARE \"h1\" CURSOR WITH HOLD FOR SELECT 1", "h1"),
        ("DECLARE H1 NO SCROLL CURSOR WITH HOLD FOR SELECT 1", "h1"),
        ("DECLARE \"H1\" CURSOR FOR SELECT 1", "H1"),
        ("CLOSE \"h1\"", "h1"),
        ("close H1", "h1"),
        ("CLOSE \"all\"", "all"),
        ("CLOSE \"H1\"", "H1"),
    ] {
        assert_eq!(key(sql), of(name), "{sql:?}");
        assert!(key(sql).is_readable(), "{sql:?}");
    }
    assert_ne!(of("Ch"), of("ch"));
    let long = "x".repeat(70);
    assert_eq!(
        key(&format!("LISTEN {long}")),
        of(&long[..63]),
        "cut to 63 bytes"
    );
    assert_eq!(key("UNLISTEN *"), NameKey::UNREADABLE);
    assert_eq!(key("CLOSE ALL"), NameKey::UNREADABLE);
    assert_eq!(key("CLOSE all"), NameKey::UNREADABLE);
    assert_eq!(key("LISTEN U&\"\\zzzz\""), NameKey::UNREADABLE);
}

fn one(sql: &str) -> Classification {
    let c = classify(sql, &WriteFunctions::defaults());
    assert_eq!(c.count(), 1, "{sql:?} → {c:?}");
    c
}

#[test]
fn s7_table_single_statements() {
    assert!(TABLE.len() >= 150, "only {} rows", TABLE.len());
    let cached = Classifier::new(WriteFunctions::defaults(), 1024);
    let mut failures = Vec::new();
    for &(sql, kind, why, fx, safe) in TABLE {
        let c = classify(sql, &WriteFunctions::defaults());
        let s = c.first();
        let got = (
            c.count(),
            norm(s.kind),
            s.not_safe,
            s.effects,
            c.is_replica_safe(),
        );
        if got != (1, kind, why, fx, safe) {
            failures.push(format!(
                "{sql:?}\n   want {:?}\n   got  {got:?}",
                (1, kind, why, fx, safe)
            ));
        }
        // Effects and `may_write` agree with the kind; the cache agrees with the function.
        assert_eq!(c.effects(), s.effects);
        assert_eq!(cached.classify(sql), c, "{sql:?}");
        assert_eq!(cached.classify(sql), c, "{sql:?} (hit)");
        if s.is_replica_safe() {
            assert!(!c.may_write(), "{sql:?}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn s7_statement_spans_exclude_separators_and_surrounding_comments() {
    for (sql, text) in [
        ("  SELECT 1 ; ", "SELECT 1"),
        ("/* c */ SELECT 1 -- x", "SELECT 1"),
        ("SELECT /* in */ 1;", "SELECT /* in */ 1"),
        ("\n\nUPDATE t SET a = 'é';\n", "UPDATE t SET a = 'é'"),
    ] {
        let c = one(sql);
        assert_eq!(c.first().span.of(sql), text, "{sql:?}");
    }
    assert_eq!(one("  ").first().span.of("  "), "  ");
}

#[test]
fn s7_multi_statement_strings() {
    use Kind::*;
    let cases: &[(&str, &[Kind], &[&str])] = &[
        ("SELECT 1; SELECT 2", &[Read, Read], &["SELECT 1", "SELECT 2"]),
        ("BEGIN; SELECT 1; COMMIT;", &[Begin(NO_OPTS), Read, Commit { chain: false }], &["BEGIN", "SELECT 1", "COMMIT"]),
        ("SELECT 1; UPDATE t SET x=1;", &[Read, Write], &["SELECT 1", "UPDATE t SET x=1"]),
        ("SELECT ';'; SELECT 2", &[Read, Read], &["SELECT ';'", "SELECT 2"]),
        ("SELECT 1 /* ; */; SELECT 2 -- ;\n; SELECT 3", &[Read, Read, Read], &["SELECT 1", "SELECT 2", "SELECT 3"]),
        ("SELECT $a$;$a$;;; SELECT \";\"", &[Read, Read], &["SELECT $a$;$a$", "SELECT \";\""]),
        (r"SELECT E'\';'; SELECT 2", &[Read, Read], &[r"SELECT E'\';'", "SELECT 2"]),
        (
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 1 END; END; SELECT 2",
            &[Write, Read],
            &["CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 1 END; END", "SELECT 2"],
        ),
        (
            "CREATE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC INSERT INTO t VALUES (1); END; COMMIT",
            &[Write, Commit { chain: false }],
            &["CREATE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC INSERT INTO t VALUES (1); END", "COMMIT"],
        ),
        (
            "create or replace function f() returns int language sql begin atomic; select 1; end",
            &[Write],
            &["create or replace function f() returns int language sql begin atomic; select 1; end"],
        ),
        // An unterminated body swallows the rest: it is one (failing) write, never a read.
        (
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2",
            &[Write],
            &["CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2"],
        ),
        // Outside CREATE, BEGIN is transaction control, and `atomic` means nothing.
        ("BEGIN; SELECT atomic FROM t; END", &[Begin(NO_OPTS), Read, Commit { chain: false }], &["BEGIN", "SELECT atomic FROM t", "END"]),
        (
            "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); INSERT INTO b VALUES (2))",
            &[Unknown],
            &["CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); INSERT INTO b VALUES (2))"],
        ),
        ("SELECT 'a; DELETE FROM t", &[Unknown], &["SELECT 'a; DELETE FROM t"]),
        ("SELECT 1; SELECT 'unterminated", &[Read, Unknown], &["SELECT 1", "SELECT 'unterminated"]),
        ("SET x.y = 1; SELECT 1", &[set(Var::Placeholder, false), Read], &["SET x.y = 1", "SELECT 1"]),
        ("SELECT pg_advisory_lock(1); SELECT 1", &[ReadNotSafe, Read], &["SELECT pg_advisory_lock(1)", "SELECT 1"]),
    ];
    for &(sql, kinds, texts) in cases {
        let c = classify(sql, &WriteFunctions::defaults());
        let got: Vec<Kind> = c.statements().iter().map(|s| norm(s.kind)).collect();
        assert_eq!(got, kinds, "{sql:?}");
        let got_texts: Vec<&str> = c.statements().iter().map(|s| s.span.of(sql)).collect();
        assert_eq!(got_texts, texts, "{sql:?}");
        assert!(!c.is_replica_safe() || kinds.len() == 1, "{sql:?}");
        if kinds.len() > 1 {
            assert!(!c.is_replica_safe(), "{sql:?}");
        }
    }
    let c = classify(
        "SELECT pg_advisory_lock(1); SELECT 1",
        &WriteFunctions::defaults(),
    );
    assert!(c.effects().contains(AL));
}

#[test]
fn s3_set_variants_name_and_value_text() {
    let cases: &[(&str, Var, bool, &str, &str)] = &[
        (
            "SET search_path = public, \"$user\"",
            Var::SearchPath,
            false,
            "search_path",
            "public, \"$user\"",
        ),
        (
            "SET search_path TO DEFAULT",
            Var::SearchPath,
            false,
            "search_path",
            "DEFAULT",
        ),
        (
            "SET SESSION search_path TO 'a'",
            Var::SearchPath,
            false,
            "search_path",
            "'a'",
        ),
        (
            "set local search_path = x",
            Var::SearchPath,
            true,
            "search_path",
            "x",
        ),
        (
            "SET \"Search_Path\" = x",
            Var::SearchPath,
            false,
            "\"Search_Path\"",
            "x",
        ),
        (
            "SET LOCAL statement_timeout = '5s'",
            Var::StatementTimeout,
            true,
            "statement_timeout",
            "'5s'",
        ),
        (
            "SET LOCAL statement_timeout = 5000",
            Var::StatementTimeout,
            true,
            "statement_timeout",
            "5000",
        ),
        (
            "SET TIME ZONE 'UTC'",
            Var::TimeZone,
            false,
            "TIME ZONE",
            "'UTC'",
        ),
        (
            "SET LOCAL TIME  ZONE 'UTC'",
            Var::TimeZone,
            true,
            "TIME  ZONE",
            "'UTC'",
        ),
        (
            "SET TIME ZONE LOCAL",
            Var::TimeZone,
            false,
            "TIME ZONE",
            "LOCAL",
        ),
        ("SET TIME ZONE -7", Var::TimeZone, false, "TIME ZONE", "-7"),
        (
            "SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE",
            Var::TimeZone,
            false,
            "TIME ZONE",
            "INTERVAL '+00:00' HOUR TO MINUTE",
        ),
        (
            "SET timezone = 'Europe/Berlin'",
            Var::TimeZone,
            false,
            "timezone",
            "'Europe/Berlin'",
        ),
        ("SET ROLE admin", Var::Role, false, "ROLE", "admin"),
        ("SET ROLE NONE", Var::Role, false, "ROLE", "NONE"),
        ("SET SESSION ROLE r", Var::Role, false, "ROLE", "r"),
        ("SET role = 'admin'", Var::Role, false, "role", "'admin'"),
        (
            "SET SESSION AUTHORIZATION 'bob'",
            Var::SessionAuthorization,
            false,
            "SESSION AUTHORIZATION",
            "'bob'",
        ),
        (
            "SET SESSION AUTHORIZATION DEFAULT",
            Var::SessionAuthorization,
            false,
            "SESSION AUTHORIZATION",
            "DEFAULT",
        ),
        (
            "SET NAMES 'UTF8'",
            Var::ClientEncoding,
            false,
            "NAMES",
            "'UTF8'",
        ),
        ("SET NAMES", Var::ClientEncoding, false, "NAMES", ""),
        (
            "SET client_encoding TO 'LATIN1'",
            Var::ClientEncoding,
            false,
            "client_encoding",
            "'LATIN1'",
        ),
        (
            "SET SCHEMA 'app'",
            Var::SearchPath,
            false,
            "SCHEMA",
            "'app'",
        ),
        (
            "SET transaction_isolation = 'serializable'",
            Var::TransactionIsolation,
            false,
            "transaction_isolation",
            "'serializable'",
        ),
        (
            "SET default_transaction_isolation = 'repeatable read'",
            Var::DefaultTransactionIsolation,
            false,
            "default_transaction_isolation",
            "'repeatable read'",
        ),
        (
            "SET default_transaction_read_only = on",
            Var::DefaultTransactionReadOnly,
            false,
            "default_transaction_read_only",
            "on",
        ),
        (
            "SET myapp.user_id = 42",
            Var::Placeholder,
            false,
            "myapp.user_id",
            "42",
        ),
        (
            "SET \"myapp\".\"x\" = 'y'",
            Var::Placeholder,
            false,
            "\"myapp\".\"x\"",
            "'y'",
        ),
        (
            "SET polar_consistency_mode = 'strict'",
            Var::Polar,
            false,
            "polar_consistency_mode",
            "'strict'",
        ),
        (
            "SET application_name = 'pgbench'",
            Var::ApplicationName,
            false,
            "application_name",
            "'pgbench'",
        ),
        (
            "SET DateStyle = ISO, MDY",
            Var::DateStyle,
            false,
            "DateStyle",
            "ISO, MDY",
        ),
        (
            "SET extra_float_digits=-1",
            Var::ExtraFloatDigits,
            false,
            "extra_float_digits",
            "-1",
        ),
        (
            "SET lock_timeout TO '1s'",
            Var::LockTimeout,
            false,
            "lock_timeout",
            "'1s'",
        ),
        (
            "SET bytea_output = 'hex' -- trailing comment",
            Var::ByteaOutput,
            false,
            "bytea_output",
            "'hex'",
        ),
        (
            "SET xml option document",
            Var::Other,
            false,
            "xml option",
            "document",
        ),
        (
            "SET work_mem = '64MB'",
            Var::Other,
            false,
            "work_mem",
            "'64MB'",
        ),
    ];
    for &(sql, var, local, name, value) in cases {
        let c = one(sql);
        match c.first().kind {
            Kind::Set {
                var: v,
                name: n,
                value: val,
                local: l,
            } => {
                assert_eq!(
                    (v, l, n.of(sql), val.of(sql)),
                    (var, local, name, value),
                    "{sql:?}"
                );
            }
            other => panic!("{sql:?} → {other:?}"),
        }
        assert!(!c.may_write());
    }
    for (sql, var, name) in [
        ("RESET search_path", Var::SearchPath, "search_path"),
        ("RESET TIME ZONE", Var::TimeZone, "TIME ZONE"),
        (
            "RESET SESSION AUTHORIZATION",
            Var::SessionAuthorization,
            "SESSION AUTHORIZATION",
        ),
        ("RESET role", Var::Role, "role"),
        ("RESET myapp.x", Var::Placeholder, "myapp.x"),
        (
            "RESET TRANSACTION ISOLATION LEVEL",
            Var::TransactionIsolation,
            "TRANSACTION ISOLATION LEVEL",
        ),
    ] {
        match one(sql).first().kind {
            Kind::Reset { var: v, name: n } => assert_eq!((v, n.of(sql)), (var, name), "{sql:?}"),
            other => panic!("{sql:?} → {other:?}"),
        }
    }
}

#[test]
fn s8_hint_only_when_leading() {
    let wf = WriteFunctions::defaults();
    assert!(classify("/* route=primary */ SELECT 1", &wf).hint_primary);
    assert!(classify("  /* Route=Primary */\nSELECT 1", &wf).hint_primary);
    assert!(!classify("/* route=primary */ SELECT 1", &wf).is_replica_safe());
    assert!(!classify("SELECT 1 /* route=primary */", &wf).hint_primary);
    assert!(!classify("SELECT /* route=primary */ 1", &wf).hint_primary);
    assert!(!classify("/* route=primaryx */ SELECT 1", &wf).hint_primary);
    assert!(!classify("/* hello */ SELECT 1", &wf).hint_primary);
    assert!(!classify("-- route=primary\nSELECT 1", &wf).hint_primary);
    assert!(classify("/* route=primary */ SELECT 1; SELECT 2", &wf).hint_primary);
}

#[test]
fn s7_configured_write_functions() {
    let mut wf = WriteFunctions::defaults();
    assert!(wf.add("my_writer"));
    assert!(wf.add("Audit_*"));
    assert!(!wf.add("bad name"));
    // With `unknown_functions = replica` only the write list keeps these off readers (with the
    // default, `primary`, an unknown function is not read-safe anyway: F-policy).
    let lenient = |wf: &WriteFunctions| {
        FunctionPolicy::new(wf.clone()).with_unknown_functions(UnknownFunctions::Replica)
    };
    for sql in [
        "SELECT my_writer(1)",
        "SELECT public.My_Writer(1)",
        "SELECT \"my_writer\"(1)",
        "SELECT audit_log('x')",
        "SELECT * FROM t WHERE x = (SELECT AUDIT_touch())",
    ] {
        let c = classify(sql, &wf);
        assert_eq!(
            (c.first().kind, c.first().not_safe),
            (RN, Ns::WriteFunction),
            "{sql:?}"
        );
        let limits = Limits::DEFAULT;
        assert_eq!(
            classify_with_policy(sql, &lenient(&wf), None, &limits)
                .first()
                .not_safe,
            Ns::WriteFunction,
            "{sql:?}"
        );
        assert!(
            classify_with_policy(sql, &lenient(&WriteFunctions::defaults()), None, &limits)
                .is_replica_safe(),
            "{sql:?}"
        );
        assert_eq!(
            classify(sql, &WriteFunctions::defaults()).first().not_safe,
            Ns::UnknownFunction,
            "{sql:?}"
        );
        let cl = Classifier::new(wf.clone(), 16);
        assert_eq!(cl.classify(sql), c);
        assert_eq!(cl.write_functions(), &wf);
    }
    assert!(classify("SELECT my_writer FROM t", &wf).is_replica_safe());
    assert_eq!(
        classify("SELECT my_writer_2(1)", &wf).first().not_safe,
        Ns::UnknownFunction
    );
}

#[test]
fn p6_may_write_follows_the_kind() {
    let wf = WriteFunctions::defaults();
    assert!(!classify("SELECT 1", &wf).may_write());
    assert!(classify("SELECT 1 FOR UPDATE", &wf).may_write());
    assert!(classify("UPDATE t SET a = 1", &wf).may_write());
    assert!(!classify("BEGIN; SELECT 1; SAVEPOINT a; RELEASE a", &wf).may_write());
    assert!(classify("BEGIN; SELECT 1; DELETE FROM t", &wf).may_write());
    assert!(classify("SELECT 'x", &wf).may_write());
}
