"""Issue 17 end to end: real drivers through the example proxy against the real primary + hot
standby — no hang (E-1: a Flush is not a statement), no lost message and no disturbed client state
from hidden statements (W-7), cancels that reach only their own statement (F-1), and answers that
depend on the server coming from the client's own writer session (S-7).

Every test is bounded: a statement that gets no answer fails the test after a few seconds (the
connection is shut down by a watchdog, see e2e_support.bounded), it never stalls the run. Tests that
fail on today's engine are strict xfails naming the defect; the fix turns them into XPASS failures,
and then the marker goes."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import asyncpg
import psycopg
import pytest
from psycopg import pq

from e2e_support import DRIVERS_BUILD, STANDBY_PORTS, Hang, bounded, driver_built, report, run_program, start_proxy, stop_proxy, STANDBY_PAUSE_S

# A healthy answer takes milliseconds; this is the bound for one driver call that must not hang.
ANSWER_S = 5.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS i17_rows (id int PRIMARY KEY, note text);
CREATE TABLE IF NOT EXISTS i17_copy (id int PRIMARY KEY, v int NOT NULL);
CREATE TABLE IF NOT EXISTS i17_listen (k int PRIMARY KEY, v int NOT NULL);
INSERT INTO i17_listen VALUES (1, 0) ON CONFLICT DO NOTHING;
INSERT INTO kv VALUES (1701, 0) ON CONFLICT DO NOTHING;
GRANT ALL ON i17_rows, i17_copy, i17_listen TO PUBLIC;
"""


