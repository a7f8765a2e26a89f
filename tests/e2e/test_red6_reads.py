"""Defects an adversarial examination found (red6): reads the engine sends to the standby that it
must not, or whose answer on the standby differs from the primary's. Each is proved against the
real primary + hot standby through the example proxy and compared with a twin connection to the
primary alone (SPEC P-1, S-5, S-6, S-7, §7 F-policy).

Where a read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is
bounded (statement_timeout, connect_timeout, e2e_support.bounded): a missing answer fails fast."""

from __future__ import annotations

import time

import pytest

from e2e_support import answer, bounded, connect, on_primary, proxy_with_catalogue, ran_on, run, warm

BOUND_S = 5.0


# -- Finding 1: a call or a relation a non-SQL function body hides from the catalogue's scan -------
#
# A STABLE plpgsql function is reported by the catalogue query (src/classify/catalog_query.rs, the
# `'f'` rows: "any other as a SELECT that calls every name the body writes before a parenthesis …
# and reads every word it holds") as `SELECT NULL, <name>(), … FROM <word>, …`, built with the
# regular expression `([[:alpha:]_][[:alnum:]_$]*)[[:space:]]*\(` over prosrc (quotes removed,
# comment brackets blanked). PostgreSQL's own lexer skips what that expression does not:
# - a comment that holds a non-identifier between the name and its parenthesis
#   (`pg_is_in_recovery/* 1 */()`, `pg_is_in_recovery -- 1⏎()`): the expression looks for the
#   word right before `(` and finds `1` (no identifier) — the call is not reported;
# - a Unicode-escaped name (`U&"pg_is_in_recover\0079"()`, `U&"…" UESCAPE '!' ()`): the word
#   before `(` is `0079` or `'!'` — and as a relation, `U&"red6_se\0071"` is the words `red6_se`, `0071`,
#   not the sequence `red6_seq`.
# The function is then judged a plain STABLE read: the statement runs on the standby, which
# answers its own recovery state or its sequence's logged-ahead value (S-7). The same calls were
# fixed for `"pg_is_in_recovery"()` and `pg_is_in_recovery/**/()` (test_f_policy_hidden_calls.py);
# these spellings still pass. (README documents that a body changing *session state* through a
# name the scan misses runs on a reader; measured here too, not kept as a test: `PERFORM
# pg_advisory_lock/* 1 */(k)` in such a body took the lock on the standby — the primary held none
# and another session took it at once — and `set_config/* 1 */(…)` left the writer session without
# the setting.)

BODIES = {
    "red6_comment()": "RETURNS bool STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN NOT pg_is_in_recovery/* 1 */(); END $f$",
    "red6_line_comment()": "RETURNS bool STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN NOT pg_is_in_recovery -- 1\n (); END $f$",
    "red6_uescape()": "RETURNS bool STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN NOT U&\"pg_is_in_recover\\0079\"(); END $f$",
    "red6_uescape_char()": "RETURNS bool STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN NOT U&\"pg_is_in_recovery\" UESCAPE '!' (); END $f$",
    "red6_seq_escaped()": "RETURNS bigint STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN (SELECT last_value FROM U&\"red6_se\\0071\"); END $f$",
    "red6_unlogged()": "RETURNS bigint STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN (SELECT count(*) FROM U&\"scratc\\0068\"); END $f$",
    "red6_plain()": "RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    # Finding 4: 'now' in a body, dollar-quoted (the scan looks for it single-quoted only).
    "red6_now_dollar()": "RETURNS timestamptz STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN $q$now$q$; END $f$",
    # Finding 2: objects named by keywords (quoted when created; after a schema a keyword needs no quotes).
    '"placing"()': "RETURNS bool STABLE LANGUAGE sql AS 'SELECT NOT pg_is_in_recovery()'",
    '"verbose"()': "RETURNS bool STABLE LANGUAGE sql AS 'SELECT NOT pg_is_in_recovery()'",
    '"symmetric"(k bigint)': "RETURNS int STABLE LANGUAGE plpgsql AS $f$ BEGIN PERFORM pg_advisory_lock(k); RETURN 1; END $f$",
}
OBJECTS = [
    "CREATE SEQUENCE red6_seq", 'CREATE SEQUENCE "order"',
    "GRANT ALL ON SEQUENCE red6_seq, \"order\" TO PUBLIC",
    "SELECT nextval('red6_seq'), nextval('\"order\"') FROM generate_series(1, 3)",
    'CREATE VIEW "left" AS SELECT NOT pg_is_in_recovery() AS r', 'GRANT SELECT ON "left" TO PUBLIC',
    'CREATE VIEW "window" AS SELECT set_config(\'app.red6_kw\', \'leaked\', false) AS v',
    'GRANT SELECT ON "window" TO PUBLIC',
    # Finding 3: a domain whose CHECK only the primary fails, and one whose CHECK sets a placeholder.
    "CREATE DOMAIN red6_dom AS int CHECK (VALUE > 0 OR pg_is_in_recovery())",
    "CREATE DOMAIN red6_sdom AS text CHECK (set_config('app.red6_dom', VALUE, false) IS NOT NULL)",
    "CREATE TYPE red6_comp AS (v red6_dom)", "CREATE TYPE red6_scomp AS (v red6_sdom)",
    "GRANT USAGE ON TYPE red6_dom, red6_comp, red6_sdom, red6_scomp TO PUBLIC",
    *[f"CREATE FUNCTION {sig} {body}" for sig, body in BODIES.items()],
    *[f"GRANT EXECUTE ON FUNCTION {sig} TO PUBLIC" for sig in BODIES],
]
DROP = [f"DROP FUNCTION IF EXISTS {sig}" for sig in BODIES] + [
    'DROP VIEW IF EXISTS "left"', 'DROP VIEW IF EXISTS "window"', 'DROP SEQUENCE IF EXISTS red6_seq, "order"',
    "DROP TYPE IF EXISTS red6_scomp", "DROP TYPE IF EXISTS red6_comp", "DROP DOMAIN IF EXISTS red6_dom", "DROP DOMAIN IF EXISTS red6_sdom"]


