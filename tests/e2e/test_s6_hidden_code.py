"""S-6 / S-5 / S-7 for code that objects hide, beyond the examiner's views, operator, domain and cast
(test_red1_findings.py): a row-level security policy whose expression calls a user function that
sets a placeholder, a view over a view over `set_config`, a view over a sequence, and a user
aggregate whose transition function is volatile (pg_proc calls every aggregate immutable; the proxy
reports it with its support functions' worst volatility). The example proxy
reports each database's such objects with its function catalogue (polarsplit_engine_set_object_catalog)
and the engine judges a statement naming one as if the definition were part of its text.

Oracles: the primary's own answers (a direct connection as the same user), and fresh clients of the
proxy, which must see nothing of another client's state on whatever server they read. A control in
the same session (a plain read of a table reaching the standby) shows the proxy splits at all. The
proxy is the session's shared one; the test waits until its catalogue has these objects (a view over
a server-dependent function answers on the primary once it is reported)."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import bounded, on_primary, start_proxy, stop_proxy, wait_until

SETUP = r"""
CREATE FUNCTION s6h_tenant_ok(x int) RETURNS bool STABLE LANGUAGE plpgsql AS
  $$ BEGIN PERFORM set_config('s6h.leak', 'rls', false); RETURN x > 0; END $$;
CREATE TABLE s6h_rls (x int);
INSERT INTO s6h_rls VALUES (1), (2);
ALTER TABLE s6h_rls ENABLE ROW LEVEL SECURITY;
ALTER TABLE s6h_rls FORCE ROW LEVEL SECURITY;
CREATE POLICY s6h_p ON s6h_rls USING (s6h_tenant_ok(x));
GRANT SELECT ON s6h_rls TO PUBLIC;
CREATE VIEW s6h_v1 AS SELECT set_config('s6h.tenant', 'nested', false) AS t;
CREATE VIEW s6h_v2 AS SELECT t FROM s6h_v1;
CREATE SEQUENCE s6h_seq;
SELECT nextval('s6h_seq');
CREATE VIEW s6h_seq_v AS SELECT last_value, log_cnt, is_called FROM s6h_seq;
CREATE TABLE s6h_plain (x int);
INSERT INTO s6h_plain VALUES (1);
CREATE VIEW s6h_mark AS SELECT pg_is_in_recovery() AS r;
CREATE FUNCTION s6h_agg_step(s int, x int) RETURNS int VOLATILE LANGUAGE plpgsql AS
  $$ BEGIN PERFORM set_config('s6h.agg', 'step', false); RETURN coalesce(s, 0) + x; END $$;
