"""Examiner round 8, area a (red8-a): real client drivers through the example proxy — psycopg 3,
asyncpg, node-postgres and pgjdbc, driven the way applications drive them — each answer compared
with the same driver against the primary alone (the oracle), and where a read ran told by
inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded (statement_timeout,
connect_timeout, e2e_support.bounded, asyncio.wait_for).

Found (E-2, S-7): a statement the client parsed on the writer answers under another resolution
of its names once the session's DDL makes a closer one appear — a table earlier on the
search_path, a closer function overload. The primary alone keeps the statement's first parse (as
PostgreSQL does for any prepared statement whose dependencies did not change) and answers from
`public`'s table / the old overload; through the proxy the statement runs on the standby, prepared
there afresh after the DDL, and answers from the new object (6 of 6, both cases, 3 of 3 runs).
README's "Two windows stay" paragraph documents this only for a statement "that lives only on
readers", where no server keeps the first parse; here the writer keeps it. The two checks kept at
the end held and guard real risks cheaply (a driver's cancel of a read on the standby, F-1 with
F-3; notifications while the session's state changes, P-8); they are not findings.

Fixed the same day: a client's statement is stamped with the DDL epoch of the writer's parse
(`ClientStatements::stamp`), and once DDL moved it, it runs on the writer, where its first parse
is (`STATEMENT_RESOLVED_BEFORE_DDL`).

What held (measured once each, primary alone vs through the proxy, not kept as tests):
psycopg 3.3.9 (libpq 18) — prepare_threshold=0 reads, the first statement of a session included,
and binary=True parameters and results, all on the standby after warm-up with the primary's answers;
prepared_max=4 evicting and re-preparing 7 statements in and out of blocks (pg_prepared_statements
equal); more than max_prepared_statements (400) distinct prepared reads (answers equal); prepared
SET/RESET/SET LOCAL/BEGIN/SAVEPOINT/ROLLBACK TO/COMMIT/SET ROLE/DISCARD PLANS executed again by
Bind only, with the reads after them; a prepared CREATE TEMP TABLE shadowing a table, dropped and
re-created by Bind only; pipeline mode (reads, a write, errors, several syncs, prepared statements
parsed in the pipeline, flush-per-fetch, write-then-read read-your-writes 29/29); executemany with
returning=True and with an error; nested conn.transaction() with a failing inner block; named
cursors with itersize, withhold and scroll; cursor.stream() broken off after 5 rows on the standby
(in autocommit and in a block, which fails as on the primary) and a standby read failing after
2,999 rows by SELECT, stream and COPY TO (block failed after, as on the primary); COPY TO text and
binary, COPY FROM with a bad row; conn.cancel() and cancel_safe() with sslmode prefer/allow/disable,
max_protocol_version 3.0/3.2/latest; cancels while idle, inside a block, in a pipeline, during
COPY TO, right after a SET (the capture); SET LOCAL and set_config(…, true) statement_timeout in a
block; LISTEN with notifies() while idle, while reading, and a NOTIFY inside a block delivered at
COMMIT; EnumInfo/CompositeInfo right after CREATE TYPE; client_encoding LATIN1/WIN1252/SJIS/EUC_JP/
SQL_ASCII (bytes and 22P05 errors equal); 24 startup `options` spellings (-e, --name=value,
-cname=value, backslash escapes, repeated and dashed names: the standby's answers equal); empty
queries (simple, extended, prepared, described); every ErrorResponse field of 13 failing reads in
both protocols; a writer backend terminated while the client idles (57P01, then closed); a client
that vanishes mid standby read (close, cancel+close) leaves the pooled readers clean for 4 other
clients; Django-style autocommit=False write/read rounds (no stale read); target_session_attrs
read-write/primary; SHOW transaction_read_only, in_hot_standby, pg_is_in_recovery and friends.
asyncpg 0.30 — prepared statements (fetch, fetchrow, fetchval, explicitly named), statement_cache_
size=0, fetch of 5,000 rows, cursor() with prefetch and forward() in a block, copy_records_to_table
(temp and regular tables, in a block, duplicate keys), copy_to_table, copy_from_query with
arguments, copy_from_table; add_listener (20 notifications during reads; 300 sent while the
session ran SET/reads/writes/blocks/pg_notify, all delivered in order, none twice); timeout= on a
standby read (cancel, TimeoutError, next read answered) six times in a row and inside a
transaction (25P02 after); fetchrow/fetchval of rows up to 2 MB in transactions; errors at Parse,
Bind and Execute inside blocks (25P02 after); server_settings of 15 settings and a placeholder
replayed on the standby (statement_timeout fires there); a pool's reset between acquisitions
(settings back to the login defaults, advisory lock released); 200 concurrent multi-tenant
requests over a pool with SET / set_config / SET LOCAL and a row-level security policy (no row of
another tenant); prepare() of a table created in the same block, InvalidCachedStatementError after
ALTER TABLE; Bind parameters of 3 MB on statements prepared on readers only (streamed to the
writer, answers equal); the writer backend terminated (InterfaceError, closed).
node-postgres 8.23 — named statements (on the standby), a duplicate name with other text,
query_timeout and the queries queued behind it, multi-statement with an error, array/json/bytea/
timestamptz/numeric parameters, named statements and SAVEPOINT/ROLLBACK TO in a block, rowMode.
pgjdbc (Debian postgresql.jar) — prepareThreshold 0/1/-1, extendedCacheEverything and simple
query mode (all on the standby), setQueryTimeout on Statement and PreparedStatement (57014, next
statement on the standby, 10 rounds), reWriteBatchedInserts with a duplicate key
(BatchUpdateException counts equal), fetchSize cursor and setMaxRows in a transaction,
multi-result simple query, autosave=always/conservative/never with cleanupSavepoints and a
failing standby read in the block, the LargeObject API (fastpath FunctionCall, 100 kB) and lo_get,
a fetch-size portal closed early (pg_cursors equal). Not kept as findings: a session's first
reads, reads after SQL PREPARE or a session advisory lock, and `x || 'literal'` reads in a block
staying on the primary (README: warm-up, S-4 hazards, P-5's spellings of the transaction's time);
a psycopg pipeline error surfacing at p.sync() instead of at the next execute() (the engine holds
a batch until its Sync, E-1 — when the client sees the error is timing on the primary too); the
same resolution change for a statement that lives only on readers (documented, above).
"""

