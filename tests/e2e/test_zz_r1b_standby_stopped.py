"""A standby stopped and started again under a stream of new sessions (SPEC R-1a, R-1b), on a pair
of its own (the test stops its standby). Three proxies serve the same pair at once, each keeping
sessions off the stopped standby by another mechanism:

- `default`: as configured out of the box — its monitor's first failed sample marks the reader
  down (the engine never chooses it) and the engine holds it out after 3 failures;
- `hold-out`: the monitor never marks it down (--monitor-down-after 1000): only the engine's
  hold-out after reader_failure_threshold (3) consecutive failures — the monitor's failed
  reconnects and the sessions' failed connects, all reported to the engine;
- `back-off only`: neither (threshold 1000 too): the engine keeps choosing the reader and only the
  proxy honouring polarsplit_engine_reader_retry_after keeps it from connecting.


- While the standby is down, every new session's read is answered by the primary within a bound,
  and the proxies open almost no reader connections: the engine heard of every failed connect (the
  monitor's, the sessions'), holds the reader out or backs off, and the proxy honours it — the
  number of reader connection attempts is compared with the number of sessions.
- Within about 2 s of the standby accepting connections again, reads are back on it (its monitor
  kept trying: a sample taken after the latest failure lets it back in and lifts the back-off).

The standby is always started again and the pair always stopped; each wait is bounded."""

from __future__ import annotations

import os
import signal
import threading
import time

import psycopg
import pytest

from e2e_support import bounded, own_pair_with_row, report, start_proxy, stop_proxy

READ = "SELECT v, inet_server_port() FROM w WHERE k = 1"
OUTAGE_S = 6
BACK_BOUND_S = 2.5  # "within ~2 s" of the standby accepting connections
READ_BOUND_S = 1.0  # a new session's read while the standby is down (a refused connect costs nothing)


@pytest.fixture(scope="module")
def fault_pair():
    yield from own_pair_with_row("w", 1)


def read_once(proxy, port_of_standby: int) -> tuple[str, float]:
    """One new session, one read: where it ran ('standby', 'primary' or an error) and how long the
    session took, connect included."""
    t0 = time.monotonic()
    try:
        with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=10) as c:
            with bounded(c, 10, "a new session's read"):
                row = c.execute(READ).fetchone()
        place = "standby" if row[1] == port_of_standby else "primary"
    except (psycopg.Error, AssertionError) as e:
        place = f"error: {str(e)[:80]}"
    return place, time.monotonic() - t0


