"""SPEC S-5 end to end: a read on a reader runs with exactly the writer session's settings, also
those the session got from neither a SET nor anything the replay sets (red-team probe h21,
2026-12-05). Found then, each a read on the standby that the primary would not give:

- a `user`-context setting changed only in the standby's configuration (`ALTER SYSTEM SET
  extra_float_digits = -2` and a reload on the standby; the primary at its built-in default):
  reads ran with the standby's value (other float text, `NULL = NULL` true, a 57014 from the
  standby's `statement_timeout`), on fresh and on pooled reader connections alike;
- a `superuser`-context login default of a non-superuser (`ALTER ROLE … SET temp_file_limit`),
  which the replay cannot set: a pooled reader connection that logged in before the ALTER (or
  before a later RESET) kept its login's value, where a new session on the primary has the other
  (a sort the primary refuses with 53400 succeeded through the proxy).

The capture now also returns a digest of every setting a statement can see, the replay ends by
asserting the reader connection's equals it (else the connection is closed and the read runs
elsewhere; refused twice, the session stays on the writer for 16, then 32, 64, 128 statements),
the digest is part of the reader key, and a standby's configuration reload (its `pg_conf_load_time()`, read by the proxy's monitor)
changes every key, so connections pooled before it are not handed out again. Each case compares
the proxy's answers with the primary's."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, on_primary, wait_until

ROLE = "s5else_u"
SCHEMA = [f"DROP ROLE IF EXISTS {ROLE}", f"CREATE ROLE {ROLE} LOGIN"]

# Settings a standby's configuration may give, with what shows each in a read.
STANDBY_CONF = {
    "extra_float_digits": "-2",
    "transform_null_equals": "on",
    "array_nulls": "off",
    "quote_all_identifiers": "on",
    "IntervalStyle": "sql_standard",
    "statement_timeout": "1234",
}
READS = [
    "SELECT (1.0::float8 / 3)::text, (NULL = NULL) IS TRUE, ('{a,NULL}'::text[])[2] IS NULL,"
    " quote_ident('abc'), (interval '1 day 2 hours')::text, inet_server_port()",
    "SELECT pg_sleep(1.5)::text, inet_server_port()",
]


@pytest.fixture(scope="module")
def role(pair):
    on_primary(pair, *SCHEMA)
    yield ROLE
    on_primary(pair, f"ALTER ROLE {ROLE} RESET ALL", f"DROP ROLE IF EXISTS {ROLE}")


def dsn_as(base: str, user: str) -> str:
    return " ".join([p for p in base.split() if not p.startswith("user=")] + [f"user={user}"])


def outcome(c, sql: str):
    """The answer without its last column (where it ran), or the SQLSTATE."""
    try:
        return [row[:-1] for row in c.execute(sql).fetchall()]
    except psycopg.Error as e:
        return e.sqlstate


def reads(dsn: str, statements: list[str], clients: int = 1) -> list:
    """Each of `clients` concurrent sessions runs `statements` once (concurrent sessions take
    several pooled reader connections); returns the answers, sorted, and where they ran."""
    out, where = [], []

    def client():
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as c, bounded(c, 40, "reads"):
            time.sleep(0.3)  # the startup capture answered
            for sql in statements:
                out.append((sql, outcome(c, sql)))
                try:
                    where.append(c.execute("SELECT inet_server_port()").fetchone()[0])
                except psycopg.Error:
                    pass

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return sorted(out, key=repr), where


def on_standby(pair, *statements: str) -> None:
    with psycopg.connect(pair.standby.dsn(dbname="app"), autocommit=True) as c:
        for sql in statements:
            c.execute(sql)


def standby_reads_again(proxy_dsn: str) -> None:
    """After the test: the session's reads reach the standby again (the keys moved on)."""

    def check():
        with psycopg.connect(proxy_dsn, autocommit=True, connect_timeout=10) as c:
            time.sleep(0.3)
            ports = [c.execute("SELECT inet_server_port()").fetchone()[0] for _ in range(3)]
        return any(p in STANDBY_PORTS for p in ports), ports

    wait_until(check, "reads back on the standby after its configuration was restored", timeout=30)


@pytest.mark.timeout(240)
def test_s5_a_setting_only_the_standbys_configuration_has_never_rules_a_read(pair, proxy):
    primary = dsn_as(pair.primary.dsn(dbname="app"), "app_trust")
    through = dsn_as(proxy.dsn(), "app_trust")
    # Reader connections pooled before the standby's reload, and one read there to be sure.
    reads(through, ["SELECT 1, inet_server_port()"], clients=3)
    try:
        on_standby(pair, *[f"ALTER SYSTEM SET {k} = '{v}'" for k, v in STANDBY_CONF.items()],
                   "SELECT pg_reload_conf()")
        time.sleep(1)
        for round_ in range(3):
            direct, _ = reads(primary, READS, clients=2)
            proxied, _ = reads(through, READS, clients=2)
            assert proxied == direct, f"round {round_}: through the proxy {proxied}, the primary {direct}"
    finally:
        on_standby(pair, *[f"ALTER SYSTEM RESET {k}" for k in STANDBY_CONF], "SELECT pg_reload_conf()")
    time.sleep(0.5)
    standby_reads_again(through)


