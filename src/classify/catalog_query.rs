//! The query a host runs on the writer to learn one database's catalogue (SPEC §7 F-policy, S-6,
//! S-7): the writer's version, its user functions, its sequences and its objects whose use runs
//! code a statement's text does not show, in one simple Query. It lives here, in one place, so
//! that every host sends the same text and a change to what the engine needs from the catalogue
//! reaches them all (the example proxy and the Pgpool-II patch used to carry copies).
//! `polarsplit_catalog_query` gives it to C hosts; the header documents its four results.

/// A call of the function whose `pg_proc` row is aliased `$f`, spelled as the engine judges it: `schema.name(NULL, …)` with one NULL per
/// argument; for LANGUAGE internal (`prolang` 12) the built-in whose C code it runs, by that
/// code's name (`prosrc`): `pg_catalog.<built-in>(NULL, …)`.
macro_rules! callable {
    ($f:literal) => {
        concat!(
            r#"CASE WHEN "#, $f, r#".prolang = 12 THEN 'pg_catalog.' || pg_catalog.quote_ident(COALESCE((SELECT bp.proname "#,
            r#"FROM pg_catalog.pg_proc bp WHERE bp.prosrc = "#, $f, r#".prosrc AND bp.prolang = 12 AND bp.oid < 16384 "#,
            r#"ORDER BY bp.oid LIMIT 1), "#, $f, r#".prosrc)) "#,
            r#"ELSE (SELECT pg_catalog.quote_ident(cn.nspname) FROM pg_catalog.pg_namespace cn WHERE cn.oid = "#,
            $f, r#".pronamespace) || '.' || pg_catalog.quote_ident("#, $f, r#".proname) END "#,
            r#"|| '(' || pg_catalog.array_to_string(pg_catalog.array_fill('NULL'::pg_catalog.text, "#,
            r#"ARRAY["#, $f, r#".pronargs::pg_catalog.int4]), ', ') || ')'"#
        )
    };
}

/// A name as the body scan reads it (a regular expression): letters, digits, `_` and `$`, and
/// any non-ASCII character (PostgreSQL takes every byte >= 0x80 as a letter of an unquoted name,
/// while `[[:alpha:]]` is ASCII-only in a C-locale database; verified on PostgreSQL 15 in UTF8,
/// LATIN1 and SQL_ASCII databases).
macro_rules! name_word {
    () => {
        r#"[[:alpha:]_\u0080-\U0010ffff][[:alnum:]_$\u0080-\U0010ffff]*"#
    };
}

/// The SQL expression `$e` (a name) folded as the server folds an unquoted name: ASCII letters
/// only (`lower()` also folds non-ASCII letters in a database with another locale).
macro_rules! fold {
    ($e:literal) => {
        concat!(
            "pg_catalog.translate(",
            $e,
            ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
        )
    };
}

/// In the `'f'` rows: a call of the function of each user operator the scanned body (`b.src`)
/// writes (the words around it do not show it; the operators and their calls are collected once,
/// `uops`).
macro_rules! uop_calls {
    () => {
        concat!(
            r#"|| COALESCE((SELECT pg_catalog.string_agg(DISTINCT ', ' || u.call, '') "#,
            r#"FROM ROWS FROM (pg_catalog.unnest(uops.names), pg_catalog.unnest(uops.calls)) AS u(name, call) "#,
            r#"WHERE pg_catalog.strpos(b.src, u.name) > 0), '') "#
        )
    };
}

/// In the `'f'` rows: every word of the scanned body (`b.src`) as a relation read (a sequence, a
/// view, a user function called by attribute notation — `a.f` — is then judged by its name);
/// with `un`, only the words that name a user function (a volatile body: what matters is the
/// code it reaches — a call by attribute notation —, not what it reads, which keeps a
/// `/* route=reader */` call of it where the hint sends it).
macro_rules! from_words {
    () => {
        from_words!("")
    };
    (un) => {
        from_words!(concat!(
            " WHERE ",
            fold!("w[1]"),
            " IN (SELECT un.name FROM un)"
        ))
    };
    ($filter:expr) => {
        concat!(
            r#"|| COALESCE(' FROM ' || (SELECT pg_catalog.string_agg(DISTINCT "#,
            r#"pg_catalog.quote_ident("#,
            fold!("w[1]"),
            r#"), ', ') FROM pg_catalog.regexp_matches(b.src, '("#,
            name_word!(),
            r#")', 'g') AS w"#,
            $filter,
            r#"), '')"#
        )
    };
}

