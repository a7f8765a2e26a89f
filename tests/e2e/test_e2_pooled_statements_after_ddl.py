"""SPEC E-2 end to end: a statement the engine prepared on a pooled reader before DDL (an
examiner's finding of 2026-12-05). Session A runs a parameterised read with asyncpg (a named
statement, prepared on a reader under the engine's name) and ends; a session adds a column to the
table through the proxy; a new session B sends the same text. The primary prepares B's statement
afresh and answers the new shape; through the proxy the reader's old statement was reused for B
and answered 0A000 "cached plan must not change result type", which B, having just prepared it,
could never have caused. DDL a session runs now makes the engine prepare its statements on
pooled connections again (closed first) before their next use.

DDL that reaches the primary without passing through the engine is not seen: there the reader's
0A000 closes the connection after the first session it fails (README)."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import psycopg
import pytest

from e2e_support import on_primary


async def fetch(port: int, sql: str):
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False,
                              command_timeout=20)
    try:
        try:
            return tuple(await c.fetchrow(sql, 1))
        except asyncpg.PostgresError as e:
            return e.sqlstate
    finally:
        await asyncio.wait_for(c.close(), 10)


@pytest.mark.timeout(90)
def test_e2_a_statement_prepared_on_a_pooled_reader_before_ddl_is_prepared_again(pair, proxy):
    got = []
    for i in range(3):
        table = f"e2ddl_{i}"
        on_primary(pair, f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} (a int, b int)",
                   f"INSERT INTO {table} VALUES (1, 2)", f"GRANT ALL ON {table} TO PUBLIC")
        pair.wait_replayed()
        sql = f"SELECT * FROM {table} WHERE a = $1"
        first = asyncio.run(fetch(proxy.port, sql))
        with psycopg.connect(proxy.dsn(user="postgres"), autocommit=True) as admin:
            admin.execute(f"ALTER TABLE {table} ADD COLUMN c int DEFAULT 3")
        pair.wait_replayed()
        time.sleep(0.3)
        second = asyncio.run(fetch(proxy.port, sql))
        got.append((first, second))
        on_primary(pair, f"DROP TABLE IF EXISTS {table}")
    assert got == [((1, 2), (1, 2, 3))] * 3, got
