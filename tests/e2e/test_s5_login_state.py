"""SPEC S-5 end to end: a reader connection logs in with the defaults of its own login — startup
options, `ALTER ROLE … SET`, `ALTER DATABASE … SET` as they are when it opens — and the settings
replay must bring it to the writer session's state whatever those are (examiner-style probe of
2026-12-05: before, the replay assumed a fresh reader starts where the writer's session started).

Found then, each a read on the standby that the primary would not give:
- a role set at login (`options=-c role=…`, `ALTER ROLE … SET role`) and dropped with `SET ROLE NONE`:
  reads ran as the login role (a table only that role may read was read);
- `ALTER ROLE … SET app.tenant` made after the session logged in: a row-level security policy over
  the placeholder showed another tenant's rows;
- `ALTER ROLE … SET search_path` after the session logged in: reads resolved names in the new
  schema.

The replay now always sets the role (`none` too) and ends with a login check that fails on a reader
holding a login default the replay did not set; the engine then closes that connection, captures
the writer's state again (with the names `pg_db_role_setting` has) and, refused twice, keeps the
session's reads on the primary."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, on_primary

SCHEMA = [
    "DROP TABLE IF EXISTS s5login_only_low, s5login_rls, public.s5login_t",
    "DROP SCHEMA IF EXISTS s5login_s CASCADE",
    "DROP FUNCTION IF EXISTS s5login_tenant()",
    *[f"DROP ROLE IF EXISTS {r}" for r in ("s5login_ni", "s5login_t", "s5login_c", "s5login_low")],
    "CREATE ROLE s5login_low NOLOGIN",
    "CREATE ROLE s5login_ni LOGIN NOINHERIT",
    "GRANT s5login_low TO s5login_ni",
    "CREATE ROLE s5login_t LOGIN",
    "CREATE ROLE s5login_c LOGIN",
    "CREATE TABLE s5login_only_low (x int)",
    "INSERT INTO s5login_only_low VALUES (7)",
    "GRANT SELECT ON s5login_only_low TO s5login_low",
    "CREATE SCHEMA s5login_s",
    "CREATE TABLE s5login_s.s5login_t (v text)",
    "INSERT INTO s5login_s.s5login_t VALUES ('in s5login_s')",
    "CREATE TABLE public.s5login_t (v text)",
    "INSERT INTO public.s5login_t VALUES ('in public')",
    "GRANT USAGE ON SCHEMA s5login_s TO PUBLIC",
    "GRANT SELECT ON s5login_s.s5login_t, public.s5login_t TO PUBLIC",
    "CREATE FUNCTION s5login_tenant() RETURNS int STABLE LANGUAGE sql"
    " AS $$ SELECT nullif(current_setting('app.s5login_tenant', true), '')::int $$",
    "CREATE TABLE s5login_rls (tenant int, secret text)",
    "INSERT INTO s5login_rls SELECT g % 3 + 1, 'sec-' || g FROM generate_series(1, 9) g",
    "ALTER TABLE s5login_rls ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY s5login_p ON s5login_rls FOR SELECT USING (tenant = s5login_tenant())",
    "GRANT SELECT ON s5login_rls TO PUBLIC",
]


@pytest.fixture(scope="module")
def login_schema(pair):
    on_primary(pair, *SCHEMA)
    yield
    on_primary(pair, *SCHEMA[:4], *[f"ALTER ROLE {r} RESET ALL" for r in ("s5login_t", "s5login_c")])


def dsn_as(base: str, user: str, **extra) -> str:
    parts = [p for p in base.split() if not p.startswith("user=")] + [f"user={user}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)


def outcome(c, sql: str):
    try:
        return c.execute(sql).fetchall()
    except psycopg.Error as e:
        return e.sqlstate


def role_dropped(dsn: str) -> list:
    """A session whose login sets a role (`-c role=…`), back to its own user with SET ROLE NONE."""
    with psycopg.connect(dsn, autocommit=True, options="-c role=s5login_low") as c, \
            bounded(c, 30, "role set at login, then SET ROLE NONE"):
        c.execute("SET ROLE NONE")
        return [(outcome(c, "SELECT current_user::text"), outcome(c, "SELECT x FROM s5login_only_low"))
                for _ in range(3)]


@pytest.mark.timeout(90)
def test_s5_a_role_set_at_login_and_dropped_is_dropped_on_readers_too(pair, proxy, login_schema):
    direct = role_dropped(dsn_as(pair.primary.dsn(dbname="app"), "s5login_ni"))
    assert direct == [([("s5login_ni",)], "42501")] * 3, direct
    proxied = role_dropped(dsn_as(proxy.dsn(), "s5login_ni"))
    assert proxied == direct, f"through the proxy {proxied}, the primary {direct}"


def after_alter(dsn: str, admin_dsn: str, alter: str, read: str, rounds: int = 4) -> list:
    """Reads before and after another session's `alter` of this login's defaults; each round
    after it changes application_name first, so the reads need reader connections opened after
    the ALTER (a new reader key)."""
    out = []
    with psycopg.connect(dsn, autocommit=True) as c, psycopg.connect(admin_dsn, autocommit=True) as admin, \
            bounded(c, 40, f"reads around {alter}"):
        out.append(("before", outcome(c, read)))
        admin.execute(alter)
        time.sleep(0.5)  # the standby replays the ALTER (200 ms apply delay)
        for i in range(rounds):
            c.execute(f"SET application_name = 's5login_{time.monotonic_ns()}_{i}'")
            time.sleep(0.3)
            out.append(("after", outcome(c, read)))
    return out


def values(rows: list) -> list:
    return [(when, r if isinstance(r, str) else [row[:-1] for row in r]) for when, r in rows]


def ports(rows: list) -> list:
    return [r[0][-1] for _, r in rows if not isinstance(r, str) and r]


@pytest.mark.timeout(120)
def test_s5_alter_role_set_of_a_placeholder_after_login_never_reaches_the_sessions_reads(pair, proxy, login_schema):
    admin = pair.primary.dsn(dbname="app")
    read = ("SELECT coalesce(string_agg(secret, ',' ORDER BY secret), '<none>'),"
            " current_setting('app.s5login_tenant', true), inet_server_port() FROM s5login_rls")
    runs = {}
    for name, dsn in (("primary", pair.primary.dsn(dbname="app")), ("proxy", proxy.dsn())):
        on_primary(pair, "ALTER ROLE s5login_t RESET ALL")
        runs[name] = after_alter(dsn_as(dsn, "s5login_t"), admin,
                                 "ALTER ROLE s5login_t SET app.s5login_tenant = '2'", read)
    assert values(runs["primary"]) == [("before", [("<none>", None)])] + [("after", [("<none>", None)])] * 4
    assert values(runs["proxy"]) == values(runs["primary"]), runs


@pytest.mark.timeout(120)
def test_s5_alter_role_set_of_a_setting_after_login_is_overridden_on_readers(pair, proxy, login_schema):
    admin = pair.primary.dsn(dbname="app")
    read = "SELECT v, current_setting('statement_timeout'), inet_server_port() FROM s5login_t"
    alter = "ALTER ROLE s5login_c SET search_path = s5login_s"
    runs = {}
    for name, dsn in (("primary", pair.primary.dsn(dbname="app")), ("proxy", proxy.dsn())):
        on_primary(pair, "ALTER ROLE s5login_c RESET ALL")
        runs[name] = after_alter(dsn_as(dsn, "s5login_c"), admin, alter, read)
    assert values(runs["primary"]) == [("before", [("in public", "0")])] + [("after", [("in public", "0")])] * 4
    assert values(runs["proxy"]) == values(runs["primary"]), runs
    # Once the capture has learned the name, reader connections opened after the ALTER serve
    # the session again.
    assert any(p in STANDBY_PORTS for p in ports(runs["proxy"][2:])), runs["proxy"]
