"""E-1/E-2/E-4: extended-protocol sequences around errors and Flushes that an examiner's
differential test of 2026-12-05 found answered otherwise than by the primary alone (each failed
before the fix of 2026-12-06; random wire sessions, each run against the primary and through the
proxy):

- A named portal bound twice in one batch that a Flush splits after a read part: the primary
  refuses the second Bind (42P03) and skips the rest; the engine had closed the reader's part with
  its own Sync after the first Bind, so the portal was gone on the writer and the INSERT behind
  the second Bind ran and committed. A named portal now joins no part a Flush left open.
- A Parse the server refuses, a Flush, then a Parse of the same name (or a Bind of a statement
  that does not exist) before the Sync, in one packet: the refused part was retried on the
  writer and the rest of the batch, queued, waited for client bytes that never came (no
  ReadyForQuery). Every input now routes what is queued.
- A refused Parse whose name is parsed again with a valid text in the next batch: a Close of the
  name skipped after the refusal put the refused text back, and the engine's check on the writer
  replayed it (the client got the old 42P01).
"""

from __future__ import annotations

import psycopg
import pytest

from e2e_support import on_primary
from test_red2_findings import FLUSH, SYNC, _msg, _z, bind, exchange, execute, parse, query, same_as_primary

BAD = "SELECT count(*) FROM nosuch_table"


def close_statement(name: str) -> bytes:
    return _msg(b"C", b"S" + _z(name))


@pytest.mark.timeout(60)
def test_e1_a_write_behind_a_refused_rebind_of_a_portal_is_never_run(pair, proxy):
    on_primary(pair, "CREATE TABLE IF NOT EXISTS e1od_rows (k text)", "GRANT ALL ON e1od_rows TO PUBLIC")
    steps = [([parse("e1od_s5", "SELECT 1"), FLUSH,
               parse("e1od_s2", "SELECT 2"), bind("e1od_pa", "e1od_s2"),
               parse("e1od_s3", "INSERT INTO e1od_rows VALUES ('written')"), bind("e1od_pa", "e1od_s3"),
               execute("e1od_pa"), SYNC], 1)]
    runs = {}
    for name, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        on_primary(pair, "DELETE FROM e1od_rows")
        answers = exchange(port, steps)
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            rows = c.execute("SELECT count(*) FROM e1od_rows").fetchone()[0]
        runs[name] = (answers, rows)
    assert runs["primary"][1] == 0, runs["primary"]
    assert runs["proxy"] == runs["primary"], runs


@pytest.mark.timeout(60)
@pytest.mark.parametrize("after", ["parse_same_name", "bind_of_no_statement"])
def test_e1_a_refused_parse_then_a_flush_then_more_before_the_sync_is_answered(pair, proxy, after):
    more = parse("e1od_s2", "SELECT 1") if after == "parse_same_name" else bind("", "")
    same_as_primary(pair, proxy, [
        ([parse("e1od_s2", BAD), FLUSH, more, SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.timeout(60)
def test_e2_a_name_whose_parse_was_refused_is_parsed_afresh(pair, proxy):
    same_as_primary(pair, proxy, [
        ([parse("e1od_s3", "SELECT g FROM generate_series(1, 3) g"), bind("", "e1od_s3"), execute("", 1),
          parse("e1od_s2", "SELECT * FROM nosuch_table"), close_statement("e1od_s2"), SYNC], 1),
        ([parse("e1od_s2", "SELECT 2"), execute("e1od_pa", 1), SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.timeout(60)
def test_e2_a_name_whose_parse_was_refused_is_parsed_afresh_inside_a_block(pair, proxy):
    same_as_primary(pair, proxy, [
        ([parse("e1od_s3", "SELECT g FROM generate_series(1, 3) g"), bind("", "e1od_s3"), execute("", 1),
          parse("e1od_s2", "SELECT * FROM nosuch_table"), close_statement("e1od_s2"), SYNC], 1),
        ([query("BEGIN")], 1),
        ([parse("e1od_s2", "SELECT 2"), bind("", "e1od_s2"), execute(""), SYNC], 1),
        ([query("SELECT 'still in the block'")], 1),
        ([query("COMMIT")], 1),
    ])


@pytest.mark.timeout(60)
def test_e1_messages_sent_one_by_one_after_a_refused_flushed_execute_are_skipped_to_the_sync(pair, proxy):
    """The differential test of 2026-12-06 (seed 33, shrunk): an Execute of no portal and a Flush,
    then an Execute, a simple Query and the Sync, each in its own packet. The primary discards
    everything up to the Sync and answers it; through the proxy the batch the Query closed waited
    for its discarded Execute, and the session's next statement got no answer."""
    same_as_primary(pair, proxy, [
        ([execute("", 2), FLUSH], 0),
        ([execute("", 2)], 0),
        ([query("SELECT 1.0::float8 / 3, 0.1::float4")], 0),
        ([SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.timeout(60)
def test_e2_a_readers_error_names_the_clients_statement(pair, proxy):
    """The differential test (seed 127): a Bind with too few parameters of a statement that runs
    on the standby under the engine's name got an error naming `polarsplit_s_…`; the primary's
    names the client's statement."""
    stmt = "SELECT g FROM generate_series(1, $1::int) g"
    same_as_primary(pair, proxy, [
        ([parse("e2n_s1", stmt), bind("", "e2n_s1", ("2",)), execute(""), SYNC], 1),
        ([bind("", "e2n_s1", ("1",)), execute(""), bind("", "e2n_s1"), execute(""), SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.timeout(60)
def test_e1_an_unsynced_set_and_a_failing_query_behind_it_roll_back_together(pair, proxy):
    """The differential test (seed 288, shrunk): a SET sent as extended messages up to a Flush
    and a simple Query behind it run in one implicit transaction. The engine's capture, made due
    by the SET, ran between them, and its Sync ended that transaction: here the Query fails, and
    on the primary the SET is rolled back with it, while through the proxy it had committed."""
    same_as_primary(pair, proxy, [
        ([parse("e1s_s", "SET application_name = 'e1s_changed'"), bind("", "e1s_s"), execute(""), FLUSH], 0),
        ([query("SELECT 1/0")], 1),
        ([query("SHOW application_name")], 1),
    ])
