"""The writer session's idle timeouts (`idle_session_timeout`, `idle_in_transaction_session_timeout`)
count its backend's idle time; while the session reads on the standby its writer sees nothing, so
a client busy reading was disconnected (57P05 / 25P03) where the primary alone would not (an
examiner-style probe of 2026-12-05). The engine now touches the writer (a hidden `SELECT 1`)
once it has been idle half its timeout, at a read's start and at the deadline it gives the host
while the read runs."""

from __future__ import annotations

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


@pytest.mark.timeout(90)
@pytest.mark.parametrize("scenario", [in_a_block, outside_a_block], ids=lambda f: f.__name__)
def test_s5_a_client_reading_on_the_standby_is_never_idle_on_the_primary(pair, proxy, scenario):
    direct = scenario(pair.primary.dsn(user="app_trust", dbname="app"))
    proxied = scenario(proxy.dsn())

    def strip(rows):
        return [r[:-1] if isinstance(r, tuple) else r for r in rows]

    assert strip(proxied) == strip(direct), f"through the proxy {proxied}, the primary {direct}"
    assert any(isinstance(r, tuple) and r[-1] in STANDBY_PORTS for r in proxied), \
        f"no read ran on the standby: {proxied}"
    assert proxy.stats()["counter"]["writer_keepalives"] > 0
