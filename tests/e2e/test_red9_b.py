"""Red9 area b: adversarial review of the red8-c classification fixes (scan.rs
`Scan::is_alias_column_list`, catalog_query.rs CHECK/statistics links). Each test runs a real
primary + hot standby through the example proxy and compares with a twin connection to the primary
alone; where a statement ran is told by inet_server_port() (S-7). Every statement is bounded
(statement_timeout, connect_timeout, e2e_support.bounded).

Finding 1: a call written right after `OPERATOR(schema.op)` is not seen. `Scan::is_call` asks
`Scan::is_alias_column_list`, which takes any `name (` right after a `)` for an alias's column
list (`FROM f(1) g(i)`). But `OPERATOR(pg_catalog.||)` (and `OPERATOR(+)`) is an operator, binary or
prefix, whose right operand follows its `)`: `SELECT 'x' OPERATOR(pg_catalog.||) f(…)` calls f.
Every call there — bare, quoted (`"set_config"(…)`) or schema-qualified to a user schema
(`public.f(…)`) — is dropped from the verdict (`examples/classify`-style verdict: replica-safe
read), so:
- S-7: `current_setting('transaction_read_only')` is evaluated on the standby: 'xon' through the
  proxy where the primary alone answers 'xoff';
- S-6 / F-policy: `set_config('app.red9b', '.', false)` runs on a pooled standby connection; a new
  client session then reads the placeholder ('.') where on the primary alone it is NULL.
The verdicts are also a unit table, tests/classify_red9_b.rs (nextval, pg_advisory_lock,
txid_current, pg_is_in_recovery, a user function: all "replica-safe").

Finding 2 (offload only, unit table tests/classify_red9_b.rs, no e2e: the answers agree): the same
fix made `FROM data d(x)` a call of an unknown function `d`. `Scan::is_alias_column_list` takes
`a (` for an alias's column list only when the word before `a` is a non-keyword identifier (or `)`),
so a relation named by an unreserved keyword — `data`, `version`, `options`, `comments`, all valid
unquoted table names — or the legacy `t*` form now sends the plain read to the primary (before the
fix `operand name (` was always an alias list: a replica-safe read). `FROM data AS d(x)` and
`FROM "data" d(x)` stay reads.

Finding 3: the planner evaluates members of a btree operator family that no text and no catalogue
link names. To prove a CHECK constraint false (constraint exclusion of an inheritance child, a
partition, a UNION ALL member) or a partial index's predicate true from a query's clause, predtest
(`operator_predicate_proof` → `get_btree_test_op`) picks the *test operator* of the btree family
the two operators share — `x =<<< 7` against `CHECK (x >>> 5)` evaluates the family's `<=` member on
7 and 5 — and runs its function on the constants. The catalogue links a relation to its CHECKs'
functions and operators' own functions (`rf`, red8-c) and to its indexes' functions and operator
classes, but not to the other operators of those operators' families (nor, for an index predicate,
to the predicate's operators: only `refclassid = pg_proc` / `pg_opclass` rows of an index are
followed), and the statement's own operator's row (`'o'`) adds its families' support functions
(`pg_amproc`), not their operators (`pg_amop`). So with a user btree family on int4 whose `<`, `<=`,
`>=` (IMMUTABLE plpgsql, server-dependent like red8-c's cut()) the statement never names:
- S-7: `SELECT count(*) FROM red9b_parent WHERE x =<<< 7` counts 1 on the primary alone (the child,
  CHECK (x >>> 5), holds 7) and 0 through the proxy: the standby's evaluation excludes the child;
- S-7: `EXPLAIN (COSTS OFF) SELECT x FROM red9b_pi WHERE x =<<< 7` (partial index WHERE x >>>= 5,
  enable_seqscan off) answers an Index Only Scan on the primary alone and a Seq Scan through the
  proxy. Cause: src/classify/catalog_query.rs, `rf` (and the `'o'` rows): a fix would link each
  operator a CHECK, statistics expression, index predicate or statement uses to every operator
  function of the btree families it belongs to (`oc` already gathers an opclass's `pg_amop`
  operators' functions for indexes).
Findings 1 and 2 are fixed (529a3cf): the scan knows which `)` closes an `OPERATOR(…)` clause
(an operand follows it, never an alias), and a relation's name before an alias column list may
be an unreserved or column-name keyword (a `ColId`).
Finding 3 is fixed (branch red9-cat): the catalogue query's `om` links each operator to its own
function and to the functions of every operator of its btree families; `rf` links a relation
through the operators of its CHECKs, statistics expressions and indexes' predicates and
expressions (an index's `pg_depend` rows naming `pg_operator`, not followed before) to those
functions (IMMUTABLE or SQL, as before), and a user operator's `'o'` row calls them too. Both
statements now run on the primary and answer as it does (offload cost: every read of such a
relation, and every statement applying such an operator, while a family member is not
read-safe).

What held (probed once, not kept): the type modifiers of casts and typed literals (`varchar(20)`,
`timestamp(3)`, `interval(6)`, `numeric(10,2)`, `time(3) with time zone`, `bit varying(3)`,
`varchar(3)[]`, qualified and quoted type names, `CAST(x AS …)`, `interval(3) '1 s'`) stay reads;
alias column lists after FROM/JOIN (INNER, NATURAL, LEFT OUTER, CROSS), ONLY, schema-qualified and
quoted relations, VALUES, ROWS FROM, LATERAL, `WITH ORDINALITY`, json_to_recordset column
definitions, XMLTABLE columns with typmods, CTE column lists (`WITH x(a,b) AS`, RECURSIVE, several)
stay reads; TABLESAMPLE SYSTEM(10)/BERNOULLI(10) REPEATABLE(1), FILTER, WITHIN GROUP, OVER w,
window clauses, FETCH FIRST (n), COLLATE, AT TIME ZONE, ARRAY(), ROW(), xmlelement/xmlparse/
xmlserialize, extract/substring, OVERLAPS, TREAT stay reads; calls after a WITH list's end (`WITH x
AS (…) SELECT 1, nextval(…)`, FROM x, nextval(…), MATERIALIZED, SEARCH/CYCLE), in FROM after a
comma, JOIN or ONLY, `AT TIME ZONE f(x)`, `OPERATOR(-) (f(x))` (parenthesised) and a
`pg_catalog.`-qualified call after OPERATOR(…) are judged (primary). Catalogue side: a
set_config in the family member run at plan time did not reach a new session through the proxy
(the reader's settings digest closed the connection), so finding 3 is shown by answers; foreign
tables (server-dependent) and a foreign inheritance child stay on the primary.
"""

