"""Issue 21: Pgpool-II 4.3.5 (Debian's source) patched to take every routing decision from
libpolarsplit, against the real pair (standby applying WAL 200 ms late).

integrations/pgpool/build.sh builds the patched tree twice: without the switch (`pgpool-plain`,
Pgpool as it was), which runs Pgpool's own statement-level load balancing configured as its
documentation describes for streaming replication, and `--with-polarsplit` (`pgpool`), run with
`polarsplit = on`, and with `polarsplit = off` for the pgbench comparison. The workloads speak the
simple query protocol (psycopg's ClientCursor binds parameters client-side) unless they say they
use the extended one (psycopg's server-side binding, with named statements per prepare_threshold).
Where a statement ran is read from `inet_server_port()` (replica-safe on purpose, SPEC S-7) or,
for pgbench, from each server's own statistics.

The figures are printed (pytest -s shows them) and written to target/pgpool/report.txt."""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from e2e_support import bounded, create_function, user_functions
from pgpool_support import PGPOOL, PGPOOL_PLAIN, Counts, Pgpool

REPORT = PGPOOL.parent.parent / "report.txt"
CLIENTS = 4
ITERATIONS = 15
PAUSE_S = 0.3  # longer than the apply delay: the second read of a pair may go to the standby

# Pgpool's load balancing, from its defaults to its strictest documented consistency options.
BASELINES = {
    "pgpool load balancing (delay_threshold = 0, the default)": {},
    "pgpool load balancing + delay_threshold = 1 byte, sr_check_period = 1 s": {
        "delay_threshold": "1", "sr_check_period": "1"},
    "pgpool load balancing + disable_load_balance_on_write = 'always'": {
        "disable_load_balance_on_write": "'always'"},
}


def report(text: str) -> None:
    print(text)
    with open(REPORT, "a") as f:
        f.write(text + "\n")


@pytest.fixture(scope="module")
def pgpools(pair, tmp_path_factory):
    """Started lazily by name; all stopped at the end of the module."""
    started: dict[str, Pgpool] = {}
    work = tmp_path_factory.mktemp("pgpool")
    REPORT.parent.mkdir(parents=True, exist_ok=True)

    def get(name: str, polarsplit: bool | None, settings: dict[str, str] | None = None) -> Pgpool:
        if name not in started:
            started[name] = Pgpool(pair, work, polarsplit=polarsplit, settings=settings).start()
        return started[name]

    try:
        yield get
    finally:
        for p in started.values():
            code = p.stop()
            log = p.log_text()
            assert "polarsplit: session ended with a backend connection in an unknown state" not in log, log[-4000:]
            assert code == 0, f"pgpool exited with {code}:\n{log[-4000:]}"


def _rows(pair, first: int, n: int) -> list[int]:
    keys = list(range(first, first + n))
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("INSERT INTO kv SELECT g, 0 FROM generate_series(%s::int, %s::int) g ON CONFLICT (k) DO UPDATE SET v = 0",
                  (keys[0], keys[-1]))
    pair.wait_replayed()
    return keys


