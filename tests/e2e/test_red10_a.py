"""Examiner round 10, area a (red10-a): protocol fidelity and liveness through the example proxy
against the real primary + hot standby — the same client bytes sent to the primary alone and
through the proxy over a raw v3 socket (test_red2_findings.RawConn), every message compared.
Every read is bounded (a missing answer is ('HANG',) within a few seconds).

FINDINGS_PLACEHOLDER
"""

from __future__ import annotations

import pytest

from e2e_support import on_primary
from test_red2_findings import FLUSH, SYNC, _msg, _z, bind, describe, exchange, execute, parse, query

pytestmark = pytest.mark.timeout(120)

TABLE = "red10a_copy"


@pytest.fixture(scope="module")
def copy_table(pair):
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}", f"CREATE TABLE {TABLE} (a int)",
               f"GRANT ALL ON {TABLE} TO PUBLIC")
    yield TABLE
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}")


def copy_data(row: bytes) -> bytes:
    return _msg(b"d", row)


COPY_DONE = _msg(b"c")


def same_answers(pair, proxy, steps, times: int = 1):
    """Runs `steps` on a new session of the primary alone and of the proxy `times` times; each
    proxied transcript must equal the primary's."""
    for _ in range(times):
        want = exchange(pair.primary.port, steps)
        assert ("HANG",) not in want and ("EOF",) not in want, want
        got = exchange(proxy.port, steps)
        assert got == want, f"through the proxy:\n{got}\nthe primary alone:\n{want}"


# -- Finding 1: the capture sent into a COPY IN behind a Sync the server ignores (E-1, S-5) -------
# A simple Query `SET …; COPY t FROM STDIN`, and in the same write its CopyData, a Sync, more
# CopyData and CopyDone. The primary alone ignores the Sync (COPY IN mode: Sync and Flush are
# ignored) and answers CommandComplete COPY 2, ParameterStatus, ReadyForQuery. Through the proxy
# the Sync, read before the CopyInResponse came, is a unit of its own (BATCH_NO_STATEMENT) on
# the writer, and `after_writer_send` pipelines the capture the SET made due right behind it —
# into the COPY: the server refuses the capture's Close (08P01 "unexpected message type 0x43
# during COPY from stdin"), the COPY is lost and the connection is closed (FATAL 08P01).
@pytest.mark.parametrize("where", ["sync_between_data", "sync_before_data"])
def test_e1_sync_inside_copy_in_after_a_set_keeps_the_copy_and_the_session(pair, proxy, copy_table, where):
    data = [copy_data(b"1\n"), SYNC, copy_data(b"2\n")] if where == "sync_between_data" else [
        SYNC, copy_data(b"1\n"), copy_data(b"2\n")]
    steps = [
        ([query("SELECT 1")], 1),
        ([query(f"SET application_name = 'red10a'; COPY {copy_table} FROM STDIN"), *data, COPY_DONE], 1),
        ([query(f"SELECT count(*) FROM {copy_table}; TRUNCATE {copy_table}")], 1),
    ]
    same_answers(pair, proxy, steps, times=2)


# -- Finding 2: a Parse declaring more than 32767 parameter types ends the session (E-1, E-2) -----
# PostgreSQL reads a Parse's parameter type count as an unsigned 16-bit integer (postgres.c,
# `pq_getmsgint(…, 2)`): up to 65535 parameters, libpq's own limit, and what bulk statements of
# ORMs and drivers use. psycopg 3 (like libpq's PQprepare/PQexecParams with types, and pgjdbc)
# declares a type for every parameter. A read `… WHERE id IN (%s, …)` with 40,000 values: the
# primary alone answers it; through the proxy the client gets FATAL 08P01 "polarsplit: protocol
# violation by the client: message 'P' is malformed: negative parameter type count" and its
# connection is closed (src/protocol/frontend.rs `parse_here` and `read_at` read the count as i16
# and refuse a negative one; `any_bind_value` reads a Bind's format and value counts as i16 too).
def test_e1_a_read_with_40000_typed_parameters_is_answered_as_on_the_primary(pair, proxy):
    import psycopg

    from e2e_support import connect, run

    n = 40_000
    sql = "SELECT count(*) FROM accounts WHERE id IN (" + ", ".join(["%s"] * n) + ")"
    params = list(range(n))

    def ask(dsn):
        with connect(dsn) as c:
            run(c, "SELECT 1")
            try:
                return ("ok", run(c, sql, params))
            except psycopg.Error as e:
                return ("error", e.sqlstate, str(e).splitlines()[0], "closed" if c.closed else "open")

    want = ask(pair.primary.dsn(user="app_trust", dbname="app"))
    assert want == ("ok", [(100,)]), want
    assert ask(proxy.dsn()) == want
