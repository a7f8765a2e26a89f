"""Real drivers' own test suites, run against the primary alone and through the example proxy.

A driver's suite exercises its whole protocol surface (COPY, named statements, pipelining, cancel,
notifications, type codecs) the way the driver really sends it. A test that passes against the
primary alone and fails through the proxy is a defect of ours (SPEC E-1: the client sees what one
server would send), unless it is listed in ALLOWED with the reason. The suites found the defects of
2026-12-04 (tests/e2e/test_red2_findings.py): SQL `EXECUTE` of a statement prepared on a reader
only, a large message pipelined behind a write, and extended-protocol COPY with a Sync before the
data.

Usage: driver_suites.py WORKDIR PROXY_BINARY [ASAN_PROXY_BINARY] [-- suite ...]
(suites: psycopg2 asyncpg pg8000 node-postgres). With ASAN_PROXY_BINARY each suite also runs through
the proxy built with AddressSanitizer/UBSan, held to the same rule, and any sanitizer report in its
log fails the run. WORKDIR holds the venv the Python suites run in and the drivers' source
distributions (PyPI), and WORKDIR/node the npm tree of node-postgres's suites (node_suites()).

psycopg 3 is not here: its PyPI sdists ship no tests, and the Debian source package (psycopg3
3.1.7-4) is listed by apt but its files are not served to this project's machines (`apt-get source`
fails with 404), nor is node-postgres's (whose packages/pg/test is therefore out of reach too).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PgPair, Proxy  # noqa: E402

# Pinned: a suite is a test of ours only as long as it is the same suite.
SUITES = {
    "psycopg2": {"sdist": "psycopg2==2.9.10", "wheel": "psycopg2-binary==2.9.10",
                 "tests": "tests", "db": "psycopg2_test"},
    "asyncpg": {"sdist": "asyncpg==0.30.0", "wheel": "asyncpg==0.30.0", "tests": "tests", "db": "postgres"},
    "pg8000": {"sdist": "pg8000==1.31.2", "wheel": "pg8000==1.31.2", "tests": "test", "db": "postgres"},
}
EXTRA_PACKAGES = ["pytest==9.*", "pytest-timeout==2.*", "distro", "pytz"]

# node-postgres: pg 8.8.0's own tests are not published on npm (its package ships lib/ only) and
# Debian's source package is not served here, but the tests of pg-pool 3.5.2 and pg-cursor 2.7.4 are
# in their npm packages: the same node-postgres commit as pg 8.8.0 (gitHead c99fb2c1), run with mocha
# against pg 8.8.0 itself (pooling, cursors = portals read with Execute row limits, transactions,
# errors and their recovery, idle and lifetime timeouts). Versions are pinned by the committed
# scripts/lib/node-suites/package-lock.json; `npm ci` installs them into WORKDIR/node. Each test file
# runs in its own mocha (ids `pkg/test/file.js::suite::test`, and a rerun is per file), with one id
# more per file, `pkg/test/file.js::(process)`: the file's node process ended by itself in time and
# wrote its report (mocha runs without --exit, as the packages' own mocha.opts say, so a connection
# the proxy leaves open shows here). pg-pool's test/setup.js is loaded first, as in its own run.
NODE_SUITES = {"node-postgres": {"packages": ["pg-pool", "pg-cursor"], "db": "postgres"}}
NODE_LOCK_DIR = Path(__file__).resolve().parent / "node-suites"
NODE_HELPERS = {"setup.js", "idle-timeout-exit.js", "timeout.js"}  # not test files (a hook, a child, empty)
NODE_FILE_TIMEOUT_S = 120

# Tests that differ through the proxy for a reason that is not a defect, with that reason.
ALLOWED = {
    # The client stops sending rows once it sees the server's error; with a proxy in the path
    # (its 1 MiB of buffering, the engine's 64 KiB batch hold) it has sent all 4 MiB by then. The
    # outcome (the error, no row written) is the primary's.
    "tests.test_execute.TestExecuteMany::test_executemany_server_failure_during_writes":
        "timing of the client's own flow control (error seen after all rows were written)",
}

SUITE_TIMEOUT_S = 600
APPLY_DELAY_MS = 200


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def prepare_node(work: Path) -> None:
    """node-postgres's suites: `npm ci` from the committed lockfile into WORKDIR/node when stale."""
    node = work / "node"
    node.mkdir(parents=True, exist_ok=True)
    stamp = node / "node_modules" / ".package-lock.json"
    for name in ("package.json", "package-lock.json"):
        src, dst = NODE_LOCK_DIR / name, node / name
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
            stamp.unlink(missing_ok=True)
    if not stamp.exists():
        sh(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=node)


