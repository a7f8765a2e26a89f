"""Read-your-writes under a real 200 ms apply delay: never stale through the proxy (library mode),
while the same pattern through the naive mode (every SELECT to the standby) is stale."""

import time

import psycopg
import pytest

from e2e_support import ports, start_proxy, stop_proxy

ITERATIONS = 150


def test_the_standby_really_lags(pair):
    """The fixture's teeth: a read on the standby right after a commit on the primary is stale."""
    stale = 0
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p, psycopg.connect(
        pair.standby.dsn(dbname="app"), autocommit=True
    ) as s:
        p.execute("INSERT INTO kv VALUES (7, 0) ON CONFLICT (k) DO UPDATE SET v = 0")
        for i in range(1, 11):
            p.execute("UPDATE kv SET v = %s WHERE k = 7", (i,))
            row = s.execute("SELECT v FROM kv WHERE k = 7").fetchone()
            stale += row is None or row[0] != i
    assert stale >= 8


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_s1a_write_then_read_is_never_stale(pair, proxy, protocol):
    cursor_factory = psycopg.ClientCursor if protocol == "simple" else psycopg.Cursor
    key = 100 if protocol == "simple" else 101
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p:
        p.execute("INSERT INTO kv VALUES (%s, 0) ON CONFLICT (k) DO UPDATE SET v = 0", (key,))
    pair.wait_replayed()
    stale = on_standby_before_write = 0
    for i in range(1, ITERATIONS + 1):
        # A new session each time: its first read may go to the standby, its read after its own
        # write must see the write.
        with psycopg.connect(proxy.dsn(), autocommit=True, cursor_factory=cursor_factory) as c:
            row = c.execute("SELECT v, inet_server_port() FROM kv WHERE k = %s", (key,)).fetchone()
            on_standby_before_write += ports(pair)[row[1]] == "standby"
            c.execute("UPDATE kv SET v = %s WHERE k = %s", (i, key))
            row = c.execute("SELECT v FROM kv WHERE k = %s", (key,)).fetchone()
            stale += row is None or row[0] != i
    assert stale == 0
    if protocol == "simple":
        assert on_standby_before_write > ITERATIONS // 2  # the reads did use the standby


def test_naive_mode_shows_stale_reads(pair, tmp_path):
    naive = start_proxy(pair, tmp_path, mode="naive")
    try:
        stale = 0
        with psycopg.connect(naive.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            c.execute("INSERT INTO kv VALUES (300, 0) ON CONFLICT (k) DO UPDATE SET v = 0")
            for i in range(1, 21):
                c.execute("UPDATE kv SET v = %s WHERE k = 300", (i,))
                row = c.execute("SELECT v FROM kv WHERE k = 300").fetchone()
                stale += row is None or row[0] != i
        assert stale >= 10, stale
        assert naive.stats()["proxy"]["naive_reads_to_replica"] >= 20
    finally:
        stop_proxy(naive)


def test_primary_only_mode_relays_everything_to_the_primary(pair, tmp_path):
    px = start_proxy(pair, tmp_path, mode="primary-only")
    try:
        with psycopg.connect(px.dsn("app_scram", sslmode="prefer"), autocommit=True) as c:
            assert ports(pair)[c.execute("SELECT inet_server_port()").fetchone()[0]] == "primary"
            assert c.execute("SELECT %s::int", (5,)).fetchone()[0] == 5
    finally:
        stop_proxy(px)


def quiet_primary(pair, quiet_s: float = 0.5, timeout_s: float = 60) -> None:
    """Waits (bounded) until the primary's WAL insert position stays put for `quiet_s`."""
    deadline = time.time() + timeout_s
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        last, since = None, time.time()
        while time.time() < deadline:
            lsn = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            if lsn != last:
                last, since = lsn, time.time()
            elif time.time() - since >= quiet_s:
                return
            time.sleep(0.05)


def test_p4_once_the_standby_replayed_a_write_the_session_reads_there_again(pair, proxy):
    """Stock servers: the library positions a write from its post-write probe / the writer
    monitor, and a standby whose replay position (monitor samples) reached it serves the session
    again — with the write visible."""
    # A read the primary serves shows its latest state, which the session's later reads must not
    # go back from (S-1a): while the primary writes WAL without pause (autovacuum after the pgbench
    # tests) that position moves ahead of a standby 200 ms late, and the reads rightly stay on the
    # primary. Wait for a quiet primary first.
    quiet_primary(pair)
    with psycopg.connect(proxy.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        c.execute("INSERT INTO kv VALUES (500, 0) ON CONFLICT (k) DO UPDATE SET v = 0")
        v = c.execute("UPDATE kv SET v = v + 1 WHERE k = 500 RETURNING v").fetchone()[0]
        assert ports(pair)[c.execute("SELECT inet_server_port()").fetchone()[0]] == "primary"
        deadline = time.time() + 10
        while True:
            row = c.execute("SELECT v, inet_server_port() FROM kv WHERE k = 500").fetchone()
            assert row[0] == v  # never stale, wherever it ran
            if ports(pair)[row[1]] == "standby":
                break
            assert time.time() < deadline, "reads never returned to the standby"
            time.sleep(0.05)
    assert proxy.stats()["reason"].get("READ_CAUGHT_UP", 0) >= 1
