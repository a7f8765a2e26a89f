"""Examiner round 4 (red4): node-postgres, JDBC and libpq's pipeline mode through the example
proxy against the real primary + hot standby, each answer compared with what the primary alone
answers to the same program (the oracle). Findings are named after the SPEC requirement they
prove; checks that held and guard a real risk cheaply are kept.

Every driver program bounds its own waits and is run with a timeout (e2e_support.run_program), so
a hang fails its test in seconds."""

from __future__ import annotations

import pytest

from e2e_support import DRIVERS, DRIVERS_BUILD, JDBC_JAR, PgPair, driver_built, report, run_program, start_proxy, stop_proxy

pytestmark = pytest.mark.timeout(60)

PROGRAM_S = 30  # one driver program; healthy ones take well under 2 s


def pipeline(pair, proxy, n: int, mode: str, pad: int) -> tuple[dict, dict]:
    exe = driver_built(DRIVERS_BUILD / "libpq" / "pipeline_depth")
    out = []
    for port in (pair.primary.port, proxy.port):
        dsn = f"host=127.0.0.1 port={port} user=app_trust dbname=app sslmode=disable"
        out.append(run_program([exe, dsn, n, mode, pad], PROGRAM_S, f"libpq pipeline {n} {mode} via {port}"))
    return out[0], out[1]


def java(check: str, pair, port: int, *extra) -> dict:
    driver_built(DRIVERS_BUILD / "java" / "Red4.class")
    cp = f"{DRIVERS_BUILD / 'java'}:{JDBC_JAR}"
    return run_program(["java", "-cp", cp, "Red4", check, "127.0.0.1", port, pair.primary.port, *extra],
                       PROGRAM_S, f"JDBC {check} via {port}")


def node(check: str, pair, port: int) -> dict:
    script = DRIVERS / "node" / "red4.js"
    driver_built(DRIVERS / "node" / "node_modules" / "pg")
    return run_program(["node", script, check, "127.0.0.1", port, pair.primary.port], PROGRAM_S,
                       f"node-postgres {check} via {port}", cwd=DRIVERS / "node")


def same(a: dict, b: dict, *drop: str) -> tuple[dict, dict]:
    strip = {"wall_s", "port", *drop}
    return {k: v for k, v in a.items() if k not in strip}, {k: v for k, v in b.items() if k not in strip}


# -- Findings: libpq pipelines deeper than the session's bound on undecided input (E-1) ----------

def test_e1_a_libpq_pipeline_of_300_reads_and_one_sync_is_answered(pair, proxy):
    """300 reads queued in libpq's pipeline mode, one Sync (1,201 messages, 25 KB). Measured before
    the fix: the client never got an answer from 256 reads on (1,025 messages); the primary
    answers in 40 ms. Mechanism: src/session/client.rs `recv_client` stopped taking input at
    MAX_PENDING_MESSAGES (1,024) undecided messages while `batch_extent` (src/session/batch.rs)
    waited for the batch's Sync, which the session no longer took. Fixed: such a batch is cut
    as one past max_batch_bytes is (to the writer)."""
    primary, via_proxy = pipeline(pair, proxy, 300, "one", 0)
    assert primary["ok"] == 300
    assert same(primary, via_proxy) == same(via_proxy, primary)


def test_e1_a_libpq_pipeline_of_batches_over_4_mib_is_answered(pair, proxy):
    """2,500 reads of 2 KB text, a Sync after each, all queued before any result is read (5 MB).
    Measured before the fix: the client hung once the session's copies of client messages
    reached MAX_PENDING_COPY (4 MiB) — they are only released when the queue is empty, which a
    pipelining client never lets happen — with the last batch's Sync not taken. The primary
    answers in 0.3 s."""
    primary, via_proxy = pipeline(pair, proxy, 2500, "each", 2000)
    assert primary["ok"] == 2500
    assert same(primary, via_proxy) == same(via_proxy, primary)
    report("red4", f"libpq pipeline 2,500 x 2 KB batches: primary {primary['wall_s']} s, proxy {via_proxy['wall_s']} s, "
                   f"last answer from {'standby' if via_proxy['port'] == pair.standby.port else 'primary'}")


# -- Checks that held (each a real driver path, compared with the primary) -----------------------

@pytest.mark.parametrize("check", ["reset_deallocate", "reset_discard", "reset_deallocate_name"])
def test_e2_node_named_statement_after_a_reset_behind_the_drivers_back_fails_as_on_the_primary(pair, proxy, check):
    """node-postgres believes its named statement is still prepared after a DEALLOCATE/DISCARD it
    did not track, and sends only Bind/Execute: the primary answers 26000; a reader that still has
    the statement under an engine name must not answer it (E-2)."""
    assert node(check, pair, proxy.port)["out"] == node(check, pair, pair.primary.port)["out"]


def test_s3_jdbc_repeatable_read_set_as_session_characteristics_keeps_its_snapshot(pair, proxy):
    """Connection.setTransactionIsolation(REPEATABLE_READ) is sent as SET SESSION CHARACTERISTICS
    over the extended protocol; the transaction's reads must not see another session's later
    commits (no split of a REPEATABLE READ block, P-5)."""
    got = java("rr_snapshot", pair, proxy.port)
    assert got["seen"] == [0] * 8, got