def _run_clients(target, keys: list[int]) -> Counts:
    total = Counts()
    lock = threading.Lock()

    def one(k: int) -> None:
        c = target(k)
        with lock:
            total.add(c)

    threads = [threading.Thread(target=one, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total


SIMPLE = {"cursor_factory": psycopg.ClientCursor}  # parameters bound client-side: simple Query


def ryw_workload(pgpool: Pgpool, pair, keys: list[int], connect: dict | None = None,
                 pipeline: bool = False) -> Counts:
    """Each client: write its row, read it at once, wait past the apply delay, read it again.
    A read that misses the client's own committed write is stale. `connect`: psycopg options
    (the protocol: SIMPLE, or the extended protocol with a prepare_threshold); `pipeline`: the
    write and the first read go in one psycopg pipeline (one batch, the read right behind the
    write)."""
    standby_port = pair.standby.port
    write = "UPDATE kv SET v = v + 1 WHERE k = %s RETURNING v"
    read = "SELECT v, inet_server_port() FROM kv WHERE k = %s"

    def count(out: Counts, row, wrote: int) -> None:
        v, port = row
        out.reads += 1
        out.stale += v < wrote
        out.standby += port == standby_port

    def client(k: int) -> Counts:
        out = Counts()
        try:
            with psycopg.connect(pgpool.dsn(), autocommit=True, **(SIMPLE if connect is None else connect)) as c:
                for _ in range(ITERATIONS):
                    if pipeline:
                        with c.pipeline():
                            w = c.execute(write, (k,))
                            r = c.execute(read, (k,))
                        wrote = w.fetchone()[0]
                        count(out, r.fetchone(), wrote)
                    else:
                        wrote = c.execute(write, (k,)).fetchone()[0]
                        count(out, c.execute(read, (k,)).fetchone(), wrote)
                    time.sleep(PAUSE_S)
                    count(out, c.execute(read, (k,)).fetchone(), wrote)
        except psycopg.Error as e:  # counted, and fails the test
            out.errors.append(str(e))
        return out

    return _run_clients(client, keys)


def txn_workload(pgpool: Pgpool, pair, keys: list[int]) -> tuple[Counts, Counts]:
    """Each client, READ COMMITTED transactions: a read before the first write, the write, a read
    of what it wrote; then a pause so the next transaction's first read may be offloaded."""
    standby_port = pair.standby.port

    def client(k: int) -> tuple[Counts, Counts]:
        before, after = Counts(), Counts()
        try:
            with psycopg.connect(pgpool.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
                for _ in range(ITERATIONS):
                    c.execute("BEGIN")
                    v0, port = c.execute("SELECT v, inet_server_port() FROM kv WHERE k = %s", (k,)).fetchone()
                    before.reads += 1
                    before.standby += port == standby_port
                    wrote = c.execute("UPDATE kv SET v = v + 1 WHERE k = %s RETURNING v", (k,)).fetchone()[0]
                    before.stale += wrote != v0 + 1  # the read before the write missed a commit
                    v, port = c.execute("SELECT v, inet_server_port() FROM kv WHERE k = %s", (k,)).fetchone()
                    after.reads += 1
                    after.standby += port == standby_port
                    after.stale += v != wrote
                    c.execute("COMMIT")
                    time.sleep(PAUSE_S)
        except psycopg.Error as e:
            after.errors.append(str(e))
        return before, after

    results: list[tuple[Counts, Counts]] = []
    lock = threading.Lock()

    def run(k: int) -> None:
        r = client(k)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=run, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    before, after = Counts(), Counts()
    for b, a in results:
        before.add(b)
        after.add(a)
    return before, after


def _line(name: str, c: Counts) -> str:
    return f"  {name:<76} reads {c.reads:4}  stale {c.stale:4}  on the standby {c.standby_share:6.1%}"


def test_s1a_pgpool_polarsplit_reads_your_writes_where_pgpool_load_balancing_does_not(pair, pgpools):
    report(f"\nread-your-writes through Pgpool-II 4.3.5, {CLIENTS} clients x {ITERATIONS} x (write; read; "
           f"{int(PAUSE_S * 1000)} ms; read), standby apply delay {pair.apply_delay_ms} ms")
    results = {}
    for i, (name, settings) in enumerate(BASELINES.items()):
        p = pgpools(f"lb{i}", polarsplit=None, settings=settings)
        results[name] = ryw_workload(p, pair, _rows(pair, 7000 + 10 * i, CLIENTS))
        report(_line(name, results[name]))
    ps = ryw_workload(pgpools("polarsplit", polarsplit=True), pair, _rows(pair, 7100, CLIENTS))
    report(_line("patched pgpool, polarsplit = on (stock dialect, LSN probe + standby samples)", ps))

    for name, c in {**results, "polarsplit": ps}.items():
        assert not c.errors, f"{name}: {c.errors[:3]}"
        assert c.reads == CLIENTS * ITERATIONS * 2
    assert ps.stale == 0
    # Offload is real: reads after the standby replayed the write are served there.
    assert ps.standby > 0
    # The same Pgpool balancing on its own shows the problem the library exists to solve.
    assert results["pgpool load balancing (delay_threshold = 0, the default)"].stale > 0


def test_e1_pgpool_polarsplit_client_backend_pid_is_the_writers(pair, pgpools):
    """A client's backend is the writer's (E-1: what one server would send): the process id of its
    BackendKeyData is the one pg_backend_pid() returns (the primary answers it) and the one its
    own notifications carry. Pgpool sends the key of the last node it authenticated, a standby's:
    found by PostgreSQL's isolation suite through Pgpool, whose tester asks the server whether its
    sessions (by PQbackendPID) wait for a lock and never saw one wait (deadlock-hard hung). A cancel
    with that key still reaches the session."""
    p = pgpools("polarsplit", polarsplit=True)
    for _ in range(3):  # new and pooled (re-authenticated) backend connections
        with psycopg.connect(p.dsn(), autocommit=True) as c:
            own = c.info.backend_pid
            assert c.execute("SELECT pg_backend_pid()").fetchone()[0] == own
            c.execute("LISTEN pid_check")
            c.execute("NOTIFY pid_check")
            note = next(c.notifies(timeout=5, stop_after=1))
            assert note.pid == own
            t0 = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                threading.Timer(0.3, c.cancel).start()
                c.execute("SELECT pg_sleep(10)")
            assert time.monotonic() - t0 < 5


def test_p5_pgpool_transaction_reads_before_the_first_write_offloaded_after_it_on_the_primary(pair, pgpools):
    report(f"\ntransactions through Pgpool-II, {CLIENTS} clients x {ITERATIONS} x (BEGIN; read; write; read; "
           f"COMMIT; {int(PAUSE_S * 1000)} ms)")
    runs = {
        "pgpool load balancing, disable_load_balance_on_write = 'transaction'": pgpools("lb0", polarsplit=None),
        "patched pgpool, polarsplit = on": pgpools("polarsplit", polarsplit=True),
    }
    out = {}
    for i, (name, p) in enumerate(runs.items()):
        before, after = txn_workload(p, pair, _rows(pair, 7200 + 10 * i, CLIENTS))
        out[name] = (before, after)
        report(f"  {name}\n    before the first write: reads {before.reads}, on the standby {before.standby} "
               f"({before.standby_share:.1%}), missed a committed write {before.stale}\n"
               f"    after it:               reads {after.reads}, on the standby {after.standby}, "
               f"wrong {after.stale}")
    before, after = out["patched pgpool, polarsplit = on"]
    assert not after.errors, after.errors[:3]
    assert before.reads == after.reads == CLIENTS * ITERATIONS
    assert after.standby == 0 and after.stale == 0  # stock PostgreSQL: no XID import, the primary
    assert before.stale == 0
    assert before.standby > 0  # the read-only prefix is offloaded


@pytest.fixture(scope="module")
def pgbench_tables(pair):
    subprocess.run(["pgbench", "-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres",
                    "app"], check=True, capture_output=True)
    pair.primary.psql("GRANT ALL ON ALL TABLES IN SCHEMA public TO PUBLIC", dbname="app")
    pair.wait_replayed()


def _pgbench(pgpool: Pgpool, seconds: int, *args: str) -> tuple[float, int, float]:
    cpu0 = pgpool.cpu_seconds()
    r = subprocess.run(
        ["pgbench", "-n", "-S", "-c", "4", "-j", "2", "-T", str(seconds), *args, "-h", "127.0.0.1", "-p",
         str(pgpool.port), "-U", "app_trust", "app"], capture_output=True, text=True, timeout=seconds + 60)
    cpu = pgpool.cpu_seconds() - cpu0
    assert r.returncode == 0, r.stdout + r.stderr
    tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)", r.stdout).group(1))
    txs = int(re.search(r"number of transactions actually processed: (\d+)", r.stdout).group(1))
    assert "number of failed transactions: 0 " in r.stdout, r.stdout
    return tps, txs, cpu


SUMMARY = re.compile(r"polarsplit: session summary: decisions primary (\d+) standby (\d+) split (\d+)")


def _session_summaries(pgpool: Pgpool, after: int, sessions: int) -> tuple[int, int]:
    """(decisions for the primary, for the standby) of the session summaries the Pgpool children
    logged (DEBUG1) past log offset `after`, once at least `sessions` of them are there (a child
    logs its summary when its client has gone: bounded wait)."""
    deadline = time.time() + 10
    while len(SUMMARY.findall(pgpool.log_text()[after:])) < sessions and time.time() < deadline:
        time.sleep(0.1)
    found = SUMMARY.findall(pgpool.log_text()[after:])
    assert len(found) >= sessions, found
    return sum(int(p) for p, _, _ in found), sum(int(r) + int(x) for _, r, x in found)


def test_e1_pgbench_select_only_through_pgpool_in_every_query_mode(pair, pgpools, pgbench_tables):
    """pgbench -S -M simple|extended|prepared through the patched Pgpool (no writes: nothing to
    wait for): the share of its selects sent to the standby, from the session summaries of a
    Pgpool logging at DEBUG1 (its TPS is not a figure: it logs)."""
    p = pgpools("polarsplit-debug1", polarsplit=True, settings={"log_min_messages": "'debug1'"})
    report("\npgbench -S -c 4 -j 2 -T 3 through patched Pgpool, polarsplit = on: decisions by server "
           "(the children's session summaries)")
    for mode in ("simple", "extended", "prepared"):
        offset = len(p.log_text())
        _tps, txs, _ = _pgbench(p, 3, "-M", mode)
        # pgbench's 4 clients and its own first connection (it reads the scale, on the primary)
        on_primary, on_standby = _session_summaries(p, offset, sessions=5)
        report(f"  -M {mode:<9} transactions {txs:6}  to the standby {on_standby:6}, to the primary {on_primary:4} "
               f"({on_standby / max(1, txs):.1%} of the selects on the standby)")
        assert on_standby >= 0.95 * txs, (mode, on_standby, on_primary, txs)


def test_pgbench_select_only_through_pgpool_polarsplit_on_vs_off(pair, pgpools, pgbench_tables):
    servers = {"off": pgpools("off", polarsplit=False), "on": pgpools("polarsplit", polarsplit=True),
               "plain": pgpools("lb0", polarsplit=None)}
    runs: dict[str, list[tuple[float, int, float]]] = {k: [] for k in servers}
    for p in servers.values():
        _pgbench(p, 1)  # warm: children connected, caches filled
    for _ in range(3):
        for name, p in servers.items():
            runs[name].append(_pgbench(p, 4))
    tps = {k: statistics.median(t for t, _, _ in v) for k, v in runs.items()}
    cpu_us = {k: statistics.median(1e6 * c / n for _, n, c in v) for k, v in runs.items()}
    report("\npgbench -S -c 4 -j 2 -T 4 through the same patched Pgpool, 3 alternating runs each (medians)")
    for k, label in (("off", "polarsplit = off (Pgpool's load balancing)"), ("on", "polarsplit = on"),
                     ("plain", "built without --with-polarsplit")):
        report(f"  {label:<44} tps {tps[k]:9.1f}  pgpool CPU per transaction {cpu_us[k]:7.1f} us  "
               f"(runs: {', '.join(f'{t:.0f}' for t, _, _ in runs[k])})")
    report(f"  TPS ratio on/off {tps['on'] / tps['off']:.3f}; CPU per transaction on/off {cpu_us['on'] / cpu_us['off']:.3f}")
    assert all(t > 0 for v in runs.values() for t, _, _ in v)


def test_pgpool_built_without_the_switch_has_no_trace_of_the_library():
    """Without --with-polarsplit the patched tree builds Pgpool as it was: no libpolarsplit
    dependency, no symbol of ours, no polarsplit setting."""
    needed = subprocess.run(["objdump", "-p", str(PGPOOL_PLAIN)], capture_output=True, text=True, check=True).stdout
    assert "libpolarsplit" not in needed
    assert "libpolarsplit" in subprocess.run(["objdump", "-p", str(PGPOOL)], capture_output=True, text=True,
                                             check=True).stdout
    symbols = subprocess.run(["nm", str(PGPOOL_PLAIN)], capture_output=True, text=True, check=True).stdout
    assert "polarsplit" not in symbols.lower()
    strings = PGPOOL_PLAIN.read_bytes()
    assert b"polarsplit_settings" not in strings and b"polarsplit_settings" in PGPOOL.read_bytes()


# psycopg's extended protocol (server-side binding) in the ways applications meet it.
EXTENDED_MODES = {
    "extended, unnamed statements (prepare_threshold=None)": ({"prepare_threshold": None}, False),
    "extended, named after 5 executions (psycopg's default)": ({}, False),
    "extended, named from the first execution (prepare_threshold=0)": ({"prepare_threshold": 0}, False),
    "extended, pipeline: the read right behind the write (threshold 0)": ({"prepare_threshold": 0}, True),
}


def test_e2_pgpool_polarsplit_prepared_statements_read_your_writes(pair, pgpools):
    """The extended protocol through the patched Pgpool (E-1, E-2): named prepared statements are
    prepared on the standby under the library's names and their reads served there once the
    standby has replayed the session's writes; none misses a write under the 200 ms apply delay.
    The same workload through Pgpool's own load balancing for comparison."""
    report(f"\nread-your-writes, extended protocol (psycopg), {CLIENTS} clients x {ITERATIONS} x (write; read; "
           f"{int(PAUSE_S * 1000)} ms; read), apply delay {pair.apply_delay_ms} ms")
    results = {}
    for i, (name, (connect, pipeline)) in enumerate(EXTENDED_MODES.items()):
        keys = _rows(pair, 7400 + 10 * i, CLIENTS)
        results[name] = ryw_workload(pgpools("polarsplit", polarsplit=True), pair, keys, connect, pipeline)
        report(_line(f"polarsplit = on: {name}", results[name]))
    lb = ryw_workload(pgpools("lb0", polarsplit=None), pair, _rows(pair, 7490, CLIENTS), {"prepare_threshold": 0})
    report(_line("pgpool load balancing (default): named from the first execution", lb))
    for name, c in results.items():
        assert not c.errors, f"{name}: {c.errors[:3]}"
        assert c.reads == CLIENTS * ITERATIONS * 2, name
        assert c.stale == 0, name
        # Reads after the standby replayed the write are served there: with prepare_threshold=0
        # every one of them is a named prepared statement, so this is named-statement offload.
        assert c.standby > 0, name
    assert not lb.errors, lb.errors[:3]
    assert lb.stale > 0  # the comparison shows the problem


def test_e2_pgpool_polarsplit_needs_a_reset_that_drops_prepared_statements(pair, tmp_path):
    """The library's own prepared statements live on Pgpool's cached connections (the probe on the
    primary, client statements under engine names on the standby); a reset_query_list that does
    not drop them would hand them to the next session, which takes a connection it has not seen
    as having none; so would the client's own (Pgpool's own path deallocates the statements it
    tracked, the library's session does not). Without the check the second psycopg session of a
    child (prepare_threshold=0) failed with `prepared statement "_pg3_0" already exists`. Such a
    Pgpool routes as it always did, and says so."""
    p = Pgpool(pair, tmp_path, polarsplit=True, settings={"reset_query_list": "'ABORT'"}).start(routed=False)
    try:
        # The child logs it as a session starts, once Pgpool has found its primary: a session
        # accepted before that takes Pgpool's own routing without getting that far (CI, 2026-12-06:
        # the line never came after one session). So sessions are opened until it comes
        # (bounded); each must answer, as the second one of a child failed without the check.
        # The log file is written by another process.
        line, deadline = "polarsplit: reset_query_list drops no prepared statements", time.time() + 15
        while True:
            with psycopg.connect(p.dsn(), autocommit=True, prepare_threshold=0) as c:
                for _ in range(3):
                    assert c.execute("SELECT %s::int + 1", (41,)).fetchone() == (42,)
            if line in p.log_text() or time.time() > deadline:
                break
            time.sleep(0.1)
        assert line in p.log_text()
    finally:
        assert p.stop() == 0


def test_cancel_through_pgpool_reaches_the_statement_on_the_standby(pair, pgpools):
    """A CancelRequest goes to Pgpool, which forwards it to its node connections of that client
    (docs/INTEGRATING.md: cancels); a read the library put on the standby is cancelled there."""
    p = pgpools("polarsplit", polarsplit=True)
    with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        assert c.execute("SELECT inet_server_port()").fetchone()[0] == pair.standby.port
        timer = threading.Timer(0.5, c.cancel)
        timer.start()
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled):
            c.execute("SELECT pg_sleep(20), inet_server_port()")
        timer.join()
        assert time.time() - t0 < 15
        # The session goes on after the cancel.
        assert c.execute("SELECT 41 + 1").fetchone()[0] == 42


def test_s5_pgpool_reader_runs_with_the_writer_sessions_settings(pair, pgpools):
    """The one standby connection of a Pgpool child serves every read of its client: when the
    session's settings change, the host resets it (DISCARD ALL) and the library replays the
    session's state on it before the read (SPEC S-5, S-6)."""
    p = pgpools("polarsplit", polarsplit=True)
    standby = pair.standby.port
    q = "SELECT current_setting('application_name'), current_setting('search_path'), inet_server_port()"
    with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        c.execute("SET application_name = 'ps-one'")
        c.execute("SET search_path = pg_catalog, public")
        seen = []
        for _ in range(20):  # the standby is used once the session's state is known
            seen.append(c.execute(q).fetchone())
            if seen[-1][2] == standby:
                break
            time.sleep(0.05)
        assert seen[-1] == ("ps-one", "pg_catalog, public", standby), seen
        c.execute("SET application_name = 'ps-two'")
        c.execute("RESET search_path")
        for _ in range(20):
            seen.append(c.execute(q).fetchone())
            if seen[-1][2] == standby:
                break
            time.sleep(0.05)
        assert seen[-1] == ("ps-two", '"$user", public', standby), seen
        # Nothing answered with another state than the session's at that moment.
        assert all(s[:2] in {("ps-one", "pg_catalog, public"), ("ps-two", '"$user", public')} for s in seen), seen


RESPONSE_MS = 1500  # reader_response_timeout_ms for the frozen-standby test (above the wait timeouts)


def _standby_processes(pair) -> list[int]:
    """The standby's postmaster and all of its children."""
    pm = int((Path(pair.standby.datadir) / "postmaster.pid").read_text().split()[0])
    pids = [pm]
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pm:
                    pids.append(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return pids


def _signal_all(pids: list[int], sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@pytest.mark.timeout(90)
def test_r1b_pgpool_polarsplit_gives_up_on_a_frozen_standby_at_the_sessions_deadline(pair, tmp_path):
    """The whole standby is frozen (SIGSTOP) while a client's read runs there through the patched
    Pgpool: the loop takes the session's deadline into its select() timeout and reports it
    (on_timeout), the library closes the standby connection and re-runs the read on the primary
    after reader_response_timeout_ms (SPEC R-1b, F-2). Without the deadline the read would wait for
    as long as the freeze. The child ends after that session (its standby slot is dead)."""
    library = ("server_dialect=stock,startup_profile=off,wait_timeout_ms=200,split_wait_timeout_ms=300,"
               f"reader_response_timeout_ms={RESPONSE_MS}")
    p = Pgpool(pair, tmp_path, polarsplit=True, library=library, children=2).start()
    frozen: list[int] = []
    q = "SELECT v, inet_server_port() FROM kv WHERE k = %s"
    (k,) = _rows(pair, 7600, 1)
    try:
        with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            assert c.execute(q, (k,)).fetchone() == (0, pair.standby.port)
            frozen = _standby_processes(pair)
            _signal_all(frozen, signal.SIGSTOP)
            t0 = time.monotonic()
            with bounded(c, RESPONSE_MS / 1000 + 10, "a read on the frozen standby through Pgpool"):
                row = c.execute(q, (k,)).fetchone()
            held = time.monotonic() - t0
            _signal_all(frozen, signal.SIGCONT)
            frozen = []
            assert c.execute("SELECT 41 + 1").fetchone() == (42,)  # the session goes on
        report(f"\nstandby frozen (SIGSTOP) under a read through patched Pgpool: answered by "
               f"{'the primary' if row[1] == pair.primary.port else row[1]} after {held:.2f} s "
               f"(reader_response_timeout_ms {RESPONSE_MS})")
        assert row == (0, pair.primary.port)
        assert RESPONSE_MS / 1000 - 0.1 <= held <= RESPONSE_MS / 1000 + 2.0, held
    finally:
        _signal_all(frozen, signal.SIGCONT)
        assert p.stop() == 0


def _pgpool_stacks(p: Pgpool) -> str:
    """For a hang's report: the stacks of the Pgpool children inside the polarsplit loop, and the
    end of the log."""
    out = []
    for pid in p.pids():
        r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "bt"], capture_output=True, text=True,
                           timeout=30)
        if "pool_polarsplit" in r.stdout:
            out.append(f"pid {pid}:\n" + "\n".join(l for l in r.stdout.splitlines() if l.startswith("#")))
    return "\n".join(out) + "\nlog:\n" + p.log_text()[-4000:]


def test_f1_pgpool_polarsplit_standby_lost_mid_session_the_session_goes_on(tmp_path):
    """The standby stops while a client is connected: the host reports CONNECTION_LOST (or the
    library sees the server's FATAL), reads go on on the primary, the client notices nothing.
    Its own pair: the shared one must keep its standby."""
    from pgpair import PgPair

    own = PgPair(apply_delay_ms=0)
    own.start()
    p = None
    try:
        with psycopg.connect(own.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute("CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL); GRANT ALL ON kv TO PUBLIC;"
                      "INSERT INTO kv VALUES (1, 7)")
        own.wait_replayed()
        p = Pgpool(own, tmp_path, polarsplit=True, settings={"log_min_messages": "'debug2'"}).start()
        q = "SELECT v, inet_server_port() FROM kv WHERE k = 1"
        with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            assert c.execute(q).fetchone() == (7, own.standby.port)
            own.standby.stop("immediate")
            time.sleep(0.2)
            with bounded(c, 30, "reads after the standby stopped", diagnose=lambda: _pgpool_stacks(p)):
                after = [c.execute(q).fetchone() for _ in range(5)]
                assert after == [(7, own.primary.port)] * 5, after
                assert c.execute("UPDATE kv SET v = 8 WHERE k = 1 RETURNING v").fetchone() == (8,)
                assert c.execute(q).fetchone() == (8, own.primary.port)
        log = p.log_text()
        assert "polarsplit: connection to node 1 lost" in log or "unexpected bytes from node 1" in log, log[-3000:]
    finally:
        if p:
            assert p.stop() == 0
        own.stop()


# --- F-policy: the writer's function catalogue, loaded by the Pgpool loop (SPEC §7) -------------

CATALOG_REFRESH_MS = 300
CATALOG_N = 10
CATALOG_BOUND_S = 10  # every wait for a (re)load, far above the refresh interval
PGPOOL_FUNCTIONS = {"pgp_stable_read": "STABLE", "pgp_immutable_read": "IMMUTABLE", "pgp_volatile_read": "VOLATILE"}
PGPOOL_LATE = "pgp_late_read"
DECISION = re.compile(r"polarsplit: (\w+) (\w+) server \d+")


def _on_standby(p: Pgpool, pair, name: str, n: int = CATALOG_N, fresh: bool = False) -> int:
    """How many of `n` reads calling `name()` the standby served: in one session, or each in a new
    session (`fresh`: a call the primary ran keeps its session on the primary, S-6, so only a new
    session shows where the catalogue alone sends a read)."""
    if fresh:
        return sum(_on_standby(p, pair, name, 1) for _ in range(n))
    with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        return sum(c.execute(f"SELECT {name}(), inet_server_port()").fetchone()[1] == pair.standby.port
                   for _ in range(n))


def _wait_place(p: Pgpool, pair, name: str, standby: bool, what: str) -> float:
    """Polls a read of `name()`, each in a new session, until the standby serves it (or the
    primary, `standby=False`); the seconds it took, bounded."""
    t0 = time.monotonic()
    while _on_standby(p, pair, name, 1) != int(standby):
        assert time.monotonic() - t0 < CATALOG_BOUND_S, f"{what}: not there within {CATALOG_BOUND_S} s"
        time.sleep(0.02)
    return time.monotonic() - t0


def _reasons(p: Pgpool, after: int) -> dict[str, int]:
    """Decision reasons (DEBUG2 lines) logged past offset `after`."""
    out: dict[str, int] = {}
    for _outcome, reason in DECISION.findall(p.log_text()[after:]):
        out[reason] = out.get(reason, 0) + 1
    return out


@pytest.fixture
def pgpool_functions(pair):
    with user_functions(pair, PGPOOL_FUNCTIONS, [PGPOOL_LATE]) as admin:
        yield admin


@pytest.mark.timeout(150)
def test_f_policy_pgpool_loads_the_writers_function_catalogue_and_refreshes_it(pair, pgpool_functions, tmp_path):
    """The Pgpool loop reads the user functions of the session's database on the idle primary before
    the session's first statement and hands them to the library (polarsplit_engine_set_function_catalog):
    reads calling an immutable or stable user function go to the standby, a volatile one's to the
    primary (judged USER_FUNCTION, i.e. by the catalogue, not UNKNOWN_FUNCTION). A child reloads it at
    a session start once polarsplit_catalog_refresh_interval has passed: a function created later is
    offloaded, one dropped and recreated as volatile is not any more. The control is the same Pgpool
    with the interval 0 (one load per child): the function created later stays unknown, on the
    primary. One child each, so which child loaded what is known."""
    admin = pgpool_functions
    debug = {"log_min_messages": "'debug2'"}
    p = Pgpool(pair, tmp_path / "refresh", polarsplit=True, children=1,
               settings={**debug, "polarsplit_catalog_refresh_interval": str(CATALOG_REFRESH_MS)}).start()
    once = Pgpool(pair, tmp_path / "once", polarsplit=True, children=1,
                  settings={**debug, "polarsplit_catalog_refresh_interval": "0"}).start()
    try:
        offset = len(p.log_text())
        shares = {name: _on_standby(p, pair, name, fresh=name == "pgp_volatile_read") for name in PGPOOL_FUNCTIONS}
        reasons = _reasons(p, offset)

        create_function(admin, PGPOOL_LATE, "STABLE")
        pair.wait_replayed()  # the standby must have it to run it
        late_s = _wait_place(p, pair, PGPOOL_LATE, True, "a function created after the start")
        late_share = _on_standby(p, pair, PGPOOL_LATE)
        offset_once = len(once.log_text())
        late_once = _on_standby(once, pair, PGPOOL_LATE, fresh=True)
        reasons_once = _reasons(once, offset_once)

        with admin.transaction():  # as a migration does: no load can see it missing
            admin.execute(f"DROP FUNCTION {PGPOOL_LATE}()")
            create_function(admin, PGPOOL_LATE, "VOLATILE")
        pair.wait_replayed()
        dropped_s = _wait_place(p, pair, PGPOOL_LATE, False, "a function recreated as volatile")
        after_drop = _on_standby(p, pair, PGPOOL_LATE, fresh=True)
        log = p.log_text()
    finally:
        codes = (p.stop(), once.stop())
    report(f"\nF-policy through patched Pgpool (one child, polarsplit_catalog_refresh_interval "
           f"{CATALOG_REFRESH_MS} ms): reads on the standby out of {CATALOG_N}: "
           + ", ".join(f"{k} {v}" for k, v in shares.items())
           + f"; created later: on the standby {late_s:.2f} s after replay ({late_share}/{CATALOG_N}), with the "
           f"interval 0 {late_once}/{CATALOG_N}; recreated volatile: off the standby {dropped_s:.2f} s after "
           f"replay ({after_drop}/{CATALOG_N} after)")
    assert codes == (0, 0)
    # The library closes a standby connection after a user function ran on it (S-6); the loop resets
    # it (DISCARD ALL, attached FRESH) instead of losing the node and ending the child.
    assert "session ended with a backend connection in an unknown state" not in log, log[-3000:]
    assert re.search(r'polarsplit: function catalogue of "app": \d+ user functions \(server_version_num 1\d{5}\)',
                     log), log[-3000:]
    assert shares["pgp_stable_read"] == CATALOG_N and shares["pgp_immutable_read"] == CATALOG_N, shares
    assert shares["pgp_volatile_read"] == 0, shares
    # The volatile one was judged by the catalogue (known, volatile), not as an unknown function.
    assert reasons.get("USER_FUNCTION", 0) >= CATALOG_N and "UNKNOWN_FUNCTION" not in reasons, reasons
    assert late_share == CATALOG_N and after_drop == 0
    assert late_once == 0 and reasons_once.get("UNKNOWN_FUNCTION", 0) >= CATALOG_N, reasons_once


# --- causal tokens carry the writer's history (SPEC §11, C-1…C-3) -------------------------------

TOKEN = re.compile(r"^ps1:(\d+)\.(\d+):([0-9A-F]+)/([0-9A-F]+)$")
TOKEN_ROUNDS = 20


@pytest.mark.timeout(120)
def test_c3_pgpool_causal_token_names_the_writers_history_and_holds_at_another_proxy(pair, pgpools, tmp_path):
    """The Pgpool loop reports the writer's system identifier and timeline (read on the primary before
    a session's first statement), so its tokens are `ps1:<system identifier>.<timeline>:<lsn>` — the
    history every host serving this primary names — and hold at another proxy process: a write
    through Pgpool, its token presented at the example proxy (which reads the identity from its own
    monitor), and the other way round; none of those reads misses the write under the 200 ms apply
    delay. The control: the same reads at the other proxy without the token are stale."""
    from e2e_support import start_proxy, stop_proxy

    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        sysid = c.execute("SELECT system_identifier FROM pg_catalog.pg_control_system()").fetchone()[0]
        tli = int(c.execute("SELECT pg_walfile_name(pg_current_wal_insert_lsn())").fetchone()[0][:8], 16)
    p = pgpools("polarsplit", polarsplit=True)
    (k,) = _rows(pair, 7700, 1)
    proxy = start_proxy(pair, tmp_path / "proxy")
    try:
        deadline = time.monotonic() + 10
        while proxy.stats()["proxy"].get("writer_identities", 0) == 0:
            assert time.monotonic() < deadline, "the example proxy reported no writer identity"
            time.sleep(0.05)
        opts = {"autocommit": True, "cursor_factory": psycopg.ClientCursor}
        with psycopg.connect(p.dsn(), **opts) as via_pgpool, psycopg.connect(proxy.dsn(), **opts) as via_proxy:
            token = via_pgpool.execute("SHOW polarsplit.causal_token").fetchone()[0]
            m = TOKEN.match(token)
            assert m, token
            assert (int(m.group(1)), int(m.group(2))) == (sysid, tli), (token, sysid, tli)

            def rounds(writer, reader, with_token: bool) -> tuple[int, int]:
                stale = standby = 0
                for _ in range(TOKEN_ROUNDS):
                    wrote = writer.execute("UPDATE kv SET v = v + 1 WHERE k = %s RETURNING v", (k,)).fetchone()[0]
                    if with_token:
                        t = writer.execute("SHOW polarsplit.causal_token").fetchone()[0]
                        assert TOKEN.match(t).group(1, 2) == m.group(1, 2), t
                        reader.execute(f"SET polarsplit.causal_token = '{t}'")
                    v, port = reader.execute("SELECT v, inet_server_port() FROM kv WHERE k = %s", (k,)).fetchone()
                    stale += v < wrote
                    standby += port == pair.standby.port
                return stale, standby

            t0 = time.monotonic()
            to_proxy = rounds(via_pgpool, via_proxy, True)
            to_pgpool = rounds(via_proxy, via_pgpool, True)
            with psycopg.connect(proxy.dsn(), **opts) as fresh:  # a session that holds no position of its own
                control = rounds(via_pgpool, fresh, False)
            took = time.monotonic() - t0
    finally:
        stop_proxy(proxy)
    report(f"\ncausal tokens, Pgpool <-> example proxy ({TOKEN_ROUNDS} writes each way, apply delay "
           f"{pair.apply_delay_ms} ms): token {token.split(':')[0]}:{m.group(1)}.{m.group(2)}:… ; "
           f"Pgpool -> proxy stale {to_proxy[0]} (standby {to_proxy[1]}), proxy -> Pgpool stale {to_pgpool[0]} "
           f"(standby {to_pgpool[1]}), without the token stale {control[0]} (standby {control[1]}); {took:.2f} s")
    assert to_proxy[0] == 0 and to_pgpool[0] == 0
    assert control[0] > 0  # the reads at the other proxy do miss the write without the token


# --- reader faults Pgpool sees are the engine's (SPEC R-1a, R-1b) -------------------------------

@pytest.mark.timeout(120)
def test_r1b_pgpool_failed_replay_samples_hold_the_standby_out_until_a_sample_succeeds(tmp_path):
    """The loop's replay samples are this host's monitor: when they fail (here: EXECUTE on
    pg_last_wal_replay_lsn() revoked from the client's role, so the standby answers an error), each
    is reported as a failed monitor query, and after reader_failure_threshold (3) of them the engine
    holds the standby out of reader choice — a later session of the same child sends even a read
    that needs no position to the primary. Only a sample that succeeds after the failures lets it
    back in. Without the reports the failed samples were ignored and the standby kept serving.
    Its own pair: the shared one's functions stay as they are."""
    from pgpair import PgPair

    own = PgPair(apply_delay_ms=0)
    own.start()
    p = None
    lsn_fn = "pg_catalog.pg_last_wal_replay_lsn()"
    try:
        with psycopg.connect(own.primary.dsn(dbname="app"), autocommit=True) as admin:
            admin.execute("CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL); GRANT ALL ON kv TO PUBLIC;"
                          "INSERT INTO kv VALUES (1, 0)")
            own.wait_replayed()
            p = Pgpool(own, tmp_path, polarsplit=True, children=1).start()
            opts = {"autocommit": True, "cursor_factory": psycopg.ClientCursor}
            where = "SELECT inet_server_port()"

            def fresh_read() -> int:
                with psycopg.connect(p.dsn(), **opts) as c:
                    return c.execute(where).fetchone()[0]

            def write_then_reads(n: int) -> None:
                """A session that writes, then starts `n` statements more than the sample interval
                apart: a replay sample before each."""
                with psycopg.connect(p.dsn(), **opts) as c:
                    c.execute("UPDATE kv SET v = v + 1 WHERE k = 1")
                    for _ in range(n):
                        time.sleep(0.03)
                        c.execute("SELECT v FROM kv WHERE k = 1").fetchone()

            before = fresh_read()
            admin.execute(f"REVOKE EXECUTE ON FUNCTION {lsn_fn} FROM PUBLIC")
            own.wait_replayed()
            write_then_reads(4)
            held = fresh_read()
            log = p.log_text()
            admin.execute(f"GRANT EXECUTE ON FUNCTION {lsn_fn} TO PUBLIC")
            own.wait_replayed()
            write_then_reads(2)  # samples succeed again
            back = fresh_read()
        report(f"\nfailed replay samples through patched Pgpool: a read with no position before on "
               f"{'the standby' if before == own.standby.port else before}, after 4 failed samples on "
               f"{'the primary' if held == own.primary.port else held}, after a sample succeeded on "
               f"{'the standby' if back == own.standby.port else back}")
        assert before == own.standby.port
        assert "polarsplit: the replay position of node 1 could not be read" in log, log[-3000:]
        assert held == own.primary.port
        assert back == own.standby.port
    finally:
        if p:
            assert p.stop() == 0
        own.stop()


# --- the rest of the writer's catalogue: sequences and objects that hide code (SPEC S-6, S-7) ---
# The Pgpool loop reads, in the catalogue's one query, the sequences and the objects whose use runs
# code a statement's text does not show (views, row-level security, domains, user casts and
# operators, with their definitions), and reports user aggregates with their support functions'
# worst volatility: the four results of the example proxy's catalogue load. One child, so the
# later clients of a test get the connections (and the cached standby connection) of the client
# before them. The objects exist before that Pgpool starts: its first session loads them.

HIDDEN_SETUP = r"""
CREATE VIEW pgp_s6_view AS SELECT set_config('pgp_s6.tenant', 'x', false) AS t;
CREATE TABLE pgp_s6_plain (x int);
INSERT INTO pgp_s6_plain VALUES (1);
CREATE SEQUENCE pgp_s7_seq;
SELECT nextval('pgp_s7_seq');
CREATE FUNCTION pgp_s6_agg_step(s int, x int) RETURNS int VOLATILE LANGUAGE plpgsql AS
  $$ BEGIN PERFORM set_config('pgp_s6.agg', 'step', false); RETURN coalesce(s, 0) + x; END $$;
CREATE AGGREGATE pgp_s6_agg(int) (sfunc = pgp_s6_agg_step, stype = int);
GRANT SELECT ON pgp_s6_view, pgp_s6_plain, pgp_s7_seq TO PUBLIC;
GRANT EXECUTE ON FUNCTION pgp_s6_agg_step(int, int) TO PUBLIC;
"""

HIDDEN_CLEANUP = """
DROP VIEW IF EXISTS pgp_s6_view;
DROP TABLE IF EXISTS pgp_s6_plain;
DROP SEQUENCE IF EXISTS pgp_s7_seq;
DROP AGGREGATE IF EXISTS pgp_s6_agg(int);
DROP FUNCTION IF EXISTS pgp_s6_agg_step(int, int);
"""

HIDDEN_BOUND_S = 10  # every client's statements, bounded


@pytest.fixture(scope="module")
def pgpool_hidden(pair, tmp_path_factory):
    """The objects on the primary (replayed on the standby), then a one-child patched Pgpool."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute(HIDDEN_CLEANUP)
        c.execute(HIDDEN_SETUP)
    pair.wait_replayed()
    # One load per child: objects a later test creates do not reach this Pgpool's catalogue.
    p = Pgpool(pair, tmp_path_factory.mktemp("pgpool-hidden"), polarsplit=True, children=1,
               settings={"polarsplit_catalog_refresh_interval": "0"}).start()
    try:
        yield p
    finally:
        code = p.stop()
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute(HIDDEN_CLEANUP)
        log = p.log_text()
        assert "polarsplit: session ended with a backend connection in an unknown state" not in log, log[-4000:]
        assert code == 0, f"pgpool exited with {code}:\n{log[-4000:]}"


def _fresh_reads(p: Pgpool, sql: str, clients: int = 3, reads: int = 2) -> list[tuple]:
    """What `clients` fresh clients read with `sql`, `reads` times each (bounded)."""
    seen = []
    for i in range(clients):
        with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as b:
            with bounded(b, HIDDEN_BOUND_S, f"fresh client {i}"):
                seen += [tuple(b.execute(sql).fetchone()) for _ in range(reads)]
    return seen


@pytest.mark.timeout(90)
def test_s6_pgpool_a_view_over_set_config_runs_where_the_session_lives_and_reaches_no_other_client(
        pair, pgpool_hidden):
    """Client A reads `pgp_s6_view`, a view over `set_config('pgp_s6.tenant', 'x', false)`: the
    loop reported it with its definition, so the read takes the verdict of set_config — it runs on
    the primary, not on the child's pooled standby connection. A's later reads see 'x' as the
    primary alone would (also one the library must send to the writer); later fresh clients of the
    same child read the placeholder NULL, as on the primary. The control: a plain read of a fresh
    session is served by the standby. Without the object catalogue the view ran on the standby:
    A's writer-bound read saw no tenant, and the next clients met the placeholder on the pooled
    standby connection."""
    p = pgpool_hidden
    standby, primary = pair.standby.port, pair.primary.port
    opts = {"autocommit": True, "cursor_factory": psycopg.ClientCursor}
    control = _fresh_reads(p, "SELECT x, inet_server_port() FROM pgp_s6_plain", clients=1)
    setting = "current_setting('pgp_s6.tenant', true)"
    with psycopg.connect(p.dsn(), **opts) as a, psycopg.connect(pair.primary.dsn(dbname="app"), **opts) as twin:
        with bounded(a, HIDDEN_BOUND_S, "client A"):
            view = [a.execute("SELECT t, inet_server_port() FROM pgp_s6_view").fetchone(),
                    tuple(twin.execute("SELECT t FROM pgp_s6_view").fetchone())]
            later = {}
            for sql in (f"SELECT {setting}, x, inet_server_port() FROM pgp_s6_plain",
                        f"SELECT {setting}, txid_current() > 0, inet_server_port()"):
                later[sql] = ([a.execute(sql).fetchone() for _ in range(3)], twin.execute(sql).fetchone()[:2])
    after = _fresh_reads(p, f"SELECT {setting}, inet_server_port()")
    report(f"\nS-6 through patched Pgpool (one child): a view over set_config read on "
           f"{'the primary' if view[0][1] == primary else 'the standby'}; A's later reads "
           + "; ".join(f"{[tuple(r) for r in got]} (primary {tuple(want)})" for got, want in later.values())
           + f"; fresh clients after A: {after}")
    assert control == [(1, standby)] * 2, control
    assert view[0] == ("x", primary) and view[1] == ("x",), view
    for sql, (got, want) in later.items():
        assert want[0] == "x", (sql, want)
        assert all(tuple(r[:2]) == tuple(want) for r in got), (sql, got, want)
    assert all(s[0] is None for s in after), f"fresh clients saw pgp_s6.tenant: {after}"


@pytest.mark.timeout(60)
def test_s7_pgpool_a_sequence_read_answers_the_primarys_values(pair, pgpool_hidden):
    """`SELECT last_value, log_cnt, is_called FROM pgp_s7_seq` through the patched Pgpool answers
    what the primary answers: the loop reported the database's sequences, so the read stays on the
    primary. A standby holds the sequence as WAL-logged, ahead of the primary (last_value 33,
    log_cnt 0 after one nextval): without the sequence catalogue that is what the reads answered."""
    p = pgpool_hidden
    sql = "SELECT last_value, log_cnt, is_called FROM pgp_s7_seq"
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        want = tuple(twin.execute(sql).fetchone())
    with psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True) as on_standby:
        standby_says = tuple(on_standby.execute(sql).fetchone())
    got = _fresh_reads(p, sql)
    report(f"\nS-7 through patched Pgpool: a sequence read answered {sorted(set(got))}; the primary {want}, "
           f"the standby {standby_says}")
    assert standby_says != want  # the test can tell the servers apart
    assert got == [want] * len(got), got


@pytest.mark.timeout(60)
def test_s6_pgpool_an_aggregate_whose_transition_function_sets_state_runs_on_the_primary(pair, pgpool_hidden):
    """`pgp_s6_agg` is IMMUTABLE in pg_proc (the server makes every aggregate so); its volatile
    plpgsql transition function calls set_config. The loop reports the aggregate with its support
    functions' worst volatility, so the read runs on the primary and the session then has the
    setting, as on the primary; fresh clients do not. With pg_proc's volatility it ran on the
    standby."""
    p = pgpool_hidden
    opts = {"autocommit": True, "cursor_factory": psycopg.ClientCursor}
    with psycopg.connect(pair.primary.dsn(dbname="app"), **opts) as twin, psycopg.connect(p.dsn(), **opts) as a:
        assert twin.execute("SELECT provolatile FROM pg_proc WHERE proname = 'pgp_s6_agg'").fetchone()[0] == "i"
        with bounded(a, HIDDEN_BOUND_S, "client A"):
            got = a.execute("SELECT pgp_s6_agg(x), inet_server_port() FROM pgp_s6_plain").fetchone()
            twin.execute("SELECT pgp_s6_agg(x) FROM pgp_s6_plain")
            sql = "SELECT current_setting('pgp_s6.agg', true)"
            state = (a.execute(sql).fetchone(), twin.execute(sql).fetchone())
    after = _fresh_reads(p, "SELECT current_setting('pgp_s6.agg', true), inet_server_port()")
    report(f"\nS-6 through patched Pgpool: an aggregate with a volatile transition function ran on "
           f"{'the primary' if got[1] == pair.primary.port else 'the standby'}")
    assert tuple(got) == (1, pair.primary.port), got
    assert state == (("step",), ("step",)), state
    assert all(s[0] is None for s in after), f"fresh clients saw pgp_s6.agg: {after}"


CATALOGUE_LOADED = re.compile(r'polarsplit: function catalogue of "app": (\d+) user functions \(server_version_num '
                              r'1\d{5}\), (\d+) sequences, (\d+) objects that hide code')


@pytest.mark.timeout(90)
def test_s6_pgpool_a_view_with_a_definition_longer_than_a_row_buffer_is_judged_by_it(pair, pgpool_hidden, tmp_path):
    """`pgp_s6_long_view` (a definition of more than 6,000 bytes, over set_config) is loaded whole:
    its catalogue row is copied into a buffer bounded by the host-query message bound (1 MiB), not
    the 1,024 bytes a row had before, which made the whole load fail. A read of it runs on the
    primary and leaves nothing to later clients; the load is logged with its counts. Its own
    Pgpool (one child), started after the view exists."""
    long_view = ("CREATE VIEW pgp_s6_long_view AS SELECT set_config('pgp_s6.long', 'x', false) AS t, "
                 f"'{'p' * 6000}'::text AS pad; GRANT SELECT ON pgp_s6_long_view TO PUBLIC")
    p = None
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        admin.execute("DROP VIEW IF EXISTS pgp_s6_long_view")
        admin.execute(long_view)
        try:
            length = admin.execute("SELECT length(pg_get_viewdef('pgp_s6_long_view'::regclass))").fetchone()[0]
            pair.wait_replayed()
            p = Pgpool(pair, tmp_path, polarsplit=True, children=1).start()
            with psycopg.connect(p.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as a:
                with bounded(a, HIDDEN_BOUND_S, "client A"):
                    got = a.execute("SELECT t, inet_server_port() FROM pgp_s6_long_view").fetchone()
            after = _fresh_reads(p, "SELECT current_setting('pgp_s6.long', true), inet_server_port()")
            loaded = CATALOGUE_LOADED.findall(p.log_text())
        finally:
            code = p.stop() if p else 0
            admin.execute("DROP VIEW IF EXISTS pgp_s6_long_view")
    report(f"\nS-6 through patched Pgpool: a view with a {length}-byte definition read on "
           f"{'the primary' if got[1] == pair.primary.port else 'the standby'}; catalogue loads logged "
           f"(functions, sequences, objects): {loaded}")
    assert code == 0
    assert length > 6000
    assert tuple(got) == ("x", pair.primary.port), got
    assert all(s[0] is None for s in after), f"fresh clients saw pgp_s6.long: {after}"
    assert loaded and int(loaded[0][1]) >= 1 and int(loaded[0][2]) >= 2, loaded


@pytest.mark.timeout(120)
def test_s7_pgpool_a_failed_catalogue_load_drops_the_functions_and_keeps_sequences_and_objects(
        pair, pgpool_hidden, tmp_path):
    """The failure rules of the catalogue load (those of the example proxy): a load the host cannot
    take whole — here a view whose definition is longer than the 1 MiB a catalogue row may be; the
    loop reads past it, the child goes on — removes the database's functions (a STABLE user
    function's reads leave the standby) and keeps the sequences and objects of the last load (a
    sequence read still answers the primary's values, the view over set_config still runs on the
    primary). Once the view is gone the next load succeeds and the function is offloaded again.
    Its own one-child Pgpool, reloading every CATALOG_REFRESH_MS."""
    fn = "pgp_keep_read"
    huge = ("CREATE VIEW pgp_huge_view AS SELECT '" + "h" * (1100 * 1024) + "'::text AS pad")
    seq_sql = "SELECT last_value, log_cnt, is_called FROM pgp_s7_seq"
    p = None
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        admin.execute("DROP VIEW IF EXISTS pgp_huge_view")
        admin.execute(f"DROP FUNCTION IF EXISTS {fn}()")
        create_function(admin, fn, "STABLE")
        want_seq = tuple(admin.execute(seq_sql).fetchone())
        pair.wait_replayed()
        try:
            p = Pgpool(pair, tmp_path, polarsplit=True, children=1,
                       settings={"polarsplit_catalog_refresh_interval": str(CATALOG_REFRESH_MS)}).start()
            before = _on_standby(p, pair, fn, 1)
            admin.execute(huge)
            failed_s = _wait_place(p, pair, fn, False, "the functions removed after a failed load")
            seqs = _fresh_reads(p, seq_sql, clients=2)
            view = _fresh_reads(p, "SELECT t, inet_server_port() FROM pgp_s6_view", clients=2, reads=1)
            log_failed = p.log_text()
            admin.execute("DROP VIEW pgp_huge_view")
            back_s = _wait_place(p, pair, fn, True, "the functions back after a good load")
        finally:
            code = p.stop() if p else 0
            admin.execute("DROP VIEW IF EXISTS pgp_huge_view")
            admin.execute(f"DROP FUNCTION IF EXISTS {fn}()")
    report(f"\ncatalogue load failure through patched Pgpool (a row over 1 MiB): a STABLE function's read "
           f"left the standby {failed_s:.2f} s after, sequence reads {sorted(set(seqs))} (primary {want_seq}), "
           f"the set_config view on {sorted({port for _, port in view})} (primary {pair.primary.port}); "
           f"offloaded again {back_s:.2f} s after the view was dropped")
    failure = re.search(r'function catalogue of "app" not loaded: .*\(the previous one is dropped\)[^\n]*', log_failed)
    report(f"  logged: {failure.group(0) if failure else None}")
    assert code == 0
    assert before == 1
    assert failure, log_failed[-3000:]
    assert "bad message length" not in log_failed
    assert seqs == [want_seq] * len(seqs), seqs
    assert view == [("x", pair.primary.port)] * len(view), view


@pytest.mark.timeout(90)
def test_e1_pgpool_a_batch_opening_a_block_answers_as_the_primary_and_reads_on_the_standby(pair, pgpools):
    """BEGIN and reads in one batch (pgjdbc with autocommit off, libpq's pipeline mode): through the
    patched Pgpool-II the engine runs the BEGIN on the primary and the read on the standby, and
    every answer is the primary's (tests/e2e/test_e1_begin_in_the_batch.py has the cases)."""
    from test_e1_begin_in_the_batch import CASES, run, server_ports
    p = pgpools("polarsplit", polarsplit=True)
    direct_dsn = pair.primary.dsn(dbname="app", user="app_trust")
    different = {case: (d, t) for case, batches in CASES.items()
                 if (d := run(direct_dsn, batches)) != (t := run(p.dsn(), batches))}
    assert not different, different
    ports = server_ports(p.dsn(), 20)
    report(f"\nBEGIN and a read in one batch through Pgpool-II: {ports.count(pair.standby.port)} of 20 on the standby")
    assert ports.count(pair.standby.port) >= 19, ports


def _errors_after_a_protocol_error(port: int) -> tuple[list[str], bool]:
    """Starts a session, sends a message of an unknown type, and returns the SQLSTATEs of the
    ErrorResponses that follow and whether the server then closed the connection."""
    import socket
    import struct

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        body = struct.pack("!I", 196608) + b"user\0app_trust\0database\0app\0\0"
        s.sendall(struct.pack("!I", len(body) + 4) + body)
        buf, states = b"", []

        def messages():
            nonlocal buf
            while True:
                while len(buf) >= 5 and len(buf) >= 1 + struct.unpack("!I", buf[1:5])[0]:
                    n = struct.unpack("!I", buf[1:5])[0]
                    m, buf = (buf[:1], buf[5:1 + n]), buf[1 + n:]
                    yield m
                chunk = s.recv(65536)
                if not chunk:
                    return
                buf += chunk

        it = messages()
        for t, _ in it:
            if t == b"Z":
                break
        s.sendall(b"?" + struct.pack("!I", 8) + b"xxxx")
        for t, b in it:
            if t == b"E":
                states.append(next(f[1:].decode() for f in b.split(b"\0") if f[:1] == b"C"))
        return states, True
    except socket.timeout:
        return states, False
    finally:
        s.close()


@pytest.mark.timeout(60)
def test_pgpool_polarsplit_a_client_protocol_error_gets_one_error_as_from_the_primary(pair, tmp_path):
    """A client that sends a message of an unknown type gets one FATAL 08P01 and the connection
    closes, as from the primary; the child used to add a second FATAL (XX000 "session ended with a
    backend connection in an unknown state") on ending without caching its connections (an
    examiner's finding of 2026-12-05). The child still ends; the next client is served."""
    direct = _errors_after_a_protocol_error(pair.primary.port)
    p = Pgpool(pair, tmp_path, polarsplit=True, children=1).start()
    try:
        through = _errors_after_a_protocol_error(p.port)
        assert through == direct == (["08P01"], True)
        with psycopg.connect(p.dsn(), autocommit=True, connect_timeout=10) as c:
            assert c.execute("SELECT 41 + 1").fetchone() == (42,)
    finally:
        assert p.stop() == 0


def _terminate_behind_unfinished_work(port: int, app: str, how: str) -> None:
    """A session that opens a block, then leaves work unfinished — Parse/Bind/Execute without a
    Sync, or COPY data without CopyDone — and sends Terminate (psycopg closing inside a pipeline
    does the first)."""
    import socket
    import struct

    def msg(t: bytes, body: bytes = b"") -> bytes:
        return t + struct.pack("!I", len(body) + 4) + body

    def until_ready(s, want: bytes = b"Z") -> None:
        buf = b""
        while True:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
            while len(buf) >= 5 and len(buf) >= 1 + struct.unpack("!I", buf[1:5])[0]:
                n = struct.unpack("!I", buf[1:5])[0]
                t, buf = buf[:1], buf[1 + n:]
                if t == want:
                    return

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        body = struct.pack("!I", 196608) + b"user\0app_trust\0database\0app\0application_name\0" + app.encode() + b"\0\0"
        s.sendall(struct.pack("!I", len(body) + 4) + body)
        until_ready(s)
        s.sendall(msg(b"Q", b"BEGIN\0"))
        until_ready(s)
        if how == "copy":
            s.sendall(msg(b"Q", b"COPY kv (k, v) FROM STDIN\0"))
            until_ready(s, b"G")
            s.sendall(msg(b"d", b"-77\t1\n"))
        else:
            s.sendall(msg(b"P", b"\0UPDATE kv SET v = v WHERE k = -1\0\0\0") + msg(b"B", b"\0\0\0\0\0\0\0\0")
                      + msg(b"E", b"\0\0\0\0\0") + (msg(b"H") if how == "flush" else b""))
        s.sendall(msg(b"X"))
        time.sleep(0.1)
    finally:
        s.close()


def _gone_after(pair, app: str, seconds: float) -> float | None:
    """Seconds until the primary has no transaction of `app`'s backend open (the backend gone,
    or reset and idle in Pgpool's cache), or None if it still has one after `seconds`."""
    start = time.monotonic()
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        while time.monotonic() - start < seconds:
            if c.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                         "AND xact_start IS NOT NULL", (app,)).fetchone()[0] == 0:
                return time.monotonic() - start
            time.sleep(0.1)
    return None


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["batch", "flush", "copy"])
def test_pgpool_polarsplit_a_terminate_behind_unfinished_work_ends_the_session(pair, tmp_path, how):
    """A client sends Terminate behind work it left unfinished (extended messages without their
    Sync, with or without a Flush; COPY data without CopyDone). The primary alone reads the Terminate, rolls back and ends
    the backend. The patched Pgpool waited for a Sync or CopyDone that never comes: the child
    stayed stuck for good with the primary's transaction and its locks, and a few such clients
    used up every child (an examiner's finding of 2026-12-05). The child now ends once its nodes
    stay quiet for a second, and the next client is served."""
    app = f"pp_term_{how}"
    _terminate_behind_unfinished_work(pair.primary.port, app + "_direct", how)
    assert _gone_after(pair, app + "_direct", 10) is not None
    p = Pgpool(pair, tmp_path, polarsplit=True, children=1).start()
    try:
        _terminate_behind_unfinished_work(p.port, app, how)
        took = _gone_after(pair, app, 15)
        assert took is not None, "the session's primary backend is still there after 15 s"
        with psycopg.connect(p.dsn(), autocommit=True, connect_timeout=10) as c:
            assert c.execute("SELECT 41 + 1").fetchone() == (42,)
    finally:
        assert p.stop() == 0