from __future__ import annotations

import pytest

from e2e_support import answer, connect, on_primary, proxy_with_catalogue, ran_on, run, warm

SERVER = "SELECT 'x' OPERATOR(pg_catalog.||) current_setting('transaction_read_only'), inet_server_port()"
SETTER = "SELECT 'x' OPERATOR(pg_catalog.||) set_config('app.red9b_op', '.', false), inet_server_port()"
TENANT = "SELECT current_setting('app.red9b_op', true), inet_server_port()"


def primary_dsn(pair):
    return pair.primary.dsn(dbname="app", user="app_trust")


@pytest.mark.timeout(60)
def test_s7_server_dependent_call_after_an_operator_clause_answers_as_the_primary(pair, proxy):
    """S-7: current_setting('transaction_read_only') is 'off' on the primary, 'on' on a standby;
    written as the right operand of OPERATOR(pg_catalog.||) the statement must still answer 'xoff'."""
    with connect(primary_dsn(pair)) as direct:
        alone = run(direct, SERVER)
    with connect(proxy.dsn()) as c:
        warm(c)
        through = [run(c, SERVER)[0] for _ in range(3)]
    assert alone == [("xoff", pair.primary.port)]
    assert [r[0] for r in through] == ["xoff"] * 3, (
        f"{SERVER}: the primary alone answers 'xoff'; through the proxy "
        f"{[(r[0], ran_on(r[1])) for r in through]}")


