"""SPEC P-5 with S-1a and W-7 end to end (stock PostgreSQL): a READ COMMITTED block's reads go to
the standby before its first write, also after something sent one of the session's reads to the
primary. An examiner's finding of 2026-12-05 (psycopg, autocommit off): after one failed block
(`SELECT 1/0`, which the standby refused and the primary ran again, then ROLLBACK) the next
block's 3,000 reads all stayed on the primary, and so did every read of a block after one read
the primary served (a read of the block's `now()`): each read the primary serves may show newer
data than the standby has, nothing positioned it inside a block, and so the next read went to the
primary too. Now a probe follows such a read inside the block, and a block in which the standby
refused a read ends with a probe, as after a write.

Each scenario runs the same statements against the primary alone and through the proxy: the
answers must be the same, and most of the block's reads must reach the standby."""

from __future__ import annotations

import psycopg
import pytest

READS = 200
ROWS = "SELECT k, v, inet_server_port() FROM p5_rows WHERE k = %s"


@pytest.fixture(scope="module")
def rows(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS p5_rows")
        c.execute("CREATE TABLE p5_rows (k int PRIMARY KEY, v text)")
        c.execute("INSERT INTO p5_rows SELECT g, 'v' || g FROM generate_series(1, 50) g")
        c.execute("GRANT ALL ON p5_rows TO PUBLIC")
    pair.wait_replayed()


def after_a_refused_read(c: psycopg.Connection) -> str:
    """A block whose read the standby refuses (the primary answers the same error), rolled back."""
    try:
        c.execute("SELECT 1/0")
    except psycopg.errors.DivisionByZero as e:
        c.rollback()
        return e.sqlstate
    raise AssertionError("no error")


def after_a_read_of_the_blocks_time(c: psycopg.Connection) -> str:
    """A read of the block's own `now()`: the primary serves it (S-7), inside the same block."""
    c.execute("SELECT k, now() IS NOT NULL FROM p5_rows WHERE k = 1").fetchone()
    return "read on the primary"


def block(dsn: str, standby_port: int, before) -> tuple[list, int]:
    """`before`, then one block of READS reads: the answers and how many the standby served."""
    with psycopg.connect(dsn) as c:
        got = [before(c)]
        on_standby = 0
        for i in range(READS):
            k = i % 50 + 1
            k, v, port = c.execute(ROWS, (k,)).fetchone()
            got.append((k, v))
            on_standby += port == standby_port
        c.commit()
    return got, on_standby


@pytest.mark.timeout(60)
@pytest.mark.parametrize("before", [after_a_refused_read, after_a_read_of_the_blocks_time])
def test_p5_s1a_a_blocks_reads_reach_the_standby_after_a_read_the_primary_served(pair, proxy, rows, before):
    direct, _ = block(pair.primary.dsn(dbname="app", user="app_trust"), pair.standby.port, before)
    through, on_standby = block(proxy.dsn(), pair.standby.port, before)
    assert through == direct
    # Reads one behind the other: the first may wait for the probe's position to replay.
    assert on_standby >= READS * 0.9, (on_standby, proxy.stats()["reason"])
