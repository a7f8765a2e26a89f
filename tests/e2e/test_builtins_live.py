"""SPEC §7 F-policy and S-7 against the live server: for every built-in function in the real
primary's pg_proc (pg_catalog and information_schema, extension members left out — thousands of
rows, not a sample), the engine's verdict on a call of it, in every spelling, agrees with the
function's volatility, the reviewed lists and S-7's server-dependent list; the committed table is
fresh for this server (and the freshness check fails on a stale one); the reviewed read-safe
volatile built-ins really run on the hot standby.

The verdicts come from the engine itself: `examples/classify.rs` (built here) reads SQL lines and
prints `replica|primary <TAB> REASON <TAB> effects`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from e2e_support import ROOT

# Debug profile: `cargo test` (scripts/test.sh) has built it and its dev-dependencies already.
EXAMPLE = ROOT / "target" / "debug" / "examples" / "classify"

FUNCTIONS_SQL = """
SELECT p.proname, n.nspname, p.provolatile
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname IN ('pg_catalog', 'information_schema')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                    AND d.objid = p.oid AND d.deptype = 'e')
"""

# Named by SPEC §7 and the issues: never read-safe, whatever pg_proc says.
SPEC_NEVER_SAFE = [
    "nextval", "setval", "set_config", "pg_advisory_lock", "pg_advisory_xact_lock", "pg_try_advisory_lock",
    "pg_notify", "lo_create", "lo_import", "lo_unlink", "txid_current", "pg_current_xact_id",
    "brin_summarize_new_values", "brin_summarize_range", "brin_desummarize_range", "gin_clean_pending_list",
    "pg_promote", "pg_wal_replay_pause", "pg_wal_replay_resume", "pg_terminate_backend", "pg_cancel_backend",
    "pg_reload_conf", "pg_stat_reset", "pg_stat_reset_shared", "pg_stat_reset_single_table_counters",
    "pg_switch_wal", "pg_create_physical_replication_slot", "pg_create_logical_replication_slot",
    "pg_export_snapshot", "pg_log_backend_memory_contexts",
]
# Named by S-7: their answer depends on the server.
SPEC_SERVER_DEPENDENT = [
    "pg_is_in_recovery", "pg_current_wal_lsn", "pg_current_wal_insert_lsn", "pg_current_wal_flush_lsn",
    "pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn", "pg_last_xact_replay_timestamp", "pg_backend_pid",
    "pg_postmaster_start_time", "pg_conf_load_time", "pg_current_snapshot", "txid_current_snapshot",
    "pg_control_checkpoint", "pg_control_system", "pg_control_init", "pg_control_recovery", "pg_read_file",
    "pg_read_binary_file", "pg_ls_dir", "pg_ls_waldir", "pg_stat_get_numscans", "pg_stat_get_activity",
]
SPEC_SERVER_DEPENDENT_PREFIXES = ["pg_stat_get_", "pg_control_", "pg_ls_", "pg_current_wal_", "pg_last_wal_"]
SPEC_SERVER_DEPENDENT_RELATIONS = [
    "pg_stat_activity", "pg_stat_replication", "pg_stat_wal_receiver", "pg_replication_slots",
    "pg_prepared_xacts", "pg_locks", "pg_settings", "pg_stat_user_tables", "pg_statio_user_tables",
]
KEYWORDS_NOT_CALLABLE = {"R", "C"}  # reserved and column-name keywords need quotes or a schema


@pytest.fixture(scope="module")
def classify_bin():
    subprocess.run(["cargo", "build", "--quiet", "--example", "classify"], cwd=ROOT, check=True)
    assert EXAMPLE.exists()
    return EXAMPLE


def run(binary: Path, lines: list[str], *args: str) -> list[tuple[str, str, str]]:
    for line in lines:
        assert "\n" not in line
    out = subprocess.run([str(binary), *args], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True, timeout=120).stdout
    rows = [tuple(line.split("\t")) for line in out.splitlines()]
    assert len(rows) == len(lines)
    return rows  # type: ignore[return-value]


def engine_lists(binary: Path) -> dict:
    out = subprocess.run([str(binary), "--lists"], capture_output=True, text=True, check=True).stdout
    lists: dict = {"builtin": {}, "keyword": {}}
    for line in out.splitlines():
        kind, *rest = line.split("\t")
        if kind == "builtin":
            lists["builtin"][rest[0]] = set(rest[1])
        elif kind == "keyword":
            lists["keyword"][rest[0]] = int(rest[1])
        elif kind == "table":
            lists["table"] = rest
        else:
            lists.setdefault(kind, []).append(rest[0])
    return lists


def matches(patterns: list[str], name: str) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else p == name for p in patterns)


def unicode(name: str, esc: str = "\\") -> str:
    body = "".join(f"{esc}{ord(c):04X}" for c in name)
    return f'U&"{body}"' + (f" UESCAPE '{esc}'" if esc != "\\" else "")


@pytest.fixture(scope="module")
def live(pair):
    with psycopg.connect(pair.primary.dsn(dbname="postgres"), autocommit=True) as c:
        rows = c.execute(FUNCTIONS_SQL).fetchall()
        keywords = dict(c.execute("SELECT word, catcode FROM pg_get_keywords()").fetchall())
        views = [r[0] for r in c.execute("SELECT viewname FROM pg_views WHERE schemaname = 'pg_catalog'")]
    functions: dict[str, dict] = {}
    for name, schema, vol in rows:
        f = functions.setdefault(name, {"vol": set(), "schema": schema})
        f["vol"].add(vol)
    return {"rows": rows, "functions": functions, "keywords": keywords, "views": views}


def test_f_policy_table_is_fresh_for_the_live_server(pair, live, classify_bin, tmp_path):
    assert len(live["rows"]) > 3000, "pg_proc of the live server looks truncated"
    lists = engine_lists(classify_bin)
    table = {n: v for n, v in lists["builtin"].items()}
    want = {n: f["vol"] for n, f in live["functions"].items()}
    # A minor release may add a plain volatile function (15.20 added one for binary upgrades):
    # unknown or volatile, its calls are not read-safe either way, so only that may differ.
    missing = sorted(n for n in set(want) - set(table) if want[n] != {"v"})
    extra = sorted(n for n in set(table) - set(want) if table[n] != {"v"})
    differ = sorted(n for n in set(want) & set(table) if want[n] != table[n])
    assert not missing and not extra and not differ, (missing[:10], extra[:10], differ[:10])
    tolerated = (set(want) ^ set(table))
    if not tolerated:
        assert int(lists["table"][1]) == len(live["rows"])
    kw = {w: "_UCTR"[c] for w, c in lists["keyword"].items()}
    assert kw == live["keywords"]
    # The generator agrees, byte for byte, with the committed file ...
    dsn = pair.primary.dsn(dbname="postgres")
    gen = [sys.executable, str(ROOT / "scripts" / "gen-builtins.py"), "--dsn", dsn, "--check"]
    ok = subprocess.run(gen, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # ... and says so when a table is stale (negative control).
    committed = ROOT / "src" / "classify" / "builtins" / "pg15.rs"
    stale = tmp_path / "pg15.rs"
    stale.write_text(committed.read_text().replace('("lower", IMM)', '("lower", VOL)', 1))
    bad = subprocess.run(gen + ["--out", str(stale)], capture_output=True, text=True)
    assert bad.returncode == 1 and "is stale" in bad.stderr and "lower" in bad.stderr, bad.stderr
    # S-7: a setting the server keeps to itself listed as a session's is stale too.
    stale.write_text(committed.read_text().replace('        "work_mem",\n', '        "port",\n        "work_mem",\n', 1))
    bad = subprocess.run(gen + ["--out", str(stale)], capture_output=True, text=True)
    assert bad.returncode == 1 and "setting port" in bad.stderr, bad.stderr
    # A listed session setting this server does not have at all (a newer minor release's, as
    # 15.20's composite_type_mismatch on a 15.18 server) fails on every server alike: tolerated.
    stale.write_text(committed.read_text().replace('        "work_mem",\n',
                                                   '        "work_mem",\n        "zz_not_a_setting",\n', 1))
    ok = subprocess.run(gen + ["--out", str(stale)], capture_output=True, text=True)
    assert ok.returncode == 0 and "zz_not_a_setting is not on this server" in ok.stdout, (ok.stdout, ok.stderr)


def by_arity(lists: dict) -> dict[str, set[int]]:
    """S-7's `name/N` entries: the overloads of `name` that take N arguments."""
    out: dict[str, set[int]] = {}
    for e in lists["server_dependent"]:
        if "/" in e:
            name, n = e.split("/")
            out.setdefault(name, set()).add(int(n))
    return out


