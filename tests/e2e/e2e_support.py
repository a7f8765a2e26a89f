"""Helpers of the end-to-end tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))

from pgpair import PgPair, Proxy  # noqa: E402

BUILD = Path(os.environ.get("POLARSPLIT_EXAMPLES_BUILD", ROOT / "c-examples" / "build"))
PROXY = BUILD / "polarsplit-proxy"
PROXY_ASAN = BUILD / "polarsplit-proxy-asan"
APPLY_DELAY_MS = 200
# The pause between a session's reads that wait for one to run on the standby. A read the primary
# serves makes the session's next reads wait for the writer's position sampled after it (S-1a);
# while any session commits (autovacuum late in a suite, another test's pair), that position stays
# about the apply delay ahead of the standby, so reads closer together than the delay stay on the
# primary for good (CI, 2026-12-07: 40 of 40 reads 100 ms apart, READ_NO_BOUNDED_WAIT).
STANDBY_PAUSE_S = APPLY_DELAY_MS / 1000 + 0.05


def start_proxy(pair: PgPair, tmp: Path, asan: bool = False, mode: str = "library", **kw) -> Proxy:
    env = {}
    if asan:
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=66"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return Proxy(PROXY_ASAN if asan else PROXY, pair, mode=mode, workdir=tmp, env=env, **kw).start()


def stop_proxy(proxy: Proxy) -> None:
    """Stops the proxy; it must exit 0 and (under ASan) report nothing."""
    code = proxy.stop()
    log = proxy.log_text()
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert marker not in log, f"{marker} in the proxy's log:\n{log[-6000:]}"
    assert code == 0, f"proxy exited with {code}:\n{log[-4000:]}"


# Ports of the running pair's standbys (the `pair` fixture registers them). Where a read ran is
# told by inet_server_port(), replica-safe on purpose (SPEC S-7); pg_is_in_recovery() is
# server-dependent and always answered by the primary.
STANDBY_PORTS: set[int] = set()


def where(conn, sql: str = "SELECT inet_server_port()", params=None) -> str:
    """Runs a statement whose last column is inet_server_port(); returns 'standby' or 'primary'."""
    port = conn.execute(sql, params).fetchone()[-1]
    return "standby" if port in STANDBY_PORTS else "primary"


def ports(pair: PgPair) -> dict[int, str]:
    return {pair.primary.port: "primary", pair.standby.port: "standby"}


# -- Bounded waits (issues 17 and 18): a hang must fail fast, never stall the run -----------------

import json  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402

DRIVERS = ROOT / "tests" / "e2e" / "drivers"
DRIVERS_BUILD = Path(os.environ.get("POLARSPLIT_DRIVERS_BUILD", DRIVERS / "build"))
JDBC_JAR = Path("/usr/share/java/postgresql.jar")


class Hang(AssertionError):
    """A statement got no answer within its bound (the watchdog shut the connection down)."""


@contextmanager
def bounded(conn, seconds: float, what: str, diagnose=None):
    """Runs the block with a deadline on a psycopg connection: when it passes, `diagnose()` (if
    given) records what the servers see, and the connection's socket is shut down, so the blocked
    call returns with an error at once. Raises Hang naming `what` and the diagnosis."""
    fired: dict[str, str] = {}

    def fire():
        try:
            fired["diagnosis"] = diagnose() if diagnose else ""
        except Exception as e:  # noqa: BLE001 - the diagnosis is best effort
            fired["diagnosis"] = f"(diagnosis failed: {e})"
        fired["at"] = f"{seconds:g} s"
        try:
            s = socket.socket(fileno=os.dup(conn.fileno()))
            s.shutdown(socket.SHUT_RDWR)
            s.close()
        except OSError:
            pass

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception as e:
        timer.cancel()
        if fired:
            raise Hang(f"{what}: no answer within {fired['at']} (hang); {fired['diagnosis']}") from e
        raise
    finally:
        timer.cancel()
    if fired:
        raise Hang(f"{what}: no answer within {fired['at']} (hang); {fired['diagnosis']}")


def run_program(cmd: list, timeout: float, what: str, cwd=None) -> dict:
    """Runs a driver program that prints one JSON line; a timeout or a non-zero exit fails with its output."""
    t0 = time.monotonic()
    try:
        out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise Hang(f"{what}: did not finish within {timeout:g} s (hang); output: {e.stdout!r} {e.stderr!r}") from e
    if out.returncode != 0:
        raise AssertionError(f"{what} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"{what} printed no result:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    result = json.loads(lines[-1])
    result["wall_s"] = round(time.monotonic() - t0, 2)
    return result


def driver_built(path: Path) -> Path:
    if not path.exists():
        import pytest

        pytest.fail(f"{path} is not built: run scripts/test-e2e.sh (it builds tests/e2e/drivers)")
    return path


# Lines for the end-of-run summary (conftest's pytest_terminal_summary prints them).
REPORT: dict[str, list[str]] = {}


def report(section: str, line: str) -> None:
    REPORT.setdefault(section, []).append(line)


def on_primary(pair: PgPair, *statements: str) -> None:
    """Runs `statements` on the primary's `app` database as the superuser, in order, and waits
    until the standby has replayed them (a test module's schema)."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        for sql in statements:
            c.execute(sql)
    pair.wait_replayed()


def wait_until(check, what: str, timeout: float = 30, pause: float = 0.2):
    """Calls `check()` — `(done, value)` — until it is done, and returns its value; fails after
    `timeout` seconds with `what` and the last value (the proxy reloading a catalogue, say)."""
    deadline = time.monotonic() + timeout
    while True:
        done, value = check()
        if done:
            return value
        assert time.monotonic() < deadline, f"{what}: {value}"
        time.sleep(pause)


@contextlib.contextmanager
def proxy_with_catalogue(pair: PgPair, tmp: Path, plain_read: str, drop: list[str]):
    """A proxy whose catalogue has the objects a test module just created (refreshed once a
    minute, so the load it waits for is the one the test sees): yields it once `plain_read`, a
    read of a plain user function, runs on the standby; stops it and runs `drop` after."""
    proxy = start_proxy(pair, tmp, extra=["--catalog-refresh-ms", "60000"])
    try:
        def loaded():
            with psycopg.connect(proxy.dsn(), autocommit=True) as c:
                port = c.execute(f"SELECT {plain_read}, inet_server_port()").fetchone()[1]
            return port in STANDBY_PORTS, port
        wait_until(loaded, "the proxy's catalogue has the functions", timeout=20)
        yield proxy
    finally:
        stop_proxy(proxy)
        on_primary(pair, *drop)


def create_function(admin, name: str, volatility: str) -> None:
    """A user function `name()` of the given volatility that anyone may call (the F-policy tests)."""
    admin.execute(f"CREATE FUNCTION {name}() RETURNS int {volatility} LANGUAGE sql AS 'SELECT 1'")
    admin.execute(f"GRANT EXECUTE ON FUNCTION {name}() TO PUBLIC")


@contextlib.contextmanager
def user_functions(pair: PgPair, functions: dict[str, str], also_drop: list[str]):
    """Creates `functions` (name → volatility) on the primary, waits until the standby has them,
    yields the admin connection, and drops them and `also_drop` (functions a test creates later)
    at the end — before as well, in case an earlier run left them."""
    names = [*functions, *also_drop]
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        for name in names:
            admin.execute(f"DROP FUNCTION IF EXISTS {name}()")
        for name, volatility in functions.items():
            create_function(admin, name, volatility)
        pair.wait_replayed()
        try:
            yield admin
        finally:
            for name in names:
                admin.execute(f"DROP FUNCTION IF EXISTS {name}()")


# -- A bounded psycopg session, shared by the examiners' modules (red5 onwards) --------------------

BOUND_S = 5.0


def connect(dsn: str, **kw) -> psycopg.Connection:
    """An autocommit connection whose statements are bounded by the server too (5 s)."""
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, options="-c statement_timeout=5000", **kw)