@pytest.fixture(scope="module")
def red6_proxy(pair, tmp_path_factory):
    """A proxy whose catalogue has this module's objects from its first load."""
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("red6-objects"), "red6_plain()", DROP) as proxy:
        yield proxy


@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["red6_comment()", "red6_line_comment()", "red6_uescape()",
                                  "red6_uescape_char()", "red6_seq_escaped()"])
def test_s7_a_call_a_plpgsql_body_hides_from_the_catalogue_scan_answers_as_the_primary(pair, red6_proxy, call):
    sql = f"SELECT {call}, inet_server_port()"
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary = run(direct, sql)[0]
    with connect(red6_proxy.dsn()) as c:
        warm(c)
        through = run(c, sql)[0]
    assert through[0] == on_primary[0], (
        f"{call}: the primary answers {on_primary[0]!r}; through the proxy {through[0]!r} "
        f"(ran on the {ran_on(through[1])})")


@pytest.mark.timeout(60)
def test_p1_an_unlogged_table_a_plpgsql_body_hides_is_read_without_a_standbys_error(pair, red6_proxy):
    """The same scan, a relation: `U&"scratc\0068"` is conftest's unlogged `scratch` (kind `U`,
    the primary's alone). Read once rows have streamed, the standby's refusal (0A000) comes after
    the client has rows, so it cannot be retried (F-3): the client gets an error the primary
    never raises."""
    sql = ("SELECT id, CASE WHEN id > 90 THEN red6_unlogged() END, inet_server_port() "
           "FROM accounts, generate_series(1, 200) g ORDER BY id")
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary = answer(direct, sql)
    with connect(red6_proxy.dsn()) as c:
        warm(c)
        through = answer(c, sql)
    assert on_primary[0] == "ok" and len(on_primary[1]) == 20_000
    assert through[0] == "ok", f"the primary answers 20000 rows; through the proxy {through}"


