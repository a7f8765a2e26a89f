"""Defects found by an adversarial examination (branch red1): a client talking through the example
proxy (library mode, real PostgreSQL 15 primary + hot standby) sees something the primary alone
would not show. Each test compares the proxied client with a *twin* — a direct connection to the
primary as the same user running the same statements — or with what PostgreSQL documents, and says
where each read ran (`inet_server_port()`, replica-safe on purpose, S-7).

All of them failed on the code they were written against (main at 7ab1374); each names the
mechanism the examiner believes is at fault. Two are fixed on branch red1 and pass there:
test_s1a_a_write_hidden_in_a_read_is_seen_by_the_next_read (a read the standby refused and the
primary re-ran counts as a possible write) and test_e1_a_batch_larger_than_max_batch_bytes_is_answered
(a batch cut at max_batch_bytes goes to the writer). The others still fail on red1."""

from __future__ import annotations

import asyncio
import time

import asyncpg

import psycopg
import pytest

from e2e_support import Hang, bounded, on_primary, wait_until

SETUP = r"""
CREATE ROLE red1_rr NOLOGIN;
-- A web login that has red1_rr's privileges only after SET ROLE (NOINHERIT).
CREATE ROLE red1_web LOGIN NOINHERIT;
GRANT red1_rr TO red1_web;
CREATE TABLE red1_secret (x int);
INSERT INTO red1_secret VALUES (1);
GRANT SELECT ON red1_secret TO red1_rr;
-- Views whose text hides a call to set_config: reading them looks like a plain read.
CREATE VIEW red1_v_role AS SELECT set_config('role', 'red1_rr', false) AS r;
CREATE VIEW red1_v_tenant AS SELECT set_config('red1.tenant', 'acme', false) AS t;
GRANT SELECT ON red1_v_role, red1_v_tenant TO PUBLIC;
CREATE TABLE red1_log (id serial PRIMARY KEY, note text);
GRANT ALL ON red1_log TO PUBLIC;
GRANT ALL ON SEQUENCE red1_log_id_seq TO PUBLIC;
-- Writes hidden from the text: a view over a volatile writing function, and a STABLE function
-- that calls one (PostgreSQL allows a non-volatile function to call a volatile one).
CREATE FUNCTION red1_write(t text) RETURNS int VOLATILE LANGUAGE sql AS
  $$ INSERT INTO red1_log (note) VALUES (t) RETURNING id $$;
CREATE VIEW red1_v_write AS SELECT red1_write('view') AS id;
CREATE FUNCTION red1_stable_write() RETURNS int STABLE LANGUAGE plpgsql AS
  $$ BEGIN RETURN red1_write('stable'); END $$;
GRANT SELECT ON red1_v_write TO PUBLIC;
CREATE ROLE red1_u2 LOGIN;
CREATE SCHEMA red1_s;
CREATE TABLE red1_s.red1_t (v text);
INSERT INTO red1_s.red1_t VALUES ('in red1_s');
CREATE TABLE public.red1_t (v text);
INSERT INTO public.red1_t VALUES ('in public');
GRANT USAGE ON SCHEMA red1_s TO PUBLIC;
GRANT SELECT ON red1_s.red1_t, public.red1_t TO PUBLIC;
-- Code hidden in an operator, a domain CHECK and a cast, each calling set_config (S-6 names them).
CREATE FUNCTION red1_opf(int, int) RETURNS int STABLE LANGUAGE sql AS
  $$ SELECT $1 + $2 + 0 * length(set_config('red1.hidden', 'operator', false)) $$;
CREATE OPERATOR #+# (leftarg = int, rightarg = int, function = red1_opf);
CREATE FUNCTION red1_chk(int) RETURNS bool STABLE LANGUAGE sql AS
  $$ SELECT length(set_config('red1.hidden', 'domain', false)) > 0 $$;
CREATE DOMAIN red1_dom AS int CHECK (red1_chk(VALUE));
CREATE TYPE red1_ty AS (a int);
CREATE FUNCTION red1_castf(red1_ty) RETURNS text STABLE LANGUAGE sql AS
  $$ SELECT set_config('red1.hidden', 'cast', false) $$;
CREATE CAST (red1_ty AS text) WITH FUNCTION red1_castf(red1_ty);
-- Tells when the proxy's catalogue has the objects above: a view over a server-dependent function
-- reads on the primary once it is reported, on the standby before.
CREATE VIEW red1_catalog_mark AS SELECT pg_is_in_recovery() AS r;
GRANT SELECT ON red1_catalog_mark TO PUBLIC;
"""


