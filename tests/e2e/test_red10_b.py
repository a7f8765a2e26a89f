"""Examiner round 10, area b (red10-b): writes and server-acting statements judged reads, answers
that depend on the server (SPEC S-6, S-7, §7 F-policy), against the real primary + hot standby
through the example proxy, each answer compared with a twin connection to the primary alone;
where a read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is
bounded (statement_timeout, connect_timeout, e2e_support.bounded).

All three findings are DDL run *through the engine* that the engine does not count as DDL, so
the database's reads are not held on the primary until a catalogue load that started after it
reports (README: "DDL through the engine … keeps the database's reads on the primary
(`CATALOG_CHANGED`) until the host reports its catalogue from a load that started after the
DDL"; the example proxy reloads at once when it counts one). Reads then keep the verdicts of
the catalogue from before the DDL until the next periodic load (`--catalog-refresh-ms`, 10 s by
default; 60 s in this module's proxy), while the standby, once it has replayed the DDL, runs
the new code. Each test: session A runs the DDL through the proxy, the standby replays it,
three new sessions run a read through the proxy; the oracle is the primary alone.

Finding 1 (S-7): a DO block whose dynamic DDL sits in a dollar-quoted string —
`DO $d$BEGIN EXECUTE $e$CREATE OR REPLACE FUNCTION …$e$; END$d$`, the way migrations write
`format($f$ALTER …$f$, …)` — is not DDL. src/classify/statement.rs `says_ddl` looks for
CREATE/ALTER/DROP "between non-identifier bytes" and counts `$` as an identifier byte, so
`$e$CREATE` is no word. r10b.f() replaced by one over pg_is_in_recovery() answers 'true' from
the standby through the proxy (3/3), 'false' on the primary alone. With a space after `$e$` the
same DO counts and new sessions answer 'false' from the primary.

Finding 1b (S-7): a DO block that calls a function the catalogue reports as DDL —
`DO $$BEGIN PERFORM r10b.mk(); END$$`, where r10b.mk() is a volatile plpgsql function whose
body runs CREATE OR REPLACE FUNCTION r10b.g() — is not DDL: the DO's effects are its words
(`says_ddl`, `text_effects` in statement.rs `finish_into`), never the catalogue verdicts of the
functions its body calls, though `SELECT r10b.mk()` (the same call as a statement) does count
(the catalogue reports mk as `DO $polarsplit$ CREATE $polarsplit$`) and `CALL` of a procedure
over it too. r10b.g() then answers 'true' from the standby (3/3), 'false' on the primary alone.

Finding 2 (S-7, a wrong answer): CREATE INDEX is excluded from DDL (src/classify/head.rs
`changes_no_catalogue`: `index`, `unique`), but since red9 the catalogue links a relation to the
functions of its indexes' predicates and expressions (`rf` in catalog_query.rs), so an index
changes the verdict of every read of its table. `CREATE INDEX … ON r10b.t (x) WHERE x >
r10b.cut()` through the proxy, r10b.cut() IMMUTABLE and 100 on the primary, 0 on a standby: the
primary builds the index over x > 100; the standby's planner folds the predicate to x > 0,
proves `x > 50` implies it and answers from the index, which lacks 51..100.
`SELECT count(*) FROM r10b.t WHERE x > 50` (enable_seqscan off, a session setting the reader
replays) counts 100 through the proxy (3/3, on the standby) and 150 on the primary alone. Loaded
after the index, the catalogue sends the same read to the primary (150): only the DDL count is
missing.

Fixed (each test failed on ac6cef3): every DO block counts as DDL (its code is the engine's
to fear, not to read: src/classify/statement.rs `finish_into`), and CREATE INDEX with a
predicate or an expression counts as DDL that moves no name (`Effects::KEEPS_NAMES`,
src/classify/head.rs `index_effects`).

What held (probed once, not kept): DDL counted and reads held on the primary, then judged by the
new catalogue, for a plain CREATE OR REPLACE FUNCTION, a DO that says CREATE after a space or a
quote, the DDL as a named prepared statement executed again by Bind only after another DDL, the
DDL in a multi-statement Query before `SELECT pg_sleep(1)` and in a psycopg pipeline (implicit
transaction), `SELECT mk()`, `CALL` of a SQL procedure, `/* route=reader */ SELECT mk()` (F-2),
`EXPLAIN ANALYZE SELECT mk()`, `SELECT 1; SELECT mk()`, and mk() reached through a view, a
domain CHECK, an RLS policy, a user cast, a user operator, a FROM-list call and a subquery; a
named statement over f() prepared before the DDL and executed after it (in and out of a block)
runs on the primary; a DDL running from a column DEFAULT of an INSERT is not counted (new
sessions read 'true' from the standby), as README documents for triggers — not kept. Routing and
answers: `EXECUTE`/`EXPLAIN ANALYZE EXECUTE` of protocol-prepared statements (nextval,
pg_is_in_recovery, transaction_read_only), COPY (query) TO STDOUT, SHOW of 34 settings that
differ or are transaction/server state in quoted, upper-case, `U&` and commented spellings,
SHOW ALL, EXPLAIN (SETTINGS), EXPLAIN (VERBOSE) of a server-dependent IMMUTABLE function
(plpgsql and SQL over it) and a filter folding it, STABLE plpgsql bodies reading
current_setting('transaction_read_only'), current_setting(variable), pg_settings (SELECT INTO
and FOR loop), pg_stat_activity, pg_replication_slots, txid_current_if_assigned(); a user `=`,
`<=`, `>=`, `<>` on (text, int4) reached by IN, NOT IN, BETWEEN [SYMMETRIC], IS [NOT] DISTINCT
FROM, NULLIF, CASE x WHEN, = ANY/SOME, IN (subquery), row comparisons; pg_trgm's set_limit()
then `%` (the session's reads stay on the writer, a new session sees 0.3); parenthesised SELECT
INTO / FOR UPDATE / data-modifying CTE; same-named functions in two schemas under SET
search_path, overloads by argument type and by a defaulted argument; lexer corner cases before a
pg_is_in_recovery() call (backslash in a standard string, E'\\'', U& with UESCAPE, nested
dollar tags, nested comments, a literal continued on the next line); an unlogged table created
by a DO block, read alone and behind another statement in one Query (on the primary: a relation
the catalogue does not know is not read on the standby); the classify example's verdicts for ~120 statements
(locking clauses after TABLE/VALUES/parentheses, INTO in every position, server-control, WAL,
snapshot, large-object, stats and file functions, 36 built-in views in several spellings).
"""