def prepare(work: Path, suites: list[str]) -> Path:
    venv = work / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        sh([sys.executable, "-m", "venv", str(venv)])
    if any(s in NODE_SUITES for s in suites):
        prepare_node(work)
    suites = [s for s in suites if s in SUITES]
    wheels = [SUITES[s]["wheel"] for s in suites]
    sh([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wheels, *EXTRA_PACKAGES])
    for s in suites:
        dest = work / s
        if (dest / "tests").exists():
            continue
        dl = work / "sdist"
        dl.mkdir(parents=True, exist_ok=True)
        sh([str(py), "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
            "--no-binary", ":all:", "-d", str(dl), SUITES[s]["sdist"]])
        name, version = SUITES[s]["sdist"].split("==")
        archive = next(dl.glob(f"{name}-{version}.tar.gz"))
        with tarfile.open(archive) as t:
            t.extractall(dl, filter="data")
        src = dl / f"{name}-{version}" / SUITES[s]["tests"]
        shutil.copytree(src, dest / "tests")
        if s == "pg8000":
            # Authentication variants need server set-ups of their own; benchmarks need a plugin.
            for auth in (dest / "tests").glob("*/auth"):
                shutil.rmtree(auth)
            for bench in (dest / "tests").glob("*/test_benchmarks.py"):
                bench.unlink()
    return py


def summarize(suite: str, label: str, outcomes: dict, t0: float, rc: int | str, tail: str) -> dict:
    passed = sum(v == "passed" for v in outcomes.values())
    failed = sum(v == "failed" for v in outcomes.values())
    print(f"{suite} {label}: {passed} passed, {failed} failed, "
          f"{len(outcomes) - passed - failed} skipped in {time.monotonic() - t0:.0f} s (rc {rc})")
    if not outcomes:
        print(tail[-4000:])
        raise SystemExit(f"{suite} {label}: no results")
    return outcomes


def junit_outcomes(xml: Path, prefix: str = "") -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        tid = f"{prefix}{case.get('classname')}::{case.get('name')}"
        kinds = [c.tag for c in case]
        outcomes[tid] = ("failed" if "failure" in kinds or "error" in kinds
                         else "skipped" if "skipped" in kinds else "passed")
    return outcomes


def node_test_files(work: Path, suite: str) -> list[str]:
    mods = work / "node" / "node_modules"
    return [f"{pkg}/test/{f.name}" for pkg in NODE_SUITES[suite]["packages"]
            for f in sorted((mods / pkg / "test").glob("*.js")) if f.name not in NODE_HELPERS]


def run_node_suite(work: Path, suite: str, port: int, label: str, only: list[str] | None = None) -> dict:
    """Runs node-postgres's suites against `port`, one mocha per test file (`only`: those files)."""
    node = work / "node"
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(port), PGUSER="postgres",
               PGDATABASE=NODE_SUITES[suite]["db"])
    env.pop("PGPASSWORD", None)
    outcomes: dict[str, str] = {}
    t0, worst, tail = time.monotonic(), 0, ""
    for f in only or node_test_files(work, suite):
        xml = work / f"{suite}-{label}-{f.replace('/', '_')}.xml"
        xml.unlink(missing_ok=True)
        pkg = f.split("/")[0]
        setup = node / "node_modules" / pkg / "test" / "setup.js"
        cmd = [str(node / "node_modules" / ".bin" / "mocha"), "--timeout", "10000", "--reporter", "xunit",
               "--reporter-options", f"output={xml}"]
        if setup.exists():
            cmd += ["--file", str(setup)]
        cmd.append(str(node / "node_modules" / f))
        try:
            r = subprocess.run(cmd, cwd=node, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=NODE_FILE_TIMEOUT_S)
            ended, rc, out = True, r.returncode, r.stdout
        except subprocess.TimeoutExpired as e:
            ended, rc = False, "timeout"
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        tail = out
        if rc != 0:
            worst = rc
        got: dict[str, str] = {}
        try:
            if xml.exists():
                got = junit_outcomes(xml, f"{f}::")
        except ET.ParseError:
            ended = False  # a report cut short: the process died or was killed mid-run
        outcomes.update(got)
        outcomes[f"{f}::(process)"] = "passed" if ended and got else "failed"
        if not (ended and got):
            print(f"  {suite} {label}: {f}: rc {rc}, {len(got)} results; output ends:\n{out[-1500:]}")
    return summarize(suite, label, outcomes, t0, worst, tail)


