"""The F-policy through the example proxy (SPEC §7): the proxy loads the writer's user functions of
each database the first time a client of it connects and refreshes them every
--catalog-refresh-ms, and the engine judges calls by them — reads calling an immutable or stable
user function are served by the standby, a volatile one by the primary, a function created after
the proxy started is picked up at the next refresh, and one dropped and recreated as volatile stops
going to the standby. The control is the same proxy with --no-function-catalog: every user function
call stays on the primary.

Where a read ran is told by inet_server_port() (replica-safe, S-7); the functions are created on
the shared pair's primary and dropped at the end."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import create_function, report, start_proxy, stop_proxy, user_functions, where

REFRESH_MS = 300
BOUND_S = 10  # every wait for the catalogue, far above the refresh period
N = 40

FUNCTIONS = {
    "f_stable_read": "STABLE",
    "f_immutable_read": "IMMUTABLE",
    "f_volatile_read": "VOLATILE",
}
LATE = "f_late_read"


def read_sql(name: str) -> str:
    return f"SELECT {name}(), inet_server_port()"


def on_standby(proxy, name: str, n: int = N, fresh: bool = False) -> int:
    """How many of `n` reads calling `name()` the standby served: in one new session, or each in a
    new session of its own (`fresh`). A call the primary runs may leave session state the engine
    cannot see (user code ran), so it keeps that session on the primary (S-6): only a new session
    shows where the catalogue alone sends a read."""
    if fresh:
        return sum(on_standby(proxy, name, 1) for _ in range(n))
    with psycopg.connect(proxy.dsn(), autocommit=True) as c:
        return sum(where(c, read_sql(name)) == "standby" for _ in range(n))


def wait_until(proxy, name: str, place: str, what: str, since: float | None = None) -> float:
    """Polls a read of `name()`, each in a new session, until `place` serves it; returns the seconds
    since `since` (default: now), bounded."""
    t0 = time.monotonic() if since is None else since
    while on_standby(proxy, name, 1) != (place == "standby"):
        assert time.monotonic() - t0 < BOUND_S, f"{what}: not on the {place} within {BOUND_S} s"
        time.sleep(0.02)
    return time.monotonic() - t0


@pytest.fixture
def functions(pair):
    with user_functions(pair, FUNCTIONS, [LATE]) as admin:
        yield admin


@pytest.mark.timeout(120)
def test_f_policy_user_functions_by_the_writers_catalogue_loaded_and_refreshed_by_the_proxy(
        pair, functions, tmp_path):
    admin = functions
    # Under AddressSanitizer: every load and refresh of catalog.c is checked for memory errors and leaks.
    proxy = start_proxy(pair, tmp_path / "catalog", asan=True, extra=["--catalog-refresh-ms", str(REFRESH_MS)])
    control = start_proxy(pair, tmp_path / "control", extra=["--no-function-catalog"])
    try:
        first_client = time.monotonic()
        with psycopg.connect(proxy.dsn(), autocommit=True) as c, \
                psycopg.connect(control.dsn(), autocommit=True) as k:
            assert where(c) == "standby" and where(k) == "standby"  # plain reads: the standby
        # The first client of `app` made the proxy load its catalogue.
        loaded_s = wait_until(proxy, "f_stable_read", "standby", "a stable function after the first load",
                              since=first_client)
        shares = {name: on_standby(proxy, name, fresh=name == "f_volatile_read") for name in FUNCTIONS}
        control_shares = {name: on_standby(control, name, fresh=True) for name in FUNCTIONS}

        # A function created after the proxy started: picked up by the next refresh.
        created = time.monotonic()
        create_function(admin, LATE, "STABLE")
        pair.wait_replayed()  # the standby must have it to run it
        late_s = wait_until(proxy, LATE, "standby", "a function created after the start", since=created)
        late_share = on_standby(proxy, LATE)

        # Dropped and recreated as volatile (in one transaction, as a migration does: no load can
        # see it missing): it stops going to the standby.
        recreated = time.monotonic()
        with admin.transaction():
            admin.execute("DROP FUNCTION f_stable_read()")
            create_function(admin, "f_stable_read", "VOLATILE")
        dropped_s = wait_until(proxy, "f_stable_read", "primary", "a function recreated as volatile",
                               since=recreated)
        mid = proxy.stats()
        after_drop = on_standby(proxy, "f_stable_read", fresh=True)
        stats, control_stats = proxy.stats(), control.stats()
    finally:
        stop_proxy(proxy)
        stop_proxy(control)
    report("F-policy: the writer's function catalogue through the proxy",
           f"first load: a stable function on the standby {loaded_s:.2f} s after the first client connected; "
           f"reads on the standby out of {N}: " + ", ".join(f"{k} {v}" for k, v in shares.items())
           + "; control (--no-function-catalog): " + ", ".join(f"{k} {v}" for k, v in control_shares.items())
           + f"; created later: on the standby {late_s:.2f} s after its CREATE ({late_share}/{N}, the standby "
           f"replays with a {pair.apply_delay_ms} ms delay); recreated volatile: off the standby "
           f"{dropped_s:.2f} s after the DROP ({after_drop}/{N} fresh sessions after); refresh {REFRESH_MS} ms; "
           f"catalog_loads {stats['proxy']['catalog_loads']}, catalog_failures {stats['proxy']['catalog_failures']}")
    assert shares["f_stable_read"] == N and shares["f_immutable_read"] == N, shares
    assert shares["f_volatile_read"] == 0, shares
    assert control_shares == {name: 0 for name in FUNCTIONS}, control_shares
    assert control_stats["reason"].get("UNKNOWN_FUNCTION", 0) >= 3 * N
    # The recreated one, judged by the catalogue: each of the N new sessions' one read.
    judged = stats["reason"].get("USER_FUNCTION", 0) - mid["reason"].get("USER_FUNCTION", 0)
    assert judged == N, f"{judged} of the {N} reads after the DROP were judged USER_FUNCTION"
    assert mid["reason"].get("USER_FUNCTION", 0) >= N  # f_volatile_read's
    assert late_share == N and after_drop == 0
    assert stats["proxy"]["catalog_loads"] >= 3 and stats["proxy"]["catalog_failures"] == 0, stats["proxy"]
    assert control_stats["proxy"]["catalog_loads"] == 0


def test_s6_a_catalogue_load_gives_way_to_a_clients_locks(pair, tmp_path):
    """The catalogue load reads each view's definition with pg_get_viewdef, which locks the view
    and every relation it reads (AccessShareLock, to the end of the load's query). A client whose
    DDL takes those in another order would deadlock with the load, and PostgreSQL may cancel the
    client's statement: found by PostgreSQL's regression suite through the proxy (`DROP SCHEMA
    collate_tests CASCADE`: "deadlock detected"). The load now waits for a lock at most 100 ms
    (`SET LOCAL lock_timeout`), fails and is retried. Here: a client holds t2, its own DDL
    in another session starts a load that takes the view v and t1 and waits for t2; the client
    then locks t1 (with a 10 ms deadlock_timeout, so it would be the one to find the deadlock)."""
    db = "catalogue_locks"
    pair.primary.psql(f"DROP DATABASE IF EXISTS {db}")
    pair.primary.psql(f"CREATE DATABASE {db}")
    for sql in ("CREATE TABLE t1 (a int)", "CREATE TABLE t2 (a int)", "CREATE VIEW v AS SELECT t1.a FROM t1, t2"):
        pair.primary.psql(sql, dbname=db)
    pair.wait_replayed()
    proxy = start_proxy(pair, tmp_path / "locks")
    try:
        dsn = proxy.dsn(user="postgres", dbname=db)
        with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
            a.execute("SELECT 1")  # the database's first load is done before a statement runs
            a.execute("BEGIN")
            a.execute("LOCK TABLE t2 IN ACCESS EXCLUSIVE MODE")
            b.execute("CREATE TABLE t3 (a int)")  # DDL: the proxy loads the catalogue at once
            time.sleep(0.5)  # the load waits for t2 (it gives up after 100 ms; its retry is 1 s later)
            a.execute("SET LOCAL deadlock_timeout = '10ms'")
            a.execute("LOCK TABLE t1 IN ACCESS EXCLUSIVE MODE")  # before: 40P01 deadlock detected
            a.execute("COMMIT")
        # The load that gave way is retried and succeeds: reads of the database (in a new session:
        # the one that ran DDL stays on the writer) come back to the standby.
        deadline = time.monotonic() + BOUND_S
        while True:
            with psycopg.connect(dsn, autocommit=True) as c:
                if where(c, "SELECT a, inet_server_port() FROM v UNION ALL SELECT NULL, inet_server_port()") == "standby":
                    break
            assert time.monotonic() < deadline, "the catalogue was not loaded again after the client's locks"
            time.sleep(0.05)
        stats = proxy.stats()
    finally:
        stop_proxy(proxy)
        pair.primary.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    assert stats["proxy"]["catalog_failures"] >= 1, stats["proxy"]  # the load that gave way
