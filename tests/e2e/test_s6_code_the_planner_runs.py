"""SPEC S-6, S-7 and the F-policy end to end: user code a statement runs though its text names
neither the code nor a function (examiners' probes of 2026-12-05; each answered by the standby,
or leaked its effect to another client, before):

- a range type's `subtype_diff`, which the planner calls to estimate `r && '[1,5)'`: a plpgsql one
  that called set_config() left its setting on the pooled reader for the next client — another
  tenant's `app.tenant`, or another role;
- a hash partition key's operator class support function (partition pruning of `WHERE k = 5`);
- a btree operator class's comparison function (`ORDER BY x USING <<<` sorts with it, not with the
  operator's own function), and a range type's `subtype_opclass`;
- a user implicit cast from a column's type (`e + 0`), and a cast to json (`to_json(e)`);
- a LANGUAGE internal alias of a server-dependent built-in, labelled STABLE;
- a user operator written inside a plpgsql body;
- a foreign table (file_fdw reads the files of the server that runs the statement);
- an extension function labelled STABLE that runs SQL text (tablefunc's `crosstab`);
- (red team h19) a user aggregate's support functions' bodies; a range's code reached through its
  multirange, a composite type's field or a table column of that composite; a domain's CHECK
  through a function's array parameter or TABLE column; a sub-partition's hash key; a foreign
  table as an inheritance child or a partition; a user implicit cast between built-in types on a
  column; a user default operator class of json.

The catalogue query (`polarsplit::CATALOG_QUERY`) now reports such code under the relation's and the
type's names, operators' families' support functions, internal aliases as the built-in they run,
operators in function bodies, foreign tables as server-dependent, and labels it knows to be wrong
as volatile. Every answer below must be the primary's; the state an effect leaves must be the
primary's for the client that ran it and absent for the next one."""

from __future__ import annotations

import random

import psycopg
import pytest

from e2e_support import bounded, on_primary, proxy_with_catalogue

# An IMMUTABLE marker: 1 on the primary, -1 on a standby.
WHERE = "CASE WHEN pg_is_in_recovery() THEN -1 ELSE 1 END"

TARGET_OLD = "CREATE OR REPLACE FUNCTION pr_target() RETURNS text STABLE LANGUAGE sql AS $$SELECT 'old'$$"