@pytest.mark.timeout(150)
def test_r1b_standby_stopped_sessions_go_to_the_primary_without_a_connect_storm_and_return(fault_pair, tmp_path):
    pair = fault_pair
    sb = pair.standby.port
    never_down = ["--monitor-down-after", "1000"]
    proxies = {
        "default": start_proxy(pair, tmp_path / "default"),
        "hold-out": start_proxy(pair, tmp_path / "holdout", extra=never_down),
        # Under AddressSanitizer: the back-off, refusal and lost-reader paths, checked for memory errors.
        "back-off only": start_proxy(pair, tmp_path / "backoff", asan=True, extra=never_down,
                                     settings={"reader_failure_threshold": "1000"}),
    }
    records: dict[str, list[tuple[float, str, float]]] = {k: [] for k in proxies}  # (start, where, latency)
    stop = threading.Event()
    try:
        for name, proxy in proxies.items():
            deadline = time.monotonic() + 20
            while read_once(proxy, sb)[0] != "standby":
                assert time.monotonic() < deadline, f"{name}: reads never reached the standby"
                time.sleep(0.05)

        def sessions(name):
            while not stop.is_set():
                t = time.monotonic()
                place, lat = read_once(proxies[name], sb)
                records[name].append((t, place, lat))
                time.sleep(0.02)

        workers = [threading.Thread(target=sessions, args=(n,)) for n in proxies]
        for w in workers:
            w.start()
        time.sleep(1)
        before = {n: p.stats() for n, p in proxies.items()}
        stopped_at = time.monotonic()
        pair.standby.stop("fast")
        time.sleep(OUTAGE_S)
        during = {n: p.stats() for n, p in proxies.items()}
        started_at = time.monotonic()
        starter = threading.Thread(target=pair.standby.start)
        starter.start()
        # When the standby accepts connections again (polled directly).
        accepting_at = None
        deadline = time.monotonic() + 60
        while accepting_at is None and time.monotonic() < deadline:
            try:
                with psycopg.connect(pair.standby.dsn(dbname="app"), connect_timeout=2) as d:
                    d.execute("SELECT 1")
                accepting_at = time.monotonic()
            except psycopg.Error:
                time.sleep(0.01)
        starter.join(timeout=60)
        assert accepting_at is not None, "the standby did not accept connections again"
        time.sleep(BACK_BOUND_S + 1.5)
        stop.set()
        for w in workers:
            w.join(timeout=30)
        after = {n: p.stats() for n, p in proxies.items()}
    finally:
        stop.set()
        if not pair.standby.running():
            pair.standby.start()
        for p in proxies.values():
            stop_proxy(p)

    def delta(stats_a, stats_b, section, key):
        return stats_b[section].get(key, 0) - stats_a[section].get(key, 0)

    failures = []
    for name in proxies:
        recs = records[name]
        # Sessions begun after the standby was down (give the stop 0.5 s to take effect) and
        # before it was asked to start again.
        down = [r for r in recs if stopped_at + 0.5 <= r[0] < started_at]
        back = [r for r in recs if r[0] >= accepting_at and r[1] == "standby"]
        first_back = back[0][0] - accepting_at if back else float("nan")
        attempts = delta(before[name], during[name], "proxy", "reader_connections_opened")
        c = lambda k, s="counter": delta(before[name], during[name], s, k)  # noqa: E731
        worst = max((r[2] for r in down), default=0.0)
        report("R-1b: standby stopped (pg_ctl stop -m fast) for %d s" % OUTAGE_S,
               f"{name}: {len(down)} new sessions while it was down, {sum(r[1] == 'primary' for r in down)} "
               f"answered by the primary, {sum(r[1].startswith('error') for r in down)} errors, slowest "
               f"{worst:.2f} s; reader connections the proxy opened for sessions meanwhile: {attempts}; "
               f"engine reader_connect_failures {c('reader_connect_failures')} (starting up "
               f"{delta(before[name], after[name], 'counter', 'reader_starting_up')} until the end), "
               f"readers_held_out {c('readers_held_out')}, monitor_failures {c('monitor_failures')}; proxy "
               f"backoff_refusals {c('reader_backoff_refusals', 'proxy')}, inflight_refusals "
               f"{c('reader_inflight_refusals', 'proxy')}, pooled readers lost {c('reader_losses_reported', 'proxy')}; "
               f"first read on the standby {first_back:.2f} s after it accepted connections "
               f"(start to accepting: {accepting_at - started_at:.2f} s)")
        if len(down) < 50:
            failures.append(f"{name}: only {len(down)} sessions during the outage: the test proves little")
        if not all(r[1] == "primary" for r in down):
            failures.append(f"{name}: sessions not answered by the primary: "
                            f"{[r for r in down if r[1] != 'primary'][:5]}")
        if worst > READ_BOUND_S:
            failures.append(f"{name}: a session during the outage took {worst:.2f} s (bound {READ_BOUND_S} s)")
        if attempts > 5:
            failures.append(f"{name}: {attempts} reader connections opened for {len(down)} sessions (a connect storm)")
        if c("reader_connect_failures") < 3:
            failures.append(f"{name}: the engine heard of {c('reader_connect_failures')} failed connects")
        if not back or first_back > BACK_BOUND_S:
            failures.append(f"{name}: reads back on the standby {first_back:.2f} s after it accepted connections")
    for name in ("default", "hold-out"):
        if delta(before[name], during[name], "counter", "readers_held_out") < 1:
            failures.append(f"{name}: the reader was never held out")
    if delta(before["back-off only"], during["back-off only"], "counter", "readers_held_out") != 0:
        failures.append("back-off only: the reader was held out (threshold 1000)")
    down_b = [r for r in records["back-off only"] if stopped_at + 0.5 <= r[0] < started_at]
    if delta(before["back-off only"], during["back-off only"], "proxy", "reader_backoff_refusals") < len(down_b) // 2:
        failures.append("back-off only: the proxy's back-off refused (almost) nothing: it was not what kept "
                        "the sessions from connecting")
    assert not failures, failures


REFUSING_S = 3


