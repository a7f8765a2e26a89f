"""Examiner round 10, area b (red10-b): writes and server-acting statements judged reads, answers
that depend on the server (SPEC S-6, S-7, §7 F-policy), against the real primary + hot standby
through the example proxy, each answer compared with a twin connection to the primary alone;
where a read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is
bounded (statement_timeout, connect_timeout, e2e_support.bounded).

DRAFT
"""

from __future__ import annotations

import pytest

from e2e_support import connect, on_primary, proxy_with_catalogue, ran_on, run, warm

# -- Finding 2 (defined first: the fixture creates its objects) ------------------------------------

# IMMUTABLE as the index predicate requires; its answer depends on the server (as red8-c's cut()).
CUT = ("CREATE FUNCTION r10b.cut() RETURNS int IMMUTABLE LANGUAGE plpgsql AS"
       " $f$BEGIN RETURN CASE WHEN pg_is_in_recovery() THEN 0 ELSE 100 END; END$f$")
INDEX = "CREATE INDEX r10b_t_part ON r10b.t (x) WHERE x > r10b.cut()"
COUNT = "SELECT count(*), inet_server_port() FROM r10b.t WHERE x > 50"

# -- Finding 1: DDL in a DO block's dollar-quoted string is not seen --------------------------------

PLAIN = "CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql AS $$SELECT 'plain'::text$$"
SERVER_DEPENDENT = ("CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql"
                    " AS $q$SELECT pg_is_in_recovery()::text$q$")
# A migration step as tools write it: dynamic DDL in a dollar-quoted string (format($f$…$f$, …)).
DO_DDL = f"DO $d$BEGIN EXECUTE $e${SERVER_DEPENDENT}$e$; END$d$"
CALL = "SELECT r10b.f(), inet_server_port()"

# Finding 1b: a DO block that calls a function the catalogue reports as DDL.
PLAIN_G = PLAIN.replace("r10b.f()", "r10b.g()")
MK = ("CREATE FUNCTION r10b.mk() RETURNS void VOLATILE LANGUAGE plpgsql AS $b$BEGIN "
      + SERVER_DEPENDENT.replace("r10b.f()", "r10b.g()") + "; END$b$")
DO_CALL = "DO $$BEGIN PERFORM r10b.mk(); END$$"
CALL_G = "SELECT r10b.g(), inet_server_port()"


def primary_dsn(pair):
    return pair.primary.dsn(dbname="app", user="app_trust")


@pytest.fixture(scope="module")
def proxy(pair, tmp_path_factory):
    on_primary(
        pair,
        "DROP SCHEMA IF EXISTS r10b CASCADE",
        "CREATE SCHEMA r10b AUTHORIZATION app_trust",
        "CREATE FUNCTION r10b.plain() RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 1'",
        PLAIN,
        "ALTER FUNCTION r10b.f() OWNER TO app_trust",
        PLAIN_G,
        "ALTER FUNCTION r10b.g() OWNER TO app_trust",
        MK,
        "ALTER FUNCTION r10b.mk() OWNER TO app_trust",
        CUT,
        "CREATE TABLE r10b.t (x int NOT NULL)",
        "INSERT INTO r10b.t SELECT g FROM generate_series(1, 200) g",
        "ALTER TABLE r10b.t OWNER TO app_trust",
        "ANALYZE r10b.t",
    )
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("r10b"), "r10b.plain()",
                              ["DROP SCHEMA IF EXISTS r10b CASCADE"]) as p:
        yield p