def run_suite(py: Path, work: Path, suite: str, port: int, label: str, only: list[str] | None = None) -> dict:
    """Runs the suite against `port`; returns {test id: outcome}."""
    if suite in NODE_SUITES:
        return run_node_suite(work, suite, port, label, only)
    xml = work / f"{suite}-{label}.xml"
    env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(port), PGUSER="postgres",
               PGDATABASE=SUITES[suite]["db"], PSYCOPG2_TESTDB=SUITES[suite]["db"],
               PSYCOPG2_TESTDB_HOST="127.0.0.1", PSYCOPG2_TESTDB_PORT=str(port), PSYCOPG2_TESTDB_USER="postgres")
    if suite == "psycopg2":
        env.pop("PGHOST")  # psycopg2's suite reads its own variables
    targets = only if only else ["tests"]
    t0 = time.monotonic()
    r = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=60",
                        f"--junitxml={xml}", *targets], cwd=work / suite, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=SUITE_TIMEOUT_S)
    outcomes = junit_outcomes(xml) if xml.exists() else {}
    return summarize(suite, label, outcomes, t0, r.returncode, r.stdout)


def node_id(root: Path, tid: str) -> str:
    """pytest node id of a junit test id `pkg.mod.Class::name` / `pkg.mod::name` under `root`."""
    cls, name = tid.split("::")
    parts = cls.split(".")
    # The module is the longest prefix that is a file.
    for i in range(len(parts), 0, -1):
        mod = "/".join(parts[:i]) + ".py"
        if (root / mod).is_file():
            return "::".join([mod, *parts[i:], name])
    return tid


def compare(py: Path, work: Path, s: str, direct: dict, through: dict, proxy: Proxy, label: str) -> list[str]:
    """The tests that pass direct and fail through `proxy` and are not allowed, after one rerun."""
    worse = sorted(t for t, o in through.items() if o == "failed" and direct.get(t) == "passed")
    for t in worse:
        if t in ALLOWED:
            print(f"  allowed: {t}: {ALLOWED[t]}")
    todo = [t for t in worse if t not in ALLOWED]
    if not todo:
        return []
    # Once more, through the proxy alone: a failure that does not come back is reported as
    # flaky (and fails nothing); one that does is a defect.
    if s in NODE_SUITES:  # node-postgres: the failing tests' files
        targets = sorted({t.split("::")[0] for t in todo})
    else:
        targets = [node_id(work / s, t) for t in todo]
    again = run_suite(py, work, s, proxy.port, f"{label}-again", targets)
    out = []
    for t in todo:
        if again.get(t) == "passed":
            print(f"  FLAKY through the {label} (passed on a second run): {t}")
        else:
            out.append(f"{s} ({label}): {t}")
    return out


def main() -> int:
    args = sys.argv[1:]
    suites = [*SUITES, *NODE_SUITES]
    if "--" in args:
        suites = args[args.index("--") + 1:] or suites
        args = args[:args.index("--")]
    work, binary = Path(args[0]).resolve(), Path(args[1]).resolve()
    asan = Path(args[2]).resolve() if len(args) > 2 else None
    work.mkdir(parents=True, exist_ok=True)
    py = prepare(work, suites)
    # The standby applies WAL late, as in the e2e tests: a suite's read right after its write is
    # stale on the standby, so a read routed there without waiting fails the suite's own checks.
    pair = PgPair(apply_delay_ms=APPLY_DELAY_MS).start()
    proxies: dict[str, Proxy] = {}
    defects: list[str] = []
    try:
        pair.primary.psql("CREATE DATABASE psycopg2_test")
        pair.primary.psql("CREATE EXTENSION hstore", dbname="psycopg2_test")
        pair.wait_replayed()
        proxies["proxy"] = Proxy(binary, pair).start()
        if asan:
            a = Proxy(asan, pair, env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=66"})
            a.start_timeout = 60
            proxies["asan-proxy"] = a.start()
        for s in suites:
            direct = run_suite(py, work, s, pair.primary.port, "direct")
            for label, proxy in proxies.items():
                through = run_suite(py, work, s, proxy.port, label)
                defects += compare(py, work, s, direct, through, proxy, label)
        markers = ("protocol violation", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
        for label, proxy in proxies.items():
            rc = proxy.stop()  # sanitizers report leaks at exit (exit code 66)
            bad = [ln for ln in proxy.log_text().splitlines() if any(m in ln for m in markers)]
            for v in bad[:10]:
                print(f"  {label}: {v}")
            if bad or rc == 66:
                defects.append(f"{label}: {len(bad)} protocol violations or sanitizer reports (exit {rc})")
    finally:
        for proxy in proxies.values():
            proxy.stop()
        pair.stop()
    if defects:
        print("failing through the proxy only (a defect of ours):")
        for d in defects:
            print(f"  {d}")
        return 1
    print("driver suites: nothing fails through the proxy that passes against the primary alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