@pytest.fixture(scope="module")
def objects(pair, proxy):
    on_primary(pair, SETUP)

    # The proxy re-reads each database's catalogue every 10 s: wait until it has these objects
    # (a plain read of the same session reaches the standby, so the mark is not on the primary
    # only because no reader was ready).
    def catalogued():
        with psycopg.connect(proxy.dsn(), autocommit=True) as c:
            with bounded(c, 10, "catalogue wait"):
                plain = [c.execute("SELECT inet_server_port() FROM red1_t").fetchone()[0] for _ in range(3)]
                mark = c.execute("SELECT r, inet_server_port() FROM red1_catalog_mark").fetchone()
        return pair.standby.port in plain and mark[1] == pair.primary.port, (plain, mark)

    _, mark = wait_until(catalogued, "the proxy did not report the objects in time", pause=0.5)
    assert mark[0] is False, "the primary's answer"
    yield pair
    # The cast is matched by its target type's name (`text`): left in the shared database, it
    # would keep every later module's `::text` reads on the primary.
    on_primary(pair, "DROP CAST IF EXISTS (red1_ty AS text)", "DROP OPERATOR IF EXISTS #+# (int, int)",
               "DROP DOMAIN IF EXISTS red1_dom")


def outcome(conn, sql):
    """('ok', row without its last column, port) or ('error', SQLSTATE, None)."""
    try:
        row = conn.execute(sql).fetchone()
    except psycopg.Error as e:
        if conn.broken or conn.closed:
            raise
        return ("error", e.sqlstate, None)
    return ("ok", tuple(row[:-1]), row[-1])


def place(pair, port):
    return {pair.primary.port: "primary", pair.standby.port: "standby"}.get(port, "?")


# -- S-6: state a view's hidden set_config leaves on a pooled reader ---------------------------