from __future__ import annotations

import pytest

from e2e_support import connect, on_primary, proxy_with_catalogue, ran_on, run, warm

# Finding 1: a function replaced by DDL in a DO block's dollar-quoted string.
PLAIN = "CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql AS $$SELECT 'plain'::text$$"
SERVER_DEPENDENT = ("CREATE OR REPLACE FUNCTION r10b.f() RETURNS text IMMUTABLE LANGUAGE sql"
                    " AS $q$SELECT pg_is_in_recovery()::text$q$")
# A migration step as tools write it: dynamic DDL in a dollar-quoted string (format($f$…$f$, …)).
DO_DDL = f"DO $d$BEGIN EXECUTE $e${SERVER_DEPENDENT}$e$; END$d$"
CALL = "SELECT r10b.f(), inet_server_port()"

# Finding 1b: another function, replaced by a DO block that calls a function the catalogue
# reports as DDL.
PLAIN_G = PLAIN.replace("r10b.f()", "r10b.g()")
MK = ("CREATE FUNCTION r10b.mk() RETURNS void VOLATILE LANGUAGE plpgsql AS $b$BEGIN "
      + SERVER_DEPENDENT.replace("r10b.f()", "r10b.g()") + "; END$b$")
DO_CALL = "DO $$BEGIN PERFORM r10b.mk(); END$$"
CALL_G = "SELECT r10b.g(), inet_server_port()"

# Finding 2: a partial index whose predicate calls an IMMUTABLE function that answers by server
# (as red8-c's cut()): 100 on the primary, 0 on a standby.
CUT = ("CREATE FUNCTION r10b.cut() RETURNS int IMMUTABLE LANGUAGE plpgsql AS"
       " $f$BEGIN RETURN CASE WHEN pg_is_in_recovery() THEN 0 ELSE 100 END; END$f$")
INDEX = "CREATE INDEX r10b_t_part ON r10b.t (x) WHERE x > r10b.cut()"
COUNT = "SELECT count(*), inet_server_port() FROM r10b.t WHERE x > 50"
NO_SEQSCAN = "SET enable_seqscan = off"


def primary_dsn(pair):
    return pair.primary.dsn(dbname="app", user="app_trust")


@pytest.fixture(scope="module")
def proxy(pair, tmp_path_factory):
    """A proxy whose catalogue (loaded once a minute) has the module's objects, in a schema of
    app_trust's (the DDL runs as that login through the proxy); dropped at the end."""
    on_primary(
        pair,
        "DROP SCHEMA IF EXISTS r10b CASCADE",
        "CREATE SCHEMA r10b AUTHORIZATION app_trust",
        "CREATE FUNCTION r10b.plain() RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 1'",
        PLAIN,
        "ALTER FUNCTION r10b.f() OWNER TO app_trust",
        PLAIN_G,
        "ALTER FUNCTION r10b.g() OWNER TO app_trust",
        MK,
        "ALTER FUNCTION r10b.mk() OWNER TO app_trust",
        CUT,
        "CREATE TABLE r10b.t (x int NOT NULL)",
        "INSERT INTO r10b.t SELECT g FROM generate_series(1, 200) g",
        "ALTER TABLE r10b.t OWNER TO app_trust",
        "ANALYZE r10b.t",
    )
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("r10b"), "r10b.plain()",
                              ["DROP SCHEMA IF EXISTS r10b CASCADE"]) as p:
        yield p


