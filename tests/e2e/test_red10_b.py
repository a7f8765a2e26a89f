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

# -- Finding 1: DDL in a DO block's dollar-quoted string is not seen --------------------------------

PLAIN = "CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql AS $$SELECT 'plain'::text$$"
SERVER_DEPENDENT = ("CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql"
                    " AS $q$SELECT pg_is_in_recovery()::text$q$")
# A migration step as tools write it: dynamic DDL in a dollar-quoted string (format($f$…$f$, …)).
DO_DDL = f"DO $d$BEGIN EXECUTE $e${SERVER_DEPENDENT}$e$; END$d$"
CALL = "SELECT r10b.f(), inet_server_port()"


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
