"""S-7 for sequences: "A read returns what the primary would return." A standby holds a sequence
WAL-logged *ahead* of the primary (nextval logs 32 values in advance), so a read of the sequence
relation itself (`SELECT last_value, log_cnt, is_called FROM s`) on the standby answers a value the
primary has not handed out — not staleness, a value from the future (S-1a allows only older
answers). Found by an examiner (branch red3): (33, 0, True) from the standby where the primary
answers (1, 32, True).

The example proxy reports the writer's sequence relations (pg_class relkind 'S') of each database
with its function catalogue, in the same load; the engine then keeps a statement naming one on the
primary — in a FROM list, a join, a subquery or a CTE, qualified or not, quoted or not. The control
in the same session: a read of a plain table still runs on the standby, so the test cannot pass by
sending everything to the primary. The oracle is the primary's own answer, read directly.

Where a read ran is told by inet_server_port() (replica-safe, S-7). The proxy re-reads the
catalogue every 200 ms; the test waits for the first load by a stable user function reaching the
standby (it is loaded in the same report as the sequences). The proxy runs plain and under
AddressSanitizer/UBSan (its catalogue load is the code this adds)."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, start_proxy, stop_proxy

ROUNDS = 3  # sessions per statement: the first read of a fresh session may still be opening its reader
SEQ = "s7_seq"
MARK = "s7_seq_catalog_loaded"  # a stable user function: on the standby once the catalogue is loaded
TABLE = "s7_seq_plain"

READS = [
    f"SELECT last_value, log_cnt, is_called, inet_server_port() FROM {SEQ}",
    f"SELECT last_value, log_cnt, is_called, inet_server_port() FROM public.{SEQ}",
    f'SELECT last_value, log_cnt, is_called, inet_server_port() FROM "public"."{SEQ}"',
    f"SELECT last_value, log_cnt, is_called, inet_server_port() FROM {SEQ.upper()}",
    f"SELECT q.last_value, q.log_cnt, q.is_called, inet_server_port() FROM {TABLE} t JOIN {SEQ} q ON true",
    f"SELECT * , inet_server_port() FROM (SELECT last_value, log_cnt, is_called FROM {SEQ}) AS sub",
    f"WITH w AS (SELECT last_value, log_cnt, is_called FROM {SEQ}) SELECT *, inet_server_port() FROM w",
]


def _connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, connect_timeout=10, prepare_threshold=None)


def _where(port: int) -> str:
    return "standby" if port in STANDBY_PORTS else "primary"


def _drop(admin: psycopg.Connection) -> None:
    admin.execute(f"DROP SEQUENCE IF EXISTS {SEQ}")
    admin.execute(f"DROP TABLE IF EXISTS {TABLE}")
    admin.execute(f"DROP FUNCTION IF EXISTS {MARK}()")


@pytest.mark.parametrize("asan", [False, True], ids=["proxy", "proxy-asan"])
def test_s7_a_sequence_read_is_the_primarys(pair, tmp_path, asan):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=10) as admin:
        _drop(admin)
        admin.execute(f"CREATE SEQUENCE {SEQ}")
        admin.execute(f"GRANT SELECT ON {SEQ} TO PUBLIC")
        admin.execute(f"SELECT nextval('{SEQ}')")
        admin.execute(f"CREATE TABLE {TABLE} (a int)")
        admin.execute(f"INSERT INTO {TABLE} VALUES (1)")
        admin.execute(f"GRANT SELECT ON {TABLE} TO PUBLIC")
        admin.execute(f"CREATE FUNCTION {MARK}() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'")
        px = None
        try:
            want = admin.execute(READS[0]).fetchone()[:3]
            assert want == (1, 32, True), f"the primary's own answer is {want}"
            pair.wait_replayed()
            px = start_proxy(pair, tmp_path, asan=asan, extra=["--catalog-refresh-ms", "200"])
            # A session whose user function ran on the primary stays there (S-6): a new one per try.
            deadline = time.monotonic() + 10
            while True:
                with _connect(px.dsn()) as c, bounded(c, 15, "the catalogue load"):
                    c.autocommit = True
                    if _where(c.execute(f"SELECT {MARK}(), inet_server_port()").fetchone()[1]) == "standby":
                        break
                assert time.monotonic() < deadline, (
                    f"{MARK}() never ran on the standby (catalogue not loaded):\n{px.log_text()[-3000:]}"
                )
                time.sleep(0.1)
            for q in READS:
                for round_ in range(ROUNDS):
                    with _connect(px.dsn()) as c, bounded(c, 15, "a sequence read"):
                        c.autocommit = True
                        # The control first: this session's plain reads do reach the standby.
                        deadline = time.monotonic() + 10
                        while _where(c.execute(f"SELECT a, inet_server_port() FROM {TABLE}").fetchone()[1]) != "standby":
                            assert time.monotonic() < deadline, "a plain table read never ran on the standby"
                            time.sleep(0.05)
                        got = c.execute(q).fetchone()
                    assert tuple(got[:3]) == want, (
                        f"round {round_}: {q!r} through the proxy answered {tuple(got[:3])} from the "
                        f"{_where(got[-1])}; the primary's is {want}"
                    )
                    assert _where(got[-1]) == "primary", f"{q!r} ran on the {_where(got[-1])}"
        finally:
            if px is not None:
                stop_proxy(px)
            _drop(admin)