from __future__ import annotations

import asyncio
import threading
import time

import asyncpg
import psycopg
import pytest

from e2e_support import answer, bounded, connect, on_primary, ran_on, run, warm

pytestmark = pytest.mark.timeout(60)


def twins(pair, proxy) -> dict[str, str]:
    return {"primary": pair.primary.dsn(user="app_trust", dbname="app"), "proxy": proxy.dsn()}


def asyncpg_targets(pair, proxy) -> dict[str, dict]:
    return {
        "primary": dict(host="127.0.0.1", port=pair.primary.port, user="app_trust", database="app"),
        "proxy": dict(host="127.0.0.1", port=proxy.port, user="app_trust", database="app", ssl=False),
    }


# -- Finding: a statement parsed on the writer answers under another resolution on readers (E-2) ----

# What appears after the session's statement was parsed: a table earlier on its search_path, or a
# closer overload of the function it calls (a migration adding one). Each: the prepared read, the
# DDL (run through the session), what the primary's kept parse answers.
RESOLUTION = {
    "shadowing_table": ("SELECT src, inet_server_port() FROM r8a_sh",
                        ["CREATE TABLE r8a_s.r8a_sh (src text)", "INSERT INTO r8a_s.r8a_sh VALUES ('shadow')"],
                        ["DROP TABLE IF EXISTS r8a_s.r8a_sh"], "public"),
    "closer_overload": ("SELECT r8a_f(1), inet_server_port()",
                        ["CREATE FUNCTION r8a_f(int) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT 'int' $$"],
                        ["DROP FUNCTION IF EXISTS r8a_f(int)"], "numeric"),
}


