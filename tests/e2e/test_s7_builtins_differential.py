"""S-7 ("a read routed to a standby returns exactly what the primary would return"), differentially,
for PostgreSQL's built-in functions wholesale: every built-in of the live primary's pg_proc that a
statement can call without arguments (pg_catalog and information_schema, extension members left
out; not an aggregate, window function or procedure; `pronargs = pronargdefaults`), and every one
that takes one argument (the rest defaulted) of a common type, with a fixed sample per type
(SAMPLES) — is called on the primary directly, then through the proxy, then on the primary again;
so is every built-in view (S-7's server-dependent relations are among them).

- The two direct answers differ: the function depends on time or chance (now(), random(), …): it
  is skipped (and listed) unless the proxy's answer is of another kind than both (an error where
  they give a value, NULL where they give one, another SQLSTATE).
- A proxy answer the standby gave (`inet_server_port()` says where each statement ran) must be the
  primary's. One the primary gave through the proxy is not compared (another connection: per-
  connection values such as pg_backend_pid() differ there by design); the call is retried in a new
  session, up to 3 tries, because a session's first reads or its reads after a write may stay on
  the primary — that is correct routing and passes.
- An error through the proxy has no port: it is compared whatever server raised it (a client sees
  it either way).
- Differences S-7 intends (INTENDED) are allowed and named. Functions with effects beyond their
  statement (locks, signals, WAL control, large objects, …) are not called (NOT_CALLED); a second
  test checks that each of them is sent to the primary, so the list cannot hide a function the
  engine would run on a standby.

Answers compare as text (`::text`; a set-returning function's rows as one sorted text array).
About 500 statements, each run twice on one direct connection and up to three times through the
proxy (a new session only where one stopped reaching the standby), bounded per statement
(statement_timeout) and per batch (a watchdog): a few seconds."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, report

SECTION = "S-7: built-ins, primary vs standby (differential)"
TRIES = 3  # proxy tries per call: until it ran on the standby
STATEMENT_TIMEOUT = "5s"
BATCH_BOUND_S = 40  # a watchdog per batch of statements on one connection

# One fixed argument per common type (a call with one non-defaulted argument). `s7_diff_seq` is a
# sequence this module creates and advances, so a function reading a sequence's state sees one.
SAMPLES: dict[str, list[str]] = {
    "regclass": ["pg_catalog.pg_class", "public.s7_diff_seq"],
    "oid": ["1259"],
    "text": ["x"],
    "name": ["postgres"],
    "integer": ["1"],
    "bigint": ["1"],
    "smallint": ["1"],
    "boolean": ["true"],
    "xid": ["3"],
}

# Differences S-7 intends (SPEC S-7, README): they say where a read ran, which operators and
# these tests use to see offload.
INTENDED = {
    "inet_server_port": "S-7: says where a read ran (documented as replica-safe on purpose)",
    "inet_server_addr": "S-7: says where a read ran (documented as replica-safe on purpose)",
}

# Defects reported, not failed, while their fix is elsewhere (none: age(xid) and mxid_age go to the
# writer since the F-policy counts arguments); a difference of any other function fails.
FIXED_ELSEWHERE: dict[str, str] = {}

# Not called: effects beyond the statement (session locks, signals, server and WAL control,
# backups, replication slots and origins, large objects, sequences, session settings, catalogue
# writes, statistics resets) or a sleep. test_s7_functions_not_called_go_to_the_primary checks
# that every one of them is answered by the primary.
NOT_CALLED = re.compile(
    r"^(nextval|setval|setseed|set_config|loread|lowrite|lo_.*|binary_upgrade_.*"
    r"|pg_(try_)?advisory_.*|pg_sleep.*|pg_stat_reset.*|pg_create_.*|pg_copy_.*|pg_logical_slot_.*"
    r"|pg_drop_replication_slot|pg_replication_slot_advance|pg_replication_origin_.*"
    r"|pg_promote|pg_reload_conf|pg_rotate_logfile.*|pg_switch_wal|pg_backup_start|pg_backup_stop"
    r"|pg_wal_replay_pause|pg_wal_replay_resume|pg_terminate_backend|pg_cancel_backend"
    r"|pg_log_backend_memory_contexts|pg_stop_making_pinned_objects|pg_import_system_collations"
    r"|pg_nextoid|pg_notify|pg_logical_emit_message|brin_summarize_.*|brin_desummarize_range"
    r"|gin_clean_pending_list)$"
)

FUNCTIONS_SQL = """
SELECT n.nspname, p.proname, p.proretset, p.pronargs,
       CASE WHEN p.pronargs > p.pronargdefaults THEN p.proargtypes[0]::pg_catalog.regtype::text END
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname IN ('pg_catalog', 'information_schema')
  AND p.prokind = 'f'
  AND p.pronargs - p.pronargdefaults <= 1
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                    AND d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1, 2
"""

# The built-in views (S-7's server-dependent relations are views of these schemas), but
# information_schema.element_types: a catalogue-only view that takes 3 s per read here (every other
# view takes well under 0.3 s).
VIEWS_SQL = """
SELECT schemaname, viewname FROM pg_catalog.pg_views
WHERE schemaname IN ('pg_catalog', 'information_schema')
  AND (schemaname, viewname) <> ('information_schema', 'element_types')