@pytest.mark.timeout(60)
def test_s6_role_set_by_a_view_reaches_no_other_client(objects, proxy):
    """Client A reads `red1_v_role`, a view over `set_config('role', 'red1_rr', false)` — a plain
    SELECT by its text, so it may run on the standby, where set_config succeeds on a pooled reader
    connection. Later clients (fresh sessions of the NOINHERIT login red1_web, which set no role)
    must run as red1_web and be refused red1_secret (42501), as on the primary.

    Found: they run as red1_rr on the standby and read red1_secret. Mechanism: a reader connection
    is closed instead of pooled only when `ran_code` is set (src/session/backend.rs hand_back,
    ~line 618), and only a statement whose text shows unseen code sets it; a relation that is a
    view over set_config shows none, so the connection returns to the pool with another role."""
    pair = objects
    with psycopg.connect(proxy.dsn(user="red1_web"), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            assert a.execute("SELECT r FROM red1_v_role").fetchone()[0] == "red1_rr"
    leaks = []
    for i in range(3):
        with psycopg.connect(proxy.dsn(user="red1_web"), autocommit=True) as b, \
                psycopg.connect(pair.primary.dsn(user="red1_web", dbname="app"), autocommit=True) as twin:
            with bounded(b, 10, f"client B{i}"):
                for sql in ("SELECT current_user::text, inet_server_port()",
                            "SELECT count(*), inet_server_port() FROM public.red1_secret"):
                    got, want = outcome(b, sql), outcome(twin, sql)
                    if got[:2] != want[:2]:
                        leaks.append(f"B{i} {sql!r} on the {place(pair, got[2])}: {got[:2]}, primary {want[:2]}")
    assert not leaks, "; ".join(leaks)


@pytest.mark.timeout(60)
def test_s6_placeholder_set_by_a_view_reaches_no_other_client(objects, proxy):
    """As above with a placeholder setting: A reads `red1_v_tenant` (a view over
    `set_config('red1.tenant', 'acme', false)`); a later fresh client must see no red1.tenant
    (NULL), as on the primary — row-level security keyed on such a setting would otherwise hand it
    another tenant's rows. Found: the later client reads 'acme' on the standby."""
    pair = objects
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            assert a.execute("SELECT t FROM red1_v_tenant").fetchone()[0] == "acme"
    leaks = []
    sql = "SELECT current_setting('red1.tenant', true), inet_server_port()"
    for i in range(3):
        with psycopg.connect(proxy.dsn(), autocommit=True) as b:
            with bounded(b, 10, f"client B{i}"):
                for _ in range(3):
                    tenant, port = b.execute(sql).fetchone()
                    if tenant is not None:
                        leaks.append(f"B{i} saw red1.tenant={tenant!r} on the {place(pair, port)}")
    assert not leaks, "; ".join(leaks[:6])


@pytest.mark.timeout(60)
def test_s5_after_a_view_set_the_role_reads_and_writes_run_as_one_role(objects, proxy):
    """S-5: a read never runs on a reader as a different role than the writer session has. After
    client A (red1_web) read `red1_v_role` through the proxy, the primary alone would run every later
    statement of A as red1_rr. Found: the view ran on the standby, so A's reads run as red1_rr there
    while A's writer session is still red1_web — a statement that goes to the writer (`txid_current()`)
    answers current_user red1_web where the primary alone answers red1_rr."""
    pair = objects
    with psycopg.connect(proxy.dsn(user="red1_web"), autocommit=True) as a, \
            psycopg.connect(pair.primary.dsn(user="red1_web", dbname="app"), autocommit=True) as twin:
        with bounded(a, 10, "client A"):
            for c in (a, twin):
                c.execute("SELECT r FROM red1_v_role").fetchone()
            sql = "SELECT current_user::text, txid_current() > 0, inet_server_port()"
            got, want = outcome(a, sql), outcome(twin, sql)
            assert got[:2] == want[:2], f"through the proxy ({place(pair, got[2])}) {got[:2]}, primary {want[:2]}"


# -- S-7 / P-5: a pre-write read inside a transaction runs outside the writer's transaction -----

@pytest.mark.timeout(60)
def test_s7_now_inside_a_transaction_is_the_transaction_start(objects, proxy):
    """now(), current_timestamp and transaction_timestamp() are the start of the current
    transaction: constant for all of it on the primary. Found: BEGIN; SELECT now(); (0.3 s);
    SELECT now() through the proxy gives two different values — both reads ran on the standby as
    pre-write split reads (SPLIT_PRE_WRITE), each in the standby's own implicit transaction. These
    built-ins are stable in pg_proc, so the F-policy calls them read-safe; inside a transaction
    their answer depends on which server (and which transaction) answers. The same holds for
    localtimestamp, current_date and the 'now'::timestamptz literal (measured), and for a driver
    with autocommit off (psycopg's default), whose every statement runs in a transaction."""
    pair = objects
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client"):
            a.execute("BEGIN")
            t1, p1 = a.execute("SELECT now(), inet_server_port()").fetchone()
            time.sleep(0.3)
            t2, t3, p2 = a.execute("SELECT current_timestamp, transaction_timestamp(), inet_server_port()").fetchone()
            a.execute("COMMIT")
    assert t1 == t2 == t3, (f"now() {t1} on the {place(pair, p1)}, then current_timestamp {t2} / "
                            f"transaction_timestamp() {t3} on the {place(pair, p2)} in the same transaction")


def _in_transaction(conn, steps):
    out = []
    for sql in steps:
        try:
            cur = conn.execute(sql)
            out.append(("ok", cur.statusmessage))
        except psycopg.Error as e:
            out.append(("error", e.sqlstate))
    return out


@pytest.mark.timeout(60)
def test_p5_set_transaction_read_write_after_a_read_is_refused_as_on_the_primary(objects, proxy):
    """BEGIN READ ONLY; SELECT …; SET TRANSACTION READ WRITE: the primary refuses the SET (25001
    "transaction read-write mode must be set before any query"), the INSERT that follows gets 25P02
    and COMMIT rolls back. Found: through the proxy the SELECT ran on the standby (pre-write split),
    so the writer's transaction had run no query: the SET succeeds there, the INSERT runs and COMMIT
    commits a write the primary alone refused."""
    pair = objects
    note = f"red1-rw-{time.monotonic_ns()}"
    steps = ["BEGIN READ ONLY", "SELECT count(*) FROM accounts", "SET TRANSACTION READ WRITE",
             f"INSERT INTO red1_log (note) VALUES ('{note}')", "COMMIT"]
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        want = _in_transaction(twin, steps)
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client"):
            got = _in_transaction(a, steps)
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        written = admin.execute("SELECT count(*) FROM red1_log WHERE note = %s", (note,)).fetchone()[0]
    assert want[2] == ("error", "25001"), want
    assert got == want and written == 0, f"through the proxy {got}, primary {want}; rows committed: {written}"


@pytest.mark.timeout(60)
def test_p5_set_transaction_isolation_after_a_read_is_refused_as_on_the_primary(objects, proxy):
    """BEGIN; SELECT …; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE: the primary refuses the SET
    (25001 "must be called before any query") and the transaction is failed. Found: through the proxy
    the SELECT ran on the standby, the SET succeeds on the writer, and the transaction goes on (as
    SERIALIZABLE, with a snapshot taken after the client's first read) and commits."""
    pair = objects
    steps = ["BEGIN", "SELECT count(*) FROM accounts", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
             "SELECT count(*) FROM accounts", "COMMIT"]
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        want = _in_transaction(twin, steps)
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client"):
            got = _in_transaction(a, steps)
    assert want[2] == ("error", "25001"), want
    assert got == want, f"through the proxy {got}, primary {want}"


# -- S-1a: a read the standby refused, re-run on the primary where it wrote ----------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", ["SELECT id FROM red1_v_write", "SELECT red1_stable_write()"])
@pytest.mark.parametrize("protocol", ["simple", "extended", "in a transaction"])
def test_s1a_a_write_hidden_in_a_read_is_seen_by_the_next_read(objects, proxy, write, protocol):
    """`SELECT id FROM red1_v_write` (a view over a writing function) and `SELECT
    red1_stable_write()` (a STABLE function calling one) look like reads: they go to the standby,
    which refuses them (25006), and are re-run on the primary, where they write. The session's next
    read must see that write (S-1a: its own committed writes). Found (simple and extended protocol,
    and after COMMIT): the re-run counted as a read (P-6's "may have written" came from the text), so no
    probe positioned it and the next read ran on the standby (200 ms behind) without the row.
    Fixed on red1: src/session/finish.rs marks a unit re-run after a reader's SQL error, and
    bind.rs/writer.rs count it as a possible write."""
    pair = objects
    binary = protocol == "extended"
    for i in range(3):
        with psycopg.connect(proxy.dsn(), autocommit=True) as a:
            with bounded(a, 10, f"trial {i}"):
                if protocol == "in a transaction":
                    a.execute("BEGIN")
                a.execute(write, binary=binary)
                if protocol == "in a transaction":
                    a.execute("COMMIT")
                with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as d:
                    want = d.execute("SELECT max(id) FROM red1_log").fetchone()[0]
                got, port = a.execute("SELECT max(id), inet_server_port() FROM red1_log", binary=binary).fetchone()
        assert got == want, f"trial {i}: the read on the {place(pair, port)} saw max(id) {got}, the primary {want}"


# -- E-2: a prepared statement re-prepared elsewhere after its result type changed ---------------

async def _prepared_after_type_change(port: int, table: str):
    """Prepares `SELECT a FROM table` (a bigint), changes the column to double precision, runs
    the statement again: ('ok', value) or ('error', SQLSTATE)."""
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False)
    try:
        st = await c.prepare(f"SELECT a FROM {table}")
        assert await st.fetchval() == 1
        await c.execute(f"ALTER TABLE {table} ALTER COLUMN a TYPE double precision")
        try:
            return ("ok", await st.fetchval())
        except asyncpg.PostgresError as e:
            return ("error", e.sqlstate)
    finally:
        await c.close()