def test_e4_jdbc_fetch_size_cursor_and_savepoints_answer_as_on_the_primary(pair, proxy):
    """setFetchSize in a transaction (row-limited Execute, PortalSuspended) and savepoints rolled
    back between reads."""
    for check in ("fetch_size", "savepoint"):
        assert same(java(check, pair, proxy.port), {}) == same(java(check, pair, pair.primary.port), {}), check


def test_f1_jdbc_cancel_of_a_read_on_the_standby_cancels_it(pair, proxy):
    """Statement.cancel() 0.5 s into an 8 s read the standby runs: 57014 within 3 s, three times
    on one connection, and the connection answers after each."""
    got = java("cancel", pair, proxy.port)
    assert got["first_read"] == "standby", got
    assert got["results"] == ["57014:fast", "after:42"] * 3, got


# -- Finding: a cancel sent while the read waits for a reader connection is lost (F-1) ------------

@pytest.fixture(scope="module")
def own_pair():
    """A pair of its own: the test below stops the standby's postmaster."""
    p = PgPair(apply_delay_ms=0)
    p.start()
    try:
        yield p
    finally:
        p.stop()


# F-1: a CancelRequest that arrives while the session's read waits for a new reader connection
# (no server has the statement yet) was dropped, and the read ran to completion on the primary
# after the connect timeout (measured: a cancel at 0.3 s of pg_sleep(3), standby postmaster not
# answering: the statement finished at 5.0 s). The proxy now calls
# polarsplit_session_cancel_unplaced and the engine answers 57014 when the connection attempt ends.
def test_f1_a_cancel_sent_while_the_read_waits_for_a_reader_connection_cancels_it(own_pair, tmp_path):
    import os
    import signal
    import threading
    import time

    import psycopg

    pair = own_pair
    proxy = start_proxy(pair, tmp_path)
    pm = int((pair.standby.datadir / "postmaster.pid").read_text().split()[0])
    stopped = False
    blockers: list[threading.Thread] = []
    try:
        # The standby is healthy (its monitor samples), and its pooled connection is busy.
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            deadline = time.monotonic() + 10
            while c.execute("SELECT inet_server_port()").fetchone()[0] != pair.standby.port:
                assert time.monotonic() < deadline, "reads never reached the standby"
                time.sleep(0.05)

        def busy():
            with psycopg.connect(proxy.dsn(), autocommit=True) as b:
                b.execute("SELECT pg_sleep(4), inet_server_port()")

        blockers = [threading.Thread(target=busy) for _ in range(2)]
        for t in blockers:
            t.start()
        time.sleep(0.5)
        os.kill(pm, signal.SIGSTOP)  # new connections to the standby get no answer
        stopped = True
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            threading.Timer(0.3, lambda: c.cancel_safe(timeout=3)).start()
            t0 = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute("SELECT pg_sleep(3), inet_server_port()")
            assert time.monotonic() - t0 < 1.5, f"cancelled only after {time.monotonic() - t0:.1f} s"
    finally:
        if stopped:
            os.kill(pm, signal.SIGCONT)
        for t in blockers:
            t.join(timeout=10)
        stop_proxy(proxy)


def test_r1b_f3_a_standby_frozen_mid_result_ends_the_read_with_an_error_and_the_session_goes_on(own_pair, tmp_path):
    """Rows of a streamed read reached the client, then the standby froze (SIGSTOP of every
    process, its monitor's backend too): no retry is allowed (F-3), so the client must get an error
    within the response deadline (R-1b, 1.5 s here) — not wait for the standby — and its next
    statement is answered. Measured with the default 10 s deadline: the error came at 10.0 s."""
    import os
    import signal
    import time

    import psycopg

    pair = own_pair
    proxy = start_proxy(pair, tmp_path, settings={"reader_response_timeout_ms": "1500",
                                                  "split_wait_timeout_ms": "1000"})
    tree: list[int] = []
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            deadline = time.monotonic() + 10
            while c.execute("SELECT inet_server_port()").fetchone()[0] != pair.standby.port:
                assert time.monotonic() < deadline, "reads never reached the standby"
                time.sleep(0.05)
            rows, ports, frozen_at, err = 0, set(), None, None
            try:
                for row in c.cursor().stream("SELECT g, inet_server_port(), repeat('x', 2000), pg_sleep(0.005) "
                                             "FROM generate_series(1, 3000) g"):
                    rows += 1
                    ports.add(row[1])
                    if rows == 50:
                        tree = process_tree(int((pair.standby.datadir / "postmaster.pid").read_text().split()[0]))
                        for p in tree:
                            os.kill(p, signal.SIGSTOP)
                        frozen_at = time.monotonic()
                    if frozen_at and time.monotonic() - frozen_at > 8:
                        break
            except psycopg.OperationalError as e:
                err = e
            waited = time.monotonic() - frozen_at
            assert ports == {pair.standby.port}
            assert err is not None and waited < 4, f"after {rows} rows: {err!r} at {waited:.1f} s"
            assert c.execute("SELECT 41 + 1").fetchone()[0] == 42
    finally:
        for p in tree:
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
        stop_proxy(proxy)


def process_tree(pid: int) -> list[int]:
    """The postmaster and every process under it."""
    import os
    from pathlib import Path

    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out
