"""Issue 18 end to end: the extended protocol and prepared statements of real drivers through the
example proxy, against the real primary + hot standby (SPEC §10, E-1…E-6).

One workload per driver, each in its driver's usual way of speaking (with parameters, so the
extended protocol, and prepared statements where the driver prepares them):
  ro: READS point reads in a session that has written nothing;
  rw: ROUNDS times a write, then the written row read back at once (stale if it is not the value written).
Every read selects inet_server_port(), which says which server answered (replica-safe on purpose,
S-7). With the standby's 200 ms apply delay no read may be stale; with none, the share of reads the
standby served is reported per driver (section "issue 18" at the end of the run) and the reads with
no prior write must be ≥ 95% on the standby for every driver. pgbench -S in its three query modes
reports share and TPS side by side, from the proxy's decision counters."""

from __future__ import annotations

import asyncio
import re
import subprocess

import asyncpg
import psycopg
import pytest

from e2e_support import DRIVERS, DRIVERS_BUILD, JDBC_JAR, REPORT, Hang, bounded, driver_built, report, run_program

READS = 200
ROUNDS = 50
DRIVER_S = 60  # a whole workload; a healthy one takes about a second

READ = "SELECT v, inet_server_port() FROM kv WHERE k = %s"
WRITE = "UPDATE kv SET v = %s WHERE k = %s"


def keys(driver: str) -> tuple[int, int]:
    i = list(WORKLOADS).index(driver)
    return 1800 + 2 * i, 1801 + 2 * i


# -- The workloads ----------------------------------------------------------------------------

def psycopg_default(pair, proxy, ro_key, rw_key):
    """psycopg 3 with its default prepare_threshold (5): named prepared statements from the 6th run on."""
    n = {"ro_reads": READS, "ro_standby": 0, "pw_reads": ROUNDS, "pw_standby": 0, "stale": 0}
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        with bounded(c, DRIVER_S, "psycopg workload"):
            for _ in range(READS):
                n["ro_standby"] += c.execute(READ, (ro_key,)).fetchone()[1] == pair.standby.port
            for i in range(1, ROUNDS + 1):
                c.execute(WRITE, (i, rw_key))
                v, port = c.execute(READ, (rw_key,)).fetchone()
                n["stale"] += v != i
                n["pw_standby"] += port == pair.standby.port
    return n


