"""Defects an adversarial examination found (red5): statements the engine routes to a reader that
it must not, and state that crosses between clients through a pooled reader. Each is proved
against the real primary + hot standby through the example proxy and compared with the primary
alone (SPEC P-1, S-5, S-6, S-7, §7 F-policy).

Where a read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is
bounded (statement_timeout, connect_timeout, e2e_support.bounded): a missing answer fails fast."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, connect, run, warm, STANDBY_PAUSE_S

BOUND_S = 5.0


def command(conn, sql, params=None) -> None:
    with bounded(conn, BOUND_S, str(sql)[:80]):
        conn.execute(sql, params)


# -- Finding 1: a multibyte client encoding hides calls from the lexer -----------------------------
#
# In SJIS, GBK and GB18030 (client-only encodings) the second byte of a character may be 0x5C, a
# backslash in ASCII. Chosen so the bytes are also valid UTF-8 (the engine classifies only valid
# UTF-8), each prefix below ends with such a character: the server converts the Query string to
# UTF-8 before it lexes it and sees `E'<chars>'` closed by the next quote; the engine's byte lexer
# (src/classify/lexer.rs, quoted_end) reads `\'` as an escaped quote, so to it the string runs on
# to the last quote, past the call, and the call behind the `--` is invisible.
TRAIL = {
    "SJIS": b"\xc3\x81\x5c",  # "ﾃ" + 0x815C "―"; as UTF-8: "Á\"
    "GBK": b"\xe3\x81\x81\x5c",  # 0xE381 + 0x815C; as UTF-8: "ぁ\"
    "GB18030": b"\xe3\x81\x81\x5c",
}


def hidden_call(encoding: str, call: str) -> bytes:
    """`SELECT E'<x>', <call>, inet_server_port() --'`: to the server a string, the call and the
    port; to a lexer that does not know the encoding, one string literal."""
    return b"SELECT E'" + TRAIL[encoding] + b"', " + call.encode() + b", inet_server_port() --'"


@pytest.mark.parametrize("encoding", sorted(TRAIL))
def test_s6_a_call_hidden_by_a_multibyte_encoding_runs_on_the_writer_and_reaches_no_other_client(
        pair, proxy, encoding):
    """Fixed (src/classify/statement.rs encoding_ambiguous). Before: under SJIS, GBK and GB18030 `SELECT
    E'ﾃ―', set_config(…) --'` was classified a plain read, ran on the standby, and 3/3 later
    clients of the same user and encoding read the placeholder on the pooled reader."""
    name = f"app.red5_{encoding.lower()}"
    with connect(proxy.dsn(), client_encoding=encoding) as a:
        warm(a)
        row = run(a, hidden_call(encoding, f"set_config($${name}$$, $$leaked$$, false)"))[0]
    ran_on = "standby" if row[-1] in STANDBY_PORTS else "primary"
    seen = []
    for _ in range(3):
        with connect(proxy.dsn(), client_encoding=encoding) as b:
            warm(b)
            for _ in range(2):
                seen.append(tuple(run(b, f"SELECT current_setting('{name}', true), inet_server_port()")[0]))
    leaked = [s for s in seen if s[0] == "leaked"]
    assert ran_on == "primary" and not leaked, (
        f"set_config hidden by {encoding} ran on the {ran_on}; later clients saw {leaked} of {seen}")


def test_p1_an_advisory_lock_hidden_by_a_multibyte_encoding_is_taken_on_the_primary(pair, proxy):
    """Fixed with the test above. Before: the lock was taken on the standby; the primary's pg_locks
    had 0 such rows and another session took the same lock at once."""
    key = 550_501
    with connect(proxy.dsn(), client_encoding="SJIS") as a:
        warm(a)
        row = run(a, hidden_call("SJIS", f"pg_advisory_lock({key})"))[0]
        with connect(pair.primary.dsn(dbname="app")) as other:
            held = run(other, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s", (key,))
            got = run(other, "SELECT pg_try_advisory_lock(%s)", (key,))[0][0]
            if got:
                run(other, "SELECT pg_advisory_unlock(%s)", (key,))
    ran_on = "standby" if row[-1] in STANDBY_PORTS else "primary"
    assert ran_on == "primary" and held[0][0] == 1 and not got, (
        f"pg_advisory_lock ran on the {ran_on}; the primary holds {held[0][0]} such lock; "
        f"another session could take it: {got}")


def test_p1_a_call_after_a_multibyte_character_in_utf8_is_seen(pair, proxy):
    """Guard: in UTF-8 the same bytes are `E'Á\\'…` — one string for the server too — and a call
    written plainly after a UTF-8 multibyte string stays on the writer."""
    with connect(proxy.dsn()) as a:
        warm(a)
        row = run(a, "SELECT E'Á', set_config('app.red5_utf8', 'x', false), inet_server_port()")[0]
        assert row[-1] == pair.primary.port


# -- Finding 2: random() after setseed() ---------------------------------------------------------


def test_s5_random_after_setseed_is_the_writer_sessions_sequence(pair, proxy):
    def sequence(dsn, through_proxy):
        with connect(dsn) as c:
            if through_proxy:
                warm(c)
            run(c, "SELECT setseed(0.5)")
            return [run(c, "SELECT random(), inet_server_port()")[0] for _ in range(3)]

    primary = sequence(pair.primary.dsn(dbname="app", user="app_trust"), False)
    through = sequence(proxy.dsn(), True)
    assert [r[0] for r in through] == [r[0] for r in primary], (
        f"primary {primary}, through the proxy {through}")


# -- Finding 3: the *_to_xml built-ins read relations named by text -------------------------------


@pytest.mark.parametrize("call", [
    "table_to_xml('pg_catalog.pg_locks', true, false, '')",
    "table_to_xml_and_xmlschema('pg_catalog.pg_locks', true, false, '')",
    "schema_to_xml('pg_catalog', true, false, '')",
])
def test_s7_relations_read_by_table_to_xml_are_the_primarys(pair, proxy, call):
    """Fixed (src/classify/builtins/mod.rs RUNS_SQL_TEXT). Before: table_to_xml('pg_catalog.pg_locks', …)
    through the proxy was the standby's lock table (the advisory lock held on the primary missing)."""
    key = 550_601
    with connect(pair.primary.dsn(dbname="app")) as holder:
        run(holder, "SELECT pg_advisory_lock(%s)", (key,))
        sql = f"SELECT strpos({call}::text, '<objid>{key}</objid>') > 0, inet_server_port()"
        with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
            on_primary = run(direct, sql)[0]
        with connect(proxy.dsn()) as c:
            warm(c)
            through = run(c, sql)[0]
        run(holder, "SELECT pg_advisory_unlock(%s)", (key,))
    assert on_primary[0] is True
    assert through[0] is True, f"the lock held on the primary is missing from {through} (primary: {on_primary})"


