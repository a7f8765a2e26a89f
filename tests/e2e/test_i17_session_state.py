"""Issue 17 (S-5, S-6) end to end: a read through the proxy runs with exactly the writer session's
state — settings, role, session authorization — and no client's state reaches another client.

The oracle is PostgreSQL itself: every proxied client has a *twin*, a direct connection to the
primary as the same user that runs exactly the same statements. The twin's answers are what the
writer session's answers are (the proxy forwards every statement to the writer), so after each step
the proxied client's state reads — every tracked setting, current_user and session_user, values that
show them (a timestamptz, an interval, a backslash literal), and reads whose privileges or row-level
security depend on them — must equal the twin's. `inet_server_port()` in each read says where it ran
(it stays replica-safe on purpose, S-7); the counts of reads the standby answered are reported.

Security: a read through the proxy that succeeds, or returns rows, where the primary (the twin)
refuses it or returns fewer is a violation, whatever the sequence.

The property test runs SEQUENCES seeded sequences (deterministic; S5_BASE_SEED moves the window,
S5_SEED runs one sequence and prints its trace). Each sequence has two proxied clients (and their
twins) taking random steps, so pooled reader connections pass between clients."""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field

import psycopg
import pytest

from e2e_support import bounded, on_primary, report, start_proxy, stop_proxy

SEQUENCES = int(os.environ.get("S5_SEQUENCES", "200"))
BASE_SEED = int(os.environ.get("S5_BASE_SEED", "170500"))
ONE_SEED = os.environ.get("S5_SEED")

SETUP = r"""
CREATE ROLE s5_admin LOGIN SUPERUSER;
CREATE ROLE s5_rr NOLOGIN;
CREATE ROLE s5_ru NOLOGIN IN ROLE s5_rr;
CREATE ROLE s5_other NOLOGIN;
-- A web application's login: may SET ROLE s5_rr, but has none of its privileges without it.
CREATE ROLE s5_web LOGIN NOINHERIT IN ROLE s5_rr;
CREATE TABLE s5_only_ru (x int);
INSERT INTO s5_only_ru VALUES (1);
GRANT SELECT ON s5_only_ru TO s5_ru;
CREATE TABLE s5_only_rr (x int);
INSERT INTO s5_only_rr VALUES (1), (2);
GRANT SELECT ON s5_only_rr TO s5_rr;
CREATE TABLE s5_tenant (tenant text, secret text);
INSERT INTO s5_tenant VALUES ('acme', 'acme-1'), ('acme', 'acme-2'), ('globex', 'globex-1');
ALTER TABLE s5_tenant ENABLE ROW LEVEL SECURITY;
CREATE POLICY s5_tenant_p ON s5_tenant FOR SELECT USING (tenant = current_setting('app.tenant', true));
GRANT SELECT ON s5_tenant TO PUBLIC;
CREATE SCHEMA s5_a;
CREATE SCHEMA s5_b;
CREATE TABLE s5_a.t (v text);
INSERT INTO s5_a.t VALUES ('in s5_a');
CREATE TABLE s5_b.t (v text);
INSERT INTO s5_b.t VALUES ('in s5_b');
GRANT USAGE ON SCHEMA s5_a, s5_b TO PUBLIC;
GRANT SELECT ON s5_a.t, s5_b.t TO PUBLIC;
-- Session state changed by code the engine cannot see into.
CREATE FUNCTION set_tenant(t text) RETURNS text LANGUAGE sql AS $$ SELECT set_config('app.tenant', t, false) $$;
CREATE FUNCTION s5_set_role(r text) RETURNS text LANGUAGE sql AS $$ SELECT set_config('role', r, false) $$;
"""

