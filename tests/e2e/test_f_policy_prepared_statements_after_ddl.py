"""F-policy, S-6 and S-7 for prepared statements: a statement's verdict follows the catalogue.

An examiner's probe of 2026-12-05 (psql, libpq, psycopg's automatic prepare, `pgbench -M
prepared`): the engine judged a named statement once, at its Parse, and every later Bind reused
that verdict. PostgreSQL plans a prepared statement again after DDL on what it names, so a
statement prepared before a view was made to read `pg_is_in_recovery()` ran the new view on the
standby (1 where the primary answers 0, 6 of 6), one prepared before a function was made to call
`set_config` ran it on the standby and the client's setting was never made (5 of 5), and a table
read prepared before a row-level security policy on `pg_is_in_recovery()` counted 0 rows where
the primary counts 10 — however long after the catalogue's reload, for as long as the
connection lived. Unnamed statements and simple queries were judged at every use and were right.

Fixed on 2026-12-06: a tracked statement's verdict is finished again once the catalogue moved
(the catalogue generation). Built the evening before, it had let a statement that lives only
on readers and turns unsafe run on the writer in its new result type (`test_red1_findings.py`,
4 of 6 runs): a batch routed again while the writer check of its statement's shape was in flight
went on without it. It now waits for the check. Each case compares the answers with the
primary's."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, on_primary, start_proxy, stop_proxy, wait_until

VIEW_BEFORE = "CREATE OR REPLACE VIEW fpd_view AS SELECT 0 AS x"
VIEW_AFTER = "CREATE OR REPLACE VIEW fpd_view AS SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END AS x"
FUNC_BEFORE = "CREATE OR REPLACE FUNCTION fpd_func() RETURNS text STABLE LANGUAGE sql AS $$ SELECT 'plain' $$"
FUNC_AFTER = ("CREATE OR REPLACE FUNCTION fpd_func() RETURNS text VOLATILE LANGUAGE sql "
              "AS $$ SELECT set_config('fpd.t', 'changed', false) $$")
POLICY_AFTER = ["CREATE POLICY fpd_p ON fpd_rows USING (NOT pg_is_in_recovery())",
                "ALTER TABLE fpd_rows ENABLE ROW LEVEL SECURITY"]


def view_case(c: psycopg.Connection) -> list:
    return [c.execute("SELECT x FROM fpd_view", prepare=True).fetchone()[0]]


def function_case(c: psycopg.Connection) -> list:
    got = c.execute("SELECT fpd_func()", prepare=True).fetchone()[0]
    return [got, c.execute("SELECT current_setting('fpd.t', true)").fetchone()[0]]


def policy_case(c: psycopg.Connection) -> list:
    return [c.execute("SELECT count(*) FROM fpd_rows", prepare=True).fetchone()[0]]


CASES = {
    "view": (view_case, [VIEW_AFTER]),
    "function": (function_case, [FUNC_AFTER]),
    "policy": (policy_case, POLICY_AFTER),
}


def reset(pair) -> None:
    """The view, the function and the table as they are before each case's DDL."""
    on_primary(pair, "DROP VIEW IF EXISTS fpd_view", "DROP FUNCTION IF EXISTS fpd_func()",
               "DROP TABLE IF EXISTS fpd_rows", VIEW_BEFORE, FUNC_BEFORE,
               "CREATE TABLE fpd_rows (k int)", "INSERT INTO fpd_rows SELECT generate_series(1, 10)",
               "GRANT SELECT ON fpd_view, fpd_rows TO PUBLIC",
               "GRANT EXECUTE ON FUNCTION fpd_func() TO PUBLIC")
    pair.wait_replayed()


@pytest.fixture
def objects(pair):
    reset(pair)
    yield
    on_primary(pair, "DROP VIEW IF EXISTS fpd_view", "DROP FUNCTION IF EXISTS fpd_func()",
               "DROP TABLE IF EXISTS fpd_rows")


def run(dsn: str, case, ddl, pair, proxy=None) -> tuple[list, list]:
    """`case` three times on one connection — prepared by psycopg from its first run on —, the
    DDL (through `proxy` by another session, or on the primary directly when `proxy` is None),
    then `case` again on the same connection once the standby has replayed the DDL."""
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as c:
        before = [case(c) for _ in range(3)]
        admin_dsn = proxy.dsn(user="postgres") if proxy else pair.primary.dsn(dbname="app")
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            for stmt in ddl:
                admin.execute(stmt)
        pair.wait_replayed()
        time.sleep(0.3)
        after = [case(c) for _ in range(3)]
    return before, after


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(CASES))
def test_f_policy_a_statement_prepared_before_ddl_through_the_proxy_runs_as_on_the_primary(
        pair, proxy, objects, name):
    case, ddl = CASES[name]
    through = run(proxy.dsn(), case, ddl, pair, proxy=proxy)
    reset(pair)
    direct = run(pair.primary.dsn(user="app_trust", dbname="app"), case, ddl, pair)
    assert through == direct, f"through the proxy {through}, the primary {direct}"