def test_s6_a_view_read_by_table_to_xml_leaves_nothing_for_another_client(pair, proxy):
    """Fixed with the test above. Before: table_to_xml('<view calling set_config>') ran on the standby
    and 6/6 later reads of 3 other clients saw the placeholder on the pooled reader."""
    with connect(pair.primary.dsn(dbname="app")) as admin:
        admin.execute("DROP VIEW IF EXISTS red5_sets")
        admin.execute("CREATE VIEW red5_sets AS SELECT set_config('app.red5_view', 'leaked', false) AS v")
        admin.execute("GRANT SELECT ON red5_sets TO PUBLIC")
        pair.wait_replayed()
        try:
            with connect(proxy.dsn()) as a:
                warm(a)
                ran = run(a, "SELECT table_to_xml('red5_sets', true, false, '') IS NOT NULL, inet_server_port()")[0]
            seen = []
            for _ in range(3):
                with connect(proxy.dsn()) as b:
                    warm(b)
                    seen.append(tuple(run(b, "SELECT current_setting('app.red5_view', true), inet_server_port()")[0]))
                    seen.append(tuple(run(b, "SELECT current_setting('app.red5_view', true), inet_server_port()")[0]))
        finally:
            admin.execute("DROP VIEW IF EXISTS red5_sets")
    leaked = [s for s in seen if s[0] == "leaked"]
    assert not leaked, f"table_to_xml ran on {ran[-1]}; later clients saw {leaked} of {seen}"


