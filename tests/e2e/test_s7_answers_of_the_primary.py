"""S-7 ("a read returns what the primary would return") and S-1a on a real primary + hot standby
through the example proxy: the classes an examiner's run of PostgreSQL 15's regression suite and
probes around it found (branch red3), each reduced to its minimal reproduction.
- Values of the client's transaction block: a read split off the block runs on the reader in a
  transaction of its own, so now()/CURRENT_TIMESTAMP/'now', transaction_isolation and
  transaction_deferrable read there are the reader's: such reads are never split (P-5,
  `SPLIT_TXN_VALUE`).
- The server's own settings: current_setting() of a setting that is not the session's own
  (port, data_directory, primary_conninfo…) is answered by the primary.
- A statement taken for a read that the standby refused as a write and the primary re-ran (F-2)
  may have written there: the session's next read sees it (P-6).
Each oracle is PostgreSQL's own answer, asserted directly against the primary too where that is
meaningful, so a test cannot pass by testing nothing. `inet_server_port()` says where each read ran.
"""

from __future__ import annotations

import time

import psycopg

from e2e_support import STANDBY_PORTS, bounded, start_proxy, stop_proxy

ROUNDS = 3  # transactions per test: the first read of a fresh session may still be opening its reader


def _connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, connect_timeout=10, prepare_threshold=None)


def _where(port: int) -> str:
    return "standby" if port in STANDBY_PORTS else "primary"


def test_s7_now_is_the_transaction_start_in_a_read_only_prefix(pair, proxy):
    """now(), CURRENT_TIMESTAMP, transaction_timestamp() and the 'now' literal are the start of the
    client's transaction block: the same value in every statement of it. Through the proxy the
    block's reads before its first write run on the standby, each in its own transaction, so they
    answer the standby's statement time (found: True/True where the primary answers False/False)."""
    q = ("SELECT now(), CURRENT_TIMESTAMP, transaction_timestamp(), 'now'::timestamptz, "
         "now() = statement_timestamp(), inet_server_port()")
    for label, dsn in (("direct", pair.primary.dsn(dbname="app")), ("proxy", proxy.dsn())):
        for round_ in range(ROUNDS):
            with _connect(dsn) as c, bounded(c, 15, f"{label}: a read-only transaction prefix"):
                first = c.execute(q).fetchone()  # psycopg opened the block (BEGIN) before it
                c.execute("SELECT pg_sleep(0.05)")
                second = c.execute(q).fetchone()
                c.rollback()
            start = first[0]
            for row in (first, second):
                assert row[0:4] == (start, start, start, start), (
                    f"{label} round {round_}: now()/CURRENT_TIMESTAMP/transaction_timestamp()/'now' of a "
                    f"statement that ran on the {_where(row[5])} is {row[0:4]}, not the block's start {start}"
                )
            # 50 ms after the block began, its now() cannot be the statement's own start.
            assert second[4] is False, (
                f"{label} round {round_}: now() = statement_timestamp() on the {_where(second[5])}: the "
                "statement ran in a transaction of its own, not in the client's block"
            )


def test_s7_transaction_isolation_is_the_blocks_under_another_session_default(pair, proxy):
    """`BEGIN ISOLATION LEVEL READ COMMITTED` under `default_transaction_isolation = 'repeatable
    read'`: the block is READ COMMITTED (S-3 precedence: BEGIN options first), so P-5 lets its first
    read go to a reader — where the replayed session default makes the read's own transaction
    REPEATABLE READ (found: 'repeatable read' from the standby, 'read committed' from the primary)."""
    for label, dsn in (("direct", pair.primary.dsn(dbname="app")), ("proxy", proxy.dsn())):
        with _connect(dsn) as c, bounded(c, 15, f"{label}: a READ COMMITTED block"):
            c.autocommit = True
            c.execute("SET default_transaction_isolation = 'repeatable read'")
            for round_ in range(ROUNDS):
                c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                iso, port = c.execute("SELECT current_setting('transaction_isolation'), inet_server_port()").fetchone()
                c.execute("COMMIT")
                assert iso == "read committed", (
                    f"{label} round {round_}: transaction_isolation inside BEGIN ISOLATION LEVEL READ "
                    f"COMMITTED answered {iso!r} by the {_where(port)}"
                )


def test_s7_transaction_deferrable_is_the_blocks(pair, proxy):
    """`BEGIN … DEFERRABLE` sets transaction_deferrable for the block; a read of it in the block's
    read-only prefix ran on the standby, whose own transaction is not deferrable (found: 'off')."""
    for label, dsn in (("direct", pair.primary.dsn(dbname="app")), ("proxy", proxy.dsn())):
        with _connect(dsn) as c, bounded(c, 15, f"{label}: a DEFERRABLE block"):
            c.autocommit = True
            for round_ in range(ROUNDS):
                c.execute("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE DEFERRABLE")
                d, port = c.execute("SELECT current_setting('transaction_deferrable'), inet_server_port()").fetchone()
                c.execute("COMMIT")
                assert d == "on", f"{label} round {round_}: transaction_deferrable {d!r} from the {_where(port)}"