def run(conn, sql, params=None):
    """The statement's rows (None when it returns none), within BOUND_S or a Hang."""
    with bounded(conn, BOUND_S, str(sql)[:80]):
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else None


def answer(conn, sql, params=None):
    """('ok', rows) or ('error', SQLSTATE); a lost connection still raises."""
    try:
        return ("ok", run(conn, sql, params))
    except psycopg.Error as e:
        if conn.closed:
            raise
        return ("error", e.sqlstate)


def warm(conn, seconds: float = 3.0) -> None:
    """Waits until a plain read of this session runs on the standby: a session's first reads may
    stay on the writer while its state is learnt or a reader connection is opened (S-5, P-4), and
    the examiners' findings are about what happens once reads do leave the writer."""
    import time

    import pytest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if run(conn, "SELECT inet_server_port()")[0][0] in STANDBY_PORTS:
            return
        time.sleep(STANDBY_PAUSE_S)
    pytest.fail(f"no plain read of the session reached the standby within {seconds:g} s")


def ran_on(port) -> str:
    return "standby" if port in STANDBY_PORTS else "primary"


def own_pair_with_row(table: str, value: int):
    """A primary + standby pair of a fault module's own (it stops, freezes or replaces servers:
    never the shared pair), with `table (k int PRIMARY KEY, v int)` holding the row (1, `value`),
    replayed on the standby; stopped at the end. Used as a module fixture's body:
    `yield from own_pair_with_row("t", 0)`."""
    p = PgPair(apply_delay_ms=0)
    p.start()
    try:
        with psycopg.connect(p.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v int NOT NULL)")
            c.execute(f"INSERT INTO {table} VALUES (1, {int(value)})")
            c.execute(f"GRANT ALL ON {table} TO PUBLIC")
        p.wait_replayed()
        yield p
    finally:
        p.stop()