@pytest.mark.timeout(120)
def test_f_policy_a_statement_prepared_before_ddl_on_the_primary_follows_the_next_catalogue_load(
        pair, objects, tmp_path):
    # DDL the engine does not see: the catalogue's next load (every second here) reports the
    # view as reading server-dependent code.
    proxy = start_proxy(pair, tmp_path, extra=["--catalog-refresh-ms", "1000"])
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True, prepare_threshold=0) as c:
            sql = "SELECT x, inet_server_port() FROM fpd_view"

            def on_standby():
                x, port = c.execute(sql, prepare=True).fetchone()
                return port in STANDBY_PORTS, (x, port)
            wait_until(on_standby, "the prepared read reaches the standby")
            on_primary(pair, VIEW_AFTER)
            pair.wait_replayed()
            time.sleep(2.5)  # more than two catalogue loads
            got = [c.execute(sql, prepare=True).fetchone()[0] for _ in range(5)]
    finally:
        stop_proxy(proxy)
    assert got == [0] * 5, got


# A statement another session prepared on a pooled reader keeps the names it resolved there: a
# relation created since in a schema earlier on the search_path does not make the server look
# again, where a new session on the primary prepares afresh (an examiner's probe, 2026-12-05:
# the new session read `public.fpd_sh` from the standby, for good). DDL the engine sees — `SELECT
# … INTO` among it now — and a catalogue report that differs make pooled readers prepare again.
SHADOWED = "SELECT v FROM fpd_sh"


def prepared_read(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as c:
        c.execute("SET search_path = fpd_s2, public")
        return c.execute(SHADOWED, prepare=True).fetchone()[0]


@pytest.fixture
def shadowed(pair):
    drop = ["DROP SCHEMA IF EXISTS fpd_s2 CASCADE", "DROP TABLE IF EXISTS public.fpd_sh"]
    on_primary(pair, *drop, "CREATE SCHEMA fpd_s2", "GRANT ALL ON SCHEMA fpd_s2 TO PUBLIC",
               "CREATE TABLE public.fpd_sh (v text)", "INSERT INTO public.fpd_sh VALUES ('public')",
               "GRANT SELECT ON public.fpd_sh TO PUBLIC")
    pair.wait_replayed()
    yield
    on_primary(pair, *drop)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["select_into_through_the_proxy", "create_on_the_primary"])
def test_e2_s6_a_new_session_resolves_names_afresh_after_a_shadowing_relation_appears(
        pair, shadowed, tmp_path, how):
    proxy = start_proxy(pair, tmp_path, extra=["--catalog-refresh-ms", "1000"])
    try:
        def first_on_standby():
            with psycopg.connect(proxy.dsn(), autocommit=True, prepare_threshold=0) as c:
                c.execute("SET search_path = fpd_s2, public")
                v, port = c.execute("SELECT v, inet_server_port() FROM fpd_sh", prepare=True).fetchone()
            return port in STANDBY_PORTS, (v, port)
        wait_until(first_on_standby, "the prepared read reaches the standby")
        # Sessions that prepared the statement on the pooled standby connections.
        assert [prepared_read(proxy.dsn()) for _ in range(4)] == ["public"] * 4
        if how == "select_into_through_the_proxy":
            with psycopg.connect(proxy.dsn(user="postgres"), autocommit=True) as admin:
                admin.execute("SELECT 's2'::text AS v INTO fpd_s2.fpd_sh")
                admin.execute("GRANT SELECT ON fpd_s2.fpd_sh TO PUBLIC")
        else:
            on_primary(pair, "CREATE TABLE fpd_s2.fpd_sh (v text)", "INSERT INTO fpd_s2.fpd_sh VALUES ('s2')",
                       "GRANT SELECT ON fpd_s2.fpd_sh TO PUBLIC")
        pair.wait_replayed()
        time.sleep(2.5)  # more than two catalogue loads
        got = [prepared_read(proxy.dsn()) for _ in range(4)]
    finally:
        stop_proxy(proxy)
    assert got == ["s2"] * 4, got