# -- Finding 2: a keyword after a schema name is a name the engine never records -----------------
#
# After `schema.` PostgreSQL takes any keyword as a name (ColLabel: `public.placing`,
# `public.left`, `public.order` are a function, a view, a sequence), and a type/function-name
# keyword names a function unqualified too (`verbose()`). The scanner
# (src/classify/scan.rs, Scan::relation) records every identifier by hash so that the statement
# can be judged against the database's reported objects — but "the reserved keywords cannot name
# a relation unquoted and are not recorded": `is_reserved` (reserved and type/function-name
# keywords) drops them also after a dot. So the view's definition, the function's body and the
# sequence are never matched: a view over pg_is_in_recovery() answers the standby's `false`, a
# sequence the standby's logged-ahead value (S-7), and a STABLE function whose body (judged by
# name, `'f'` rows) takes an advisory lock takes it on the standby (P-1); a view over set_config
# leaves its placeholder on the pooled reader for the next clients (S-6: the engine never learnt
# that user code ran there). Quoted (`public."left"`) the same names are recorded and stay on the
# primary.


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", [
    "SELECT r, inet_server_port() FROM public.left",
    "SELECT last_value, inet_server_port() FROM public.order",
    "SELECT public.placing(), inet_server_port()",
    "SELECT verbose(), inet_server_port()",
])
def test_s7_an_object_named_by_a_keyword_answers_as_the_primary(pair, red6_proxy, sql):
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        on_primary = run(direct, sql)[0]
    with connect(red6_proxy.dsn()) as c:
        warm(c)
        through = run(c, sql)[0]
    assert through[0] == on_primary[0], (
        f"{sql}: the primary answers {on_primary[0]!r}; through the proxy {through[0]!r} "
        f"(ran on the {ran_on(through[1])})")