def expected(name: str, vol: set[str], lists: dict, args: int = 1) -> str:
    """The verdict on a call of `name` with `args` arguments (a one-argument call, as below, of a
    name whose overloads differ by arity, and no overload of it volatile)."""
    if matches(lists["never_safe"], name) or name in SPEC_NEVER_SAFE or name in lists["runs_sql_text"]:
        return "WRITE_FUNCTION"
    if (matches(lists["server_dependent"], name) or name in SPEC_SERVER_DEPENDENT
            or any(name.startswith(p) for p in SPEC_SERVER_DEPENDENT_PREFIXES)
            or args in by_arity(lists).get(name, set())):
        return "SERVER_DEPENDENT"
    if name == "current_setting":  # of a name that is not a plain literal (here: a number)
        return "SERVER_DEPENDENT"
    if "v" in vol and name not in lists["read_safe_volatile"]:
        return "VOLATILE_FUNCTION"
    return "NONE"


def test_f_policy_every_live_builtin_in_every_spelling(live, classify_bin):
    lists = engine_lists(classify_bin)
    for entry in lists["read_safe_volatile"]:
        assert "v" in live["functions"][entry]["vol"], f"{entry} is not volatile: a pointless list entry"
    lines, want = [], []
    for name, f in sorted(live["functions"].items()):
        exp = expected(name, f["vol"], lists)
        schema = f["schema"]
        forms = [f'"{name}"(1)', f'{schema}."{name}"(1)', f'"{schema}"."{name}" (1)', f"{unicode(name)}(1)",
                 f"{unicode(name, '!')} (1)", f"{schema}.{unicode(name, '~')}(1)"]
        if name == name.lower() and live["keywords"].get(name) not in KEYWORDS_NOT_CALLABLE:
            forms += [f"{name}(1)", f"{name.upper()}(1)"]
        if name == name.lower():
            forms.append(f"{schema.upper()}.{name.upper()} (1)")
        for form in forms:
            lines.append(f"SELECT {form}")
            want.append((name, exp))
    got = run(classify_bin, lines)
    wrong = []
    for sql, (name, exp), (place, reason, fx) in zip(lines, want, got):
        ok = reason == exp and (place == "replica") == (exp == "NONE") and (exp != "NONE" or fx == "-")
        if not ok:
            wrong.append(f"{sql}: want {exp}, got {place} {reason} {fx}")
    print(f"{len(live['functions'])} built-in names ({len(live['rows'])} pg_proc rows), {len(lines)} spellings")
    assert not wrong, f"{len(wrong)} wrong verdicts:\n" + "\n".join(wrong[:40])
    # Each verdict class is populated (the comparison above is not vacuous).
    reasons = {exp for _, exp in want}
    assert reasons == {"NONE", "WRITE_FUNCTION", "SERVER_DEPENDENT", "VOLATILE_FUNCTION"}, reasons


