"""Defects an adversarial examination found (red7): reads the engine sends to the standby whose
answer or effect differs from the primary's (SPEC P-1, S-5, S-6, S-7, §7 F-policy). Each is proved
against the real primary + hot standby through the example proxy and compared with a twin
connection to the primary alone; where a read ran is told by inet_server_port() (replica-safe on
purpose, S-7). Every statement is bounded (statement_timeout, connect_timeout,
e2e_support.bounded): a missing answer fails fast.

What held (not kept as tests, measured once): a SQL function's BEGIN ATOMIC or RETURN body
(prosrc empty) keeps its calls on the primary (one guard below); a user `=` on an enum reached
through IN, NULLIF, CASE x WHEN, IS DISTINCT FROM, = ANY; a row-level security policy calling a
user function, read directly and through a plpgsql body; a FETCH that a STABLE plpgsql function
runs on a cursor the client DECLAREd in a block (the read stayed on the writer); a
`SELECT red7_open('c'); FETCH ALL FROM c` simple-Query batch (ran on the primary as a whole) and
the same pair in a psycopg pipeline; a STABLE plpgsql body calling a server-dependent user
function by attribute notation (`a.red7_attr`), and the client's own `a.f` and `(a).f`; the
client's own attribute-notation call and user operator that run DDL (the catalogue is marked
changed); a DDL-running function reached through a view (`SELECT count(*) FROM v`: not shown to
run); `red7_rw()` called alone (its standby error comes before any row and is retried on the
primary); after Findings 1 and 5b a second client handed the same settings saw no leaked state. A
user default btree operator class of json whose operators have other names runs for
`ORDER BY to_json(g)` on the standby (answered in reverse order) — documented in README ("a
default operator class whose operators have other names is not"), so not kept."""

from __future__ import annotations


import pytest

from e2e_support import answer, connect, on_primary, proxy_with_catalogue, ran_on, run, warm


TARGET_OLD = "CREATE OR REPLACE FUNCTION red7_target() RETURNS text STABLE LANGUAGE sql AS $$SELECT 'old'$$"

