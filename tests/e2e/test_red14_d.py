"""Examiner round 14, area d (red14-d): writes and server control judged as reads (SPEC P-1…P-5,
S-4, S-6, S-7, §7 F-policy), against the real primary + hot standby through the example proxy, each
answer compared with a twin session on the primary alone; where a read ran is told by
inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded (statement_timeout
5 s, connect_timeout, e2e_support.bounded via `run`).

Found (2026-12-07, main at edf3907):

Finding 1 (S-6, S-7, §7 F-policy): **a built-in type-input function given a type by OID runs that
type's hidden code — a domain's CHECK — on the reader.** `record_in(cstring, oid, int4)`,
`array_in(cstring, oid, int4)` and `domain_in(cstring, oid, int4)` are STABLE built-ins of
pg_catalog, callable from SQL, and run the input code of the type whose OID they are passed: for a
domain (or an array of one, or a composite with a field of one) its CHECK expression. The engine
judges a type's code only by the names the statement's text shows (the catalogue's `tf` closure,
src/classify/catalog_query.rs, matched against words by src/classify/scan.rs); here the type is
a `'d'::regtype` string, a number (`16419`) or computed (`to_regtype('dp' || 'os')`), so the read
counts as built-in code only (src/classify/builtins/mod.rs judges the three read-safe by their
volatility) and goes to a reader, whose connection is then pooled as clean (built-in code only,
so no state check or reset, S-6). Measured, 3 of 3 runs:
- S-7: domain `CHECK (VALUE > 0 OR pg_is_in_recovery())`: `SELECT array_in('{-1}',
  'd'::regtype, -1)::text` — the primary alone refuses it (23514 `value for domain … violates
  check constraint`), through the proxy the standby answers `{-1}`; the same with `record_in` of a
  composite holding the domain, `domain_in`, the OID as a number and `to_regtype()` of a computed
  name (5 spellings, each on the standby).
- S-6, another client's state: domain `CHECK (set_config('app.r14d_dset', VALUE::text, false) IS
  NOT NULL)`: one client's `SELECT array_in('{42}', 'd'::regtype, -1)` through the proxy runs on a
  pooled standby connection; each of the next 3 clients (fresh sessions, nothing set) reads
  `current_setting('app.r14d_dset', true)` = `'42'` through the proxy, NULL on the primary alone.
- P-1 / §7, a write on a reader after rows reached the client: domain `CHECK (VALUE <> 50000 OR
  nextval('r14d.s') > 0)`, `SELECT x, array_in(('{' || x || '}')::cstring, 'd'::regtype, -1) FROM
  generate_series(1, 100000) x`: the primary alone answers 100,000 rows (and takes the value);
  through the proxy the client gets 25006 `cannot execute nextval() in a read-only transaction`
  from the standby after rows had reached it (F-3: not retried).
The three tests fail on edf3907 in every run (test 1 and 2: 6 of 6 runs, test 3: 4 of 4; the
S-7 test 5 of 5 spellings each run).
A fix: the type-input built-ins that take a type OID (`record_in`, `array_in`, `domain_in`,
`range_in`/`multirange_in` and their `any*` forms, `enum_in`, the `*_recv` forms where callable)
are code the engine cannot see into unless the database has no user type with code (no domain
CHECK, no user I/O) — or simply not read-safe.

Probed, held (once each, primary alone vs through the proxy): every spelling of a never-safe call
the brief lists (`pg_catalog."setval"`, `U&"\\0073etval"`, `U&"!0073etval" UESCAPE '!'`,
comments between schema, dot, name and parenthesis, `"pg_catalog".pg_advisory_lock`, calls in
FROM and ROWS FROM, attribute notation `('seq'::regclass).nextval`, `row(…).set_config`, named
arguments of set_config in any order) classified not replica-safe; SELECT INTO in 8 shapes (no
target list, DISTINCT, TEMP, UNLOGGED, parenthesised, after UNION, after WITH), locking clauses in
subqueries and with comments, EXPLAIN ANALYZE/ANALYSE/(ANALYZE false) → primary; a sequence read
as `TABLE seq`, `FROM seq`, `"seq"`, `public.seq`, in a subquery and through a view → primary
(last_value the primary's); a view calling set_config or pg_try_advisory_lock, and a row-level
security policy calling set_config, ran on the primary; `/* route=reader */` did not send
set_config, pg_try_advisory_lock or pg_stat_reset to a reader; `json_to_record(…) AS x(a d)` and
`jsonb_populate_record(NULL::composite, …)` (the domain named) → primary. Built-ins: every
volatile pg_catalog function outside the reviewed list is primary-only (test_builtins_live.py);
of the STABLE ones with 2+ arguments only the type-input functions above run user code.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, connect, on_primary, run, start_proxy, stop_proxy, warm

SCHEMA = "r14d"

OBJECTS = [
    f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE",
    f"CREATE SCHEMA {SCHEMA}",
    f"GRANT USAGE ON SCHEMA {SCHEMA} TO PUBLIC",
    # Server-dependent: the primary refuses a value the standby accepts.
    f"CREATE DOMAIN {SCHEMA}.dpos AS int CHECK (VALUE > 0 OR pg_is_in_recovery())",
    f"CREATE TYPE {SCHEMA}.cpos AS (a {SCHEMA}.dpos)",
    # Session state: the check leaves a placeholder in the backend that ran it.
    f"CREATE DOMAIN {SCHEMA}.dset AS int CHECK (set_config('app.r14d_dset', VALUE::text, false) IS NOT NULL)",
    # A write: the check takes a sequence value for one value late in a streamed answer.
    f"CREATE SEQUENCE {SCHEMA}.s",
    f"GRANT ALL ON SEQUENCE {SCHEMA}.s TO PUBLIC",
    f"CREATE DOMAIN {SCHEMA}.dwrite AS int CHECK (VALUE <> 50000 OR nextval('{SCHEMA}.s') > 0)",
]
DROP = [f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"]


@pytest.fixture(scope="module")
def proxy(pair, tmp_path_factory):
    on_primary(pair, *OBJECTS)
    p = start_proxy(pair, tmp_path_factory.mktemp("red14d"))
    try:
        yield p
    finally:
        stop_proxy(p)
        on_primary(pair, *DROP)


def primary_dsn(pair):
    return pair.primary.dsn(dbname="app", user="app_trust")


def outcome(conn, sql):
    """('ok', first column, port) or ('error', SQLSTATE)."""
    try:
        rows = run(conn, sql)
        return ("ok", rows[0][0], rows[0][-1])
    except psycopg.Error as e:
        if conn.closed:
            raise
        return ("error", e.sqlstate)


def dpos_oid(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        return c.execute(f"SELECT '{SCHEMA}.dpos'::regtype::oid").fetchone()[0]


@pytest.mark.timeout(120)
def test_s7_a_domain_check_run_by_a_type_input_builtin_answers_as_the_primary(pair, proxy):
    oid = dpos_oid(pair)
    reads = [
        f"SELECT array_in('{{-1}}', '{SCHEMA}.dpos'::regtype, -1)::text, inet_server_port()",
        f"SELECT record_in('(-1)', '{SCHEMA}.cpos'::regtype, -1)::text, inet_server_port()",
        f"SELECT domain_in('-1', '{SCHEMA}.dpos'::regtype, -1) IS NULL, inet_server_port()",
        f"SELECT array_in('{{-1}}', {oid}, -1)::text, inet_server_port()",
        f"SELECT array_in('{{-1}}', to_regtype('{SCHEMA}.dp' || 'os'), -1)::text, inet_server_port()",
    ]
    diffs = []
    with connect(primary_dsn(pair)) as alone, connect(proxy.dsn()) as through:
        warm(through)
        for sql in reads:
            want = outcome(alone, sql)
            got = outcome(through, sql)
            assert want == ("error", "23514"), (sql, want)
            if got[0] != want[0] or got[:2] != want[:2]:
                diffs.append((sql, "primary alone", want, "through the proxy", got))
            time.sleep(0.3)
    assert not diffs, "the domain's check answered by the standby:\n" + "\n".join(map(str, diffs))


@pytest.mark.timeout(120)
def test_s6_a_domain_check_run_by_a_type_input_builtin_leaves_no_setting_for_other_clients(pair, proxy):
    setter = f"SELECT array_in('{{42}}', '{SCHEMA}.dset'::regtype, -1)::text, inet_server_port()"
    probe = "SELECT current_setting('app.r14d_dset', true), inet_server_port()"

    def later_clients(dsn, n=3):
        seen = []
        for _ in range(n):
            with connect(dsn) as c:
                if dsn != primary_dsn(pair):
                    warm(c)
                seen.append(run(c, probe)[0])
            time.sleep(0.3)
        return seen

    with connect(primary_dsn(pair)) as a:
        assert run(a, setter)[0][0] == "{42}"
    alone = later_clients(primary_dsn(pair))
    assert all(v is None for v, _ in alone), alone

    with connect(proxy.dsn()) as a:
        warm(a)
        first = run(a, setter)[0]
        assert first[0] == "{42}"
    time.sleep(0.3)
    through = later_clients(proxy.dsn())
    leaked = [(v, p) for v, p in through if v is not None]
    assert not leaked, (
        f"the setter ran on port {first[1]} ({'standby' if first[1] in STANDBY_PORTS else 'primary'}); "
        f"later clients through the proxy read {through}, on the primary alone {alone}"
    )


@pytest.mark.timeout(120)
def test_p1_a_domain_check_that_writes_run_by_a_type_input_builtin_never_reaches_a_reader(pair, proxy):
    read = (f"SELECT x, array_in(('{{' || x || '}}')::cstring, '{SCHEMA}.dwrite'::regtype, -1)::text, inet_server_port() "
            "FROM generate_series(1, 100000) x")

    def rows_or_error(dsn, proxied):
        with connect(dsn) as c:
            if proxied:
                warm(c)
            try:
                rows = run(c, read)
                return ("ok", len(rows), rows[0][-1])
            except psycopg.Error as e:
                return ("error", e.sqlstate, str(e).splitlines()[0])

    want = rows_or_error(primary_dsn(pair), False)
    assert want[:2] == ("ok", 100000), want
    got = rows_or_error(proxy.dsn(), True)
    assert got[:2] == want[:2], f"primary alone {want}; through the proxy {got}"