ORDER BY 1, 2
"""


@dataclass
class Call:
    name: str
    sql: str  # its last column is inet_server_port()
    direct: list = field(default_factory=list)  # the primary's answers, before and after
    proxied: list = field(default_factory=list)  # (answer, 'standby'|'primary'|None) per try


def _quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def enumerate_calls(conn) -> tuple[list[Call], list[str]]:
    """The statements to run, deduplicated (overloads called alike share one statement), and the names
    left out by NOT_CALLED."""
    calls: dict[str, Call] = {}
    left_out: set[str] = set()
    for schema, name, retset, nargs, argtype in conn.execute(FUNCTIONS_SQL).fetchall():
        if argtype is None:
            arglists = [""]
        elif argtype in SAMPLES:
            arglists = [f"CAST({_literal(v)} AS {argtype})" for v in SAMPLES[argtype]]
        else:
            continue
        if NOT_CALLED.match(name):
            left_out.add(name)
            continue
        for args in arglists:
            f = f"{_quote(schema)}.{_quote(name)}({args})"
            expr = f"(SELECT pg_catalog.array_agg(x::text ORDER BY x::text) FROM {f} x)" if retset else f"({f})::text"
            sql = f"SELECT {expr}, pg_catalog.inet_server_port()"
            calls.setdefault(sql, Call(name, sql))
    for schema, view in conn.execute(VIEWS_SQL).fetchall():
        rel = f"{_quote(schema)}.{_quote(view)}"
        sql = f"SELECT (SELECT pg_catalog.array_agg(x::text ORDER BY x::text) FROM {rel} x), pg_catalog.inet_server_port()"
        calls.setdefault(sql, Call(f"{schema}.{view}", sql))
    return list(calls.values()), sorted(left_out)


def answer(conn, sql: str):
    """(('value', text) | ('null', None) | ('error', sqlstate), port or None)."""
    try:
        value, port = conn.execute(sql).fetchone()
    except psycopg.Error as e:
        if conn.closed:
            raise
        return ("error", e.sqlstate), None
    return (("null", None) if value is None else ("value", value)), port


def kind(a) -> tuple:
    return a if a[0] == "error" else (a[0],)


def connect(dsn: str) -> psycopg.Connection:
    c = psycopg.connect(dsn, autocommit=True, connect_timeout=10, prepare_threshold=None)
    c.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    return c


def run_direct(pair, calls: list[Call]) -> None:
    with connect(pair.primary.dsn(dbname="app")) as c, bounded(c, BATCH_BOUND_S, "direct calls on the primary"):
        for call in calls:
            call.direct.append(answer(c, call.sql)[0])


def _reaches_standby(c) -> bool:
    return c.execute("SELECT pg_catalog.inet_server_port()").fetchone()[0] in STANDBY_PORTS


def _proxy_session(proxy) -> psycopg.Connection:
    """A new session through the proxy whose plain read already ran on the standby (a session's
    first reads may go to the primary while its reader connection opens)."""
    c = connect(proxy.dsn(user="postgres"))
    for _ in range(50):
        if _reaches_standby(c):
            break
        time.sleep(0.01)
    return c


def run_proxied(proxy, calls: list[Call]) -> None:
    """Each call through the proxy until it ran on the standby, at most TRIES times. A call the
    primary answered, or that failed, may leave the session on the primary for good (code the
    engine cannot see into ran there, S-4/S-5) or for a while (after a write, until the standby
    replays it), which would hide the calls after it from the standby: a plain read then checks
    that the session still reaches the standby, and a new session replaces it when it does not."""
    pending = calls
    for try_ in range(TRIES):
        if try_:
            time.sleep(0.3)  # past the standby's apply delay (200 ms)
        c = _proxy_session(proxy)
        try:
            with bounded(c, BATCH_BOUND_S, f"proxy calls, try {try_ + 1}"):
                for call in pending:
                    a, port = answer(c, call.sql)
                    where = None if port is None else "standby" if port in STANDBY_PORTS else "primary"
                    call.proxied.append((a, where))
                    if where != "standby" and not _reaches_standby(c):
                        c.close()
                        c = _proxy_session(proxy)
        finally:
            c.close()
        pending = [call for call in pending if call.proxied[-1][1] != "standby"]


def defect(call: Call) -> str | None:
    """What the proxy answered that the primary would not have, or None."""
    first, second = call.direct
    for a, where in call.proxied:
        if where == "primary":
            continue  # another connection to the primary: not the point here
        if first == second:
            bad = a != first
        else:
            bad = kind(a) not in (kind(first), kind(second))
        if bad:
            where = where or "error, server unknown"
            return f"{call.sql}\n    primary: {first!r} then {second!r}\n    proxy ({where}): {a!r}"
    return None


@pytest.fixture(scope="module")
def sequence(pair):
    """A sequence the primary has handed out a value of (a standby holds it logged ahead)."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True, connect_timeout=10) as c:
        c.execute("CREATE SEQUENCE IF NOT EXISTS public.s7_diff_seq")
        c.execute("GRANT ALL ON SEQUENCE public.s7_diff_seq TO PUBLIC")
        c.execute("SELECT nextval('public.s7_diff_seq')")
    pair.wait_replayed()
    yield "public.s7_diff_seq"