OBJECTS = [
    "CREATE FUNCTION red7_plain() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    # Finding 1: a user type whose implicit cast from int answers where it runs, reached through a
    # function's parameter and a SQL function's result (neither text names the type).
    "CREATE TYPE red7_e AS ENUM ('primary', 'standby')",
    "CREATE FUNCTION red7_i2e(i int) RETURNS red7_e IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN RETURN CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END; END $f$",
    "CREATE CAST (int AS red7_e) WITH FUNCTION red7_i2e(int) AS IMPLICIT",
    "CREATE FUNCTION red7_takes(v red7_e) RETURNS text STABLE LANGUAGE sql AS 'SELECT v::text'",
    "CREATE FUNCTION red7_mk() RETURNS red7_e STABLE LANGUAGE sql AS 'SELECT 1'",
    # … and a user implicit cast between built-in types reached through a built-in's result type.
    "CREATE FUNCTION red7_p2i(point) RETURNS int IMMUTABLE LANGUAGE sql AS"
    " 'SELECT CASE WHEN pg_is_in_recovery() THEN -1 ELSE 1 END'",
    "CREATE CAST (point AS int) WITH FUNCTION red7_p2i(point) AS IMPLICIT",
    # … and one whose cast sets a placeholder (S-5).
    "CREATE TYPE red7_e2 AS ENUM ('a')",
    "CREATE FUNCTION red7_i2e2(i int) RETURNS red7_e2 IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.red7_tenant', 'globex', false); RETURN 'a'; END $f$",
    "CREATE CAST (int AS red7_e2) WITH FUNCTION red7_i2e2(int) AS IMPLICIT",
    "CREATE FUNCTION red7_takes2(v red7_e2) RETURNS text STABLE LANGUAGE sql AS 'SELECT v::text'",
    "GRANT USAGE ON TYPE red7_e2 TO PUBLIC",
    # Finding 2: a refcursor a STABLE plpgsql function opens.
    "CREATE FUNCTION red7_open(c refcursor) RETURNS refcursor STABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN OPEN c FOR SELECT g FROM generate_series(1, 3) g; RETURN c; END $f$",
    # Finding 3: DDL reached through a SQL-standard body (prosrc empty).
    TARGET_OLD,
    "CREATE FUNCTION red7_inner() RETURNS void VOLATILE SECURITY DEFINER LANGUAGE plpgsql AS $f$ BEGIN"
    " EXECUTE $x$CREATE OR REPLACE FUNCTION red7_target() RETURNS text STABLE LANGUAGE sql AS"
    " 'SELECT CASE WHEN pg_is_in_recovery() THEN ''standby'' ELSE ''primary'' END'$x$; END $f$",
    "CREATE FUNCTION red7_outer_v() RETURNS void VOLATILE LANGUAGE sql BEGIN ATOMIC SELECT red7_inner(); END",
    "CREATE FUNCTION red7_outer_s() RETURNS void STABLE LANGUAGE sql BEGIN ATOMIC SELECT red7_inner(); END",
    "CREATE PROCEDURE red7_proc_atomic() LANGUAGE sql BEGIN ATOMIC SELECT red7_inner(); END",
    # Finding 4: the same DDL reached from a volatile body through attribute notation or a user
    # operator.
    "CREATE FUNCTION red7_ddl_attr(a accounts) RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 1 FROM (SELECT red7_inner()) x'",
    "CREATE FUNCTION red7_ddl_op(a int, b int) RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 1 FROM (SELECT red7_inner()) x'",
    "CREATE OPERATOR %%% (LEFTARG = int, RIGHTARG = int, FUNCTION = red7_ddl_op)",
    "CREATE FUNCTION red7_outer_attr() RETURNS int VOLATILE LANGUAGE sql AS 'SELECT a.red7_ddl_attr FROM accounts a WHERE a.id = 1'",
    "CREATE FUNCTION red7_outer_op() RETURNS int VOLATILE LANGUAGE plpgsql AS $f$ BEGIN RETURN 1 %%% 2; END $f$",
    # Finding 5: a function's SET clause (proconfig) that fails on a standby.
    "CREATE FUNCTION red7_rw() RETURNS int STABLE LANGUAGE sql SET transaction_read_only = off AS 'SELECT 1'",
    # Finding 5b: a SET clause of a placeholder (defines it in the session that runs the call).
    "CREATE FUNCTION red7_ph() RETURNS int STABLE LANGUAGE sql SET app.red7_ph = 'x' AS 'SELECT 1'",
    # Guard: SQL-standard bodies over a server-dependent built-in stay on the primary.
    "CREATE FUNCTION red7_atomic() RETURNS bool STABLE LANGUAGE sql BEGIN ATOMIC SELECT NOT pg_is_in_recovery(); END",
    "CREATE FUNCTION red7_ret() RETURNS bool STABLE LANGUAGE sql RETURN NOT pg_is_in_recovery()",
    "GRANT USAGE ON TYPE red7_e TO PUBLIC",
    "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC",
]
DROP = [
    "DROP PROCEDURE IF EXISTS red7_proc_atomic()",
    "DROP FUNCTION IF EXISTS red7_outer_attr(), red7_outer_op(), red7_rw(), red7_ph()",
    "DROP OPERATOR IF EXISTS %%% (int, int)", "DROP FUNCTION IF EXISTS red7_ddl_attr(accounts), red7_ddl_op(int, int)",
    "DROP FUNCTION IF EXISTS red7_plain(), red7_open(refcursor), red7_atomic(), red7_ret(), red7_outer_v(),"
    " red7_outer_s(), red7_inner(), red7_target()",
    "DROP FUNCTION IF EXISTS red7_takes(red7_e), red7_mk()",
    "DROP CAST IF EXISTS (int AS red7_e)",
    "DROP CAST IF EXISTS (point AS int)", "DROP FUNCTION IF EXISTS red7_p2i(point)",
    "DROP FUNCTION IF EXISTS red7_i2e(int)",
    "DROP TYPE IF EXISTS red7_e",
    "DROP FUNCTION IF EXISTS red7_takes2(red7_e2)", "DROP CAST IF EXISTS (int AS red7_e2)",
    "DROP FUNCTION IF EXISTS red7_i2e2(int)", "DROP TYPE IF EXISTS red7_e2",
]


@pytest.fixture(scope="module")
def red7_proxy(pair, tmp_path_factory):
    """A proxy whose catalogue has this module's objects from its first load."""
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("red7"), "red7_plain()", DROP) as proxy:
        yield proxy


def compare(pair, proxy, sql):
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary = answer(direct, sql)
    with connect(proxy.dsn()) as c:
        warm(c)
        through = answer(c, sql)
    return on_primary, through


