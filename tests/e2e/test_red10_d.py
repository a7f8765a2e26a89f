"""Examiner round 10, area d (red10-d): real client drivers through the example proxy — psycopg 3,
asyncpg, node-postgres and pgjdbc, driven the way applications drive them — each answer compared
with the same driver against the primary alone (the oracle); where a read ran is told by
inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded (statement_timeout,
connect_timeout, asyncio.wait_for, e2e_support.run_program).

Found (E-2): a client's prepared statement that lives only on readers is lost for the rest of
the session once a statement that may change the parse rules (`SET LOCAL app.tenant = …`,
`RESET ALL`, `SET TimeZone …`, `SET app.x …`) is sent inside a transaction block that has
already failed. Before such a statement runs on the writer, `Session::mirror_before_rules_change`
(src/session/route.rs) prepares every reader-only statement whose text has a literal
(`statements::rules_may_matter`: any `'`, `$$`, `null` or non-ASCII byte — most statements) on
the writer by hidden Parses (`mirror_statements`), marks them prepared there
(`set_on_writer`) and counts a change of the parse rules, so they run on the writer from then
on. In a failed block the server refuses any Parse (25P02): the hidden Parses fail, nothing is
prepared on the writer (the writer's `pg_prepared_statements` stays empty), and the statement
is gone from the client's view too. Measured, statement prepared on the standby by an ordinary
read in autocommit (asyncpg's statement cache, a node-postgres `name:` query), then
`BEGIN; INSERT` (23505), the refused `SET LOCAL app.tenant = 't1'` (25P02 on both), the
statement again, `ROLLBACK`, the statement twice more:
- the primary alone: 25P02 inside the block, then the rows of k = 3 and k = 4;
- through the proxy: 26000 `prepared statement "__asyncpg_stmt_N__" does not exist` inside the
  block (asyncpg's InvalidSQLStatementNameError with its pgbouncer hint), and 26000 for every
  later use of the statement after the ROLLBACK — for the connection's life, as drivers and
  pools keep their statements (asyncpg, node-postgres 8.23 `name:` queries; libpq
  `PQprepare`/`PQexecPrepared` through psycopg's pgconn the same, pg_prepared_statements empty
  where the primary lists the statement). `RESET ALL` in the failed block does the same;
  `SET statement_timeout`, `set_config(…, true)` and `SELECT 1` there do not (not parse rules).
  A plain read of `pg_prepared_statements` (or `EXECUTE nothere`) refused in the failed block does
  the same through the other mirror path (`Session::mirror_named`, route.rs: every reader-only
  statement is parsed on the writer before a text that may name it).
  psycopg's own prepared statements (prepare_threshold) and pgjdbc's (prepareThreshold=1) get
  the 26000 inside the block where the primary says 25P02, then the driver prepares them again. 3 of 3 runs. A fix: skip the mirror (and the count of a rules
  change) while the writer's block has failed — the refused statement changes nothing there,
  and the statement stays on its readers — or undo `set_on_writer` when a hidden Parse fails.

Found (E-2, the same mechanism outside a failed block): `mirror_statements` marks each statement
prepared on the writer whatever the server answers its hidden Parse, and the answers are
swallowed. A hidden Parse the writer refuses for another reason loses the statement too: a
table an asyncpg-cached read uses (prepared on the standby) is renamed away by another session
(a migration; dropped and re-created the same), the session runs `SET TimeZone = 'UTC'`: the
primary alone answers the read 42P01 while the table is away and its row again once it is back;
through the proxy 26000 from the SET on, for good (3 of 3 runs; libpq `PQexecPrepared` the same,
measured once). A fix: mark a statement prepared on the writer only once its hidden ParseComplete
arrives (the `ParseNote` of a `Who::Mirror` Parse), keeping it on its readers otherwise.

Found (E-2, the same mirror, a hang): a Parse takes ACCESS SHARE on each relation its text names,
so the mirror's hidden Parses make a session's `SET TimeZone` (any parse-rules change) wait
behind another session's ACCESS EXCLUSIVE lock — a migration's `ALTER TABLE`, `VACUUM FULL`,
`LOCK TABLE` — on any table a statement it prepared on readers reads. The primary alone answers
the SET in 0.00 s; through the proxy it took the whole 3 s hold (3.0 s, 3 of 3 runs; 2.7 s in a
probe that took the lock 0.3 s before the SET), and with the
session's `lock_timeout = '500ms'` the SET took 0.5 s and the statement was lost (26000, finding
2). A fix: prepare those statements on the writer without waiting (or lazily, at their next Bind
there), never ahead of a statement that takes no lock.

Found (E-2, F-3, the same mirror inside a block: a committed transaction rolled back): inside a
transaction block the mirror's hidden Parse runs in the client's block, so when it fails it
aborts the block. A session's asyncpg-cached read of a column (prepared on the standby in
autocommit) that a migration then drops (another session's `ALTER TABLE … DROP COLUMN`, the
application no longer reading it; a table renamed away the same, measured once), then `BEGIN; INSERT; SET LOCAL app.tenant = 't1'; INSERT;
COMMIT`: the primary alone commits both rows; through the proxy the SET LOCAL gets 25P02 with no
error before it, the second INSERT 25P02, COMMIT answers ROLLBACK and 0 of 2 rows are written
(3 of 3 runs). The same with `DO $$ BEGIN PERFORM 1; END $$` or a call of a user plpgsql
function in place of the SET LOCAL (code the engine cannot see into counts as a possible
change of the parse rules). A fix: never send the mirror's Parses inside the client's
block where their failure is the client's (prepare them at the block's start or outside it,
under a savepoint, or lazily at the statement's next Bind on the writer, where a failure is that
Bind's own), and check their answers (finding 2).

Found (P-1, E-2, the same mirror inside a block: locks the client never took): the hidden Parses
take ACCESS SHARE on every relation their statements name, inside the client's block, held to
its end. `BEGIN; SET LOCAL app.tenant = 't1'` with a cached read of a table (prepared on the
standby) and nothing else: the primary alone holds no lock on that table and another session's
`ALTER TABLE … ADD COLUMN` (lock_timeout 1 s) runs at once; through the proxy it fails with 55P03
and pg_locks shows the client's lock on the table (3 of 3 runs). A migration waits for such a
block, and every statement queued behind the migration's lock waits with it.

What held (probes run once each, primary alone vs through the proxy, not kept as tests):
asyncpg — executemany of writes (and with a duplicate key), transaction(readonly, isolation,
deferrable) in every combination (SERIALIZABLE READ ONLY DEFERRABLE included), server_settings
default_transaction_isolation=serializable, PreparedStatement.explain(analyze=True) of an UPDATE
(rolled back as on the primary), cursor() fetch/forward in read-only and REPEATABLE READ blocks,
executemany of set_config/SET (reads after it answered with the new values), executemany with
timeout= mid-batch (TimeoutError, nothing inserted, inside and outside a block), SCRAM/md5/
password logins (and wrong passwords: 28P01), a type change of a column by another session
(ALTER TABLE … TYPE bigint/text/numeric) between two reads: every read answered in the new
type; a self-notification's pid equal to get_server_pid(); a random differential of 55 sessions
(statement_cache_size 0, 2 and 100: fetch/execute/executemany/prepare/cursor, SET/set_config/
RESET, errors, transactions) — all equal. psycopg — 60 random pipeline sessions and 60 random
non-pipeline sessions (prepare None/True/False, binary, reads/writes/SET/set_config/errors/
BEGIN/SAVEPOINT/ROLLBACK TO, autocommit on and off) equal up to the documented error timing in
pipelines; 125 random sessions of SET/RESET ALL/DISCARD ALL/SET ROLE/SET SESSION AUTHORIZATION/
SET LOCAL/set_config in and out of blocks, AND CHAIN, temp shadowing, LISTEN, SQL PREPARE,
advisory locks, with reads of the state (only seed 53 differed: the finding); the libpq trace
of every backend message for SET LOCAL/ROLLBACK of reported settings in read-only blocks (the
ParameterStatus messages equal); isolation_level × read_only × deferrable on fresh sessions;
target_session_attrs read-only/standby/prefer-standby/any/read-write; sslmode require/prefer
with gssencmode (the same refusal); COPY (…) TO STDOUT of set_config/current_setting/a volatile
function (all on the primary); a slow consumer pausing 12 s in a 300,000-row standby stream;
the unnamed statement of libpq's PQprepare across simple Queries (26000 as the primary);
backend_pid equal to pg_backend_pid(); statement_timeout = 1 ms/2 ms (no error, reads then stay
on the primary: offload only). pgjdbc — readOnlyMode=always (25006 on writes, as the primary),
getGeneratedKeys (single and batch), CallableStatement ({? = call}, {call}, CALL with INOUT),
CopyManager copyOut/copyIn (a duplicate key, in a rolled-back block), getNotifications(timeout)
while reading, 35 random sessions of prepareThreshold 1/-1, preparedStatementCacheQueries 1/2
(evictions, Close), autosave=always, binaryTransfer, fetchSize portals and commits/rollbacks —
all equal. node-postgres — binary: true results, rowMode 'array', 30 queued queries with
errors, notifications while reading, `rows:` portals (Execute with a row limit + Flush) in and
out of blocks, a client-side Bind failure (Parse, Close, Sync), COPY without a stream (57014) —
all equal.

Fixed (each failed on ac6cef3): no mirror of reader-only statements runs inside the client's
transaction block or a failed one (src/session/route.rs `mirror_statements`: its locks and its
failure were the block's), and a mirror the writer refuses outside a block undoes its mark
(`writer_mirror_message`), so the statement is parsed again where a message names it. Left,
a strict xfail: the SET still waits for another session's lock when the mirror runs outside a
block.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import asyncpg
import psycopg
import pytest

from e2e_support import DRIVERS, STANDBY_PORTS, driver_built, on_primary, ran_on, run_program

pytestmark = pytest.mark.timeout(60)

TABLE = "r10d_t"
# A read with a literal in its text (E-2's `rules_may_matter`: most statements have one).
READ = f"SELECT v, inet_server_port() FROM {TABLE} WHERE k = $1 AND v <> 'gone'"
# What the application sends next in the block that failed (its server refuses it: 25P02).
REFUSED = {"set_local_placeholder": "SET LOCAL app.tenant = 't1'", "reset_all": "RESET ALL",
           "read_of_pg_prepared_statements": "SELECT count(*) FROM pg_prepared_statements"}


@pytest.fixture(scope="module")
def table(pair):
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}", f"CREATE TABLE {TABLE} (k int PRIMARY KEY, v text)",
               f"INSERT INTO {TABLE} SELECT g, 'v' || g FROM generate_series(1, 5) g", f"GRANT ALL ON {TABLE} TO PUBLIC")
    yield
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}")


def asyncpg_target(pair, proxy, via: str) -> dict:
    port = pair.primary.port if via == "primary" else proxy.port
    return dict(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False, timeout=5,
                server_settings={"statement_timeout": "5000"})


async def warm_asyncpg(c, target: dict) -> None:
    """A session's first reads may stay on the writer (S-5, P-4): waits (3 s at most) until a
    plain read reaches the standby; at once on a direct connection to the primary."""
    for _ in range(60):
        port = await c.fetchval("SELECT inet_server_port()")
        if port in STANDBY_PORTS or port == target["port"]:
            return
        await asyncio.sleep(0.05)


async def statement_after_a_failed_block(target: dict, refused: str) -> tuple[list, list]:
    """A read asyncpg prepares (its statement cache) in autocommit; then a block that fails, the
    refused statement, the read, ROLLBACK, the read twice. Returns (outcomes, where the first
    read ran)."""
    c = await asyncpg.connect(**target)
    try:
        async def step(coro):
            try:
                return ("ok", await asyncio.wait_for(coro, 5))
            except asyncpg.PostgresError as e:
                return ("error", e.sqlstate)

        await warm_asyncpg(c, target)
        first = await c.fetchrow(READ, 1)
        out = [("ok", first[0])]
        tx = c.transaction()
        await tx.start()
        out.append(await step(c.execute(f"INSERT INTO {TABLE} VALUES (1, 'duplicate')")))
        out.append(await step(c.execute(refused)))
        out.append(await step(c.fetchval(READ, 2)))
        await tx.rollback()
        for k in (3, 4):
            out.append(await step(c.fetchval(READ, k)))
        return out, [ran_on(first[1])]
    finally:
        await c.close()


@pytest.mark.parametrize("refused", sorted(REFUSED))
def test_e2_asyncpg_statement_survives_a_statement_refused_in_a_failed_block(pair, proxy, table, refused):
    """The primary alone: 23505, 25P02, 25P02, then v3 and v4 after the ROLLBACK. Through the proxy
    (measured): 26000 `prepared statement "__asyncpg_stmt_N__" does not exist` for the read in
    the block and for every use after the ROLLBACK — the statement is lost for the session."""
    sql = REFUSED[refused]
    primary, _ = asyncio.run(statement_after_a_failed_block(asyncpg_target(pair, proxy, "primary"), sql))
    via_proxy, where = asyncio.run(statement_after_a_failed_block(asyncpg_target(pair, proxy, "proxy"), sql))
    assert primary == [("ok", "v1"), ("error", "23505"), ("error", "25P02"), ("error", "25P02"), ("ok", "v3"), ("ok", "v4")]
    assert where == ["standby"], "precondition: the statement was first prepared on the standby"
    assert via_proxy == primary


def test_e2_node_named_statement_survives_a_set_refused_in_a_failed_block(pair, proxy, table):
    """node-postgres keeps a `name:` statement for the connection's life and sends only Bind
    after its first use. The primary alone: 25P02 in the failed block, then the rows after the
    ROLLBACK. Through the proxy (measured): 26000 in the block and for both reads after it."""
    script = DRIVERS / "node" / "red10d.js"
    driver_built(DRIVERS / "node" / "node_modules" / "pg")
    out = {}
    for via, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        out[via] = run_program(["node", script, "127.0.0.1", port, pair.primary.port, TABLE, REFUSED["set_local_placeholder"]],
                               30, f"node-postgres red10d via {via}", cwd=DRIVERS / "node")
    assert out["proxy"]["warmed"], "precondition: a plain read of the session reached the standby"
    strip = lambda o: [s.replace('"standby"', '"primary"') for s in o["out"]]  # noqa: E731 - where a read ran may differ
    assert out["primary"]["out"][-2:] == ['ok:[["v3","primary"]]', 'ok:[["v4","primary"]]']
    assert strip(out["proxy"]) == strip(out["primary"]), json.dumps(out)


# -- Finding 2: a statement whose hidden Parse the writer refuses is lost all the same (E-2) ------

MOVED = "r10d_moved"
MOVED_READ = f"SELECT v, inet_server_port() FROM {MOVED} WHERE k = $1 AND v <> 'gone'"


async def statement_across_a_rename(pair, target: dict) -> tuple[list, list]:
    """asyncpg's cached read of MOVED (prepared on the standby in autocommit); another session
    renames the table away; the session sets TimeZone (a parse rule: E-2's mirror of its
    reader-only statements to the writer); the read; the table renamed back; the read twice."""
    on_primary(pair, f"DROP TABLE IF EXISTS {MOVED}, {MOVED}_old", f"CREATE TABLE {MOVED} (k int, v text)",
               f"INSERT INTO {MOVED} VALUES (1, 'a')", f"GRANT ALL ON {MOVED} TO PUBLIC")
    c = await asyncpg.connect(**target)
    try:
        async def step(coro):
            try:
                return ("ok", await asyncio.wait_for(coro, 5))
            except asyncpg.PostgresError as e:
                return ("error", e.sqlstate)

        await warm_asyncpg(c, target)
        first = await c.fetchrow(MOVED_READ, 1)
        out = [("ok", first[0])]
        on_primary(pair, f"ALTER TABLE {MOVED} RENAME TO {MOVED}_old")
        out.append(await step(c.execute("SET TimeZone = 'UTC'")))
        out.append(await step(c.fetchval(MOVED_READ, 1)))
        on_primary(pair, f"ALTER TABLE {MOVED}_old RENAME TO {MOVED}")
        for _ in range(2):
            out.append(await step(c.fetchval(MOVED_READ, 1)))
        return out, [ran_on(first[1])]
    finally:
        await c.close()
        on_primary(pair, f"DROP TABLE IF EXISTS {MOVED}, {MOVED}_old")


def test_e2_asyncpg_statement_survives_a_hidden_parse_the_writer_refuses(pair, proxy):
    """A table a cached statement reads is renamed away by another session (a migration) and
    back. The primary alone keeps the statement: 42P01 while the table is away, its row again
    after. Through the proxy (measured): the session's `SET TimeZone` mirrors the reader-only
    statement to the writer by a hidden Parse, which fails there (42P01, swallowed), yet the
    statement counts as prepared on the writer: 26000 from then on, also once the table is back."""
    primary, _ = asyncio.run(statement_across_a_rename(pair, asyncpg_target(pair, proxy, "primary")))
    via_proxy, where = asyncio.run(statement_across_a_rename(pair, asyncpg_target(pair, proxy, "proxy")))
    assert primary == [("ok", "a"), ("ok", "SET"), ("error", "42P01"), ("ok", "a"), ("ok", "a")]
    assert where == ["standby"], "precondition: the statement was first prepared on the standby"
    assert via_proxy == primary


# -- Finding 3: a session's SET waits for another session's lock on a table it once read (E-2) ---

LOCKED = "r10d_locked"
LOCKED_READ = f"SELECT v, inet_server_port() FROM {LOCKED} WHERE k = $1 AND v <> 'gone'"
HOLD_S = 3.0


async def set_while_another_session_locks(pair, target: dict) -> tuple[list, float, list]:
    """asyncpg's cached read of LOCKED (prepared on the standby in autocommit); another session
    takes LOCKED in ACCESS EXCLUSIVE mode for HOLD_S (a migration's ALTER TABLE, VACUUM FULL,
    LOCK TABLE); the session runs `SET TimeZone = 'UTC'` meanwhile. Returns (outcomes, the SET's
    seconds, where the first read ran)."""
    on_primary(pair, f"DROP TABLE IF EXISTS {LOCKED}", f"CREATE TABLE {LOCKED} (k int, v text)",
               f"INSERT INTO {LOCKED} VALUES (1, 'a')", f"GRANT ALL ON {LOCKED} TO PUBLIC")
    locked, release = threading.Event(), threading.Event()

    def hold():
        with psycopg.connect(pair.primary.dsn(dbname="app"), connect_timeout=5) as a:
            a.execute(f"LOCK TABLE {LOCKED} IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(HOLD_S)
            a.rollback()

    c = await asyncpg.connect(**target)
    holder = threading.Thread(target=hold, daemon=True)
    try:
        await warm_asyncpg(c, target)
        first = await c.fetchrow(LOCKED_READ, 1)
        holder.start()
        assert locked.wait(5), "the other session did not get its lock"
        t0 = time.monotonic()
        out = [await asyncio.wait_for(c.execute("SET TimeZone = 'UTC'"), HOLD_S + 5)]
        took = time.monotonic() - t0
        release.set()
        holder.join(5)
        out.append(await asyncio.wait_for(c.fetchval(LOCKED_READ, 1), 5))
        return out, took, [ran_on(first[1])]
    finally:
        release.set()
        await c.close()
        holder.join(5) if holder.is_alive() else None
        on_primary(pair, f"DROP TABLE IF EXISTS {LOCKED}")


@pytest.mark.xfail(strict=True, reason=(
    "known limit (README, 'Known open defects'): outside a block the engine still prepares a "
    "statement that lives only on readers on the writer before a SET that may change how text "
    "parses (E-2), and that Parse waits for another session's lock on a table it reads"))
def test_e2_a_set_does_not_wait_for_another_sessions_lock_on_a_table_once_read(pair, proxy):
    """The primary alone answers the SET at once (0.00 s) — a SET takes no table lock. Through the
    proxy (measured): 3.0 s, the whole hold. Before the SET runs, `mirror_before_rules_change`
    parses the session's reader-only statements on the writer, and a Parse takes ACCESS SHARE
    on every relation its text names: the SET waits behind the other session's lock, for as long
    as the migration holds it (with the session's `lock_timeout` the hidden Parse fails instead
    and the statement is lost: finding 2)."""
    primary, took_primary, _ = asyncio.run(set_while_another_session_locks(pair, asyncpg_target(pair, proxy, "primary")))
    via_proxy, took_proxy, where = asyncio.run(set_while_another_session_locks(pair, asyncpg_target(pair, proxy, "proxy")))
    assert primary == ["SET", "a"] and took_primary < 0.5
    assert where == ["standby"], "precondition: the statement was first prepared on the standby"
    assert via_proxy == primary
    assert took_proxy < 1.0, f"SET took {took_proxy:.2f} s through the proxy, {took_primary:.2f} s on the primary alone"


# -- Finding 4: the mirror's hidden Parse that fails inside a block aborts the client's block (E-2) ----

MIGRATED = "r10d_migrated"
WRITES = "r10d_writes"
OLD_READ = f"SELECT old, inet_server_port() FROM {MIGRATED} WHERE k = $1 AND v <> 'gone'"


# What the block runs after its first write: a parse-rules change, or code the engine cannot see into.
MID_BLOCK = {"set_local_placeholder": "SET LOCAL app.tenant = 't1'", "do_block": "DO $$ BEGIN PERFORM 1; END $$"}


async def block_after_a_dropped_column(pair, target: dict, mid: str) -> tuple[list, list]:
    """asyncpg's cached read of column `old` (prepared on the standby in autocommit); a migration
    drops the column (another session; the application no longer reads it); then the session's
    transaction: BEGIN, INSERT, `SET LOCAL app.tenant`, INSERT, COMMIT; the rows it wrote."""
    on_primary(pair, f"DROP TABLE IF EXISTS {MIGRATED}, {WRITES}", f"CREATE TABLE {MIGRATED} (k int, v text, old text)",
               f"INSERT INTO {MIGRATED} VALUES (1, 'a', 'o')", f"CREATE TABLE {WRITES} (x int)",
               f"GRANT ALL ON {MIGRATED}, {WRITES} TO PUBLIC")
    c = await asyncpg.connect(**target)
    try:
        async def step(coro):
            try:
                return await asyncio.wait_for(coro, 5)
            except asyncpg.PostgresError as e:
                return ("error", e.sqlstate)

        await warm_asyncpg(c, target)
        first = await c.fetchrow(OLD_READ, 1)
        out = [first[0]]
        on_primary(pair, f"ALTER TABLE {MIGRATED} DROP COLUMN old")
        for sql in ("BEGIN", f"INSERT INTO {WRITES} VALUES (1)", mid,
                    f"INSERT INTO {WRITES} VALUES (2)", "COMMIT"):
            out.append(await step(c.execute(sql)))
        out.append(await step(c.fetchval(f"SELECT count(*) FROM {WRITES}")))
        return out, [ran_on(first[1])]
    finally:
        await c.close()
        on_primary(pair, f"DROP TABLE IF EXISTS {MIGRATED}, {WRITES}")


@pytest.mark.parametrize("mid", sorted(MID_BLOCK))
def test_e2_a_block_commits_after_a_migration_dropped_a_column_a_cached_read_named(pair, proxy, mid):
    """The primary alone: BEGIN, INSERT 0 1, SET, INSERT 0 1, COMMIT, and both rows. Through the
    proxy (measured): the `SET LOCAL` gets 25P02 though nothing the client sent failed, the
    second INSERT 25P02, the COMMIT answers ROLLBACK, and no row is written (0 of 2): the hidden
    Parse of the statement that reads the dropped column, sent on the writer inside the block
    ahead of the SET (`mirror_before_rules_change`), failed there (the column is gone) and aborted the block."""
    primary, _ = asyncio.run(block_after_a_dropped_column(pair, asyncpg_target(pair, proxy, "primary"), MID_BLOCK[mid]))
    via_proxy, where = asyncio.run(block_after_a_dropped_column(pair, asyncpg_target(pair, proxy, "proxy"), MID_BLOCK[mid]))
    assert primary == ["o", "BEGIN", "INSERT 0 1", "DO" if mid == "do_block" else "SET", "INSERT 0 1", "COMMIT", 2]
    assert where == ["standby"], "precondition: the statement was first prepared on the standby"
    assert via_proxy == primary


# -- Finding 5: inside a block the mirror's Parses hold locks the client never took (E-2, P-1) ----

HELD = "r10d_held"
HELD_READ = f"SELECT v, inet_server_port() FROM {HELD} WHERE k = $1 AND v <> 'gone'"


async def ddl_during_a_block_with_set_local(pair, target: dict) -> tuple[list, list]:
    """asyncpg's cached read of HELD (prepared on the standby in autocommit); then BEGIN and
    `SET LOCAL app.tenant` (nothing that touches HELD), the block left open while another
    session runs `ALTER TABLE HELD ADD COLUMN` under lock_timeout 1 s; what it got, and the
    locks on HELD it saw."""
    on_primary(pair, f"DROP TABLE IF EXISTS {HELD}", f"CREATE TABLE {HELD} (k int, v text)",
               f"INSERT INTO {HELD} VALUES (1, 'a')", f"GRANT ALL ON {HELD} TO PUBLIC")
    c = await asyncpg.connect(**target)
    try:
        await warm_asyncpg(c, target)
        first = await c.fetchrow(HELD_READ, 1)
        await asyncio.wait_for(c.execute("BEGIN"), 5)
        await asyncio.wait_for(c.execute("SET LOCAL app.tenant = 't1'"), 5)
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=5) as a:
            a.execute("SET lock_timeout = '1s'")
            try:
                a.execute(f"ALTER TABLE {HELD} ADD COLUMN z int")
                out = ["ALTER TABLE"]
            except psycopg.Error as e:
                out = [e.sqlstate]
            out.append(a.execute("SELECT count(*) FROM pg_locks l JOIN pg_class r ON r.oid = l.relation "
                                 "WHERE r.relname = %s AND l.pid <> pg_backend_pid()", (HELD,)).fetchone()[0])
        await asyncio.wait_for(c.execute("COMMIT"), 5)
        return out, [ran_on(first[1])]
    finally:
        await c.close()
        on_primary(pair, f"DROP TABLE IF EXISTS {HELD}")


def test_p1_a_block_holds_no_lock_on_a_table_it_did_not_touch(pair, proxy):
    """The primary alone: the other session's ALTER TABLE runs at once, no lock on the table. Through
    the proxy (measured): 55P03 (lock timeout) and one lock on the table held by the client's
    block — the hidden Parse that `mirror_before_rules_change` sent inside the block ahead of the
    SET LOCAL took ACCESS SHARE on the table its cached statement reads, held to the block's end
    (a migration's DDL, and every statement queued behind it, waits for the client's block)."""
    primary, _ = asyncio.run(ddl_during_a_block_with_set_local(pair, asyncpg_target(pair, proxy, "primary")))
    via_proxy, where = asyncio.run(ddl_during_a_block_with_set_local(pair, asyncpg_target(pair, proxy, "proxy")))
    assert primary == ["ALTER TABLE", 0]
    assert where == ["standby"], "precondition: the statement was first prepared on the standby"
    assert via_proxy == primary
