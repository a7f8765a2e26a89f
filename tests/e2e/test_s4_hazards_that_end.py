"""SPEC S-4 end to end: hazards that end clear when nothing of them is left on the writer.

An examiner measured 0/40 reads offloaded for the rest of a session after a psycopg
`cursor('h1', withhold=True)` was used and closed (psycopg sends `CLOSE "h1"`), and after
`LISTEN chx; UNLISTEN chx`: only `CLOSE ALL` / `UNLISTEN *` / `DISCARD ALL` lifted the hazard,
although nothing remained on the server. The engine now follows the cursors' and channels' names
by the server's rules (a CLOSE is not undone by a ROLLBACK; LISTEN/UNLISTEN take effect at
COMMIT). Where a read ran is told by inet_server_port(); what the session sees (the held cursor's
rows, pg_cursors, pg_listening_channels(), notifications) must be what the primary alone shows."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, STANDBY_PAUSE_S

WHERE = "SELECT inet_server_port()"


def where(c: psycopg.Connection, tries: int = 10) -> str:
    """Where the session's next reads run: 'standby' once one does (a read may still wait out the
    standby's apply delay behind another test's writes), else 'primary'."""
    for _ in range(tries):
        if c.execute(WHERE).fetchone()[0] in STANDBY_PORTS:
            return "standby"
        time.sleep(STANDBY_PAUSE_S)
    return "primary"


def settle() -> None:
    time.sleep(0.4)  # the standby's apply delay is 200 ms


@pytest.mark.timeout(90)
def test_s4_a_withhold_cursor_used_then_closed_lets_reads_go_to_the_standby(pair, proxy):
    def run(dsn: str, proxied: bool) -> list:
        out = []
        with psycopg.connect(dsn, autocommit=True) as c:
            with bounded(c, 60, "withhold cursor session"):
                if proxied:
                    settle()
                    assert where(c) == "standby", "the session's reads did not offload to begin with"
                with c.cursor("h1", withhold=True) as cur:
                    cur.execute("SELECT g FROM generate_series(1, 10) AS g")
                    out.append(cur.fetchmany(3))
                    out.append(c.execute("SELECT name, is_holdable FROM pg_cursors ORDER BY name").fetchall())
                    if proxied:
                        assert where(c, tries=1) == "primary", "a WITH HOLD cursor is open: the primary"
                    out.append(cur.fetchall())
                # psycopg closed it: CLOSE "h1".
                out.append(c.execute("SELECT count(*) FROM pg_cursors").fetchone())
                if proxied:
                    settle()
                    assert where(c) == "standby", "the cursor is closed: reads go to the standby again"
                    assert where(c) == "standby"
        return out

    direct = run(pair.primary.dsn(user="app_trust", dbname="app"), False)
    assert direct[0] == [(1,), (2,), (3,)] and direct[1] == [("h1", True)], direct
    proxied = run(proxy.dsn(), True)
    assert proxied == direct, f"through the proxy {proxied}\nthe primary alone {direct}"


@pytest.mark.timeout(90)
def test_s4_a_withhold_cursor_still_open_keeps_reads_on_the_primary(pair, proxy):
    def run(dsn: str, proxied: bool) -> list:
        out = []
        with psycopg.connect(dsn, autocommit=True) as c:
            with bounded(c, 60, "open withhold cursor session"):
                c.execute("DECLARE keep1 CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 5) AS g")
                c.execute("DECLARE \"Gone\" CURSOR WITH HOLD FOR SELECT 1")
                c.execute("CLOSE \"Gone\"")
                settle()
                if proxied:
                    assert where(c, tries=1) == "primary", "keep1 is open: the primary"
                out.append(c.execute("FETCH 2 FROM keep1").fetchall())
                out.append(c.execute("SELECT name FROM pg_cursors ORDER BY name").fetchall())
                c.execute("BEGIN")
                c.execute("DECLARE rolled CURSOR WITH HOLD FOR SELECT 1")
                c.execute("ROLLBACK")
                out.append(c.execute("SELECT name FROM pg_cursors ORDER BY name").fetchall())
                c.execute("CLOSE keep1")
                settle()
                if proxied:
                    assert where(c) == "standby", "every cursor is closed: the standby"
        return out

    direct = run(pair.primary.dsn(user="app_trust", dbname="app"), False)
    assert direct == [[(1,), (2,)], [("keep1",)], [("keep1",)]], direct
    proxied = run(proxy.dsn(), True)
    assert proxied == direct, f"through the proxy {proxied}\nthe primary alone {direct}"


def notified(c: psycopg.Connection, timeout: float = 5.0) -> list:
    return [(n.channel, n.payload) for n in c.notifies(timeout=timeout, stop_after=1)]


@pytest.mark.timeout(120)
def test_s4_listen_then_unlisten_lets_reads_go_to_the_standby_and_notifications_still_arrive(pair, proxy):
    notifier_dsn = pair.primary.dsn(user="app_trust", dbname="app")

    def run(dsn: str, proxied: bool) -> list:
        out = []
        with psycopg.connect(dsn, autocommit=True) as c, psycopg.connect(notifier_dsn, autocommit=True) as n:
            with bounded(c, 90, "listen session"):
                # The only channel, listened on and unlistened.
                c.execute("LISTEN chx")
                c.execute("UNLISTEN chx")
                settle()
                if proxied:
                    assert where(c) == "standby", "LISTEN chx; UNLISTEN chx: nothing is left, the standby"
                out.append(c.execute("SELECT pg_listening_channels()").fetchall())
                # Two channels, one unlistened: the other is still there.
                c.execute("LISTEN x")
                c.execute("LISTEN y")
                c.execute("UNLISTEN x")
                settle()
                if proxied:
                    assert where(c, tries=1) == "primary", "y is still listened on: the primary"
                out.append(c.execute("SELECT pg_listening_channels() ORDER BY 1").fetchall())
                n.execute("NOTIFY x, 'lost'")
                n.execute("NOTIFY y, 'kept'")
                out.append(notified(c))
                c.execute("UNLISTEN y")
                settle()
                if proxied:
                    assert where(c) == "standby"
                # A LISTEN in a block that rolls back never happened.
                c.execute("BEGIN")
                c.execute("LISTEN z")
                c.execute("ROLLBACK")
                settle()
                if proxied:
                    assert where(c) == "standby", "BEGIN; LISTEN z; ROLLBACK: the standby"
                out.append(c.execute("SELECT pg_listening_channels()").fetchall())
                # An UNLISTEN in a block that rolls back never happened either.
                c.execute("LISTEN \"Mixed\"")
                c.execute("BEGIN")
                c.execute("UNLISTEN \"Mixed\"")
                c.execute("ROLLBACK")
                c.execute("UNLISTEN mixed")  # another channel than "Mixed"
                settle()
                if proxied:
                    assert where(c, tries=1) == "primary", "\"Mixed\" is still listened on"
                out.append(c.execute("SELECT pg_listening_channels()").fetchall())
                n.execute("NOTIFY \"Mixed\", 'still'")
                out.append(notified(c))
                c.execute("UNLISTEN *")
                settle()
                if proxied:
                    assert where(c) == "standby"
        return out

    direct = run(pair.primary.dsn(user="app_trust", dbname="app"), False)
    assert direct == [[], [("y",)], [("y", "kept")], [], [("Mixed",)], [("Mixed", "still")]], direct
    proxied = run(proxy.dsn(), True)
    assert proxied == direct, f"through the proxy {proxied}\nthe primary alone {direct}"


# An examiner's finding of 2026-12-05 (h24): a temporary table created and dropped (also one
# dropped at COMMIT, or rolled back), `PREPARE p …; DEALLOCATE p` and an advisory lock released by
# key kept a long-lived session's reads on the primary for good — 0 of 100 against 100 of 100 for a fresh session at the same
# time (psycopg, node-postgres, an asyncpg pool). Only DISCARD / DEALLOCATE ALL /
# pg_advisory_unlock_all() lifted them. The capture now asks the writer whether temporary objects,
# SQL-prepared statements and advisory locks are left, and a hazard ends when none is.
GONE = {
    "temp_dropped": ["CREATE TEMP TABLE s4e_t (a int)", "INSERT INTO s4e_t VALUES (1)", "DROP TABLE s4e_t"],
    "temp_on_commit_drop": ["BEGIN", "CREATE TEMP TABLE s4e_t (a int) ON COMMIT DROP", "COMMIT"],
    "temp_rolled_back": ["BEGIN", "CREATE TEMP TABLE s4e_t (a int)", "ROLLBACK"],
    # (An EXECUTE of it runs code the engine does not see, a hazard of its own: README.)
    "prepare_deallocated": ["PREPARE s4e_p AS SELECT 1", "DEALLOCATE s4e_p"],
    "advisory_unlocked_by_key": ["SELECT pg_advisory_lock(4242)", "SELECT pg_advisory_unlock(4242)"],
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("case", list(GONE))
def test_s4_temporary_objects_and_prepared_statements_gone_let_reads_go_to_the_standby(pair, proxy, case):
    def run(dsn: str, proxied: bool) -> list:
        out = []
        with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 60, case):
            if proxied:
                settle()
                assert where(c) == "standby", "the session's reads did not offload to begin with"
            for sql in GONE[case]:
                c.execute(sql)
            out.append(c.execute(
                "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()").fetchone())
            out.append(c.execute("SELECT count(*) FROM pg_prepared_statements WHERE from_sql").fetchone())
            out.append(c.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                                 " AND pid = pg_backend_pid()").fetchone())
            if proxied:
                settle()
                ports = [c.execute(WHERE).fetchone()[0] for _ in range(100)]
                out.append(sum(p in STANDBY_PORTS for p in ports) >= 90)
            else:
                out.append(True)
        return out

    assert run(proxy.dsn(), True) == run(pair.primary.dsn(dbname="app", user="app_trust"), False)


@pytest.mark.timeout(90)
def test_s4_a_temporary_table_still_there_keeps_reads_on_the_primary(pair, proxy):
    with psycopg.connect(proxy.dsn(), autocommit=True) as c, bounded(c, 60, "temp kept"):
        c.execute("CREATE TEMP TABLE s4e_k (a int)")
        c.execute("INSERT INTO s4e_k VALUES (1)")
        # However many statements later: the table is there, and its reads are the primary's.
        for _ in range(80):
            assert c.execute("SELECT count(*), inet_server_port() FROM s4e_k").fetchone() == (1, pair.primary.port)
