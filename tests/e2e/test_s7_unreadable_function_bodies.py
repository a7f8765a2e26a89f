"""What the catalogue's scan of a non-SQL function body cannot read is never judged safe (SPEC S-7,
§7 F-policy; src/classify/catalog_query.rs, `b.unreadable`): the scan reads lower-case words
with the quotes taken off, so a quoted name it cannot spell (`"Seq"`, `"my seq"`) hid the
sequence a STABLE plpgsql function reads, and the standby answered its logged-ahead value. A
comment between a call's name and its `(` is taken out before the scan (a call, read). Beside
test_red6_reads.py, which proves the `U&`/`UESCAPE`/comment spellings; one proxy, a few reads."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, on_primary, proxy_with_catalogue, STANDBY_PAUSE_S

BODIES = {
    "ub_mixed()": "RETURNS bigint STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN (SELECT last_value FROM \"Ub_Seq\"); END $f$",
    "ub_space()": "RETURNS bigint STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN (SELECT last_value FROM \"ub seq\"); END $f$",
    # A readable body with comments and quotes in strings: still a read of the standby.
    "ub_plain(x int)": ("RETURNS int STABLE LANGUAGE plpgsql AS $f$ -- it's a note\nBEGIN /* don't */ "
                        "IF x < 0 THEN RAISE EXCEPTION 'bad \"%\" of \"X y\"', x; END IF; RETURN abs(x); END $f$"),
}
OBJECTS = [
    'CREATE SEQUENCE "Ub_Seq"', 'CREATE SEQUENCE "ub seq"', 'GRANT ALL ON SEQUENCE "Ub_Seq", "ub seq" TO PUBLIC',
    'SELECT nextval(\'"Ub_Seq"\'), nextval(\'"ub seq"\') FROM generate_series(1, 3)',
    *[f"CREATE FUNCTION {sig} {body}" for sig, body in BODIES.items()],
    *[f"GRANT EXECUTE ON FUNCTION {sig} TO PUBLIC" for sig in BODIES],
]
DROP = [f"DROP FUNCTION IF EXISTS {sig}" for sig in BODIES] + ['DROP SEQUENCE IF EXISTS "Ub_Seq", "ub seq"']


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, options="-c statement_timeout=5000")


def run(conn, sql):
    with bounded(conn, 5.0, sql[:80]):
        return conn.execute(sql).fetchone()


def warm(conn) -> None:
    deadline = time.monotonic() + 3
    while run(conn, "SELECT inet_server_port()")[0] not in STANDBY_PORTS:
        assert time.monotonic() < deadline, "no plain read of the session reached the standby within 3 s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def ub_proxy(pair, tmp_path_factory):
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("unreadable-bodies"), "ub_plain(1)", DROP) as proxy:
        yield proxy


@pytest.mark.timeout(60)
def test_s7_a_quoted_name_the_scan_cannot_spell_answers_as_the_primary(pair, ub_proxy):
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary_ = run(direct, "SELECT ub_mixed(), ub_space()")
    with connect(ub_proxy.dsn()) as c:
        warm(c)
        through = {call: run(c, f"SELECT {call}, inet_server_port()") for call in ("ub_mixed()", "ub_space()")}
    # The readable body with comments and quoted text in its strings stays a standby read — in a
    # session of its own: code the engine cannot read may have set a placeholder under a name
    # it never saw, and the session that ran it reads on the writer from then on (README, the
    # unseen-code hazard; since 2026-12-07 for every definition the scan cannot read). (A call
    # of a body the scan cannot read may have run DDL: reads wait on the writer for the
    # catalogue load that follows, which takes longer on a loaded machine.)
    with connect(ub_proxy.dsn()) as c:
        warm(c)
        deadline = time.monotonic() + 5
        plain = run(c, "SELECT ub_plain(-0), inet_server_port()")
        while plain[1] not in STANDBY_PORTS and time.monotonic() < deadline:
            time.sleep(STANDBY_PAUSE_S)
            plain = run(c, "SELECT ub_plain(-0), inet_server_port()")
    assert on_primary_ == (3, 3)
    assert {k: v[0] for k, v in through.items()} == {"ub_mixed()": 3, "ub_space()": 3}, through
    assert plain[1] in STANDBY_PORTS, plain
