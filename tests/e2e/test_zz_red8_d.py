"""Examiners' round 8, area d (faults, lag and timing), on a primary + standby pair of its own (the
tests replace and freeze its standby; each wait is bounded, the standby is always resumed).

Found (2026-12-07):

- **S-1a / R-1a: a read the standby served past its monitor's last sample is undone when the
  standby goes back.** On stock servers what a read on a reader showed is recorded as the reader's
  *sampled* position (`reader.rs`, the `!ext.lsn` branch of the reader RFQ: `reader_positioned(
  snapshot.replay_lsn)`), which is a lower bound of what the read could see, not an upper one: a
  standby replays a commit, the session reads it there before the monitor's next sample, and its
  recorded position stays below that commit. The standby then goes back (restarted behind its old
  position, or replaced by an older copy, as test_zz_standby_went_back does): its next sample
  (just before the commit) meets the session's target, and the session reads the row as it was
  before — 30 of 30 reads, in 3 of 3 runs with `--monitor-interval-ms 1000`; with the default
  10 ms interval (the commit read by a read loop as soon as it shows) 2 of 3 runs. The primary
  alone (and the README's promise: such a standby "serves the session again only once it has
  caught up") shows the new row. The bound of what a read on a reader saw is a sample *sent after*
  its answer (as the writer's reads already use), not the one before it.
- **R-1b: while the standby accepts no new connection but its established ones answer, every new
  session pays the reader connect timeout.** The standby's postmaster alone frozen (SIGSTOP; as
  behind a firewall or a full conntrack table that drops new flows, or a postmaster that cannot
  fork): the monitor's connection keeps sampling, so each sample "taken after the latest failure" lifts the hold-out
  and the back-off at once (`cluster/health.rs`, `State::sample` `back_in` and
  `State::retry_after`); the engine never keeps the reader out, and each new session's first read
  waits 2.0 s (`--reader-connect-timeout-ms`) for a reader connection before the primary answers
  it — for as long as the fault lasts (every session in 12 s; the primary alone: 4 ms). SPEC R-1b:
  "while a standby hangs, new sessions do not each pay a connect timeout". A sample on a
  connection opened before the failures proves the server answers, not that it accepts
  connections.

Fixed the same day: a read on a reader is followed until evidence of that reader taken after
it positions what it showed, and an outage of the reader before that leaves the session's
position unknown (`Session::settle_reader_read`; its reads go to the primary until a writer
sample positions them); a monitor sample still lets a held-out reader back in, and lifts the
back-off of new connections at its first sample after a failure, but once a session's connect
attempt begun after such a sample failed too, samples no longer lift it until the reader
answers a statement (`cluster/health.rs`, `State::retry_after`, `samples_unproven`) — one new
session per back-off period pays the connect timeout, not each.

What held (probes not kept as tests): the standby's replay paused with `pg_wal_replay_pause()`
while it answers — 29 write-then-read pairs and 29 reads of another session presenting the
writer's causal token, none stale, all on the primary, back on the standby after resume; the
primary frozen (SIGSTOP) for 3 s, longer than the monitor's timeout, under a 7 s apply delay — no
generation reset, the session's and a token holder's reads after the thaw saw their write; the
primary restarted (fast) under a session with settings — the client gets 57P01 on its next
statement, as directly; `pg_terminate_backend` of the session's reader backend while its read
waits for a replayed lock (retried on the primary, right answer), of its idle pooled reader
(autocommit and inside a READ COMMITTED block: next reads answered, no error), and a read retried
on the primary that way under a 4 s apply delay (the session's next 20 reads stayed on the
primary: no monotonic-read break); kill -9 and immediate stop of the standby mid-stream inside a
block (55000, then 25P02 until COMMIT answers ROLLBACK, as F-3 says); the whole standby frozen
under a psycopg pipeline of three reads (answered by the primary after the 10 s response
deadline, all three, once each); a session's settings replayed on a reader across an immediate
stop and a terminated backend (answers as the primary's); a NOTICE a read raised on the standby
(an immutable function folded at plan time) before it blocked on a replayed lock, the standby then
stopped or the backend terminated: retried on the primary, the NOTICE seen once, as directly; the
whole standby frozen under a proxy with `--monitor-timeout-ms 0` or `--monitor-down-after 1000`
(the read answered by the primary at the 10 s deadline, a new session at once); the standby's
pg_hba rejecting the session's user (new sessions' reads answered by the primary in 30 ms, no
error); the standby in a smart shutdown (established connections served, new ones refused with
57P03): new sessions answered by the primary in 20 ms. A pipelined batch of reads whose reader
is stopped after the first answered gets 55000 (a documented limit)."""

from __future__ import annotations

import os
import shutil
import signal
import time

import psycopg
import pytest

from e2e_support import PgPair, bounded, connect, own_pair_with_row, run, start_proxy, stop_proxy, wait_until
from test_zz_reader_faults import postmaster_pid
from test_zz_standby_went_back import copy

READ = "SELECT v, inet_server_port() FROM d8 WHERE k = 1"


@pytest.fixture(scope="module")
def fault_pair():
    yield from own_pair_with_row("d8", 0)


def set_v(pair: PgPair, v: int) -> None:
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("UPDATE d8 SET v = %s WHERE k = 1", (v,))


def on_standby(pair: PgPair) -> int:
    with psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True, connect_timeout=5) as c:
        return c.execute("SELECT v FROM d8 WHERE k = 1").fetchone()[0]


