"""SPEC S-5 end to end: a capture that failed once is tried again, and the session's reads come
back to the standby when one succeeds.

After a statement that may change the session's state (here `SET lock_timeout`) the engine reads
the resulting state on the primary (the capture) before any read may run on a reader. When the
capture failed — a lock it waited for past the session's `lock_timeout`, a cancel or a statement
timeout that hit it — the session's reads stayed on the primary until its state changed again:
a transient failure cost the connection its offload for good (a connection pool keeps it for
hours). Now a failed capture is tried again after 1, 2, 4, … 64 of the session's statements.

The capture is made to fail for real: another session holds `pg_db_role_setting` (which the
capture reads) in ACCESS EXCLUSIVE mode while the client sets `lock_timeout = '100ms'`, then lets
it go. Every answer is compared with the primary's."""

from __future__ import annotations

import time

import psycopg
import pytest

READS = 50
READ = "SELECT k, v, inet_server_port() FROM s5fc WHERE k = %s"


@pytest.fixture(scope="module")
def s5fc(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS s5fc")
        c.execute("CREATE TABLE s5fc (k int PRIMARY KEY, v text)")
        c.execute("INSERT INTO s5fc SELECT g, 'v' || g FROM generate_series(1, 10) g")
        c.execute("GRANT SELECT ON s5fc TO PUBLIC")
    pair.wait_replayed()
    return pair


def session(dsn: str, pair, standby_port: int) -> tuple[list, int, str]:
    """A session whose capture behind `SET lock_timeout` fails, then READS reads: the answers,
    how many the standby served, and the lock_timeout the session ends with."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(READ, (1,)).fetchone()
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=False) as locker:
            locker.execute("LOCK TABLE pg_catalog.pg_db_role_setting IN ACCESS EXCLUSIVE MODE")
            c.execute("SET lock_timeout = '100ms'")
            # The client has its answer; the capture behind it waits for the lock, past 100 ms.
            time.sleep(0.4)
            locker.rollback()
        # The locker's abort record is WAL no one flushes but the WAL writer, within 200 ms
        # (README, W-7): until then every probe's position is ahead of the standby.
        time.sleep(0.3)
        answers, on_standby = [], 0
        for i in range(READS):
            k, v, port = c.execute(READ, (i % 10 + 1,)).fetchone()
            answers.append((k, v))
            on_standby += port == standby_port
        timeout = c.execute("SHOW lock_timeout").fetchone()[0]
    return answers, on_standby, timeout


@pytest.mark.timeout(60)
def test_s5_a_failed_capture_is_tried_again_and_the_sessions_reads_return_to_the_standby(s5fc, proxy):
    pair = s5fc
    failed_before = proxy.stats()["counter"]["captures_failed"]
    direct, _, direct_timeout = session(pair.primary.dsn(dbname="app", user="app_trust"), pair, pair.standby.port)
    # The standby replays at once here: with the shared pair's 200 ms apply delay the probes of
    # the reads back to back land ahead of it for longer than the back-off's first steps, and
    # under a loaded CI run all 50 reads stayed on the primary (MISSING_LSN_PRIMARY, correctly).
    pair.set_apply_delay(0)
    try:
        through, on_standby, timeout = session(proxy.dsn(), pair, pair.standby.port)
    finally:
        pair.set_apply_delay(200)
    assert (through, timeout) == (direct, direct_timeout) == (direct, "100ms")
    st = proxy.stats()
    assert st["counter"]["captures_failed"] > failed_before, "the capture did not fail"
    # The first read goes to the primary and the capture behind it succeeds: the rest are the
    # standby's (each with the session's lock_timeout replayed). Before: 0 of 50.
    reasons = {k: v for k, v in st["reason"].items() if v}
    assert on_standby >= READS * 0.8, (on_standby, reasons)


@pytest.mark.timeout(60)
def test_s5_no_hidden_statement_fails_behind_a_statement_pipelined_after_discard_all(pair, proxy):
    """`DISCARD ALL` drops the engine's prepared hidden statements too: the capture and the probe
    pipelined behind the next statement, sent while `DISCARD ALL` was still in flight, were bound
    by names the writer no longer had and both failed (each costing the session its offload for
    a while). Hidden work now follows that statement's answer, parsed again."""
    from test_red2_findings import Client, query

    before = proxy.stats()["counter"]
    c = Client(proxy.port)
    try:
        c.send(query("DISCARD ALL"), query("SELECT pg_advisory_lock(77), pg_advisory_unlock(77)"))
        got = c.answers(2)
        assert [m[0] for m in got] == ["C", "Z", "T", "D", "C", "Z"], got
        c.send(query("SELECT 1"))
        assert c.answers(1)[-1][0] == "Z"
    finally:
        c.close()
    after = proxy.stats()["counter"]
    assert after["hidden_failures"] == before["hidden_failures"]
    assert after["captures_failed"] == before["captures_failed"]