# -- Finding 1: a user type's code reached through a function's parameter or result ---------------
#
# `SELECT red7_takes(1)`: the argument 1 is coerced to the parameter's type red7_e by the user
# IMPLICIT cast `red7_i2e(int)` (plpgsql, IMMUTABLE label, its answer depends on
# pg_is_in_recovery()). `SELECT red7_mk()`: a SQL function's `SELECT 1` is coerced to its result
# type red7_e by the same cast when it runs. The catalogue query (src/classify/catalog_query.rs,
# the `tf` closure and the `'h'` rows) reports a type's casts, I/O and operator-class code under
# the *type's name* only, and links a function to the types of its arguments and result for
# domains alone (the `td` rows: "a domain's CHECK runs where the text never names the domain: a
# function's argument or result …"); neither statement nor either body (`SELECT v::text`,
# `SELECT 1`) names red7_e, so the engine (src/classify/functions.rs, Call::Names matching)
# judges both calls plain STABLE reads: the standby runs the cast and answers 'standby' where the
# primary answers 'primary' (S-7). The same holds for a built-in type that only an expression's
# type reaches: `center(circle '…') + 1` applies the user IMPLICIT cast point → int
# (`red7_p2i`), reported under the name `point`, which the text never spells (README documents the
# cast for a point *column*, `p + 1`). The same path runs a cast that calls set_config() on the
# pooled reader (S-5).

@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["red7_takes(1)", "red7_mk()::text",
                                  "CASE center(circle '<(1,2),3>') + 1 WHEN 2 THEN 'primary' ELSE 'standby' END"])
def test_s7_a_user_cast_a_functions_parameter_or_result_type_runs_answers_as_the_primary(pair, red7_proxy, call):
    sql = f"SELECT {call}, inet_server_port()"
    on_primary, through = compare(pair, red7_proxy, sql)
    assert on_primary == ("ok", [("primary", pair.primary.port)])
    assert through[0] == "ok" and through[1][0][0] == on_primary[1][0][0], (
        f"{call}: the primary answers {on_primary[1][0][0]!r}; through the proxy {through} "
        f"(ran on the {ran_on(through[1][0][1]) if through[0] == 'ok' else '?'})")


TENANT = "SELECT current_setting('app.red7_tenant', true), inet_server_port()"


@pytest.mark.timeout(60)
def test_s5_state_a_user_cast_a_functions_parameter_type_runs_sets_is_the_sessions(pair, red7_proxy):
    """Finding 1, S-5: the cast `red7_i2e2(int)` into `red7_takes2`'s parameter type calls
    set_config('app.red7_tenant', 'globex', false). On the primary the session's tenant is then
    'globex'; through the proxy the call runs on the standby and the session keeps 'acme'."""
    def session(dsn, warm_first):
        with connect(dsn) as a:
            if warm_first:
                warm(a)
            run(a, "SET app.red7_tenant = 'acme'")
            call = run(a, "SELECT red7_takes2(1), inet_server_port()")[0]
            return call, [run(a, TENANT)[0] for _ in range(3)]
    on_primary = session(pair.primary.dsn(dbname="app", user="app_trust"), False)
    through = session(red7_proxy.dsn(), True)
    assert [r[0] for r in on_primary[1]] == ["globex"] * 3
    assert [r[0] for r in through[1]] == ["globex"] * 3, (
        f"after SELECT red7_takes2(1) (ran on the {ran_on(through[0][1])}): the session's app.red7_tenant is "
        f"{[(r[0], ran_on(r[1])) for r in through[1]]}; on the primary 'globex'")


# -- Finding 2: a cursor a STABLE plpgsql function opens inside a transaction block --------------
#
# The client's block: `BEGIN; SELECT red7_open('c'); FETCH ALL FROM c; COMMIT` — the refcursor
# pattern (JDBC, Npgsql and psycopg clients fetch from a cursor a function returns). The
# catalogue query judges a non-SQL body by words (src/classify/catalog_query.rs, the `'f'` rows:
# DDL words, then `\m(insert|update|delete|merge|copy|lock|notify|listen|set|reset|discard|
# commit|rollback)\M` as "may write", else a SELECT calling the names it holds): OPEN (and FETCH,
# MOVE, CLOSE) are in neither list, so `red7_open` is a plain STABLE read, the block's SELECT runs
# on the pooled standby and opens the portal there; the FETCH (not a read) goes to the writer,
# which has no such cursor: the client gets 34000 "cursor "c" does not exist" and its
# transaction is aborted, where the primary returns the three rows (P-1). The portal itself is
# the pooled reader's until the block ends.