def psycopg_pipeline(pair, proxy, ro_key, rw_key):
    """psycopg 3 pipeline mode: reads ten to a pipeline; a write, a Sync, and the read back in one."""
    n = {"ro_reads": READS, "ro_standby": 0, "pw_reads": ROUNDS, "pw_standby": 0, "stale": 0}
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        with bounded(c, DRIVER_S, "psycopg pipeline workload"):
            for _ in range(READS // 10):
                with c.pipeline():
                    curs = [c.execute(READ, (ro_key,)) for _ in range(10)]
                n["ro_standby"] += sum(cur.fetchone()[1] == pair.standby.port for cur in curs)
            for i in range(1, ROUNDS + 1):
                with c.pipeline() as p:
                    c.execute(WRITE, (i, rw_key))
                    p.sync()
                    cur = c.execute(READ, (rw_key,))
                v, port = cur.fetchone()
                n["stale"] += v != i
                n["pw_standby"] += port == pair.standby.port
    return n


def asyncpg_default(pair, proxy, ro_key, rw_key):
    """asyncpg: every statement a named prepared statement (its statement cache)."""
    async def run():
        n = {"ro_reads": READS, "ro_standby": 0, "pw_reads": ROUNDS, "pw_standby": 0, "stale": 0}
        c = await asyncpg.connect(host="127.0.0.1", port=proxy.port, user="app_trust", database="app", ssl=False,
                                  timeout=10)
        try:
            read, write = READ.replace("%s", "$1"), "UPDATE kv SET v = $1 WHERE k = $2"
            for _ in range(READS):
                n["ro_standby"] += (await c.fetchrow(read, ro_key))[1] == pair.standby.port
            for i in range(1, ROUNDS + 1):
                await c.execute(write, i, rw_key)
                v, port = await c.fetchrow(read, rw_key)
                n["stale"] += v != i
                n["pw_standby"] += port == pair.standby.port
        finally:
            c.terminate()
        return n

    async def bounded_run():
        try:
            return await asyncio.wait_for(run(), DRIVER_S)
        except asyncio.TimeoutError as e:
            raise Hang(f"asyncpg workload: not done within {DRIVER_S} s (hang)") from e

    return asyncio.run(bounded_run())


def node_pg(pair, proxy, ro_key, rw_key):
    """node-postgres (npm pg) with named queries."""
    driver_built(DRIVERS / "node" / "node_modules" / "pg")
    return run_program(["node", DRIVERS / "node" / "ryw.js", "127.0.0.1", proxy.port, pair.standby.port,
                        ro_key, rw_key, READS, ROUNDS], timeout=DRIVER_S, what="node-postgres workload")


def jdbc(pair, proxy, ro_key, rw_key, *mode):
    """The PostgreSQL JDBC driver, PreparedStatement with the default prepareThreshold (5)."""
    driver_built(DRIVERS_BUILD / "java" / "Ryw.class")
    return run_program(["java", "-cp", f"{DRIVERS_BUILD / 'java'}:{JDBC_JAR}", "Ryw", "127.0.0.1", proxy.port,
                        pair.standby.port, ro_key, rw_key, READS, ROUNDS, *mode], timeout=DRIVER_S,
                       what="JDBC workload")


def jdbc_txn(pair, proxy, ro_key, rw_key):
    """JDBC with autocommit off, each statement a committed transaction: pgjdbc sends BEGIN in the
    batch of the transaction's first statement (E-1 cuts it off there)."""
    return jdbc(pair, proxy, ro_key, rw_key, "txn")


def jdbc_txn_autosave(pair, proxy, ro_key, rw_key):
    """JDBC with autocommit off and autosave=always: BEGIN, SAVEPOINT and the statement in one
    batch (E-1 cuts both off there)."""
    return jdbc(pair, proxy, ro_key, rw_key, "txn-autosave")


def psycopg_pipeline_txn(pair, proxy, ro_key, rw_key):
    """psycopg 3 pipeline mode with autocommit off: BEGIN, the statement and a Sync in one batch,
    then COMMIT."""
    n = {"ro_reads": READS, "ro_standby": 0, "pw_reads": ROUNDS, "pw_standby": 0, "stale": 0}
    with psycopg.connect(proxy.dsn()) as c:
        with bounded(c, DRIVER_S, "psycopg pipeline workload, autocommit off"):
            with c.pipeline():
                for _ in range(READS):
                    n["ro_standby"] += c.execute(READ, (ro_key,)).fetchone()[1] == pair.standby.port
                    c.commit()
                for i in range(1, ROUNDS + 1):
                    c.execute(WRITE, (i, rw_key))
                    c.commit()
                    v, port = c.execute(READ, (rw_key,)).fetchone()
                    c.commit()
                    n["stale"] += v != i
                    n["pw_standby"] += port == pair.standby.port
    return n


WORKLOADS = {
    "psycopg": psycopg_default,
    "psycopg-pipeline": psycopg_pipeline,
    "asyncpg": asyncpg_default,
    "node-pg-named": node_pg,
    "jdbc": jdbc,
    "jdbc-autocommit-off": jdbc_txn,
    "jdbc-autosave": jdbc_txn_autosave,
    "psycopg-pipeline-autocommit-off": psycopg_pipeline_txn,
}

def drivers(marks: dict[str, pytest.MarkDecorator]):
    return [pytest.param(d, marks=marks.get(d, ()), id=d) for d in WORKLOADS]


@pytest.fixture(scope="module")
def i18(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        for d in WORKLOADS:
            for k in keys(d):
                c.execute("INSERT INTO kv VALUES (%s, 0) ON CONFLICT (k) DO UPDATE SET v = 0", (k,))
    pair.wait_replayed()
    return pair


def run_workload(pair, proxy, driver: str, delay_ms: int) -> dict:
    if "issue 18" not in REPORT:
        report("issue 18", "driver                          apply delay   share of reads served by the standby (inet_server_port())"
                           "        (the engine's reasons)")
    ro_key, rw_key = keys(driver)
    before = proxy.stats()["reason"]
    try:
        n = WORKLOADS[driver](pair, proxy, ro_key, rw_key)
    except Hang as e:
        report("issue 18", f"{driver:<31} {delay_ms:>5} ms   hang: {str(e)[:100]}")
        raise
    after = proxy.stats()["reason"]
    reasons = sorted(((after[r] - before.get(r, 0), r) for r in after if after[r] != before.get(r, 0)), reverse=True)
    ro = 100 * n["ro_standby"] / n["ro_reads"]
    pw = 100 * n["pw_standby"] / n["pw_reads"]
    every = 100 * (n["ro_standby"] + n["pw_standby"]) / (n["ro_reads"] + n["pw_reads"])
    report("issue 18", f"{driver:<31} {delay_ms:>5} ms   all reads {every:5.1f}%   no prior write "
                       f"{n['ro_standby']:>3}/{n['ro_reads']} {ro:5.1f}%   post-write {n['pw_standby']:>2}/{n['pw_reads']} "
                       f"{pw:5.1f}%   stale {n['stale']}   ({', '.join(f'{r} {k}' for k, r in reasons[:3])})")
    return n


@pytest.mark.timeout(120)
@pytest.mark.parametrize("driver", drivers({}))
def test_e3_s1a_no_stale_read_per_driver_with_200ms_apply_delay(i18, proxy, driver):
    assert i18.apply_delay_ms == 200
    n = run_workload(i18, proxy, driver, 200)
    assert n["stale"] == 0, n


@pytest.mark.timeout(120)
@pytest.mark.parametrize("driver", drivers({}))
def test_e2_reads_offloaded_per_driver_without_apply_delay(i18, proxy, driver):
    i18.set_apply_delay(0)
    try:
        i18.wait_replayed()
        n = run_workload(i18, proxy, driver, 0)
    finally:
        i18.set_apply_delay(200)
    assert n["stale"] == 0, n
    assert n["ro_standby"] >= 0.95 * n["ro_reads"], f"reads with no prior write on the standby: {n}"


# -- pgbench -S in its three query modes -----------------------------------------------------

def pgbench(proxy, mode: str) -> tuple[int, float, str]:
    cmd = ["pgbench", "-n", "-S", "-M", mode, "-c", "4", "-j", "2", "-T", "3",
           "-h", "127.0.0.1", "-p", str(proxy.port), "-U", "app_trust", "app"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        raise Hang(f"pgbench -M {mode}: not done within 60 s (hang)") from e
    assert out.returncode == 0, out.stdout + out.stderr
    processed = int(re.search(r"number of transactions actually processed: (\d+)", out.stdout).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    assert failed is None or int(failed.group(1)) == 0, out.stdout
    tps = float(re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout).group(1))
    return processed, tps, out.stdout


READER_OUTCOMES = ("REPLICA_WITH_WAIT", "REPLICA_TXN_SPLIT")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_e1_pgbench_select_only_offloaded_in_every_query_mode(bench, proxy, mode):
    """pgbench -S (one point select a transaction) through the proxy with no apply delay: the share of
    its selects the engine sent to the standby (reader decisions per processed transaction) ≥ 95%."""
    bench.set_apply_delay(0)
    try:
        before = proxy.stats()["outcome"]
        processed, tps, _ = pgbench(proxy, mode)
        after = proxy.stats()["outcome"]
    finally:
        bench.set_apply_delay(200)
    to_reader = sum(after.get(o, 0) - before.get(o, 0) for o in READER_OUTCOMES)
    decided = sum(after.values()) - sum(before.values())
    share = 100 * to_reader / processed
    report("issue 18", f"pgbench -S -M {mode:<8}      {tps:8.0f} tps   {to_reader}/{processed} selects on the standby "
                       f"({share:.1f}%); {decided} decisions")
    assert to_reader >= 0.95 * processed, f"-M {mode}: {to_reader} of {processed} selects sent to the standby"

