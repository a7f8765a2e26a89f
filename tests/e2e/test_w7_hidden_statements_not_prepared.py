"""SPEC W-7, S-5: the engine's probe and capture leave nothing prepared on the writer.

pg8000's own suite through the example proxy (2026-12-06): its `test_close_prepared_statement`
counts the rows of `pg_prepared_statements` and found two more than on the primary alone — the
engine's `polarsplit_probe` and `polarsplit_capture`, parsed once per writer connection and kept
there. Now each is closed before its Parse and again after its Bind (the portal keeps its plan,
verified on PostgreSQL 15), in its own batch, so the client's `pg_prepared_statements` lists what
the primary alone lists.

Each case compares the whole message stream with the primary's, and checks that the proxy's
session did send the hidden work it is about (else the case proves nothing)."""

from __future__ import annotations

import pytest

from test_red2_findings import SYNC, bind, execute, exchange, parse, query, same_as_primary

LIST = query("SELECT name, statement FROM pg_catalog.pg_prepared_statements ORDER BY name")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["autocommit", "in_block"])
def test_w7_s5_the_probe_and_capture_leave_nothing_in_pg_prepared_statements(pair, proxy, case):
    exchange(pair.primary.port, [([query("CREATE TABLE IF NOT EXISTS w7_hidden (v int)")], 1)])
    if case == "autocommit":
        # A write (the probe pipelined behind it), a setting (the capture behind it), a
        # statement of the client's own, then the list.
        steps = [
            ([query("INSERT INTO w7_hidden VALUES (1)")], 1),
            ([query("SET application_name = 'w7_hidden'")], 1),
            ([parse("s1", "SELECT 1"), bind("", "s1"), execute(""), SYNC], 1),
            ([query("INSERT INTO w7_hidden VALUES (2)")], 1),
            ([LIST], 1),
        ]
    else:
        # Inside a READ COMMITTED block a read the writer serves gets the probe behind it under a
        # portal of its own (P-5); the list is read in the block and after it.
        steps = [
            ([query("BEGIN")], 1),
            ([query("SELECT now() IS NOT NULL FROM w7_hidden LIMIT 1")], 1),
            ([query("SELECT count(*) >= 0 FROM w7_hidden")], 1),
            ([LIST], 1),
            ([query("COMMIT")], 1),
            ([LIST], 1),
        ]
    before = proxy.stats()["counter"]
    same_as_primary(pair, proxy, steps)
    after = proxy.stats()["counter"]
    probes = after.get("probes_sent", 0) - before.get("probes_sent", 0)
    captures = after.get("captures_sent", 0) - before.get("captures_sent", 0)
    assert probes + captures >= 2, f"the hidden work ran ({probes} probes, {captures} captures)"
    if case == "autocommit":
        assert probes >= 1 and captures >= 2, f"{probes} probes, {captures} captures"
