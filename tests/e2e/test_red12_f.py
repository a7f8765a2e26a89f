"""Examiners' round 12, area f (faults and liveness on the standby), on a primary + standby pair of
its own (the tests freeze its standby's postmaster; every wait is bounded, the standby is always
resumed, the pair always stopped).

Found (2026-12-07):

- **F-1 / R-1b: a cancel that meets a read waiting for its reader connection leaves the session
  hung for good.** A new session (no pooled reader fits its startup settings) sends a read; the
  engine asks the host for a reader connection (`AcquireReader`), and the standby is slow to
  accept it (here its postmaster frozen, as a standby host whose SYNs are dropped or whose
  postmaster cannot fork: the connect waits `--reader-connect-timeout-ms`, 2 s). The client
  cancels the read (asyncpg's `timeout=`, JDBC's `setQueryTimeout`, a user's Ctrl-C): the engine
  answers it with 57014 at once, as the primary alone does, and marks the acquire abandoned
  (`Session::cancel_unplaced`: "until then the session starts nothing new"). When the connect
  then fails, the host reports `ReaderConnectFailed`, and `Session::reader_connect_failed`
  (`src/session/bind.rs`) refuses it — "ReaderConnectFailed without AcquireReader" in the proxy's
  log — because it looks for a unit awaiting a reader before it looks at `abandoned_acquire`
  (`reader_unavailable`, which handles the abandoned case, is never reached). The abandoned
  acquire is never cleared, so the client's next statement (`SELECT 1`) is never answered: no
  answer within 8 s, 3 of 3 runs (the primary alone: at once). The session is stuck until the
  client gives up on it. Simple Query clients meet it (psql, libpq's PQexec, psycopg without
  parameters — whose KeyboardInterrupt sends the cancel —, node-postgres without values); an
  extended batch takes the held-cancel path and is answered (57014 once the connect failed,
  2.1 s instead of 0.5 s). A fix: in `reader_connect_failed`, when no unit awaits a reader and
  `abandoned_acquire` is set, report the failure to the engine and go on as `reader_unavailable`
  does for the abandoned case (clear it, pump). The same hang follows a cancel inside a block.
- **R-1b: a read streaming rows from a healthy reader is cut at `reader_response_timeout_ms` after
  it was sent whenever the reader's monitor is failing.** SPEC R-1b treats as lost a reader that
  "has answered nothing for `reader_response_timeout_ms` since a statement was sent and whose
  monitor also failed to answer in that time" ("a long report on a healthy replica is never
  killed"). `Session::on_timeout` (`src/session/backend.rs`) compares `reader_deadline(u.sent_at,
  …)` — the time the statement was *sent*, or the monitor's last sample — and `sent_at` never
  moves when the reader answers. So with the standby's postmaster and its monitor's backend frozen
  (the monitor can neither sample nor reconnect: a standby that stopped accepting connections,
  whose monitor connection then broke), the backend serving a 40 MB report kept streaming, and
  the client (pausing 1 s every 4,000 rows) got 55000 "the replica connection was lost" after
  about 29,000–31,000 of 40,000 rows, 7.1 s in with `reader_response_timeout_ms = 6000` (3 of 3;
  the default 10 s cut a 1.5-million-row stream the same way at 1.1 million rows in a probe).
  The primary alone gives every row. A fix: count the deadline from the reader's last answer
  (any bytes of the unit), not from its sending.

What held (probes, not kept as tests): `pg_terminate_backend` (on the standby) of the reader
backend of a slow read before any row (retried on the primary, right answer), mid-result of a
streamed read (55000, connection usable; inside a READ COMMITTED block, simple and extended:
55000, then 25P02, COMMIT answers ROLLBACK, nothing committed), of a psycopg pipeline's first
read before any answer, autocommit and in a block (both retried on the primary, both answered);
psycopg prepared statements (prepare=True) on the standby after their reader backend was
terminated, and after an immediate restart of the standby (answered, back on the standby);
recovery conflicts (`max_standby_streaming_delay = 100ms` on the standby, `LOCK TABLE … ACCESS
EXCLUSIVE` on the primary) of a read before any row, autocommit and split off a block (retried
on the primary, right count; the block's later reads on the primary) and after rows inside a block
(40001, the block failed, COMMIT answers ROLLBACK); a reader's own 22012 mid-result inside a block
(same messages and outcome as the primary alone); `pg_cancel_backend` by an administrator on the
standby mid-result inside a block (57014, block failed); the whole standby frozen after a NOTICE
the read raised there (an IMMUTABLE plpgsql function folded at plan time): answered by the
primary at the 10 s deadline, the NOTICE once; the whole standby frozen mid-result (55000 at the
deadline); a client's cancel of a read running on a frozen standby (57014, at the 10 s deadline);
`ALTER ROLE … NOLOGIN` replicated under a session whose reader backend was then terminated
(reads answered by the primary in ms, in a block too, no error); a second standby 1 h behind
(recovery_min_apply_delay) while the session's read after its write is lost on the caught-up one:
retried on the primary, never on the stale standby (3 of 3); the same cancel while the read waits
for its reader connection, the postmaster thawed before the connect timeout (57014, next statement
answered; inside a block: 25P02, COMMIT answers ROLLBACK, as the primary alone), and the client
leaving instead (the proxy serves the next session), and the same cancel of an extended batch
(psycopg with a parameter) that then falls back to the primary, autocommit and in a block (57014
once the connect failed, the block failed, nothing committed); `idle_in_transaction_session_timeout` and
`idle_session_timeout` of 3 s set by a session whose read runs on a frozen standby until the 10 s
deadline (writer kept alive, the read answered by the primary, the block commits); the standby
promoted in the middle of a READ COMMITTED block that had read there (the block's next reads on
the primary, the new value); the user's password changed on the primary (reader logins refused
28P01: old and new sessions answered by the primary, no error); psycopg prepared statements in a
block across an immediate restart or a terminated reader, and with the standby stopped for good
(answered, the block commits). Not a finding (SPEC F-1 forwards a
57014 answering the client's statement): `pg_cancel_backend` by an administrator on the standby of
a read that had sent nothing yet reaches the client as 57014, where the primary alone would have
answered; nor (F-3: a RowDescription was forwarded) asyncpg's first use of a statement in
autocommit — Parse/Describe/Flush, then Bind/Execute(limit 1)/Sync in the same batch on the
standby — cancelled there by a recovery conflict before any row: the client gets 40001 where the
primary alone answers, and where psycopg (simple or extended, prepared or not) and raw P/B/D/E/S
or B/E/S batches, with or without a row limit, are retried on the primary. LISTEN pins a
session to the writer, so notifications during a standby fault were not reachable.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, Hang, bounded, own_pair_with_row, start_proxy, stop_proxy
from test_zz_reader_faults import postmaster_pid

# About 5 s on the primary: the cancel surely meets it running.
SLOW = "SELECT count(*), inet_server_port() FROM generate_series(1, 60000000)"


@pytest.fixture(scope="module")
def fault_pair():
    for p in own_pair_with_row("r12f", 0):
        STANDBY_PORTS.add(p.standby.port)
        yield p


def cancelled_then_next(conn, cancel_after: float, next_bound: float) -> tuple:
    """Sends SLOW, cancels it after `cancel_after` s (a CancelRequest, as psycopg's cancel()),
    then sends `SELECT 1`: what each got, the second within `next_bound` s."""
    t = threading.Timer(cancel_after, conn.cancel)
    t.start()
    try:
        with bounded(conn, 15, "the cancelled read"):
            first = ("ok", conn.execute(SLOW).fetchall()[0][0])
    except psycopg.Error as e:
        if isinstance(e.__cause__, Hang) or conn.closed:
            raise
        first = ("error", e.sqlstate)
    finally:
        t.cancel()
    t0 = time.monotonic()
    try:
        with bounded(conn, next_bound, "the statement after the cancel"):
            second = ("ok", conn.execute("SELECT 1").fetchall())
    except Hang:
        second = ("no answer", f"within {next_bound:g} s")
    return first, second, round(time.monotonic() - t0, 2)


@pytest.mark.timeout(90)
def test_f1_a_cancel_of_a_read_waiting_for_its_reader_connection_leaves_the_session_answering(fault_pair, tmp_path):
    """The standby's postmaster frozen (established connections answer: the monitor keeps
    sampling, so the engine chooses the reader): a new session's read waits for its reader
    connection (2 s connect timeout); the client cancels it at 0.5 s. The primary alone answers
    57014 and then the next statement; through the proxy the next statement must be answered
    too (after the connect fails, at the latest)."""
    pair = fault_pair
    # Each session its own startup setting: no pooled reader connection fits it.
    opts = "-c statement_timeout=20000 -c work_mem={}MB"
    with psycopg.connect(pair.primary.dsn(user="app_trust", dbname="app"), autocommit=True, connect_timeout=5,
                         options=opts.format(5)) as direct:
        want = cancelled_then_next(direct, 0.5, 8)
    assert want[:2] == (("error", "57014"), ("ok", [(1,)])), want
    proxy = start_proxy(pair, tmp_path)
    pm = postmaster_pid(pair.standby.datadir)
    try:
        # The reader is known and chosen: a session's plain reads run on the standby.
        with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5, options=opts.format(6)) as warm_s:
            deadline = time.monotonic() + 10
            while warm_s.execute("SELECT inet_server_port()").fetchone()[0] not in STANDBY_PORTS:
                assert time.monotonic() < deadline, "no read reached the standby"
                time.sleep(0.05)
        os.kill(pm, signal.SIGSTOP)
        try:
            s = psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5, options=opts.format(7))
            try:
                got = cancelled_then_next(s, 0.5, 8)
            finally:
                s.close()
        finally:
            os.kill(pm, signal.SIGCONT)
        log = proxy.log_text()
        assert got[:2] == want[:2], (
            f"through the proxy: {got}; the primary alone: {want}; proxy log: "
            f"{[ln for ln in log.splitlines() if 'refused' in ln or 'timed out' in ln][-5:]}")
        # The case happened: the session's read did wait for a reader connection that timed out
        # (else the read ran on the primary and the comparison proves nothing).
        assert any(ln.startswith("polarsplit-proxy: reader connection") and "handshake timed out" in ln
                   for ln in log.splitlines()), f"no reader connection was waited for:\n{log[-3000:]}"
    finally:
        stop_proxy(proxy)


@pytest.mark.timeout(90)
def test_r1b_a_read_streaming_rows_is_not_cut_while_its_monitor_is_down(fault_pair, tmp_path):
    """A long report on the standby streams rows to a client that reads at its own pace; the
    standby's postmaster and its monitor's backend freeze (the monitor can neither sample nor
    reconnect), while the backend serving the report keeps answering. SPEC R-1b treats as lost
    only a reader that "has answered nothing for reader_response_timeout_ms since a statement
    was sent" while its monitor failed too: this one answers all along, so the client must get
    every row, as from the primary alone."""
    pair = fault_pair
    # 40 MB, far more than the sockets and the proxy buffer: the backend sends rows as the client
    # reads them. One second's pause every `pace` rows: about 10 s of reading.
    rows, pace = 40_000, 4_000
    sql = f"SELECT g, inet_server_port(), repeat('x', 1000) FROM generate_series(1, {rows}) g /* r12f report */"
    proxy = start_proxy(pair, tmp_path, extra=["--set", "reader_response_timeout_ms=6000"])
    frozen: list[int] = []
    try:
        s = psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5, options="-c statement_timeout=60000")
        try:
            deadline = time.monotonic() + 10
            while s.execute("SELECT inet_server_port()").fetchone()[0] not in STANDBY_PORTS:
                assert time.monotonic() < deadline, "no read reached the standby"
                time.sleep(0.05)
            with psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True, connect_timeout=5) as a:
                monitors = [r[0] for r in a.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE '%%pg_last_wal_replay_lsn%%'"
                    " AND pid <> pg_backend_pid()").fetchall()]
            assert monitors, "the proxy's monitor connection was not found on the standby"
            got, first, error, t0 = 0, None, None, time.monotonic()
            try:
                with bounded(s, 40, "the report"):
                    for row in s.cursor().stream(sql):
                        got += 1
                        if got == 1:
                            first = row
                            for pid in [postmaster_pid(pair.standby.datadir), *monitors]:
                                try:
                                    os.kill(pid, signal.SIGSTOP)
                                    frozen.append(pid)
                                except ProcessLookupError:
                                    pass
                        if got % pace == 0:
                            time.sleep(1.0)
            except psycopg.Error as e:
                if isinstance(e.__cause__, Hang) or s.closed:
                    raise
                error = (e.sqlstate, str(e).splitlines()[0])
            took = round(time.monotonic() - t0, 1)
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            s.close()
        assert first is not None and first[1] in STANDBY_PORTS, f"the report did not run on the standby: {first}"
        assert (got, error) == (rows, None), (
            f"through the proxy the report was cut after {got} of {rows} rows ({took} s) with {error}; "
            f"the standby's backend was answering all along, and the primary alone gives every row; "
            f"reader deadlines hit (R-1b): {proxy.stats().get('counter', {}).get('reader_deadlines')}")
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        stop_proxy(proxy)
