"""The demo's workload and report (run by scripts/demo.sh with the venv's Python).

Starts a primary + hot standby whose standby applies WAL late (recovery_min_apply_delay), then runs
the same mixed workload through polarsplit-proxy four times: with every decision from
libpolarsplit (--mode library), the same through the extended protocol with prepared statements
(psycopg's server-side parameters, prepare_threshold=0: Parse/Bind/Execute of named statements,
as JDBC, asyncpg and ORMs send them), with the classic pinning (the library without its write-position
learning: a session stays on the primary after its first write), and with the naive splitter
(--mode naive: every SELECT outside a transaction to the standby, no waits). Each worker thread plays a web application's requests, one connection per
request (simple protocol, except in the extended run):

  read          three autocommit point reads of random accounts
  write+read    UPDATE ... RETURNING balance, then read the same account back at once and again
                after the apply delay: the session must see its own write (balances only grow, so a
                smaller value is a stale read)
  transaction   BEGIN; two reads; an UPDATE; read it back (checked too); COMMIT

Every statement reports the server that ran it (inet_server_port()), so "where did reads go" is
observed by the workload itself; the proxy's counters (the library's decisions by outcome and
reason) are printed next to it. Everything started here is stopped in `finally`.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PgPair, Proxy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROXY = ROOT / "c-examples" / "build" / "polarsplit-proxy"
APPLY_DELAY_MS = int(os.environ.get("DEMO_APPLY_DELAY_MS", "200"))
SECONDS = float(os.environ.get("DEMO_SECONDS", "20"))
THREADS = int(os.environ.get("DEMO_THREADS", "6"))
ACCOUNTS = 1000
# How long after its write a write+read request reads again (longer than the apply delay).
LATER_S = (APPLY_DELAY_MS + 100) / 1000


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = {"read": 0, "write+read": 0, "transaction": 0}
        self.reads = 0
        self.reads_on_standby = 0
        self.checks = 0
        self.post_write_on_standby = 0
        self.stale = 0
        self.errors = 0
        self.read_ms: list[float] = []
        self.write_ms: list[float] = []
        self.first_error = ""


def worker(proxy: Proxy, standby_port: int, stop_at: float, seed: int, t: Tally,
           extended: bool = False) -> None:
    rnd = random.Random(seed)
    # Simple protocol: parameters interpolated by the client. Extended: server-side parameters,
    # every statement prepared under a name at its first use.
    conn_args = ({"cursor_factory": psycopg.Cursor, "prepare_threshold": 0} if extended
                 else {"cursor_factory": psycopg.ClientCursor})
    reads = standby = checks = stale = post_standby = 0
    read_ms: list[float] = []
    write_ms: list[float] = []
    kinds = {"read": 0, "write+read": 0, "transaction": 0}
    errors = 0
    first_error = ""

    def checked_read(c, account, written):
        # A read of the account the session just wrote: it must see the write.
        nonlocal checks, stale, post_standby
        before = standby
        checks += 1
        stale += read(c, account) < written
        post_standby += standby > before

    def read(c, account):
        nonlocal reads, standby
        t0 = time.perf_counter()
        balance, port = c.execute(
            "SELECT balance, inet_server_port() FROM accounts WHERE id = %s", (account,)
        ).fetchone()
        read_ms.append((time.perf_counter() - t0) * 1000)
        reads += 1
        standby += port == standby_port
        return balance

    def write(c, account):
        t0 = time.perf_counter()
        v = c.execute(
            "UPDATE accounts SET balance = balance + 1 WHERE id = %s RETURNING balance", (account,)
        ).fetchone()[0]
        write_ms.append((time.perf_counter() - t0) * 1000)
        return v

    while time.time() < stop_at:
        r = rnd.random()
        kind = "read" if r < 0.6 else ("write+read" if r < 0.85 else "transaction")
        try:
            with psycopg.connect(proxy.dsn(), autocommit=True, **conn_args) as c:
                if kind == "read":
                    for _ in range(3):
                        read(c, rnd.randint(1, ACCOUNTS))
                elif kind == "write+read":
                    a = rnd.randint(1, ACCOUNTS)
                    v = write(c, a)
                    checked_read(c, a, v)
                    # Later in the same session: the standby has replayed the write by now, and
                    # the library knows it (probe + monitor); pinning keeps the primary.
                    time.sleep(LATER_S)
                    checked_read(c, a, v)
                else:
                    c.execute("BEGIN")
                    read(c, rnd.randint(1, ACCOUNTS))
                    read(c, rnd.randint(1, ACCOUNTS))
                    a = rnd.randint(1, ACCOUNTS)
                    v = write(c, a)
                    checked_read(c, a, v)
                    c.execute("COMMIT")
            kinds[kind] += 1
        except psycopg.Error as e:
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {e}"
    with t.lock:
        for k, n in kinds.items():
            t.requests[k] += n
        t.reads += reads
        t.reads_on_standby += standby
        t.checks += checks
        t.post_write_on_standby += post_standby
        t.stale += stale
        t.errors += errors
        t.read_ms += read_ms
        t.write_ms += write_ms
        t.first_error = t.first_error or first_error


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


# The modes compared: the library, the classic "stick to the primary after a write" pinning (the
# same library with its write-position learning turned off: no probe, no writer samples), and the
# naive splitter.
MODES = {
    "library": ("library", {}, [], False),
    "extended": ("library", {}, [], True),
    "pinning": ("library", {"lsn_probe": "off"}, ["--no-writer-samples"], False),
    "naive": ("naive", {}, [], False),
}


def run_mode(pair: PgPair, name: str, workdir: Path) -> tuple[Tally, dict, float]:
    mode, settings, extra, extended = MODES[name]
    proxy = Proxy(PROXY, pair, mode=mode, workdir=workdir, settings=settings, extra=extra)
    proxy.args.remove("--verbose")
    proxy.start()
    try:
        print(f"  {name:8s}: {' '.join(proxy.args[1:])}", flush=True)
        t = Tally()
        start = time.time()
        stop_at = start + SECONDS
        threads = [
            threading.Thread(target=worker, args=(proxy, pair.standby.port, stop_at, 1000 + i, t, extended))
            for i in range(THREADS)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.time() - start
        stats = proxy.stats()
    finally:
        code = proxy.stop()
    if code != 0:
        raise RuntimeError(f"proxy ({name}) exited with {code}: {proxy.log_text()[-2000:]}")
    return t, stats, elapsed


def report(results: dict) -> None:
    lib_t, lib_stats, lib_s = results["library"]
    pin_t, pin_stats, pin_s = results["pinning"]
    nv_t, nv_stats, nv_s = results["naive"]
    ext_t, ext_stats, ext_s = results["extended"]
    cols = [(lib_t, lib_s), (ext_t, ext_s), (pin_t, pin_s), (nv_t, nv_s)]
    w = 30

    def row(name, *vals):
        print(f"  {name:<{w}}" + "".join(f" {v:>22}" for v in vals))

    print()
    print("=" * 124)
    print(f"  polarsplit demo: stock PostgreSQL 15 primary + hot standby, standby applies WAL "
          f"{APPLY_DELAY_MS} ms late")
    print(f"  {THREADS} client threads, {SECONDS:.0f} s per mode, one connection per request; simple protocol except")
    print("  the second column: the same workload with prepared statements (extended protocol)")
    print("=" * 124)
    row("", "library (polarsplit)", "library, prepared", "primary after writes", "naive (SELECT->standby)")
    row("requests (read/w+r/txn)",
        *("/".join(str(t.requests[k]) for k in ("read", "write+read", "transaction")) for t, _ in cols))
    row("requests per second", *(f"{sum(t.requests.values()) / s:.0f}" for t, s in cols))
    row("reads", *(t.reads for t, _ in cols))

    def share(t):
        return f"{t.reads_on_standby} ({100 * t.reads_on_standby / max(1, t.reads):.1f}%)"

    def post_write(t):
        return f"{t.post_write_on_standby}/{t.checks} ({100 * t.post_write_on_standby / max(1, t.checks):.1f}%)"

    row("reads served by the standby", *(share(t) for t, _ in cols))
    row("post-write reads on standby", *(post_write(t) for t, _ in cols))
    row("read-your-writes checks", *(t.checks for t, _ in cols))
    row("STALE READS OBSERVED", *(t.stale for t, _ in cols))
    row("errors", *(t.errors for t, _ in cols))
    for name, attr in (("read latency ms p50/p95/p99", "read_ms"), ("write latency ms p50/p95/p99", "write_ms")):
        row(name, *("/".join(f"{pct(getattr(t, attr), p):.2f}" for p in (50, 95, 99)) for t, _ in cols))
    print()
    print("  The library's decisions (polarsplit-proxy counters, library mode):")
    outcomes = lib_stats["outcome"]
    total = sum(outcomes.values())
    for name, n in sorted(outcomes.items(), key=lambda kv: -kv[1]):
        if n:
            dest = "standby" if name.startswith("REPLICA") else ("primary" if name == "FORCE_PRIMARY" else "-")
            print(f"    {name:<22} {n:>8}  ({100 * n / max(1, total):.1f}%, {dest})")
    print("    by reason:")
    for name, n in sorted(lib_stats["reason"].items(), key=lambda kv: -kv[1]):
        print(f"      {name:<28} {n:>8}")
    print("    by reason, the prepared run:")
    for name, n in sorted(ext_stats["reason"].items(), key=lambda kv: -kv[1]):
        print(f"      {name:<28} {n:>8}")
    reads_decided = sum(lib_stats["reason"].get(r, 0) for r in ("READ_NO_TARGET", "READ_WAIT", "READ_CAUGHT_UP",
                                                                 "SPLIT_PRE_WRITE", "SPLIT_READ", "READER_PINNED"))
    print(f"    pool hits/misses: {lib_stats['counter'].get('pool_hits', 0)}/{lib_stats['counter'].get('pool_misses', 0)}, "
          f"monitor samples: {lib_stats['counter'].get('monitor_samples', 0)}, reads sent to the standby: {reads_decided}")
    print()
    print("  Stock PostgreSQL reports no WAL position and cannot wait for one: after a write the library")
    print("  probes the primary's position, and the session reads from the primary (MISSING_LSN_PRIMARY,")
    print("  READ_NO_BOUNDED_WAIT) until a standby is known to have replayed it (READ_CAUGHT_UP). Nothing")
    print("  here pretends stock PostgreSQL supports the PolarDB wait.")
    for name, (t, _) in zip(("library", "extended", "pinning", "naive"), cols):
        if t.first_error:
            print(f"  first error ({name}): {t.first_error}")
    print("=" * 124)


def main() -> int:
    # A SIGTERM (or a timeout wrapper) must still run the `finally` that stops the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not PROXY.exists():
        print(f"{PROXY} is missing: run scripts/demo.sh", file=sys.stderr)
        return 2
    t0 = time.time()
    pair = PgPair(apply_delay_ms=APPLY_DELAY_MS)
    results = {}
    try:
        print(f"starting a primary and a hot standby on loopback (data in {pair.base}) ...", flush=True)
        pair.start()
        print(f"  primary 127.0.0.1:{pair.primary.port}, standby 127.0.0.1:{pair.standby.port}, "
              f"recovery_min_apply_delay = {APPLY_DELAY_MS} ms ({time.time() - t0:.1f} s)", flush=True)
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
            c.execute(f"INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, {ACCOUNTS}) g")
            c.execute("GRANT ALL ON accounts TO PUBLIC")
        pair.wait_replayed()
        workdir = pair.base / "proxy"
        print("running the workload through polarsplit-proxy:", flush=True)
        for mode in MODES:
            results[mode] = run_mode(pair, mode, workdir)
            t = results[mode][0]
            print(f"    {mode}: {sum(t.requests.values())} requests, {t.stale} stale reads", flush=True)
    finally:
        pair.stop()
    report(results)
    print(f"  demo finished in {time.time() - t0:.0f} s; servers and proxies stopped.")
    lib, ext, pin = results["library"][0], results["extended"][0], results["pinning"][0]
    ok = lib.stale == 0 and lib.errors == 0 and ext.stale == 0 and ext.errors == 0 and pin.stale == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