@pytest.mark.timeout(60)
def test_p1_a_cursor_a_stable_function_opens_in_a_block_is_fetched_as_on_the_primary(pair, red7_proxy):
    def block(conn):
        out = [answer(conn, s) for s in ("BEGIN", "SELECT red7_open('c'), inet_server_port()", "FETCH ALL FROM c")]
        answer(conn, "ROLLBACK")
        return out
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary = block(direct)
    with connect(red7_proxy.dsn()) as c:
        warm(c)
        through = block(c)
    assert on_primary[2] == ("ok", [(1,), (2,), (3,)])
    assert through[2] == on_primary[2], (
        f"FETCH ALL FROM c: the primary answers {on_primary[2]}; through the proxy {through[2]} "
        f"(the SELECT that opened it ran on the {ran_on(through[1][1][0][1]) if through[1][0] == 'ok' else '?'})")


# -- Finding 3: DDL a SQL-standard body reaches leaves the catalogue unmarked ---------------------
#
# `red7_outer_v()` (VOLATILE) and `red7_outer_s()` (STABLE), each `BEGIN ATOMIC SELECT
# red7_inner(); END`, call `red7_inner()`, whose dynamic SQL redefines `red7_target()` to answer
# where it runs. A SQL-standard body has an empty prosrc: the catalogue query (src/classify/
# catalog_query.rs, the `'f'` rows) scans prosrc alone — the volatile branch finds no call and its
# `'SELECT NULL' || NULL` drops the row (`WHERE def IS NOT NULL`), the STABLE one reports "a
# BEGIN ATOMIC body is not judged", a text that is no read but not DDL either — so neither call
# marks the database's catalogue changed (the fixed point that catches the same DDL through a
# plain `LANGUAGE sql AS 'SELECT pr_inner()'` body, test_s6_code_the_planner_runs.py F9, never
# sees red7_inner). The next `SELECT red7_target()` is judged by the old body `SELECT 'old'` and
# runs on the standby, which answers 'standby' with the new one (S-6, S-7) until the next
# periodic catalogue load. (Measured as controls, not kept: the same DDL through a plain
# `LANGUAGE sql AS 'SELECT red7_inner()'` function or procedure is seen.)

def stale_after(pair, proxy, statement: str) -> tuple[str, int]:
    """Runs `statement` through the proxy (it redefines red7_target() on the primary), waits
    until the standby has replayed it, and returns what `SELECT red7_target()` then answers
    through the proxy and the port it ran on."""
    sql = "SELECT red7_target(), inet_server_port()"
    try:
        with connect(proxy.dsn()) as c:
            warm(c)
            assert run(c, sql)[0][0] == "old"
            run(c, statement)
        pair.wait_replayed()  # the standby has the new body
        with connect(proxy.dsn()) as c:
            return tuple(run(c, sql)[0])
    finally:
        on_primary(pair, TARGET_OLD)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("statement", ["SELECT red7_outer_v()", "SELECT red7_outer_s()", "CALL red7_proc_atomic()"])
def test_s6_ddl_a_begin_atomic_body_runs_makes_the_catalogue_stale(pair, red7_proxy, statement):
    got = stale_after(pair, red7_proxy, statement)
    assert got[0] == "primary", (
        f"after {statement}: red7_target() answers {got[0]!r} (ran on the {ran_on(got[1])}); "
        "the primary answers 'primary'")


# -- Finding 4: DDL a volatile body reaches through attribute notation or a user operator ---------
#
# The volatile branch of the `'f'` rows (src/classify/catalog_query.rs: "ELSE 'SELECT NULL' ||
# (SELECT string_agg(… ) FROM regexp_matches(b.src, '([[:alpha:]_][[:alnum:]_$]*)[[:space:]]*\(')
# … WHERE lower(m[1]) IN (SELECT un.name FROM un))") reports only the user functions its body
# writes before a parenthesis. `red7_outer_attr()` (VOLATILE, SQL) calls `red7_ddl_attr(accounts)`
# by attribute notation (`a.red7_ddl_attr`), `red7_outer_op()` (VOLATILE, plpgsql) calls
# `red7_ddl_op` through its operator `1 %%% 2` — both run red7_inner()'s DDL. No call is found, the
# concatenation with NULL drops the row, and the DDL is not seen, although README promises that a
# volatile function is judged "by the user functions its body calls, so that calling one that
# calls such a function (however deep) changes it too", and that "a user operator written in a body
# counts as a call of its function" (the `uops` part exists in the non-volatile branch only). The
# same two calls written directly by the client (`SELECT a.red7_ddl_attr FROM accounts a`,
# `SELECT 1 %%% 2`) do mark the catalogue changed (measured: red7_target() then ran on the primary).

