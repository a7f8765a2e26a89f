"""End-to-end benchmark (issues 9 and 20): pgbench through the example proxy with the library routing
(and the same with no reader configured, so every statement is decided but goes to the primary),
through the same proxy relaying everything to the primary without calling the library
(--mode primary-only), and directly to the server — TPS and latency percentiles side by side from
one run, configurations alternating so drift hits them alike. For `pgbench -S` also the same
relaying proxy with the standby as its only server (standby-only) and the standby directly
(direct-standby): "library" reads from the standby, so library / standby-only is its cost with
the server held the same, and standby-only / primary-only what the second server itself costs.

Workloads: `pgbench -S -M simple` (read-only point selects), and a read-your-writes script: each
transaction an UPDATE of a row only its client touches, adding 1 and returning the new value, then
a SELECT of the same row in the same session; a SELECT that sees less than the UPDATE returned is
a stale read and is recorded (an INSERT into `ryw_stale` on the primary), so the run reports how
many there were (0 is the requirement), and the library's decision counters tell how many of the
post-write reads went to the standby. The proxy runs the stock dialect (the pipelined LSN probe of
SPEC W-7).

Knobs: BENCH_RUNS (5 alternating runs per configuration), BENCH_SECONDS (10), BENCH_CLIENTS (4,
at most 8), BENCH_SCALE (10), BENCH_PROFILE (seconds: first sample the library, library-no-reader
and primary-only proxies under `pgbench -S` with `perf record -e cpu-clock`, and print where their CPU
went — the top symbols, every object's share and the library's own top symbols; 0/unset: no
profile; with BENCH_RUNS=0 only the profile runs), BENCH_WORKLOADS (`select,ryw`: which workloads
run), BENCH_NO_PROBE (1: a fifth configuration, `library-no-probe`, the library with `lsn_probe=off`
— write positions learned only from the monitor's writer samples taken after the commit — so the
probe's own cost shows), BENCH_PROBE_ON (1: a configuration `library-probe-on`, the library with
`lsn_probe=on`, a probe after every committed write — the default before `adaptive`)."""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PgPair, Proxy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROXY = ROOT / "c-examples" / "build" / "polarsplit-proxy"
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
SCALE = int(os.environ.get("BENCH_SCALE", "10"))

PROFILE = int(os.environ.get("BENCH_PROFILE", "0"))
WORKLOADS = os.environ.get("BENCH_WORKLOADS", "select,ryw").split(",")
NO_PROBE = os.environ.get("BENCH_NO_PROBE", "0") == "1"
PROBE_ON = os.environ.get("BENCH_PROBE_ON", "0") == "1"
# The library configurations that differ only by their `lsn_probe`.
PROBE_CONFIGS = {"library-no-probe": "off", "library-probe-on": "on"}

# Rows of client k are the aids ≡ k (mod 8): no other client writes them, so a SELECT that sees
# less than its UPDATE returned read a state from before that UPDATE.
RYW_SCRIPT = """\
\\set aid random(1, 100000 * :scale / 8 - 1) * 8 + :client_id
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid RETURNING abalance AS want \\gset
SELECT abalance AS seen FROM pgbench_accounts WHERE aid = :aid \\gset
\\if :seen < :want
INSERT INTO ryw_stale (client, aid, want, seen) VALUES (:client_id, :aid, :want, :seen);
\\endif
"""