@pytest.mark.timeout(60)
def test_e2_a_prepared_statement_whose_result_type_changed_fails_as_on_the_primary(objects, proxy):
    """asyncpg prepares `SELECT a FROM t` (a bigint) — it runs on the standby, so the statement
    exists only on a reader — then the session changes the column to double precision and runs the
    statement again. PostgreSQL refuses it (0A000 "cached plan must not change result type"):
    the client decodes rows by the RowDescription it was given. Found: through the proxy the read
    goes to the primary (the DDL is not replayed yet), the engine prepares the statement there
    afresh by a hidden Parse (E-2) — with the new result type — and the client decodes the float8
    bits as a bigint: 4607182418800017408 instead of an error. Mechanism: the hidden re-Parse of a
    tracked statement on another connection (src/session/statements.rs / bind.rs) did not check
    that the statement's result shape is the one the client was described. Fixed: the engine
    keeps the shape the client was shown and checks a statement prepared again against it
    (src/session/shapes.rs)."""
    pair = objects

    def run(port: int, table: str):
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {table}")
            admin.execute(f"CREATE TABLE {table} (a bigint)")
            admin.execute(f"INSERT INTO {table} VALUES (1)")
            admin.execute(f"ALTER TABLE {table} OWNER TO app_trust")
        pair.wait_replayed()

        async def bounded_run():
            try:
                return await asyncio.wait_for(_prepared_after_type_change(port, table), 20)
            except asyncio.TimeoutError as e:
                raise Hang("asyncpg: no answer within 20 s (hang)") from e

        return asyncio.run(bounded_run())

    want = run(pair.primary.port, "red1_typed_direct")
    got = run(proxy.port, "red1_typed_proxy")
    assert want == ("error", "0A000"), want
    assert got == want, f"through the proxy {got}, the primary {want}"


