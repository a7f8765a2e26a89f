"""Known open defects (README "Known open defects"): extended-protocol sequences around errors and
Flushes that an examiner's differential test of 2026-12-05 found answered otherwise than by the
primary alone. Each is an `xfail(strict=True)`: it fails today, and the day it passes the marker
must go (and the README's entry with it).

- A named portal bound twice in one batch that a Flush splits after a read part: the primary
  refuses the second Bind (42P03) and skips the rest; the engine closes its writer parts with its
  own Sync, the portal is gone by the second Bind, and the INSERT behind it is run and committed.
- A Parse the server refuses, a Flush, then a Parse of the same name (or a Bind of a statement
  that does not exist) before the Sync, in one packet: the client never gets its ReadyForQuery.
- A refused Parse whose name is parsed again with a valid text in the next batch: the engine's
  check on the writer replays the old text, and its 42P01 answers the client's new Parse.
"""

from __future__ import annotations

import psycopg
import pytest

from e2e_support import on_primary
from test_red2_findings import FLUSH, SYNC, _msg, _z, bind, exchange, execute, parse, query, same_as_primary

BAD = "SELECT count(*) FROM nosuch_table"


def close_statement(name: str) -> bytes:
    return _msg(b"C", b"S" + _z(name))


@pytest.mark.xfail(strict=True, reason="open: a Flush-split batch's writer parts are closed with the engine's Sync")
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


@pytest.mark.xfail(strict=True, reason="open: no ReadyForQuery after a refused Parse, a Flush and a Parse of its name")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("after", ["parse_same_name", "bind_of_no_statement"])
def test_e1_a_refused_parse_then_a_flush_then_more_before_the_sync_is_answered(pair, proxy, after):
    more = parse("e1od_s2", "SELECT 1") if after == "parse_same_name" else bind("", "")
    same_as_primary(pair, proxy, [
        ([parse("e1od_s2", BAD), FLUSH, more, SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])


@pytest.mark.xfail(strict=True, reason="open: the writer check replays a refused Parse's old text")
@pytest.mark.timeout(60)
def test_e2_a_name_whose_parse_was_refused_is_parsed_afresh(pair, proxy):
    same_as_primary(pair, proxy, [
        ([parse("e1od_s3", "SELECT g FROM generate_series(1, 3) g"), bind("", "e1od_s3"), execute("", 1),
          parse("e1od_s2", "SELECT * FROM nosuch_table"), close_statement("e1od_s2"), SYNC], 1),
        ([parse("e1od_s2", "SELECT 2"), execute("e1od_pa", 1), SYNC], 1),
        ([query("SELECT 'next'")], 1),
    ])