def cpu_user_system(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds a process has used so far (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def machine_cpu() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of all cores so far, from /proc/stat: busy is the servers',
    pgbench's and the proxy's work together (user, nice, system, irq, softirq); stolen is time the
    hypervisor gave to someone else, a sign of a noisy run."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (f[0] + f[1] + f[2] + f[5] + f[6]) / tick, f[7] / tick


def pgbench(port: int, args: list[str], logdir: Path) -> tuple[float, list[float], int]:
    """Runs pgbench; returns (tps, per-transaction latencies in ms, transactions)."""
    for f in logdir.glob("pgbench_log.*"):
        f.unlink()
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n", "-M", "simple",
           "-c", str(CLIENTS), "-j", str(min(CLIENTS, 2)), "-T", str(SECONDS), "-l", *args, "app"]
    out = subprocess.run(cmd, cwd=logdir, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out.stderr}\n{out.stdout}")
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out.stdout)
    if not m:
        raise RuntimeError(out.stdout)
    done = re.search(r"number of transactions actually processed: ([0-9]+)", out.stdout)
    failed = re.search(r"number of failed transactions: ([0-9]+)", out.stdout)
    if failed and int(failed.group(1)) != 0:
        raise RuntimeError(f"pgbench reported failures: {out.stdout}")
    lat = []
    for f in logdir.glob("pgbench_log.*"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                lat.append(int(parts[2]) / 1000.0)
    return float(m.group(1)), lat, int(done.group(1)) if done else len(lat)


def profile(port: int, pid: int, seconds: int, logdir: Path, label: str) -> None:
    """Samples process `pid` (software clock, call graphs off) while pgbench -S runs against
    `port`; prints the top symbols by self time."""
    data = logdir / f"perf-{label}.data"
    rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-p", str(pid),
                            "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        tps = pgbench_for(port, ["-S"], logdir, seconds)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=30)
    rep = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                          "--sort", "dso,symbol", "--percent-limit", "0.7"],
                         capture_output=True, text=True)
    print(f"\n### perf, {label} proxy under pgbench -S ({seconds} s, {tps:.0f} tps)\n")
    print("| share | object | symbol |\n|---:|---|---|")
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+%)\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
        if m:
            print(f"| {m.group(1)} | {m.group(2)} | `{m.group(3).strip()[:90]}` |")
    # Every object's total (the library's samples are spread over many small symbols, each
    # below the limit above), then the library's own top symbols.
    by_dso = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                             "--sort", "dso"], capture_output=True, text=True)
    totals = []
    for line in by_dso.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s*$", line)
        if m:
            totals.append(f"{m.group(2)} {float(m.group(1)):.1f}%")
    print("\nby object (all samples):", ", ".join(totals))
    lib = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                          "--dsos", "libpolarsplit.so", "--percentage", "absolute", "--sort", "symbol",
                          "--percent-limit", "0.1"],
                         capture_output=True, text=True)
    rows = [re.match(r"\s*([0-9.]+%)\s+\[[.k]\]\s+(.*)", line) for line in lib.stdout.splitlines()]
    rows = [m for m in rows if m][:15]
    if rows:
        print("\nlibpolarsplit's top symbols (share of all the proxy's samples):")
        for m in rows:
            print(f"  {m.group(1):>7s}  {m.group(2).strip()[:110]}")


