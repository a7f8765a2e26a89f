"""SPEC P-6: a statement "may have written" unless it is proven not to. A SELECT of nothing but
calls to the built-ins that change only the calling session's state — `set_config`, `setseed`
(whose state keeps the session's reads on the writer anyway, S-4), the advisory-lock *releases* (`pg_advisory_unlock`, `…_shared`, `…_unlock_all`) — with constant
arguments runs on the writer (a standby would keep that state, S-4/S-5) but writes nothing and
reads no data: no position is probed behind it, and the session's reads after it need nothing a
reader has not replayed.

Found in the fresh-clone CI of 2026-12-07 (6f09d7f): asyncpg's Pool resets every connection it
takes back with `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;`. The unlock
counted as a write, so each reset was probed, at the writer's insert position — which holds every
other client's WAL. While anything else committed, the standby (200 ms behind here) was behind
that position, and on stock PostgreSQL, which has no bounded wait (W-7), the next acquirer's
reads went to the primary: 22 of 40 on the standby in that run (READ_NO_BOUNDED_WAIT 10,
MISSING_LSN_PRIMARY 10); with another client committing throughout, almost none. The same for a
session that sets its tenant with `set_config` before each read.

An advisory lock's *acquire* stays a possible write on purpose: it orders the session after the
lock's last holder, whose commits a read under the lock must see — the position probed behind
the acquire covers them.

Run against the shared pair through the example proxy, another client committing on the primary
throughout (`others_commit`); answers compared with the same workload on the primary alone.
"""

from __future__ import annotations

import time

import pytest

from e2e_support import (STANDBY_PORTS, asyncpg_pool_reads, connect, on_primary, others_commit, ran_on,
                          reasons_since, run, warm)

TABLE = "p6_session_fn"
SETUP = [f"DROP TABLE IF EXISTS {TABLE}", f"CREATE TABLE {TABLE} (k int PRIMARY KEY, v int)",
         f"INSERT INTO {TABLE} SELECT g, g * 10 FROM generate_series(1, 5) g",
         f"GRANT SELECT ON {TABLE} TO PUBLIC"]
READ = f"SELECT (SELECT sum(v) FROM {TABLE} WHERE k > $1), current_setting('app.tenant', true), inet_server_port()"


@pytest.fixture(scope="module")
def objects(pair):
    on_primary(pair, *SETUP)
    try:
        yield pair
    finally:
        on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}")




@pytest.mark.timeout(120)
def test_p6_an_asyncpg_pool_reset_is_no_write_while_other_clients_commit(objects, proxy):
    twin = asyncpg_pool_reads(objects.primary.port, READ)
    before = proxy.stats()["reason"]
    with others_commit(objects):
        out = asyncpg_pool_reads(proxy.port, READ)
    reasons = reasons_since(proxy, before)
    assert sorted(a for a, _ in out) == sorted(a for a, _ in twin), (out, twin)
    on_standby = sum(p in STANDBY_PORTS for _, p in out)
    # Before: each reset was probed at a position the standby, 200 ms behind the other client's
    # commits, had not replayed; the reads after it stayed on the primary.
    assert on_standby >= 30, (
        f"asyncpg Pool while another client commits: {on_standby} of {len(out)} prepared reads on the "
        f"standby; reasons {reasons}")


# Each a statement of the session-only kind, then the read; with psycopg's simple Query (its
# parameters inlined) and a prepared one.
SESSION_ONLY = [
    ("SELECT set_config('app.tenant', %s, false)", ("t1",)),
    ("SELECT pg_advisory_unlock_all()", None),
    ("SELECT pg_catalog.set_config('app.tenant', 't2', false), set_config('app.other', '', false)", None),
    ("SELECT pg_advisory_unlock(6431), pg_advisory_unlock_shared(6431)", None),
]


def session_reads(dsn: str, prepare: bool, proxied: bool) -> list[tuple]:
    """Each SESSION_ONLY statement, then two reads: (statement, answer, where) per read."""
    out = []
    with connect(dsn, prepare_threshold=0 if prepare else None) as c:
        if proxied:
            warm(c)
        for _ in range(3):
            for sql, params in SESSION_ONLY:
                run(c, sql, params)
                for _ in range(2):
                    s, tenant, port = run(c, READ.replace("$1", "%s"), (1,))[0]
                    out.append((sql, (s, tenant), ran_on(port)))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "prepared"])
def test_p6_set_config_setseed_and_lock_releases_are_no_writes_while_other_clients_commit(objects, proxy,
                                                                                          prepare):
    twin = session_reads(objects.primary.dsn(dbname="app", user="app_trust"), prepare, False)
    before = proxy.stats()["reason"]
    with others_commit(objects):
        out = session_reads(proxy.dsn(), prepare, True)
    reasons = reasons_since(proxy, before)
    assert [r[:2] for r in out] == [r[:2] for r in twin]
    missed = [sql for sql, _, where in out if where != "standby"]
    # A read may still wait for the capture the set_config makes due (S-5): it stays on the
    # writer only while the state is unknown, never for a position.
    assert len(missed) <= len(out) // 10, (
        f"reads after a session-only statement, another client committing: {len(missed)} of {len(out)} "
        f"on the primary ({missed}); reasons {reasons}")


@pytest.mark.timeout(60)
def test_p6_an_advisory_lock_acquire_still_orders_the_session_after_other_clients(objects, proxy):
    """The control: `pg_advisory_lock` is probed as a possible write, so once it is released the
    session's next read needs a reader past the position taken behind the acquire — the other
    client's commits up to then — which the standby, 200 ms behind, has not replayed."""
    with connect(proxy.dsn()) as c:
        warm(c)
        with others_commit(objects):
            before = proxy.stats()["reason"]
            run(c, "SELECT pg_advisory_lock(6432)")
            run(c, "SELECT pg_advisory_unlock(6432)")
            for _ in range(5):
                run(c, READ.replace("$1", "%s"), (1,))
                time.sleep(0.02)
            reasons = reasons_since(proxy, before)
    assert reasons.get("READ_NO_BOUNDED_WAIT", 0) + reasons.get("MISSING_LSN_PRIMARY", 0) >= 1, reasons
    assert reasons.get("READ_NO_TARGET", 0) == 0, reasons
