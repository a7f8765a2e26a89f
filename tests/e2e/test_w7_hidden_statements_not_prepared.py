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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["sql", "extended"])
def test_w7_s5_a_reserved_name_is_refused_with_42p05_and_the_session_goes_on(pair, proxy, how):
    """The names are the engine's (README "The contract"): a client's `PREPARE` of one, or its Parse
    of one, is refused with 42P05 through the proxy (the primary alone would take it), and the
    session's probes and captures go on working after it."""
    exchange(pair.primary.port, [([query("CREATE TABLE IF NOT EXISTS w7_hidden (v int)")], 1)])
    if how == "sql":
        refused = [query("PREPARE polarsplit_capture AS SELECT 1")]
    else:
        refused = [parse("polarsplit_probe", "SELECT 1"), bind("", "polarsplit_probe"), execute(""), SYNC]
    before = proxy.stats()["counter"]
    got = exchange(proxy.port, [
        (refused, 1),
        ([query("INSERT INTO w7_hidden VALUES (3)")], 1),
        ([query("SET application_name = 'w7_reserved'")], 1),
        ([query("PREPARE mine AS SELECT 1")], 1),
        ([LIST], 1),
    ])
    after = proxy.stats()["counter"]
    errors = [m for m in got if m[0] == "E"]
    assert [e[2] for e in errors] == ["42P05"], got
    rows = [m for m in got if m[0] == "D"]
    assert len(rows) == 1 and b"mine" in rows[0][1], f"only the client's own statement is listed: {got}"
    assert after.get("hidden_failures", 0) == before.get("hidden_failures", 0), "ours never failed"
    assert after.get("captures_sent", 0) > before.get("captures_sent", 0)