@pytest.fixture
def resolvable(pair):
    drop = ["DROP SCHEMA IF EXISTS r8a_s CASCADE", "DROP TABLE IF EXISTS public.r8a_sh", "DROP TABLE IF EXISTS public.r8a_w",
            "DROP FUNCTION IF EXISTS r8a_f(int)", "DROP FUNCTION IF EXISTS r8a_f(numeric)"]
    on_primary(pair, *drop, "CREATE SCHEMA r8a_s", "GRANT ALL ON SCHEMA r8a_s TO PUBLIC",
               "CREATE TABLE public.r8a_sh (src text)", "INSERT INTO public.r8a_sh VALUES ('public')",
               "CREATE TABLE public.r8a_w (n int)", "GRANT ALL ON public.r8a_sh, public.r8a_w TO PUBLIC",
               "CREATE FUNCTION r8a_f(numeric) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT 'numeric' $$",
               "GRANT EXECUTE ON FUNCTION r8a_f(numeric) TO PUBLIC")
    yield
    on_primary(pair, *drop)


@pytest.mark.parametrize("case", sorted(RESOLUTION))
def test_e2_a_statement_parsed_on_the_writer_keeps_its_parse_when_a_closer_name_appears(pair, proxy, resolvable, case):
    """psycopg with prepare_threshold=0 (what its automatic preparation does from the 6th use),
    search_path `r8a_s, public`: the session prepares a read inside a block that wrote (so the
    Parse runs on the writer, which keeps it), reads with it in autocommit, then creates what its
    text would now resolve to — `r8a_s.r8a_sh`, a table earlier on its search_path than
    `public.r8a_sh`, or `r8a_f(int)`, a closer overload than `r8a_f(numeric)` for `r8a_f(1)` — and
    runs the same prepared statement again. PostgreSQL keeps a prepared statement's resolution of
    the names it read (neither DDL invalidates what the plan depends on), so the primary alone
    answers 'public' / 'numeric' every time (6 of 6). Through the proxy the statement runs on the
    standby, where the engine prepares it again after the session's DDL (cluster/conns.rs
    `take_at` forgets pooled connections' statements at a DDL epoch; the session's hidden Parse
    on the reader resolves afresh) and answers 'shadow' / 'int' (6 of 6 on the standby, 3 runs
    each; in a probe the first run after the DDL stayed on the writer and answered as the
    primary, the rest did not). README documents this window only for "a session's own
    statement that lives only on readers", where no server keeps the first parse; this statement
    lives on the writer, whose parse is the primary's answer."""
    read, ddl, undo, kept = RESOLUTION[case]
    answers: dict[str, list] = {}
    where: dict[str, list] = {}
    for name, dsn in twins(pair, proxy).items():
        c = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, connect_timeout=5,
                            options="-c statement_timeout=5000 -c search_path=r8a_s,public")
        try:
            if name == "proxy":
                warm(c)
            with bounded(c, 5, "block"):
                c.execute("BEGIN")
                c.execute("INSERT INTO public.r8a_w VALUES (1)")
                first, port = c.execute(read).fetchone()  # parsed here: on the writer
                c.execute("COMMIT")
            assert ran_on(port) == "primary", "the block's read after its write runs on the writer"
            time.sleep(0.4)  # the standby replays the commit (200 ms apply delay)
            with bounded(c, 5, "reads, then the DDL"):
                before = [first] + [c.execute(read).fetchone()[0] for _ in range(2)]
                for sql in ddl:
                    c.execute(sql)
            got, ports = [], []
            for _ in range(6):
                time.sleep(0.3)
                with bounded(c, 5, "prepared read after the DDL"):
                    value, port = c.execute(read).fetchone()
                got.append(value)
                ports.append(ran_on(port))
            assert before == [kept] * 3, (name, before)
            answers[name], where[name] = got, ports
        finally:
            try:
                for sql in undo:
                    c.execute(sql)
            finally:
                c.close()
    assert answers["primary"] == [kept] * 6, answers
    assert answers["proxy"] == answers["primary"], f"through the proxy {answers['proxy']} (ran on {where['proxy']})"


# -- Guards that held (not findings) ----------------------------------------------------------------

