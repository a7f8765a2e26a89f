"""Examiner round 8, area b (red8-b): identity, session state and isolation between clients that
share the example proxy's pooled reader connections (SPEC S-4…S-7, P-9), against the real
primary + hot standby, each answer compared with a twin connection to the primary alone; where a
read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded
(statement_timeout, connect_timeout, e2e_support.bounded / socket deadlines).

Findings: none. No probe of this round made a client see through the proxy what the primary alone
would not show it, or another client's state, or run as another user. The three tests below are
guards of the risks that held and that no earlier module exercises in this form (truly
concurrent clients on one proxy; an implicit extended-protocol transaction whose local setting
rules the read behind it; a client gone mid-result whose reader connection the next clients get).

What held (measured once on main at 7e6ae65, not kept as tests): temporary objects made without
the TEMP keyword (`CREATE TABLE/VIEW/SEQUENCE pg_temp.x`, `CREATE TABLE "pg_temp".x`, `SELECT … INTO
pg_temp.x`, `SET search_path = pg_temp, public` then `CREATE TABLE x`, a `pg_temp` function called
as `pg_temp.f()`) and failed attempts (UNLOGGED, MATERIALIZED VIEW in pg_temp) kept the session's
reads on the writer, shadowing as on the primary; `pg_my_temp_schema()`/`current_schemas(true)`
after `DISCARD TEMP`/`DISCARD ALL` stayed on the writer. Settings that change answers, each set
then read on the standby: lc_monetary, default_text_search_config, array_nulls,
transform_null_equals, xmlbinary, xmloption, bytea_output, IntervalStyle, extra_float_digits,
DateStyle (also `German`), TimeZone (also `SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE`, POSIX
`UTC+3`), timezone_abbreviations, enable_seqscan, row_security, standard_conforming_strings = off
with a placeholder and application_name holding backslashes, quotes and a newline,
quote_all_identifiers, client_min_messages, search_path of a schema named `Odd, "S" x`, `''`
and `'', public`; plpgsql.check_asserts / plpgsql.variable_conflict (reads stayed on the writer).
Roles and identity: SET ROLE / RESET ROLE / SET LOCAL ROLE / set_config('role', …, true) in a
block / RESET ALL / DISCARD ALL / SET SESSION AUTHORIZATION (self, DEFAULT, by a superuser to
another login and back, inside a rolled-back block) with a row-level security policy over
current_user, session_user and current_setting('app.tenant') and a SECURITY DEFINER function
showing current_user/session_user; a role named `R8 "q"`; `COMMIT/END/ROLLBACK AND CHAIN` after a
SET ROLE, a placeholder, set_config or TimeZone in the block (the chained block's reads stayed on
the writer). Startup state: `options` `--app.tenant=t2`, `-capp.tenant=t2`, `-c app.tenant=t\\ 2`,
and raw startup parameters `app.tenant`, `TimeZone`, `search_path`, `role` (and a refused
`session_authorization`), all answered as on the primary; one user reading three databases
through one proxy got each database's own reader (and a same-named function of another database
was judged by that database's catalogue). set_config of `app.tenant` spelled `$$…$$`, `$x$…$x$`,
`E''`, `U&''` (with escapes), `'APP.Tenant'`, `N''`, `::varchar`, `text '…'`, parenthesised,
COLLATE, a comment inside, `FROM set_config(…)`, quoted `pg_catalog."set_config"`. SET of the
placeholder spelled `"app.tenant"`, `app."tenant"`, `"app"."tenant"`, `app.U&"t\\0065nant"`, `app . tenant`,
`app/*c*/.tenant`, a newline before `tenant`, `app."TENANT"`, `APP.TENANT`, `SET SESSION … TO`, an
unquoted value, `E''`/`U&''`/`$$…$$` values; a non-ASCII tenant (`chr(233)||chr(8364)`,
`U&'\\00E9'`) read after `SET client_encoding = 'LATIN9'`. A function name that resolves to the
login's own schema through `"$user"` (`app_trust.f`, server-dependent) and to `public.f`
(plain) after SET ROLE: each read answered as on the primary. `plpgsql.check_asserts` set (SET and
set_config), read through a plpgsql ASSERT on the standby, then RESET / SET TO DEFAULT: the
next reads of the session and of a new client raised the primary's P0004 (no reader kept the
dotted setting, which the digest does not cover). `client_min_messages = debug5`: the same DEBUG
lines as the primary's, also across a replay. A pipelined `DISCARD ALL` / `RESET ALL` /
`SET SESSION AUTHORIZATION DEFAULT` (behind a Sync, in one Sync, behind a Flush, as a Query
before a Parse) ruled the read behind it. `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` in a block
kept the block's later reads on the writer (the standby would wait on the replayed lock). Advisory lock
functions (all ten forms, and an xact lock in a block) ran on the primary; `UPDATE pg_settings`
of TimeZone. Pooled readers: psycopg prepared and parameterised reads of parse-time literals
(timestamptz, date, '{NULL}', `= NULL`) across five clients switching TimeZone/DateStyle/RESET ALL
(120 reads, none wrong); two psycopg clients with `prepare_threshold=0` (equal `_pg3_n` names)
under random SET/RESET ALL/SET ROLE/blocks; 8 concurrent clients × 200 random steps (TimeZone,
set_config of a tenant, SET/RESET ROLE, DISCARD ALL, reconnects, SET in committed and rolled-back
blocks, SET LOCAL ROLE) — 1600 reads, all on the standby, none wrong; a client closing (RST,
FIN, Terminate) in the middle of a 3-million-row result or of a read in a block, then four
clients reading at once. The idle_session_timeout a session sets is replayed on its readers
without losing the session. A stock-dialect read that runs user code on a reader holding
prepared statements is sent as `DEALLOCATE ALL; <client's query>` in one Query string (seen in
the standby's pg_stat_activity, src/session/hidden.rs build_query): error positions the client
got were still the primary's (the reader's error is retried on the writer, F-2), so no
divergence was found from it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from e2e_support import STANDBY_PORTS, connect, on_primary, run, warm
from test_red2_findings import SYNC, RawConn, _msg, bind, execute, parse, query

SETUP = [
    "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'red8b_a') THEN CREATE ROLE red8b_a; END IF;"
    " IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'red8b_b') THEN CREATE ROLE red8b_b; END IF; END$$",
    "GRANT red8b_a, red8b_b TO app_trust",
    "CREATE TABLE red8b_rls (owner name, tenant text, v int)",
    "INSERT INTO red8b_rls VALUES ('red8b_a', 't1', 1), ('red8b_b', 't2', 2), ('app_trust', 't1', 3), ('x', 't2', 4), ('x', 't3', 5)",
    "ALTER TABLE red8b_rls ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY red8b_p ON red8b_rls USING (owner = current_user OR tenant = current_setting('app.tenant', true))",
    "GRANT SELECT ON red8b_rls TO PUBLIC",
]
DROP = ["DROP TABLE IF EXISTS red8b_rls", "DROP ROLE IF EXISTS red8b_a", "DROP ROLE IF EXISTS red8b_b"]

READ = ("SELECT current_setting('TimeZone'), current_setting('app.tenant', true), current_user,"
        " (SELECT array_agg(v ORDER BY v) FROM red8b_rls), inet_server_port()")


@pytest.fixture(scope="module")
def objects(pair):
    on_primary(pair, *DROP, *SETUP)
    try:
        yield pair
    finally:
        on_primary(pair, *DROP)


def state(conn, tz, tenant, role):
    run(conn, f"SET TimeZone = '{tz}'")
    run(conn, "SELECT set_config('app.tenant', %s, false)", (tenant,))
    run(conn, f"SET ROLE {role}" if role else "RESET ROLE")


# -- Guard 1: concurrent clients, each with its own settings, placeholder and role -----------------

@pytest.mark.timeout(90)
def test_s6_guard_concurrent_clients_each_read_with_their_own_state(objects, proxy):
    clients = [("Asia/Kathmandu", "t1", None), ("America/New_York", "t2", "red8b_a"),
               ("Asia/Tokyo", "t3", "red8b_b"), ("Europe/Paris", "t1", "red8b_b"),
               ("Australia/Adelaide", "t2", None), ("Etc/UTC", "t3", "red8b_a")]
    wrong, places, errors = [], [], []

    def client(tz, tenant, role):
        try:
            with connect(objects.primary.dsn(dbname="app", user="app_trust")) as twin, connect(proxy.dsn()) as c:
                warm(c)
                state(twin, tz, tenant, role)
                state(c, tz, tenant, role)
                expected = run(twin, READ)[0][:-1]
                for n in range(40):
                    block = n % 4 == 3
                    if block:
                        run(c, "BEGIN")
                    row = run(c, READ)[0]
                    if block:
                        run(c, "COMMIT")
                    places.append(row[-1] in STANDBY_PORTS)
                    if row[:-1] != expected:
                        wrong.append((tz, tenant, role, row, expected))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=c) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert not wrong, f"{len(wrong)} reads answered with another state: {wrong[:3]}"
    assert sum(places) > len(places) // 2, f"only {sum(places)} of {len(places)} reads ran on the standby"


# -- Guard 2: a local setting of an implicit extended-protocol transaction rules the read behind it

def _answers(c, deadline_s=5.0):
    out = []
    deadline = time.monotonic() + deadline_s
    while True:
        m = c.one(deadline)
        if m is None:
            return out + ["HANG"]
        t, body = m
        if t == b"D":
            n, p, row = struct.unpack(">H", body[:2])[0], 2, []
            for _ in range(n):
                ln = struct.unpack(">i", body[p:p + 4])[0]
                p += 4
                row.append(None if ln < 0 else body[p:p + ln].decode())
                p += max(ln, 0)
            out.append(tuple(row))
        elif t == b"E":
            out.append(("error", [f[1:] for f in body.split(b"\0") if f[:1] == b"C"][0].decode()))
        if t in (b"Z", b"EOF"):
            return out


def _pbe(sql):
    return parse("", sql) + bind("", "", ()) + execute("", 0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("change", ["SELECT set_config('app.tenant', 't2', true)", "SET LOCAL ROLE red8b_a",
                                    "SELECT set_config('role', 'red8b_b', true)"])
def test_s5_guard_a_local_setting_of_an_implicit_pipeline_transaction_rules_the_read_behind_it(objects, proxy, change):
    sql = "SELECT array_agg(v ORDER BY v)::text, current_setting('app.tenant', true), current_user, inet_server_port() FROM red8b_rls"
    got = {}
    for name, port in (("primary", objects.primary.port), ("proxy", proxy.port)):
        c = RawConn("127.0.0.1", port, "app_trust", "app", 5)
        try:
            assert _answers(c)[-1:] != ["HANG"]
            for _ in range(60):
                c.send(query("SELECT inet_server_port()"))
                if _answers(c)[0][0] in {str(p) for p in STANDBY_PORTS}:
                    break
                time.sleep(0.05)
            c.send(_pbe(change), _pbe(sql), SYNC)
            first = _answers(c)
            c.send(_pbe(sql), SYNC)
            got[name] = [r[:-1] if len(r) == 4 else r for r in first + _answers(c)]
        finally:
            c.close()
    assert got["proxy"] == got["primary"]


# -- Guard 3: a client gone in the middle of a result leaves nothing for the next clients ----------

@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["reset", "close", "terminate"])
def test_s6_guard_a_client_gone_mid_result_leaves_nothing_for_the_next(objects, proxy, how):
    a = RawConn("127.0.0.1", proxy.port, "app_trust", "app", 5)
    _answers(a)
    for sql in ("SET TimeZone = 'Asia/Kathmandu'", "SET app.tenant = 't2'", "SET ROLE red8b_a"):
        a.send(query(sql))
        assert not any(r[0] == "error" for r in _answers(a) if isinstance(r, tuple)), sql
    for _ in range(60):
        a.send(query("SELECT inet_server_port()"))
        if _answers(a)[0][0] in {str(p) for p in STANDBY_PORTS}:
            break
        time.sleep(0.05)
    a.send(query("SELECT g, current_setting('app.tenant'), repeat('x', 200), inet_server_port()"
                 " FROM generate_series(1, 3000000) g"))
    first = a.one(time.monotonic() + 5)
    assert first and first[0] == b"T", first
    a.one(time.monotonic() + 5)
    if how == "reset":
        a.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        a.s.close()
    elif how == "close":
        a.s.close()
    else:
        a.s.sendall(_msg(b"X"))
        a.s.close()
    with connect(objects.primary.dsn(dbname="app", user="app_trust")) as twin:
        expected = run(twin, READ)[0][:-1]
    readers = [connect(proxy.dsn()) for _ in range(4)]
    try:
        wrong, on_standby = [], 0
        for _ in range(10):
            for c in readers:
                row = run(c, READ)[0]
                on_standby += row[-1] in STANDBY_PORTS
                if row[:-1] != expected:
                    wrong.append(row)
        assert not wrong, f"the next clients read with the gone client's state: {wrong[:3]}"
        assert on_standby > 20, f"only {on_standby} of 40 reads ran on the standby"
    finally:
        for c in readers:
            c.close()
