"""SPEC E-1/P-5 end to end: a batch that opens a transaction block and then reads. pgjdbc with
autocommit off (Spring's and Hibernate's default) sends Parse/Bind/Execute of BEGIN in the same
batch as the transaction's first statement, and libpq's pipeline mode does the same with
BEGIN, a query and one Sync. Such a batch held a non-read Execute, so all of it stayed on the
writer: an examiner's finding of 2026-12-05 measured 0 of 200 JDBC reads on the standby. The engine
now runs the BEGIN on the writer, closed by its own Sync, and decides the rest inside the block.

What the client sees must be what the primary alone answers, errors included: an error in the
read leaves the block failed (25P02 for what follows), an error answering BEGIN skips the rest to
the Sync. These run the same batches (libpq pipeline mode, through psycopg's `pq`) against the
primary and through the proxy and compare every result."""

from __future__ import annotations

import pytest
from psycopg import pq

# Each case: batches of statements, each batch sent as one pipeline and one Sync.
CASES = {
    "read": [["BEGIN", "SELECT 1 AS one, 'x' AS two"], ["SELECT 2"], ["COMMIT"]],
    "error in the read": [["BEGIN", "SELECT 1/0"], ["SELECT 1"], ["ROLLBACK"]],
    "missing table": [["BEGIN", "SELECT * FROM e1_no_such_table"], ["SELECT 1"], ["ROLLBACK"]],
    "error after rows": [["BEGIN", "SELECT 1", "SELECT 1/0", "SELECT 2"], ["SELECT 3"], ["ROLLBACK"]],
    "isolation after the first read": [["BEGIN", "SELECT 1"], ["SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"],
                                       ["COMMIT"]],
    "serializable": [["BEGIN ISOLATION LEVEL SERIALIZABLE", "SELECT 1"], ["SELECT 2"], ["COMMIT"]],
    "read only": [["BEGIN READ ONLY", "SELECT 1"], ["SELECT 2"], ["COMMIT"]],
    "begin then write": [["BEGIN", "CREATE TEMP TABLE e1_t (a int)", "SELECT 1"], ["ROLLBACK"]],
    "nested begin": [["BEGIN"], ["BEGIN", "SELECT 1"], ["COMMIT"]],
}

STATUS = {pq.TransactionStatus.IDLE: "I", pq.TransactionStatus.INTRANS: "T", pq.TransactionStatus.INERROR: "E"}


def run(dsn: str, batches: list[list[str]]) -> list:
    """Every result of every batch (status, SQLSTATE, rows) and the transaction status after each
    Sync."""
    conn = pq.PGconn.connect(dsn.encode())
    assert conn.status == pq.ConnStatus.OK, conn.error_message
    out = []
    try:
        conn.enter_pipeline_mode()
        for batch in batches:
            for sql in batch:
                conn.send_query_params(sql.encode(), None)
            conn.pipeline_sync()
            for _ in batch:
                r = conn.get_result()
                state = r.error_field(pq.DiagnosticField.SQLSTATE)
                rows = [tuple(r.get_value(i, j) for j in range(r.nfields)) for i in range(r.ntuples)]
                out.append((pq.ExecStatus(r.status).name, state and state.decode(), rows))
                assert conn.get_result() is None
            r = conn.get_result()
            assert r.status == pq.ExecStatus.PIPELINE_SYNC, r.status
            out.append(("sync", STATUS.get(conn.transaction_status, "?")))
    finally:
        conn.finish()
    return out


def server_ports(dsn: str, n: int) -> list[int]:
    """`n` transactions in one session, each BEGIN and a read in one batch, then COMMIT."""
    conn = pq.PGconn.connect(dsn.encode())
    ports = []
    try:
        conn.enter_pipeline_mode()
        for _ in range(n):
            conn.send_query_params(b"BEGIN", None)
            conn.send_query_params(b"SELECT inet_server_port()", None)
            conn.pipeline_sync()
            assert conn.get_result().status == pq.ExecStatus.COMMAND_OK
            assert conn.get_result() is None
            r = conn.get_result()
            assert r.status == pq.ExecStatus.TUPLES_OK, r.error_message
            ports.append(int(r.get_value(0, 0)))
            assert conn.get_result() is None
            assert conn.get_result().status == pq.ExecStatus.PIPELINE_SYNC
            conn.send_query_params(b"COMMIT", None)
            conn.pipeline_sync()
            assert conn.get_result().status == pq.ExecStatus.COMMAND_OK
            assert conn.get_result() is None
            assert conn.get_result().status == pq.ExecStatus.PIPELINE_SYNC
    finally:
        conn.finish()
    return ports


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", CASES)
def test_e1_a_batch_opening_a_block_answers_as_the_primary_alone(pair, proxy, case):
    direct = run(pair.primary.dsn(dbname="app", user="app_trust"), CASES[case])
    through = run(proxy.dsn(), CASES[case])
    assert through == direct


@pytest.mark.timeout(60)
def test_e1_p5_the_read_behind_begin_in_its_batch_runs_on_the_standby(pair, proxy):
    before = proxy.stats()["counter"]["begins_split_off"]
    ports = server_ports(proxy.dsn(), 20)
    assert ports.count(pair.standby.port) >= 19, (ports, proxy.stats()["reason"])
    assert proxy.stats()["counter"]["begins_split_off"] - before == 20
