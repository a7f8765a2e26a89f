"""Examiner round 12, area q (red12-q): statements judged reads that act, or answer as the standby
would (SPEC §7 F-policy, S-6, S-7), against the real primary + hot standby through the example
proxy, each answer compared with a twin session on the primary alone; where a read ran is told by
inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded (statement_timeout
5 s, connect_timeout, e2e_support.bounded via `run`).

Found (2026-12-07, main at 89a9885):

Finding 1 (§7 F-policy, S-6, S-7, P-1): **the operators the planner substitutes for a user
operator — its NEGATOR and its COMMUTATOR — are not judged.** The catalogue's row for a user
operator (src/classify/catalog_query.rs, the `'o'` rows, and `om`) calls the operator's own
function, its families' support functions and the functions of its btree families' operators;
`pg_operator.oprnegate` and `oprcom` are never read. But the planner runs them where the text
names neither: `NOT (x <<< 2)` is rewritten into `x >>>= 2` when `<<<` has NEGATOR `>>>=`
(eval_const_expressions → negate_clause), and estimating `100 <<^ x` (RESTRICT scalarltsel, the
variable on the right) commutes the clause and runs the COMMUTATOR's function on the column's
histogram and most common values (scalarineqsel_wrapper; neqsel likewise runs a negator's). A
user type's `=` declared with NEGATOR `<>` (never a btree family member) is the common shape
(not measured). With `<<<`'s function read-safe (IMMUTABLE plpgsql `$1 < $2`) and the other
operator's not (IMMUTABLE plpgsql calling pg_is_in_recovery() or set_config, or a VOLATILE one
that INSERTs), measured:
- S-7: `SELECT array_agg(x) FROM generate_series(1, 3) x WHERE NOT (x <<< 2)` answers {2,3} on
  the primary alone and {1} through the proxy, from the standby (3 of 3; also through a psycopg
  named prepared statement, inside a READ COMMITTED block before a write, and through a view over
  the same query: `SELECT * FROM v` → {1});
- S-6: with the negator calling `set_config('app.r12q_negator', …, false)`, the primary alone's
  session then has the setting, the session through the proxy has none (NULL): the call ran on
  a reader connection (closed after it, so no other client got it);
- P-9 / S-6, another client's state: when the operator's own function is a built-in (`<<!` over
  int4lt, its negator `>>!=` calling set_config('app.r12q_leak', …, false)), the engine sees only
  built-in code, so the reader connection that ran the negator is pooled: every later client
  session through the proxy reads `app.r12q_leak` = 'left by another client' (3 of 3 sessions
  after each of 3 runs), where on the primary alone they read NULL;
- P-1 / §7: a negator that INSERTs on row 50,000 of a 100,000-row answer: the primary alone
  answers every row and keeps the row it wrote; through the proxy the client gets 25006 `cannot
  execute INSERT in a read-only transaction` after rows had reached it (F-3: not retried);
- S-7 (commutator): `EXPLAIN SELECT x FROM h WHERE 100 <<^ x` estimates 891 rows on the primary
  alone, 109 through the proxy (the standby's commutator function over the histogram); S-6: a
  commutator calling set_config leaves the primary alone's session with the setting, none
  through the proxy.
A fix: in the `'o'` row (and `om`), also call the functions of `oprnegate` and `oprcom` (and
their btree families', as for the operator itself), or judge an operator with a negator or
commutator by both.

Finding 2 (S-7): **a prefix operator over `age(xid)` is judged as age's two-argument
overload.** The `'o'` row spells the operator's function `schema.fn(NULL, NULL)` whatever the
operator's arity (catalog_query.rs, `'(NULL, NULL)'`; the other rows count arguments with
`callable!`), and `age` is server-dependent only with one argument (`age/1` in
src/classify/builtins/mod.rs `SERVER_DEPENDENT`): `age(NULL, NULL)` is read-safe. Any user may
`CREATE OPERATOR s.@~ (RIGHTARG = xid, FUNCTION = pg_catalog.age)`. While another session holds
an XID it has written no WAL for, `SELECT @~ xmin FROM h WHERE x = 1` answers 9 through the proxy
(standby) where the primary alone answers 10–12 (and `age(xmin)` through the proxy goes to the
primary and answers as it does): 3 of 3. A fix: spell the call with `callable!` (one NULL per
`pronargs`).

Finding 3 (S-6): **a function's `SET seed = …` clause seeds the session's random generator for
good, but runs on a reader.** The catalogue's SET-clause row (catalog_query.rs, `proconfig`:
"any other built-in setting … is restored and runs alike on a standby: no row") counts only
placeholders and `transaction_*` settings. `seed` is not restored in effect: entering the call
runs its assign hook (setseed, armed for a SET of source session), and leaving it restores the
GUC's value without reseeding (the old value's hook is disarmed), so the session's generator
stays seeded — the state README's F-policy keeps on the writer for `setseed()` and SET seed (a
hazard: SET seed, set_config('seed', …) and SET LOCAL seed in a block all held). With
`seeded() STABLE LANGUAGE sql SET seed = 0.5 AS 'SELECT random()'`: on the primary alone every
session's next two `random()` after `SELECT seeded()` are 0.8253…, 0.1297… (reproducible);
through the proxy the call ran on the standby and the session's next `random()` are arbitrary
(3 of 3). A fix: a `seed` in `proconfig` is a change of the session's state (as setseed: never a
read, and its session's reads stay on the writer as after SET seed).

Finding 4 (P-9, S-7): **a value PostgreSQL fixes when it parses a statement answers, through a
pooled reader, the session that first prepared it there.** (Found the same day by another examiner too: at
11:55 UTC the library in /work/main/c-examples/build was rebuilt from an uncommitted change of
main's working tree — `Effects::CLOCK_LITERAL`, `PREPARED_CLOCK_LITERAL`: a prepared statement
with such a literal is no replica read — and this test passes on that build; it fails on the
builds of 89a9885 it was written against, 3 of 3.) A literal `'now'::timestamptz` (also
`'today'`, `'tomorrow'`, `'yesterday'`: the date/time input runs at parse analysis, the value is
a constant of the prepared statement) in a client's named prepared statement (psycopg
`prepare=True`, or any statement from its 6th execution on; asyncpg always) is answered from
the statement the engine prepared on the pooled reader for the first session that sent the text
("a statement the engine prepared on a pooled reader serves later sessions sending the same
text", README): three sessions 0.6 s apart read `clock_timestamp() - 'now'` = 0.0, 0.6, 1.2 s
through the proxy, 0.0 each on the primary alone (every session parses its own statement). With
asyncpg 0.30 (every fetch a named prepared statement) the same at the first use: three
connections 0.5 s apart read 0.0, 0.52, 1.04 s through the proxy, 0.0 each on the primary alone. The
staleness grows with the pooled connection's life (a `'today'` literal answers yesterday's date
after midnight). Unnamed statements held (0.0 each: parsed per use). Cause: a client statement on a
reader lives under a name keyed by its text (`polarsplit_s_<hash>`, src/session/statements.rs),
and "a statement one session prepared there serves the next session that parses the same text",
parse-time constants included; a fix: never share (or reuse across sessions) a statement whose text
holds a literal that may be a date/time keyword input — the lexer already flags those
(SPLIT_TXN_VALUE). The same parse-time value differs inside one session too: a statement
prepared (psycopg `prepare=True`) and first run on the standby, then run inside a block after a
write, is parsed on the writer then and answers a `'now'` 0.5 s later than its first run, where
the primary alone answers the first Parse's again (README documents the later parse for settings
only; not kept as a test).

Finding 5 (S-6): **plpgsql keeps a function's parsed expressions for the session, so its `'now'`
is the session's first call's — on the writer only.** `f_now() STABLE LANGUAGE plpgsql AS
$$BEGIN RETURN 'now'::timestamptz; END$$` called three times 0.4 s apart: on the primary alone
the 2nd and 3rd calls answer the 1st call's time (0.4, 0.8 s old: the expression's plan, with
its constant, is cached in the backend), through the proxy every call answers the current time
(each ran on a fresh standby connection, closed after the user code). README keeps such a
function on the writer only inside a block (a body that says `now` is SPLIT_TXN_VALUE), and
"outside a block such reads go to readers as usual". A fix: a non-SQL body that may spell a
date/time keyword input (the scan already finds them) is a read of the writer session's state,
outside a block too.

The tests fail on main at 89a9885 for those reasons (3 of 3 runs each); on the in-progress build
of 11:55 UTC all but finding 4's still fail (3 of 3).

What held (probes run once each, primary alone vs through the proxy, not kept as tests): every
zero-argument STABLE/IMMUTABLE built-in of pg_catalog (55) answered on the standby as on the
primary or is on the engine's lists (pg_conf_load_time, pg_postmaster_start_time, the
pg_stat_get_* counters, txid_current_snapshot, inet_client_port …, all sent to the primary);
~120 server-dependent calls and views of the brief's list (pg_database_size, pg_relation_size,
pg_current_snapshot/pg_snapshot_xmin, txid/xact status, pg_control_*, pg_last_wal_*,
pg_stat_* views and functions, pg_locks, pg_cursors, pg_prepared_statements, pg_file_settings,
pg_hba_file_rules, pg_shmem_allocations, pg_sequence_last_value, query_to_xml* / schema_to_xml /
ts_rewrite with SQL text) went to the primary (pg_relation_filenode/filepath read on the standby,
with the same answer); `current_setting` of transaction_read_only / in_hot_standby in 16
spellings (a literal continued on the next line, parenthesised, COLLATE, `::text`, dollar, E,
N, U& with an escape, upper case, a column) went to the primary; user operators with lexer
corner cases (`2>>>=-1`, `@-`, `~-`, `+@`, comments between operator and operand) were judged;
a user operator whose argument is a domain with a server-dependent CHECK, and an aggregate whose
state type is such a domain (INITCOND and a plpgsql transition function returning it), went to
the primary; a `/* route=reader */` call of a function that raises a NOTICE then writes: one
NOTICE, as on the primary alone (the refused reader attempt's NOTICE is not forwarded); COPY
(SELECT … NOT (x <<< 2)) TO STDOUT and SQL PREPARE/EXECUTE of it ran on the primary; the
contrib extensions' STABLE/IMMUTABLE C functions (all installed in a scratch database) have no
wrong label beyond the known ones (tablefunc, xml2, isn, pg_trgm's session-dependent ones), and
`isn_weak(true)` then an invalid ISBN literal kept the session on the writer (as the primary
alone: accepted with `!`); `ALTER ROLE … SET seed` does not seed at login (source below
interactive), so reads stay random on both; the other SET-clause settings with assign hooks
(client_encoding, role, search_path, TimeZone, lc_*, temp_tablespaces) are restored at exit
(read in PostgreSQL's guc.c, not measured). SET seed, set_config('seed', …) and SET LOCAL seed
in a block kept the session's `random()` on the writer (the primary alone's sequence); unnamed
statements holding `'now'`/`'today'` (psycopg's default, sessions 0.6 s apart, and one session
0.6 s apart) answered their own time; a check of the 453 one-argument STABLE/
IMMUTABLE built-ins of pg_catalog on both servers found only pg_stat_get_*, pg_walfile_name*
and pg_replication_origin_oid differing, all on the engine's lists.
"""

