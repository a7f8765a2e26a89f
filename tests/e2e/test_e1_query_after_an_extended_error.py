"""SPEC E-1 (protocol fidelity): after an error among extended-protocol messages sent without a
Sync, PostgreSQL discards every message up to the next Sync — a simple Query among them too — and
answers that Sync alone.

An examiner's differential test of 2026-12-05 (random sessions, each run against the primary alone
and through the proxy, every message compared) found the engine taking the discarded Query's
ReadyForQuery for the Sync's, and every answer after it for the request before: a FATAL 08P01
"protocol violation by the primary" (30 of 400 sessions), a client waiting for an answer that
never came and its writer backend left behind for a minute, the engine's hidden probe row sent to
the client, and — once the engine's probe, pipelined behind the Query, ended the server's skip
with its own Sync — an INSERT the primary discards run and committed (19 of 400). Now the
discarded Query's unit ends with nothing for the client, nothing hidden is sent while those
messages are open on the writer, and the client's next batch goes to the writer, which skips it
too, up to its Sync.

Each case compares the whole message stream with the primary's."""

from __future__ import annotations

import psycopg
import pytest

from e2e_support import on_primary
from test_red2_findings import FLUSH, SYNC, bind, exchange, execute, parse, query, same_as_primary

MISSING_PORTAL = execute("e1q_nope")
SYNTAX_ERROR = parse("", "SELEC 1")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("error", [MISSING_PORTAL, SYNTAX_ERROR], ids=["execute", "parse"])
@pytest.mark.parametrize("packets", ["one", "each"])
def test_e1_a_query_after_an_extended_error_is_discarded_up_to_the_sync(pair, proxy, error, packets):
    steps = [([error], 0), ([query("SELECT 1")], 0), ([SYNC], 1), ([query("SELECT 'next'")], 1)]
    if packets == "one":
        steps = [([error, query("SELECT 1"), SYNC], 1), ([query("SELECT 'next'")], 1)]
    same_as_primary(pair, proxy, steps)


@pytest.mark.timeout(60)
def test_e1_a_batch_after_a_discarded_query_is_discarded_too(pair, proxy):
    # The next batch, a plain read, is skipped by the server as well: only its Sync answers.
    same_as_primary(pair, proxy, [
        ([MISSING_PORTAL], 0),
        ([query("SELECT 1")], 0),
        ([parse("e1q_s", "SELECT 2"), bind("", "e1q_s"), execute(""), SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("error", [MISSING_PORTAL, SYNTAX_ERROR], ids=["execute", "parse"])
def test_e1_a_write_sent_after_an_extended_error_is_never_run(pair, proxy, error):
    on_primary(pair, "CREATE TABLE IF NOT EXISTS e1q_rows (k text)", "GRANT ALL ON e1q_rows TO PUBLIC")
    steps = [([error, FLUSH], 0), ([query("INSERT INTO e1q_rows VALUES ('written')")], 0), ([SYNC], 1),
             ([query("SELECT 'next'")], 1)]
    runs = {}
    for name, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        on_primary(pair, "DELETE FROM e1q_rows")
        answers = exchange(port, steps)
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            rows = c.execute("SELECT count(*) FROM e1q_rows").fetchone()[0]
        runs[name] = (answers, rows)
    assert runs["primary"][1] == 0, runs["primary"]
    assert runs["proxy"] == runs["primary"], runs