# -- P-5: reads split off a transaction leave its writer session idle -----------------------------

@pytest.mark.timeout(60)
def test_p5_reads_split_off_a_transaction_keep_its_writer_session_alive(objects, proxy):
    """SET idle_in_transaction_session_timeout = '400ms'; BEGIN; twelve reads 0.1 s apart; INSERT;
    COMMIT. On the primary the session is never idle for 400 ms and all of it commits. Found:
    through the proxy every read ran on the standby (pre-write split reads, P-5), the writer's
    connection sat idle in its transaction, the server terminated it (25P03) and the client's
    session broke. The engine replays the setting on the reader (S-5) but does not let it decide
    whether reads may leave the writer; the same holds for a timeout from postgresql.conf or ALTER
    ROLE … SET, which no capture sees."""
    pair = objects
    note = f"red1-idle-{time.monotonic_ns()}"
    places = set()
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 20, "client"):
            a.execute("SET idle_in_transaction_session_timeout = '400ms'")
            a.execute("BEGIN")
            try:
                for _ in range(12):
                    places.add(place(pair, a.execute("SELECT count(*), inet_server_port() FROM accounts").fetchone()[1]))
                    time.sleep(0.1)
                a.execute("INSERT INTO red1_log (note) VALUES (%s)", (note,))
                a.execute("COMMIT")
                failure = None
            except psycopg.Error as e:
                failure = f"{e.sqlstate}: {str(e).splitlines()[0]}"
    assert failure is None, f"the session broke after reads on the {sorted(places)}: {failure}"


