"""PostgreSQL's own regression suite (pg_regress, the parallel schedule), against the primary alone
and through the example proxy.

psql running the regression scripts is a client of every kind at once: session settings and their
RESET/DISCARD, roles switched with SET ROLE / SET SESSION AUTHORIZATION and `\\c`, temporary
objects, cursors, prepared statements by SQL, LISTEN/NOTIFY, advisory locks, COPY both ways,
errors inside transaction blocks, savepoints, and hundreds of reads right behind the writes they
must see. Through the proxy every script must print what it prints against the primary alone
(SPEC E-1: the client sees what one server would send; S-1a: a read sees its session's writes).

The rule, per test: through the proxy its output differs from the expected one AND from what the
same test printed against the primary in the same run → a candidate. Candidates are run again (the
whole schedule, since a test depends on the ones before it); one that comes back is a defect, one
that does not is printed as flaky. A protocol violation or panic in the proxy's log is a defect.

Then libpq's own pipeline-mode test program (src/test/modules/libpq_pipeline), every test through
the proxy in a database of its own: it must succeed and, where PostgreSQL keeps the expected libpq
trace of a test, produce exactly that trace — every message the client sees, in order (pipelines,
a lone Sync-less batch, aborted pipelines, single-row mode, prepared statements, transactions).

One documented difference is taken out of the scripts before either run, the same way for both: SPEC
W-7's hidden probe and capture statements are listed in `pg_prepared_statements` (guc.sql,
prepare.sql and sysviews.sql read that view), so `FROM pg_prepared_statements` reads the view without
rows named `polarsplit_…` (in the scripts and in the expected output that echoes them).

Usage: pg_regress_suite.py REGRESS_DIR PROXY_BINARY LIBPQ_PIPELINE_BINARY
REGRESS_DIR is src/test/regress of a PostgreSQL 15 source tree (scripts/test-pg-regress.sh gets
it from Debian's postgresql-15 source package and builds libpq_pipeline from the same tree).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgpair import PG_BIN, PgPair, Proxy  # noqa: E402

PG_REGRESS = Path("/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress")
PKGLIBDIR = Path("/usr/lib/postgresql/15/lib")
SERVER_INCLUDE = Path("/usr/include/postgresql/15/server")
APPLY_DELAY_MS = 200
RUN_TIMEOUT_S = 600

# SPEC W-7 documents that the hidden statements are visible in this view; nothing else is changed.
VIEW = re.compile(r"\bfrom pg_prepared_statements\b", re.IGNORECASE)
VIEW_WITHOUT_HIDDEN = ("FROM (SELECT * FROM pg_catalog.pg_prepared_statements "
                       "WHERE name !~ '^polarsplit_') AS pg_prepared_statements")
RESULT = re.compile(r"^(?:test\s+|\s+)?(\S+)\s+\.\.\.\s+(ok|FAILED|failed \(ignored\))", re.IGNORECASE)


def prepare_inputs(source: Path, work: Path) -> Path:
    """A copy of the regression directory with the W-7 view rewrite and regress.so built."""
    inputs = work / "regress"
    shutil.copytree(source, inputs, ignore=shutil.ignore_patterns("results", "log", "*.o", "*.so"))
    for sub in ("sql", "expected"):
        for f in (inputs / sub).iterdir():
            text = f.read_text(errors="surrogateescape")
            new = VIEW.sub(VIEW_WITHOUT_HIDDEN, text)
            if new != text:
                f.write_text(new, errors="surrogateescape")
    # The C functions the scripts load (`:libdir/regress`, refint, autoinc), from one directory.
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", f"-I{SERVER_INCLUDE}", "-o", str(inputs / "regress.so"),
                    str(inputs / "regress.c")], check=True)
    for lib in ("refint.so", "autoinc.so"):
        shutil.copy(PKGLIBDIR / lib, inputs / lib)
    # The servers' user reads the data files and writes COPY output under results/.
    for d in (work, inputs):
        os.chmod(d, 0o755)
    return inputs


def run(inputs: Path, work: Path, port: int, label: str) -> dict[str, tuple[str, str]]:
    """Runs the parallel schedule against `port`: {test: (status, output text)}."""
    out = work / label
    shutil.rmtree(out, ignore_errors=True)
    (out / "results").mkdir(parents=True)
    for d in (out, out / "results"):
        os.chmod(d, 0o777)
    t0 = time.monotonic()
    r = subprocess.run([str(PG_REGRESS), f"--inputdir={inputs}", f"--outputdir={out}", f"--dlpath={inputs}",
                        f"--bindir={PG_BIN}", "--host=127.0.0.1", f"--port={port}", "--user=postgres",
                        f"--schedule={inputs / 'parallel_schedule'}"],
                       cwd=inputs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=RUN_TIMEOUT_S)
    (out / "pg_regress.log").write_text(r.stdout)
    res: dict[str, tuple[str, str]] = {}
    for line in r.stdout.splitlines():
        m = RESULT.match(line.lstrip("+ "))
        if m:
            name = m.group(1)
            f = out / "results" / f"{name}.out"
            res[name] = (m.group(2), f.read_text(errors="replace") if f.exists() else "")
    ok = sum(s == "ok" for s, _ in res.values())
    print(f"pg_regress {label}: {ok} ok, {len(res) - ok} failed, in {time.monotonic() - t0:.0f} s", flush=True)
    if len(res) < 100:
        print(r.stdout[-4000:])
        raise SystemExit(f"pg_regress {label}: only {len(res)} results")
    return res


def candidates(direct: dict, through: dict) -> list[str]:
    """Tests whose output through the proxy matches neither the expected nor the primary's."""
    return sorted(t for t, (status, text) in through.items()
                  if status != "ok" and (direct.get(t, ("", ""))[0] == "ok" or direct.get(t, ("", ""))[1] != text))


