"""SPEC S-3/P-5 end to end: the session's default isolation level decides whether a block's reads
may leave the writer (only READ COMMITTED splits). Set with `SET SESSION CHARACTERISTICS` inside a
block it rules the blocks after it; the engine ignored it there (an examiner's finding of
2026-12-05), so a later REPEATABLE READ block read on the standby, and two reads of one block saw
two snapshots: 5 of 5 broken, as many with SERIALIZABLE.

Each trial: set the default, open a block, read a row, let another session update it and commit,
wait past the standby's apply delay, read it again — one snapshot gives the same value twice, as
on the primary alone."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import bounded, on_primary

VARIANTS = {
    "outside a block": ["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"],
    "inside a block": ["BEGIN", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                       "COMMIT"],
    "inside a block, serializable": ["BEGIN",
                                     "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                                     "COMMIT"],
    "inside a block that rolls back": ["BEGIN",
                                       "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                                       "ROLLBACK"],
}


@pytest.fixture(scope="module")
def s3_table(pair):
    on_primary(pair, "DROP TABLE IF EXISTS s3_snap", "CREATE TABLE s3_snap (k int PRIMARY KEY, v int)",
               "INSERT INTO s3_snap VALUES (1, 0)", "GRANT ALL ON s3_snap TO PUBLIC")
    return pair


def trial(pair, dsn: str, setup: list[str]) -> tuple[str, bool]:
    with psycopg.connect(dsn, autocommit=True) as c, \
            psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as other:
        with bounded(c, 20, "session defaults trial"):
            for sql in setup:
                c.execute(sql)
            c.execute("BEGIN")
            level = c.execute("SHOW transaction_isolation").fetchone()[0]
            first = c.execute("SELECT v FROM s3_snap WHERE k = 1").fetchone()[0]
            other.execute("UPDATE s3_snap SET v = v + 1 WHERE k = 1")
            time.sleep(2 * pair.apply_delay_ms / 1000 + 0.2)
            second = c.execute("SELECT v FROM s3_snap WHERE k = 1").fetchone()[0]
            c.execute("COMMIT")
            return level, first == second


@pytest.mark.timeout(90)
@pytest.mark.parametrize("variant", VARIANTS)
def test_s3_p5_a_session_default_isolation_rules_the_blocks_after_it(s3_table, proxy, variant):
    pair = s3_table
    direct = [trial(pair, pair.primary.dsn(dbname="app", user="app_trust"), VARIANTS[variant]) for _ in range(2)]
    through = [trial(pair, proxy.dsn(), VARIANTS[variant]) for _ in range(3)]
    assert set(through) == set(direct), (direct, through)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("setup", [
    "SET default_transaction_isolation = 'serializable'",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
])
def test_s3_under_a_serializable_session_default_reads_outside_blocks_stay_on_the_primary(s3_table, proxy, setup):
    """Each statement outside a block is a serializable transaction on the primary; a standby
    refuses one ("cannot use serializable mode in a hot standby"). Before, such a read went to
    the standby, failed and was retried on the primary; through Pgpool-II the setting replayed
    on its standby connection then failed Pgpool's DISCARD ALL, and with
    replication_stop_on_mismatch the standby was detached for every client (an examiner's
    finding of 2026-12-05)."""
    pair = s3_table
    def standby_refusals() -> int:
        return pair.standby.logfile.read_text(errors="replace").count("cannot use serializable mode")

    before = standby_refusals()
    with psycopg.connect(proxy.dsn(), autocommit=True) as c, bounded(c, 30, "reads under serializable"):
        c.execute(setup)
        time.sleep(0.4)
        got = [c.execute("SELECT current_setting('transaction_isolation'), inet_server_port()").fetchone()
               for _ in range(5)]
    assert got == [("serializable", pair.primary.port)] * 5, got
    assert standby_refusals() == before, "a read tried the standby"