/// Expands to the query's text, a string literal (so the C form can append its NUL at compile
/// time).
macro_rules! catalog_query_text {
    () => {
        concat!(
        r#"SET LOCAL lock_timeout = '100ms';"#,
        // JIT would compile the closures below for seconds (their estimates pass jit_above_cost).
        r#"SET LOCAL jit = off;"#,
        r#"SELECT pg_catalog.current_setting('server_version_num');"#,
        // An aggregate is immutable in pg_proc whatever its support functions do: reported with their
        // worst volatility (a transition function may write or call set_config).
        r#"SELECT n.nspname, p.proname, CASE WHEN p.prokind = 'a' THEN ("#,
        r#"SELECT CASE WHEN pg_catalog.bool_or(f.provolatile = 'v') THEN 'v' "#,
        r#"WHEN pg_catalog.bool_or(f.provolatile = 's') THEN 's' ELSE 'i' END "#,
        r#"FROM pg_catalog.pg_aggregate a JOIN pg_catalog.pg_proc f ON f.oid IN (a.aggtransfn, a.aggfinalfn, "#,
        r#"a.aggcombinefn, a.aggserialfn, a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn) "#,
        r#"WHERE a.aggfnoid = p.oid) "#,
        // Extension functions whose label is wrong (verified on PostgreSQL 15): tablefunc's
        // `crosstab*` and `connectby` and xml2's `xpath_table` are STABLE C functions that run
        // the SQL text they are given (as `query_to_xml`), and isn's `isn_weak(bool)` is
        // IMMUTABLE but sets a per-backend flag: volatile, as what they do.
        r#"WHEN p.proname IN ('crosstab', 'crosstab2', 'crosstab3', 'crosstab4', 'connectby', 'xpath_table', "#,
        r#"'isn_weak') THEN 'v' "#,
        r#"ELSE p.provolatile::pg_catalog.text END "#,
        r#"FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass "#,
        r#"AND d.objid = p.oid AND d.deptype = 'e');"#,
        r#"SELECT n.nspname, c.relname "#,
        r#"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "#,
        r#"WHERE c.relkind = 'S' "#,
        // One more row, a fingerprint of the database's relations (their OIDs and row
        // versions: created, dropped, renamed, moved or altered, never by VACUUM or ANALYZE,
        // which update in place): DDL run on the primary without passing through an engine
        // makes the report differ, and statements prepared on pooled readers before it are
        // prepared again (E-2, S-6). As a sequence's name it only keeps reads of a relation so
        // named on the primary. Temporary relations are left out: each is its own session's,
        // whose reads stay on the writer, and a session's temporary table must not make every
        // session's statements look prepared before DDL (E-2's epoch of names).
        r#"UNION ALL SELECT 'pg_catalog', 'polarsplit_relations_' || pg_catalog.md5(COALESCE("#,
        r#"pg_catalog.string_agg(c.oid::pg_catalog.text || '.' || c.xmin::pg_catalog.text, ',' ORDER BY c.oid), '')) "#,
        r#"FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND c.relpersistence <> 't';"#,
        // The fourth result shares its closures (`WITH RECURSIVE`, each a UNION: it ends):
        // `tc`, which type holds which (an array its element, a domain its base type, a range
        // its subtype, a multirange its range, a user composite type or a relation's row type
        // its fields' types — `rngmultitypid` read through to_jsonb, absent before PostgreSQL 14);
        // `oc`, the user functions behind each operator class (support functions, operators'
        // functions); `om`, the user functions behind each operator (its own, and those of the
        // operators of its btree families); `tf`, the user functions behind each type — its own
        // I/O functions, a range's `subtype_diff`, `canonical` and `subtype_opclass`, its default
        // operator classes', the casts from it (and to it, for a user type), then every type holding one
        // of those (a built-in type too: a user default operator class of `json`, a user cast
        // that a statement applies without naming it, implicit or in assignment, from `point` to
        // another built-in type — one to a user type is that type's — but none of an installed
        // extension's functions there); `td`, the domains each
        // type holds; `rd`, each relation with its descendants (partitions of partitions,
        // inheritance children); `rf`, the user functions a relation's own columns' types, its
        // partition key, its indexes (operator classes, expressions, predicates), its CHECK
        // constraints and its statistics objects' expressions run (an operator there with its
        // btree families' operators, `om`); `un`, the user functions' names.
        r#"SELECT * FROM (WITH RECURSIVE "#,
        r#"tc(outer_t, inner_t) AS (SELECT t.oid, t.typelem FROM pg_catalog.pg_type t WHERE t.typelem <> 0 "#,
        r#"UNION ALL SELECT t.oid, t.typbasetype FROM pg_catalog.pg_type t WHERE t.typbasetype <> 0 "#,
        r#"UNION ALL SELECT r.rngtypid, r.rngsubtype FROM pg_catalog.pg_range r "#,
        r#"UNION ALL SELECT (pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.->>) 'rngmultitypid')::pg_catalog.oid, r.rngtypid "#,
        r#"FROM pg_catalog.pg_range r WHERE pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.?) 'rngmultitypid' "#,
        r#"UNION ALL SELECT t.oid, a.atttypid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_attribute a "#,
        r#"ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped WHERE t.typrelid >= 16384), "#,
        r#"oc(opc, fid) AS (SELECT c.oid, ap.amproc::pg_catalog.oid FROM pg_catalog.pg_opclass c "#,
        r#"JOIN pg_catalog.pg_amproc ap ON ap.amprocfamily = c.opcfamily WHERE ap.amproc::pg_catalog.oid >= 16384 "#,
        r#"UNION SELECT c.oid, op.oprcode::pg_catalog.oid FROM pg_catalog.pg_opclass c "#,
        r#"JOIN pg_catalog.pg_amop am ON am.amopfamily = c.opcfamily JOIN pg_catalog.pg_operator op ON op.oid = am.amopopr "#,
        r#"WHERE op.oprcode::pg_catalog.oid >= 16384), "#,
        // `om`: the user functions a use of an operator may run — its own, its negator's and
        // commutator's (the planner rewrites `NOT (a <<< b)` with the negator and estimates
        // `7 <<< x` with the commutator, over the column's statistics), and every operator's
        // of the btree families it belongs to: to prove a CHECK false (constraint exclusion) or
        // a partial index's predicate true from a clause, the planner's predicate prover
        // evaluates a *test operator* of the btree family the two operators share on their
        // constants (`x =<<< 7` against `CHECK (x >>> 5)` runs the family's `<=` member on 7
        // and 5), and selectivity estimation compares with the family's `<` and `>`.
        r#"om(opr, fid) AS (SELECT o.oid, o.oprcode::pg_catalog.oid FROM pg_catalog.pg_operator o "#,
        r#"WHERE o.oprcode::pg_catalog.oid >= 16384 "#,
        r#"UNION SELECT o.oid, no.oprcode::pg_catalog.oid FROM pg_catalog.pg_operator o "#,
        r#"JOIN pg_catalog.pg_operator no ON no.oid IN (o.oprnegate, o.oprcom) "#,
        r#"WHERE no.oprcode::pg_catalog.oid >= 16384 "#,
        r#"UNION SELECT am.amopopr, mo.oprcode::pg_catalog.oid FROM pg_catalog.pg_amop am "#,
        r#"JOIN pg_catalog.pg_amop fm ON fm.amopfamily = am.amopfamily "#,
        r#"JOIN pg_catalog.pg_operator mo ON mo.oid = fm.amopopr "#,
        r#"WHERE am.amopmethod = (SELECT a.oid FROM pg_catalog.pg_am a WHERE a.amname = 'btree') AND mo.oprcode::pg_catalog.oid >= 16384), "#,
        r#"tf0(typ, fid) AS (SELECT t.oid, pg_catalog.unnest(ARRAY[t.typinput::pg_catalog.oid, t.typoutput, t.typreceive, "#,
        r#"t.typsend, t.typmodin, t.typmodout, t.typanalyze]) FROM pg_catalog.pg_type t WHERE t.oid >= 16384 "#,
        r#"UNION SELECT r.rngtypid, pg_catalog.unnest(ARRAY[r.rngsubdiff::pg_catalog.oid, r.rngcanonical]) "#,
        r#"FROM pg_catalog.pg_range r "#,
        r#"UNION SELECT r.rngtypid, oc.fid FROM pg_catalog.pg_range r JOIN oc ON oc.opc = r.rngsubopc "#,
        r#"UNION SELECT c.opcintype, oc.fid FROM pg_catalog.pg_opclass c JOIN oc ON oc.opc = c.oid WHERE c.opcdefault "#,
        r#"UNION SELECT k.castsource, k.castfunc FROM pg_catalog.pg_cast k WHERE k.castfunc >= 16384 "#,
        r#"AND (k.castsource >= 16384 OR k.casttarget < 16384 AND k.castcontext <> 'e') "#,
        r#"UNION SELECT k.casttarget, k.castfunc FROM pg_catalog.pg_cast k WHERE k.castfunc >= 16384 "#,
        r#"AND k.casttarget >= 16384), "#,
        r#"fx(fid) AS (SELECT e.objid FROM pg_catalog.pg_depend e JOIN pg_catalog.pg_proc f ON f.oid = e.objid "#,
        r#"WHERE e.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND e.deptype = 'e' AND f.prolang = 13), "#,
        r#"fe(fid) AS (SELECT e.objid FROM pg_catalog.pg_depend e "#,
        r#"WHERE e.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND e.deptype = 'e'), "#,
        r#"tf(typ, fid) AS (SELECT tf0.typ, tf0.fid FROM tf0 WHERE tf0.fid >= 16384 AND tf0.fid NOT IN (SELECT fid FROM fx) "#,
        r#"AND (tf0.typ >= 16384 OR tf0.fid NOT IN (SELECT fid FROM fe)) "#,
        r#"UNION SELECT tc.outer_t, tf.fid FROM tf JOIN tc ON tc.inner_t = tf.typ), "#,
        // Each user function's call (`callable!`), spelled once.
        r#"fc(fid, call) AS (SELECT f.oid, "#, callable!("f"), r#" FROM pg_catalog.pg_proc f "#,
        r#"WHERE f.oid >= 16384 AND f.oid NOT IN (SELECT fid FROM fx)), "#,
        r#"td(typ, dom) AS (SELECT t.oid, t.oid FROM pg_catalog.pg_type t WHERE t.typtype = 'd' "#,
        r#"UNION SELECT tc.outer_t, td.dom FROM td JOIN tc ON tc.inner_t = td.typ), "#,
        r#"rd(root, rel) AS (SELECT c.oid, c.oid FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'p', 'm', 'f') "#,
        r#"UNION SELECT rd.root, i.inhrelid FROM rd JOIN pg_catalog.pg_inherits i ON i.inhparent = rd.rel), "#,
        r#"rf(rel, fid) AS (SELECT a.attrelid, tf.fid FROM pg_catalog.pg_attribute a JOIN tf ON tf.typ = a.atttypid "#,
        r#"WHERE a.attnum > 0 AND NOT a.attisdropped "#,
        r#"UNION SELECT COALESCE(i.indrelid, d.objid), d.refobjid FROM pg_catalog.pg_depend d "#,
        r#"LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = d.objid "#,
        r#"WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass "#,
        r#"UNION SELECT COALESCE(i.indrelid, d.objid), oc.fid FROM pg_catalog.pg_depend d JOIN oc ON oc.opc = d.refobjid "#,
        r#"LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = d.objid "#,
        r#"WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_opclass'::pg_catalog.regclass "#,
        // A table's CHECK constraints (constraint exclusion, `constraint_exclusion = partition`
        // by default, const-folds them while planning a read of an inheritance parent, a
        // partitioned table or a UNION ALL of tables), its statistics objects' expressions
        // (const-folded when any read of the table is planned) and its indexes' predicates and
        // expressions (`pg_depend` rows of an index naming an operator: a partial index's
        // predicate is proved from a read's clauses): the functions their `pg_depend` rows name
        // and, for an operator, the functions of it and of every operator of its btree families
        // (`om`: the predicate prover runs the family's test operator, which no text names) —
        // IMMUTABLE ones, which folding and the prover call, and SQL ones, which folding may
        // inline; a STABLE or VOLATILE function in another language (a plpgsql CHECK function
        // left at the default VOLATILE) runs only for writes.
        r#"UNION SELECT x.rel, f.oid FROM (SELECT k.conrelid, d.refclassid, d.refobjid FROM pg_catalog.pg_depend d "#,
        r#"JOIN pg_catalog.pg_constraint k ON k.oid = d.objid "#,
        r#"WHERE d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND k.contype = 'c' AND k.conrelid <> 0 "#,
        r#"UNION ALL SELECT s.stxrelid, d.refclassid, d.refobjid FROM pg_catalog.pg_depend d "#,
        r#"JOIN pg_catalog.pg_statistic_ext s ON s.oid = d.objid "#,
        r#"WHERE d.classid = 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass "#,
        r#"UNION ALL SELECT COALESCE(i.indrelid, d.objid), d.refclassid, d.refobjid FROM pg_catalog.pg_depend d "#,
        r#"LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = d.objid "#,
        r#"WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass "#,
        r#"AND d.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass) AS x(rel, refclassid, refobjid) "#,
        r#"LEFT JOIN om ON x.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass "#,
        r#"AND om.opr = x.refobjid JOIN pg_catalog.pg_proc f ON f.oid = CASE "#,
        r#"WHEN x.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass THEN x.refobjid ELSE om.fid END "#,
        r#"WHERE f.oid >= 16384 AND (f.provolatile = 'i' OR f.prolang = 14)), "#,
        r#"un(name) AS (SELECT p.proname::pg_catalog.text FROM pg_catalog.pg_proc p "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')) "#,
        r#"SELECT n.nspname, c.relname, pg_catalog.pg_get_viewdef(c.oid), 'v' "#,
        r#"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "#,
        // (`c.oid >= 16384` before the namespace: the planner computes pg_get_viewdef where it
        // scans pg_class, and a built-in view's costs a load seconds.)
        r#"WHERE c.relkind = 'v' AND c.oid >= 16384 AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"UNION ALL "#,
        r#"SELECT n.nspname, c.relname, 'SELECT NULL' || pg_catalog.string_agg("#,
        r#"pg_catalog.concat(', (' || pg_catalog.pg_get_expr(p.polqual, p.polrelid) || ')', "#,
        r#"', (' || pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) || ')'), ''), 'p' "#,
        r#"FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace GROUP BY n.nspname, c.relname "#,
        r#"UNION ALL "#,
        r#"SELECT n.nspname, t.typname, 'SELECT NULL::' || pg_catalog.quote_ident(bn.nspname) || '.' "#,
        r#"|| pg_catalog.quote_ident(b.typname) || pg_catalog.concat((SELECT pg_catalog.string_agg("#,
        r#"', (' || pg_catalog.pg_get_expr(k.conbin, 0) || ')', '') FROM pg_catalog.pg_constraint k "#,
        r#"WHERE k.contypid = t.oid AND k.contype = 'c')), 'd' "#,
        r#"FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace "#,
        r#"JOIN pg_catalog.pg_type b ON b.oid = t.typbasetype JOIN pg_catalog.pg_namespace bn ON bn.oid = b.typnamespace "#,
        r#"WHERE t.typtype = 'd' AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"UNION ALL "#,
        r#"SELECT tn.nspname, t.typname, 'SELECT ' || pg_catalog.quote_ident(pn.nspname) || '.' "#,
        r#"|| pg_catalog.quote_ident(f.proname) || '(NULL)', 'c' "#,
        r#"FROM pg_catalog.pg_cast k JOIN pg_catalog.pg_proc f ON f.oid = k.castfunc "#,
        r#"JOIN pg_catalog.pg_namespace pn ON pn.oid = f.pronamespace "#,
        r#"CROSS JOIN LATERAL (VALUES (k.castsource), (k.casttarget)) AS x(typ) "#,
        r#"JOIN pg_catalog.pg_type t ON t.oid = x.typ JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace "#,
        r#"WHERE k.oid >= 16384 "#,
        r#"UNION ALL "#,
        // A user operator runs its function (called with as many arguments as it takes: a
        // prefix operator over `pg_catalog.age` is `age(xid)`, server-dependent, not the
        // two-argument overload), the planner its negator's and commutator's (an examiner's
        // finding of 2026-12-07: `NOT (x <<< 2)` ran the negator's function on the standby), a
        // sort or an index scan by it — or by those — runs its operator families' support
        // functions (`ORDER BY x USING <<<` compares with the btree family's
        // FUNCTION 1, not the operator's own function), and planning a clause with it may run
        // the other operators of its btree families (`om`: the predicate prover's test operator
        // against a CHECK or a partial index's predicate, selectivity estimation's `<` and `>`).
        r#"SELECT n.nspname, o.oprname, 'SELECT ' || pg_catalog.quote_ident(pn.nspname) || '.' "#,
        r#"|| pg_catalog.quote_ident(f.proname) || '(' || pg_catalog.array_to_string(pg_catalog.array_fill("#,
        r#"'NULL'::pg_catalog.text, ARRAY[f.pronargs::pg_catalog.int4]), ', ') || ')' "#,
        r#"|| COALESCE((SELECT pg_catalog.string_agg(DISTINCT ', ' || fc.call, '') FROM pg_catalog.pg_operator no "#,
        r#"JOIN fc ON fc.fid = no.oprcode::pg_catalog.oid WHERE no.oid IN (o.oprnegate, o.oprcom)), '') "#,
        r#"|| COALESCE((SELECT pg_catalog.string_agg("#,
        r#"DISTINCT ', ' || "#, callable!("sp"), r#", '') FROM pg_catalog.pg_amop am "#,
        r#"JOIN pg_catalog.pg_amproc ap ON ap.amprocfamily = am.amopfamily JOIN pg_catalog.pg_proc sp ON sp.oid = ap.amproc "#,
        r#"WHERE am.amopopr IN (o.oid, o.oprnegate, o.oprcom) AND sp.oid >= 16384), '') "#,
        // The btree families' operators are `om`'s, looked up here through the catalogue's
        // indexes (a scan of `om` per operator cost 0.6 s in a database with ten contrib
        // extensions, isn among them: 331 user operators, 20,000 `om` rows), each call spelled
        // once (`fc`: isn's operator functions are LANGUAGE internal, and `callable!` per call
        // added 13 s there).
        r#"|| COALESCE((SELECT pg_catalog.string_agg(DISTINCT ', ' || fc.call, '') FROM pg_catalog.pg_amop am "#,
        r#"JOIN pg_catalog.pg_amop fm ON fm.amopfamily = am.amopfamily JOIN pg_catalog.pg_operator mo ON mo.oid = fm.amopopr "#,
        r#"JOIN fc ON fc.fid = mo.oprcode::pg_catalog.oid WHERE am.amopopr IN (o.oid, o.oprnegate, o.oprcom) "#,
        r#"AND am.amopmethod = (SELECT a.oid FROM pg_catalog.pg_am a WHERE a.amname = 'btree') "#,
        r#"AND mo.oprcode <> o.oprcode), ''), 'o' "#,
        r#"FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_proc f ON f.oid = o.oprcode "#,
        r#"JOIN pg_catalog.pg_namespace pn ON pn.oid = f.pronamespace "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace "#,
        r#"WHERE o.oid >= 16384 "#,
        // User functions, under their names (a call names the function). The scanned body
        // (`t.body`) is `prosrc`, or for a SQL-standard body (`BEGIN ATOMIC … END`, `RETURN …`:
        // prosrc empty, `prosqlbody` set) its text as `pg_get_functiondef` prints it, from its
        // `BEGIN ATOMIC` or `RETURN` line on (the header above it names no call; should the
        // header not be found, the whole text says CREATE: DDL). A volatile function is no read
        // anyway: reported as a DO block that says DDL when its body says DDL or dynamic SQL (the
        // catalogue changes when it runs), else as a SELECT calling the user functions its body
        // names (`un`), the user operators it writes, and reading every word it holds (a user
        // function by attribute notation, `a.f`, is a word; a view it reads), so that DDL or
        // set_config one of them runs, however deep, reaches its callers too — never dropped (a
        // body that calls nothing is `SELECT NULL`). A STABLE or IMMUTABLE SQL function's body
        // with statements in prosrc is its statements, judged as the statement's own (one over
        // pg_is_in_recovery() or a sequence is then server-dependent, one whose body writes is no
        // read). Other bodies (other languages, SQL-standard ones) are scanned: one that says DDL
        // or dynamic SQL (EXECUTE) counts as a DO block that does (the catalogue changes when it
        // runs), one that says DML, a session command or a cursor command (OPEN, FETCH, MOVE,
        // CLOSE: a cursor a function opens lives on in the session that ran it) as a statement
        // the engine cannot read; any other as a SELECT that calls every name the body writes
        // before a parenthesis (a STABLE function that PERFORMs a volatile one is then no read)
        // and reads every word it holds (a sequence or view it reads is judged) — erring on the
        // primary's side. A body the scan cannot read (`b.unreadable`, below) counts as a text
        // the engine cannot read, a volatile one as DDL. Names are words of letters, digits, `_`,
        // `$` and any non-ASCII character (PostgreSQL takes every byte >= 0x80 as a letter of an
        // unquoted name; `[[:alpha:]]` is ASCII-only in a C-locale database), folded to lower
        // case in ASCII only, as the server folds unquoted names (`fold!`).
        r#"UNION ALL "#,
        r#"SELECT nspname, proname, def, 'f' FROM (SELECT n.nspname, p.proname, CASE "#,
        r#"WHEN p.provolatile = 'v' THEN CASE WHEN b.unreadable OR t.body ~* "#,
        r#"'\m(create|alter|drop|comment|grant|revoke|execute|truncate|reindex|refresh)\M' "#,
        r#"THEN 'DO $polarsplit$ CREATE $polarsplit$' "#,
        r#"ELSE 'SELECT NULL' || COALESCE((SELECT pg_catalog.string_agg(DISTINCT ', ' || pg_catalog.quote_ident("#,
        fold!("m[1]"), r#") || '()', '') FROM pg_catalog.regexp_matches(b.src, '("#, name_word!(),
        r#")[[:space:]]*\(', 'g') AS m WHERE "#, fold!("m[1]"), r#" IN (SELECT un.name FROM un)), '') "#,
        uop_calls!(), from_words!(un), r#" END "#,
        r#"WHEN l.lanname = 'sql' AND NOT t.standard THEN p.prosrc "#,
        r#"WHEN t.body ~* '\m(create|alter|drop|comment|grant|revoke|execute|truncate|reindex|refresh)\M' "#,
        r#"THEN 'DO $polarsplit$ CREATE $polarsplit$' "#,
        r#"WHEN t.body ~* '\m(insert|update|delete|merge|copy|lock|notify|listen|set|reset|discard|commit|rollback"#,
        r#"|open|fetch|move|close)\M' "#,
        r#"THEN 'polarsplit: the function body may write' "#,
        r#"WHEN b.unreadable THEN 'polarsplit: the function body cannot be read' "#,
        r#"ELSE 'SELECT NULL' || COALESCE((SELECT pg_catalog.string_agg("#,
        r#"DISTINCT ', ' || pg_catalog.quote_ident("#, fold!("m[1]"), r#") || '()', '') "#,
        r#"FROM pg_catalog.regexp_matches(b.src, '("#, name_word!(), r#")[[:space:]]*\(', 'g') AS m "#,
        r#"WHERE "#, fold!("m[1]"), r#" NOT IN ('if', 'elsif', 'while', 'return', 'exists', 'in', 'any', 'all', "#,
        r#"'some', 'values', 'array', 'row', 'not', 'and', 'or', 'when', 'then', 'else', 'case', 'over', "#,
        r#"'filter', 'within', 'using', 'into', 'from', 'select', 'where', 'on', 'as', 'with', 'exception', "#,
        r#"'raise', 'loop', 'query', 'next', 'perform', 'is', 'like', 'between', 'by', 'join', 'lateral', "#,
        r#"'returning', 'default', 'numeric', 'decimal', 'varchar', 'char', 'character', 'interval', "#,
        r#"'timestamp', 'time', 'bit', 'float', 'double', 'precision', 'varying', 'distinct', 'group', "#,
        r#"'having', 'order', 'limit', 'offset', 'union', 'intersect', 'except')), '') "#,
        uop_calls!(),
        // The SQL value keywords of the transaction's time and the words of the date/time inputs
        // of its start (`now`, `today`, …) in any quotes or none (`$q$now$q$`), and text that
        // may join or escape into them (`||`, a literal continued on the next line, a backslash)
        // — a read split off a block must not answer the reader's own transaction's time: as a
        // call of now().
        r#"|| CASE WHEN b.src ~* '\m(current_timestamp|current_time|current_date|localtimestamp|localtime"#,
        r#"|now|today|tomorrow|yesterday)\M' OR b.src ~ '\|\||\\|''[[:space:]]*\n[[:space:]]*''' "#,
        r#"THEN ', now()' ELSE '' END "#,
        // A procedural language's body keeps its statements' plans for the session (plpgsql
        // prepares each at its first run): a date/time input of the transaction's start in a
        // literal (`'now'::timestamptz`, not the call `now()`) is read at that first run and
        // then answers the session's first call's time — which only the writer's session has
        // (an examiner's finding of 2026-12-07: every call on a fresh reader connection
        // answered the current time). As a call of a server-dependent function: never a
        // reader's.
        r#"|| CASE WHEN l.lanname <> 'sql' AND (b.src ~* '\m(now|today|tomorrow|yesterday)\M(?![[:space:]]*\()' "#,
        r#"OR b.src ~ '\\') THEN ', pg_catalog.pg_backend_pid()' ELSE '' END "#,
        from_words!(), r#" END AS def "#,
        r#"FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"JOIN pg_catalog.pg_language l ON l.oid = p.prolang "#,
        r#"CROSS JOIN LATERAL (SELECT l.lanname = 'sql' AND pg_catalog.btrim(p.prosrc) = '' AS standard) AS t0 "#,
        r#"CROSS JOIN LATERAL (SELECT t0.standard, CASE WHEN t0.standard THEN pg_catalog.regexp_replace("#,
        r#"pg_catalog.pg_get_functiondef(p.oid), '^.*?\n(BEGIN ATOMIC|RETURN )', '\1') "#,
        r#"ELSE p.prosrc END AS body) AS t "#,
        // The scanned text (`b.src`): a plpgsql or SQL body without its comments (a string or a
        // quoted name is taken whole first, so `'--'` starts none), another language's with
        // its comment brackets blanked (name/**/( calls name); quoted names unquoted
        // ("set_config"( calls set_config). What the scan cannot read is never judged safe
        // (`b.unreadable`): a `U&` name or string and `UESCAPE` (escapes spell any name), and in
        // plpgsql or SQL what the comment stripping cannot follow — a `/*` or `*/` left (a
        // nested comment), `\'` (an escaped quote), a dollar quote inside the body (its tag
        // may hold non-ASCII characters too) — and a quoted name the scan's lower-case words do
        // not spell (`"Seq"`, `"my seq"`: outside strings, one with a character other than a
        // lower-case letter, a digit, `_`, `$` or a non-ASCII character).
        r#"CROSS JOIN LATERAL (SELECT CASE WHEN l.lanname IN ('plpgsql', 'sql') THEN pg_catalog.regexp_replace("#,
        r#"t.body, '(''([^'']|'''')*''|"[^"]*")|/\*([^*]|\*+[^*/])*\*+/|--[^\n]*', '\1 ', 'g') "#,
        r#"ELSE pg_catalog.replace(pg_catalog.replace(t.body, '/*', ' '), '*/', ' ') END AS code) AS s "#,
        r#"CROSS JOIN LATERAL (SELECT pg_catalog.replace(s.code, '"', '') AS src, "#,
        r#"t.body ~* 'u&[''"]|\muescape\M' OR l.lanname IN ('plpgsql', 'sql') "#,
        r#"AND (s.code ~ '/\*|\*/' OR t.body ~ '\\''|\$("#, name_word!(), r#")?\$' "#,
        r#"OR pg_catalog.regexp_replace(s.code, '''([^'']|'''')*''|("([^"]|"")*")', '\2', 'g') "#,
        r#"~ '"[^"]*[^"[:lower:][:digit:]_$\u0080-\U0010ffff][^"]*"|""') AS unreadable) AS b "#,
        r#"CROSS JOIN (SELECT pg_catalog.array_agg(uo.oprname::pg_catalog.text ORDER BY uo.oid), "#,
        r#"pg_catalog.array_agg("#, callable!("op"), r#" ORDER BY uo.oid) FROM pg_catalog.pg_operator uo "#,
        r#"JOIN pg_catalog.pg_proc op ON op.oid = uo.oprcode WHERE uo.oid >= 16384) AS uops(names, calls) "#,
        r#"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND l.lanname <> 'internal' "#,
        r#"AND l.lanname <> 'c') AS f WHERE def IS NOT NULL "#,
        // A user function's default argument values run in the calling statement.
        r#"UNION ALL "#,
        r#"SELECT n.nspname, p.proname, 'SELECT ' || pg_catalog.pg_get_expr(p.proargdefaults, 0), 'f' "#,
        r#"FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"WHERE p.proargdefaults IS NOT NULL AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        // A function's SET clause (`proconfig`) runs where the call runs: a standby refuses a
        // transaction's settings (`transaction_read_only = off`: 25001 at each call, after rows
        // when the call is in a late row), so a call of one setting `transaction_*` or
        // `default_transaction_*` is never replica-safe; and one of a placeholder (a name with a
        // dot) defines it in the session for good (PostgreSQL restores the value when the call
        // ends, the placeholder stays): a change of the session's state, as set_config. Any
        // other built-in setting (`SET search_path = …` of a SECURITY DEFINER function) is
        // restored and runs alike on a standby: no row — but `seed`, which PostgreSQL applies
        // by reseeding the session's random sequence and never undoes: a call of `setseed` (the
        // session's `random()` is then the writer's alone; an examiner's finding of
        // 2026-12-07). The three kinds of setting are statements of one text, `;` between.
        r#"UNION ALL "#,
        r#"SELECT n.nspname, p.proname, CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS g(c) "#,
        r#"WHERE pg_catalog.split_part(g.c, '=', 1) ~* '^seed$') "#,
        r#"THEN 'SELECT pg_catalog.setseed(NULL)' ELSE '' END "#,
        r#"|| CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS g(c) "#,
        r#"WHERE pg_catalog.strpos(pg_catalog.split_part(g.c, '=', 1), '.') > 0) "#,
        r#"THEN '; SELECT pg_catalog.set_config(NULL, NULL, NULL)' ELSE '' END "#,
        r#"|| CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS g(c) "#,
        r#"WHERE pg_catalog.split_part(g.c, '=', 1) ~* '^(default_)?transaction_') "#,
        r#"THEN '; polarsplit: the function has a SET clause' ELSE '' END, 'f' "#,
        r#"FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"WHERE p.proconfig IS NOT NULL AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"AND EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS g(c) "#,
        r#"WHERE pg_catalog.strpos(pg_catalog.split_part(g.c, '=', 1), '.') > 0 "#,
        r#"OR pg_catalog.split_part(g.c, '=', 1) ~* '^seed$' "#,
        r#"OR pg_catalog.split_part(g.c, '=', 1) ~* '^(default_)?transaction_') "#,
        // A domain's CHECK runs where the text never names the domain: a function's argument or
        // result (OUT and TABLE columns too) of a type that holds it (the domain, an array of it, a
        // composite or range over it), and a type or a relation's row type that holds it.
        r#"UNION ALL "#,
        r#"SELECT DISTINCT n.nspname, p.proname, 'SELECT NULL::' || pg_catalog.quote_ident(tn.nspname) || '.' "#,
        r#"|| pg_catalog.quote_ident(t.typname), 'f' "#,
        r#"FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"CROSS JOIN LATERAL pg_catalog.unnest(COALESCE(p.proallargtypes, p.proargtypes::pg_catalog.oid[]) "#,
        r#"|| p.prorettype) AS a(typ) JOIN td ON td.typ = a.typ "#,
        r#"JOIN pg_catalog.pg_type t ON t.oid = td.dom JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace "#,
        r#"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"UNION ALL "#,
        r#"SELECT DISTINCT cn.nspname, c.typname, 'SELECT NULL::' || pg_catalog.quote_ident(tn.nspname) || '.' "#,
        r#"|| pg_catalog.quote_ident(t.typname), 'd' "#,
        r#"FROM td JOIN pg_catalog.pg_type c ON c.oid = td.typ JOIN pg_catalog.pg_namespace cn ON cn.oid = c.typnamespace "#,
        r#"JOIN pg_catalog.pg_type t ON t.oid = td.dom JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace "#,
        r#"WHERE td.typ <> td.dom AND c.typcategory <> 'A' AND cn.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        // A user aggregate runs its support functions (transition, final, combine, …): a call of
        // each user one, judged by its own rows (an aggregate has no body of its own).
        r#"UNION ALL "#,
        r#"SELECT n.nspname, p.proname, 'SELECT NULL' || pg_catalog.string_agg(DISTINCT ', ' || fc.call, ''), 'f' "#,
        r#"FROM pg_catalog.pg_aggregate ag JOIN pg_catalog.pg_proc p ON p.oid = ag.aggfnoid "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"JOIN fc ON fc.fid IN (ag.aggtransfn, ag.aggfinalfn, ag.aggcombinefn, ag.aggserialfn, "#,
        r#"ag.aggdeserialfn, ag.aggmtransfn, ag.aggminvtransfn, ag.aggmfinalfn) "#,
        r#"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        r#"GROUP BY n.nspname, p.proname "#,
        // A user function of LANGUAGE internal is a built-in's C code under another name and
        // label (`CREATE FUNCTION f() … STABLE LANGUAGE internal AS 'pg_is_in_recovery'`): judged
        // as the built-in whose code it runs.
        r#"UNION ALL "#,
        r#"SELECT n.nspname, f.proname, 'SELECT pg_catalog.' || pg_catalog.quote_ident(COALESCE(bp.proname, f.prosrc)) "#,
        r#"|| '(' || pg_catalog.array_to_string(pg_catalog.array_fill('NULL'::pg_catalog.text, "#,
        r#"ARRAY[f.pronargs::pg_catalog.int4]), ', ') || ')', 'f' "#,
        r#"FROM pg_catalog.pg_proc f JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace "#,
        r#"LEFT JOIN (SELECT DISTINCT ON (prosrc) prosrc, proname FROM pg_catalog.pg_proc "#,
        r#"WHERE prolang = 12 AND oid < 16384 ORDER BY prosrc, oid) AS bp ON bp.prosrc = f.prosrc "#,
        r#"WHERE f.prolang = 12 AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        // Code a statement runs for a relation or a type it names without naming the code: the
        // planner and executor call a range type's `subtype_diff` and `canonical`, the support
        // functions and operators of its `subtype_opclass`, a type's I/O functions and default
        // operator classes, the casts from and to it (an implicit one, `to_json`'s) — for a
        // relation, those of its columns' types and the types they hold (`tf`) — and a relation's
        // partition key and indexes (operator classes and expressions: partition pruning and
        // index scans run them), its CHECK constraints and its statistics objects' expressions
        // (the planner const-folds them: constraint exclusion, extended statistics), with those
        // of its descendants (a read of the parent plans them).
        // Reported under the relation's and the type's name (a built-in type's too), as a SELECT
        // calling each such user function (verified on PostgreSQL 15: a range's plpgsql
        // `subtype_diff` that called set_config() ran on a pooled reader for
        // `SELECT … WHERE r && '[1,5)'`, and a hash partition key's support function for
        // `WHERE k = 5`).
        r#"UNION ALL "#,
        r#"SELECT o.nsp, o.name, 'SELECT NULL' || pg_catalog.string_agg(DISTINCT ', ' || fc.call, ''), 'h' "#,
        r#"FROM (SELECT n.nspname, c.relname, rf.fid FROM rd JOIN rf ON rf.rel = rd.rel "#,
        r#"JOIN pg_catalog.pg_class c ON c.oid = rd.root JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "#,
        r#"WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        // A type, under its name.
        r#"UNION SELECT n.nspname, t.typname, tf.fid FROM tf JOIN pg_catalog.pg_type t ON t.oid = tf.typ "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace "#,
        // A user function, under its name: the code of its arguments' and result's types (OUT
        // and TABLE columns too, and the types they hold), which its call runs where the text
        // names no type — a user cast the server applies to an argument (`f(1)`, an implicit
        // cast from int to the parameter's type) or to what the body returns, the types' I/O
        // functions (verified on PostgreSQL 15: a plpgsql implicit cast from int to a user enum
        // answered the standby's value for `SELECT f(1)`).
        r#"UNION SELECT n.nspname, p.proname, tf.fid FROM pg_catalog.pg_proc p "#,
        r#"JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "#,
        r#"CROSS JOIN LATERAL pg_catalog.unnest(COALESCE(p.proallargtypes, p.proargtypes::pg_catalog.oid[]) "#,
        r#"|| p.prorettype) AS a(typ) JOIN tf ON tf.typ = a.typ "#,
        r#"WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "#,
        // A user cast between two built-in types that the server applies unasked (implicit or
        // in assignment: `tf`) runs where the text names neither type — `center(c) + 1` with
        // an implicit cast from point to int: under the name of every built-in function and
        // operator whose result (or OUT column) is a type that holds its source (`point`,
        // `box`, `point[]`, …), so that each of their calls is judged with it. (Its source named
        // is the `tf` row above; a relation with a column of it, `rf`.)
        r#"UNION SELECT 'pg_catalog', x.name, tf.fid FROM tf JOIN pg_catalog.pg_cast k ON k.castfunc = tf.fid "#,
        r#"AND k.castsource < 16384 AND k.casttarget < 16384 "#,
        r#"JOIN (SELECT bp.proname::pg_catalog.text, bp.prorettype FROM pg_catalog.pg_proc bp "#,
        r#"WHERE bp.pronamespace = 'pg_catalog'::pg_catalog.regnamespace "#,
        r#"UNION SELECT bp.proname::pg_catalog.text, r.typ FROM pg_catalog.pg_proc bp "#,
        r#"CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(bp.proallargtypes), pg_catalog.unnest(bp.proargmodes)) AS r(typ, mode) "#,
        r#"WHERE bp.pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND r.mode IN ('o', 'b', 't') "#,
        r#"UNION SELECT bo.oprname::pg_catalog.text, bo.oprresult FROM pg_catalog.pg_operator bo "#,
        r#"WHERE bo.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace) AS x(name, typ) ON x.typ = tf.typ "#,
        // … and when a statement makes a value of its source without naming anything — a
        // literal (`1`, `1.5`, `true`, `'x'` resolved to text), a keyword (`CURRENT_DATE`,
        // `CURRENT_USER`), an `ARRAY[…]` of them — under a name no statement spells, which the
        // engine applies to every statement of the database (`EVERY_STATEMENT`).
        r#"UNION SELECT 'pg_catalog', 'polarsplit: every statement', tf.fid FROM tf "#,
        r#"JOIN pg_catalog.pg_cast k ON k.castfunc = tf.fid AND k.castsource = tf.typ AND k.casttarget < 16384 "#,
        r#"JOIN pg_catalog.pg_type st ON st.oid = k.castsource WHERE 'pg_catalog.int4'::pg_catalog.regtype "#,
        r#"IN (st.oid, st.typelem) OR 'pg_catalog.int8'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.numeric'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.text'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.bool'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.name'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.date'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.time'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.timetz'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.timestamp'::pg_catalog.regtype IN (st.oid, st.typelem) "#,
        r#"OR 'pg_catalog.timestamptz'::pg_catalog.regtype IN (st.oid, st.typelem)"#,
        // An installed extension's C functions (`fx`) are taken at their labels, as when a
        // statement names them (the wrong labels known are reported volatile above): left out
        // here (`fc`, `tf`), so a column of citext, hstore or PostGIS's types keeps its reads on
        // pooled readers; a built-in type is linked to no extension's function (`fe`).
        r#") AS o(nsp, name, fid) JOIN fc ON fc.fid = o.fid "#,
        r#"GROUP BY o.nsp, o.name "#,
        // A foreign table's rows are wherever its wrapper reads them on the server that runs the
        // statement (file_fdw reads that server's files and runs programs there; postgres_fdw
        // holds one remote transaction per local one): server-dependent, and so is every
        // ancestor of one (a partitioned table or an inheritance parent scans it).
        r#"UNION ALL "#,
        r#"SELECT n.nspname, c.relname, 'SELECT pg_catalog.pg_is_in_recovery()', 'F' "#,
        r#"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "#,
        r#"WHERE c.oid IN (SELECT rd.root FROM rd JOIN pg_catalog.pg_class f ON f.oid = rd.rel WHERE f.relkind = 'f')"#,
        // An unlogged relation's rows are the primary's alone (a standby refuses to read one,
        // 0A000 — in a batch after other statements' rows, too late to run it elsewhere):
        // server-dependent as well, and every ancestor of one.
        r#"UNION ALL "#,
        r#"SELECT n.nspname, c.relname, 'SELECT pg_catalog.pg_is_in_recovery()', 'U' "#,
        r#"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "#,
        r#"WHERE c.oid IN (SELECT rd.root FROM rd JOIN pg_catalog.pg_class u ON u.oid = rd.rel "#,
        r#"WHERE u.relpersistence = 'u')"#,
        r#") AS objects"#,
        )
    };
}

