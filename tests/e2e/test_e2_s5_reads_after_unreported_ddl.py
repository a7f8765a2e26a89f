"""SPEC E-2, S-4, S-5 end to end, with asyncpg: a read whose code the catalogue's last report judged
read-safe, run while DDL of the database is not yet reported, keeps the session's reads — also of
statements it prepared before — off the standby only until the report, not for good.

Found running SQLAlchemy's own suite through the proxy (2026-12-06): in a database with `citext`
installed (its `replace`, `strpos`, `regexp_*`, … share built-ins' names), every session that read
with such a name right after DDL (SQLAlchemy creates tables, then reads; asyncpg prepares each
statement once and binds it again) kept all its reads on the primary for the rest of the connection:
the read counted as code the engine could not see into (a hazard for the session, S-4) and as a
possible change of the parse rules, which made the statement prepared then run only on the writer
(E-2, STATEMENT_LEXED_OTHERWISE). Now such a read makes a capture due and counts a possible change;
the capture finds the writer's state unchanged and the statement parsed before is current again.

The same code in a write, or in a read kept on the writer for another reason (a server-dependent
call), was still counted as code the engine could not see into — its routing reason (a write, a
server-dependent answer) said nothing of its code — and kept the session's reads on the primary
for good (S-4 `SESSION_HAZARD`). Code nothing judged read-safe (a volatile user function) still
does, as the last case checks."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from e2e_support import STANDBY_PORTS, report, STANDBY_PAUSE_S

DB = "e2r"
# Calls citext's `replace` (reported immutable): code the catalogue judged read-safe.
CODE = "SELECT inet_server_port(), replace($1::text, 'a', 'b')"
# Built-ins only, and a literal (the parse rules may change what it means).
PLAIN = "SELECT inet_server_port(), 'lit:' || $1::text"
# The catalogue is reported every 300 ms by the example proxy: well within this.
REACH_STANDBY_S = 8.0


@pytest.fixture(scope="module")
def citext_db(pair):
    pair.primary.psql(f"DROP DATABASE IF EXISTS {DB}")
    pair.primary.psql(f"CREATE DATABASE {DB}")
    for sql in ["CREATE EXTENSION citext", "GRANT ALL ON SCHEMA public TO PUBLIC"]:
        pair.primary.psql(sql, dbname=DB)
    pair.wait_replayed()
    return pair


async def session(port: int, in_block: bool, table: str) -> tuple[list, list]:
    """The reads of PLAIN (and, outside blocks, of CODE: inside one a user function keeps a read
    on the writer, P-5) after DDL: those at once, then until the last five ran on the standby."""
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database=DB, ssl=False,
                              timeout=10, command_timeout=10)

    async def read(sql):
        if in_block:
            async with c.transaction():
                return tuple(await c.fetchrow(sql, "abc"))
        return tuple(await c.fetchrow(sql, "abc"))

    try:
        # A migration's DDL, in a block as SQLAlchemy's asyncpg dialect sends it.
        async with c.transaction():
            await c.execute(f"CREATE TABLE {table} (id int)")
        # Read at once, while the DDL is not reported yet: both statements are prepared now,
        # and CODE runs code whose definition may have changed.
        first = [await read(PLAIN), await read(CODE), await read(PLAIN), await read(CODE)]
        later: list = []
        deadline = time.time() + REACH_STANDBY_S
        while time.time() < deadline:
            later.append(await read(PLAIN))
            if not in_block:
                later.append(await read(CODE))
            if len(later) >= 6 and all(p in STANDBY_PORTS for p, _ in later[-6:]):
                break
            await asyncio.sleep(STANDBY_PAUSE_S)
        return first, later
    finally:
        await c.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("in_block", [True, False], ids=["in_a_block", "autocommit"])
def test_s5_e2_a_read_during_unreported_ddl_does_not_keep_the_session_on_the_primary(
        citext_db, proxy, in_block):
    table = f"e2r_{'b' if in_block else 'a'}_{int(time.time() * 1000)}"
    first, later = asyncio.run(session(proxy.port, in_block, table))
    assert all(v in ("bbc", "lit:abc") for _, v in first + later), (first, later)
    on_standby = [p in STANDBY_PORTS for p, _ in later]
    report("E-2/S-5: reads after unreported DDL",
           f"asyncpg {'in blocks' if in_block else 'autocommit'}: reads at once {len(first)} "
           f"({sum(p in STANDBY_PORTS for p, _ in first)} on the standby); then "
           f"{sum(on_standby)} of {len(later)} on the standby, the last 6 "
           f"{'all' if all(on_standby[-6:]) else 'not all'} there")
    assert len(later) >= 6 and all(on_standby[-6:]), (
        f"the prepared read never came back to the standby in {REACH_STANDBY_S} s: {later} "
        f"(reasons {proxy.stats()['reason']})")


# Code the catalogue judged read-safe, in statements that run on the writer for other reasons.
WRITES_WITH_JUDGED_CODE = [
    # A write: citext's `replace` (the column is citext).
    "UPDATE {t} SET v = replace(v, 'a', 'b') WHERE id::text = $1",
    # A server-dependent read (S-7) calling it.
    "SELECT replace($1::text, 'a', 'b'), pg_is_in_recovery()",
]
# A volatile user function: code nothing judged read-safe.
WRITE_WITH_UNSEEN_CODE = "UPDATE {t} SET v = e2r_volatile(v) WHERE id::text = $1"


@pytest.fixture(scope="module")
def code_db(citext_db):
    pair = citext_db
    pair.primary.psql("CREATE OR REPLACE FUNCTION e2r_volatile(citext) RETURNS citext "
                      "VOLATILE LANGUAGE sql AS $$ SELECT $1 $$", dbname=DB)
    pair.wait_replayed()
    # The example proxy reports each database's catalogue every 300 ms: the function is in it.
    time.sleep(1.0)
    return pair


async def reads_after(port: int, table: str, statements: list[str], ddl: bool,
                      max_s: float = REACH_STANDBY_S) -> list:
    """Runs `statements` (right after DDL when `ddl`), then reads PLAIN until the last six ran on
    the standby or `max_s` passed: the ports the reads ran on."""
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database=DB, ssl=False,
                              timeout=10, command_timeout=10)
    try:
        if ddl:
            await c.execute(f"ALTER TABLE {table} ADD COLUMN w int")
        for sql in statements:
            await c.fetch(sql.format(t=table), "1")
        ports: list = []
        deadline = time.time() + max_s
        while time.time() < deadline:
            ports.append((await c.fetchrow(PLAIN, "x"))[0])
            if len(ports) >= 6 and all(p in STANDBY_PORTS for p in ports[-6:]):
                break
            await asyncio.sleep(0.1)
        return ports
    finally:
        await c.close()


def new_table(pair, prefix: str) -> str:
    """A table of one citext row, created outside the session under test, and a pause for the
    catalogue's next report (DDL keeps reads off the standby until then)."""
    table = f"{prefix}_{int(time.time() * 1000)}"
    pair.primary.psql(f"CREATE TABLE {table} (id int, v citext); "
                      f"INSERT INTO {table} VALUES (1, 'abc'); ALTER TABLE {table} OWNER TO app_trust",
                      dbname=DB)
    pair.wait_replayed()
    time.sleep(1.0)
    return table


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ddl", [False, True], ids=["reported", "during_unreported_ddl"])
def test_s5_code_judged_read_safe_in_a_write_does_not_keep_the_session_on_the_primary(
        code_db, proxy, ddl):
    table = new_table(code_db, "e2w_d" if ddl else "e2w_r")
    ports = asyncio.run(reads_after(proxy.port, table, WRITES_WITH_JUDGED_CODE, ddl))
    on_standby = [p in STANDBY_PORTS for p in ports]
    report("S-4/S-5: code judged read-safe in writes",
           f"asyncpg, {'after unreported DDL' if ddl else 'catalogue reported'}: "
           f"{sum(on_standby)} of {len(ports)} later reads on the standby")
    assert len(ports) >= 6 and all(on_standby[-6:]), (
        f"reads never came back to the standby in {REACH_STANDBY_S} s: {ports} "
        f"(reasons {proxy.stats()['reason']})")


@pytest.mark.timeout(60)
def test_s5_unseen_code_in_a_write_keeps_the_session_on_the_primary(code_db, proxy):
    table = new_table(code_db, "e2u")
    before = proxy.stats()["reason"].get("SESSION_HAZARD", 0)
    # The judged cases above reach the standby well within this.
    ports = asyncio.run(reads_after(proxy.port, table, [WRITE_WITH_UNSEEN_CODE], False, 2.5))
    after = proxy.stats()["reason"].get("SESSION_HAZARD", 0)
    assert not any(p in STANDBY_PORTS for p in ports), ports
    # Every later read stayed on the primary for the session's hazard (S-4), not by chance.
    assert after - before >= len(ports), (before, after, len(ports))