# --- DDL one child's session ran reaches every child's engine (S-6, S-7, F-policy) --------------

XCHILD_CHILDREN = 4
XCHILD_BOUND_S = 20


@pytest.mark.timeout(120)
def test_s6_pgpool_ddl_through_one_child_reaches_the_sessions_of_every_other_child(pair, tmp_path):
    """Pgpool runs one engine per child. A view over pg_is_in_recovery() and a sequence created
    (and advanced) through one child's session are read from sessions on the other children —
    new sessions on children that loaded the catalogue a moment before, and sessions opened before
    the DDL, still open — with polarsplit_catalog_refresh_interval at its 10 s default: every read
    answers what the primary answers (the view `false`; the sequence the primary's last_value, not
    the standby's WAL-logged one 32 ahead). The child that ran it shares the DDL through Pgpool's
    shared memory, each child reports it to its engine before routing its session's next statement
    (reads of the database wait on the primary) and reloads the catalogue on the idle primary;
    afterwards the open sessions' plain reads are offloaded again (the reload happened in the
    session). Before: the view answered `true` from the standby in the other children's sessions
    (4/4 open, 6/8 new ones in a red-team probe), the sequence 33 instead of 3."""
    standby = pair.standby.port
    p = Pgpool(pair, tmp_path / "xchild", polarsplit=True, children=XCHILD_CHILDREN).start()
    names = ["pgp_xchild_v1", "pgp_xchild_s1", "pgp_xchild_v2", "pgp_xchild_s2"]
    seq_sql = "SELECT last_value, log_cnt, is_called FROM {}"
    client = {"autocommit": True, "cursor_factory": psycopg.ClientCursor}

    def drop_all():
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            for n in names:
                c.execute(f"DROP {'VIEW' if '_v' in n else 'SEQUENCE'} IF EXISTS {n}")

    def create(c, view: str, seq: str) -> tuple:
        c.execute(f"CREATE VIEW {view} AS SELECT pg_catalog.pg_is_in_recovery() AS rec")
        c.execute(f"GRANT SELECT ON {view} TO PUBLIC")
        c.execute(f"CREATE SEQUENCE {seq}")
        c.execute(f"GRANT ALL ON SEQUENCE {seq} TO PUBLIC")
        for _ in range(3):
            c.execute(f"SELECT nextval('{seq}')")
        pair.wait_replayed()  # the standby has both: what it would answer is the question
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin, \
                psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True) as on_standby:
            want = tuple(twin.execute(seq_sql.format(seq)).fetchone())
            assert tuple(on_standby.execute(seq_sql.format(seq)).fetchone()) != want  # tells them apart
        return want

    drop_all()
    try:
        # New sessions: every child loads the catalogue now (four sessions at once: four children),
        # then one session creates the objects; each new session after it must see them.
        warm = [psycopg.connect(p.dsn(), **client) for _ in range(XCHILD_CHILDREN)]
        for w in warm:
            w.execute("SELECT 1")
        creator = warm.pop()
        for w in warm:
            w.close()
        want1 = create(creator, names[0], names[1])
        creator.close()
        fresh = []
        for i in range(2 * XCHILD_CHILDREN):
            with psycopg.connect(p.dsn(), **client) as n, bounded(n, XCHILD_BOUND_S, f"new session {i}"):
                fresh.append((n.execute(f"SELECT rec FROM {names[0]}").fetchone()[0],
                              tuple(n.execute(seq_sql.format(names[1])).fetchone())))
        # Open sessions: three children hold a session that read before the DDL (one over the
        # extended protocol, psycopg's server-side binding); the fourth runs it.
        opened = [psycopg.connect(p.dsn(), autocommit=True)] + \
                 [psycopg.connect(p.dsn(), **client) for _ in range(XCHILD_CHILDREN - 2)]
        before = [o.execute("SELECT inet_server_port()").fetchone()[0] for o in opened]
        with psycopg.connect(p.dsn(), **client) as creator:
            want2 = create(creator, names[2], names[3])
        open_reads = []
        for i, o in enumerate(opened):
            with bounded(o, XCHILD_BOUND_S, f"open session {i}"):
                open_reads.append((o.execute(f"SELECT rec FROM {names[2]}").fetchone()[0],
                                   tuple(o.execute(seq_sql.format(names[3])).fetchone())))
        # The reload happened inside those sessions: their plain reads go to the standby again.
        offloaded = []
        for i, o in enumerate(opened):
            with bounded(o, XCHILD_BOUND_S, f"open session {i} after the reload"):
                t0 = time.monotonic()
                while o.execute("SELECT inet_server_port()").fetchone()[0] != standby:
                    assert time.monotonic() - t0 < 5, f"open session {i}: its reads stay on the primary"
                    time.sleep(0.05)
                offloaded.append(round(time.monotonic() - t0, 2))
            o.close()
        log = p.log_text()
    finally:
        code = p.stop()
        drop_all()
    report(f"\nDDL across Pgpool children ({XCHILD_CHILDREN} children, refresh interval 10 s): new sessions read "
           f"the view/sequence as {sorted(set(fresh))} (primary: (False, {want1})); open sessions "
           f"{open_reads} (primary: (False, {want2})); their plain reads back on the standby after {offloaded} s "
           f"(before the DDL on ports {before})")
    assert code == 0, log[-3000:]
    assert "session ended with a backend connection in an unknown state" not in log, log[-3000:]
    assert fresh == [(False, want1)] * len(fresh), fresh
    assert open_reads == [(False, want2)] * len(open_reads), open_reads