@pytest.mark.timeout(60)
def test_s6_set_config_after_an_operator_clause_stays_in_the_session_that_ran_it(pair, proxy):
    """F-policy: set_config is never read-safe; S-6: a reader's state never reaches another session.
    Session A runs SETTER, then new sessions read the placeholder: NULL on the primary alone."""
    def sessions(dsn, warm_first):
        with connect(dsn) as a:
            if warm_first:
                warm(a)
            setter = answer(a, SETTER)
        seen = []
        for _ in range(3):
            with connect(dsn) as b:
                if warm_first:
                    warm(b)
                seen.append(answer(b, TENANT))
        return setter, seen
    alone = sessions(primary_dsn(pair), False)
    through = sessions(proxy.dsn(), True)
    assert alone[0] == ("ok", [("x.", pair.primary.port)])
    assert [r[1][0][0] for r in alone[1]] == [None] * 3
    where = ran_on(through[0][1][0][1]) if through[0][0] == "ok" else through[0]
    seen = [(r[1][0][0], ran_on(r[1][0][1])) if r[0] == "ok" else r for r in through[1]]
    assert [s[0] for s in seen] == [None] * 3 and where == "primary", (
        f"session A's set_config after OPERATOR(pg_catalog.||) ran on the {where}; new sessions then "
        f"read app.red9b_op = {seen} through the proxy, NULL on the primary alone")


# -- Finding 3: a btree operator family's other operators, which constraint exclusion runs --------

def _op_fn(name, op, flip=False):
    ret = f"CASE WHEN pg_is_in_recovery() THEN NOT ($1 {op} $2) ELSE $1 {op} $2 END" if flip else f"$1 {op} $2"
    return (f"CREATE FUNCTION {name}(int, int) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS"
            f" $f$ BEGIN RETURN {ret}; END $f$")


OBJECTS = [
    "CREATE FUNCTION red9b_plain() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    # The family's `<`, `<=` and `>=`: honest on the primary, reversed on a standby (IMMUTABLE
    # labels, as red8-c's cut()); neither the statements nor the CHECK name them.
    _op_fn("red9b_lt", "<", flip=True),
    _op_fn("red9b_le", "<=", flip=True),
    _op_fn("red9b_eq", "="),
    _op_fn("red9b_ge", ">=", flip=True),
    _op_fn("red9b_gt", ">"),
    "CREATE OPERATOR <<< (LEFTARG = int, RIGHTARG = int, FUNCTION = red9b_lt)",
    "CREATE OPERATOR <<<= (LEFTARG = int, RIGHTARG = int, FUNCTION = red9b_le)",
    "CREATE OPERATOR =<<< (LEFTARG = int, RIGHTARG = int, FUNCTION = red9b_eq)",
    "CREATE OPERATOR >>>= (LEFTARG = int, RIGHTARG = int, FUNCTION = red9b_ge)",
    "CREATE OPERATOR >>> (LEFTARG = int, RIGHTARG = int, FUNCTION = red9b_gt)",
    "CREATE OPERATOR CLASS red9b_ops FOR TYPE int4 USING btree AS OPERATOR 1 <<<, OPERATOR 2 <<<=,"
    " OPERATOR 3 =<<<, OPERATOR 4 >>>=, OPERATOR 5 >>>, FUNCTION 1 btint4cmp(int4, int4)",
    "CREATE TABLE red9b_parent (x int)",
    "CREATE TABLE red9b_child (CHECK (x >>> 5)) INHERITS (red9b_parent)",
    "INSERT INTO red9b_child VALUES (7)",
    # A partial index whose predicate the planner must prove from the query's clause.
    "CREATE TABLE red9b_pi (x int)",
    "INSERT INTO red9b_pi SELECT g FROM generate_series(1, 2000) g",
    "CREATE INDEX red9b_pi_i ON red9b_pi (x) WHERE x >>>= 5",
    "ANALYZE red9b_pi",
    "GRANT SELECT ON red9b_parent, red9b_child, red9b_pi TO PUBLIC",
    "GRANT EXECUTE ON FUNCTION red9b_plain(), red9b_lt(int, int), red9b_le(int, int), red9b_eq(int, int),"
    " red9b_ge(int, int), red9b_gt(int, int) TO PUBLIC",
]
DROP = [
    "DROP TABLE IF EXISTS red9b_parent, red9b_pi CASCADE",
    "DROP OPERATOR FAMILY IF EXISTS red9b_ops USING btree CASCADE",
    "DROP OPERATOR IF EXISTS <<< (int, int), <<<= (int, int), =<<< (int, int), >>>= (int, int), >>> (int, int)",
    "DROP FUNCTION IF EXISTS red9b_plain(), red9b_lt(int, int), red9b_le(int, int), red9b_eq(int, int),"
    " red9b_ge(int, int), red9b_gt(int, int)",
]


