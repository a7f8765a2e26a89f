"""Where each statement runs, checked by real clients through the proxy (built with AddressSanitizer)
against a real primary + hot standby (stock PostgreSQL 15: dialect `stock`, startup profile `off`).

Every statement under test reports its own server (`inet_server_port()`, replica-safe on purpose:
S-7 keeps `pg_is_in_recovery()` on the primary)."""

import threading
import time

import psycopg
import pytest

from e2e_support import ports, where

pytestmark = pytest.mark.usefixtures("asan_proxy")


@pytest.fixture
def conn(asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        yield c


def ran_on(pair, conn, sql, params=None):
    row = conn.execute(sql, params).fetchone()
    return ports(pair)[row[-1]], row


def test_p3_plain_reads_run_on_the_standby(pair, conn):
    assert where(conn) == "standby"
    assert ran_on(pair, conn, "SELECT balance, inet_server_port() FROM accounts WHERE id = 1")[0] == "standby"
    assert ran_on(pair, conn, "VALUES (1, inet_server_port())")[0] == "standby"


def test_ssl_request_is_refused_and_the_client_goes_on_in_clear(asan_proxy):
    with psycopg.connect(asan_proxy.dsn(sslmode="prefer"), autocommit=True) as c:
        assert where(c) == "standby"


def test_p3_writes_and_locking_reads_run_on_the_primary(pair, conn, asan_proxy):
    assert ran_on(pair, conn, "INSERT INTO kv VALUES (1, 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1 "
                  "RETURNING inet_server_port()")[0] == "primary"
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as fresh:
        assert ran_on(pair, fresh, "SELECT id, inet_server_port() FROM accounts "
                      "WHERE id = 2 FOR UPDATE")[0] == "primary"
        assert ran_on(pair, fresh, "SELECT id, inet_server_port() FROM accounts "
                      "WHERE id = 2 FOR SHARE")[0] == "primary"


def test_s4_write_functions_run_on_the_primary(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        place, row = ran_on(pair, c, "SELECT nextval('seq'), inet_server_port()")
        assert place == "primary" and row[0] >= 1
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        place, row = ran_on(pair, c, "SELECT set_config('app.tenant', '42', false), inet_server_port()")
        assert place == "primary"
        # The setting lives on the primary connection only: later reads must see it (S-4).
        place, row = ran_on(pair, c, "SELECT current_setting('app.tenant'), inet_server_port()")
        assert (place, row[0]) == ("primary", "42")


def reasons(proxy):
    return proxy.stats()["reason"]


def delta(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before) if after.get(k, 0) != before.get(k, 0)}


# After a statement that may have written, on stock PostgreSQL: the primary while the write's
# position is unknown (the library's post-write probe has not answered) or no standby is known to
# have replayed it; a standby known to have replayed it (READ_CAUGHT_UP) otherwise.
AFTER_WRITE = {"MISSING_LSN_PRIMARY": "primary", "READ_NO_BOUNDED_WAIT": "primary", "READ_CAUGHT_UP": "standby"}


def assert_decided_by_the_write(c, delta_of):
    place = where(c)
    d = delta_of()
    assert len(d) == 1 and list(d.values()) == [1], d
    reason = next(iter(d))
    assert AFTER_WRITE.get(reason) == place, (reason, place)


def test_s4_advisory_locks_pin_reads_to_the_primary_until_unlocked(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        assert where(c) == "standby"
        assert ran_on(pair, c, "SELECT pg_advisory_lock(7), inet_server_port()")[0] == "primary"
        before = reasons(asan_proxy)
        assert where(c) == "primary"  # the lock lives on the primary connection
        assert delta(reasons(asan_proxy), before) == {"SESSION_HAZARD": 1}
        assert ran_on(pair, c, "SELECT pg_advisory_unlock_all(), inet_server_port()")[0] == "primary"
        before = reasons(asan_proxy)
        # The hazard is gone: what decides now is that the lock call "may have written" (P-6).
        assert_decided_by_the_write(c, delta_of=lambda: delta(reasons(asan_proxy), before))


def test_s4_temporary_tables_stay_on_the_primary(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        c.execute("CREATE TEMP TABLE s4_scratch AS SELECT 1 AS x")
        before = reasons(asan_proxy)
        place, row = ran_on(pair, c, "SELECT x, inet_server_port() FROM s4_scratch")
        assert (place, row[0]) == ("primary", 1)
        assert delta(reasons(asan_proxy), before) == {"SESSION_HAZARD": 1}
        c.execute("DISCARD TEMP")
        before = reasons(asan_proxy)
        assert_decided_by_the_write(c, delta_of=lambda: delta(reasons(asan_proxy), before))


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_p5_snapshot_transactions_run_on_the_primary(pair, asan_proxy, level):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        c.execute(f"BEGIN ISOLATION LEVEL {level}")
        assert where(c) == "primary"
        assert where(c) == "primary"
        c.execute("COMMIT")


def test_p5_read_committed_read_only_prefix_may_use_the_standby_then_writes_stay_on_the_primary(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        first = where(c)
        # SPEC P-5: before the first write a READ COMMITTED read may leave the writer (no import
        # needed, nothing to wait for on a fresh session); stock servers cannot import XIDs, so
        # after a write every read stays on the primary and sees the transaction's own row.
        assert first in ("standby", "primary")
        c.execute("INSERT INTO kv VALUES (1000, 1) ON CONFLICT (k) DO UPDATE SET v = 1")
        place, row = ran_on(pair, c, "SELECT v, inet_server_port() FROM kv WHERE k = 1000")
        assert (place, row[0]) == ("primary", 1)
        c.execute("ROLLBACK")
        assert first == "standby", "a read-only READ COMMITTED prefix was expected on the standby (P-5)"


def test_transactions_keep_their_semantics(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn()) as c:  # psycopg opens a transaction implicitly
        c.execute("INSERT INTO kv VALUES (2000, 5) ON CONFLICT (k) DO UPDATE SET v = 5")
        assert c.execute("SELECT v FROM kv WHERE k = 2000").fetchone()[0] == 5
        c.rollback()
        assert c.execute("SELECT count(*) FROM kv WHERE k = 2000").fetchone()[0] == 0


def test_f2_a_function_the_standby_refuses_is_answered_by_the_primary(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        assert where(c) == "standby"
        # Unknown functions stay on the primary (F-policy) unless the hint declares them read-safe.
        note = c.execute("/* route=reader */ SELECT log_note('hello')").fetchone()[0]
        assert note == f"hello@{pair.primary.port}"  # retried transparently on the primary
    stats = asan_proxy.stats()
    assert stats["reason"].get("RETRY_PRIMARY_AFTER_ERROR", 0) >= 1


def test_s7_a_read_of_an_unlogged_table_goes_to_the_primary_without_a_refusal(pair, asan_proxy):
    before = asan_proxy.stats()
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        assert where(c) == "standby"
        place, row = ran_on(pair, c, "SELECT n, inet_server_port() FROM scratch")
        assert place == "primary" and row[0] == 1
    after = asan_proxy.stats()
    assert after["counter"]["failures_reusable_error"] == before["counter"]["failures_reusable_error"]


def test_p3_multi_statement_queries_run_on_the_primary(pair, conn):
    assert ran_on(pair, conn, "SELECT inet_server_port(); SELECT 1")[0] == "primary"


def test_p3_extended_protocol_self_contained_reads_use_the_standby(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        place, row = ran_on(pair, c, "SELECT %s::int, inet_server_port()", (7,))
        assert (place, row[0]) == ("standby", 7)
        # Named prepared statements run on the standby too, under an engine name (E-2).
        cur = c.cursor()
        for i in range(3):
            cur.execute("SELECT %s::int, inet_server_port()", (8 + i,), prepare=True)
            row = cur.fetchone()
            assert (ports(pair)[row[1]], row[0]) == ("standby", 8 + i)
        # After a write the read needs a position no standby is known to have replayed within
        # the apply delay, and stock PostgreSQL 15 cannot wait: the primary.
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        c.execute("UPDATE kv SET v = v WHERE k = 1")
        place, _ = ran_on(pair, c, "SELECT %s::int, inet_server_port()", (9,))
        assert place == "primary"


def test_after_a_write_reads_stay_on_the_primary_until_the_standby_replayed_it(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        assert where(c) == "standby"
        c.execute("UPDATE accounts SET balance = balance WHERE id = 3")
        # Stock servers report no LSN and have no bounded wait: within the 200 ms apply delay no
        # standby has replayed the write, so the read goes to the primary (P-4, W-7).
        assert where(c) == "primary"


@pytest.mark.parametrize("user", ["app_trust", "app_clear", "app_md5", "app_scram"])
def test_reader_logins_with_every_method(pair, asan_proxy, user):
    with psycopg.connect(asan_proxy.dsn(user), autocommit=True) as c:
        assert c.execute("SELECT current_user").fetchone()[0] == user
        assert where(c) == "standby"


def test_a_user_without_reader_credentials_never_leaves_the_primary(pair, asan_proxy):
    reasons = ("READER_NO_CREDENTIALS", "MISSING_LSN_PRIMARY")
    before = {r: asan_proxy.stats()["reason"].get(r, 0) for r in reasons}
    with psycopg.connect(asan_proxy.dsn("app_nocreds"), autocommit=True) as c:
        for _ in range(3):
            assert where(c) == "primary"
    stats = asan_proxy.stats()
    assert stats["reason"].get("READER_NO_CREDENTIALS", 0) >= before["READER_NO_CREDENTIALS"] + 1
    # The reads after the first: no reader has been shown to have replayed what the primary
    # answered (S-1a, stock) until a writer sample bounds it, and none may serve anyway.
    assert sum(stats["reason"].get(r, 0) - before[r] for r in reasons) >= 3
    assert stats["proxy"]["reader_no_credentials"] >= 1


def test_cancel_reaches_the_server_running_the_statement(pair, asan_proxy):
    with psycopg.connect(asan_proxy.dsn(), autocommit=True) as c:
        assert where(c) == "standby"
        timer = threading.Timer(0.5, c.cancel)
        timer.start()
        t0 = time.time()
        with pytest.raises(psycopg.errors.QueryCanceled):
            c.execute("SELECT pg_sleep(10)")
        assert time.time() - t0 < 5
        timer.join()
        assert where(c) == "standby"  # the session goes on


def test_counters_name_destinations_and_reasons(asan_proxy):
    stats = asan_proxy.stats()
    assert stats["outcome"]["REPLICA_WITH_WAIT"] > 0 and stats["outcome"]["FORCE_PRIMARY"] > 0
    for reason in ("READ_NO_TARGET", "NOT_A_READ", "LOCKING_CLAUSE", "WRITE_FUNCTION", "SESSION_HAZARD",
                   "MULTI_STATEMENT"):
        assert stats["reason"].get(reason, 0) > 0, (reason, stats["reason"])
    # Reads right after a write (stock: position unknown, or no standby known to have replayed it).
    assert stats["reason"].get("MISSING_LSN_PRIMARY", 0) + stats["reason"].get("READ_NO_BOUNDED_WAIT", 0) > 0
    assert stats["counter"]["monitor_samples"] > 0
    assert stats["counter"]["pool_hits"] > 0
