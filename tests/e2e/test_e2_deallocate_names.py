"""SPEC E-2: a statement the client deallocates is gone wherever the engine prepared it.

An examiner's probe of 2026-12-05: after `DEALLOCATE s1`, a Parse of `s1` with a new text and its
Bind answered the old text's rows from the standby (5 of 5), where the primary answers the new
one: the engine still tracked the old `s1` when the DEALLOCATE came as an extended-protocol
statement (PQexecParams, pgjdbc, psycopg's pipeline: its text was not at hand), or in a spelling
its own reading of the name got wrong (a comment, `U&"…"`, `""`, a non-ASCII letter, a name over
63 bytes: 14 of 14). The name is now read as the server reads it, and a DEALLOCATE whose name the
engine cannot read leaves every statement the writer has to the writer.

Each case compares the whole message stream with the primary's."""

from __future__ import annotations

import pytest

from test_red2_findings import SYNC, bind, execute, parse, query, same_as_primary


def prepared(name: str, text: str) -> list[bytes]:
    return [parse(name, text), bind("", name), execute(""), SYNC]


LONG = "s" * 70

SPELLINGS = {
    "extended": ("s1", [parse("", "DEALLOCATE s1"), bind("", ""), execute(""), SYNC]),
    "comment": ("s1", [query("DEALLOCATE /* c */ s1")]),
    "unicode": ("s1", [query('DEALLOCATE U&"\\0073\\0031"')]),
    "doubled_quote": ('a"b', [query('DEALLOCATE "a""b"')]),
    "non_ascii": ("Ä1", [query("DEALLOCATE Ä1")]),
    "over_63_bytes": (LONG[:63], [query(f"DEALLOCATE {LONG}")]),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_e2_a_statement_deallocated_then_parsed_again_runs_its_new_text(pair, proxy, spelling):
    name, deallocate = SPELLINGS[spelling]
    same_as_primary(pair, proxy, [
        (prepared(name, "SELECT 'old'"), 1),
        (deallocate, 1),
        (prepared(name, "SELECT 'new'"), 1),
        ([bind("", name), execute(""), SYNC], 1),
    ])


# -- A statement that drops them all, and Parses behind it ------------------------------------------
# The engine applied `DEALLOCATE ALL` / `DISCARD ALL` at the ReadyForQuery of their unit, so it
# forgot the statements the same batch (or one pipelined behind it) parsed after them; a second
# Parse of such a name got ParseComplete where the primary answers 42P05 (the differential test's
# sweep with COPY steps, seed 3063). It is applied when the server ran it now.

def run(text: str) -> list[bytes]:
    return [parse("", text), bind("", ""), execute("")]


DROPS = {
    "deallocate_all_in_the_batch": lambda: run("DEALLOCATE ALL") + [parse("s2", "SELECT 2"), SYNC],
    "deallocate_all_then_the_name_in_use": lambda: run("DEALLOCATE ALL") + [parse("s1", "SELECT 3"), SYNC],
    "deallocate_all_as_a_query_then_a_batch": lambda: [query("DEALLOCATE ALL"), parse("s2", "SELECT 2"), SYNC],
    "discard_all_as_a_query_then_the_name_in_use": lambda: [query("DISCARD ALL"), parse("s1", "SELECT 3"), SYNC],
    "failed_deallocate_all_then_the_name_in_use":
        lambda: run("DEALLOCATE ALL") + [parse("", "SELECT 1/0"), bind("", ""), execute(""),
                                          parse("s1", "SELECT 3"), SYNC],
    "deallocate_all_then_a_bind_of_a_dropped_name":
        lambda: run("DEALLOCATE ALL") + [bind("", "s1"), execute(""), SYNC],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(DROPS))
def test_e2_statements_parsed_behind_a_deallocate_all_exist_and_dropped_ones_do_not(pair, proxy, case):
    steps = DROPS[case]()
    same_as_primary(pair, proxy, [
        (prepared("s1", "SELECT 'old'"), 1),
        (steps, steps.count(SYNC) + sum(1 for m in steps if m[:1] == b"Q")),
        # Each name again: refused where it exists (42P05), new where it does not.
        ([parse("s1", "SELECT 4"), SYNC], 1),
        ([parse("s2", "SELECT 5"), SYNC], 1),
        ([bind("", "s1"), execute(""), SYNC], 1),
    ])
