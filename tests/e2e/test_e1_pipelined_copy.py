"""COPY FROM STDIN whose client sends its data before the server's CopyInResponse (SPEC E-1: "the
client sees exactly what one server would send"), against the real primary directly and through
the example proxy: the same client bytes, the same messages back, the same rows committed.

PostgreSQL ignores a Sync or Flush it reads in COPY IN mode — after the COPY's Execute (or Query)
and before the client's CopyDone or CopyFail — and answers a Sync it reads after them. An examiner
found (2026-12) that Parse/Bind/Execute of a COPY with no Sync, then CopyData, CopyDone and Sync in
one write got `1 2 G C` and then FATAL 08P01 through the proxy ("protocol violation by the primary:
unexpected message type 'Z'"): the engine took the Sync sent after CopyDone for one the server
ignores. The same with CopyFail, with a Sync before and after the data, and inside BEGIN … COMMIT
(the COMMIT got 08P01 and the rows were lost); a simple-Query COPY with a Sync and a Flush among its
data failed the same way. The transcript tests are in tests/extended_copy_in_transcripts.rs.

psycopg's `pq` cannot send CopyData before CopyInResponse: the raw v3 client of
test_red2_findings.py sends the bytes, each step in one packet."""

from __future__ import annotations

import psycopg
import pytest

from test_red2_findings import (
    COPY_DONE,
    FLUSH,
    SYNC,
    _msg,
    _z,
    bind,
    copy_data,
    exchange,
    execute,
    parse,
    query,
)

TABLE = "e1_pipelined_copy"
COPY = f"COPY {TABLE} FROM STDIN"
COUNT = f"SELECT count(*), coalesce(sum(a), 0) FROM {TABLE}"
COPY_FAIL = _msg(b"f", _z("client gave up"))


def copy_execute() -> list[bytes]:
    return [parse("", COPY), bind("", ""), execute()]


DATA = [copy_data(b"1\n"), copy_data(b"2\n")]

# Each case: steps of (bytes sent in one packet, RFQs awaited; 0: what arrives until quiet).
CASES = {
    # The examiner's case: no Sync before the data.
    "data_done_sync": [(copy_execute() + DATA + [COPY_DONE, SYNC], 1)],
    "data_fail_sync": [(copy_execute() + DATA + [COPY_FAIL, SYNC], 1)],
    # A Sync before (read in COPY IN mode, ignored) and after the data (answered).
    "sync_data_done_sync": [(copy_execute() + [SYNC] + DATA + [COPY_DONE, SYNC], 1)],
    "sync_data_fail_sync": [(copy_execute() + [SYNC] + DATA + [COPY_FAIL, SYNC], 1)],
    # In a transaction block: the rows must be there at COMMIT.
    "in_a_block": [
        ([query("BEGIN")], 1),
        (copy_execute() + DATA + [COPY_DONE, SYNC], 1),
        ([query(COUNT)], 1),
        ([query("COMMIT")], 1),
    ],
    "in_a_block_sync_before_and_after": [
        ([query("BEGIN")], 1),
        (copy_execute() + [SYNC] + DATA + [COPY_DONE, SYNC], 1),
        ([query("COMMIT")], 1),
    ],
    # The ignored Sync leaves the server's batch open: the next statement runs in it, before the
    # one Sync answered. (Worked before.)
    "sync_data_done_then_a_statement": [
        (copy_execute() + [SYNC] + DATA + [COPY_DONE, parse("", COUNT), bind("", ""), execute(), SYNC], 1),
    ],
    # A Flush, then a Sync the server reads in COPY IN mode, in the same packet: on a stock
    # server the engine's position probe went right behind that Sync, into the COPY.
    "flush_sync_data_done_sync": [(copy_execute() + [FLUSH, SYNC] + DATA + [COPY_DONE, SYNC], 1)],
    # The same, the client waiting for CopyInResponse before the Sync and the data.
    "flush_then_sync_data_done_sync": [
        (copy_execute() + [FLUSH], 0),
        ([SYNC, FLUSH] + DATA + [COPY_DONE, SYNC], 1),
    ],
    # Worked before: the data, then a Query instead of a Sync.
    "data_done_then_a_query": [(copy_execute() + DATA + [COPY_DONE, query(COUNT)], 1)],
    # A simple-Query COPY: a Sync and a Flush among its data are ignored too…
    "query_sync_flush_data_done": [([query(COPY), SYNC, FLUSH] + DATA + [COPY_DONE], 1)],
    # …also sent after CopyInResponse arrived…
    "query_then_sync_flush_data_done": [
        ([query(COPY)], 0),
        ([SYNC, FLUSH] + DATA + [COPY_DONE], 1),
    ],
    # …while a Sync after CopyDone gets its own RFQ. (Worked before.)
    "query_data_done_sync": [([query(COPY)] + DATA + [COPY_DONE, SYNC], 2)],
}


def committed(pair) -> tuple:
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        return c.execute(COUNT).fetchone()


def run(pair, port: int, steps) -> tuple[list[tuple], tuple]:
    """The table made afresh, the steps, then what the same session reads (a Query and an
    extended read, which may go to the standby); and the rows any session sees afterwards."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (a int)")
        c.execute(f"GRANT ALL ON {TABLE} TO PUBLIC")
    got = exchange(port, [
        *steps,
        ([query(COUNT)], 1),
        ([parse("", COUNT), bind("", ""), execute(), SYNC], 1),
        ([query("SELECT 1")], 1),
    ])
    return got, committed(pair)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CASES))
def test_e1_copy_in_pipelined_before_copy_in_response_is_answered_as_on_the_primary(pair, proxy, case):
    steps = CASES[case]
    want, want_rows = run(pair, pair.primary.port, steps)
    assert ("HANG",) not in want and ("EOF",) not in want, want
    got, got_rows = run(pair, proxy.port, steps)
    assert got == want, f"through the proxy:\n{got}\nthe primary alone:\n{want}"
    assert got_rows == want_rows, f"committed through the proxy {got_rows}, on the primary alone {want_rows}"
