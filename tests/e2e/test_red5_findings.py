"""Defects an adversarial examination found (red5): statements the engine routes to a reader that
it must not, and state that crosses between clients through a pooled reader. Each is proved
against the real primary + hot standby through the example proxy and compared with the primary
alone (SPEC P-1, S-5, S-6, S-7, §7 F-policy).

Where a read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is
bounded (statement_timeout, connect_timeout, e2e_support.bounded): a missing answer fails fast."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded

BOUND_S = 5.0


def connect(dsn: str, **kw) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, options="-c statement_timeout=5000", **kw)


def run(conn, sql, params=None):
    with bounded(conn, BOUND_S, str(sql)[:80]):
        return conn.execute(sql, params).fetchall()


def command(conn, sql, params=None) -> None:
    with bounded(conn, BOUND_S, str(sql)[:80]):
        conn.execute(sql, params)


def warm(conn) -> None:
    """Waits (at most 3 s) until a plain read of this session runs on the standby: a session's
    first reads may stay on the writer while its state is learnt or a reader connection is opened
    (S-5, P-4), and the findings below are about what happens once reads do leave the writer."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if run(conn, "SELECT inet_server_port()")[0][0] in STANDBY_PORTS:
            return
        time.sleep(0.05)
    pytest.fail("no plain read of the session reached the standby within 3 s")


# -- Finding 1: a multibyte client encoding hides calls from the lexer -----------------------------
#
# In SJIS, GBK and GB18030 (client-only encodings) the second byte of a character may be 0x5C, a
# backslash in ASCII. Chosen so the bytes are also valid UTF-8 (the engine classifies only valid
# UTF-8), each prefix below ends with such a character: the server converts the Query string to
# UTF-8 before it lexes it and sees `E'<chars>'` closed by the next quote; the engine's byte lexer
# (src/classify/lexer.rs, quoted_end) reads `\'` as an escaped quote, so to it the string runs on
# to the last quote, past the call, and the call behind the `--` is invisible.
TRAIL = {
    "SJIS": b"\xc3\x81\x5c",  # "ﾃ" + 0x815C "―"; as UTF-8: "Á\"
    "GBK": b"\xe3\x81\x81\x5c",  # 0xE381 + 0x815C; as UTF-8: "ぁ\"
    "GB18030": b"\xe3\x81\x81\x5c",
}


def hidden_call(encoding: str, call: str) -> bytes:
    """`SELECT E'<x>', <call>, inet_server_port() --'`: to the server a string, the call and the
    port; to a lexer that does not know the encoding, one string literal."""
    return b"SELECT E'" + TRAIL[encoding] + b"', " + call.encode() + b", inet_server_port() --'"


@pytest.mark.parametrize("encoding", sorted(TRAIL))
def test_s6_a_call_hidden_by_a_multibyte_encoding_runs_on_the_writer_and_reaches_no_other_client(
        pair, proxy, encoding):
    """Fixed (src/classify/statement.rs encoding_ambiguous). Before: under SJIS, GBK and GB18030 `SELECT
    E'ﾃ―', set_config(…) --'` was classified a plain read, ran on the standby, and 3/3 later
    clients of the same user and encoding read the placeholder on the pooled reader."""
    name = f"app.red5_{encoding.lower()}"
    with connect(proxy.dsn(), client_encoding=encoding) as a:
        warm(a)
        row = run(a, hidden_call(encoding, f"set_config($${name}$$, $$leaked$$, false)"))[0]
    ran_on = "standby" if row[-1] in STANDBY_PORTS else "primary"
    seen = []
    for _ in range(3):
        with connect(proxy.dsn(), client_encoding=encoding) as b:
            warm(b)
            for _ in range(2):
                seen.append(tuple(run(b, f"SELECT current_setting('{name}', true), inet_server_port()")[0]))
    leaked = [s for s in seen if s[0] == "leaked"]
    assert ran_on == "primary" and not leaked, (
        f"set_config hidden by {encoding} ran on the {ran_on}; later clients saw {leaked} of {seen}")


