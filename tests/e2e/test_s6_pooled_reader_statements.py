"""SPEC S-6 end to end: a pooled reader connection carries the statements the engine prepared on it
for earlier sessions (`polarsplit_s_<hash>`, reused by the next session that parses the same
text). Code the engine cannot see into — a user function declared STABLE, trusted to run on a
reader — could list them through `pg_prepared_statements`: another client's statement text with
its literals (examiner-style probe of 2026-12-04, night). Before such code runs on a reader
connection, everything prepared there is dropped (the connection is closed after it anyway).

The first client reads with a parameter (psycopg's extended protocol: a statement prepared on the
reader), the second calls the function with the simple protocol: it must list what the primary
alone lists for a new session, nothing."""

from __future__ import annotations

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, on_primary, start_proxy, stop_proxy, wait_until

SECRET = "card=4111-1111-1111-1111"
# The listing comes from the built-in's C code under a user function's name (LANGUAGE internal).
# The catalogue reports such an alias as the built-in it runs (server-dependent here), so the
# engine is made not to know it: the functions are created on the primary directly, after the
# proxy loaded its catalogue (refreshed once in ten minutes), and the proxy lets unknown
# functions run on a reader (`unknown_functions = replica`) — code the engine cannot see into.
SETUP = [
    "CREATE FUNCTION s6p_ps(OUT name text, OUT statement text, OUT prepare_time timestamptz,"
    " OUT parameter_types regtype[], OUT from_sql boolean, OUT generic_plans int8, OUT custom_plans int8)"
    " RETURNS SETOF record STABLE LANGUAGE internal AS 'pg_prepared_statement'",
    "CREATE FUNCTION s6p_statements() RETURNS text STABLE LANGUAGE sql"
    " AS $$SELECT coalesce(string_agg(statement, ' | '), '') FROM s6p_ps()$$",
]
DROP = ["DROP FUNCTION IF EXISTS s6p_statements()", "DROP FUNCTION IF EXISTS s6p_ps()"]


@pytest.fixture(scope="module")
def unknown_proxy(pair, tmp_path_factory):
    on_primary(pair, *DROP)
    proxy = start_proxy(pair, tmp_path_factory.mktemp("unknown"), settings={"unknown_functions": "replica"},
                        extra=["--catalog-refresh-ms", "600000"])
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            c.execute("SELECT 1")  # the database's catalogue is loaded on its first session
        wait_until(lambda: (proxy.stats()["proxy"]["catalog_loads"] >= 1, None), "the proxy's catalogue load")
        on_primary(pair, *SETUP)

        def on_standby():
            with psycopg.connect(proxy.dsn(), autocommit=True) as c:
                with bounded(c, 10, "unknown function"):
                    port = int(c.pgconn.exec_(b"SELECT s6p_statements(), inet_server_port()").get_value(0, 1))
            return port in STANDBY_PORTS, port

        wait_until(on_standby, "the function's reads never reached the standby")
        yield proxy
    finally:
        stop_proxy(proxy)
        on_primary(pair, *DROP)


@pytest.mark.timeout(60)
def test_s6_code_on_a_pooled_reader_sees_no_statement_another_session_prepared_there(pair, unknown_proxy):
    proxy = unknown_proxy
    listed = []
    for _ in range(5):
        with psycopg.connect(proxy.dsn(), autocommit=True) as a:
            with bounded(a, 10, "first client"):
                row = a.execute(f"SELECT inet_server_port(), '{SECRET}' || %s::text", ["x"]).fetchone()
        assert row[0] in STANDBY_PORTS, "the first client's read did not run on the standby"
        with psycopg.connect(proxy.dsn(), autocommit=True) as b:
            with bounded(b, 10, "second client"):
                res = b.pgconn.exec_(b"SELECT s6p_statements(), inet_server_port()")
                listed.append((res.get_value(0, 0).decode(), int(res.get_value(0, 1))))
    with psycopg.connect(pair.primary.dsn(user="app_trust", dbname="app"), autocommit=True) as c:
        direct = c.pgconn.exec_(b"SELECT s6p_statements()").get_value(0, 0).decode()
    assert direct == ""
    assert any(port in STANDBY_PORTS for _, port in listed), f"no call ran on the standby: {listed}"
    assert all(text == direct for text, _ in listed), f"through the proxy: {listed}"
