"""The example proxy's instructions per `pgbench -S` transaction (issue 20), counted by callgrind:
a figure that does not depend on how busy the machine is, unlike the CPU time `bench_e2e.py`
reports. Each configuration (library, library-no-reader, primary-only, as in `bench_e2e.py`) runs
twice under `valgrind --tool=callgrind`, with TX_SHORT and TX_LONG transactions of one client;
instructions per transaction are the difference of the two totals over the difference of the
transaction counts, so the proxy's start, the connections' startup and the exit cancel out. The
monitor's samples are time-driven, not per transaction: the proxy samples once a second here
(`--monitor-interval-ms 1000`), and what the samples add per transaction is printed beside.

The read-your-writes workload of `bench_e2e.py` (an UPDATE, then a SELECT of the same row, a stale
read recorded) runs the same way through primary-only and the library with each `lsn_probe`
(`adaptive`, the default; `on`; `off`), with the probes each sent.

Knobs: BENCH_TX (2000: TX_LONG − TX_SHORT), BENCH_FUNCTIONS (1: also print the library's functions
with the most inclusive instructions per `pgbench -S` transaction, from the longer run of
`library`), BENCH_WORKLOADS (`select,ryw`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PgPair, Proxy  # noqa: E402
from bench_e2e import RYW_SCRIPT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROXY = ROOT / "c-examples" / "build" / "polarsplit-proxy"
TX = int(os.environ.get("BENCH_TX", "2000"))
TX_SHORT = 200
FUNCTIONS = os.environ.get("BENCH_FUNCTIONS", "1") == "1"
WORKLOADS = os.environ.get("BENCH_WORKLOADS", "select,ryw").split(",")


def run(pair: PgPair, work: Path, name: str, mode: str, transactions: int,
        workload: list[str] = ["-S"], probe: str | None = None) -> tuple[int, Path, int]:
    """Total instructions of one proxy process that relayed `transactions` of one pgbench client,
    and the LSN probes the library sent."""
    out = work / f"callgrind.{name}.{transactions}"
    p = Proxy(PROXY, pair, mode=mode, workdir=work, settings={"lsn_probe": probe} if probe else None)
    p.args.remove("--verbose")
    i = p.args.index("--monitor-interval-ms")
    p.args[i + 1] = "1000"
    if name.endswith("library-no-reader"):
        i = p.args.index("--reader")
        del p.args[i:i + 2]
    p.args[:0] = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    p.start_timeout = 60
    p.start()
    try:
        subprocess.run(["pgbench", "-n", *workload, "-M", "simple", "-c", "1", "-t", str(transactions),
                        "-h", "127.0.0.1", "-p", str(p.port), "-U", "postgres", "app"],
                       check=True, capture_output=True)
        probes = p.stats(timeout=60)["counter"].get("probes_sent", 0) if mode == "library" else 0
    finally:
        rc = p.stop()
    if rc != 0:
        raise SystemExit(f"{name}: the proxy exited with {rc}: {p.log_text()[-2000:]}")
    text = out.read_text(errors="replace")
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        raise SystemExit(f"{name}: no total in {out}")
    return int(m.group(1)), out, probes


def top_functions(short: Path, long: Path, per: int) -> None:
    """The library's functions by inclusive instructions per transaction (long − short run)."""
    def inclusive(path: Path) -> dict[str, int]:
        rep = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=99.9", str(path)],
                             capture_output=True, text=True).stdout
        got: dict[str, int] = {}
        for line in rep.splitlines():
            m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\S+?:(\S.*?)(?: \[(.*)\])?$", line)
            if m and m.group(3) and "libpolarsplit" in m.group(3):
                fn = re.sub(r"<impl [^>]*>", "", m.group(2))
                got[fn] = max(got.get(fn, 0), int(m.group(1).replace(",", "")))
        return got

    a, b = inclusive(short), inclusive(long)
    rows = sorted(((b[f] - a.get(f, 0)) / per, f) for f in b)
    print("\n| instructions/tx (inclusive) | library function |\n|---:|---|")
    for v, f in reversed(rows[-25:]):
        print(f"| {v:,.0f} | `{f[:110]}` |")


def main() -> int:
    pair = PgPair(apply_delay_ms=0)
    work = Path(tempfile.mkdtemp(prefix="polarsplit-instr-"))
    try:
        pair.start()
        subprocess.run(["pgbench", "-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", str(pair.primary.port),
                        "-U", "postgres", "app"], check=True, capture_output=True)
        pair.wait_replayed()
        script = work / "ryw.sql"
        script.write_text(RYW_SCRIPT)
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres", "-d", "app",
                        "-qc", "CREATE TABLE ryw_stale (client int, aid int, want int, seen int)"],
                       check=True, capture_output=True)
        pair.wait_replayed()
        workloads = {
            "select": ("pgbench -S", ["-S"], (("primary-only", "primary-only", None),
                                              ("library-no-reader", "library", None),
                                              ("library", "library", None))),
            "ryw": ("read-your-writes", ["-f", str(script), "-D", "scale=1"],
                    (("primary-only", "primary-only", None), ("library", "library", None),
                     ("library-probe-on", "library", "on"), ("library-no-probe", "library", "off"))),
        }
        for key in WORKLOADS:
            label, args, configs = workloads[key]
            per_tx: dict[str, float] = {}
            probes: dict[str, int] = {}
            files = {}
            for name, mode, probe in configs:
                short, fs, _ = run(pair, work, f"{key}.{name}", mode, TX_SHORT, args, probe)
                long, fl, probes[name] = run(pair, work, f"{key}.{name}", mode, TX_SHORT + TX, args, probe)
                per_tx[name] = (long - short) / TX
                files[name] = (fs, fl)
                print(f"  {label:17s} {name:18s} {short:>14,} / {long:>14,} instructions: "
                      f"{per_tx[name]:9,.0f} per transaction", flush=True)
            base = per_tx["primary-only"]
            print(f"\n| configuration | proxy instructions per `{label}` transaction | − primary-only | "
                  "LSN probes per transaction |\n|---|---:|---:|---:|")
            for name, v in per_tx.items():
                p = f"{probes[name] / (TX_SHORT + TX):.3f}" if name != "primary-only" else ""
                print(f"| {name} | {v:,.0f} | {v - base:+,.0f} | {p} |")
            if FUNCTIONS and key == "select":
                top_functions(*files["library"], TX)
        stale = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres",
                                "-d", "app", "-Atqc", "SELECT count(*) FROM ryw_stale"],
                               check=True, capture_output=True, text=True).stdout.strip()
        print(f"\nstale reads recorded: {stale}")
    finally:
        pair.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
