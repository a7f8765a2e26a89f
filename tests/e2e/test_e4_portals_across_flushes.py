"""SPEC E-4 outside a transaction block: a portal lives until the client's Sync, across Flushes.

An examiner's finding of 2026-12-05 (raw protocol; node-postgres `query({rows})` and pg-cursor
send the same Execute-with-a-limit + Flush): in one implicit transaction, a row-limited Execute of
a read's portal, a Flush, then a statement only the primary may run, a Flush, then the portal's
next Execute. The engine sent the first part to the standby, closed it with a hidden Sync when the
primary-bound part came (destroying the portal there), and sent the resumed Execute to the writer:
34000 `portal "p1" does not exist`, where the primary alone goes on with the next rows — and the
error rolled back an INSERT in the middle part that the client had seen succeed (9/9, 1/1). Such a
part (a named portal bound, or a row-limited Execute) now runs on the writer.

Every case compares the whole message stream with the primary's."""

from __future__ import annotations

import psycopg
import pytest

from test_red2_findings import FLUSH, SYNC, bind, exchange, execute, parse, same_as_primary

READ = "SELECT g FROM generate_series(1, 10) g"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("portal", ["e4f_p", ""])
def test_e4_a_row_limited_portal_resumed_after_a_primary_part_goes_on_as_on_the_primary(pair, proxy, portal):
    # A statement the primary must run, under names that leave the portal alone.
    middle = [parse("e4f_m", "SELECT pg_is_in_recovery()"), bind("e4f_mp", "e4f_m"), execute("e4f_mp"), FLUSH]
    same_as_primary(pair, proxy, [
        ([parse("", READ), bind(portal, ""), execute(portal, 3), FLUSH], 0),
        (middle, 0),
        ([execute(portal, 3), FLUSH], 0),
        ([execute(portal, 0), SYNC], 1),
    ])


@pytest.mark.timeout(60)
def test_e4_a_write_between_a_portals_executes_is_kept_as_on_the_primary(pair, proxy):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS e4f_w (k int)")
        c.execute("GRANT ALL ON e4f_w TO PUBLIC")
    pair.wait_replayed()
    steps = [
        ([parse("", READ), bind("e4f_p", ""), execute("e4f_p", 3), FLUSH], 0),
        ([parse("", "INSERT INTO e4f_w VALUES (1)"), bind("", ""), execute(""), FLUSH], 0),
        ([execute("e4f_p", 3), FLUSH], 0),
        ([SYNC], 1),
    ]
    runs = {}
    for name, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            c.execute("DELETE FROM e4f_w")
        answers = exchange(port, steps)
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
            kept = c.execute("SELECT count(*) FROM e4f_w").fetchone()[0]
        runs[name] = (answers, kept)
    assert runs["primary"][1] == 1, runs["primary"]
    assert runs["proxy"] == runs["primary"], runs