# Everything tracked, in one read. The literals show the settings' effect, not only their names.
STATE = r"""SELECT current_setting('search_path'), current_setting('TimeZone'), current_setting('DateStyle'),
 current_setting('IntervalStyle'), current_setting('client_encoding'), current_setting('standard_conforming_strings'),
 current_setting('application_name'), current_setting('statement_timeout'), current_setting('lock_timeout'),
 current_setting('extra_float_digits'), current_setting('role'), current_setting('session_authorization'),
 current_setting('app.tenant', true), current_user::text, session_user::text,
 '2024-01-02 03:04:05+00'::timestamptz::text, '1 day 02:03:04'::interval::text, length('a\b'),
 inet_server_port()"""
STATE_FIELDS = ("search_path", "TimeZone", "DateStyle", "IntervalStyle", "client_encoding",
                "standard_conforming_strings", "application_name", "statement_timeout", "lock_timeout",
                "extra_float_digits", "role", "session_authorization", "app.tenant", "current_user",
                "session_user", "timestamptz literal", "interval literal", "length('a\\b')")

# Reads whose answer depends on privileges and row-level security: name -> SQL.
# The first three are schema-qualified: only privileges and row-level security decide them.
GUARDED = {
    "s5_only_ru": "SELECT count(*)::text, inet_server_port() FROM public.s5_only_ru",
    "s5_only_rr": "SELECT count(*)::text, inet_server_port() FROM public.s5_only_rr",
    "s5_tenant (RLS)": ("SELECT coalesce(string_agg(secret, ',' ORDER BY secret), ''), inet_server_port() "
                        "FROM public.s5_tenant"),
    "t (search_path)": "SELECT v, inet_server_port() FROM t",
}
SECURITY = ("s5_only_ru", "s5_only_rr", "s5_tenant (RLS)")

# -- The statements a sequence draws from ------------------------------------------------------
SETTINGS = [
    "SET search_path TO s5_a, public", "SET search_path = s5_b", "SET SCHEMA 's5_b'", "RESET search_path",
    "SET search_path TO DEFAULT",
    "SET TIME ZONE 'America/New_York'", "SET TIME ZONE LOCAL", "SET timezone TO 'Asia/Tokyo'", "RESET timezone",
    "SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE", "SET TimeZone = 'UTC'",
    "SET datestyle TO iso", "SET datestyle TO ymd", "SET DateStyle = german", "SET datestyle TO 'sql, dmy'",
    "SET datestyle TO postgres", "RESET datestyle",
    "SET NAMES 'LATIN1'", "SET client_encoding TO 'UTF8'", "SET NAMES DEFAULT", "RESET client_encoding",
    "SET standard_conforming_strings TO off", "SET standard_conforming_strings = on",
    "RESET standard_conforming_strings",
    "SET IntervalStyle TO iso_8601", "SET intervalstyle = sql_standard", "RESET IntervalStyle",
    "SET application_name TO 's5-app'", "SET application_name = 'other-app'",
    "SET statement_timeout TO '7s'", "SET statement_timeout = 0", "SET lock_timeout TO 3000",
    "SET extra_float_digits TO 0",
    "SET app.tenant TO 'acme'", "SET app.tenant = 'globex'", "RESET app.tenant",
    "SELECT set_config('app.tenant', 'globex', false)", "SELECT set_tenant('acme')",
]
ROLES = [
    "SET ROLE s5_rr", "SET ROLE s5_ru", "SET ROLE s5_other", "SET ROLE NONE", "RESET ROLE",
    "SELECT set_config('role', 's5_rr', false)", "SELECT s5_set_role('s5_ru')",
    "SET SESSION AUTHORIZATION s5_ru", "SET SESSION AUTHORIZATION s5_other", "SET SESSION AUTHORIZATION DEFAULT",
    "RESET SESSION AUTHORIZATION",
]
CODE = [
    "DO $$BEGIN EXECUTE 'SET ROLE s5_rr'; END$$",
    "DO $$BEGIN EXECUTE 'SET search_path TO s5_b'; END$$",
    "DO $$BEGIN PERFORM set_config('app.tenant', 'globex', false); END$$",
    "RESET ALL",
    "DISCARD ALL",
]
IN_TXN = [
    "SET LOCAL search_path TO s5_b", "SET LOCAL TIME ZONE 'Europe/Lisbon'", "SET LOCAL datestyle TO ymd",
    "SET LOCAL ROLE s5_rr", "SET LOCAL app.tenant = 'acme'", "SELECT set_config('app.tenant', 'globex', true)",
    "SET LOCAL standard_conforming_strings TO off",
]


