"""The writer session's idle timeouts (`idle_session_timeout`, `idle_in_transaction_session_timeout`)
count its backend's idle time; while the session reads on the standby its writer sees nothing, so
a client busy reading was disconnected (57P05 / 25P03) where the primary alone would not (an
examiner-style probe of 2026-12-05). The engine now touches the writer (a lone hidden Sync)
once it has been idle half its timeout, at a read's start and at the deadline it gives the host
while the read runs. A second probe the same day: reads 0.45 T, 0.9 T and 0.9 T apart, each pause
shorter than the timeout T, ended with 57P05 (11 of 11) — a read that started before the writer
had been idle T/2 touched nothing, and the pause after it added to the writer's idle time. The
deadline now also stands after a read the standby answered, until the writer is touched."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded

READ = "SELECT pg_sleep({})::text, count(*), inet_server_port() FROM accounts"


def in_a_block(dsn: str) -> list:
    """One read in the block longer than the block's idle timeout."""
    out = []
    with psycopg.connect(dsn) as c, bounded(c, 30, "idle_in_transaction_session_timeout"):
        c.execute("SET idle_in_transaction_session_timeout = '1s'")
        c.commit()
        try:
            out.append(c.execute("SELECT count(*) FROM accounts").fetchone()[0])
            out.append(c.execute(READ.format(1.5)).fetchone())
            out.append(c.execute("SELECT 1").fetchone()[0])
            c.commit()
            out.append("committed")
        except psycopg.Error as e:
            out.append(e.sqlstate)
    return out


def outside_a_block(dsn: str) -> list:
    """Short reads back to back, longer together than the session's idle timeout."""
    out = []
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 30, "idle_session_timeout"):
        c.execute("SET idle_session_timeout = '1s'")
        try:
            for _ in range(6):
                out.append(c.execute(READ.format(0.4)).fetchone())
            out.append(c.execute("SELECT 'still alive'").fetchone()[0])
        except psycopg.Error as e:
            out.append(e.sqlstate)
    return out


def pauses_shorter_than_the_timeout(dsn: str) -> list:
    """Short reads with pauses between them, each shorter than the session's idle timeout."""
    out = []
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 30, "idle_session_timeout"):
        c.execute("SET idle_session_timeout = '1s'")
        try:
            for pause in (0.45, 0.9, 0.9, 0.9):
                time.sleep(pause)
                out.append(c.execute(READ.format(0)).fetchone())
            out.append(c.execute("SELECT 'still alive'").fetchone()[0])
        except psycopg.Error as e:
            out.append(e.sqlstate)
    return out


@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario", [in_a_block, outside_a_block, pauses_shorter_than_the_timeout],
                         ids=lambda f: f.__name__)
def test_s5_a_client_reading_on_the_standby_is_never_idle_on_the_primary(pair, proxy, scenario):
    direct = scenario(pair.primary.dsn(user="app_trust", dbname="app"))
    proxied = scenario(proxy.dsn())

    def strip(rows):
        return [r[:-1] if isinstance(r, tuple) else r for r in rows]

    assert strip(proxied) == strip(direct), f"through the proxy {proxied}, the primary {direct}"
    assert any(isinstance(r, tuple) and r[-1] in STANDBY_PORTS for r in proxied), \
        f"no read ran on the standby: {proxied}"
    assert proxy.stats()["counter"]["writer_keepalives"] > 0