def _after_ddl(pair, proxy, ddl, read, undo, setup=()):
    """Session A reads `read` through the proxy (the control: on the standby), then runs `ddl`;
    once the standby has replayed it, the primary alone and three new sessions through the proxy
    run `read` (each after `setup`). `undo` runs on the primary at the end. Returns (A's row, the
    primary alone's rows, the new sessions' rows)."""
    try:
        with connect(proxy.dsn()) as a:
            warm(a)
            for s in setup:
                run(a, s)
            before = run(a, read)[0]
            run(a, ddl)
        pair.wait_replayed()
        with connect(primary_dsn(pair)) as direct:
            for s in setup:
                run(direct, s)
            alone = run(direct, read)
        through = []
        for _ in range(3):
            with connect(proxy.dsn()) as b:
                warm(b)
                for s in setup:
                    run(b, s)
                through.append(run(b, read)[0])
    finally:
        on_primary(pair, undo)
    return before, alone, through


def _seen(rows):
    return [(r[0], ran_on(r[1])) for r in rows]


@pytest.mark.timeout(60)
def test_s7_ddl_in_a_do_blocks_dollar_quoted_string_holds_reads_until_the_catalogue_reports(pair, proxy):
    """S-7 / F-policy: DDL through the engine keeps the database's reads on the primary until a
    catalogue load that started after it reports ("a DO body that says so"). A DO block whose
    body says `EXECUTE $e$CREATE OR REPLACE FUNCTION …$e$` replaces a read-safe function with
    one over pg_is_in_recovery(); new sessions' calls must answer 'false', as on the primary."""
    before, alone, through = _after_ddl(pair, proxy, DO_DDL, CALL, PLAIN)
    assert ran_on(before[1]) == "standby", f"control: the plain function ran on {_seen([before])}"
    assert alone == [("false", pair.primary.port)]
    assert [r[0] for r in through] == ["false"] * 3, (
        f"after `{DO_DDL[:60]}…` through the proxy, new sessions' {CALL} answered "
        f"{_seen(through)}; the primary alone answers 'false'")


@pytest.mark.timeout(60)
def test_s7_a_do_block_calling_a_function_that_runs_ddl_holds_reads_until_the_catalogue_reports(pair, proxy):
    """S-7 / F-policy: `SELECT r10b.mk()` — a volatile function whose body says DDL — counts as
    DDL (the catalogue reports it as a DO block that says so); `DO $$BEGIN PERFORM r10b.mk();
    END$$` runs the same DDL, but its own text names no DDL word: r10b.g(), now over
    pg_is_in_recovery(), must still answer 'false' to new sessions, as on the primary."""
    before, alone, through = _after_ddl(pair, proxy, DO_CALL, CALL_G, PLAIN_G)
    assert ran_on(before[1]) == "standby", f"control: the plain function ran on {_seen([before])}"
    assert alone == [("false", pair.primary.port)]
    assert [r[0] for r in through] == ["false"] * 3, (
        f"after `{DO_CALL}` through the proxy, new sessions' {CALL_G} answered "
        f"{_seen(through)}; the primary alone answers 'false'")


@pytest.mark.timeout(60)
def test_s7_create_index_through_the_engine_holds_reads_of_its_table_until_the_catalogue_reports(pair, proxy):
    """S-7 / F-policy: the catalogue links a relation to the functions of its indexes' predicates
    (red9), so once the index is reported a read of r10b.t is judged with r10b.cut() and runs on
    the primary. CREATE INDEX through the engine is no DDL (head.rs `changes_no_catalogue`), so
    nothing holds the table's reads meanwhile. The primary built the index over x > 100; the
    standby's planner folds the predicate to x > 0, proves `x > 50` implies it and reads an index
    that lacks 51..100. The count must be the primary's 150."""
    before, alone, through = _after_ddl(pair, proxy, INDEX, COUNT, "DROP INDEX IF EXISTS r10b.r10b_t_part",
                                        setup=[NO_SEQSCAN])
    assert before[0] == 150 and ran_on(before[1]) == "standby", f"control: {_seen([before])}"
    assert alone == [(150, pair.primary.port)]
    assert [r[0] for r in through] == [150] * 3, (
        f"after `{INDEX}` through the proxy, new sessions' {COUNT} ({NO_SEQSCAN}) answered "
        f"{_seen(through)}; the primary alone counts 150")