@contextmanager
def others_commit(pair: PgPair, table: str = "e2e_others_wal"):
    """Another client commits on the primary, back to back, while the block runs: WAL the standby
    replays the apply delay later, so the writer's insert position stays ahead of the standby's
    (a busy primary). Every position the engine probes then is one the standby has not reached."""
    assert pair.apply_delay_ms >= 100, "the standby must lag for the other client's WAL to matter"
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=5) as c:
        c.execute(f"CREATE TABLE IF NOT EXISTS {table} (v int)")
    pair.wait_replayed()
    stop = threading.Event()

    def write():
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=5) as c:
            while not stop.is_set():
                c.execute(f"INSERT INTO {table} (v) VALUES (1)")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        time.sleep(0.1)
        yield
    finally:
        stop.set()
        writer.join(10)


def reasons_since(proxy: Proxy, before: dict) -> dict:
    """The proxy's decision reasons counted since `before` (an earlier `proxy.stats()["reason"]`)."""
    after = proxy.stats()["reason"]
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def asyncpg_pool_reads(port: int, read: str, rounds: int = 10) -> list[tuple]:
    """Two workers sharing an asyncpg Pool of two connections (its reset query at every release),
    as `app_trust` on `app`; each acquire runs the prepared `read` twice, with `$1` = 0. `read`'s
    last column is `inet_server_port()`: (the other columns, arrays as tuples; the port) per read."""
    import asyncio

    import asyncpg

    async def go():
        pool = await asyncpg.create_pool(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False,
                                         min_size=2, max_size=2, timeout=10,
                                         server_settings={"statement_timeout": "5000"})
        out = []

        async def worker():
            for _ in range(rounds):
                async with pool.acquire(timeout=10) as c:
                    for _ in range(2):
                        r = await asyncio.wait_for(c.fetchrow(read, 0), 5)
                        answer = tuple(tuple(v) if isinstance(v, list) else v for v in list(r)[:-1])
                        out.append((answer, r[-1]))
                    await asyncio.sleep(0.02)

        try:
            await asyncio.wait_for(asyncio.gather(worker(), worker()), 60)
        finally:
            await asyncio.wait_for(pool.close(), 10)
        return out

    return asyncio.run(go())