@pytest.fixture(scope="module")
def red9b_proxy(pair, tmp_path_factory):
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("red9b"), "red9b_plain()", DROP) as proxy:
        yield proxy


EXCL = "SELECT count(*), inet_server_port() FROM red9b_parent WHERE x =<<< 7"


@pytest.mark.timeout(60)
def test_s7_constraint_exclusion_runs_an_operator_family_member_no_text_names(pair, red9b_proxy):
    """S-7: planning EXCL tries to refute the child's CHECK (x >>> 5) with x =<<< 7: predtest
    evaluates the btree family's test operator (`<=`/`<`/`>=` member, red9b_le(7, 5) …) on the two
    constants, a function neither the statement nor the CHECK names. On the primary the child
    stays and its row counts (1); the standby's evaluation excludes it."""
    with connect(primary_dsn(pair)) as direct:
        alone = run(direct, EXCL)
    with connect(red9b_proxy.dsn()) as c:
        warm(c)
        through = [run(c, EXCL)[0] for _ in range(3)]
    assert alone == [(1, pair.primary.port)]
    assert [r[0] for r in through] == [1] * 3, (
        f"{EXCL}: the primary alone counts 1; through the proxy "
        f"{[(r[0], ran_on(r[1])) for r in through]}")



PLAN = "EXPLAIN (COSTS OFF) SELECT x FROM red9b_pi WHERE x =<<< 7"


@pytest.mark.timeout(60)
def test_s7_partial_index_proof_runs_an_operator_family_member_no_text_names(pair, red9b_proxy):
    """S-7: planning PLAN proves the partial index's predicate (x >>>= 5) from x =<<< 7 by
    evaluating the family's `>=` member on the constants (red9b_ge(7, 5)): on the primary the
    index is usable (with enable_seqscan off, an Index Only Scan); the standby's evaluation
    rejects it, and the EXPLAIN answers another plan."""
    def plans(dsn, warm_first):
        with connect(dsn) as c:
            if warm_first:
                warm(c)
            run(c, "SET enable_seqscan = off")
            return [(run(c, PLAN)[0][0], run(c, "SELECT inet_server_port()")[0][0]) for _ in range(3)]
    alone = plans(primary_dsn(pair), False)
    through = plans(red9b_proxy.dsn(), True)
    assert [a[0] for a in alone] == ["Index Only Scan using red9b_pi_i on red9b_pi"] * 3
    assert [t[0] for t in through] == [a[0] for a in alone], (
        f"{PLAN}: the primary alone plans {alone[0][0]!r}; through the proxy "
        f"{[(t[0], ran_on(t[1])) for t in through]}")