OBJECTS = [
    "CREATE EXTENSION IF NOT EXISTS file_fdw",
    "CREATE EXTENSION IF NOT EXISTS tablefunc",
    "CREATE FUNCTION pr_plain() RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
    # A range whose subtype_diff sets the tenant (the planner calls it for && with statistics).
    "CREATE FUNCTION pr_diff(a float8, b float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN a - b; END $f$",
    "CREATE TYPE pr_fr AS RANGE (subtype = float8, subtype_diff = pr_diff)",
    "CREATE TABLE pr_range (r pr_fr)",
    "INSERT INTO pr_range SELECT pr_fr(g, g + 3) FROM generate_series(1, 2000) g",
    "ANALYZE pr_range",
    # A hash partition key whose support function sets the tenant (partition pruning calls it).
    "CREATE FUNCTION pr_hash(v int, seed bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN v::bigint + seed; END $f$",
    "CREATE OPERATOR CLASS pr_hops FOR TYPE int USING hash AS OPERATOR 1 = (int, int),"
    " FUNCTION 2 pr_hash(int, bigint)",
    "CREATE TABLE pr_hp (k int) PARTITION BY HASH (k pr_hops)",
    "CREATE TABLE pr_hp0 PARTITION OF pr_hp FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE pr_hp1 PARTITION OF pr_hp FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "INSERT INTO pr_hp SELECT generate_series(1, 10)",
    # A btree family whose comparison function sorts backwards on a standby.
    f"CREATE FUNCTION pr_cmp(a int, b int) RETURNS int IMMUTABLE LANGUAGE sql AS"
    f" 'SELECT btint4cmp(a, b) * {WHERE}'",
    "CREATE FUNCTION pr_lt(a int, b int) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT a < b'",
    "CREATE OPERATOR <<< (LEFTARG = int, RIGHTARG = int, FUNCTION = pr_lt)",
    "CREATE OPERATOR CLASS pr_ops FOR TYPE int USING btree AS OPERATOR 1 <<<, OPERATOR 3 =,"
    " FUNCTION 1 pr_cmp(int, int)",
    "CREATE TABLE pr_sorted (x int)",
    "INSERT INTO pr_sorted VALUES (1), (2), (3)",
    # An implicit cast and a cast to json from a column's type, each a marker.
    "CREATE TYPE pr_e AS ENUM ('a')",
    f"CREATE FUNCTION pr_e2i(pr_e) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT {WHERE}'",
    "CREATE CAST (pr_e AS int) WITH FUNCTION pr_e2i(pr_e) AS IMPLICIT",
    f"CREATE FUNCTION pr_e2j(pr_e) RETURNS json IMMUTABLE LANGUAGE sql AS 'SELECT to_json({WHERE})'",
    "CREATE CAST (pr_e AS json) WITH FUNCTION pr_e2j(pr_e)",
    "CREATE TABLE pr_et (e pr_e)",
    "INSERT INTO pr_et VALUES ('a')",
    # A built-in's code under another name and label.
    "CREATE FUNCTION pr_inrec() RETURNS bool STABLE LANGUAGE internal AS 'pg_is_in_recovery'",
    # A user operator inside a plpgsql body.
    f"CREATE FUNCTION pr_mark(a int, b int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT {WHERE}'",
    "CREATE OPERATOR ### (LEFTARG = int, RIGHTARG = int, FUNCTION = pr_mark)",
    "CREATE FUNCTION pr_useop() RETURNS int STABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN 1 ### 2; END $f$",
    # A foreign table reading a file of the server that runs the statement.
    "CREATE SERVER pr_files FOREIGN DATA WRAPPER file_fdw",
    "CREATE FOREIGN TABLE pr_signal (line text) SERVER pr_files"
    " OPTIONS (filename 'standby.signal', format 'text')",
    # A multi-tenant table: its policy reads the session's tenant setting (pg_get_expr prints
    # the call as current_setting('app.tenant'::text, true)).
    "CREATE TABLE pr_tenant (tenant text, v int)",
    "INSERT INTO pr_tenant VALUES ('acme', 1), ('globex', 2)",
    "ALTER TABLE pr_tenant ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY pr_mine ON pr_tenant USING (tenant = current_setting('app.tenant', true))",
    "GRANT SELECT ON pr_range, pr_hp, pr_sorted, pr_et, pr_signal, pr_tenant TO PUBLIC",
    # Red team h19 (2026-12-05). F1: an aggregate runs its support functions' bodies.
    "CREATE FUNCTION pr_rsf(s int, v int) RETURNS int STABLE LANGUAGE plpgsql AS"
    f" $f$ BEGIN RETURN {WHERE}; END $f$",
    "CREATE AGGREGATE pr_recagg(int) (sfunc = pr_rsf, stype = int)",
    "CREATE FUNCTION pr_tsf(s int, v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN coalesce(s, 0) + v; END $f$",
    "CREATE AGGREGATE pr_tsum(int) (sfunc = pr_tsf, stype = int)",
    # F2, F3: a range whose subtype_opclass comparison sets the tenant, reached through its
    # multirange, a composite type's field and a table column of that composite.
    "CREATE FUNCTION pr_fcmp(a float8, b float8) RETURNS int IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN btfloat8cmp(a, b); END $f$",
    "CREATE OPERATOR CLASS pr_fops FOR TYPE float8 USING btree AS OPERATOR 1 <, OPERATOR 2 <=,"
    " OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 pr_fcmp(float8, float8)",
    "CREATE TYPE pr_r2 AS RANGE (subtype = float8, subtype_opclass = pr_fops, multirange_type_name = pr_mr2)",
    "CREATE TABLE pr_mrt (m pr_mr2)",
    "CREATE TYPE pr_comp AS (r pr_r2)",
    "CREATE TABLE pr_ct (c pr_comp)",
    "INSERT INTO pr_ct VALUES ('(\"[1,5)\")')",
    # F4: a domain whose CHECK sets the tenant, reached through an array parameter and a TABLE
    # column.
    "CREATE FUNCTION pr_dchk(v int) RETURNS bool IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN true; END $f$",
    "CREATE DOMAIN pr_d2 AS int CHECK (pr_dchk(VALUE))",
    "CREATE FUNCTION pr_takes_arr(a pr_d2[]) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $f$ BEGIN RETURN 1; END $f$",
    "CREATE FUNCTION pr_tab() RETURNS TABLE (a pr_d2, b int) IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN a := 5; b := 1; RETURN NEXT; END $f$",
    # F5a: a sub-partition's hash key (the tenant-setting pr_hops).
    "CREATE TABLE pr_lp (g int, k int) PARTITION BY LIST (g)",
    "CREATE TABLE pr_lp1 PARTITION OF pr_lp FOR VALUES IN (1) PARTITION BY HASH (k pr_hops)",
    "CREATE TABLE pr_lp1a PARTITION OF pr_lp1 FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE pr_lp1b PARTITION OF pr_lp1 FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "INSERT INTO pr_lp SELECT 1, generate_series(1, 10)",
    # F5b: a foreign table as an inheritance child and as a partition.
    "CREATE TABLE pr_fparent (line text)",
    "CREATE FOREIGN TABLE pr_fchild () INHERITS (pr_fparent) SERVER pr_files"
    " OPTIONS (filename 'standby.signal', format 'text')",
    "CREATE TABLE pr_fpp (line text) PARTITION BY LIST (line)",
    "CREATE FOREIGN TABLE pr_fpd PARTITION OF pr_fpp DEFAULT SERVER pr_files"
    " OPTIONS (filename 'standby.signal', format 'text')",
    # F5c: a user implicit cast between built-in types, applied to a column.
    f"CREATE FUNCTION pr_p2i(point) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT {WHERE}'",
    "CREATE CAST (point AS int) WITH FUNCTION pr_p2i(point) AS IMPLICIT",
    "CREATE TABLE pr_pt (p point)",
    "INSERT INTO pr_pt VALUES ('(1,2)')",
    # F8: a user default btree operator class for json (its operators named so that no statement
    # spells them): window partitioning and array_position() run its functions.
    "CREATE FUNCTION pr_jcmp(a json, b json) RETURNS int IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN bttextcmp(a::text, b::text); END $f$",
    "CREATE FUNCTION pr_jeq(a json, b json) RETURNS bool IMMUTABLE LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM set_config('app.tenant', 'globex', false); RETURN a::text = b::text; END $f$",
    *[f"CREATE FUNCTION pr_j{n}(a json, b json) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT a::text {o} b::text'"
      for n, o in (("lt", "<"), ("le", "<="), ("ge", ">="), ("gt", ">"))],
    "CREATE OPERATOR =~~= (LEFTARG = json, RIGHTARG = json, FUNCTION = pr_jeq)",
    *[f"CREATE OPERATOR {o} (LEFTARG = json, RIGHTARG = json, FUNCTION = pr_j{n})"
      for n, o in (("lt", "<~~<"), ("le", "<~~="), ("ge", ">~~="), ("gt", ">~~>"))],
    "CREATE OPERATOR CLASS pr_json_ops DEFAULT FOR TYPE json USING btree AS OPERATOR 1 <~~<,"
    " OPERATOR 2 <~~=, OPERATOR 3 =~~=, OPERATOR 4 >~~=, OPERATOR 5 >~~>, FUNCTION 1 pr_jcmp(json, json)",
    "CREATE TABLE pr_jt (j json)",
    "INSERT INTO pr_jt VALUES ('1'), ('2'), ('3')",
    "GRANT SELECT ON pr_mrt, pr_ct, pr_lp, pr_fparent, pr_fchild, pr_fpp, pr_fpd, pr_pt, pr_jt TO PUBLIC",
    # F9: DDL run by a function that a volatile one calls (its body says no DDL word).
    TARGET_OLD,
    "CREATE FUNCTION pr_inner() RETURNS void VOLATILE SECURITY DEFINER LANGUAGE plpgsql AS $f$ BEGIN"
    " EXECUTE $x$CREATE OR REPLACE FUNCTION pr_target() RETURNS text STABLE LANGUAGE sql AS"
    " 'SELECT CASE WHEN pg_is_in_recovery() THEN ''standby'' ELSE ''primary'' END'$x$; END $f$",
    "CREATE FUNCTION pr_outer() RETURNS void VOLATILE LANGUAGE sql AS 'SELECT pr_inner()'",
]
DROP = [
    "DROP TABLE IF EXISTS pr_range, pr_hp, pr_sorted, pr_et, pr_tenant, pr_mrt, pr_ct, pr_lp, pr_fparent,"
    " pr_fpp, pr_pt, pr_jt CASCADE",
    "DROP FOREIGN TABLE IF EXISTS pr_signal, pr_fchild, pr_fpd",
    "DROP AGGREGATE IF EXISTS pr_recagg(int), pr_tsum(int)",
    "DROP FUNCTION IF EXISTS pr_rsf(int, int), pr_tsf(int, int), pr_takes_arr(pr_d2[]), pr_tab()",
    "DROP TYPE IF EXISTS pr_comp, pr_r2",
    "DROP DOMAIN IF EXISTS pr_d2", "DROP FUNCTION IF EXISTS pr_dchk(int)",
    "DROP OPERATOR CLASS IF EXISTS pr_fops USING btree", "DROP OPERATOR FAMILY IF EXISTS pr_fops USING btree",
    "DROP FUNCTION IF EXISTS pr_fcmp(float8, float8)",
    "DROP CAST IF EXISTS (point AS int)", "DROP FUNCTION IF EXISTS pr_p2i(point)",
    "DROP OPERATOR CLASS IF EXISTS pr_json_ops USING btree", "DROP OPERATOR FAMILY IF EXISTS pr_json_ops USING btree",
    "DROP OPERATOR IF EXISTS =~~= (json, json)", "DROP OPERATOR IF EXISTS <~~< (json, json)",
    "DROP OPERATOR IF EXISTS <~~= (json, json)", "DROP OPERATOR IF EXISTS >~~= (json, json)",
    "DROP OPERATOR IF EXISTS >~~> (json, json)",
    "DROP FUNCTION IF EXISTS pr_jcmp(json, json), pr_jeq(json, json), pr_jlt(json, json), pr_jle(json, json),"
    " pr_jge(json, json), pr_jgt(json, json)",
    "DROP FUNCTION IF EXISTS pr_outer(), pr_inner(), pr_target()",
    "DROP SERVER IF EXISTS pr_files",
    "DROP TYPE IF EXISTS pr_fr",
    "DROP CAST IF EXISTS (pr_e AS int)", "DROP CAST IF EXISTS (pr_e AS json)",
    "DROP FUNCTION IF EXISTS pr_e2i(pr_e), pr_e2j(pr_e)",
    "DROP TYPE IF EXISTS pr_e",
    "DROP OPERATOR CLASS IF EXISTS pr_hops USING hash", "DROP OPERATOR FAMILY IF EXISTS pr_hops USING hash",
    "DROP OPERATOR CLASS IF EXISTS pr_ops USING btree", "DROP OPERATOR FAMILY IF EXISTS pr_ops USING btree",
    "DROP OPERATOR IF EXISTS <<< (int, int)", "DROP FUNCTION IF EXISTS pr_useop()",
    "DROP OPERATOR IF EXISTS ### (int, int)",
    "DROP FUNCTION IF EXISTS pr_plain(), pr_diff(float8, float8), pr_hash(int, bigint), pr_cmp(int, int),"
    " pr_lt(int, int), pr_inrec(), pr_mark(int, int)",
]