# -- Finding 4: inet_client_addr()/inet_client_port() -------------------------------------------


def test_s7_inet_client_port_is_the_writer_connections(pair, proxy):
    """Fixed (src/classify/builtins/mod.rs SERVER_DEPENDENT). Before: a read answered with the reader
    connection's client port, not the writer connection's."""
    with connect(proxy.dsn()) as c:
        on_writer = run(c, "SELECT inet_client_port(), pg_backend_pid()")[0][0]  # pg_backend_pid: writer
        warm(c)
        reads = [run(c, "SELECT inet_client_port(), inet_server_port()")[0] for _ in range(3)]
    assert [r[0] for r in reads] == [on_writer] * 3, f"the writer's client port is {on_writer}, the reads said {reads}"


# -- Finding 5: a temporary table created by unseen code ------------------------------------------


@pytest.fixture(scope="module")
def proxy_custom(pair, tmp_path_factory):
    """A proxy whose `custom_settings` names the application's placeholders: the documented way
    (S-5) to let a session's reads leave the writer after it ran code the engine cannot see."""
    from e2e_support import start_proxy, stop_proxy

    p = start_proxy(pair, tmp_path_factory.mktemp("proxy-custom"), settings={"custom_settings": "app.tenant"})
    try:
        yield p
    finally:
        stop_proxy(p)


# S-4: a temporary table created by code the engine cannot see (a user function, here `CREATE TEMP
# TABLE accounts` in PL/pgSQL) shadows public.accounts for this session only. With custom_settings
# covering the application's placeholders the capture after unseen code covered the settings, and
# later reads of `accounts` went to the standby (measured: 100 rows where the primary answers 0).
# The capture now reports that temporary relations exist: the session's reads stay on the writer.
def test_s4_a_temp_table_created_by_a_function_keeps_reads_of_its_name_on_the_writer(pair, proxy_custom):
    with connect(pair.primary.dsn(dbname="app")) as admin:
        admin.execute("CREATE OR REPLACE FUNCTION red5_make_temp() RETURNS int LANGUAGE plpgsql AS "
                      "$$ BEGIN CREATE TEMP TABLE accounts (id int, balance int); RETURN 1; END $$")
        admin.execute("GRANT EXECUTE ON FUNCTION red5_make_temp() TO PUBLIC")
        pair.wait_replayed()
        try:
            with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
                run(direct, "SELECT red5_make_temp()")
                on_primary = run(direct, "SELECT count(*) FROM accounts")[0][0]
            answers = []
            with connect(proxy_custom.dsn()) as c:
                run(c, "SELECT red5_make_temp()")
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    answers.append(tuple(run(c, "SELECT count(*), inet_server_port() FROM accounts")[0]))
                    if answers[-1][1] in STANDBY_PORTS:
                        break
                    time.sleep(STANDBY_PAUSE_S)
        finally:
            admin.execute("DROP FUNCTION IF EXISTS red5_make_temp()")
    assert on_primary == 0
    wrong = [a for a in answers if a[0] != on_primary]
    assert not wrong, f"the primary answers {on_primary}; through the proxy: {answers}"


TEMP_TYPES = {
    # A domain and an enum in pg_temp shadow permanent types of those names (types, unlike
    # functions, are looked up in pg_temp first): an examiner's finding of 2026-12-05 (5 of 5).
    "domain": ("CREATE DOMAIN red5_posint AS int CHECK (VALUE > 0)",
               "CREATE DOMAIN pg_temp.red5_posint AS int CHECK (VALUE < 0)", "SELECT 5::red5_posint"),
    "enum": ("CREATE TYPE red5_mood AS ENUM ('sad', 'ok')",
             "CREATE TYPE pg_temp.red5_mood AS ENUM ('happy')", "SELECT 'sad'::red5_mood::text"),
}


