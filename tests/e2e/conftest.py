"""Fixtures of the end-to-end tests: one real primary + hot standby pair for the whole run
(recovery_min_apply_delay = 200 ms), and polarsplit-proxy processes that are always stopped.

Binaries come from c-examples/build (scripts/test-e2e.sh builds them), or $POLARSPLIT_EXAMPLES_BUILD."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_support import (  # noqa: E402
    APPLY_DELAY_MS,
    PROXY,
    PROXY_ASAN,
    STANDBY_PORTS,
    PgPair,
    start_proxy,
    stop_proxy,
)

SCHEMA = """
CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 100) g;
CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL);
CREATE SEQUENCE seq;
CREATE TABLE audit (id serial PRIMARY KEY, note text);
-- A function that writes: unknown to the engine, so it runs on the primary unless a statement's
-- `/* route=reader */` hint declares it read-safe; then the standby refuses it (F-2).
CREATE FUNCTION log_note(t text) RETURNS text LANGUAGE sql AS $$
  INSERT INTO audit (note) VALUES (t) RETURNING note || '@' || inet_server_port()::text
$$;
-- An unlogged table: a standby refuses to read it ("cannot access temporary or unlogged relations
-- during recovery", 0A000) before sending any RowDescription. The catalogue names it (kind `U`):
-- its reads go to the primary; one a hint sends to a reader is refused there and runs again on
-- the primary (F-2).
CREATE UNLOGGED TABLE scratch (n int);
INSERT INTO scratch VALUES (1);
GRANT ALL ON ALL TABLES IN SCHEMA public TO PUBLIC;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO PUBLIC;
"""


def pytest_configure(config):
    # A SIGTERM (CI's timeout, a user) must still run the fixtures' teardown that stops the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@pytest.fixture(scope="session")
def pair():
    for b in (PROXY, PROXY_ASAN):
        if not b.exists():
            pytest.fail(f"{b} is not built: run scripts/test-e2e.sh (or make -C c-examples)")
    p = PgPair(apply_delay_ms=APPLY_DELAY_MS)
    p.start()
    STANDBY_PORTS.add(p.standby.port)
    try:
        with psycopg.connect(p.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute(SCHEMA)
        p.wait_replayed()
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="session")
def bench(pair):
    """pgbench's tables (scale 1), readable by every login; initialised once per run."""
    subprocess.run(
        ["pgbench", "-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", str(pair.primary.port), "-U", "postgres", "app"],
        check=True, capture_output=True, text=True, timeout=120,
    )
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("GRANT ALL ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO PUBLIC")
    pair.wait_replayed()
    return pair


@pytest.fixture(scope="module")
def asan_proxy(pair, tmp_path_factory):
    proxy = start_proxy(pair, tmp_path_factory.mktemp("proxy"), asan=True)
    try:
        yield proxy
    finally:
        stop_proxy(proxy)


@pytest.fixture(scope="module")
def proxy(pair, tmp_path_factory):
    proxy = start_proxy(pair, tmp_path_factory.mktemp("proxy"))
    try:
        yield proxy
    finally:
        stop_proxy(proxy)


def pytest_terminal_summary(terminalreporter):
    """The figures the issue 17/18 tests measured (also when they fail or xfail), one section each."""
    from e2e_support import REPORT

    for section, lines in REPORT.items():
        terminalreporter.section(f"measured: {section}")
        for line in lines:
            terminalreporter.write_line(line)
