#!/usr/bin/env python3
"""Generates the classifier's table of PostgreSQL built-in functions from a real server (SPEC §7 F-policy).

    python3 scripts/gen-builtins.py                 # throwaway server from $PG_BIN (default PostgreSQL 15)
    python3 scripts/gen-builtins.py --check         # exit 1 when the committed table differs from the server
    python3 scripts/gen-builtins.py --dsn "host=127.0.0.1 port=5432 user=postgres dbname=postgres" [--check]

It reads `pg_proc` (schemas pg_catalog and information_schema, functions owned by an extension left
out: they are not in every database), `pg_get_keywords()` and `pg_settings`, and writes
`src/classify/builtins/pg<major>.rs`: every built-in function name with the volatilities of its
overloads and its kinds, every keyword with its category, and the settings a session has of its
own (context `user` or `superuser`: `current_setting` of any other is the server's, S-7). A minor
release may add a setting: `--check` fails only when a listed session setting is one the server
keeps to itself (a new one missing from the list only keeps its reads on the primary; a listed one
an older minor release does not have at all fails alike on every server). The reviewed lists (read-safe
volatile built-ins, never-safe built-ins, S-7's server-dependent functions and relations) are not
generated: they live, short and commented, in `src/classify/builtins/mod.rs`.

Without `--dsn` the script starts its own server: `initdb` into a temporary directory and `pg_ctl`
start on a free loopback port, as the dedicated system user of scripts/lib/pgpair.py when run as
root (PostgreSQL refuses root), and always stops it. The output is deterministic (sorted, no
timestamps), so `--check` compares bytes. See scripts/gen-builtins.md for adding a major version.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))

import pgpair  # noqa: E402

FUNCTIONS_SQL = """
SELECT p.proname, n.nspname, p.provolatile, p.prokind, p.pronargs, p.pronargdefaults,
       p.provariadic <> 0
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname IN ('pg_catalog', 'information_schema')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                  WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                    AND d.objid = p.oid AND d.deptype = 'e')
"""
KEYWORDS_SQL = "SELECT word, catcode FROM pg_catalog.pg_get_keywords()"
# S-7: the settings a session has of its own (a reader replays the session's, S-5); every other
# setting is the server's (its port, data directory, connection to the primary, …).
SETTINGS_SQL = "SELECT name FROM pg_catalog.pg_settings WHERE context IN ('user', 'superuser')"
ALL_SETTINGS_SQL = "SELECT name FROM pg_catalog.pg_settings"
SETTINGS_START = "    session_settings: &["
VERSION_SQL = "SELECT current_setting('server_version_num'), current_setting('server_version')"

FROM_LINE = "//! from PostgreSQL "
NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")
VOLATILITY = {"i": "IMM", "s": "STA", "v": "VOL"}
KIND = {"f": None, "a": "AGG", "w": "WIN", "p": "PROC"}
KEYWORD = {"U": "UNRESERVED", "C": "COL_NAME", "T": "TYPE_FUNC_NAME", "R": "RESERVED"}


def psql(dsn: str, sql: str) -> list[list[str]]:
    out = subprocess.run(
        ["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql],
        check=True, capture_output=True, text=True,
    ).stdout
    return [line.split("\t") for line in out.splitlines() if line]


@contextlib.contextmanager
def throwaway_server(pg_bin: Path):
    """A one-off server on a free loopback port, stopped and removed whatever happens."""
    pgpair.PG_BIN = pg_bin  # pgpair.Server runs pg_ctl from here
    pgpair.ensure_pg_user()
    base = Path(tempfile.mkdtemp(prefix="polarsplit-pg-builtins-"))
    os.chmod(base, 0o755)
    if os.geteuid() == 0:
        shutil.chown(base, pgpair.PG_USER, pgpair.PG_USER)
    data = base / "data"
    server = pgpair.Server("builtins", data, pgpair.free_port(), base / "server.log")
    try:
        subprocess.run(
            pgpair._as_pg_user([str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                "-E", "UTF8", "--locale=C", "--no-sync"]),
            cwd="/", check=True, capture_output=True, text=True,
        )
        with open(data / "postgresql.conf", "a") as f:
            f.write(f"\nport = {server.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{base}'\nfsync = off\n")
        server.start()
        yield server.dsn()
    finally:
        try:
            server.stop("immediate")
        finally:
            shutil.rmtree(base, ignore_errors=True)


# An arity at or above this is written as ANY_ARITY (a variadic overload's open end; PostgreSQL's
# FUNC_MAX_ARGS is 100).
ANY_ARITY = 255


def arity_runs(rows: list[list[str]]) -> dict[str, list[tuple[int, int, set[str]]]]:
    """For each name whose overloads are all plain functions and accept more than one number of
    arguments: the runs of argument counts `(lo, hi, volatilities)` over which the overloads a
    call may resolve to have the same volatilities (`hi` = ANY_ARITY: no upper bound). An
    overload takes `pronargs - pronargdefaults` to `pronargs` arguments, a variadic one any
    number from that lower bound on (PostgreSQL expands the variadic array). Counts no overload
    takes are left out. Aggregates and window functions are judged by name only: their
    parentheses hold more than arguments (`*`, `ORDER BY …`, and direct arguments before
    `WITHIN GROUP`)."""
    by_name: dict[str, list[tuple[int, int, str]]] = {}
    plain: dict[str, bool] = {}
    for proname, _nsp, volatility, kind, nargs, ndefaults, variadic in rows:
        lo, hi = int(nargs) - int(ndefaults), int(nargs)
        if variadic == "t":
            hi = ANY_ARITY
        by_name.setdefault(proname, []).append((lo, min(hi, ANY_ARITY), VOLATILITY[volatility]))
        plain[proname] = plain.get(proname, True) and kind == "f"
    out = {}
    for name in sorted(by_name, key=lambda n: n.encode()):
        overloads = by_name[name]
        if not plain[name] or len({(lo, hi) for lo, hi, _ in overloads}) == 1:
            continue
        points = sorted({lo for lo, _, _ in overloads} | {hi + 1 for _, hi, _ in overloads if hi < ANY_ARITY})
        runs: list[tuple[int, int, set[str]]] = []
        for i, start in enumerate(points):
            end = points[i + 1] - 1 if i + 1 < len(points) else ANY_ARITY
            flags = {v for lo, hi, v in overloads if lo <= start and end <= hi}
            if not flags:
                continue
            if runs and runs[-1][1] == start - 1 and runs[-1][2] == flags:
                runs[-1] = (runs[-1][0], end, flags)
            else:
                runs.append((start, end, flags))
        out[name] = runs
    return out


def render(dsn: str) -> tuple[int, str]:
    """The generated Rust source for the server at `dsn`, and its major version."""
    (version_num, version), = psql(dsn, VERSION_SQL)
    major = int(version_num) // 10000
    rows = psql(dsn, FUNCTIONS_SQL)
    names: dict[str, set[str]] = {}
    for proname, nspname, volatility, kind, *_ in rows:
        if not NAME_RE.match(proname):
            raise SystemExit(f"unexpected built-in function name {proname!r}: extend the generator")
        flags = names.setdefault(proname, set())
        flags.add(VOLATILITY[volatility])
        if KIND[kind]:
            flags.add(KIND[kind])
        if nspname == "information_schema":
            flags.add("INFO_SCHEMA")
    keywords = sorted((w, KEYWORD[c]) for w, c in psql(dsn, KEYWORDS_SQL))
    order = ["IMM", "STA", "VOL", "AGG", "WIN", "PROC", "INFO_SCHEMA"]
    lines = [
        f"//! PostgreSQL {major} built-in functions and keywords. **Generated** by `scripts/gen-builtins.py`",
        f"{FROM_LINE}{version} (server_version_num {version_num}): do not edit; regenerate.",
        f"//! {len(rows)} `pg_proc` rows in pg_catalog and information_schema (extension members left",
        f"//! out) under {len(names)} names; {len(keywords)} keywords from `pg_get_keywords()`.",
        "",
        "use super::flags::*;",
        "use super::BuiltinTable;",
        "",
        "#[rustfmt::skip]",
        f"pub(super) static TABLE: BuiltinTable = BuiltinTable {{",
        f"    major: {major},",
        "    memo: std::sync::OnceLock::new(),",
        f"    rows: {len(rows)},",
        "    functions: &[",
    ]
    for name in sorted(names, key=lambda n: n.encode()):
        flags = " | ".join(f for f in order if f in names[name])
        lines.append(f"        (\"{name}\", {flags}),")
    lines += ["    ],", "    arities: &["]
    for name, runs in arity_runs(rows).items():
        spans = ", ".join(f"({lo}, {hi}, {' | '.join(f for f in order if f in flags)})" for lo, hi, flags in runs)
        lines.append(f"        (\"{name}\", &[{spans}]),")
    lines += ["    ],", "    keywords: &["]
    for word, cat in sorted(keywords, key=lambda k: k[0].encode()):
        if not NAME_RE.match(word):
            raise SystemExit(f"unexpected keyword {word!r}")
        lines.append(f"        (\"{word}\", {cat}),")
    lines += ["    ],", SETTINGS_START]
    for (name,) in sorted(psql(dsn, SETTINGS_SQL), key=lambda r: r[0].encode()):
        if not NAME_RE.match(name):
            raise SystemExit(f"unexpected setting name {name!r}")
        lines.append(f"        \"{name}\",")
    lines += ["    ],", "};", ""]
    return major, "\n".join(lines)


FUNCTION_RE = re.compile(r'^        \("([A-Za-z0-9_]+)", ([A-Z_ |]+)\),$')
COUNT_RES = (re.compile(r"^//! \d+ `pg_proc` rows"), re.compile(r"^    rows: \d+,$"),
             re.compile(r"^//! out\) under \d+ names; "))


def parts(text: str) -> tuple[list[str], dict[str, str], set[str]]:
    """What `--check` compares: the lines compared exactly (all but the line naming the exact
    release, the row counts, the functions and the session settings), the functions by name,
    and the session settings."""
    lines, functions, settings, inside = [], {}, set(), False
    for line in text.splitlines():
        if line == SETTINGS_START:
            inside = True
        elif inside and line.strip() == "],":
            inside = False
        elif inside:
            settings.add(line.strip().strip(",").strip('"'))
            continue
        m = FUNCTION_RE.match(line)
        if m:
            functions[m.group(1)] = m.group(2)
        elif not line.startswith(FROM_LINE) and not any(r.match(line) for r in COUNT_RES):
            lines.append(line)
    return lines, functions, settings


def differences(old: str, new: str, server_settings: set[str] | None = None) -> tuple[list[str], list[str]]:
    """Why `old` is stale for the server `new` was rendered from, and the differences a minor
    release may make that change no verdict: a plain volatile function present on one side only
    (PostgreSQL 15.20 added `binary_upgrade_set_next_attribute_versions`) — unknown or volatile,
    a call of it is not read-safe either way —, a session setting of the server missing from
    the table (its reads stay on the primary), and a listed session setting that the server
    (an older minor release: 15.20 added two) does not have at all, given `server_settings`
    (`SET` and `current_setting()` of it fail on every server of that release alike)."""
    (ol, of, os_), (nl, nf, ns) = parts(old), parts(new)
    stale, notes = [], []
    if ol != nl:
        gone, added = sorted(set(ol) - set(nl))[:20], sorted(set(nl) - set(ol))[:20]
        stale += [f"- {x.strip()}" for x in gone] + [f"+ {x.strip()}" for x in added]
    for name in sorted(set(of) | set(nf)):
        a, b = of.get(name), nf.get(name)
        if a == b:
            continue
        if a is None and b == "VOL":
            notes.append(f"function {name} (volatile) is not in the table: its calls stay on the primary")
        elif b is None and a == "VOL":
            notes.append(f"function {name} (volatile) is not on this server")
        else:
            stale.append(f"function {name}: table {a}, server {b}")
    for name in sorted(os_ - ns):
        if server_settings is not None and name not in server_settings:
            notes.append(f"session setting {name} is not on this server (an older release): no verdict changes")
            continue
        stale.append(f"setting {name} is listed as a session's, the server does not give it to sessions")
    for name in sorted(ns - os_):
        notes.append(f"session setting {name} is not in the table: its reads stay on the primary")
    return stale, notes


def shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", help="libpq connection string of a running server (default: start a throwaway one)")
    ap.add_argument("--pg-bin", default=os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"),
                    help="server binaries for the throwaway server (default $PG_BIN or PostgreSQL 15)")
    ap.add_argument("--out", help="output file (default src/classify/builtins/pg<major>.rs)")
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args()

    with contextlib.ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(throwaway_server(Path(args.pg_bin)))
        major, text = render(dsn)
        server_settings = {name for (name,) in psql(dsn, ALL_SETTINGS_SQL)} if args.check else None
    out = Path(args.out) if args.out else ROOT / "src" / "classify" / "builtins" / f"pg{major}.rs"
    if args.check:
        old = out.read_text() if out.exists() else ""
        stale, notes = differences(old, text, server_settings)
        for n in notes:
            print(f"note: {n}")
        if stale:
            print(f"{shown(out)} is stale for this server: regenerate with scripts/gen-builtins.py",
                  file=sys.stderr)
            for line in stale[:40]:
                print(f"  {line}", file=sys.stderr)
            return 1
        print(f"{shown(out)} is fresh ({text.count(chr(10))} lines)")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {shown(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