@pytest.mark.parametrize("kind", TEMP_TYPES)
def test_s4_a_temp_type_created_by_a_function_keeps_reads_of_its_name_on_the_writer(pair, proxy_custom, kind):
    permanent, temp, read = TEMP_TYPES[kind]
    name = permanent.split()[2]
    with connect(pair.primary.dsn(dbname="app")) as admin:
        admin.execute(f"DROP TYPE IF EXISTS {name}")
        admin.execute(permanent)
        admin.execute(f"CREATE OR REPLACE FUNCTION red5_make_temp_type() RETURNS int LANGUAGE plpgsql AS "
                      f"$$ BEGIN {temp}; RETURN 1; END $$")
        admin.execute("GRANT EXECUTE ON FUNCTION red5_make_temp_type() TO PUBLIC")
        pair.wait_replayed()
        try:
            def answers(c) -> list:
                out = []
                run(c, "SELECT red5_make_temp_type()")
                for _ in range(8):
                    try:
                        out.append(run(c, read)[0][0])
                    except psycopg.Error as e:
                        out.append(e.sqlstate)
                    time.sleep(0.1)
                return out

            with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
                on_primary = answers(direct)
            with connect(proxy_custom.dsn()) as c:
                through = answers(c)
        finally:
            admin.execute("DROP FUNCTION IF EXISTS red5_make_temp_type()")
            admin.execute(f"DROP TYPE IF EXISTS {name}")
    assert on_primary == [on_primary[0]] * 8 and on_primary[0] in ("23514", "22P02"), on_primary
    assert through == on_primary


# -- Finding 6: age(xid) counts from the answering server's next XID -------------------------------


# Fixed: a one-argument age() (xid or timestamp: the classifier sees no types) and mxid_age go to
# the writer (SERVER_DEPENDENT `age/1`, `mxid_age`); age(a, b) stays on readers.
def test_s7_age_of_an_xid_is_counted_from_the_primarys_next_xid(pair, proxy):
    sql = "SELECT age(datfrozenxid), inet_server_port() FROM pg_database WHERE datname = 'app'"
    with connect(pair.primary.dsn(dbname="app")) as hold:
        hold.autocommit = False
        run(hold, "SELECT txid_current()")
        try:
            pair.wait_replayed()
            with connect(proxy.dsn()) as c, connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
                warm(c)
                # Any other XID assigned meanwhile (autovacuum's ANALYZE) only raises the primary's.
                before = run(direct, sql)[0]
                through = run(c, sql)[0]
                after = run(direct, sql)[0]
        finally:
            hold.rollback()
    assert before[0] <= through[0] <= after[0], f"primary {before} then {after}, through the proxy {through}"


@pytest.fixture(scope="module")
def probe(pair):
    """A stable user function: once a call of it reaches the standby, the proxy has loaded the
    database's catalogue (c-examples/proxy/catalog.c loads it when the database's first client
    connects; until then user functions are unknown and go to the writer)."""
    with connect(pair.primary.dsn(dbname="app")) as admin:
        command(admin, "CREATE OR REPLACE FUNCTION red5_probe() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'")
        command(admin, "GRANT EXECUTE ON FUNCTION red5_probe() TO PUBLIC")
        pair.wait_replayed()
        try:
            yield
        finally:
            command(admin, "DROP FUNCTION IF EXISTS red5_probe()")


def wait_for_catalog(p) -> None:
    """Until the probe's call reaches the standby (at most 5 s); a fresh session each time, since a
    session that ran an unknown function on the writer keeps its reads there."""
    deadline = time.monotonic() + 5
    while True:
        with connect(p.dsn()) as c:
            warm(c)
            if run(c, "SELECT red5_probe(), inet_server_port()")[0][-1] in STANDBY_PORTS:
                return
        assert time.monotonic() < deadline, "the proxy never loaded the database's catalogue"
        time.sleep(0.1)


