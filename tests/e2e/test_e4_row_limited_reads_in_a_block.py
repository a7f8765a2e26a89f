"""E-4: row-limited reads inside a READ COMMITTED block, through the example proxy against the real
primary + hot standby. asyncpg's `fetchrow`/`fetchval` inside `conn.transaction()` send
Parse/Bind/Execute with a row limit of 1 on the unnamed portal, then Sync; PostgreSQL answers a
point read with its row and PortalSuspended (the executor stops at the limit). Before: every one
ran on the primary (BATCH_ROW_LIMITED_IN_TXN, 0 of 2201 in an examiner's pool test). Now such a
batch runs on the standby with its answers held until the Execute ends; a row-limited Execute
that suspends with a larger limit (rows remain: a fetch size) runs again on the primary, and the
client sees the primary's answers only. Every answer is compared with the primary alone's."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest

from e2e_support import report
from test_red2_findings import SYNC, bind, execute, parse, query, same_as_primary

READS = 100
READ = "SELECT v, inet_server_port() FROM kv WHERE k = $1"


@pytest.fixture(scope="module")
def e4(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("INSERT INTO kv VALUES (1901, 7) ON CONFLICT (k) DO UPDATE SET v = 7")
    pair.set_apply_delay(0)
    pair.wait_replayed()
    try:
        yield pair
    finally:
        pair.set_apply_delay(200)


async def _asyncpg_reads(port: int, standby_port: int, cache: int = 100) -> tuple[list, int]:
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False,
                              statement_cache_size=cache)
    answers, on_standby = [], 0
    try:
        for i in range(READS):
            async with c.transaction():
                if i % 2:
                    v, p = await c.fetchrow(READ, 1901)
                else:
                    v = await c.fetchval("SELECT v FROM kv WHERE k = $1", 1901)
                    p = await c.fetchval("SELECT inet_server_port()")
                # A read with no row (CommandComplete within the limit) and one past the end.
                none = await c.fetchrow("SELECT v FROM kv WHERE k = $1", -1)
                answers.append((v, none))
                on_standby += p == standby_port
    finally:
        await c.close()
    return answers, on_standby


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cache", [100, 0])
def test_e4_asyncpg_fetchrow_and_fetchval_in_a_transaction_read_on_the_standby(e4, proxy, cache):
    """`statement_cache_size=0` (behind pgbouncer): asyncpg parses the unnamed statement with a
    Describe and a Flush, then again with its Bind and row-limited Execute — an examiner's finding
    of 2026-12-05: 55000 and an aborted transaction, 10/10, before the engine answered the
    re-Parse at once."""
    want, _ = asyncio.run(asyncio.wait_for(_asyncpg_reads(e4.primary.port, e4.standby.port, cache), 60))
    got, on_standby = asyncio.run(asyncio.wait_for(_asyncpg_reads(proxy.port, e4.standby.port, cache), 60))
    assert got == want
    report("E-4", f"asyncpg (statement cache {cache}) fetchrow/fetchval in conn.transaction(): "
                  f"{on_standby}/{READS} transactions read on the standby")
    assert on_standby >= 0.9 * READS, f"{on_standby}/{READS} on the standby"


CURSOR_READ = "SELECT g FROM generate_series(1, 10) g"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("limit", [1, 3, 10, 20])
def test_e4_a_raw_row_limited_batch_in_a_block_answers_as_on_the_primary(e4, proxy, limit):
    """JDBC-like: Parse/Bind/Execute(limit)/Sync in a block — suspended (1, 3), run to completion
    (10 rows with limit 10 suspends; 20 completes) — then the next Execute of the same portal,
    as a fetch size does with a suspended portal, and COMMIT."""
    same_as_primary(e4, proxy, [
        ([query("BEGIN")], 1),
        ([parse("", CURSOR_READ), bind("", ""), execute("", limit), SYNC], 1),
        ([execute("", limit), SYNC], 1) if limit in (3, 10) else ([query("SELECT 1")], 1),
        ([query("COMMIT")], 1),
    ])


@pytest.mark.timeout(60)
def test_e4_an_error_in_a_row_limited_read_in_a_block_answers_as_on_the_primary(e4, proxy):
    same_as_primary(e4, proxy, [
        ([query("BEGIN")], 1),
        ([parse("", "SELECT 1/(g - 1) FROM generate_series(1, 3) g"), bind("", ""), execute("", 1), SYNC], 1),
        ([query("ROLLBACK")], 1),
        ([parse("", CURSOR_READ), bind("", ""), execute("", 1), SYNC], 1),
    ])