def test_s7_current_setting_of_a_server_setting_is_the_primarys(pair, proxy):
    """`SHOW port` goes to the primary (SHOW is never replica-safe), and so does `SELECT
    current_setting('port')`: only the settings a session has of its own (pg_settings.context user
    or superuser, generated into the built-in table) are read on a reader, which replays the
    session's (S-5); the server's port, data directory and connection to the primary are the
    primary's (found before: the standby's)."""
    q = ("SELECT current_setting('port'), current_setting('data_directory'), "
         "current_setting('primary_conninfo'), inet_server_port()")
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=10) as d:
        want = d.execute(q).fetchone()[:3]
    assert want[0] == str(pair.primary.port)
    with psycopg.connect(proxy.dsn(user="postgres"), autocommit=True, connect_timeout=10, prepare_threshold=None) as c:
        with bounded(c, 15, "current_setting of server settings"):
            shown = c.execute("SHOW port").fetchone()[0]
            for round_ in range(ROUNDS):
                got = c.execute(q).fetchone()
                assert got[:3] == want, (
                    f"round {round_}: current_setting(port, data_directory, primary_conninfo) through the "
                    f"proxy answered {got[:3]} by the {_where(got[3])}; the primary's are {want} "
                    f"(SHOW port through the proxy: {shown})"
                )


def _read_back_after_refused_write(dsn: str, write_sql: str, tag: str) -> list[tuple[int, str]]:
    """Autocommit: a statement the engine thinks is a read but that writes `tag` into audit (the
    standby refuses it, the engine re-runs it on the primary, F-2), then at once the read of it."""
    seen = []
    with _connect(dsn) as c, bounded(c, 15, "a refused write, then its read"):
        c.autocommit = True
        c.execute(write_sql, (tag,)).fetchall()
        n, port = c.execute("SELECT count(*), inet_server_port() FROM audit WHERE note = %s", (tag,)).fetchone()
        seen.append((n, _where(port)))
    return seen


def test_s1a_a_write_the_standby_refused_is_read_back_hinted(pair, proxy):
    """`/* route=reader */` declares a statement's functions read-safe but "read-your-writes waits
    as usual" (§7). log_note() writes: the standby refuses it (25006), the engine re-runs it on the
    primary (F-2: RETRY_PRIMARY_AFTER_ERROR) — and then treats the re-run as the read it was
    classified as (P-6 "may have written" is false for a replica-safe read): no probe, no write
    position, so the session's very next read goes to the standby with target 0 (READ_NO_TARGET)
    and misses the session's own committed write (found: count 0 from the standby)."""
    for round_ in range(ROUNDS):
        tag = f"red3-hint-{round_}-{time.monotonic_ns()}"
        seen = _read_back_after_refused_write(proxy.dsn(), "/* route=reader */ SELECT log_note(%s)", tag)
        assert seen[0][0] == 1, f"round {round_}: own committed write read back as {seen[0][0]} rows by the {seen[0][1]}"


def test_s1a_a_write_the_standby_refused_is_read_back_mislabelled_stable(pair, tmp_path):
    """The same without a hint: a user function the catalogue reports STABLE (F-policy: read-safe)
    that writes through a volatile one — PostgreSQL allows it. §7: "Views and rules that call
    writing functions cannot be seen from the text; the standby's refusal and F-2 cover them" —
    the refusal and the re-run happen, but the write's position is never learned, so the next read
    misses it (found: count 0 from the standby). The proxy re-reads the catalogue every 200 ms."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=10) as admin:
        for f in ("red3_w_stable(text)", "red3_w_inner(text)", "red3_ro()"):
            admin.execute(f"DROP FUNCTION IF EXISTS {f}")
        admin.execute("CREATE FUNCTION red3_w_inner(t text) RETURNS int VOLATILE LANGUAGE plpgsql AS "
                      "$$ BEGIN INSERT INTO audit (note) VALUES (t); RETURN 1; END $$")
        admin.execute("CREATE FUNCTION red3_w_stable(t text) RETURNS int STABLE LANGUAGE plpgsql AS "
                      "$$ BEGIN RETURN red3_w_inner(t); END $$")
        admin.execute("CREATE FUNCTION red3_ro() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'")
        pair.wait_replayed()
        px = start_proxy(pair, tmp_path, extra=["--catalog-refresh-ms", "200"])
        try:
            # Until the catalogue is loaded user functions stay on the primary: wait for it.
            # A fresh session per try: a session whose call of a user function ran on the primary
            # before the catalogue was loaded ran unseen code there, so its reads stay on the
            # primary (S-5) however long it waits.
            deadline = time.monotonic() + 15
            while True:
                with _connect(px.dsn()) as c, bounded(c, 15, "the catalogue load"):
                    c.autocommit = True
                    if _where(c.execute("SELECT red3_ro(), inet_server_port()").fetchone()[1]) == "standby":
                        break
                assert time.monotonic() < deadline, "red3_ro() never ran on the standby (catalogue not loaded)"
                time.sleep(0.1)
            for round_ in range(ROUNDS):
                tag = f"red3-stable-{round_}-{time.monotonic_ns()}"
                seen = _read_back_after_refused_write(px.dsn(), "SELECT red3_w_stable(%s)", tag)
                assert seen[0][0] == 1, (
                    f"round {round_}: own committed write read back as {seen[0][0]} rows by the {seen[0][1]}"
                )
        finally:
            stop_proxy(px)
            for f in ("red3_w_stable(text)", "red3_w_inner(text)", "red3_ro()"):
                admin.execute(f"DROP FUNCTION IF EXISTS {f}")