@pytest.mark.timeout(60)
def test_s7_builtins_answer_on_the_standby_what_the_primary_does(pair, proxy, sequence):
    t0 = time.monotonic()
    with connect(pair.primary.dsn(dbname="app")) as c:
        calls, left_out = enumerate_calls(c)
    assert len(calls) > 450, f"only {len(calls)} calls: pg_proc or pg_views looks truncated"
    run_direct(pair, calls)
    run_proxied(proxy, calls)
    run_direct(pair, calls)
    wall = time.monotonic() - t0

    names = {call.name for call in calls if "." not in call.name}
    views = len(calls) - sum(1 for call in calls if "." not in call.name)
    on_standby = [call for call in calls if any(w == "standby" for _, w in call.proxied)]
    volatile = sorted({call.name for call in calls if call.direct[0] != call.direct[1]})
    defects, allowed, elsewhere = [], [], []
    for call in calls:
        d = defect(call)
        if d is None:
            continue
        if call.name in INTENDED:
            allowed.append(f"{call.name}: {INTENDED[call.name]}")
        elif call.name in FIXED_ELSEWHERE:
            elsewhere.append(f"{call.name}: {FIXED_ELSEWHERE[call.name]}")
        else:
            defects.append(d)
    summary = (f"{len(calls) - views} calls of {len(names)} built-in functions ({len(left_out)} more not called: "
               f"effects beyond the statement) and {views} reads of built-in views; {len(on_standby)} of them ran "
               f"on the standby ({len({c.name for c in on_standby})} functions and views); {len(volatile)} skipped as "
               f"time-dependent: {', '.join(volatile)}; intended differences: {sorted(set(allowed))}; known, fixed "
               f"elsewhere: {sorted(set(elsewhere))}; {len(defects)} defects; {wall:.1f} s")
    print(summary)
    report(SECTION, summary)
    # The comparison is not vacuous: most calls reached the standby.
    assert len(on_standby) > len(calls) // 3, summary
    assert not defects, (f"S-7: {len(defects)} calls answered on the standby differently from the primary:\n"
                         + "\n".join(defects))


@pytest.mark.timeout(60)
def test_s7_functions_not_called_go_to_the_primary(pair, proxy):
    """Each function NOT_CALLED leaves out, in a statement that never evaluates it (`WHERE false`
    in a subquery), is sent to the primary — in a session whose plain read just ran on the
    standby, so the primary was the engine's choice and not the session's state."""
    with connect(pair.primary.dsn(dbname="app")) as c:
        rows = c.execute(FUNCTIONS_SQL).fetchall()
    statements = {}
    for schema, name, _retset, _nargs, argtype in rows:
        if not NOT_CALLED.match(name) or (argtype is not None and argtype not in SAMPLES):
            continue
        args = "" if argtype is None else f"CAST({_literal(SAMPLES[argtype][0])} AS {argtype})"
        f = f"{_quote(schema)}.{_quote(name)}({args})"
        statements.setdefault(name, f"SELECT (SELECT {f}::text WHERE false), pg_catalog.inet_server_port()")
    assert len(statements) > 50, sorted(statements)
    wrong, unchecked = [], []
    for name, sql in sorted(statements.items()):
        for _ in range(TRIES):
            with connect(proxy.dsn(user="postgres")) as c, bounded(c, 10, name):
                if c.execute("SELECT pg_catalog.inet_server_port()").fetchone()[0] not in STANDBY_PORTS:
                    continue
                a, port = answer(c, sql)
                if port is None:
                    unchecked.append(f"{name}: {a}")
                elif port in STANDBY_PORTS:
                    wrong.append(sql)
                break
        else:
            unchecked.append(f"{name}: no session reached the standby")
    print(f"{len(statements)} functions not called, each sent to the primary; unchecked: {unchecked}")
    assert not wrong, "a function the differential test does not call ran on the standby:\n" + "\n".join(wrong)
    assert len(unchecked) < len(statements) // 10, unchecked