/// The catalogue query: one simple `Query` message's text, which returns four results before
/// its `ReadyForQuery`, told apart by their column counts:
/// 1. one column: the writer's `server_version_num` (it picks the table of built-ins,
///    [`crate::Engine`]'s classifier);
/// 2. three columns: every user function — outside `pg_catalog` and `information_schema`, plus
///    extension functions installed into `pg_catalog` — one row per overload: schema, name,
///    volatility (`i`, `s`, `v`; a user aggregate has its support functions' worst; `v` for
///    extension functions known to be labelled wrong: tablefunc's `crosstab*` and `connectby`,
///    xml2's `xpath_table`, isn's `isn_weak`), for `polarsplit_engine_set_function_catalog`;
/// 3. two columns: every sequence (schema, name), for `polarsplit_engine_set_sequence_catalog`;
/// 4. four columns: every object whose use runs code the statement's text does not show —
///    schema, name, a definition the engine judges as a statement, and a kind (`v` view, `p` a
///    table's row-level security policies, `d` domain, `c` user cast, `o` user operator, `f`
///    user function's body or SET clause, `h` the user code behind a relation, a type or a
///    function — a user function's arguments' and result's types', a built-in function's or
///    operator's whose result holds the source of a user cast between two built-in types the
///    server applies unasked —, `F` a foreign table
///    or an ancestor of one, `U` an unlogged relation or an ancestor of one)
///    — for `polarsplit_engine_set_object_catalog`.
///
/// It starts with `SET LOCAL lock_timeout = '100ms'` (the Query is one implicit transaction):
/// `pg_get_viewdef` locks each view and what it reads until the Query ends, so against a
/// client's DDL that takes them in another order the load fails in 100 ms — well under the
/// default `deadlock_timeout` — rather than have PostgreSQL cancel the client's statement; then
/// `SET LOCAL jit = off` (the fourth result's closures over type containment and inheritance
/// would otherwise be compiled for seconds).
pub const CATALOG_QUERY: &str = catalog_query_text!();