# -- S-5 / S-6: settings a session got from ALTER ROLE … SET at its start -------------------------

@pytest.mark.timeout(60)
def test_s6_a_pooled_reader_has_the_role_settings_the_writer_session_started_with(objects, proxy):
    """Client A (red1_u2) reads through the proxy, which leaves a pooled reader connection. Then
    `ALTER ROLE red1_u2 SET search_path = red1_s, public` (and a placeholder, and
    statement_timeout): every session red1_u2 starts from now on has them — on the primary, client
    B's unqualified `red1_t` is red1_s.red1_t. Found: B's reads run on the pooled reader connection
    opened before the ALTER, with the old search_path (public.red1_t: another table), no
    red1.tenant and statement_timeout 0. Mechanism: the capture (S-5) ran only once it was due
    (after a SET, a transaction's end, unseen code), not at the session's start, so a new session's
    first reads used a reader key (P-9) built from its startup parameters only. Fixed on branch
    rolecap: the capture follows the writer's startup ReadyForQuery, reports the login-time
    settings (pg_settings sources 'user', 'database', 'database user') and the placeholders
    pg_db_role_setting names, and reads wait for it."""
    pair = objects
    sql = ("SELECT v, current_setting('search_path'), current_setting('red1.tenant', true), "
           "current_setting('statement_timeout'), inet_server_port() FROM red1_t")
    with psycopg.connect(proxy.dsn(user="red1_u2"), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            a.execute(sql).fetchone()
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as admin:
        admin.execute("ALTER ROLE red1_u2 SET search_path = red1_s, public")
        admin.execute("ALTER ROLE red1_u2 SET red1.tenant = 'from-role'")
        admin.execute("ALTER ROLE red1_u2 SET statement_timeout = '1234ms'")
    pair.wait_replayed()
    diffs = []
    for i in range(3):
        with psycopg.connect(proxy.dsn(user="red1_u2"), autocommit=True) as b, \
                psycopg.connect(pair.primary.dsn(user="red1_u2", dbname="app"), autocommit=True) as twin:
            with bounded(b, 10, f"client B{i}"):
                got, want = outcome(b, sql), outcome(twin, sql)
                if got[:2] != want[:2]:
                    diffs.append(f"B{i} on the {place(pair, got[2])}: {got[:2]}, primary {want[:2]}")
    assert not diffs, "; ".join(diffs)


@pytest.fixture(scope="module")
def login_settings(objects):
    """Logins whose sessions get settings at login (rolecap): red1_u3 with a role search_path,
    red1_r3 (NOLOGIN, granted to red1_u3) with a search_path of its own that SET ROLE must not
    apply, and a database red1_db for ALTER DATABASE … SET (not `app`: the pair is shared by
    every e2e module)."""
    pair = objects
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("CREATE ROLE red1_u3 LOGIN")
        c.execute("CREATE ROLE red1_r3 NOLOGIN")
        c.execute("GRANT red1_r3 TO red1_u3")
        c.execute("ALTER ROLE red1_u3 SET search_path = red1_s, public")
        c.execute("ALTER ROLE red1_r3 SET search_path = pg_catalog")
        c.execute("CREATE ROLE red1_u5 LOGIN")
        c.execute("CREATE DATABASE red1_db")
    pair.wait_replayed()
    return pair


@pytest.mark.timeout(60)
@pytest.mark.parametrize("alter", ["ALTER DATABASE red1_db SET red1.login = 'from-db'",
                                   "ALTER ROLE red1_u5 IN DATABASE red1_db SET red1.login = 'from-role-db'"])
def test_s6_a_pooled_reader_has_the_placeholder_the_writer_session_got_at_login(login_settings, proxy, alter):
    """Only a placeholder setting from `ALTER DATABASE … SET` / `ALTER ROLE … IN DATABASE … SET`,
    under a name the session never SETs. Placeholders are not in pg_settings (measured on 15), so
    the capture finds the name in pg_db_role_setting; without it, a session started after the
    ALTER would have the startup key of client A's pooled reader connection (opened before the
    ALTER, without the setting) and read NULL there where the primary answers the setting."""
    pair = login_settings
    sql = "SELECT current_setting('red1.login', true), inet_server_port()"
    dsn = dict(user="red1_u5", dbname="red1_db")
    places = []
    with psycopg.connect(proxy.dsn(**dsn), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            for _ in range(3):
                value, port = a.execute(sql).fetchone()
                places.append(place(pair, port))
    assert "standby" in places, f"client A never read on the standby: {places}"
    with psycopg.connect(pair.primary.dsn(dbname="red1_db"), autocommit=True) as admin:
        admin.execute(alter)
    pair.wait_replayed()
    diffs = []
    try:
        for i in range(3):
            with psycopg.connect(proxy.dsn(**dsn), autocommit=True) as b, \
                    psycopg.connect(pair.primary.dsn(**dsn), autocommit=True) as twin:
                with bounded(b, 10, f"client B{i}"):
                    got, want = outcome(b, sql), outcome(twin, sql)
                    if got[:2] != want[:2] or want[1][0] is None:
                        diffs.append(f"B{i} on the {place(pair, got[2])}: {got[:2]}, primary {want[:2]}")
    finally:
        with psycopg.connect(pair.primary.dsn(dbname="red1_db"), autocommit=True) as admin:
            admin.execute(alter.split(" SET ")[0] + " RESET red1.login")
        pair.wait_replayed()
    assert not diffs, "; ".join(diffs)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reset", ["RESET search_path", "RESET ALL", "DISCARD ALL", "SET ROLE red1_r3",
                                   "SET SESSION AUTHORIZATION red1_u3"])
