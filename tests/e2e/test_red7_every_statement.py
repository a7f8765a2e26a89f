"""A user implicit cast between two built-in types whose source a keyword makes (CURRENT_DATE:
no name of the statement shows it) is judged for every statement of the database (SPEC S-7,
§7 F-policy; README "polarsplit: every statement"): `SELECT int4pl(CURRENT_DATE, 0)` runs the
cast `date → int` on the server that runs the read, so it must answer as the primary does. The
cast's function answers where it runs; while it exists no read of the database leaves the
primary (the documented offload cost), and after it is dropped reads are offloaded again."""

from __future__ import annotations

import time

import pytest

from e2e_support import STANDBY_PORTS, connect, on_primary, start_proxy, stop_proxy

OBJECTS = [
    "CREATE FUNCTION red7x_d2i(date) RETURNS int IMMUTABLE LANGUAGE sql AS"
    " 'SELECT CASE WHEN pg_is_in_recovery() THEN -1 ELSE 1 END'",
    "CREATE CAST (date AS int) WITH FUNCTION red7x_d2i(date) AS IMPLICIT",
]
DROP = ["DROP CAST IF EXISTS (date AS int)", "DROP FUNCTION IF EXISTS red7x_d2i(date)"]
SQL = "SELECT int4pl(CURRENT_DATE, 0), inet_server_port()"


def places(proxy, n=10, sql=SQL):
    out = []
    with connect(proxy.dsn()) as c:
        for _ in range(n):
            out.append(tuple(c.execute(sql).fetchone()))
            time.sleep(0.05)
    return out


@pytest.mark.timeout(90)
def test_s7_a_user_cast_a_keywords_value_runs_answers_as_the_primary(pair, tmp_path):
    on_primary(pair, *DROP)
    proxy = start_proxy(pair, tmp_path, extra=["--catalog-refresh-ms", "300"])
    try:
        # Offloaded without the cast (a session's first reads may stay on the writer).
        deadline = time.monotonic() + 10
        while not any(p in STANDBY_PORTS for _, p in places(proxy, 3, "SELECT 1, inet_server_port()")):
            assert time.monotonic() < deadline, "no read reached the standby"
        on_primary(pair, *OBJECTS)
        pair.wait_replayed()
        time.sleep(1.0)  # a few refreshes
        got = places(proxy)
        assert all(v == 1 for v, _ in got), f"through the proxy {got}; the primary answers 1"
    finally:
        stop_proxy(proxy)
        on_primary(pair, *DROP)
