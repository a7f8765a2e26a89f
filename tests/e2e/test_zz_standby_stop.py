"""The standby stops mid-run (this module runs last and restarts it): reads that had not begun
returning rows are answered by the primary, a read cut mid-result gets an error (F-3), and the
proxy (built with AddressSanitizer) keeps serving.

A read that "has not begun" is one the standby has not started executing: PostgreSQL sends the
RowDescription before it executes a SELECT, and the library counts that as begun (F-3). Here the
read waits for a table lock replayed from the primary (taken during parse analysis, before any
RowDescription) when the standby stops."""

import threading
import time

import psycopg
import pytest

from e2e_support import ports, where

STREAM = "SELECT g, repeat('x', 2000) AS pad, pg_sleep(0.002) FROM generate_series(1, 4000) g"
SLOW = "SELECT v, inet_server_port() FROM kv WHERE k = 1"


def active_on_standby(pair, pattern):
    return int(pair.standby.psql(
        f"SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '{pattern}%'"))


def test_f1_f3_standby_stopped_mid_run(pair, asan_proxy):
    results = {}

    def run(name, sql):
        c = conns[name]
        try:
            results[name] = c.execute(sql).fetchall()
        except psycopg.Error as e:  # noqa: PERF203
            results[name] = e

    conns = {n: psycopg.connect(asan_proxy.dsn(), autocommit=True) for n in ("stream", "slow", "idle")}
    locker = psycopg.connect(pair.primary.dsn(dbname="app"))
    try:
        locker.execute("INSERT INTO kv VALUES (1, 1) ON CONFLICT (k) DO NOTHING")
        locker.commit()
        # An ACCESS EXCLUSIVE lock on the primary is replayed on the standby, where it blocks reads.
        locker.execute("LOCK TABLE kv IN ACCESS EXCLUSIVE MODE")
        # Its WAL sits unflushed on the primary until some commit flushes it (NOTES.md): commit one.
        pair.primary.psql("SELECT pg_current_xact_id()")
        deadline = time.time() + 10
        while int(pair.standby.psql("SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' "
                                    "AND relation = 'kv'::regclass", dbname="app")) == 0:
            assert time.time() < deadline, "the lock was not replayed: " + pair.standby.psql(
                "SELECT pg_last_wal_replay_lsn(), pg_last_wal_receive_lsn(), pg_is_wal_replay_paused(), "
                "(SELECT string_agg(pid || ':' || state || ':' || coalesce(wait_event, '') || ':' || left(query, 40), ' | ') "
                "FROM pg_stat_activity WHERE backend_type = 'client backend')") + " primary " + pair.primary.psql(
                "SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()")
            time.sleep(0.05)
        for c in conns.values():
            assert where(c) == "standby"
        threads = [threading.Thread(target=run, args=("stream", STREAM)), threading.Thread(target=run, args=("slow", SLOW))]
        for t in threads:
            t.start()
        deadline = time.time() + 10
        while time.time() < deadline:
            if active_on_standby(pair, "SELECT g, repeat") == 1 and active_on_standby(pair, "SELECT v, inet") == 1:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the two reads did not start on the standby")
        time.sleep(0.5)  # rows of the streaming read are flowing to the client now
        before = asan_proxy.stats()
        pair.standby.stop("fast")
        time.sleep(0.3)
        locker.rollback()  # the retried read may now run on the primary
        for t in threads:
            t.join(timeout=30)
        # F-3: rows had reached the client: the error is forwarded, never a silent retry.
        assert isinstance(results["stream"], psycopg.Error), results["stream"]
        # F-1/F-2: nothing had been returned yet: answered by the primary, transparently.
        assert not isinstance(results["slow"], Exception), results["slow"]
        assert ports(pair)[results["slow"][0][1]] == "primary"
        stats = asan_proxy.stats()
        assert stats["counter"]["failures_connection_lost"] >= before["counter"]["failures_connection_lost"] + 2
        assert stats["reason"].get("RETRY_PRIMARY_AFTER_LOSS", 0) > before["reason"].get("RETRY_PRIMARY_AFTER_LOSS", 0)
        # The proxy keeps serving: every session goes on, reads now on the primary.
        for name in ("stream", "slow", "idle"):
            assert where(conns[name]) == "primary", name
        with psycopg.connect(asan_proxy.dsn(), autocommit=True) as fresh:
            assert where(fresh) == "primary"
    finally:
        locker.close()
        for c in conns.values():
            c.close()
        if not pair.standby.running():
            pair.standby.start()
            pair.wait_streaming()
    # Back to the standby once the monitor sees it again.
    deadline = time.time() + 20
    while time.time() < deadline:
        with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
            if where(c) == "standby":
                return
        time.sleep(0.2)
    pytest.fail("reads did not return to the restarted standby")