@pytest.fixture(scope="module")
def hidden(pair, tmp_path_factory):
    on_primary(pair, *DROP, *OBJECTS)
    with proxy_with_catalogue(pair, tmp_path_factory.mktemp("planner"), "pr_plain()", DROP) as proxy:
        yield proxy


def answer(dsn: str, sql: str):
    """The rows, or the SQLSTATE of the error (the primary's own file is not there: 58P01)."""
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 20, sql):
        try:
            return c.execute(sql).fetchall()
        except psycopg.Error as e:
            return e.sqlstate


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", [
    "SELECT x FROM pr_sorted ORDER BY x USING <<<",
    "SELECT e + 0 FROM pr_et",
    "SELECT to_json(e)::text FROM pr_et",
    "SELECT pr_inrec()",
    "SELECT pr_useop()",
    "SELECT line FROM pr_signal",
    "SELECT * FROM crosstab('SELECT 1::text, 1::text, pg_is_in_recovery()::text') AS ct(r text, v text)",
    # Red team h19: an aggregate's transition function (F1), a foreign table as an inheritance
    # child and a partition (F5b), a user implicit cast between built-in types on a column (F5c).
    "SELECT pr_recagg(1)",
    "SELECT line FROM pr_fparent",
    "SELECT line FROM pr_fpp",
    "SELECT p + 1 FROM pr_pt",
])
def test_s7_code_the_planner_or_a_label_hides_answers_as_the_primary(pair, hidden, sql):
    direct = answer(pair.primary.dsn(user="app_trust", dbname="app"), sql)
    proxied = answer(hidden.dsn(), sql)
    assert proxied == direct, f"{sql}: through the proxy {proxied!r}, the primary {direct!r}"