def replace_standby_with(pair: PgPair, old) -> None:
    """The standby goes back: its older copy, which applies no commit for an hour."""
    pair.standby.stop("fast")
    shutil.rmtree(pair.standby.datadir)
    copy(old, pair.standby.datadir)
    with open(pair.standby.datadir / "postgresql.auto.conf", "a") as f:
        f.write("recovery_min_apply_delay = '1h'\n")
    pair.standby.start()


def standby_applies_again(pair: PgPair) -> None:
    with open(pair.standby.datadir / "postgresql.auto.conf", "a") as f:
        f.write("recovery_min_apply_delay = '0'\n")
    pair.standby.stop("fast")
    pair.standby.start()
    pair.wait_streaming()
    pair.wait_replayed(timeout=60)


@pytest.mark.timeout(120)
def test_s1a_r1a_a_read_past_the_last_sample_is_not_undone_when_the_standby_goes_back(fault_pair, tmp_path):
    """The session reads another session's commit on the standby before the monitor's next sample
    (one a second here, so that the read surely comes first); the standby is then replaced by its
    copy from before that commit, which applies no commit for an hour: the session must not see
    the row as it was before."""
    interval_ms = 1000
    pair = fault_pair
    sb = pair.standby.port
    old = tmp_path / "old-standby"
    pair.standby.stop("fast")
    copy(pair.standby.datadir, old)  # v = 0 in it
    pair.standby.start()
    pair.wait_streaming()
    proxy = start_proxy(pair, tmp_path, extra=["--monitor-interval-ms", str(interval_ms)])
    try:
        s = connect(proxy.dsn())
        wait_until(lambda: ((r := run(s, READ)[0])[1] == sb, r), "a read on the standby", timeout=10, pause=0.05)
        # Another session commits v = 1; the standby replays it; the session reads it there
        # (before the monitor's next sample).
        set_v(pair, 1)
        deadline = time.monotonic() + 5
        while (seen := run(s, READ)[0])[0] != 1 or seen[1] != sb:
            assert time.monotonic() < deadline, seen
        assert seen == (1, sb), seen
        replace_standby_with(pair, old)
        assert on_standby(pair) == 0, "the control: the standby shows the older row"
        time.sleep(3 * interval_ms / 1000 + 1)  # the monitor samples the standby again
        got = [run(s, READ)[0] for _ in range(30)]
        s.close()
        stale = [r for r in got if r[0] != 1]
        assert not stale, f"{len(stale)} of {len(got)} reads went back in time (the standby is {sb}): {stale[:3]}"
    finally:
        stop_proxy(proxy)
        standby_applies_again(pair)
        set_v(pair, 0)
        pair.wait_replayed()


FROZEN_S = 8
NEW_SESSION_BOUND_S = 1.0


@pytest.mark.timeout(90)
def test_r1b_new_sessions_do_not_each_pay_a_connect_timeout_while_the_standby_accepts_none(fault_pair, tmp_path):
    """The standby's postmaster alone is frozen (SIGSTOP): established connections — the monitor's,
    the pooled readers' — keep answering, new connections hang in the handshake (as behind a
    firewall that drops new flows, or a postmaster that cannot fork)."""
    pair = fault_pair
    sb = pair.standby.port
    proxy = start_proxy(pair, tmp_path)
    pid = None
    records: list[tuple[float, float, str]] = []  # (start after the freeze, latency, where)
    try:
        with connect(proxy.dsn()) as s:
            wait_until(lambda: ((r := run(s, READ)[0])[1] == sb, r), "a read on the standby", timeout=10, pause=0.05)
        pid = postmaster_pid(pair.standby.datadir)
        os.kill(pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        while time.monotonic() < frozen_at + FROZEN_S:
            t0 = time.monotonic()
            try:
                with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=10) as c, \
                        bounded(c, 10, "a new session's read"):
                    row = c.execute(READ).fetchone()
                where = "standby" if row[1] == sb else "primary"
            except (psycopg.Error, AssertionError) as e:
                where = f"error: {str(e)[:60]}"
            records.append((t0 - frozen_at, time.monotonic() - t0, where))
        os.kill(pid, signal.SIGCONT)
        pid = None
        # The twin: a new session on the primary alone, at the same moment.
        t0 = time.monotonic()
        with connect(pair.primary.dsn(user="app_trust", dbname="app")) as d:
            run(d, READ)
        direct_s = time.monotonic() - t0
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        stop_proxy(proxy)
    # Give the engine the first seconds of the freeze to learn (its failure threshold is 3).
    late = [r for r in records if r[0] >= 3.0]
    is_slow = [r[1] > NEW_SESSION_BOUND_S or r[2].startswith("error") for r in late]
    slow = [r for r, x in zip(late, is_slow) if x]
    # R-1b: the back-off paces new connections — one attempt per back-off period pays the connect
    # timeout (the host's pool tries again only then), never one session after the other. Before
    # the fix a monitor sample lifted the back-off within one monitor interval of each failure,
    # and nearly every new session paid it (6 of 7 in the examiner's probe).
    back_to_back = [(a, b) for a, b in zip(is_slow, is_slow[1:]) if a and b]
    assert late and not back_to_back and len(slow) * 4 <= len(late), (
        f"{len(slow)} of {len(late)} new sessions begun 3 s or more into the freeze took over "
        f"{NEW_SESSION_BOUND_S} s for one read (the primary alone: {direct_s:.3f} s), "
        f"{len(back_to_back)} of them right after another: "
        f"{[(round(a, 1), round(b, 2), w) for a, b, w in slow[:6]]}")
