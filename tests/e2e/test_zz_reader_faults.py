"""Reader faults on a pair of their own (SPEC R-1a, R-1b): a standby killed with `kill -9` and
restarted behind the position it had reached, and a standby frozen with SIGSTOP.

These tests break their standby, so they run on their own primary + standby pair (not the
session's), one after the other, each bounded in time; the standby is always resumed and the
pair always stopped."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from e2e_support import PgPair, bounded, report, start_proxy, stop_proxy

# The third column says whether the standby served the read: inet_server_port() is replica-safe
# (S-7), pg_is_in_recovery() is server-dependent and always answered by the primary.
READ = "SELECT v, inet_server_port(), inet_server_port() = %s FROM w WHERE k = %s"
# Updates of a small table: hundreds of MB of WAL that dirty few pages, so the standby flushes
# (and advances its minimum recovery point) rarely: after a crash it is consistent — and accepts
# reads — long before it has redone what it had replayed.
BACKLOG_ROWS = 2000
BACKLOG_PASSES = 120


def postmaster_pid(datadir: Path) -> int:
    return int((datadir / "postmaster.pid").read_text().split()[0])


def process_tree(pid: int) -> list[int]:
    """The postmaster and every process under it (backends, walreceiver, startup, …)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def fault_pair():
    p = PgPair(apply_delay_ms=0)
    p.start()
    try:
        # Few restartpoints and no background writes on the standby (R-1a's window), and room in
        # its buffers for the backlog's pages: its 120 passes leave ~400 MB of row versions, and
        # a dirty page evicted for room is flushed, which moves the standby's minimum recovery
        # point to near the session's write — after the crash it then accepts reads only just
        # before it redoes the write, and the control may never see it missing (that happened
        # with 256 MB under load).
        for s in ("shared_buffers = '1GB'", "bgwriter_lru_maxpages = 0", "checkpoint_timeout = '1h'",
                  "max_wal_size = '8GB'"):
            p.standby.psql(f"ALTER SYSTEM SET {s}")
        p.standby.stop("fast")
        p.standby.start()
        p.wait_streaming()
        with psycopg.connect(p.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute("CREATE TABLE w (k int PRIMARY KEY, v int NOT NULL)")
            c.execute("CREATE TABLE churn (id int PRIMARY KEY, n int NOT NULL, pad text NOT NULL)")
            c.execute("ALTER TABLE churn SET (autovacuum_enabled = off, fillfactor = 50)")
            c.execute(f"INSERT INTO churn SELECT g, 0, repeat(md5(g::text), 45) FROM generate_series(1, {BACKLOG_ROWS}) g")
            c.execute("GRANT ALL ON w, churn TO PUBLIC")
        p.wait_replayed()
        yield p
    finally:
        p.stop()


def test_r1a_a_standby_restarted_behind_its_old_position_serves_no_stale_read(fault_pair, tmp_path):
    """kill -9 of the standby after it replayed a session's write, restarted with a WAL backlog to
    redo: the session re-reads its write every few ms through the proxy and never misses it —
    while direct reads on the standby at the same moments do (the control)."""
    pair = fault_pair
    proxy = start_proxy(pair, tmp_path)
    try:
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
            # The backlog: hundreds of MB of WAL the standby replays, then the session's write.
            t0 = time.monotonic()
            for _ in range(BACKLOG_PASSES):
                admin.execute("UPDATE churn SET n = n + 1")
            wal = int(admin.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()[0])
            backlog_s = time.monotonic() - t0
        session = psycopg.connect(proxy.dsn(), autocommit=True)
        session.execute("INSERT INTO w VALUES (1, 1)")
        pair.wait_replayed(timeout=120)
        before = [session.execute(READ, (pair.standby.port, 1)).fetchone() for _ in range(20)]
        assert all(r is not None for r in before), before
        assert any(r[2] for r in before), f"the standby served none of the reads before the crash: {before}"
        pid = postmaster_pid(pair.standby.datadir)
        tree = process_tree(pid)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        deadline = killed_at + 20
        while any(alive(p) for p in tree):
            assert time.monotonic() < deadline, "the standby's processes did not exit"
            time.sleep(0.005)
        starter = threading.Thread(target=pair.standby.start)
        starter.start()
        counts = {"proxy": 0, "proxy_standby": 0, "proxy_stale": 0, "proxy_errors": 0,
                  "control": 0, "control_missed": 0}
        control = None
        caught_up_at = None
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                with bounded(session, 15, "a read through the proxy"):
                    row = session.execute(READ, (pair.standby.port, 1)).fetchone()
                counts["proxy"] += 1
                if row is None:
                    counts["proxy_stale"] += 1
                elif row[2]:
                    counts["proxy_standby"] += 1
            except psycopg.Error:
                counts["proxy_errors"] += 1
                session.close()
                session = psycopg.connect(proxy.dsn(), autocommit=True)
            # The control: the same read, directly on the standby, at the same moment.
            try:
                if control is None:
                    control = psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True, connect_timeout=2)
                got = control.execute("SELECT v FROM w WHERE k = 1").fetchone()
                counts["control"] += 1
                if got is None:
                    counts["control_missed"] += 1
                elif caught_up_at is None:
                    caught_up_at = time.monotonic()
            except psycopg.Error:
                if control is not None:
                    control.close()
                control = None
            # Stop once the standby has had the write for a while and the proxy uses it again.
            if caught_up_at and time.monotonic() > caught_up_at + 1 and counts["proxy_standby"] > 0:
                break
            time.sleep(0.003)
        starter.join(timeout=120)
        if control is not None:
            control.close()
        session.close()
        report("R-1a: standby killed and restarted behind",
               f"backlog {wal >> 20} MB of WAL written in {backlog_s:.1f} s; after kill -9: "
               f"{counts['proxy']} reads through the proxy ({counts['proxy_standby']} by the standby, "
               f"{counts['proxy_stale']} stale, {counts['proxy_errors']} errors); control: "
               f"{counts['control']} direct reads on the standby, {counts['control_missed']} missed the write; "
               f"the standby had it {caught_up_at - killed_at if caught_up_at else float('nan'):.2f} s after the kill")
        assert counts["control_missed"] > 0, (
            f"no direct read on the restarted standby missed the write: the test proves nothing {counts}")
        assert counts["proxy_stale"] == 0, f"stale reads through the proxy: {counts}"
        assert caught_up_at is not None, f"the standby never replayed the write again: {counts}"
    finally:
        if not pair.standby.running():
            pair.standby.start()
        stop_proxy(proxy)