def pgbench_for(port: int, args: list[str], logdir: Path, seconds: int) -> float:
    global SECONDS
    saved, SECONDS = SECONDS, seconds
    try:
        return pgbench(port, args, logdir)[0]
    finally:
        SECONDS = saved


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float("nan")


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if CLIENTS > 8:
        raise SystemExit("BENCH_CLIENTS must be at most 8 (the read-your-writes rows are split by client mod 8)")
    pair = PgPair(apply_delay_ms=0)
    work = Path(tempfile.mkdtemp(prefix="polarsplit-bench-"))
    script = work / "ryw.sql"
    script.write_text(RYW_SCRIPT)
    proxies: dict[str, Proxy] = {}
    results: dict[tuple[str, str], list[tuple[float, list[float], int]]] = {}
    # Proxy CPU (user + system) per transaction, µs, per run: steadier than TPS on a shared
    # machine, because it counts the proxy's own work, not how the scheduler shared the cores.
    cpu: dict[tuple[str, str], list[float]] = {}
    # The whole machine's busy CPU per transaction, µs: where the proxy is not the only one
    # whose work a configuration changes (a second server, the monitor's queries).
    machine: dict[tuple[str, str], list[float]] = {}
    # Of the proxy's CPU, the user part: the library's code and the proxy's own, without the
    # kernel's relaying.
    user: dict[tuple[str, str], list[float]] = {}
    try:
        pair.start()
        subprocess.run(["pgbench", "-i", "-q", "-s", str(SCALE), "-h", "127.0.0.1", "-p", str(pair.primary.port),
                        "-U", "postgres", "app"], check=True, capture_output=True)
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres", "-d", "app",
                        "-qc", "CREATE TABLE ryw_stale (client int, aid int, want int, seen int)"],
                       check=True, capture_output=True)
        pair.wait_replayed()
        configs = [("library", "library"), ("library-no-reader", "library"), ("primary-only", "primary-only"),
                   ("standby-only", "primary-only")]
        if NO_PROBE:
            configs.insert(2, ("library-no-probe", "library"))
        if PROBE_ON:
            configs.insert(2, ("library-probe-on", "library"))
        for name, mode in configs:
            p = Proxy(PROXY, pair, mode=mode, workdir=work,
                      settings={"lsn_probe": PROBE_CONFIGS[name]} if name in PROBE_CONFIGS else None)
            p.args.remove("--verbose")
            if name == "library-no-reader":
                # The library decides every statement but has no reader to send it to: the gap
                # to primary-only is the library's own cost, the rest of "library"'s gap is the
                # cost of reaching a second server (reader connections, the standby's own CPU).
                i = p.args.index("--reader")
                del p.args[i:i + 2]
            if name == "standby-only":
                # The same relaying proxy with the standby as its only server: what "library"
                # would cost if the library were free, with the server "library" reads from.
                p.args[p.args.index("--primary") + 1] = f"127.0.0.1:{pair.standby.port}"
            proxies[name] = p.start()
        targets = {name: proxies[name].port for name in proxies}
        targets["direct"] = pair.primary.port
        targets["direct-standby"] = pair.standby.port
        if PROFILE:
            for name in ("library", "library-no-reader", "primary-only"):
                profile(targets[name], proxies[name].proc.pid, PROFILE, work, name)
            if RUNS == 0:
                return 0
        workloads = {wl: args for key, wl, args in (
            ("select", "pgbench -S", ["-S"]),
            ("ryw", "read-your-writes", ["-f", str(script), "-D", f"scale={SCALE}"]),
        ) if key in WORKLOADS}
        t0, stolen0 = time.time(), machine_cpu()[1]
        ryw_before: dict[str, dict] = {}
        ryw_after: dict[str, dict] = {}
        routed = [n for n in ("library", *PROBE_CONFIGS) if n in proxies]
        for wl, args in workloads.items():
            if wl == "read-your-writes":
                ryw_before = {n: proxies[n].stats() for n in routed}
            for run in range(RUNS):
                # Alternate the order each run so slow drift does not favour one configuration.
                # The standby takes no writes: read-your-writes has no standby targets.
                names = [n for n in targets if wl == "pgbench -S" or "standby" not in n]
                order = names if run % 2 == 0 else list(reversed(names))
                for name in order:
                    pid = proxies[name].proc.pid if name in proxies else None
                    u0, s0 = cpu_user_system(pid) if pid else (0.0, 0.0)
                    m0 = machine_cpu()[0]
                    r = pgbench(targets[name], args, work)
                    machine.setdefault((wl, name), []).append((machine_cpu()[0] - m0) * 1e6 / max(r[2], 1))
                    results.setdefault((wl, name), []).append(r)
                    line = f"  {wl:17s} run {run + 1}/{RUNS} {name:17s} {r[0]:9.1f} tps"
                    if pid:
                        u1, s1 = cpu_user_system(pid)
                        us = (u1 + s1 - u0 - s0) * 1e6 / max(r[2], 1)
                        cpu.setdefault((wl, name), []).append(us)
                        user.setdefault((wl, name), []).append((u1 - u0) * 1e6 / max(r[2], 1))
                        line += f"  proxy {us:5.1f} µs CPU/tx"
                    print(line, flush=True)
        ryw_after = {n: proxies[n].stats() for n in routed}
        stolen = (machine_cpu()[1] - stolen0) / ((time.time() - t0) * os.cpu_count())
        lib_stats = proxies["library"].stats()
        stale = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres",
                                "-d", "app", "-Atqc", "SELECT count(*) FROM ryw_stale"],
                               check=True, capture_output=True, text=True).stdout.strip()
    finally:
        for p in proxies.values():
            p.stop()
        pair.stop()
    print()
    print(f"## pgbench through polarsplit-proxy ({CLIENTS} clients, {SECONDS} s per run, {RUNS} alternating runs, scale {SCALE})")
    print(f"\nCPU stolen by the hypervisor during the runs: {100 * stolen:.1f}% of the machine")
    print()
    print("| workload | target | median TPS | TPS min–max | latency p50 / p95 / p99 ms | proxy CPU µs/tx (median) "
          "| of which user | machine CPU µs/tx (median) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (wl, name), rs in results.items():
        tps = [r[0] for r in rs]
        lat = [x for r in rs for x in r[1]]
        c = f"{statistics.median(cpu[(wl, name)]):.1f}" if (wl, name) in cpu else "—"
        u = f"{statistics.median(user[(wl, name)]):.2f}" if (wl, name) in user else "—"
        print(f"| {wl} | {name} | {statistics.median(tps):.0f} | {min(tps):.0f}–{max(tps):.0f} | "
              f"{pct(lat, 50):.2f} / {pct(lat, 95):.2f} / {pct(lat, 99):.2f} | {c} | {u} | "
              f"{statistics.median(machine[(wl, name)]):.1f} |")
    print()
    for wl in workloads:
        base_runs = [r[0] for r in results[(wl, "primary-only")]]
        base = statistics.median(base_runs)
        for name in [n for n in proxies if n != "primary-only" and (wl, n) in results]:
            runs = [r[0] for r in results[(wl, name)]]
            ratio = statistics.median(runs) / base
            # Each run's configurations ran back to back: the per-run ratio cancels slow drift.
            paired = statistics.median(a / b for a, b in zip(runs, base_runs))
            cpu_ratio = statistics.median(cpu[(wl, name)]) / statistics.median(cpu[(wl, "primary-only")])
            cpu_delta = statistics.median(cpu[(wl, name)]) - statistics.median(cpu[(wl, "primary-only")])
            spread = f"{min(a / b for a, b in zip(runs, base_runs)):.3f}–{max(a / b for a, b in zip(runs, base_runs)):.3f}"
            print(f"{wl}: {name} / primary-only proxy: TPS {ratio:.3f} ({100 * (ratio - 1):+.1f}%), "
                  f"median of per-run TPS ratios {paired:.3f} ({100 * (paired - 1):+.1f}%, per-run {spread}), "
                  f"proxy CPU per transaction ×{cpu_ratio:.2f} ({cpu_delta:+.1f} µs)")
        # The same server on both sides: what the library and its reader handling cost with
        # the standby's own speed taken out, and how the standby itself compares with the primary.
        for name, base_name in (("library", "standby-only"), ("direct-standby", "direct")):
            if (wl, name) not in results or (wl, base_name) not in results:
                continue
            runs, base_runs = [r[0] for r in results[(wl, name)]], [r[0] for r in results[(wl, base_name)]]
            per_run = [a / b for a, b in zip(runs, base_runs)]
            line = (f"{wl}: {name} / {base_name}: TPS {statistics.median(runs) / statistics.median(base_runs):.3f}, "
                    f"median of per-run TPS ratios {statistics.median(per_run):.3f} "
                    f"(per-run {min(per_run):.3f}–{max(per_run):.3f})")
            if (wl, name) in cpu and (wl, base_name) in cpu:
                line += f", proxy CPU per transaction {statistics.median(cpu[(wl, name)]) - statistics.median(cpu[(wl, base_name)]):+.1f} µs"
            print(line)
    print()
    for n in ryw_before if "read-your-writes" in workloads else []:
        before, after = ryw_before[n], ryw_after[n]
        d = {k: after["outcome"].get(k, 0) - before["outcome"].get(k, 0) for k in after["outcome"]}
        reads = sum(r[2] for r in results[("read-your-writes", n)])
        replica = d.get("REPLICA_WITH_WAIT", 0) + d.get("REPLICA_TXN_SPLIT", 0)
        reasons = {k: after["reason"].get(k, 0) - before["reason"].get(k, 0) for k in after["reason"]}
        probes = after["counter"].get("probes_sent", 0) - before["counter"].get("probes_sent", 0)
        print(f"read-your-writes through {n}: {reads} post-write reads, {replica} on the standby "
              f"({100 * replica / max(reads, 1):.1f}%), {probes} LSN probes sent "
              f"({probes / max(reads, 1):.3f} per write), stale reads recorded (all configurations): {stale}")
        print("  its decisions:", {k: v for k, v in d.items() if v})
        print("  its reasons:", {k: v for k, v in reasons.items() if v})
    print("library decisions:", {k: v for k, v in lib_stats["outcome"].items() if v})
    print("library reasons:", {k: v for k, v in lib_stats["reason"].items() if v})
    return 0


if __name__ == "__main__":
    sys.exit(main())
