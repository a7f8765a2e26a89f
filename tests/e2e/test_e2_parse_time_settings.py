"""SPEC E-2 end to end: a prepared statement keeps its parse. PostgreSQL reads a statement's literals
(and `x = NULL`) once, at the client's Parse, under the settings in force then; a later SET does not
change what the statement returns — except search_path, after which the server parses it again
itself. A reader that parses the statement later, under the session's new settings, would answer
something the primary never would (measured before the fix: the TimeZone, DateStyle,
transform_null_equals and array_nulls cases below all read the new setting's value on the standby).

Each case runs the same statements directly against the primary and through the example proxy, with
drivers that prepare (psycopg with prepare_threshold=0, asyncpg), and the answers must be equal; the
reads before the change must have been served by the standby, so the case went through a reader."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded

# name: (setting before, setting after, statement whose last column is inet_server_port()).
CASES = {
    "TimeZone": ("SET TimeZone = 'UTC'", "SET TimeZone = 'Asia/Tokyo'",
                 "SELECT '2020-01-01 00:00'::timestamptz::text, inet_server_port()"),
    "DateStyle": ("SET DateStyle = 'ISO, MDY'", "SET DateStyle = 'ISO, DMY'",
                  "SELECT '01/02/2020'::date::text, inet_server_port()"),
    "IntervalStyle": ("SET IntervalStyle = 'postgres'", "SET IntervalStyle = 'sql_standard'",
                      "SELECT extract(epoch FROM '-1 2:03:04'::interval)::text, inet_server_port()"),
    "transform_null_equals": ("SET transform_null_equals = off", "SET transform_null_equals = on",
                              "SELECT (NULL = NULL)::text, inet_server_port()"),
    "array_nulls": ("SET array_nulls = on", "SET array_nulls = off",
                    "SELECT (('{NULL}'::text[])[1] IS NULL)::text, inet_server_port()"),
    "RESET ALL": ("SET DateStyle = 'ISO, DMY'", "RESET ALL",
                  "SELECT '01/02/2020'::date::text, inet_server_port()"),
    # The server parses again after a search_path change: the new path's table, both ways.
    "search_path": ("SET search_path = e2_sa", "SET search_path = e2_sb",
                    "SELECT v, inet_server_port() FROM e2_t"),
}

# A SET LOCAL's value is reverted at the transaction's end, and the statement parsed under it
# keeps that parse.
IN_TXN = ("BEGIN", "SET LOCAL DateStyle = 'ISO, DMY'", "SELECT '01/02/2020'::date::text, inet_server_port()",
          "COMMIT")


@pytest.fixture(scope="module")
def schemas(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("DROP SCHEMA IF EXISTS e2_sa, e2_sb CASCADE")
        c.execute("CREATE SCHEMA e2_sa; CREATE SCHEMA e2_sb; CREATE TABLE e2_sa.e2_t (v text);"
                  "CREATE TABLE e2_sb.e2_t (v text); INSERT INTO e2_sa.e2_t VALUES ('a');"
                  "INSERT INTO e2_sb.e2_t VALUES ('b'); GRANT USAGE ON SCHEMA e2_sa, e2_sb TO PUBLIC;"
                  "GRANT SELECT ON e2_sa.e2_t, e2_sb.e2_t TO PUBLIC")
    pair.wait_replayed()


def psycopg_run(dsn: str, steps: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """('set', sql) runs a statement; ('read', sql) runs the prepared read twice."""
    out = []
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as c:
        with bounded(c, 30, "psycopg parse-time settings case"):
            for kind, sql in steps:
                if kind == "set":
                    c.execute(sql)
                else:
                    out += [tuple(c.execute(sql).fetchone()) for _ in range(2)]
    return out


def asyncpg_run(host: str, port: int, steps: list[tuple[str, str]]) -> list[tuple[str, int]]:
    async def run():
        c = await asyncpg.connect(host=host, port=port, user="app_trust", database="app", ssl=False, timeout=10)
        try:
            out, stmt = [], None
            for kind, sql in steps:
                if kind == "set":
                    await c.execute(sql)
                else:
                    # The same prepared statement before and after the change, as a pool of
                    # prepared statements reuses it.
                    stmt = stmt or await c.prepare(sql)
                    out += [tuple(await stmt.fetchrow()) for _ in range(2)]
            return out
        finally:
            await c.close()

    return asyncio.run(asyncio.wait_for(run(), 30))


def steps_of(name: str) -> list[tuple[str, str]]:
    before, after, read = CASES[name]
    return [("set", before), ("read", read), ("set", after), ("read", read)]


def check(name, direct, proxied, n_before):
    assert [v for v, _ in proxied] == [v for v, _ in direct], (
        f"{name}: through the proxy {proxied}, the primary alone {direct}")
    assert all(port in STANDBY_PORTS for _, port in proxied[:n_before]), (
        f"{name}: the reads before the change did not run on the standby: {proxied}")


@pytest.mark.parametrize("name", list(CASES))
def test_e2_a_prepared_statement_keeps_the_parse_of_its_settings_psycopg(pair, proxy, schemas, name):
    steps = steps_of(name)
    direct = psycopg_run(pair.primary.dsn(user="app_trust", dbname="app"), steps)
    proxied = psycopg_run(proxy.dsn(), steps)
    check(name, direct, proxied, 2)


@pytest.mark.parametrize("name", ["TimeZone", "DateStyle", "transform_null_equals", "search_path"])
def test_e2_a_prepared_statement_keeps_the_parse_of_its_settings_asyncpg(pair, proxy, schemas, name):
    steps = steps_of(name)
    direct = asyncpg_run("127.0.0.1", pair.primary.port, steps)
    proxied = asyncpg_run("127.0.0.1", proxy.port, steps)
    check(name, direct, proxied, 2)


def test_e2_a_statement_parsed_under_set_local_keeps_that_parse_after_commit(pair, proxy):
    begin, set_local, read, commit = IN_TXN
    steps = [("set", begin), ("set", set_local), ("read", read), ("set", commit), ("read", read)]
    direct = psycopg_run(pair.primary.dsn(user="app_trust", dbname="app"), steps)
    proxied = psycopg_run(proxy.dsn(), steps)
    assert [v for v, _ in proxied] == [v for v, _ in direct], (
        f"through the proxy {proxied}, the primary alone {direct}")
    assert direct[-1][0] == "2020-02-01", "the server keeps the parse of the SET LOCAL's DateStyle"