def test_s5_reset_returns_to_the_login_default_on_a_reader_as_on_the_primary(login_settings, proxy, reset):
    """`RESET`, `RESET ALL` and `DISCARD ALL` return a setting to its role default (red1_u3's
    search_path red1_s, public), not to the server default; `SET ROLE` does not apply the new
    role's own settings; `SET SESSION AUTHORIZATION` (run by a superuser as red1_u3) does not apply
    red1_u3's either. Reads after them, on a reader, see what the primary shows."""
    pair = login_settings
    user = "postgres" if reset.startswith("SET SESSION AUTHORIZATION") else "red1_u3"
    steps = ["SET search_path = public", reset]
    # The unqualified red1_t is red1_s.red1_t or public.red1_t by the search_path.
    # (No `::text`: the module's user cast to text, whose function calls set_config, is matched
    # by its target type's name and keeps such reads on the primary.)
    sql = ("SELECT v, current_setting('search_path'), current_user, session_user, "
           "inet_server_port() FROM red1_t")
    with psycopg.connect(proxy.dsn(user=user), autocommit=True) as b, \
            psycopg.connect(pair.primary.dsn(user=user, dbname="app"), autocommit=True) as twin:
        with bounded(b, 10, f"client after {reset}"):
            for c in (b, twin):
                for step in steps:
                    c.execute(step)
            got, want = outcome(b, sql), outcome(twin, sql)
            ports = {got[2]}
            for _ in range(2):
                again = outcome(b, sql)
                assert again[:2] == want[:2], f"on the {place(pair, again[2])}: {again[:2]}, primary {want[:2]}"
                ports.add(again[2])
    assert got[:2] == want[:2], f"through the proxy ({place(pair, got[2])}) {got[:2]}, primary {want[:2]}"
    assert pair.standby.port in ports, f"no read ran on the standby ({[place(pair, p) for p in ports]})"