# -- Finding 7: user aggregates are `immutable` in pg_proc whatever their transition function ----


def test_p1_an_aggregate_with_a_volatile_transition_function_runs_on_the_writer(pair, probe, tmp_path):
    from e2e_support import start_proxy, stop_proxy

    key = 550_701
    with connect(pair.primary.dsn(dbname="app")) as admin:
        admin.execute("DROP AGGREGATE IF EXISTS red5_locking_sum(int)")
        admin.execute(
            "CREATE OR REPLACE FUNCTION red5_locking_step(int, int) RETURNS int VOLATILE LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_advisory_lock({key}); PERFORM set_config('app.red5_agg', 'leaked', false); "
            "RETURN coalesce($1, 0) + $2; END $$")
        admin.execute("CREATE AGGREGATE red5_locking_sum(int) (sfunc = red5_locking_step, stype = int)")
        admin.execute("GRANT EXECUTE ON FUNCTION red5_locking_step(int, int) TO PUBLIC")
        pair.wait_replayed()
        # Started after the aggregate exists: its catalogue has it from the first load.
        p = start_proxy(pair, tmp_path)
        try:
            wait_for_catalog(p)
            with connect(p.dsn()) as c:
                warm(c)
                ran = run(c, "SELECT red5_locking_sum(id), inet_server_port() FROM accounts WHERE id <= 3")[0]
                pid = run(c, "SELECT pg_backend_pid()")[0][0]
                held = run(admin, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
                                  "AND pid = %s", (key, pid))[0][0]
                setting = run(c, "SELECT current_setting('app.red5_agg', true)")[0][0]
                run(c, "SELECT pg_advisory_unlock_all()")
        finally:
            stop_proxy(p)
            admin.execute("DROP AGGREGATE IF EXISTS red5_locking_sum(int)")
            admin.execute("DROP FUNCTION IF EXISTS red5_locking_step(int, int)")
    ran_on = "standby" if ran[-1] in STANDBY_PORTS else "primary"
    assert (ran_on, held, setting) == ("primary", 1, "leaked"), (
        f"the aggregate ran on the {ran_on}; the writer session holds {held} such lock; "
        f"its placeholder is {setting!r}")


# -- Finding 8: a user function that shadows a built-in, until the next catalogue load ------------


def test_s6_a_function_shadowing_a_built_in_reaches_no_other_client(pair, probe, tmp_path):
    from e2e_support import start_proxy, stop_proxy

    path = "-c statement_timeout=5000 -c search_path=public,pg_catalog"
    p = start_proxy(pair, tmp_path, extra=["--catalog-refresh-ms", "600000"])
    try:
        # Loaded before the function exists, and not again during the test.
        wait_for_catalog(p)
        with psycopg.connect(p.dsn(), autocommit=True, connect_timeout=5, options=path) as a:
            command(a, "CREATE FUNCTION public.initcap(text) RETURNS text VOLATILE LANGUAGE plpgsql AS "
                   "$$ BEGIN PERFORM pg_catalog.set_config('app.red5_shadow', 'leaked', false); RETURN 'X'; END $$")
            try:
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    ran = run(a, "SELECT initcap('a'), inet_server_port()")[0]
                    if ran[-1] in STANDBY_PORTS:
                        break
                    time.sleep(STANDBY_PAUSE_S)
                seen = []
                for _ in range(3):
                    with psycopg.connect(p.dsn(), autocommit=True, connect_timeout=5, options=path) as b:
                        warm(b)
                        for _ in range(2):
                            seen.append(tuple(run(b, "SELECT current_setting('app.red5_shadow', true), "
                                                     "inet_server_port()")[0]))
            finally:
                command(a, "DROP FUNCTION public.initcap(text)")
    finally:
        stop_proxy(p)
    leaked = [s for s in seen if s[0] == "leaked"]
    assert not leaked, f"the shadowing function last ran on {ran[-1]}; later clients saw {leaked} of {seen}"


# -- Finding 9: settings of the primary's configuration (ALTER SYSTEM) ----------------------------


