"""SPEC S-1a end to end on stock PostgreSQL (no positions on ReadyForQuery): monotonic reads. A read
the engine sends to the primary for any reason sees the primary's latest state, commits of other
sessions included; the session's next read must not show less (examiner-style probe of 2026-12-05:
before, the engine positioned only writes, and the next read went to the standby — 200 ms behind —
and showed the row as it was before another session's commit).

Each case: another session commits v = 2 (the row was 1) just before the session's first read,
which the engine sends to the primary; the session reads the row again at once."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from e2e_support import bounded


def replayed(primary, standby_dsn: str) -> None:
    lsn = primary.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    with psycopg.connect(standby_dsn, autocommit=True) as s:
        deadline = time.monotonic() + 10
        while not s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the standby does not replay"
            time.sleep(0.02)


def in_a_block(c, p, k):
    """`now()` keeps the block's first read on the primary (its value is the transaction's)."""
    c.execute("BEGIN")
    p.execute("UPDATE kv SET v = 2 WHERE k = %s", (k,))
    first = c.execute("SELECT v, now() FROM kv WHERE k = %s", (k,)).fetchone()[0]
    second = c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]
    c.execute("COMMIT")
    return first, second


def multi_statement(c, p, k):
    p.execute("UPDATE kv SET v = 2 WHERE k = %s", (k,))
    first = c.execute(f"SELECT v FROM kv WHERE k = {k}; SELECT 1").fetchone()[0]
    return first, c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]


def temp_table_dropped(c, p, k):
    c.execute("CREATE TEMP TABLE s1a_scratch (x int)")
    time.sleep(0.4)
    p.execute("UPDATE kv SET v = 2 WHERE k = %s", (k,))
    first = c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]
    c.execute("DISCARD TEMP")
    return first, c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]


def after_own_write(c, p, k):
    """Read-your-writes: the first read goes to the primary because the standby has not replayed
    the session's write yet; by the second it has, but not the other session's later commit."""
    t0 = time.monotonic()
    c.execute("INSERT INTO kv VALUES (%s, 0)", (k + 1,))
    time.sleep(0.1)
    p.execute("UPDATE kv SET v = 2 WHERE k = %s", (k,))
    time.sleep(0.03)
    first = c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]
    while time.monotonic() - t0 < 0.24:
        time.sleep(0.005)
    return first, c.execute("SELECT v FROM kv WHERE k = %s", (k,)).fetchone()[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [in_a_block, multi_statement, temp_table_dropped, after_own_write],
                         ids=lambda f: f.__name__)
def test_s1a_a_read_after_one_the_primary_served_never_goes_back_in_time(pair, proxy, case):
    seen = []
    for _ in range(3):
        k = uuid.uuid4().int % 10**8
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p:
            p.execute("INSERT INTO kv VALUES (%s, 1)", (k,))
            replayed(p, pair.standby.dsn(dbname="app"))
            with psycopg.connect(proxy.dsn(), autocommit=True) as c, bounded(c, 30, case.__name__):
                c.execute("SELECT 1").fetchone()
                seen.append(case(c, p, k))
            p.execute("DELETE FROM kv WHERE k IN (%s, %s)", (k, k + 1))
    assert all(first == 2 for first, _ in seen), f"the first read is the primary's: {seen}"
    assert all(second == 2 for _, second in seen), f"the second read went back in time: {seen}"