@pytest.mark.timeout(60)
def test_p1_an_advisory_lock_in_a_function_named_by_a_keyword_is_taken_on_the_primary(pair, red6_proxy):
    key = 660_201
    with connect(red6_proxy.dsn()) as c:
        warm(c)
        ran = run(c, "SELECT public.symmetric(%s), inet_server_port()", (key,))[0]
        with connect(pair.primary.dsn(dbname="app")) as other:
            held = run(other, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s", (key,))[0][0]
            got = run(other, "SELECT pg_try_advisory_lock(%s)", (key,))[0][0]
            if got:
                run(other, "SELECT pg_advisory_unlock(%s)", (key,))
        run(c, "SELECT pg_advisory_unlock_all()")
    assert ran_on(ran[1]) == "primary" and held == 1 and not got, (
        f"public.symmetric() ran on the {ran_on(ran[1])}; the primary holds {held} such lock; "
        f"another session could take it: {got}")


@pytest.mark.timeout(60)
def test_s6_a_view_named_by_a_keyword_leaves_nothing_for_another_client(pair, red6_proxy):
    """`public.window`, a view over set_config: unrecorded, the engine never learns that the read
    ran user code on the pooled reader (S-6 resets or closes a reader that did), so the
    placeholder reaches the next clients of that reader."""
    with connect(red6_proxy.dsn()) as a:
        warm(a)
        ran = run(a, "SELECT v, inet_server_port() FROM public.window")[0]
    seen = []
    for _ in range(3):
        with connect(red6_proxy.dsn()) as b:
            warm(b)
            for _ in range(2):
                seen.append(tuple(run(b, "SELECT current_setting('app.red6_kw', true), inet_server_port()")[0]))
    leaked = [s for s in seen if s[0] == "leaked"]
    assert not leaked, f"public.window ran on the {ran_on(ran[1])}; later clients saw {leaked} of {seen}"


# -- Finding 3: a parameter's type given by OID runs the type's code the text never names ---------
#
# A Parse may give each parameter's type by OID (libpq's paramTypes; psycopg sends a registered
# composite type's OID, `register_composite`), and the Bind's value is then input as that type on
# the server that runs it — a domain's CHECK, a composite's fields' domains' CHECKs. The engine
# judges the statement's text only (`SELECT $1::text`): no name there matches the catalogue's
# `'d'` rows, and the Parse's parameter types are never looked at (src/protocol/frontend.rs
# `FrontendMessage::Parse` keeps only their count; the catalogue reports domains by name, not
# OID), so the read goes to the standby and the CHECK runs there:
# - a CHECK that only the primary fails (`VALUE > 0 OR pg_is_in_recovery()`): the primary
#   answers 23514, the proxy a row (S-7, the client sees another answer than the primary's);
# - a CHECK calling set_config: the placeholder lands on the pooled reader, which nothing resets
#   (no code the engine knows of ran there), and later clients read it (S-6).


def exec_params(conn, sql: str, value: str, oid: int):
    """One unnamed Parse (with the parameter's type OID) / Bind / Execute / Sync: a row's values
    as text, or ('error', SQLSTATE)."""
    from psycopg import pq

    with bounded(conn, BOUND_S, sql):
        res = conn.pgconn.exec_params(sql.encode(), [value.encode()], [oid])
    if res.status == pq.ExecStatus.TUPLES_OK:
        return [res.get_value(0, i).decode() for i in range(res.nfields)]
    return ("error", res.error_field(pq.DiagnosticField.SQLSTATE).decode())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("typ, value", [("red6_dom", "-5"), ("red6_comp", "(-5)")], ids=["domain", "composite"])
def test_s7_a_parameter_typed_by_oid_is_checked_as_on_the_primary(pair, red6_proxy, typ, value):
    sql = "SELECT $1::text, inet_server_port()"
    answers = {}
    with connect(pair.primary.dsn(dbname="app", user="app_trust")) as direct:
        oid = run(direct, "SELECT %s::regtype::oid", (typ,))[0][0]
        answers["primary"] = exec_params(direct, sql, value, oid)
    with connect(red6_proxy.dsn()) as c:
        warm(c)
        answers["proxy"] = exec_params(c, sql, value, oid)
    assert answers["primary"] == ("error", "23514")
    assert answers["proxy"] == answers["primary"], (
        f"a {typ} parameter {value!r}: the primary answers {answers['primary']}, through the proxy {answers['proxy']}")


@pytest.mark.timeout(60)
def test_s6_a_domain_check_a_psycopg_composite_parameter_runs_reaches_no_other_client(pair, red6_proxy):
    from psycopg.types.composite import CompositeInfo, register_composite

    with connect(red6_proxy.dsn()) as a:
        info = CompositeInfo.fetch(a, "red6_scomp")
        register_composite(info, a)
        warm(a)
        ran = run(a, "SELECT (%s).v, inet_server_port()", [info.python_type("leaked")])[0]
    seen = []
    for _ in range(3):
        with connect(red6_proxy.dsn()) as b:
            warm(b)
            for _ in range(2):
                seen.append(tuple(run(b, "SELECT current_setting('app.red6_dom', true), inet_server_port()")[0]))
    leaked = [s for s in seen if s[0] == "leaked"]
    assert not leaked, f"the composite parameter's CHECK ran on the {ran_on(ran[1])}; later clients saw {leaked} of {seen}"


# -- Finding 4: 'now' that reaches a timestamp input by a way the lexer does not read -------------
#
# Inside a transaction block, `'now'::timestamptz` is the transaction's start on the primary. A
# read split off the block (SPLIT_PRE_WRITE) runs in the standby's own implicit transaction, so the
# engine keeps such reads on the writer when a literal may spell 'now', 'today', … (Effects::
# TXN_VALUE: src/classify/lexer.rs may_spell_txn_time looks inside each string token; scan.rs
# sets it per String/DollarString token). What it does not see is 'now' that is not one token:
# - a Bind parameter (`SELECT %s::timestamptz` with 'now' — the text has no literal at all; a
#   Bind's "parameter values and formats stay opaque", src/protocol/frontend.rs);
# - a literal continued on the next line (`'no'⏎'w'` is one string to PostgreSQL: two tokens to
#   the lexer, neither spelling 'now');
# - text computed in the statement (`('no' || 'w')::timestamptz`);
# - a plpgsql body that returns `$q$now$q$`: the catalogue's scan (catalog_query.rs) adds now()
#   for `'now'` written with single quotes only.
# The client then gets the standby's statement time, not the transaction's start — 0.3 s later
# here — where the primary answers the same instant for the whole block.


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql, params", [
    ("SELECT %s::timestamptz, inet_server_port()", ["now"]),
    ("SELECT 'no'\n'w'::timestamptz, inet_server_port()", None),
    ("SELECT ('no' || 'w')::timestamptz, inet_server_port()", None),
    ("SELECT red6_now_dollar(), inet_server_port()", None),
], ids=["bind_parameter", "continued_literal", "concatenation", "plpgsql_body_dollar_quoted"])
def test_s7_now_the_lexer_cannot_spell_is_the_transaction_start(pair, red6_proxy, sql, params):
    results = {}
    for who, dsn in (("primary", pair.primary.dsn(dbname="app", user="app_trust")), ("proxy", red6_proxy.dsn())):
        with connect(dsn) as c:
            if who == "proxy":
                warm(c)
            c.autocommit = False
            start = run(c, "SELECT transaction_timestamp()")[0][0]
            time.sleep(0.3)
            value, port = run(c, sql, params)[0]
            c.rollback()
            results[who] = (value == start, value - start, ran_on(port))
    assert results["primary"][0], results
    assert results["proxy"][0], (
        f"{sql!r} {params}: the primary answers the transaction's start; through the proxy "
        f"{results['proxy'][1]} after it (ran on the {results['proxy'][2]})")