@pytest.fixture(scope="module")
def i17(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute(SCHEMA)
    pair.wait_replayed()
    return pair


def writer_activity(pair, pid: int) -> str:
    """What the primary says the client's writer backend is doing (the hang's diagnosis)."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p:
        row = p.execute("SELECT state, left(query, 80), now() - state_change FROM pg_stat_activity WHERE pid = %s",
                        (pid,)).fetchone()
    return f"writer backend {pid}: {row[0]!r} for {row[2]} after {row[1]!r}" if row else f"writer backend {pid} gone"


# -- 17.1: psycopg ends every pipeline and executemany() with Sync then a lone Flush ---------------

def _executemany(c, base):
    with c.cursor() as cur:
        cur.executemany("INSERT INTO i17_rows VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET note = excluded.note",
                        [(base + i, f"em{i}") for i in range(5)])


def _pipeline(c, base):
    with c.pipeline():
        c.execute("SELECT %s::int", (base,))
        c.execute("INSERT INTO i17_rows VALUES (%s, 'pl') ON CONFLICT (id) DO UPDATE SET note = 'pl'", (base,))
        c.execute("SELECT note FROM i17_rows WHERE id = %s", (base,))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit", "transaction"])
@pytest.mark.parametrize("work", [_executemany, _pipeline], ids=["executemany", "pipeline"])
def test_e1_psycopg_sync_then_flush_does_not_hang(i17, proxy, work, autocommit):
    """executemany() and pipeline mode end with Sync + Flush: the next statement is answered at
    once, and a transaction left open by them commits — it is not left idle in transaction. (The
    hang shows when the next message is a simple Query; an extended-protocol batch went through.)"""
    base = 17_000 + 100 * (work is _pipeline) + 10 * autocommit
    with psycopg.connect(proxy.dsn(), autocommit=autocommit) as c:
        pid = c.info.backend_pid
        with bounded(c, ANSWER_S, f"{work.__name__} then the next statements",
                     diagnose=lambda: writer_activity(i17, pid)):
            work(c, base)
            # What comes next is a simple Query (psycopg sends COMMIT, and a statement without
            # parameters, that way): it must be answered, not held behind the Flush.
            if not autocommit:
                c.commit()
            assert c.execute(f"SELECT count(*) FROM i17_rows WHERE id >= {base} AND id < {base + 10}").fetchone()[0] >= 1
            assert c.execute("SELECT count(*) FROM i17_rows WHERE id >= %s AND id < %s",
                             (base, base + 10)).fetchone()[0] >= 1
            if not autocommit:
                # The SELECTs opened a transaction of their own (autocommit off): end it.
                c.commit()
        # The writer session is idle, not holding a transaction open.
        assert writer_activity(i17, pid).startswith(f"writer backend {pid}: 'idle' ")
    with psycopg.connect(i17.primary.dsn(dbname="app")) as p:
        assert p.execute("SELECT count(*) FROM i17_rows WHERE id >= %s AND id < %s",
                         (base, base + 10)).fetchone()[0] >= 1


# -- 17.1: asyncpg prepares with Parse/Describe/Flush, then sends a simple-Query COPY ---------------

@pytest.mark.timeout(60)
def test_e1_asyncpg_copy_records_to_table_does_not_hang(i17, proxy):
    rows = [(i, i * i) for i in range(1, 201)]

    async def run():
        conn = await asyncpg.connect(host="127.0.0.1", port=proxy.port, user="app_trust", database="app",
                                     ssl=False, timeout=ANSWER_S)
        try:
            await conn.execute("TRUNCATE i17_copy")
            try:
                res = await asyncio.wait_for(conn.copy_records_to_table("i17_copy", records=rows), ANSWER_S)
            except asyncio.TimeoutError as e:
                raise Hang(f"copy_records_to_table: no answer within {ANSWER_S:g} s (hang)") from e
            assert res == "COPY 200"
            # The session goes on: the next statement is answered too.
            assert await asyncio.wait_for(conn.fetchval("SELECT count(*) FROM i17_copy"), ANSWER_S) == 200
        finally:
            conn.terminate()

    asyncio.run(run())
    with psycopg.connect(i17.primary.dsn(dbname="app")) as p:
        assert p.execute("SELECT count(*), sum(v) FROM i17_copy").fetchone() == (200, sum(v for _, v in rows))


# -- 17.3: the stock probe must not destroy the client's unnamed prepared statement ----------------

@pytest.mark.timeout(60)
def test_w7_libpq_unnamed_prepared_statement_survives_the_probe(i17, proxy):
    """libpq PQprepare(conn, "", ...) then PQdescribePrepared/PQexecPrepared(conn, "", ...) after a
    write, and an unnamed statement that is itself the write, executed three times."""
    prog = driver_built(DRIVERS_BUILD / "libpq" / "unnamed_prepared")
    try:
        result = run_program([prog, proxy.dsn(), "1701"], timeout=30, what="unnamed_prepared")
        assert result["failures"] == 0, result
        report("issue 17", "libpq unnamed statement after a write: 0 of 13 steps failed")
    except AssertionError as e:
        failed = [ln for ln in str(e).splitlines() if ln.startswith("fail ")]
        report("issue 17", f"libpq unnamed statement after a write: {len(failed)} of 13 steps failed "
                           f"({failed[0] if failed else 'see output'})")
        raise


# -- 17.2: no notification lost while the probe runs on a listening connection that writes ---------

NOTIFICATIONS = 300


@pytest.mark.timeout(60)
def test_w7_listen_on_a_writing_connection_loses_no_notification(i17, proxy):
    got: set[int] = set()
    with psycopg.connect(proxy.dsn(), autocommit=True) as listener, \
            psycopg.connect(proxy.dsn(), autocommit=True) as notifier:
        listener.add_notify_handler(lambda n: got.add(int(n.payload)))
        listener.execute("LISTEN i17_channel")
        done = threading.Event()
        errors: list[BaseException] = []

        def notify():
            try:
                for i in range(NOTIFICATIONS):
                    notifier.execute("SELECT pg_notify('i17_channel', %s)", (str(i),))
                    time.sleep(0.001)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            finally:
                done.set()

        t = threading.Thread(target=notify)
        writes = 0
        with bounded(listener, 30, "the listener's writes"):
            t.start()
            while not done.is_set():  # the listener writes all along: every write is followed by a probe
                listener.execute("UPDATE i17_listen SET v = v + 1 WHERE k = 1")
                writes += 1
            t.join(10)
            deadline = time.monotonic() + 3  # the last notifications arrive with the next answers
            while len(got) < NOTIFICATIONS and time.monotonic() < deadline:
                listener.execute("SELECT 1")
                time.sleep(0.02)
        assert not errors, errors
    lost = NOTIFICATIONS - len(got)
    report("issue 17", f"LISTEN on a writing connection: {lost} of {NOTIFICATIONS} notifications lost "
                       f"({writes} writes by the listener)")
    assert lost == 0, f"{lost} of {NOTIFICATIONS} notifications lost ({writes} writes by the listener)"


# -- 17.7: a cancel never reaches another client's statement on a shared pooled reader ------------

STORM_S = 6.0
INNOCENT = "SELECT count(*), inet_server_port() FROM generate_series(1, 20000)"


@pytest.mark.timeout(90)
def test_f1_cancel_storm_cancels_no_innocent_statement(i17, proxy):
    """Four clients run plain reads (simple protocol, so they share the pooled standby connections)
    while two clients send a cancel right behind each of their own short reads, for STORM_S seconds."""
    stop = time.monotonic() + STORM_S
    lock = threading.Lock()
    n = {"innocent": 0, "innocent_cancelled": 0, "innocent_on_standby": 0, "cancels": 0, "own_cancelled": 0}
    errors: list[BaseException] = []

    def innocent():
        try:
            with psycopg.connect(proxy.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
                while time.monotonic() < stop:
                    try:
                        port = c.execute(INNOCENT).fetchone()[1]
                        with lock:
                            n["innocent"] += 1
                            n["innocent_on_standby"] += port == i17.standby.port
                    except psycopg.errors.QueryCanceled:
                        with lock:
                            n["innocent"] += 1
                            n["innocent_cancelled"] += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def canceller(seed):
        rnd = random.Random(seed)
        try:
            with psycopg.connect(proxy.dsn(), autocommit=True) as c:
                pg = c.pgconn
                while time.monotonic() < stop:
                    pg.send_query(b"SELECT 1, inet_server_port()")
                    time.sleep(rnd.choice((0, 0, 0.0005, 0.002)))
                    pg.get_cancel().cancel()
                    with lock:
                        n["cancels"] += 1
                    while (r := pg.get_result()) is not None:
                        if r.status == pq.ExecStatus.FATAL_ERROR:
                            assert r.error_field(pq.DiagnosticField.SQLSTATE) == b"57014", r.error_message
                            with lock:
                                n["own_cancelled"] += 1
                        else:
                            # Not cancelled: its own row (a read queued behind a cancelled one once
                            # reached the standby as an empty Query: EMPTY_QUERY here).
                            assert r.status == pq.ExecStatus.TUPLES_OK, r.status
                            assert (r.ntuples, r.get_value(0, 0)) == (1, b"1")
                    time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=innocent) for _ in range(4)]
    threads += [threading.Thread(target=canceller, args=(s,)) for s in (1701, 1702)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(STORM_S + 30)
    assert not any(t.is_alive() for t in threads), "a client of the storm hung"
    assert not errors, errors
    line = (f"cancel storm {STORM_S:g} s: {n['innocent_cancelled']} of {n['innocent']} innocent statements cancelled "
            f"({n['innocent_on_standby']} ran on the standby); {n['cancels']} cancels sent, "
            f"{n['own_cancelled']} own statements cancelled")
    report("issue 17", line)
    # The innocent reads ran on the shared pooled standby connections: the storm reached them.
    assert n["innocent_on_standby"] > n["innocent"] // 2, line
    assert n["innocent_cancelled"] == 0, line


# -- 17.6: pg_backend_pid() is the client's own backend, and terminating it ends the client ---------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_s7_backend_pid_recovery_and_terminate_are_the_writer_sessions(i17, tmp_path, protocol):
    """The answers come from the client's own writer session; pg_terminate_backend(pg_backend_pid())
    ends that session and no pooled reader. Its own proxy, so the standby backends it counts are only
    this test's pooled readers."""
    proxy = start_proxy(i17, tmp_path)
    try:
        s7_checks(i17, proxy, protocol)
    finally:
        stop_proxy(proxy)


def s7_checks(i17, proxy, protocol):
    cursor = psycopg.ClientCursor if protocol == "simple" else psycopg.Cursor
    binary = {} if protocol == "simple" else {"binary": True}  # psycopg: binary results force extended
    app = f"i17-s7-{protocol}"  # names this test's backends on the standby
    problems = []
    with psycopg.connect(proxy.dsn(application_name=app), autocommit=True, cursor_factory=cursor) as c:
        with bounded(c, ANSWER_S, "S-7 reads"):
            pid, port = c.execute("SELECT pg_backend_pid(), inet_server_port()", **binary).fetchone()
            in_recovery = c.execute("SELECT pg_is_in_recovery()", **binary).fetchone()[0]
            read_only = c.execute("SELECT current_setting('transaction_read_only')", **binary).fetchone()[0]
            # A plain read opens a pooled reader; under a loaded run the standby may be held out for a
            # moment (a slow monitor answer), so the precondition is waited for, not assumed.
            ran_on, deadline = None, time.time() + 4
            while ran_on not in STANDBY_PORTS and time.time() < deadline:
                ran_on = c.execute("SELECT 1, inet_server_port()", **binary).fetchone()[-1]
                if ran_on not in STANDBY_PORTS:
                    time.sleep(STANDBY_PAUSE_S)
        assert ran_on in STANDBY_PORTS, f"no plain read reached the standby in 4 s: {proxy.stats()['reason']}"
        seen = f"pg_backend_pid() {pid} (ran on port {port}), client's backend {c.info.backend_pid}; " \
               f"pg_is_in_recovery() {in_recovery}; transaction_read_only {read_only}"
        report("issue 17", f"S-7 ({protocol}): {seen}")
        if (pid, in_recovery, read_only) != (c.info.backend_pid, False, "off"):
            problems.append(seen)

    def standby_backends():
        with psycopg.connect(i17.standby.dsn(dbname="app"), autocommit=True) as s:
            return {r[0] for r in s.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,))}

    readers_before = standby_backends()
    assert readers_before, "the reads above left no pooled reader on the standby"
    c = psycopg.connect(proxy.dsn(application_name=app), autocommit=True, cursor_factory=cursor)
    try:
        own = c.info.backend_pid
        outcome = "the session survived"
        with bounded(c, ANSWER_S, "pg_terminate_backend(pg_backend_pid())"):
            try:
                c.execute("SELECT pg_terminate_backend(pg_backend_pid())", **binary)
                c.execute("SELECT 1", **binary)
            except psycopg.Error as e:
                outcome = f"{type(e).__name__} {e.sqlstate}: {str(e).splitlines()[0]}"
        if not (c.closed or c.broken):
            problems.append(f"the client's session was not terminated: {outcome}")
    finally:
        c.close()
    time.sleep(0.2)
    with psycopg.connect(i17.primary.dsn(dbname="app"), autocommit=True) as p:
        if p.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (own,)).fetchone()[0]:
            problems.append("the client's own writer backend survived pg_terminate_backend(pg_backend_pid())")
    killed = sorted(readers_before - standby_backends())
    if killed:
        problems.append(f"pooled standby backends terminated: {killed}")
    report("issue 17", f"S-7 ({protocol}): pg_terminate_backend(pg_backend_pid()) -> {outcome}; "
                       f"standby backends terminated: {killed}")
    assert not problems, "; ".join(problems)