from __future__ import annotations

import pytest

from e2e_support import answer, connect, on_primary, proxy_with_catalogue, ran_on, run, warm

SCHEMA = "r12q"


def primary_dsn(pair):
    return pair.primary.dsn(dbname="app", user="app_trust")


# Finding 1: an operator's NEGATOR. `NOT (x <<< 2)` is rewritten by the planner
# (eval_const_expressions → negate_clause) into `x >>>= 2` when `<<<` names `>>>=` as its
# negator: `>>>=`'s function runs though neither the text nor `<<<`'s catalogue entry names it.
LT = (f"CREATE FUNCTION {SCHEMA}.lt(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
      "AS $$BEGIN RETURN $1 < $2; END$$")
# Server-dependent: the primary's answer is `$1 >= $2`, a standby's its opposite.
GE_SRV = (f"CREATE FUNCTION {SCHEMA}.ge_srv(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
          "AS $$BEGIN RETURN ($1 >= $2) <> pg_is_in_recovery(); END$$")
# Session state: the call leaves a placeholder in the session that ran it.
GE_SET = (f"CREATE FUNCTION {SCHEMA}.ge_set(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
          "AS $$BEGIN PERFORM set_config('app.r12q_negator', 'set by the negator', false); "
          "RETURN $1 >= $2; END$$")