def draw(rnd: random.Random, in_txn: bool) -> str:
    if in_txn:
        pool = rnd.choices([SETTINGS, ROLES, IN_TXN, ["COMMIT", "ROLLBACK", "END", "ABORT"]], [4, 2, 4, 3])[0]
    else:
        pool = rnd.choices([SETTINGS, ROLES, CODE, ["BEGIN", "START TRANSACTION"]], [6, 3, 2, 2])[0]
    return rnd.choice(pool)


# -- Running a statement on a connection, as a comparable outcome --------------------------------

def ex(conn, sql: str):
    """Runs sql. A connection made with EXTENDED as its cursor factory speaks the extended protocol
    for every statement (psycopg sends a statement without parameters as a simple Query unless binary
    results are asked for); one made with ClientCursor, the simple protocol."""
    return conn.execute(sql, binary=True) if conn.cursor_factory is EXTENDED else conn.execute(sql)


def outcome(conn, sql: str):
    """('ok', row without the port, port) or ('error', SQLSTATE, None)."""
    try:
        cur = ex(conn, sql)
        row = cur.fetchone() if cur.description else None
    except psycopg.Error as e:
        if conn.broken or conn.closed:
            raise
        return ("error", e.sqlstate, None)
    if row is not None and cur.description[-1].name == "inet_server_port":
        return ("ok", tuple(row[:-1]), row[-1])
    return ("ok", tuple(row) if row is not None else None, None)


class EXTENDED(psycopg.Cursor):
    """The cursor of the extended-protocol sequences (see outcome())."""


@dataclass
class Client:
    name: str
    proxied: psycopg.Connection
    twin: psycopg.Connection


@dataclass
class Result:
    seed: int
    trace: list[str] = field(default_factory=list)
    divergence: str | None = None      # the first difference between a proxied read and its twin
    diverged_on: str = ""              # what differed first (a state field, a guarded read, a step)
    violations: list[str] = field(default_factory=list)  # reads the primary refused or restricted
    reads: int = 0
    on_standby: int = 0


def compare(res: Result, client: Client, label: str, sql: str, standby_port: int) -> None:
    got = outcome(client.proxied, sql)
    want = outcome(client.twin, sql)
    res.reads += 1
    res.on_standby += got[2] == standby_port
    where = "standby" if got[2] == standby_port else ("primary" if got[2] else "?")
    refused = want[0] == "error" and want[1] == "42501"
    if label in SECURITY and got[0] == "ok" and (refused or (want[0] == "ok" and got[1] != want[1])):
        res.violations.append(f"{client.name} read {label} through the proxy on the {where}: got {got[1]}, "
                              f"the primary answered {want[1]} (after: {' ; '.join(res.trace)})")
    if got[:2] != want[:2] and res.divergence is None:
        if label == "state" and got[0] == want[0] == "ok":
            diffs = [f"{n}: reader {a!r} != writer {b!r}" for n, a, b in zip(STATE_FIELDS, got[1], want[1]) if a != b]
            res.diverged_on = ",".join(d.split(":")[0] for d in diffs)
        else:
            diffs = [f"proxy {got[:2]} != primary {want[:2]}"]
            res.diverged_on = f"{label} read"
        res.divergence = (f"seed {res.seed}, {client.name}, {label} read on the {where}: {'; '.join(diffs)}\n"
                          f"    after: {' ; '.join(res.trace)}")


def check(res: Result, client: Client, standby_port: int) -> None:
    compare(res, client, "state", STATE, standby_port)
    for label, sql in GUARDED.items():
        compare(res, client, label, sql, standby_port)