/// [`CATALOG_QUERY`] with its terminating NUL, for C.
pub(crate) const CATALOG_QUERY_NUL: &str = concat!(catalog_query_text!(), "\0");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f_policy_the_catalogue_query_is_one_nul_terminated_c_string() {
        assert_eq!(CATALOG_QUERY_NUL.len(), CATALOG_QUERY.len() + 1);
        assert_eq!(CATALOG_QUERY_NUL.find('\0'), Some(CATALOG_QUERY.len()));
        assert!(CATALOG_QUERY.starts_with("SET LOCAL lock_timeout = '100ms';"));
        assert!(CATALOG_QUERY.contains(";SET LOCAL jit = off;SELECT "));
        // Four results after the SETs: the version, functions, sequences, objects.
        assert_eq!(CATALOG_QUERY.matches(";SELECT ").count(), 4);
    }

    /// F-policy, S-7: a non-SQL body the scan cannot read (a `U&` name, `UESCAPE`, what the
    /// comment stripping cannot follow) is reported with a definition the engine never judges
    /// read-safe, so calls of the function run on the primary.
    #[test]
    fn s7_a_body_the_scan_cannot_read_is_never_judged_safe() {
        let unreadable = "'polarsplit: the function body cannot be read'";
        assert_eq!(CATALOG_QUERY.matches(unreadable).count(), 1);
        assert!(CATALOG_QUERY.contains("WHEN b.unreadable THEN "));
        let c = crate::classify::classify(
            unreadable.trim_matches('\''),
            &crate::classify::WriteFunctions::defaults(),
        );
        assert!(!c.is_replica_safe(), "{c:?}");
        // The scan's text has a plpgsql body's comments taken out, strings and quoted names
        // taken whole first.
        assert!(CATALOG_QUERY.contains(r#"/\*([^*]|\*+[^*/])*\*+/|--[^\n]*', '\1 ', 'g')"#));
    }

    /// S-7, S-6: every name class of the body scan takes non-ASCII characters (PostgreSQL takes
    /// any byte >= 0x80 as a letter of an unquoted name; `[[:alpha:]]` is ASCII-only in a
    /// C-locale database), and names are folded in ASCII only, as the server folds them.
    #[test]
    fn s7_the_body_scan_reads_non_ascii_names() {
        assert!(!CATALOG_QUERY.contains("[[:alpha:]_][[:alnum:]_"));
        assert!(!CATALOG_QUERY.contains("pg_catalog.lower("));
        // Calls and words in both branches, the dollar-quote tag.
        assert_eq!(CATALOG_QUERY.matches(name_word!()).count(), 5);
        assert!(CATALOG_QUERY.contains(r#"[^"[:lower:][:digit:]_$\u0080-\U0010ffff]"#));
    }

    /// P-1, S-6: a body that opens, fetches from, moves or closes a cursor leaves a portal in
    /// the session that ran it: never a read a reader may run.
    #[test]
    fn p1_a_body_with_a_cursor_command_may_write() {
        assert!(CATALOG_QUERY.contains(
            "|open|fetch|move|close)\\M' THEN 'polarsplit: the function body may write'"
        ));
    }

    /// S-6: a SQL-standard body is scanned from `pg_get_functiondef`'s text, and a volatile
    /// body's row is never dropped by a NULL; its operators and words (attribute notation) are
    /// read as the other branch's.
    #[test]
    fn s6_sql_standard_and_volatile_bodies_are_scanned_whole() {
        assert!(CATALOG_QUERY.contains("pg_catalog.pg_get_functiondef(p.oid)"));
        assert!(!CATALOG_QUERY.contains("'SELECT NULL' || (SELECT"));
        assert_eq!(CATALOG_QUERY.matches(uop_calls!()).count(), 2);
        assert_eq!(CATALOG_QUERY.matches(from_words!()).count(), 1);
        assert_eq!(CATALOG_QUERY.matches(from_words!(un)).count(), 1);
        assert!(!CATALOG_QUERY.contains("not judged"));
    }

    /// S-6, S-7: a user operator's row calls what the planner may run for it — its negator's
    /// and commutator's functions and their families' — and its own function with as many
    /// arguments as it takes (red12-q).
    #[test]
    fn s6_s7_an_operators_row_calls_its_negator_and_commutator_with_their_arities() {
        assert!(CATALOG_QUERY.contains("WHERE no.oid IN (o.oprnegate, o.oprcom)), '')"));
        assert!(CATALOG_QUERY
            .contains("JOIN pg_catalog.pg_operator no ON no.oid IN (o.oprnegate, o.oprcom)"));
        assert_eq!(
            CATALOG_QUERY
                .matches("am.amopopr IN (o.oid, o.oprnegate, o.oprcom)")
                .count(),
            2
        );
        assert!(!CATALOG_QUERY.contains("'(NULL, NULL)'"));
    }

    /// S-6: a procedural body's date/time literal of the transaction's start is the session's
    /// first call's (plpgsql keeps its plans): never a reader's.
    #[test]
    fn s6_a_procedural_bodys_clock_literal_is_server_dependent() {
        assert!(CATALOG_QUERY.contains("THEN ', pg_catalog.pg_backend_pid()'"));
        let c = crate::classify::classify(
            "SELECT NULL, pg_catalog.pg_backend_pid()",
            &crate::classify::WriteFunctions::defaults(),
        );
        assert!(!c.is_replica_safe(), "{c:?}");
    }

    /// P-1, S-5: a function's SET clause is read: never replica-safe, and a placeholder's is a
    /// session-state change.
    #[test]
    fn p1_s5_a_functions_set_clause_is_reported() {
        assert!(CATALOG_QUERY.contains("WHERE p.proconfig IS NOT NULL"));
        // Only a transaction's settings and placeholders: `SET search_path` is restored.
        assert!(CATALOG_QUERY.contains("~* '^(default_)?transaction_'"));
        // `seed` is applied by reseeding, never undone: a call of `setseed`.
        assert!(CATALOG_QUERY.contains("~* '^seed$'"));
        for text in [
            "polarsplit: the function has a SET clause",
            "SELECT pg_catalog.set_config(NULL, NULL, NULL)",
            "SELECT pg_catalog.setseed(NULL)",
        ] {
            let c = crate::classify::classify(text, &crate::classify::WriteFunctions::defaults());
            assert!(!c.is_replica_safe(), "{text}: {c:?}");
        }
    }

    /// S-6, S-7: a relation is linked to the functions (and user operators' functions) of its
    /// CHECK constraints and its statistics objects' expressions, which the planner const-folds
    /// for a read (constraint exclusion, extended statistics) — only IMMUTABLE ones and SQL
    /// ones (inlined): a VOLATILE plpgsql CHECK function keeps the table's reads offloaded.
    #[test]
    fn s7_check_constraints_and_statistics_expressions_are_linked_to_their_relation() {
        assert!(CATALOG_QUERY.contains(
            "WHERE d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND k.contype = 'c'"
        ));
        assert!(CATALOG_QUERY
            .contains("WHERE d.classid = 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass "));
        assert!(CATALOG_QUERY.contains("THEN x.refobjid ELSE om.fid END"));
        assert!(CATALOG_QUERY.contains("(f.provolatile = 'i' OR f.prolang = 14)"));
    }

    /// S-7: the planner's predicate prover runs a test operator of the btree family a clause's
    /// operator and a CHECK's or a partial index's predicate's share, which no text names: an
    /// operator a relation's CHECK, statistics expression or index predicate uses links the
    /// relation to its btree families' operators' functions (`om`), and a user operator's own
    /// row calls them too.
    #[test]
    fn s7_an_operators_btree_family_members_are_linked() {
        let btree = "amopmethod = (SELECT a.oid FROM pg_catalog.pg_am a WHERE a.amname = 'btree')";
        assert_eq!(CATALOG_QUERY.matches(btree).count(), 2);
        assert!(CATALOG_QUERY.contains(
            "AND d.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass) AS x(rel, refclassid, refobjid)"
        ));
        assert!(CATALOG_QUERY.contains("LEFT JOIN om ON x.refclassid"));
    }

    /// S-7, S-5: a user function is linked to the code of its arguments' and result's types,
    /// and a user cast between two built-in types to the built-ins whose result holds its source.
    #[test]
    fn s7_code_behind_a_functions_types_and_a_built_in_cast_is_reported() {
        assert!(CATALOG_QUERY.contains("|| p.prorettype) AS a(typ) JOIN tf ON tf.typ = a.typ"));
        assert!(CATALOG_QUERY.contains("AND k.castsource < 16384 AND k.casttarget < 16384"));
        assert!(CATALOG_QUERY.contains(&format!(
            "'{}'",
            crate::classify::functions::EVERY_STATEMENT
        )));
    }
}