def pipeline_tests(program: Path, traces: Path, pair: PgPair, proxy: Proxy, work: Path) -> list[str]:
    """libpq_pipeline's tests through the proxy: the failures ({test}: why)."""
    tests = subprocess.run([str(program), "tests"], check=True, capture_output=True, text=True).stdout.split()
    failures = []
    for t in tests:
        db = f"libpq_pipeline_{t}"
        pair.primary.psql(f"CREATE DATABASE {db}")
        pair.wait_replayed()  # the proxy's reader connection needs the database on the standby too
        trace = work / f"{t}.trace"
        conn = f"host=127.0.0.1 port={proxy.port} user=postgres dbname={db}"
        try:
            r = subprocess.run([str(program), "-r", "700", "-t", str(trace), t, conn],
                               capture_output=True, text=True, timeout=60)
            why = f"exit {r.returncode}: {r.stderr.strip()[-300:]}" if r.returncode else ""
        except subprocess.TimeoutExpired:
            why = "no answer in 60 s"
        expected = traces / f"{t}.trace"
        if not why and expected.exists() and trace.read_text() != expected.read_text():
            why = f"trace differs: diff {expected} {trace}"
        print(f"libpq_pipeline {t} through the proxy: {why or 'as PostgreSQL expects'}", flush=True)
        if why:
            failures.append(f"libpq_pipeline {t}: {why}")
    return failures


def main() -> int:
    source, binary = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    pipeline = Path(sys.argv[3]).resolve()
    work = Path(tempfile.mkdtemp(prefix="polarsplit-regress-"))
    inputs = prepare_inputs(source, work)
    pair = PgPair(apply_delay_ms=APPLY_DELAY_MS).start()
    proxy = None
    defects: list[str] = []
    try:
        direct = run(inputs, work, pair.primary.port, "direct")
        proxy = Proxy(binary, pair).start()
        todo = candidates(direct, run(inputs, work, proxy.port, "proxy"))
        if todo:
            print(f"  differing through the proxy: {', '.join(todo)}; once more through the proxy")
            again = candidates(direct, run(inputs, work, proxy.port, "proxy-again"))
            for t in todo:
                if t in again:
                    defects.append(f"{t}: diff {work}/direct/results/{t}.out {work}/proxy-again/results/{t}.out")
                else:
                    print(f"  FLAKY through the proxy (as the primary's on a second run): {t}")
        defects += pipeline_tests(pipeline, source.parent.parent / "modules/libpq_pipeline/traces", pair, proxy, work)
        bad = [ln for ln in proxy.log_text().splitlines() if "protocol violation" in ln or "panicked" in ln]
        for ln in bad[:10]:
            print(f"  proxy: {ln}")
        if bad:
            defects.append(f"{len(bad)} protocol violations or panics in the proxy's log")
    finally:
        if proxy:
            proxy.stop()
        pair.stop()
    if defects:
        print("pg_regress: differs through the proxy from the primary alone (a defect of ours):")
        for d in defects:
            print(f"  {d}")
        print(f"  (outputs kept in {work})")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("pg_regress: every script prints through the proxy what it prints against the primary alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