CREATE AGGREGATE s6h_agg(int) (sfunc = s6h_agg_step, stype = int);
GRANT SELECT ON ALL TABLES IN SCHEMA public TO PUBLIC;
"""

CLEANUP = """
DROP VIEW IF EXISTS s6h_mark, s6h_seq_v, s6h_v2, s6h_v1;
DROP TABLE IF EXISTS s6h_rls, s6h_plain;
DROP SEQUENCE IF EXISTS s6h_seq;
DROP AGGREGATE IF EXISTS s6h_agg(int);
DROP FUNCTION IF EXISTS s6h_tenant_ok(int), s6h_agg_step(int, int);
"""


@pytest.fixture(scope="module")
def hidden(pair, proxy):
    on_primary(pair, CLEANUP, SETUP)

    def catalogued():
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            with bounded(c, 10, "catalogue wait"):
                plain = [c.execute("SELECT inet_server_port() FROM s6h_plain").fetchone()[0] for _ in range(3)]
                mark = c.execute("SELECT r, inet_server_port() FROM s6h_mark").fetchone()
        return pair.standby.port in plain and mark[1] == pair.primary.port, (plain, mark)

    _, mark = wait_until(catalogued, "the proxy did not report the objects in time", pause=0.5)
    assert mark[0] is False, "a view over pg_is_in_recovery() answers the primary's value"
    yield pair
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute(CLEANUP)


def fresh_clients_see(proxy, setting: str) -> list:
    """What three fresh clients of the proxy read for `setting`, with where they read it."""
    seen = []
    for i in range(3):
        with psycopg.connect(proxy.dsn(), autocommit=True) as b:
            with bounded(b, 10, f"client B{i}"):
                for _ in range(2):
                    seen.append(tuple(b.execute(
                        f"SELECT current_setting('{setting}', true), inet_server_port()").fetchone()))
    return seen


@pytest.mark.timeout(90)
def test_s6_state_a_row_security_policy_sets_reaches_no_other_client(hidden, proxy):
    """A read of a table whose policy calls a STABLE user function that sets `s6h.leak`: it may run
    on a reader (the function is declared read-safe), but that reader connection is not handed to
    another client. Fresh clients read s6h.leak NULL, as on the primary."""
    pair = hidden
    with psycopg.connect(proxy.dsn(), autocommit=True) as a, \
            psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        with bounded(a, 10, "client A"):
            got = a.execute("SELECT count(*) FROM s6h_rls").fetchone()[0]
            assert got == twin.execute("SELECT count(*) FROM s6h_rls").fetchone()[0] == 2
    leaks = [s for s in fresh_clients_see(proxy, "s6h.leak") if s[0] is not None]
    assert not leaks, f"fresh clients saw s6h.leak: {leaks}"


@pytest.mark.timeout(90)
def test_s5_a_view_over_a_view_over_set_config_sets_the_sessions_state(hidden, proxy):
    """The state the nested view sets is the session's from then on, wherever its later reads run
    (S-5), and no other client's (S-6)."""
    pair = hidden
    with psycopg.connect(proxy.dsn(), autocommit=True) as a, \
            psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        with bounded(a, 10, "client A"):
            for c in (a, twin):
                assert c.execute("SELECT t FROM s6h_v2").fetchone()[0] == "nested"
            sql = "SELECT current_setting('s6h.tenant', true), x, inet_server_port() FROM s6h_plain"
            want = twin.execute(sql).fetchone()[:2]
            places = set()
            for _ in range(5):
                row = a.execute(sql).fetchone()
                assert row[:2] == want, f"on {row[2]}: {row[:2]}, primary {want}"
                places.add(row[2])
    leaks = [s for s in fresh_clients_see(proxy, "s6h.tenant") if s[0] is not None]
    assert not leaks, f"fresh clients saw s6h.tenant: {leaks}"


@pytest.mark.timeout(60)
def test_s7_a_view_over_a_sequence_answers_the_primarys_values(hidden, proxy):
    pair = hidden
    sql = "SELECT last_value, log_cnt, is_called FROM s6h_seq_v"
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        want = twin.execute(sql).fetchone()
    for i in range(3):
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            with bounded(c, 10, f"client {i}"):
                assert c.execute(sql).fetchone() == want


@pytest.mark.timeout(60)
def test_s5_an_aggregate_whose_transition_function_sets_state_runs_on_the_primary(hidden, proxy):
    """The aggregate itself is IMMUTABLE in pg_proc (the server sets it so); its volatile transition
    function calls set_config. The read runs where the session's state lives — the writer — and the
    session then has the setting, as on the primary; fresh clients do not."""
    pair = hidden
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin, \
            psycopg.connect(proxy.dsn(), autocommit=True) as a:
        assert twin.execute("SELECT provolatile FROM pg_proc WHERE proname = 's6h_agg'").fetchone()[0] == "i"
        with bounded(a, 10, "client A"):
            total, port = a.execute("SELECT s6h_agg(x), inet_server_port() FROM s6h_plain").fetchone()
            assert (total, port) == (1, pair.primary.port)
            twin.execute("SELECT s6h_agg(x) FROM s6h_plain")
            sql = "SELECT current_setting('s6h.agg', true)"
            assert a.execute(sql).fetchone() == twin.execute(sql).fetchone() == ("step",)
    leaks = [s for s in fresh_clients_see(proxy, "s6h.agg") if s[0] is not None]
    assert not leaks, f"fresh clients saw s6h.agg: {leaks}"


