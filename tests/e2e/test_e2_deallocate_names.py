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