# -- S-7: server configuration read by current_setting() -----------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["primary_slot_name", "recovery_min_apply_delay", "port"])
def test_s7_server_configuration_read_by_current_setting_is_the_primarys(objects, proxy, name):
    """`SELECT current_setting('<name>')` of a setting from the server's own configuration
    (postmaster / sighup context) answers the configuration of whichever server runs it. The primary
    answers '' for primary_slot_name, '0' for recovery_min_apply_delay and its own port. Found:
    through the proxy the read runs on the standby and answers the standby's ('standby1', '200ms',
    the standby's port). S-7 keeps current_setting of a few names (transaction_read_only,
    in_hot_standby …) on the writer; settings a standby's configuration sets differently
    (recovery_*, primary_*, port, cluster_name, and any postgresql.conf value an operator tuned per
    server) are not covered — pg_settings and SHOW are."""
    pair = objects
    sql = f"SELECT current_setting('{name}'), inet_server_port()"
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as twin:
        want = outcome(twin, sql)
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client"):
            got = outcome(a, sql)
    assert got[:2] == want[:2], f"through the proxy ({place(pair, got[2])}) {got[:2]}, primary {want[:2]}"


# -- E-1: a batch larger than max_batch_bytes ---------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [65_600, 100_000])
def test_e1_a_batch_larger_than_max_batch_bytes_is_answered(objects, proxy, size):
    """psycopg runs `SELECT length(%s)` with a parameter of `size` bytes three times on one
    connection: Parse/Bind/Describe/Execute/Sync, more than max_batch_bytes (64 KiB) in all. E-1:
    such a batch goes to the writer. Found: the client hung (no answer in 5 s) from the first or
    second execution on — the batch was cut at the byte limit (src/session/batch.rs batch_extent)
    and its held part, a read by its shape, went to a reader as an open batch. Fixed on red1: a
    batch cut at the limit takes the BATCH_TOO_LARGE path to the writer."""
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        for i in range(3):
            with bounded(a, 5, f"execution {i} with a {size}-byte parameter"):
                n, _port = a.execute("SELECT length(%s), inet_server_port()", ("x" * size,)).fetchone()
            assert n == size


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hidden", ["SELECT 1 #+# 2", "SELECT 5::red1_dom", "SELECT ROW(1)::red1_ty::text"],
                         ids=["operator", "domain check", "cast"])
def test_s6_state_set_by_an_operator_domain_or_cast_reaches_no_other_client(objects, proxy, hidden):
    """S-6 names them: "views, operators and casts hide calls, a reader connection that ran any
    non-built-in code is state-checked or reset before another session gets it". Client A runs a
    read whose user operator / domain CHECK / cast calls `set_config('red1.hidden', …, false)`;
    it runs on the standby. Found: later fresh clients read red1.hidden set (on the standby) where
    the primary has it NULL — the same mechanism as the view case above (only calls visible in the
    text set `ran_code`)."""
    pair = objects
    with psycopg.connect(proxy.dsn(), autocommit=True) as a:
        with bounded(a, 10, "client A"):
            a.execute(hidden).fetchone()
    leaks = []
    for i in range(3):
        with psycopg.connect(proxy.dsn(), autocommit=True) as b:
            with bounded(b, 10, f"client B{i}"):
                value, port = b.execute("SELECT current_setting('red1.hidden', true), inet_server_port()").fetchone()
                if value is not None:
                    leaks.append(f"B{i} saw red1.hidden={value!r} on the {place(pair, port)}")
    assert not leaks, "; ".join(leaks)