def run_sequence(seed: int, proxy, pair) -> Result:
    rnd = random.Random(seed)
    res = Result(seed)
    cursor = rnd.choice([psycopg.ClientCursor, EXTENDED])  # simple or extended protocol
    res.trace.append(f"[{'simple' if cursor is psycopg.ClientCursor else 'extended'} protocol]")
    clients = []
    try:
        for name in ("A", "B"):
            proxied = psycopg.connect(proxy.dsn(user="s5_admin"), autocommit=True, cursor_factory=cursor)
            twin = psycopg.connect(pair.primary.dsn(user="s5_admin", dbname="app"), autocommit=True,
                                   cursor_factory=cursor)
            clients.append(Client(name, proxied, twin))
        with bounded(clients[0].proxied, 30, f"seed {seed} (A)"), bounded(clients[1].proxied, 30, f"seed {seed} (B)"):
            for c in clients:  # a fresh client sees nothing of the pooled readers' earlier users
                check(res, c, pair.standby.port)
            for _ in range(rnd.randint(4, 10)):
                c = rnd.choice(clients)
                in_txn = c.twin.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
                sql = draw(rnd, in_txn)
                res.trace.append(f"{c.name}: {sql}")
                got, want = outcome(c.proxied, sql), outcome(c.twin, sql)
                if got[:2] != want[:2] and res.divergence is None:
                    res.diverged_on = "step answer"
                    res.divergence = (f"seed {seed}, {c.name}: {sql!r} answered {got[:2]} through the proxy, "
                                      f"{want[:2]} on the primary\n    after: {' ; '.join(res.trace)}")
                check(res, c, pair.standby.port)
            for c in clients:
                check(res, c, pair.standby.port)
    except (psycopg.Error, AssertionError) as e:
        res.diverged_on = res.diverged_on or "session failed"
        res.divergence = res.divergence or f"seed {seed}: the proxied session failed: {e}\n    after: {' ; '.join(res.trace)}"
    finally:
        for c in clients:
            c.proxied.close()
            c.twin.close()
    return res


@pytest.fixture(scope="module")
def s5_objects(pair):
    on_primary(pair, SETUP)
    return pair


@pytest.mark.timeout(120)
def test_s5_oracle_control_a_primary_only_proxy_never_diverges(s5_objects, tmp_path):
    """The harness's own check: through a proxy that sends everything to the primary, proxied
    clients and their twins agree on every read of 40 sequences — so a divergence in the property
    test below is the engine's, not the oracle's."""
    px = start_proxy(s5_objects, tmp_path, mode="primary-only")
    try:
        results = [run_sequence(seed, px, s5_objects) for seed in range(BASE_SEED, BASE_SEED + 40)]
    finally:
        stop_proxy(px)
    assert sum(r.reads for r in results) > 40 * 10
    assert [r.divergence for r in results if r.divergence] == []
    assert [r.violations for r in results if r.violations] == []


@pytest.fixture(scope="module")
def s5_results(s5_objects, proxy):
    seeds = [int(ONE_SEED)] if ONE_SEED else range(BASE_SEED, BASE_SEED + SEQUENCES)
    results = [run_sequence(seed, proxy, s5_objects) for seed in seeds]
    if ONE_SEED:
        print("\n".join(results[0].trace))
    diverged = [r for r in results if r.divergence]
    violating = [r for r in results if r.violations]
    reads = sum(r.reads for r in results)
    standby = sum(r.on_standby for r in results)
    report("issue 17", f"S-5/S-6 property test: {len(results)} sequences (seeds {seeds[0]}..{seeds[-1]}), "
                       f"{reads} compared reads, {standby} answered by the standby; {len(diverged)} sequences with "
                       f"a reader state != the writer's, {len(violating)} with a read the primary refused or restricted "
                       f"({sum(len(r.violations) for r in results)} such reads)")
    if diverged:
        first = Counter(f for r in diverged for f in r.diverged_on.split(",")).most_common()
        report("issue 17", "  what differed at each sequence's first divergence (sequences): "
               + ", ".join(f"{k} {v}" for k, v in first))
    for r in diverged[:3]:
        report("issue 17", "  diverged: " + r.divergence.splitlines()[0])
    for r in violating[:3]:
        report("issue 17", "  violation: seed " + str(r.seed) + ": " + r.violations[0].split(" (after:")[0])
    return results