TENANT = "SELECT current_setting('app.tenant', true)"


def tenant_after(dsn: str, tenant: str, trigger: str) -> tuple[str, str]:
    """Client A sets `tenant`, runs `trigger`, and reads its tenant; then client B, with the same
    tenant set (so it may be handed the reader A used), reads its own."""
    with psycopg.connect(dsn, autocommit=True) as a, bounded(a, 20, trigger):
        a.execute(f"SET app.tenant = '{tenant}'")
        a.execute(trigger).fetchall()
        a_sees = a.execute(TENANT).fetchone()[0]
    with psycopg.connect(dsn, autocommit=True) as b, bounded(b, 20, "client B"):
        b.execute(f"SET app.tenant = '{tenant}'")
        b_sees = b.execute(TENANT).fetchone()[0]
    return a_sees, b_sees


@pytest.mark.timeout(90)
@pytest.mark.parametrize("trigger", [
    "SELECT count(*) FROM pr_range WHERE r && '[1,5)'",
    "SELECT count(*) FROM pr_hp WHERE k = 5",
    # Red team h19: an aggregate's transition function (F1), a range's comparison reached through
    # its multirange (F2), a composite's field as a table column (F3), a sub-partition's key
    # (F5a), a user default operator class of a built-in type (F8), a domain's CHECK through an
    # array parameter and a TABLE column (F4).
    "SELECT pr_tsum(x) FROM generate_series(1, 3) x",
    "SELECT pr_takes_arr(ARRAY[5])",
    "SELECT * FROM pr_tab()",
    "SELECT count(*) FROM pr_mrt WHERE m && '{[1,5)}'",
    "SELECT count(*) FROM pr_ct WHERE (c).r = '[1,5)'",
    "SELECT count(*) FROM pr_lp WHERE k = 5",
    "SELECT count(*) OVER (PARTITION BY j) FROM pr_jt",
    "SELECT array_position(ARRAY[j], j) FROM pr_jt",
])
def test_s6_s5_state_set_by_code_the_planner_runs_is_the_sessions_and_no_one_elses(pair, hidden, trigger):
    for _ in range(3):
        tenant = f"t{random.randrange(10**9)}"  # a state no pooled reader has seen yet
        direct = tenant_after(pair.primary.dsn(user="app_trust", dbname="app"), tenant, trigger)
        proxied = tenant_after(hidden.dsn(), tenant, trigger)
        assert direct == ("globex", tenant)
        assert proxied == direct


