"""SPEC S-7 end to end: an unlogged relation's rows are the primary's alone.

A hot standby refuses to read an unlogged table ("cannot access temporary or unlogged relations
during recovery", 0A000). Alone, such a read was refused by the standby and ran again on the
primary (F-2); in a batch behind another statement whose rows had reached the client it could
not run again, and the client got the standby's error where the primary answers (an examiner's
finding of 2026-12-05: psycopg's pipeline mode, 10/10). The catalogue now names every unlogged
relation and every ancestor of one (a partitioned table with an unlogged partition): reads naming
them go to the primary. Every answer is compared with the primary's."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import on_primary

SCHEMA = [
    "DROP TABLE IF EXISTS s7u_parts, s7u_scratch",
    "CREATE UNLOGGED TABLE s7u_scratch (n int)",
    "INSERT INTO s7u_scratch VALUES (1), (2)",
    "CREATE TABLE s7u_parts (k int, v text) PARTITION BY RANGE (k)",
    "CREATE TABLE s7u_parts_logged PARTITION OF s7u_parts FOR VALUES FROM (0) TO (10)",
    "CREATE UNLOGGED TABLE s7u_parts_unlogged PARTITION OF s7u_parts FOR VALUES FROM (10) TO (20)",
    "INSERT INTO s7u_parts VALUES (1, 'logged'), (11, 'unlogged')",
    "GRANT SELECT ON s7u_scratch, s7u_parts, s7u_parts_logged, s7u_parts_unlogged TO PUBLIC",
]


@pytest.fixture(scope="module")
def s7u(pair):
    on_primary(pair, *SCHEMA)
    pair.wait_replayed()
    return pair


def pipeline(dsn: str) -> list:
    """A read of a logged table, then reads of unlogged rows, in one batch (one Sync)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        try:
            with c.pipeline():
                cursors = [
                    c.execute("SELECT k, v FROM s7u_parts_logged ORDER BY k"),
                    c.execute("SELECT n FROM s7u_scratch ORDER BY n"),
                    c.execute("SELECT k, v FROM s7u_parts ORDER BY k"),
                ]
            return [cur.fetchall() for cur in cursors]
        except psycopg.Error as e:
            return [e.sqlstate, str(e)]


@pytest.mark.timeout(60)
def test_s7_unlogged_rows_in_a_batch_behind_another_read_are_the_primarys(s7u, proxy):
    pair = s7u
    want = pipeline(pair.primary.dsn(dbname="app", user="app_trust"))
    assert want == [[(1, "logged")], [(1,), (2,)], [(1, "logged"), (11, "unlogged")]]
    for _ in range(5):
        assert pipeline(proxy.dsn()) == want


@pytest.mark.timeout(60)
def test_s7_reads_naming_an_unlogged_relation_or_its_ancestor_go_to_the_primary(s7u, proxy):
    pair = s7u
    before = proxy.stats()["counter"]["failures_reusable_error"]
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        for sql in ("SELECT n, inet_server_port() FROM s7u_scratch ORDER BY n LIMIT 1",
                    "SELECT k, inet_server_port() FROM s7u_parts ORDER BY k LIMIT 1"):
            assert c.execute(sql).fetchone()[1] == pair.primary.port, sql
        # A logged partition alone is any table's: once the standby has replayed what the reads
        # on the primary saw (S-1a, its 200 ms apply delay), its reads go there.
        ports = set()
        for _ in range(30):
            ports.add(c.execute("SELECT k, inet_server_port() FROM s7u_parts_logged").fetchone()[1])
            if pair.standby.port in ports:
                break
            time.sleep(0.1)
        assert pair.standby.port in ports
    # Never sent to the standby to be refused there.
    assert proxy.stats()["counter"]["failures_reusable_error"] == before