@pytest.mark.timeout(240)
def test_s5_reader_state_equals_writer_state_after_every_step(s5_results):
    diverged = [r for r in s5_results if r.divergence]
    assert len(s5_results) >= min(SEQUENCES, 200) or ONE_SEED
    assert not diverged, (f"{len(diverged)} of {len(s5_results)} sequences diverged; rerun one with S5_SEED=<seed>:\n"
                          + "\n".join(r.divergence for r in diverged[:5]))


@pytest.mark.timeout(240)
def test_s5_s6_no_read_succeeds_where_the_primary_refuses_it(s5_results):
    violating = [r for r in s5_results if r.violations]
    assert not violating, (f"{len(violating)} of {len(s5_results)} sequences read what the primary refused; "
                           "rerun one with S5_SEED=<seed>:\n" + "\n".join(r.violations[0] for r in violating[:5]))


# -- S-6: the RLS tenant pattern across clients ---------------------------------------------------

TENANT_READ = ("SELECT coalesce(string_agg(secret, ',' ORDER BY secret), ''), coalesce(current_setting('app.tenant', true), ''), "
               "inet_server_port() FROM s5_tenant")
ROLE_READ = "SELECT current_user::text, current_setting('role'), inet_server_port()"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_s6_tenant_set_by_a_function_reaches_no_other_client(s5_objects, proxy, protocol):
    """Client A runs `SELECT set_tenant('acme')` (a SQL function calling set_config) and reads its
    rows; then three other clients, each a fresh session that set no tenant, must read none of them —
    as on the primary. The same for `set_config('role', ...)`: the others stay s5_web, without
    s5_rr's privileges (s5_web is NOINHERIT)."""
    cursor = psycopg.ClientCursor if protocol == "simple" else EXTENDED
    leaks, seen = [], []
    with psycopg.connect(proxy.dsn(user="s5_web"), autocommit=True, cursor_factory=cursor) as a:
        with bounded(a, 10, "client A"):
            ex(a, "SELECT set_tenant('acme')")
            secrets, tenant, port = ex(a, TENANT_READ).fetchone()
            seen.append(f"A read {secrets!r} on port {port}")
            assert (secrets, tenant) == ("acme-1,acme-2", "acme"), f"A's own tenant: {secrets!r}, {tenant!r}"
            ex(a, "SELECT set_config('role', 's5_rr', false)")
            assert ex(a, ROLE_READ).fetchone()[:2] == ("s5_rr", "s5_rr")
        for i in range(3):
            with psycopg.connect(proxy.dsn(user="s5_web"), autocommit=True, cursor_factory=cursor) as b:
                with bounded(b, 10, f"client B{i}"):
                    for _ in range(4):  # several reads: the pool may hold more than one reader
                        secrets, tenant, port = ex(b, TENANT_READ).fetchone()
                        user, role, port2 = ex(b, ROLE_READ).fetchone()
                        if secrets or tenant:
                            leaks.append(f"B{i} read {secrets!r} (app.tenant {tenant!r}) on port {port}")
                        if (user, role) != ("s5_web", "none"):
                            leaks.append(f"B{i} ran as {user!r} (role {role!r}) on port {port2}")
                    try:
                        ex(b, "SELECT count(*), inet_server_port() FROM s5_only_rr")
                        leaks.append(f"B{i} read s5_only_rr, which s5_web (without SET ROLE) may not")
                    except psycopg.errors.InsufficientPrivilege:
                        pass
    report("issue 17", f"S-6 tenant/role leak ({protocol}): {len(leaks)} leaking reads of 3 later clients"
                       + (f", e.g. {leaks[0]}" if leaks else ""))
    assert not leaks, "; ".join(leaks[:6])