# A sort that writes a temporary file of several MB: 53400 under temp_file_limit = 1MB.
SORT = ("SELECT current_setting('temp_file_limit'),"
        " (SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s),"
        " inet_server_port()")


def sort_reads(dsn: str, clients: int = 4) -> list:
    out = []

    def client():
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as c, bounded(c, 40, "sort"):
            c.execute("SET work_mem = '64kB'")
            time.sleep(0.3)
            out.append(outcome(c, SORT))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return sorted(out, key=repr)


@pytest.mark.timeout(240)
def test_s5_a_superuser_context_login_default_is_the_primarys_on_pooled_readers(pair, proxy, role):
    primary = dsn_as(pair.primary.dsn(dbname="app"), role)
    through = dsn_as(proxy.dsn(), role)
    admin = pair.primary.dsn(dbname="app")
    # Pooled reader connections of this login, before the ALTER.
    before = sort_reads(through)
    assert before == sort_reads(primary), before
    results = {}
    try:
        for step in (f"ALTER ROLE {role} SET temp_file_limit = '1MB'", f"ALTER ROLE {role} RESET temp_file_limit"):
            with psycopg.connect(admin, autocommit=True) as c:
                c.execute(step)
            pair.wait_replayed()
            time.sleep(0.3)
            for round_ in range(2):
                direct, proxied = sort_reads(primary), sort_reads(through)
                results[(step, round_)] = (direct, proxied)
    finally:
        on_primary(pair, f"ALTER ROLE {role} RESET ALL")
    bad = {k: v for k, v in results.items() if v[0] != v[1]}
    assert not bad, f"(the primary, through the proxy) differ: {bad}"


FLOAT = "SELECT (1.0::float8 / 3)::text, inet_server_port()"


@pytest.mark.timeout(120)
def test_s5_a_session_refused_by_a_misconfigured_standby_reads_there_again_once_it_is_put_back(pair, proxy):
    """A session that lives through it: the standby's configuration differs (its replays are
    refused, twice, and the session's reads stay on the primary), then is put back. Before, the
    session read on the primary for good — a pooled application connection lost its offload
    until it reconnected; now a reader is tried again after 16, 32, 64, 128 statements."""
    with psycopg.connect(pair.primary.dsn(dbname="app", user="app_trust"), autocommit=True) as c:
        expected = c.execute(FLOAT).fetchone()[0]
    with psycopg.connect(dsn_as(proxy.dsn(), "app_trust"), autocommit=True) as c, bounded(c, 100, "reads"):
        time.sleep(0.3)
        c.execute(FLOAT).fetchone()
        try:
            on_standby(pair, "ALTER SYSTEM SET extra_float_digits = '-2'", "SELECT pg_reload_conf()")
            time.sleep(1)
            for _ in range(10):
                assert c.execute(FLOAT).fetchone()[0] == expected
        finally:
            on_standby(pair, "ALTER SYSTEM RESET extra_float_digits", "SELECT pg_reload_conf()")
        time.sleep(1)
        where = []
        for _ in range(60):
            text, port = c.execute(FLOAT).fetchone()
            assert text == expected
            where.append(port)
    assert sum(p in STANDBY_PORTS for p in where[-20:]) >= 18, (where, proxy.stats()["reason"])


def log_lines(dsn: str) -> list:
    """A session that asks for LOG messages, three reads: the notices it got, the answers."""
    notices, answers = [], []
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 30, "log reads"):
        c.add_notice_handler(lambda d: notices.append((d.severity_nonlocalized, d.message_primary[:9])))
        c.execute("SET client_min_messages = log")
        time.sleep(0.3)
        for _ in range(3):
            answers.append(c.execute("SELECT count(*) FROM accounts").fetchone())
            c.execute("SELECT count(*) FROM accounts", prepare=True).fetchone()
    return notices, answers


@pytest.mark.timeout(120)
def test_s5_a_standby_only_log_setting_sends_no_log_line_to_a_client_that_asks_for_them(pair, proxy):
    """`log_*` settings only decide what a server writes to its own log — unless the client lowers
    `client_min_messages` to `log`: then the server sends the lines to it too. A standby that logs
    every statement where the primary logs none sent a client at that level `LOG: duration: …`
    lines (naming the engine's statements) the primary never sends (an examiner's finding of
    2026-12-05, 10/10). For such a session the `log_*` settings are in the settings digest."""
    direct = log_lines(dsn_as(pair.primary.dsn(dbname="app"), "app_trust"))
    assert direct[0] == [], direct
    try:
        on_standby(pair, "ALTER SYSTEM SET log_min_duration_statement = 0", "SELECT pg_reload_conf()")
        time.sleep(1)
        for _ in range(3):
            assert log_lines(dsn_as(proxy.dsn(), "app_trust")) == direct
    finally:
        on_standby(pair, "ALTER SYSTEM RESET log_min_duration_statement", "SELECT pg_reload_conf()")
    time.sleep(0.5)
    standby_reads_again(dsn_as(proxy.dsn(), "app_trust"))