NEG_READ = (f"SELECT array_agg(x ORDER BY x), inet_server_port() FROM generate_series(1, 3) x "
            f"WHERE NOT (x OPERATOR({SCHEMA}.<<<) 2)")
NEG_SET_READ = (f"SELECT array_agg(x ORDER BY x), inet_server_port() FROM generate_series(1, 3) x "
                f"WHERE NOT (x OPERATOR({SCHEMA}.<<~) 2)")
TENANT = "SELECT current_setting('app.r12q_negator', true), inet_server_port()"

# Finding 1b: an operator's COMMUTATOR. Estimating `100 <<^ x` (RESTRICT = scalarltsel, the
# variable on the right), the planner commutes the clause (scalarineqsel_wrapper) and runs the
# commutator `>>^`'s function on the column's histogram and most common values: code neither the
# text nor `<<^`'s catalogue entry names.
GT_SRV = (f"CREATE FUNCTION {SCHEMA}.gt_srv(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
          "AS $$BEGIN RETURN ($1 > $2) <> pg_is_in_recovery(); END$$")
GT_SET = (f"CREATE FUNCTION {SCHEMA}.gt_set(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
          "AS $$BEGIN PERFORM set_config('app.r12q_commutator', 'set by the commutator', false); "
          "RETURN $1 > $2; END$$")
