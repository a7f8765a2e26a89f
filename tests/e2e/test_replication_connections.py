"""SPEC: a replication connection (`replication=` in its startup) is passed through to the primary
and never routed — and no hidden statement of the engine's may run on it. An examiner's finding of
2026-12-05: the probe and the capture followed the walsender's commands as extended-protocol
messages, which a walsender refuses. Each refusal is an ERROR, which drops the session's temporary
replication slots, so `pg_basebackup` (default `-X stream`) failed with "replication slot … does
not exist"; after `START_REPLICATION` the Parse arrived in CopyBoth mode and `pg_receivewal`
ended with FATAL "invalid standby message type". Both now behave as against the primary."""

from __future__ import annotations

import subprocess
import time

import pytest


def tool(args: list[str], port: int, timeout: float) -> subprocess.CompletedProcess | None:
    """Runs a PostgreSQL client tool against 127.0.0.1:port as postgres; None when it was still
    running after `timeout` seconds (a stream that is still streaming)."""
    try:
        return subprocess.run([*args, "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


@pytest.mark.timeout(120)
def test_replication_pg_basebackup_streams_its_wal_through_the_proxy(pair, proxy, tmp_path):
    r = tool(["pg_basebackup", "-D", str(tmp_path / "base"), "-c", "fast", "-X", "stream"], proxy.port, 90)
    assert r is not None, "pg_basebackup did not finish in 90 s"
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "base" / "PG_VERSION").exists()


@pytest.mark.timeout(60)
def test_replication_pg_receivewal_keeps_streaming_through_the_proxy(pair, proxy, tmp_path):
    wal = tmp_path / "wal"
    wal.mkdir()
    p = subprocess.Popen(["pg_receivewal", "-D", str(wal), "--no-loop", "-h", "127.0.0.1", "-p", str(proxy.port),
                          "-U", "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not any(wal.iterdir()) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # still streaming a second later
        assert p.poll() is None, f"pg_receivewal stopped: rc {p.returncode}: {p.communicate()[1]}"
        assert any(wal.iterdir()), "no WAL received in 30 s"
    finally:
        p.kill()
        p.communicate()


@pytest.mark.timeout(60)
def test_replication_database_connection_runs_sql_and_commands_on_the_primary(pair, proxy):
    dsn = f"host=127.0.0.1 port={proxy.port} user=postgres dbname=app replication=database"
    r = subprocess.run(["psql", dsn, "-Atc", "IDENTIFY_SYSTEM"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["psql", dsn, "-Atc", "SELECT pg_is_in_recovery(), inet_server_port()"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"f|{pair.primary.port}"
