"""The example proxy drives the session's deadlines and times out its monitor (SPEC R-1b), on the real
pair: the whole standby is frozen with SIGSTOP (postmaster and every backend, the monitor's and the
pooled reader's included) while a client's read runs there.

- The read is answered — by the primary, after `reader_response_timeout_ms`: the proxy took the
  session's deadline into its poll timeout and called on_timeout, the session closed the reader and
  re-ran the read on the writer (F-2). Without the deadline it would hang as long as the freeze.
- The standby's monitor query goes unanswered past --monitor-timeout-ms: a failed sample, the reader
  is marked down, and a new session's read goes to the primary at once.
- After SIGCONT the monitor reconnects and reads return to the standby.

The standby is always resumed, also when the test fails."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg
import pytest

from e2e_support import bounded, ports, report, start_proxy, stop_proxy

RESPONSE_MS = 1500  # reader_response_timeout_ms (above the wait timeouts, as the configuration requires)
MONITOR_TIMEOUT_MS = 500
READ = "SELECT v, inet_server_port() FROM kv WHERE k = 1"


def standby_processes(pair) -> list[int]:
    """The standby's postmaster and all of its children (by the data directory's postmaster.pid)."""
    pm = int((Path(pair.standby.datadir) / "postmaster.pid").read_text().split()[0])
    pids = [pm]
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pm:
                pids.append(int(d.name))
    return pids


def signal_all(pids: list[int], sig) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def timed_read(dsn: str):
    t0 = time.monotonic()
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as c:
        row = c.execute(READ).fetchone()
    return row, time.monotonic() - t0


@pytest.mark.timeout(90)
def test_r1b_proxy_drives_reader_deadlines_and_times_out_its_monitor(pair, tmp_path):
    settings = {"wait_timeout_ms": "200", "split_wait_timeout_ms": "300", "reader_response_timeout_ms": str(RESPONSE_MS)}
    proxy = start_proxy(pair, tmp_path, settings=settings, extra=["--monitor-timeout-ms", str(MONITOR_TIMEOUT_MS)])
    where = ports(pair)
    frozen: list[int] = []
    try:
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p:
            p.execute("INSERT INTO kv VALUES (1, 1) ON CONFLICT (k) DO NOTHING")
        pair.wait_replayed()
        deadline = time.monotonic() + 10
        while where[timed_read(proxy.dsn())[0][1]] != "standby":
            assert time.monotonic() < deadline, "reads never reached the standby"
            time.sleep(0.05)
        before = proxy.stats()
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            assert where[c.execute(READ).fetchone()[1]] == "standby"  # its pooled reader is warm
            frozen = standby_processes(pair)
            signal_all(frozen, signal.SIGSTOP)
            t0 = time.monotonic()
            with bounded(c, RESPONSE_MS / 1000 + 5, "a read on the frozen standby's pooled reader"):
                row = c.execute(READ).fetchone()
            held = time.monotonic() - t0
        # The monitor timed out meanwhile: the reader is down, a new session does not wait for it.
        deadline = time.monotonic() + 5
        while proxy.stats()["proxy"]["monitor_timeouts"] == before["proxy"]["monitor_timeouts"]:
            assert time.monotonic() < deadline, "the monitor query never timed out"
            time.sleep(0.05)
        new_row, new_s = timed_read(proxy.dsn())
        during = proxy.stats()
        signal_all(frozen, signal.SIGCONT)
        frozen = []
        t1 = time.monotonic()
        while where[timed_read(proxy.dsn())[0][1]] != "standby":
            assert time.monotonic() - t1 < 10, "reads did not return to the standby after SIGCONT"
            time.sleep(0.05)
        back_s = time.monotonic() - t1
    finally:
        signal_all(frozen, signal.SIGCONT)
        stop_proxy(proxy)
    d = {k: during["proxy"][k] - before["proxy"][k] for k in ("session_timeouts", "monitor_timeouts")}
    deadlines = during["counter"]["reader_deadlines"] - before["counter"]["reader_deadlines"]
    line = (f"standby frozen: the read on its pooled reader was answered by the {where[row[1]]} after {held:.2f} s "
            f"(reader_response_timeout_ms {RESPONSE_MS}); a new session's read by the {where[new_row[1]]} in "
            f"{new_s:.2f} s; {d['session_timeouts']} on_timeout calls, {deadlines} reader deadlines, "
            f"{d['monitor_timeouts']} monitor timeouts; back on the standby {back_s:.2f} s after SIGCONT")
    report("R-1b (example proxy)", line)
    assert where[row[1]] == "primary", line
    assert RESPONSE_MS / 1000 - 0.1 <= held <= RESPONSE_MS / 1000 + 2.0, line
    assert d["session_timeouts"] >= 1 and deadlines >= 1, line
    assert where[new_row[1]] == "primary" and new_s < 1.0, line