COM_PLAN = f"EXPLAIN SELECT x FROM {SCHEMA}.h WHERE 100 OPERATOR({SCHEMA}.<<^) x"
COM_SET_READ = f"SELECT count(*), inet_server_port() FROM {SCHEMA}.h WHERE 500 OPERATOR({SCHEMA}.<<=^) x"
# Finding 1c: a negator that writes, on a row late in a streamed answer.
GE_WRITE = (f"CREATE FUNCTION {SCHEMA}.ge_write(int, int) RETURNS bool VOLATILE LANGUAGE plpgsql "
            f"AS $$BEGIN IF $1 = 50000 THEN INSERT INTO {SCHEMA}.log VALUES ($1); END IF; "
            "RETURN $1 >= $2; END$$")
NEG_WRITE_READ = (f"SELECT x, NOT (x OPERATOR({SCHEMA}.<<%) 2), inet_server_port() "
                  "FROM generate_series(1, 100000) x")
# Finding 2: a prefix operator over `age(xid)`, whose verdict depends on its argument count.
AGE_OP_READ = f"SELECT OPERATOR({SCHEMA}.@~) xmin, inet_server_port() FROM {SCHEMA}.h WHERE x = 1"
AGE_READ = f"SELECT age(xmin), inet_server_port() FROM {SCHEMA}.h WHERE x = 1"
# Finding 1d: an operator whose own function is a built-in (the reader connection is pooled after
# it) with a negator that sets a placeholder.
GE_LEAK = (f"CREATE FUNCTION {SCHEMA}.ge_leak(int, int) RETURNS bool IMMUTABLE LANGUAGE plpgsql "
           "AS $$BEGIN PERFORM set_config('app.r12q_leak', 'left by another client', false); "
           "RETURN $1 >= $2; END$$")
NEG_LEAK_READ = (f"SELECT array_agg(x ORDER BY x), inet_server_port() FROM generate_series(1, 3) x "
                 f"WHERE NOT (x OPERATOR({SCHEMA}.<<!) 2)")
LEAK_TENANT = "SELECT current_setting('app.r12q_leak', true), inet_server_port()"

# Finding 5: plpgsql keeps a function's parsed expressions for the session: its 'now' is the
# session's first call's.
F_NOW = (f"CREATE FUNCTION {SCHEMA}.f_now() RETURNS timestamptz STABLE LANGUAGE plpgsql "
         "AS $$BEGIN RETURN 'now'::timestamptz; END$$")
F_NOW_READ = f"SELECT {SCHEMA}.f_now(), clock_timestamp(), inet_server_port()"

# Finding 3: a function's `SET seed` clause seeds the session's random generator for good.
SEEDED = (f"CREATE FUNCTION {SCHEMA}.seeded() RETURNS float8 STABLE LANGUAGE sql SET seed = 0.5 "
          "AS 'SELECT random()'")
COM_TENANT = "SELECT current_setting('app.r12q_commutator', true), inet_server_port()"


