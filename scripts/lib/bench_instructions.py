"""The example proxy's instructions per `pgbench -S` transaction (issue 20), counted by callgrind:
a figure that does not depend on how busy the machine is, unlike the CPU time `bench_e2e.py`
reports. Each configuration (library, library-no-reader, primary-only, as in `bench_e2e.py`) runs
twice under `valgrind --tool=callgrind`, with TX_SHORT and TX_LONG transactions of one client;
instructions per transaction are the difference of the two totals over the difference of the
transaction counts, so the proxy's start, the connections' startup and the exit cancel out. The
monitor's samples are time-driven, not per transaction: the proxy samples once a second here
(`--monitor-interval-ms 1000`), and what the samples add per transaction is printed beside.

Knobs: BENCH_TX (2000: TX_LONG − TX_SHORT), BENCH_FUNCTIONS (1: also print the library's functions
with the most inclusive instructions per transaction, from the longer run of `library`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PgPair, Proxy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROXY = ROOT / "c-examples" / "build" / "polarsplit-proxy"
TX = int(os.environ.get("BENCH_TX", "2000"))
TX_SHORT = 200
FUNCTIONS = os.environ.get("BENCH_FUNCTIONS", "1") == "1"


def run(pair: PgPair, work: Path, name: str, mode: str, transactions: int) -> tuple[int, Path]:
    """Total instructions of one proxy process that relayed `transactions` of one pgbench client."""
    out = work / f"callgrind.{name}.{transactions}"
    p = Proxy(PROXY, pair, mode=mode, workdir=work)
    p.args.remove("--verbose")
    i = p.args.index("--monitor-interval-ms")
    p.args[i + 1] = "1000"
    if name == "library-no-reader":
        i = p.args.index("--reader")
        del p.args[i:i + 2]
    p.args[:0] = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    p.start_timeout = 60
    p.start()
    try:
        subprocess.run(["pgbench", "-n", "-S", "-M", "simple", "-c", "1", "-t", str(transactions),
                        "-h", "127.0.0.1", "-p", str(p.port), "-U", "postgres", "app"],
                       check=True, capture_output=True)
    finally:
        rc = p.stop()
    if rc != 0:
        raise SystemExit(f"{name}: the proxy exited with {rc}: {p.log_text()[-2000:]}")
    text = out.read_text(errors="replace")
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        raise SystemExit(f"{name}: no total in {out}")
    return int(m.group(1)), out


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
        per_tx: dict[str, float] = {}
        files = {}
        for name, mode in (("primary-only", "primary-only"), ("library-no-reader", "library"),
                           ("library", "library")):
            short, fs = run(pair, work, name, mode, TX_SHORT)
            long, fl = run(pair, work, name, mode, TX_SHORT + TX)
            per_tx[name] = (long - short) / TX
            files[name] = (fs, fl)
            print(f"  {name:18s} {short:>14,} / {long:>14,} instructions: {per_tx[name]:9,.0f} per transaction",
                  flush=True)
        base = per_tx["primary-only"]
        print("\n| configuration | proxy instructions per `pgbench -S` transaction | − primary-only |\n|---|---:|---:|")
        for name, v in per_tx.items():
            print(f"| {name} | {v:,.0f} | {v - base:+,.0f} |")
        if FUNCTIONS:
            top_functions(*files["library"], TX)
    finally:
        pair.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