def test_s7_by_arity_entries_split_the_live_overloads(live, classify_bin, pair):
    """S-7's `name/N` entries (`age/1`: age(xid) counts from the answering server's next XID)
    name a count some live overload takes and another count one takes: a call with N arguments
    goes to the writer, with the other count to a reader (where no overload of it is volatile),
    and the reader really answers it."""
    lists = engine_lists(classify_bin)
    entries = by_arity(lists)
    assert entries.get("age") == {1}, entries
    with psycopg.connect(pair.primary.dsn(dbname="postgres"), autocommit=True) as c:
        counts = dict(c.execute(
            "SELECT proname, array_agg(DISTINCT pronargs) FROM pg_proc WHERE proname = ANY(%s) GROUP BY 1",
            (list(entries),)).fetchall())
    lines, want = [], []
    for name, ns in sorted(entries.items()):
        others = sorted(set(counts[name]) - ns)
        assert ns <= set(counts[name]) and others, (name, ns, counts[name])
        for n in sorted(ns) + others:
            lines.append(f"SELECT {name}({', '.join(['NULL'] * n)})")
            want.append(expected(name, live["functions"][name]["vol"], lists, n))
    got = run(classify_bin, lines)
    assert [g[1] for g in got] == want, list(zip(lines, got, want))
    assert "NONE" in want and "SERVER_DEPENDENT" in want
    with psycopg.connect(pair.standby.dsn(), autocommit=True) as c:
        for sql, w in zip(lines, want):
            if w == "NONE":
                c.execute(sql).fetchall()