FREEZE_S = 30
RESPONSE_TIMEOUT_S = 10.0  # reader_response_timeout_ms (default)
WAIT_TIMEOUT_S = 1.0  # wait_timeout_ms (default)
SLACK_S = 1.5


def test_r1b_a_frozen_standby_bounds_every_read_and_new_sessions_skip_it(fault_pair, tmp_path):
    """The standby frozen with SIGSTOP for 30 s under a read workload: no client request waits
    longer than the response deadline plus the wait timeout; once the reader is held out, new
    sessions read on the primary without paying the connect timeout; within 2 s of SIGCONT reads
    are back on the standby (its monitor keeps sampling while it is held out)."""
    pair = fault_pair
    proxy = start_proxy(pair, tmp_path)
    records: list[tuple[str, float, float, str]] = []  # (kind, start, latency, where)
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
            admin.execute("INSERT INTO w VALUES (2, 2) ON CONFLICT (k) DO NOTHING")
        pair.wait_replayed()
        deadline = time.monotonic() + 20
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            while c.execute(READ, (pair.standby.port, 2)).fetchone()[2] is not True:
                assert time.monotonic() < deadline, "reads never reached the standby"
                time.sleep(0.05)

        def record(kind, t, where):
            with lock:
                records.append((kind, t, time.monotonic() - t, where))

        def one_read(conn, kind):
            t = time.monotonic()
            try:
                with bounded(conn, FREEZE_S + 15, f"a {kind} read"):
                    row = conn.execute(READ, (pair.standby.port, 2)).fetchone()
                record(kind, t, "standby" if row[2] else "primary")
                return True
            except (psycopg.Error, AssertionError) as e:
                record(kind, t, f"error: {type(e).__name__}: {str(e)[:80]}")
                return False

        def pooled():
            conn = psycopg.connect(proxy.dsn(), autocommit=True)
            while not stop.is_set():
                if not one_read(conn, "pooled"):
                    conn.close()
                    conn = psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=FREEZE_S + 15)
                time.sleep(0.02)
            conn.close()

        def fresh():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=FREEZE_S + 15) as conn:
                        t = time.monotonic()
                        one_read(conn, "new")
                except psycopg.Error as e:
                    record("new", t, f"error: connect: {str(e)[:80]}")
                time.sleep(0.1)

        workers = [threading.Thread(target=pooled) for _ in range(3)] + [threading.Thread(target=fresh)]
        for w in workers:
            w.start()
        time.sleep(1)
        tree = process_tree(postmaster_pid(pair.standby.datadir))
        frozen_at = time.monotonic()
        for p in tree:
            os.kill(p, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)
        finally:
            for p in tree:
                try:
                    os.kill(p, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        resumed_at = time.monotonic()
        time.sleep(5)
        stop.set()
        for w in workers:
            w.join(timeout=FREEZE_S + 30)
        stats = proxy.stats()
    finally:
        stop.set()
        stop_proxy(proxy)
    rel = [(k, s - frozen_at, lat, wh) for k, s, lat, wh in records]
    during = [r for r in rel if 0 <= r[1] < FREEZE_S]
    worst = max(rel, key=lambda r: r[2])
    back = [r for r in rel if r[1] >= resumed_at - frozen_at and r[3] == "standby"]
    late_new = [r for r in during if r[0] == "new" and r[1] >= RESPONSE_TIMEOUT_S + 5]
    report("R-1b: standby frozen with SIGSTOP",
           f"{len(rel)} requests ({len(during)} begun during the {FREEZE_S} s freeze); slowest "
           f"{worst[2]:.1f} s ({worst[0]}, {worst[3]}); new sessions in the freeze's last "
           f"{FREEZE_S - RESPONSE_TIMEOUT_S - 5:.0f} s: {len(late_new)}, slowest "
           f"{max((r[2] for r in late_new), default=0):.2f} s; first standby read "
           f"{(back[0][1] + frozen_at - resumed_at) if back else float('nan'):.2f} s after SIGCONT; "
           f"reader_deadlines {stats['counter'].get('reader_deadlines', 0)}, "
           f"readers_held_out {stats['counter'].get('readers_held_out', 0)}")
    bound = RESPONSE_TIMEOUT_S + WAIT_TIMEOUT_S + SLACK_S
    assert worst[2] <= bound, (
        f"a {worst[0]} read begun {worst[1]:.1f} s into the freeze waited {worst[2]:.1f} s (bound {bound} s): "
        "the proxy does not drive the engine's response deadline (R-1b)")
    assert late_new and all(r[2] < 1.0 and r[3] == "primary" for r in late_new), (
        f"new sessions late in the freeze paid for the frozen reader: {late_new[:5]}")
    assert back and back[0][1] + frozen_at - resumed_at <= 2.0, "reads did not return to the standby within 2 s"


async def _prepare_blocked_then_standby_stopped(pair, port: int, mode: str | None) -> tuple:
    """An asyncpg read (Parse/Describe/Flush, then Bind/Execute/Sync) waiting on the standby for
    a lock the primary holds and the standby replayed; the standby is stopped (`mode`) while it
    waits, and the lock released a second later. Returns the rows (minus the port), whether the
    standby served them, and the session's next statement's answer."""
    import asyncio

    import asyncpg

    sql = "SELECT count(*), inet_server_port() FROM w"
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False,
                              timeout=10, command_timeout=30)
    try:
        await c.fetch("SELECT 1")
        lock = psycopg.connect(pair.primary.dsn(dbname="app"))
        lock.execute("LOCK TABLE w IN ACCESS EXCLUSIVE MODE")
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as x:
            x.execute("SELECT pg_current_xact_id()")  # a commit record behind the lock's
        deadline = time.monotonic() + 10
        while not pair.standby.psql("SELECT count(*) FROM pg_locks WHERE relation = 'w'::regclass "
                                    "AND mode = 'AccessExclusiveLock'", dbname="app") == "1":
            assert time.monotonic() < deadline, "the lock never reached the standby"
            time.sleep(0.05)

        def fault():
            time.sleep(1.5)
            if mode:
                pair.standby.stop(mode)
            time.sleep(1.0)
            lock.commit()

        t = threading.Thread(target=fault)
        t.start()
        try:
            rows = await asyncio.wait_for(c.fetch(sql), 25)
        except (asyncpg.PostgresError, asyncio.TimeoutError) as e:
            rows = [("error", type(e).__name__, str(e)[:80])]
        t.join()
        lock.close()
        after = (await asyncio.wait_for(c.fetch("SELECT count(*) FROM w"), 10))[0][0]
        served = [r[1] == pair.standby.port for r in rows if r[0] != "error"]
        return [tuple(r)[:1] if r[0] != "error" else tuple(r) for r in rows], served, after
    finally:
        c.terminate()
        if mode and not pair.standby.running():
            pair.standby.start()
            pair.wait_streaming()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_f2_e3_an_asyncpg_read_waiting_on_a_standby_that_shuts_down_is_retried_on_the_primary(fault_pair, tmp_path,
                                                                                              mode):
    """asyncpg prepares a read with Parse/Describe/Flush: that open batch waits on the standby
    (behind a lock replayed from the primary) when the standby shuts down. Nothing of it had
    reached the client, so it is retried on the primary (F-2, E-3) and answers as the primary
    alone does. An examiner's finding of 2026-12-05: with a fast stop the client waited until
    its own Sync, its answers and its prepared statement lost (the next Bind got 26000); with an
    immediate stop the standby's shutdown WARNING was forwarded, which forbade the retry, and
    the client got 55000."""
    import asyncio

    pair = fault_pair
    direct = asyncio.run(_prepare_blocked_then_standby_stopped(pair, pair.primary.port, None))
    proxy = start_proxy(pair, tmp_path)
    try:
        # The read must be on the standby to be hurt: wait until reads reach it.
        deadline = time.monotonic() + 20
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            while c.execute("SELECT inet_server_port() = %s", (pair.standby.port,)).fetchone()[0] is not True:
                assert time.monotonic() < deadline, "reads never reached the standby"
                time.sleep(0.05)
        before = proxy.stats()["reason"].get("RETRY_PRIMARY_AFTER_LOSS", 0)
        rows, served, after = asyncio.run(_prepare_blocked_then_standby_stopped(pair, proxy.port, mode))
        retries = proxy.stats()["reason"].get("RETRY_PRIMARY_AFTER_LOSS", 0) - before
    finally:
        stop_proxy(proxy)
    assert (rows, after) == (direct[0], direct[2]), (rows, served, after, direct)
    assert served == [False] and retries >= 1, f"not retried on the primary: {served}, {retries} retries"