@pytest.fixture(scope="module")
def q_proxy(pair, tmp_path_factory):
    on_primary(
        pair,
        f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE",
        f"CREATE SCHEMA {SCHEMA} AUTHORIZATION app_trust",
        f"CREATE FUNCTION {SCHEMA}.plain() RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 1'",
        LT, GE_SRV, GE_SET,
        f"CREATE OPERATOR {SCHEMA}.<<< (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.lt)",
        f"CREATE OPERATOR {SCHEMA}.>>>= (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.ge_srv, "
        f"NEGATOR = OPERATOR({SCHEMA}.<<<))",
        f"CREATE OPERATOR {SCHEMA}.<<~ (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.lt)",
        f"CREATE OPERATOR {SCHEMA}.>>~= (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.ge_set, "
        f"NEGATOR = OPERATOR({SCHEMA}.<<~))",
        GT_SRV, GT_SET,
        f"CREATE OPERATOR {SCHEMA}.<<^ (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.lt, "
        "RESTRICT = scalarltsel)",
        f"CREATE OPERATOR {SCHEMA}.>>^ (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.gt_srv, "
        f"RESTRICT = scalargtsel, COMMUTATOR = OPERATOR({SCHEMA}.<<^))",
        f"CREATE OPERATOR {SCHEMA}.<<=^ (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.lt, "
        "RESTRICT = scalarltsel)",
        f"CREATE OPERATOR {SCHEMA}.>>=^ (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.gt_set, "
        f"RESTRICT = scalargtsel, COMMUTATOR = OPERATOR({SCHEMA}.<<=^))",
        f"CREATE TABLE {SCHEMA}.h AS SELECT g AS x FROM generate_series(1, 1000) g",
        f"ALTER TABLE {SCHEMA}.h OWNER TO app_trust",
        f"ANALYZE {SCHEMA}.h",
        f"CREATE TABLE {SCHEMA}.log (x int)",
        f"ALTER TABLE {SCHEMA}.log OWNER TO app_trust",
        GE_WRITE,
        f"CREATE OPERATOR {SCHEMA}.<<% (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.lt)",
        f"CREATE OPERATOR {SCHEMA}.>>%= (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.ge_write, "
        f"NEGATOR = OPERATOR({SCHEMA}.<<%))",
        f"CREATE OPERATOR {SCHEMA}.@~ (RIGHTARG = xid, FUNCTION = pg_catalog.age)",
        SEEDED,
        F_NOW,
        GE_LEAK,
        f"CREATE OPERATOR {SCHEMA}.<<! (LEFTARG = int, RIGHTARG = int, FUNCTION = pg_catalog.int4lt)",
        f"CREATE OPERATOR {SCHEMA}.>>!= (LEFTARG = int, RIGHTARG = int, FUNCTION = {SCHEMA}.ge_leak, "
        f"NEGATOR = OPERATOR({SCHEMA}.<<!))",
    )
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("r12q"), f"{SCHEMA}.plain()",
                              [f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"]) as p:
        yield p


def _rows(rows):
    return [(r[0], ran_on(r[-1])) for r in rows]


@pytest.mark.timeout(60)
def test_s7_an_operators_negator_the_planner_substitutes_answers_as_the_primary(pair, q_proxy):
    with connect(primary_dsn(pair)) as direct:
        alone = _rows(run(direct, NEG_READ))
    through = []
    for _ in range(3):
        with connect(q_proxy.dsn()) as c:
            warm(c)
            through.append(_rows(run(c, NEG_READ))[0])
    assert alone == [([2, 3], "primary")]
    assert [r[0] for r in through] == [[2, 3]] * 3, (
        f"NOT (x <<< 2) through the proxy: {through}; on the primary alone: {alone} "
        "(the negator's function ran where the text's operator was judged)")


@pytest.mark.timeout(60)
def test_s6_a_setting_made_by_an_operators_negator_stays_in_the_session(pair, q_proxy):
    def session(dsn, through):
        with connect(dsn) as c:
            if through:
                warm(c)
            read = _rows(run(c, NEG_SET_READ))
            after = _rows(run(c, TENANT))
        return read[0][0], after[0][0]

    alone = session(primary_dsn(pair), False)
    assert alone == ([2, 3], "set by the negator")
    through = [session(q_proxy.dsn(), True) for _ in range(3)]
    assert through == [alone] * 3, (
        f"(rows, the session's app.r12q_negator after the read) through the proxy: {through}; "
        f"on the primary alone: {alone}")


@pytest.mark.timeout(60)
def test_f_policy_a_write_in_an_operators_negator_never_reaches_the_standby(pair, q_proxy):
    def session(dsn, through):
        with connect(dsn) as c:
            if through:
                warm(c)
            got = answer(c, NEG_WRITE_READ)
        if got[0] == "ok":
            got = ("ok", len(got[1]), sorted({ran_on(r[-1]) for r in got[1]}))
        with connect(primary_dsn(pair)) as direct:
            logged = run(direct, f"DELETE FROM {SCHEMA}.log RETURNING x")
        return got, [r[0] for r in logged or []]

    alone = session(primary_dsn(pair), False)
    assert alone == (("ok", 100000, ["primary"]), [50000])
    through = [session(q_proxy.dsn(), True) for _ in range(3)]
    assert through == [alone] * 3, (
        f"(answer, rows the negator logged on the primary) through the proxy: {through}; on the "
        f"primary alone: {alone} (the negator's INSERT ran on the standby after rows had reached "
        "the client)")


@pytest.mark.timeout(60)
def test_p9_a_setting_an_operators_negator_made_never_reaches_another_client(pair, q_proxy):
    def clients(dsn, through):
        with connect(dsn) as a:
            if through:
                warm(a)
            read = _rows(run(a, NEG_LEAK_READ))[0][0]
        seen = []
        for _ in range(3):
            with connect(dsn) as b:
                if through:
                    warm(b)
                seen.append(_rows(run(b, LEAK_TENANT))[0])
        return read, [v for v, _ in seen], seen

    alone = clients(primary_dsn(pair), False)
    assert alone[:2] == ([2, 3], [None, None, None])
    through = [clients(q_proxy.dsn(), True) for _ in range(3)]
    assert [t[:2] for t in through] == [alone[:2]] * 3, (
        f"(A's rows, what three later clients read of app.r12q_leak) through the proxy: {through}; "
        f"on the primary alone: {alone} (A's negator ran on a reader connection that was pooled)")


def _plan_rows(plan):
    return [line.split("rows=")[1].split()[0] for (line,) in plan if "rows=" in line]


@pytest.mark.timeout(60)
def test_s7_an_operators_commutator_the_planner_estimates_with_answers_as_the_primary(pair, q_proxy):
    with connect(primary_dsn(pair)) as direct:
        alone = _plan_rows(run(direct, COM_PLAN))
    through = []
    for _ in range(3):
        with connect(q_proxy.dsn()) as c:
            warm(c)
            through.append(_plan_rows(run(c, COM_PLAN)))
    assert len(alone) == 1 and int(alone[0]) > 500, alone  # about 900 of the 1000 rows
    assert through == [alone] * 3, (
        f"EXPLAIN's row estimate of 100 <<^ x through the proxy: {through}; on the primary alone: "
        f"{alone} (the standby ran the commutator's function on the histogram)")


@pytest.mark.timeout(60)
def test_s6_a_setting_made_by_an_operators_commutator_stays_in_the_session(pair, q_proxy):
    def session(dsn, through):
        with connect(dsn) as c:
            if through:
                warm(c)
            read = _rows(run(c, COM_SET_READ))
            after = _rows(run(c, COM_TENANT))
        return read[0][0], after[0][0]

    alone = session(primary_dsn(pair), False)
    assert alone == (500, "set by the commutator")
    through = [session(q_proxy.dsn(), True) for _ in range(3)]
    assert through == [alone] * 3, (
        f"(count, the session's app.r12q_commutator after the read) through the proxy: {through}; "
        f"on the primary alone: {alone}")


@pytest.mark.timeout(60)
def test_s7_a_prefix_operator_over_age_of_an_xid_answers_as_the_primary(pair, q_proxy):
    import psycopg

    through = []
    with psycopg.connect(primary_dsn(pair), connect_timeout=5,
                         options="-c statement_timeout=5000") as holder, \
            connect(primary_dsn(pair)) as direct:
        for _ in range(3):
            with connect(q_proxy.dsn()) as c:
                warm(c)
                # Another session takes an XID and writes no WAL for it (yet): the primary's next
                # XID is past it, a standby's is not (its counter moves as it replays; a
                # running-xacts record, every 15 s at most, would tell it: each round takes a
                # fresh XID right before its reads).
                run(holder, "SELECT pg_current_xact_id()")
                before = run(direct, AGE_OP_READ)[0][0]
                assert run(direct, AGE_READ)[0][0] == before
                got = _rows(run(c, AGE_OP_READ))[0]
                plain = _rows(run(c, AGE_READ))[0]
                after = run(direct, AGE_OP_READ)[0][0]
                holder.rollback()
            through.append((before, got, plain, after))
    wrong = [t for t in through if not t[0] <= t[1][0] <= t[3]]
    assert not wrong, (
        "(the primary alone before, @~ xmin through the proxy, age(xmin) through the proxy, the "
        f"primary alone after): {through} (the operator's age(xid) ran on the standby)")


@pytest.mark.timeout(60)
def test_s6_a_functions_set_seed_clause_seeds_the_sessions_later_random_values(pair, q_proxy):
    def session(dsn, through):
        with connect(dsn) as c:
            if through:
                warm(c)
            call = run(c, f"SELECT {SCHEMA}.seeded(), inet_server_port()")[0]
            later = [run(c, "SELECT random(), inet_server_port()")[0] for _ in range(2)]
        return call[0], [v for v, _ in later], [ran_on(p) for _, p in [call, *later]]

    alone = [session(primary_dsn(pair), False) for _ in range(2)]
    # On the primary alone the call leaves the session's generator seeded: the same values follow.
    assert alone[0][:2] == alone[1][:2], alone
    through = [session(q_proxy.dsn(), True) for _ in range(3)]
    assert [t[:2] for t in through] == [alone[0][:2]] * 3, (
        f"(the call's value, the session's next two random()) through the proxy: {through}; on "
        f"the primary alone: {alone[0]} (the seed was set on a reader connection)")


# Finding 4: a value PostgreSQL fixes when it parses a statement ('now') in a statement the engine
# prepared on a pooled reader for an earlier session.
NOW_READ = "SELECT 'now'::timestamptz, clock_timestamp(), inet_server_port()"


@pytest.mark.timeout(60)
def test_p9_a_later_sessions_prepared_now_is_its_own_parse_time(pair, q_proxy):
    import time

    def sessions(dsn, through):
        lags = []
        for _ in range(3):
            with connect(dsn) as c:
                if through:
                    warm(c)
                now, clock, port = _prepared(c)
                lags.append((round((clock - now).total_seconds(), 1), ran_on(port)))
            time.sleep(0.6)
        return lags

    alone = sessions(primary_dsn(pair), False)
    assert [lag for lag, _ in alone] == [0.0] * 3, alone
    through = sessions(q_proxy.dsn(), True)
    assert [lag for lag, _ in through] == [0.0] * 3, (
        f"(seconds between the session's 'now' and its clock, where it ran), three sessions 0.6 s "
        f"apart through the proxy: {through}; on the primary alone: {alone} (a later session's "
        "prepared statement answers the first session's Parse time)")


def _prepared(conn):
    """The statement as a named prepared statement (psycopg prepare=True), bounded."""
    from e2e_support import BOUND_S, bounded

    with bounded(conn, BOUND_S, NOW_READ):
        return conn.execute(NOW_READ, prepare=True).fetchone()


@pytest.mark.timeout(60)
def test_s6_a_plpgsql_functions_now_is_fixed_at_its_sessions_first_call(pair, q_proxy):
    import time

    def session(dsn, through):
        with connect(dsn) as c:
            if through:
                warm(c)
            calls = []
            for _ in range(3):
                now, clock, port = run(c, F_NOW_READ)[0]
                calls.append(((clock - now).total_seconds(), ran_on(port)))
                time.sleep(0.4)
        # Whether each call answered a time at least 0.3 s old (an earlier call's).
        return [lag >= 0.3 for lag, _ in calls], calls

    alone = session(primary_dsn(pair), False)
    assert alone[0] == [False, True, True], alone
    through = [session(q_proxy.dsn(), True) for _ in range(3)]
    assert [t[0] for t in through] == [alone[0]] * 3, (
        f"(each call's f_now() older than 0.3 s?, (lag, where)) through the proxy: {through}; on "
        f"the primary alone: {alone} (each call ran on a fresh reader connection)")