@pytest.mark.timeout(60)
def test_s5_state_set_through_sql_text_an_extension_function_runs_is_the_sessions(pair, hidden):
    sql = ("SELECT * FROM crosstab($$SELECT 'a'::text, 'b'::text, set_config('app.tenant', 'evil', false)$$)"
           " AS ct(r text, b text)")
    for dsn in (pair.primary.dsn(user="app_trust", dbname="app"), hidden.dsn()):
        with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 20, sql):
            c.execute(sql).fetchall()
            assert [c.execute(TENANT).fetchone()[0] for _ in range(3)] == ["evil"] * 3, dsn


@pytest.mark.timeout(60)
def test_s5_s7_a_tenants_rows_under_row_level_security_are_read_on_the_standby(pair, hidden):
    """The policy's `current_setting('app.tenant'::text, true)` is the session's own setting, which
    the reader runs with (S-5): not server-dependent. Before, the cast form made every read of the
    table stay on the primary (an examiner's note, 2026-12-05)."""
    sql = "SELECT tenant, v, inet_server_port() FROM pr_tenant ORDER BY v"
    for tenant in ("acme", "globex"):
        with psycopg.connect(hidden.dsn(), autocommit=True) as c, bounded(c, 20, sql):
            c.execute(f"SET app.tenant = '{tenant}'")
            rows = c.execute(sql).fetchall()
        with psycopg.connect(pair.primary.dsn(user="app_trust", dbname="app"), autocommit=True) as c:
            c.execute(f"SET app.tenant = '{tenant}'")
            direct = c.execute(sql).fetchall()
        assert [r[:2] for r in rows] == [r[:2] for r in direct] == [(tenant, 1 if tenant == "acme" else 2)]
        assert rows[0][2] == pair.standby.port, (rows, pair.standby.port)


@pytest.mark.timeout(60)
def test_s6_ddl_run_by_a_function_a_volatile_one_calls_makes_the_catalogue_stale(pair, hidden):
    """Red team h19 F9: `pr_outer()` (volatile, its body says no DDL word) calls `pr_inner()`, whose
    dynamic SQL redefines `pr_target()` to answer where it runs. The call must mark the catalogue
    changed, as a direct call of `pr_inner()` does: the next read of `pr_target()` is not judged
    by its old body (before, the standby answered it with the new one)."""
    sql = "SELECT pr_target()"
    try:
        with psycopg.connect(hidden.dsn(), autocommit=True) as c, bounded(c, 20, "pr_outer()"):
            assert c.execute(sql).fetchone()[0] == "old"
            c.execute("SELECT pr_outer()")
        pair.wait_replayed()  # the standby has the new body
        with psycopg.connect(hidden.dsn(), autocommit=True) as c, bounded(c, 20, sql):
            proxied = c.execute(sql).fetchone()[0]
        assert proxied == "primary"
    finally:
        on_primary(pair, TARGET_OLD)