def test_f1_guard_driver_cancels_of_a_standby_read_answer_as_on_the_primary(pair, proxy):
    """psycopg's cursor.stream() broken off (psycopg cancels the rest) and asyncpg's `timeout=`
    (asyncpg sends a CancelRequest) against a read the standby runs: the cancel must reach the
    standby's backend, the next statement must be answered, and inside a block the block must fail
    as on the primary (F-1, F-3). Held on 7e6ae65."""
    seen: dict[str, list] = {}
    ports: dict[str, set] = {}
    big = "SELECT g, inet_server_port(), repeat('x', 200) FROM generate_series(1, 2000000) g"
    for name, dsn in twins(pair, proxy).items():
        out, where = [], set()
        with connect(dsn) as c:
            if name == "proxy":
                warm(c)
            for in_block in (False, True):
                if in_block:
                    run(c, "BEGIN")
                    run(c, "SELECT 1")
                n = 0
                t0 = time.monotonic()
                with bounded(c, 8, "stream broken off"):
                    for row in c.cursor().stream(big):
                        n += 1
                        where.add(ran_on(row[1]))
                        if n == 5:
                            break
                out += [n, answer(c, "SELECT 42"), time.monotonic() - t0 < 5]
                if in_block:
                    out.append(c.info.transaction_status.name)
                    run(c, "ROLLBACK")
        seen[name], ports[name] = out, where
    assert ports["proxy"] == {"standby"}, ports
    assert seen["proxy"] == seen["primary"]

    async def timeouts(target: dict) -> list:
        c = await asyncpg.connect(**target, timeout=5, server_settings={"statement_timeout": "5000"})
        try:
            for _ in range(10):
                await c.fetchval("SELECT inet_server_port()")
            out = []
            for _ in range(3):
                try:
                    await c.fetchval("SELECT pg_sleep(2)", timeout=0.2)
                    out.append("answered")
                except asyncio.TimeoutError:
                    out.append("timeout")
                out.append(await c.fetchval("SELECT 7 FROM pg_sleep(0.1)"))
            out.append(ran_on(await c.fetchval("SELECT inet_server_port()")))
            return out
        finally:
            await c.close()

    got = {n: asyncio.run(asyncio.wait_for(timeouts(t), 30)) for n, t in asyncpg_targets(pair, proxy).items()}
    assert got["proxy"][-1] == "standby", got
    assert got["proxy"][:-1] == got["primary"][:-1] == ["timeout", 7] * 3


def test_p8_guard_asyncpg_listener_gets_every_notification_while_the_session_changes_state(pair, proxy):
    """asyncpg's add_listener (LISTEN) while the session runs SET, reads, a write, blocks with
    pg_notify and RESET — the engine's captures and probes run on the writer in between — and
    another session sends 150 notifications: every one arrives, in order, none twice, and the
    session's own pg_notify()s arrive once each (P-8). Held on 7e6ae65."""

    async def storm(target: dict) -> tuple:
        c = await asyncpg.connect(**target, timeout=5, server_settings={"statement_timeout": "5000"})
        got: list[str] = []
        await c.add_listener("r8a_storm", lambda *a: got.append(a[3]))

        def fire():
            with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as o:
                for i in range(150):
                    o.execute(f"NOTIFY r8a_storm, '{i}'")
                    if i % 10 == 0:
                        time.sleep(0.005)

        sender = threading.Thread(target=fire)
        sender.start()
        rounds = 0
        try:
            while sender.is_alive() or rounds < 5:
                rounds += 1
                await c.execute(f"SET work_mem = '{64 + rounds % 50}kB'")
                await c.fetchval("SELECT current_setting('work_mem')")
                await c.fetchval("SELECT $1::int", rounds)
                await c.execute("SELECT txid_current()")
                async with c.transaction():
                    await c.fetchval("SELECT 1")
                    await c.execute("SELECT pg_notify('r8a_storm', 'self' || $1::text)", str(rounds))
                await c.execute("RESET work_mem")
        finally:
            sender.join()
        for _ in range(30):
            if len([g for g in got if not g.startswith("self")]) >= 150:
                break
            await asyncio.sleep(0.1)
        await c.close()
        others = [int(g) for g in got if not g.startswith("self")]
        own = [g for g in got if g.startswith("self")]
        return others, sorted(own) == sorted(f"self{i}" for i in range(1, rounds + 1))

    for name, target in asyncpg_targets(pair, proxy).items():
        others, own_once = asyncio.run(asyncio.wait_for(storm(target), 40))
        assert others == list(range(150)), f"{name}: {len(others)} of 150, in order: {others == sorted(others)}"
        assert own_once, name