# S-5: a user-context setting the primary has from its configuration (ALTER SYSTEM writes
# postgresql.auto.conf, which is not replicated; a standby's own postgresql.conf may differ too)
# sends no ParameterStatus; the capture reads it (pg_settings source 'configuration file') and a
# reader replays it. Before that, measured: the primary answered 'A' / 0.3, the proxy '\x41' /
# 0.30000000000000004 from the standby.
@pytest.mark.parametrize("setting, value, expr", [
    ("bytea_output", "escape", "'A'::bytea::text"),
    ("extra_float_digits", "0", "(0.1::float8 + 0.2::float8)::text"),
])
def test_s5_a_setting_of_the_primarys_configuration_is_the_readers_too(pair, proxy, setting, value, expr):
    sql = f"SELECT {expr}, inet_server_port()"
    with connect(pair.primary.dsn(dbname="app")) as admin:
        command(admin, f"ALTER SYSTEM SET {setting} = '{value}'")
        run(admin, "SELECT pg_reload_conf()")
        try:
            deadline = time.monotonic() + 3
            while run(admin, f"SELECT current_setting('{setting}')")[0][0] != value:
                assert time.monotonic() < deadline, "the primary did not reload its configuration"
                time.sleep(0.05)
            with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
                on_primary = run(direct, sql)[0]
            with connect(proxy.dsn()) as c:
                warm(c)
                through = run(c, sql)[0]
        finally:
            command(admin, f"ALTER SYSTEM RESET {setting}")
            run(admin, "SELECT pg_reload_conf()")
    assert through[0] == on_primary[0], f"primary {on_primary}, through the proxy {through}"
    assert through[1] in STANDBY_PORTS, f"the read ran on the standby: {through}"


# P-5/S-3: a primary whose default_transaction_isolation is 'repeatable read' by its configuration
# (ALTER SYSTEM here; postgresql.conf, ALTER DATABASE/ROLE … SET alike): the capture at the
# session's start reports it, so the transaction's reads stay on the writer. Before that, the
# engine took its own `server_default_isolation` (read committed) and the reads left the writer
# one by one, each on a fresh reader snapshot: measured 1 then 2 rows in one transaction.
def test_p5_a_transaction_repeatable_read_by_the_servers_default_reads_one_snapshot(pair, proxy):
    with connect(pair.primary.dsn(dbname="app")) as admin:
        command(admin, "DROP TABLE IF EXISTS red5_rr")
        command(admin, "CREATE TABLE red5_rr (id int)")
        command(admin, "GRANT ALL ON red5_rr TO PUBLIC")
        command(admin, "ALTER SYSTEM SET default_transaction_isolation = 'repeatable read'")
        run(admin, "SELECT pg_reload_conf()")
        pair.wait_replayed()
        try:
            results = {}
            for who, dsn in (("primary", pair.primary.dsn(dbname="app", user="app_trust")),
                             ("proxy", proxy.dsn())):
                with connect(dsn) as c:
                    if who == "proxy":
                        warm(c)
                    assert run(c, "SHOW transaction_isolation")[0][0] == "repeatable read"
                    command(c, "BEGIN")
                    first = run(c, "SELECT count(*), inet_server_port() FROM red5_rr")[0]
                    command(admin, "INSERT INTO red5_rr VALUES (1)")
                    pair.wait_replayed()
                    second = run(c, "SELECT count(*), inet_server_port() FROM red5_rr")[0]
                    command(c, "ROLLBACK")
                    results[who] = (first, second)
        finally:
            command(admin, "ALTER SYSTEM RESET default_transaction_isolation")
            run(admin, "SELECT pg_reload_conf()")
            command(admin, "DROP TABLE IF EXISTS red5_rr")
    (p1, p2), (x1, x2) = results["primary"], results["proxy"]
    assert p1[0] == p2[0], f"the primary itself: {results['primary']}"
    assert x1[0] == x2[0], f"one REPEATABLE READ transaction through the proxy read {results['proxy']}"