def test_p1_an_advisory_lock_hidden_by_a_multibyte_encoding_is_taken_on_the_primary(pair, proxy):
    """Fixed with the test above. Before: the lock was taken on the standby; the primary's pg_locks
    had 0 such rows and another session took the same lock at once."""
    key = 550_501
    with connect(proxy.dsn(), client_encoding="SJIS") as a:
        warm(a)
        row = run(a, hidden_call("SJIS", f"pg_advisory_lock({key})"))[0]
        with connect(pair.primary.dsn(dbname="app")) as other:
            held = run(other, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s", (key,))
            got = run(other, "SELECT pg_try_advisory_lock(%s)", (key,))[0][0]
            if got:
                run(other, "SELECT pg_advisory_unlock(%s)", (key,))
    ran_on = "standby" if row[-1] in STANDBY_PORTS else "primary"
    assert ran_on == "primary" and held[0][0] == 1 and not got, (
        f"pg_advisory_lock ran on the {ran_on}; the primary holds {held[0][0]} such lock; "
        f"another session could take it: {got}")


def test_p1_a_call_after_a_multibyte_character_in_utf8_is_seen(pair, proxy):
    """Guard: in UTF-8 the same bytes are `E'Á\\'…` — one string for the server too — and a call
    written plainly after a UTF-8 multibyte string stays on the writer."""
    with connect(proxy.dsn()) as a:
        warm(a)
        row = run(a, "SELECT E'Á', set_config('app.red5_utf8', 'x', false), inet_server_port()")[0]
        assert row[-1] == pair.primary.port


# -- Finding 2: random() after setseed() ---------------------------------------------------------


@pytest.mark.xfail(strict=True, reason="open S-5 defect: setseed() runs on the writer (NEVER_SAFE) but the "
                   "seed is session state the reader does not have, and random() is on the reviewed read-safe "
                   "list (src/classify/builtins/mod.rs READ_SAFE_VOLATILE): after `SELECT setseed(0.5)` "
                   "the primary answers random() with its seeded sequence (0.98516…, 0.82530…), the proxy "
                   "with the standby's unseeded values")
def test_s5_random_after_setseed_is_the_writer_sessions_sequence(pair, proxy):
    def sequence(dsn, through_proxy):
        with connect(dsn) as c:
            if through_proxy:
                warm(c)
            run(c, "SELECT setseed(0.5)")
            return [run(c, "SELECT random(), inet_server_port()")[0] for _ in range(3)]

    primary = sequence(pair.primary.dsn(dbname="app", user="app_trust"), False)
    through = sequence(proxy.dsn(), True)
    assert [r[0] for r in through] == [r[0] for r in primary], (
        f"primary {primary}, through the proxy {through}")


# -- Finding 3: the *_to_xml built-ins read relations named by text -------------------------------


@pytest.mark.parametrize("call", [
    "table_to_xml('pg_catalog.pg_locks', true, false, '')",
    "table_to_xml_and_xmlschema('pg_catalog.pg_locks', true, false, '')",
    "schema_to_xml('pg_catalog', true, false, '')",
])
def test_s7_relations_read_by_table_to_xml_are_the_primarys(pair, proxy, call):
    """Fixed (src/classify/builtins/mod.rs RUNS_SQL_TEXT). Before: table_to_xml('pg_catalog.pg_locks', …)
    through the proxy was the standby's lock table (the advisory lock held on the primary missing)."""
    key = 550_601
    with connect(pair.primary.dsn(dbname="app")) as holder:
        run(holder, "SELECT pg_advisory_lock(%s)", (key,))
        sql = f"SELECT strpos({call}::text, '<objid>{key}</objid>') > 0, inet_server_port()"
        with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
            on_primary = run(direct, sql)[0]
        with connect(proxy.dsn()) as c:
            warm(c)
            through = run(c, sql)[0]
        run(holder, "SELECT pg_advisory_unlock(%s)", (key,))
    assert on_primary[0] is True
    assert through[0] is True, f"the lock held on the primary is missing from {through} (primary: {on_primary})"


def test_s6_a_view_read_by_table_to_xml_leaves_nothing_for_another_client(pair, proxy):
    """Fixed with the test above. Before: table_to_xml('<view calling set_config>') ran on the standby
    and 6/6 later reads of 3 other clients saw the placeholder on the pooled reader."""
    with connect(pair.primary.dsn(dbname="app")) as admin:
        admin.execute("DROP VIEW IF EXISTS red5_sets")
        admin.execute("CREATE VIEW red5_sets AS SELECT set_config('app.red5_view', 'leaked', false) AS v")
        admin.execute("GRANT SELECT ON red5_sets TO PUBLIC")
        pair.wait_replayed()
        try:
            with connect(proxy.dsn()) as a:
                warm(a)
                ran = run(a, "SELECT table_to_xml('red5_sets', true, false, '') IS NOT NULL, inet_server_port()")[0]
            seen = []
            for _ in range(3):
                with connect(proxy.dsn()) as b:
                    warm(b)
                    seen.append(tuple(run(b, "SELECT current_setting('app.red5_view', true), inet_server_port()")[0]))
                    seen.append(tuple(run(b, "SELECT current_setting('app.red5_view', true), inet_server_port()")[0]))
        finally:
            admin.execute("DROP VIEW IF EXISTS red5_sets")
    leaked = [s for s in seen if s[0] == "leaked"]
    assert not leaked, f"table_to_xml ran on {ran[-1]}; later clients saw {leaked} of {seen}"


# -- Finding 4: inet_client_addr()/inet_client_port() -------------------------------------------


def test_s7_inet_client_port_is_the_writer_connections(pair, proxy):
    """Fixed (src/classify/builtins/mod.rs SERVER_DEPENDENT). Before: a read answered with the reader
    connection's client port, not the writer connection's."""
    with connect(proxy.dsn()) as c:
        on_writer = run(c, "SELECT inet_client_port(), pg_backend_pid()")[0][0]  # pg_backend_pid: writer
        warm(c)
        reads = [run(c, "SELECT inet_client_port(), inet_server_port()")[0] for _ in range(3)]
    assert [r[0] for r in reads] == [on_writer] * 3, f"the writer's client port is {on_writer}, the reads said {reads}"

