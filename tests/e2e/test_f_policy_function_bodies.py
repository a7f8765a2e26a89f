"""SPEC §7 F-policy and S-7 end to end: a user function's body is judged, not only its declared
volatility (examiner-style probe of 2026-12-05). Before, a correctly labelled STABLE SQL function
over `pg_is_in_recovery()` or a sequence ran on the standby and answered what the primary would not;
a STABLE plpgsql function that writes and catches the standby's refusal lost its write there; and
DDL run by a function (EXECUTE 'CREATE VIEW …') was not seen as DDL, so other sessions read the new
view on the standby under a stale catalogue for up to the refresh period.

The example proxy now reports each user function's body with the objects (SQL bodies as
statements; other languages by a scan for DDL and writes), and a statement calling it is judged
as if it ran the body."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import bounded, on_primary, proxy_with_catalogue

FUNCTIONS = [
    "CREATE FUNCTION fb_plain() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    "CREATE FUNCTION fb_is_primary() RETURNS bool STABLE LANGUAGE sql AS 'SELECT NOT pg_is_in_recovery()'",
    "CREATE FUNCTION fb_seq_last() RETURNS bigint STABLE LANGUAGE sql AS 'SELECT last_value FROM fb_seq'",
    "CREATE FUNCTION fb_writer(n text) RETURNS int VOLATILE LANGUAGE plpgsql AS $$"
    " BEGIN INSERT INTO audit (note) VALUES (n); RETURN 1; END $$",
    # Mislabelled STABLE, calling a writer and swallowing a standby's refusal ("log, ignore failures").
    "CREATE FUNCTION fb_swallow(n text) RETURNS int STABLE LANGUAGE plpgsql AS $$"
    " BEGIN PERFORM fb_writer(n); RETURN 1;"
    " EXCEPTION WHEN OTHERS THEN RETURN 0; END $$",
    "CREATE FUNCTION fb_mkview(v text) RETURNS int VOLATILE LANGUAGE plpgsql AS $$"
    " BEGIN EXECUTE format('CREATE VIEW %I AS SELECT pg_is_in_recovery() AS r', v); RETURN 1; END $$",
]
DROP = ["DROP VIEW IF EXISTS fb_v1", "DROP SEQUENCE IF EXISTS fb_seq"] + [
    f"DROP FUNCTION IF EXISTS {f}" for f in ("fb_plain()", "fb_is_primary()", "fb_seq_last()",
                                             "fb_swallow(text)", "fb_writer(text)",
                                             "fb_mkview(text)")]


@pytest.fixture(scope="module")
def bodies(pair, tmp_path_factory):
    on_primary(pair, *DROP, "CREATE SEQUENCE fb_seq", "SELECT nextval('fb_seq') FROM generate_series(1, 5)",
               *FUNCTIONS, "GRANT ALL ON SEQUENCE fb_seq TO PUBLIC")
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("bodies"), "fb_plain()", DROP) as proxy:
        yield proxy


def both(pair, proxy, sql: str) -> tuple:
    with psycopg.connect(pair.primary.dsn(user="app_trust", dbname="app"), autocommit=True) as d, \
            psycopg.connect(proxy.dsn(), autocommit=True) as c, bounded(c, 20, sql):
        return d.execute(sql).fetchone()[0], c.execute(sql).fetchone()[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["fb_is_primary()", "fb_seq_last()"])
def test_s7_a_stable_function_over_a_server_dependent_body_answers_as_the_primary(pair, bodies, call):
    direct, proxied = both(pair, bodies, f"SELECT {call}")
    assert proxied == direct, f"{call}: through the proxy {proxied}, the primary {direct}"


@pytest.mark.timeout(60)
def test_f2_a_stable_function_whose_body_writes_never_runs_on_the_standby(pair, bodies):
    note = f"fb-{time.monotonic_ns()}"
    with psycopg.connect(bodies.dsn(), autocommit=True) as c, bounded(c, 20, "fb_swallow"):
        assert c.execute("SELECT fb_swallow(%s)", (note,)).fetchone()[0] == 1
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM audit WHERE note = %s", (note,)).fetchone()[0] == 1


@pytest.mark.timeout(60)
def test_s6_ddl_a_function_runs_changes_the_catalogue_at_once(pair, bodies):
    with psycopg.connect(bodies.dsn(), autocommit=True) as c, bounded(c, 20, "fb_mkview"):
        c.execute("SELECT fb_mkview('fb_v1')")
    time.sleep(0.5)  # the standby has replayed the view (200 ms apply delay); no refresh yet
    direct, proxied = both(pair, bodies, "SELECT r FROM fb_v1")
    assert proxied == direct, f"through the proxy {proxied}, the primary {direct}"