@pytest.mark.timeout(60)
def test_s7_ddl_in_a_do_blocks_dollar_quoted_string_is_seen(pair, proxy):
    """S-7 / F-policy: DDL through the engine keeps the database's reads on the primary until a
    catalogue load that started after it reports (CATALOG_CHANGED; "a DO body that says so").
    A DO block whose body says `EXECUTE $e$CREATE OR REPLACE FUNCTION …$e$` replaces a read-safe
    function with one over pg_is_in_recovery(); a new session's call must answer 'false' as the
    primary alone does."""
    with connect(proxy.dsn()) as a:
        warm(a)
        before = run(a, CALL)
        run(a, DO_DDL)
    pair.wait_replayed()
    with connect(primary_dsn(pair)) as direct:
        alone = run(direct, CALL)
    through = []
    for _ in range(3):
        with connect(proxy.dsn()) as b:
            warm(b)
            through.append(run(b, CALL)[0])
    on_primary(pair, PLAIN)
    assert ran_on(before[0][1]) == "standby", f"control: the plain function ran on {before}"
    assert alone == [("false", pair.primary.port)]
    assert [r[0] for r in through] == ["false"] * 3, (
        f"after `{DO_DDL[:60]}…` through the proxy, new sessions' {CALL} answered "
        f"{[(r[0], ran_on(r[1])) for r in through]}; the primary alone answers 'false'")


@pytest.mark.timeout(60)
def test_s7_a_partial_index_created_through_the_engine_changes_the_tables_verdict(pair, proxy):
    """S-7 / F-policy: the catalogue links a relation to its indexes' predicates' functions (red9),
    so a read of `r10b.t` is judged with r10b.cut() once the index is reported. Created through
    the engine, CREATE INDEX is no DDL (head.rs `changes_no_catalogue`): nothing is reloaded and
    reads of the table keep their old verdict. The primary built the index over x > 100; the
    standby's planner folds the predicate to x > 0, proves `x > 50` implies it and answers from an
    index that lacks 51..100: a wrong count, where the primary alone counts 150."""
    with connect(proxy.dsn()) as a:
        warm(a)
        run(a, "SET enable_seqscan = off")
        before = run(a, COUNT)
        run(a, INDEX)
    pair.wait_replayed()
    with connect(primary_dsn(pair)) as direct:
        run(direct, "SET enable_seqscan = off")
        alone = run(direct, COUNT)
    through = []
    for _ in range(3):
        with connect(proxy.dsn()) as b:
            warm(b)
            run(b, "SET enable_seqscan = off")
            through.append(run(b, COUNT)[0])
    on_primary(pair, "DROP INDEX r10b.r10b_t_part")
    assert before[0][0] == 150 and ran_on(before[0][1]) == "standby", f"control: {before}"
    assert alone == [(150, pair.primary.port)]
    assert [r[0] for r in through] == [150] * 3, (
        f"after `{INDEX}` through the proxy, new sessions' {COUNT} (enable_seqscan off) answered "
        f"{[(r[0], ran_on(r[1])) for r in through]}; the primary alone counts 150")


def _after_ddl(pair, proxy, ddl, call):
    """Session A runs `ddl` through the proxy; once the standby replayed it, three new sessions
    run `call` through the proxy. Returns (A's call before, the primary alone's answer, theirs)."""
    with connect(proxy.dsn()) as a:
        warm(a)
        before = run(a, call)
        run(a, ddl)
    pair.wait_replayed()
    with connect(primary_dsn(pair)) as direct:
        alone = run(direct, call)
    through = []
    for _ in range(3):
        with connect(proxy.dsn()) as b:
            warm(b)
            through.append(run(b, call)[0])
    return before, alone, through


@pytest.mark.timeout(60)
def test_s7_a_do_block_calling_a_function_that_runs_ddl_changes_the_catalogue(pair, proxy):
    """S-7 / F-policy: `SELECT r10b.mk()` — a volatile function whose body says DDL — counts as
    DDL (the catalogue reports it as a DO block that says so); `DO $$BEGIN PERFORM r10b.mk();
    END$$` runs the same DDL but its body names no DDL word: r10b.g(), now over
    pg_is_in_recovery(), keeps its read-safe verdict and new sessions' calls answer 'true'."""
    before, alone, through = _after_ddl(pair, proxy, DO_CALL, CALL_G)
    assert ran_on(before[0][1]) == "standby", f"control: the plain function ran on {before}"
    assert alone == [("false", pair.primary.port)]
    assert [r[0] for r in through] == ["false"] * 3, (
        f"after `{DO_CALL}` through the proxy, new sessions' {CALL_G} answered "
        f"{[(r[0], ran_on(r[1])) for r in through]}; the primary alone answers 'false'")