@pytest.mark.timeout(60)
@pytest.mark.parametrize("statement", ["SELECT red7_outer_attr()", "SELECT red7_outer_op()"])
def test_s6_ddl_a_volatile_body_reaches_by_attribute_notation_or_operator_makes_the_catalogue_stale(
        pair, red7_proxy, statement):
    got = stale_after(pair, red7_proxy, statement)
    assert got[0] == "primary", (
        f"after {statement}: red7_target() answers {got[0]!r} (ran on the {ran_on(got[1])}); "
        "the primary answers 'primary'")


# -- Guard: SQL-standard bodies over a server-dependent built-in ----------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["red7_atomic()", "red7_ret()"])
def test_s7_guard_a_sql_standard_body_is_never_judged_safe(pair, red7_proxy, call):
    on_primary, through = compare(pair, red7_proxy, f"SELECT {call}, inet_server_port()")
    assert on_primary[1][0][0] is True
    assert through[0] == "ok" and through[1][0][0] is True, f"{call}: through the proxy {through}"


# -- Finding 5: a function's SET clause the catalogue never reads ----------------------------------
#
# `red7_rw()` is `STABLE LANGUAGE sql SET transaction_read_only = off AS 'SELECT 1'`. The catalogue
# query (src/classify/catalog_query.rs) reads prosrc, volatility, argument defaults and types, never
# pg_proc.proconfig: the body `SELECT 1` makes the call a plain read. On the primary the SET
# clause is a no-op; on a standby it fails at each call (25001 "transaction read-write mode must
# be set before any query"). Alone, the call's error comes before any row and is retried on the
# primary (F-2, measured); called for the last rows of a long result, the standby's error comes
# after rows have reached the client and cannot be retried (F-3): the client gets an error the
# primary never raises (P-1).

@pytest.mark.timeout(60)
def test_p1_a_functions_set_clause_that_fails_on_a_standby_answers_as_the_primary(pair, red7_proxy):
    sql = "SELECT g, CASE WHEN g > 19000 THEN red7_rw() END, inet_server_port() FROM generate_series(1, 20000) g"
    on_primary, through = compare(pair, red7_proxy, sql)
    assert on_primary[0] == "ok" and len(on_primary[1]) == 20_000
    assert through[0] == "ok", f"the primary answers 20000 rows; through the proxy {through}"


# Finding 5b (the same SET clause, S-5): `red7_ph()` is `STABLE LANGUAGE sql SET app.red7_ph =
# 'x' AS 'SELECT 1'`. Running it defines the placeholder `app.red7_ph` in the session that runs it
# (PostgreSQL restores the value at the call's end, but the placeholder stays: the session's
# `current_setting('app.red7_ph', true)` is '' from then on, where a session that never ran it
# answers NULL). Through the proxy the call runs on the standby: the writer session never defines
# it, the capture (S-5) finds nothing to replay, and the client's next reads answer NULL where
# the primary answers '' — session state the primary would have is lost.

PH = "SELECT current_setting('app.red7_ph', true), inet_server_port()"


@pytest.mark.timeout(60)
def test_s5_a_placeholder_a_functions_set_clause_defines_is_the_sessions(pair, red7_proxy):
    def session(dsn, warm_first):
        with connect(dsn) as a:
            if warm_first:
                warm(a)
            call = run(a, "SELECT red7_ph(), inet_server_port()")[0]
            return call, [run(a, PH)[0] for _ in range(3)]
    on_primary = session(pair.primary.dsn(dbname="app", user="app_trust"), False)
    through = session(red7_proxy.dsn(), True)
    assert [r[0] for r in on_primary[1]] == ["", "", ""]
    assert [r[0] for r in through[1]] == ["", "", ""], (
        f"after SELECT red7_ph() (ran on the {ran_on(through[0][1])}): current_setting('app.red7_ph', true) "
        f"answers {[(r[0], ran_on(r[1])) for r in through[1]]}; the primary answers ''")