@pytest.mark.timeout(90)
def test_s6_a_view_created_through_the_proxy_is_judged_before_the_next_refresh(hidden, proxy):
    """DDL through the proxy: client A creates a view over set_config; client B reads it at once
    (the proxy's periodic refresh is 10 s away). The engine saw the DDL, keeps the database's reads
    on the primary and the proxy reloads the catalogue at once: B's read runs on the primary, later
    fresh clients see nothing of it, and plain reads are offloaded again soon after."""
    pair = hidden
    name = f"s6h_ddl_{int(time.monotonic() * 1000) % 100000}"
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            a.execute(f"CREATE VIEW {name} AS SELECT set_config('s6h.ddl', 'leaked', false) AS t")
            a.execute(f"GRANT SELECT ON {name} TO PUBLIC")
    try:
        pair.wait_replayed()
        with psycopg.connect(proxy.dsn(), autocommit=True) as b:
            with bounded(b, 10, "client B"):
                t, port = b.execute(f"SELECT t, inet_server_port() FROM {name}").fetchone()
                assert (t, port) == ("leaked", pair.primary.port)
        leaks = [s for s in fresh_clients_see(proxy, "s6h.ddl") if s[0] is not None]
        assert not leaks, f"fresh clients saw s6h.ddl: {leaks}"
        deadline = time.monotonic() + 10
        while True:
            with psycopg.connect(proxy.dsn(), autocommit=True) as c:
                with bounded(c, 10, "offload again"):
                    ports = [c.execute("SELECT inet_server_port() FROM s6h_plain").fetchone()[0] for _ in range(3)]
            if pair.standby.port in ports:
                break
            assert time.monotonic() < deadline, "plain reads did not return to the standby after the reload"
            time.sleep(0.2)
    finally:
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
            admin.execute(f"DROP VIEW IF EXISTS {name}")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("asan", [False, True], ids=["proxy", "proxy-asan"])
def test_s6_the_first_read_of_a_fresh_proxy_is_judged_by_the_first_catalogue_load(hidden, tmp_path, asan):
    """A proxy that just started has no catalogue of `app` until its first client connects; that
    client's first statement is a read of a view over set_config. The proxy holds the client's
    first statements until the database's first load (bounded by the load's timeout), so the read
    is judged by it: it runs on the primary, and nothing reaches later clients. Plain reads of the
    same fresh proxy still reach the standby. Plain and under AddressSanitizer (catalog.c's hold)."""
    pair = hidden
    fresh = start_proxy(pair, tmp_path / "fresh", asan=asan)
    try:
        with psycopg.connect(fresh.dsn(), autocommit=True) as a:
            with bounded(a, 15, "client A"):
                t, port = a.execute("SELECT t, inet_server_port() FROM s6h_v1").fetchone()
                assert (t, port) == ("nested", pair.primary.port)
        leaks = [s for s in fresh_clients_see(fresh, "s6h.tenant") if s[0] is not None]
        assert not leaks, f"fresh clients saw s6h.tenant: {leaks}"
        deadline = time.monotonic() + 10
        while True:
            with psycopg.connect(fresh.dsn(), autocommit=True) as c:
                with bounded(c, 10, "offload"):
                    ports = [c.execute("SELECT inet_server_port() FROM s6h_plain").fetchone()[0] for _ in range(3)]
            if pair.standby.port in ports:
                break
            assert time.monotonic() < deadline, "plain reads of the fresh proxy never reached the standby"
            time.sleep(0.2)
    finally:
        stop_proxy(fresh)