def test_s7_server_dependent_relations_and_settings(live, classify_bin):
    lists = engine_lists(classify_bin)
    lines, want = [], []
    for view in sorted(live["views"]):
        sd = matches(lists["server_dependent_relation"], view) or view in SPEC_SERVER_DEPENDENT_RELATIONS
        for form in (f"SELECT * FROM {view}", f'SELECT count(*) FROM pg_catalog."{view}"',
                     f"SELECT 1 WHERE EXISTS (SELECT 1 FROM {unicode(view)})"):
            lines.append(form)
            # A qualified name may also be attribute notation (`x.f` calls `f(x)`): a view named
            # like a never-safe function says so first.
            qualified = "." in form
            never = qualified and matches(lists["never_safe"], view)
            want.append("WRITE_FUNCTION" if never else "SERVER_DEPENDENT" if sd else "NONE")
    for view in SPEC_SERVER_DEPENDENT_RELATIONS:
        assert view in live["views"], view
    with_settings = {
        "SELECT current_setting('transaction_read_only')": "SERVER_DEPENDENT",
        "SELECT current_setting('DEFAULT_TRANSACTION_READ_ONLY')": "SERVER_DEPENDENT",
        "SELECT current_setting('in_hot_standby', true)": "SERVER_DEPENDENT",
        "SELECT current_setting(name) FROM pg_class": "SERVER_DEPENDENT",
        "SELECT current_setting('work_mem')": "NONE",
        "SELECT age(datfrozenxid), mxid_age(datminmxid) FROM pg_database": "SERVER_DEPENDENT",
        "SELECT (datfrozenxid).age FROM pg_database": "SERVER_DEPENDENT",
        "SELECT age(now(), timestamp '2001-04-10')": "NONE",
        "SELECT inet_server_addr(), inet_server_port()": "NONE",
    }
    lines += list(with_settings)
    want += list(with_settings.values())
    got = run(classify_bin, lines)
    wrong = [f"{sql}: want {w}, got {g}" for sql, w, g in zip(lines, want, got) if g[1] != w]
    assert not wrong, "\n".join(wrong[:40])
    assert want.count("SERVER_DEPENDENT") >= 3 * len(SPEC_SERVER_DEPENDENT_RELATIONS)


def test_f_policy_reviewed_read_safe_builtins_run_on_the_standby(pair, classify_bin):
    """What the engine sends to a reader must run there: every statement below is judged
    replica-safe and the real hot standby answers it without error."""
    reads = [
        "SELECT random(), clock_timestamp(), timeofday(), gen_random_uuid()",
        "SELECT pg_sleep(0), pg_sleep_for('0 ms'), pg_sleep_until(now())",
        "SELECT count(*) FROM pg_partition_tree('pg_class')",
        "SELECT count(*) FROM pg_partition_ancestors('pg_class')",
        "SELECT count(*) >= 0 FROM pg_class TABLESAMPLE SYSTEM (50) REPEATABLE (1)",
        "SELECT count(*) >= 0 FROM pg_class TABLESAMPLE BERNOULLI (50)",
        "SELECT current_setting('work_mem'), inet_server_port()",
        "SELECT age(now(), timestamp '2001-04-10'), age(now(), now())",
    ]
    got = run(classify_bin, reads)
    assert all(g[0] == "replica" for g in got), list(zip(reads, got))
    with psycopg.connect(pair.standby.dsn(), autocommit=True) as c:
        assert c.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
        for sql in reads:
            c.execute(sql).fetchall()



# Reviewed: shared type-input built-ins whose input runs no code of the type's owner (an enum's
# labels are data).
TYPE_INPUT_NO_CODE = {"enum_in"}


def test_s6_s7_type_input_builtins_taking_a_type_oid_run_unseen_code(live, classify_bin, pair):
    """A type-input built-in that serves several types (every array, composite, domain, range)
    is told the type by an `oid` argument and runs that type's input code: for a domain (an array
    of one, a composite or range with one) the domain's CHECK, which may be any code, while the
    statement never names the type (red14-d, 2026-12-07: `array_in('{42}', 'd'::regtype, -1)`
    ran a CHECK's `set_config` on a pooled reader). Each such built-in the live server has is on
    the engine's list of code it cannot see into, or reviewed above."""
    with psycopg.connect(pair.primary.dsn(dbname="postgres"), autocommit=True) as c:
        names = sorted(r[0] for r in c.execute(
            "SELECT p.proname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_proc p ON p.oid = t.typinput"
            " WHERE p.pronargs >= 2 GROUP BY p.proname HAVING pg_catalog.count(*) > 1").fetchall())
    lists = engine_lists(classify_bin)
    assert {"array_in", "record_in", "domain_in", "range_in"} <= set(names), names
    missing = [n for n in names if n not in lists["runs_sql_text"] and n not in TYPE_INPUT_NO_CODE]
    assert not missing, f"type-input built-ins the engine judges as plain reads: {missing} (of {names})"
    got = run(classify_bin, [f"SELECT {n}('x', 'd'::regtype, -1)" for n in names if n not in TYPE_INPUT_NO_CODE])
    assert all(place == "primary" and fx == "unseen" for place, _, fx in got), got