@pytest.mark.timeout(90)
def test_r1a_a_standby_refusing_with_57p03_is_starting_up_and_sessions_stay_on_the_primary(fault_pair, tmp_path):
    """The standby runs with hot_standby = off: it is up and streaming but refuses every connection
    with FATAL 57P03 ("not accepting connections"). The proxy reports each refused connect as
    starting up (R-1a: an outage, the position unknown until a sample after it), sessions read on
    the primary, and once it accepts connections again reads return to it."""
    pair = fault_pair
    proxy = start_proxy(pair, tmp_path)
    sb = pair.standby.port
    try:
        deadline = time.monotonic() + 20
        while read_once(proxy, sb)[0] != "standby":
            assert time.monotonic() < deadline, "reads never reached the standby"
            time.sleep(0.05)
        before = proxy.stats()
        pair.standby.stop("fast")
        pair.standby.pg_ctl("-w", "-t", "60", "-l", str(pair.standby.logfile), "-o", "-c hot_standby=off", "start")
        try:
            with pytest.raises(psycopg.OperationalError, match="not accepting connections|starting up"):
                psycopg.connect(pair.standby.dsn(dbname="app"), connect_timeout=5).close()
            refusing_at = time.monotonic()
            recs = []
            while time.monotonic() < refusing_at + REFUSING_S:
                recs.append(read_once(proxy, sb))
                time.sleep(0.02)
            during = proxy.stats()
        finally:
            pair.standby.stop("fast")
            pair.standby.start()
        accepting_at = time.monotonic()
        back = None
        while back is None and time.monotonic() < accepting_at + 10:
            if read_once(proxy, sb)[0] == "standby":
                back = time.monotonic() - accepting_at
            time.sleep(0.02)
    finally:
        if not pair.standby.running():
            pair.standby.start()
        stop_proxy(proxy)
    starting_up = during["counter"]["reader_starting_up"] - before["counter"]["reader_starting_up"]
    reported = (during["proxy"]["reader_connect_failures_reported"]
                - before["proxy"]["reader_connect_failures_reported"])
    report("R-1a: standby refusing connections with 57P03 (hot_standby = off)",
           f"{len(recs)} new sessions in {REFUSING_S} s: {sum(r[0] == 'primary' for r in recs)} on the primary, "
           f"slowest {max(r[1] for r in recs):.2f} s; engine reader_starting_up {starting_up} (proxy-reported connect "
           f"failures {reported}); back on the standby {back if back is not None else float('nan'):.2f} s after "
           "it accepted connections again")
    assert recs and all(r[0] == "primary" for r in recs), [r for r in recs if r[0] != "primary"][:5]
    assert max(r[1] for r in recs) <= READ_BOUND_S
    assert starting_up >= REFUSING_S * 2, f"57P03 refusals were not reported as starting up: {starting_up}"
    assert back is not None and back <= BACK_BOUND_S, back


HUNG_S = 5
CONNECT_TIMEOUT_MS = 1000


@pytest.mark.timeout(90)
def test_r1b_a_hung_postmaster_fails_new_reader_connects_to_the_session_which_reads_on_the_primary(
        fault_pair, tmp_path):
    """Only the standby's postmaster is frozen (SIGSTOP): its backends — the monitor's and the pooled
    readers' — keep answering, but a new connection is never forked. The proxy's handshake timeout
    turns each new reader connection into READER_CONNECT_FAILED to the session that asked for it,
    which the engine counts as a reader fault (R-1a, R-1b) and the writer answers; sessions that get
    a pooled reader read on the standby."""
    pair = fault_pair
    proxy = start_proxy(pair, tmp_path, extra=["--reader-connect-timeout-ms", str(CONNECT_TIMEOUT_MS)])
    sb = pair.standby.port
    recs: list[tuple[str, float]] = []
    pm = None
    try:
        deadline = time.monotonic() + 20
        while read_once(proxy, sb)[0] != "standby":
            assert time.monotonic() < deadline, "reads never reached the standby"
            time.sleep(0.05)
        pm = int((pair.standby.datadir / "postmaster.pid").read_text().split()[0])
        before = proxy.stats()
        os.kill(pm, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            def worker():
                while time.monotonic() < t0 + HUNG_S:
                    recs.append(read_once(proxy, sb))

            workers = [threading.Thread(target=worker) for _ in range(4)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(timeout=HUNG_S + 30)
            after = proxy.stats()
        finally:
            os.kill(pm, signal.SIGCONT)
        time.sleep(1)
        later = proxy.stats()
    finally:
        if pm is not None:
            try:
                os.kill(pm, signal.SIGCONT)
            except ProcessLookupError:
                pass
        stop_proxy(proxy)

    def d(section, key):
        return after[section].get(key, 0) - before[section].get(key, 0)

    primary = [r for r in recs if r[0] == "primary"]
    errors = [r for r in recs if r[0].startswith("error")]
    by_sessions = d("proxy", "reader_connect_failures") - d("proxy", "reader_connect_failures_reported")
    report("R-1b: standby postmaster frozen (its backends answer)",
           f"{len(recs)} new sessions in {HUNG_S} s (4 at a time): {len(recs) - len(primary) - len(errors)} on the "
           f"standby (pooled readers: {d('proxy', 'pool_checkouts_hit')} hits), {len(primary)} on the primary, "
           f"{len(errors)} errors, slowest {max(r[1] for r in recs):.2f} s (connect timeout {CONNECT_TIMEOUT_MS} ms); "
           f"reader connections opened {d('proxy', 'reader_connections_opened')}, failed and reported by their "
           f"sessions {by_sessions}; engine reader_connect_failures {d('counter', 'reader_connect_failures')}, "
           f"readers_held_out {d('counter', 'readers_held_out')}, readers_back_in {d('counter', 'readers_back_in')} "
           f"({later['counter'].get('readers_back_in', 0) - before['counter'].get('readers_back_in', 0)} by 1 s after "
           "SIGCONT)")
    assert not errors, errors[:5]
    assert primary, "no session needed a new reader connection: the test proves nothing"
    assert max(r[1] for r in recs) <= CONNECT_TIMEOUT_MS / 1000 + 1.0
    assert by_sessions >= 1 and d("counter", "reader_connect_failures") >= by_sessions
