"""SPEC S-1a and R-1a end to end, on a pair of its own: a standby that goes back, or stops being a
standby, never serves a session older data than it has seen (examiners' probes of 2026-12-05).

- **Went back.** A session reads a row on the standby; the standby is then replaced by an older
  copy of itself (as after a restore, or a crash-restart with WAL to redo), which stays behind
  (`recovery_min_apply_delay = 1h`). Before, a stock reader's answer raised nothing the session
  had seen, so its next read went to the older standby and showed the row as it was before
  (44–99 stale reads in 5 of 6 runs). Now what a read on a reader showed is at least that
  reader's known position, and the session's reads stay on the primary until a reader is past it.
- **Promoted.** A promoted PostgreSQL 15 standby keeps answering its last replay position, so
  the example proxy's monitor kept it as a reader: reads frozen at the promotion for good, and a
  "read" that wrote (a reader's 25006 is the safety net) wrote there. The monitor now asks
  whether the server is in recovery."""

from __future__ import annotations

import shutil
import subprocess
import time

import psycopg
import pytest

from e2e_support import PgPair, bounded, own_pair_with_row, start_proxy, stop_proxy, wait_until

READ = "SELECT v, inet_server_port() FROM went_back WHERE k = 1"


@pytest.fixture(scope="module")
def own_pair():
    yield from own_pair_with_row("went_back", 0)


def copy(src, dst) -> None:
    """A data directory's copy, owned by the servers' user as the original (cp -a)."""
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def set_v(pair: PgPair, v: int) -> None:
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("UPDATE went_back SET v = %s WHERE k = 1", (v,))


def on_standby(pair: PgPair) -> int:
    with psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True) as c:
        return c.execute("SELECT v FROM went_back WHERE k = 1").fetchone()[0]


@pytest.mark.timeout(180)
def test_s1a_r1a_a_standby_that_went_back_serves_no_older_data_than_the_session_saw(own_pair, tmp_path):
    pair = own_pair
    old = tmp_path / "old-standby"
    pair.standby.stop("fast")
    copy(pair.standby.datadir, old)  # v = 0 in it
    pair.standby.start()
    pair.wait_streaming()
    proxy = start_proxy(pair, tmp_path)
    try:
        set_v(pair, 1)
        pair.wait_replayed()
        with psycopg.connect(proxy.dsn(), autocommit=True) as s, bounded(s, 60, "the session"):
            # The session sees v = 1 on the standby (a read that never waited: stock, no target).
            seen = wait_until(lambda: ((r := s.execute(READ).fetchone())[1] == pair.standby.port, r),
                              "a read on the standby")
            assert seen[0] == 1
            # The standby goes back: its older copy, which applies nothing for an hour.
            pair.standby.stop("fast")
            shutil.rmtree(pair.standby.datadir)
            copy(old, pair.standby.datadir)
            with open(pair.standby.datadir / "postgresql.auto.conf", "a") as f:
                f.write("recovery_min_apply_delay = '1h'\n")
            pair.standby.start()
            assert on_standby(pair) == 0, "the control: the standby shows the older row"
            time.sleep(1)  # the monitor samples the standby again (every 10 ms)
            got = [s.execute(READ).fetchone() for _ in range(50)]
            stale = [r for r in got if r[0] != 1]
            assert not stale, f"{len(stale)} of {len(got)} reads went back in time: {stale[:3]}"
    finally:
        stop_proxy(proxy)
        # Back to a standby that applies at once, for the next test.
        with open(pair.standby.datadir / "postgresql.auto.conf", "a") as f:
            f.write("recovery_min_apply_delay = '0'\n")
        pair.standby.stop("fast")
        pair.standby.start()
        pair.wait_replayed(timeout=60)


@pytest.mark.timeout(120)
def test_r1_a_promoted_standby_is_no_reader(own_pair, tmp_path):
    pair = own_pair
    proxy = start_proxy(pair, tmp_path)
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True) as s, bounded(s, 60, "the session"):
            wait_until(lambda: ((r := s.execute(READ).fetchone())[1] == pair.standby.port, r),
                       "a read on the standby")
        pair.standby.pg_ctl("-w", "promote")
        time.sleep(1)  # the monitor samples the promoted server (every 10 ms)
        for v in range(10, 20):
            set_v(pair, v)
            with psycopg.connect(proxy.dsn(), autocommit=True) as s, bounded(s, 20, "a new session"):
                got = s.execute(READ).fetchone()
            assert got == (v, pair.primary.port), f"after the standby's promotion: {got}, want {v}"
        assert "not in recovery" in proxy.log_text()
    finally:
        stop_proxy(proxy)
