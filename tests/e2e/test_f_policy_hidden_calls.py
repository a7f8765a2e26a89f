"""SPEC §7 F-policy, S-6, S-7 end to end: code a read runs though its text never names it
(examiners' probes of 2026-12-05, all answered by the standby before):

- a plpgsql body that calls a function under a quoted name (`"pg_is_in_recovery"()`) or with a
  comment before its parenthesis, which the body scan did not see as a call;
- a plpgsql body that returns `CURRENT_TIMESTAMP` inside a transaction block: split off the block,
  it answered the reader's own transaction's time;
- a default argument value (`DEFAULT pg_is_in_recovery()`), evaluated in the calling statement;
- a domain's CHECK reached through a function's argument type or a composite type's field;
- a user operator called by a spelling that does not show it (`LIKE` calls `~~`).

The catalogue query (`polarsplit::CATALOG_QUERY`) now reports each of them with the function or
type, and a statement using it is judged as if it ran that code."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import bounded, on_primary, proxy_with_catalogue

OBJECTS = [
    "CREATE FUNCTION hc_plain() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    "CREATE FUNCTION hc_quoted() RETURNS bool STABLE LANGUAGE plpgsql AS $$"
    " BEGIN RETURN NOT \"pg_is_in_recovery\"(); END $$",
    "CREATE FUNCTION hc_commented() RETURNS bool STABLE LANGUAGE plpgsql AS $$"
    " BEGIN RETURN NOT pg_is_in_recovery/**/(); END $$",
    "CREATE FUNCTION hc_now() RETURNS timestamptz STABLE LANGUAGE plpgsql AS $$"
    " BEGIN RETURN CURRENT_TIMESTAMP; END $$",
    "CREATE FUNCTION hc_default(x bool DEFAULT NOT pg_is_in_recovery()) RETURNS bool STABLE"
    " LANGUAGE sql AS 'SELECT x'",
    "CREATE DOMAIN hc_dom AS int CHECK (VALUE < 0 OR pg_is_in_recovery())",
    "CREATE FUNCTION hc_arg(v hc_dom) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 1'",
    "CREATE TYPE hc_comp AS (v hc_dom)",
    # A user `~~` on (text, int): `'x' LIKE 7` calls it though the text shows no operator.
    "CREATE FUNCTION hc_like(a text, b int) RETURNS bool STABLE LANGUAGE sql"
    " AS 'SELECT NOT pg_is_in_recovery()'",
    "CREATE OPERATOR ~~ (LEFTARG = text, RIGHTARG = int, FUNCTION = hc_like)",
]
DROP = ["DROP OPERATOR IF EXISTS ~~ (text, int)", "DROP FUNCTION IF EXISTS hc_like(text, int)",
        "DROP FUNCTION IF EXISTS hc_plain()", "DROP FUNCTION IF EXISTS hc_quoted()",
        "DROP FUNCTION IF EXISTS hc_commented()", "DROP FUNCTION IF EXISTS hc_now()",
        "DROP FUNCTION IF EXISTS hc_default(bool)", "DROP FUNCTION IF EXISTS hc_arg(hc_dom)",
        "DROP TYPE IF EXISTS hc_comp", "DROP DOMAIN IF EXISTS hc_dom"]


@pytest.fixture(scope="module")
def hidden(pair, tmp_path_factory):
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("hidden"), "hc_plain()", DROP) as proxy:
        yield proxy


def answer(dsn: str, sql: str):
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 20, sql):
        try:
            return c.execute(sql).fetchone()[0]
        except psycopg.Error as e:
            return e.sqlstate


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", [
    "SELECT hc_quoted()",
    "SELECT hc_commented()",
    "SELECT hc_default()",
    "SELECT hc_arg(5)",
    "SELECT (ROW(5)::hc_comp).v",
    "SELECT 'x' LIKE 7",
])
def test_s7_code_the_text_does_not_name_answers_as_the_primary(pair, hidden, sql):
    direct = answer(pair.primary.dsn(user="app_trust", dbname="app"), sql)
    proxied = answer(hidden.dsn(), sql)
    assert proxied == direct, f"{sql}: through the proxy {proxied!r}, the primary {direct!r}"


@pytest.mark.timeout(60)
def test_p5_current_timestamp_in_a_function_body_is_the_blocks_time(pair, hidden):
    with psycopg.connect(hidden.dsn()) as c, bounded(c, 20, "hc_now"):
        start = c.execute("SELECT transaction_timestamp()").fetchone()[0]
        c.execute("SELECT count(*) FROM accounts").fetchone()
        time.sleep(0.3)
        got = c.execute("SELECT hc_now()").fetchone()[0]
        c.rollback()
    assert got == start, f"hc_now() answered {got}, the block began at {start}"
