"""A differential tester of whole wire sessions (SPEC §10, E-1…E-5; P-8; S-4…S-7), kept from the
examiners' tool of 2026-12-05 that found the defects in `test_e1_refused_parts_of_split_batches.py`.

For every seed a seeded generator makes a random client session: packets of v3 protocol messages
(simple Queries of 1–3 statements; extended batches of Parse/Bind/Describe/Execute with row
limits/Close/Flush/Sync, in valid and slightly invalid orders; transaction control, SET, SET LOCAL,
set_config, SET ROLE, search_path, temporary tables, PREPARE/EXECUTE, cursors, LISTEN/NOTIFY,
errors inside blocks, sequences, advisory locks, and plain reads the engine may send to the
standby). The session runs on the primary alone and through the proxy, on the same fresh data
(reset, and replayed by the standby, before each run), and every message the client receives is
compared in order (backend keys, notifying pids, user OIDs and temporary schema names
normalised). A step through the proxy that does not deliver what the primary delivered within
`answer_s` is a hang; a writer backend left 3 s after the client's Terminate, a linger.

`tests/e2e/test_e_wire_sessions_differential.py` runs it on the shared pair.
"""
from __future__ import annotations

import json
import os
import random
import re
import struct
import sys
import time
from collections import Counter
import tempfile

import psycopg

LOG_DIR = os.environ.get("WIRE_DIFFTEST_LOG_DIR", tempfile.gettempdir())

# ---------------------------------------------------------------- wire helpers

from test_red2_findings import FLUSH as M_FLUSH  # noqa: E402
from test_red2_findings import SYNC as M_SYNC  # noqa: E402
from test_red2_findings import RawConn as Conn  # noqa: E402
from test_red2_findings import _msg, _z  # noqa: E402
from test_red2_findings import bind as m_bind  # noqa: E402
from test_red2_findings import describe as m_describe  # noqa: E402
from test_red2_findings import execute as m_execute  # noqa: E402
from test_red2_findings import parse as m_parse  # noqa: E402
from test_red2_findings import query as m_query  # noqa: E402


def m_close(kind, name=""):
    return _msg(b"C", kind + _z(name))


def encode_step(step):
    """step = {"msgs": [("Q", sql) | ("P", name, sql) | ("B", portal, stmt, params) | ("E", portal, n)
                        | ("D", kind, name) | ("C", kind, name) | ("S",) | ("H",)
                        | ("d", copy data) | ("c",) | ("f", CopyFail message)], "sleep": s}"""
    out = []
    for m in step["msgs"]:
        k = m[0]
        if k == "Q": out.append(m_query(m[1]))
        elif k == "P": out.append(m_parse(m[1], m[2]))
        elif k == "B": out.append(m_bind(m[1], m[2], tuple(m[3])))
        elif k == "E": out.append(m_execute(m[1], m[2]))
        elif k == "D": out.append(m_describe(m[1].encode(), m[2]))
        elif k == "C": out.append(m_close(m[1].encode(), m[2]))
        elif k == "S": out.append(M_SYNC)
        elif k == "H": out.append(M_FLUSH)
        elif k == "d": out.append(_msg(b"d", m[1].encode()))
        elif k == "c": out.append(_msg(b"c"))
        elif k == "f": out.append(_msg(b"f", _z(m[1])))
    return b"".join(out)


def expected_rfqs(step):
    return sum(1 for m in step["msgs"] if m[0] in ("Q", "S"))


def ends_open(step):
    """True when the step's last message leaves answers pending a Flush (no RFQ closes it)."""
    last = step["msgs"][-1][0] if step["msgs"] else None
    return last == "H"


# ---------------------------------------------------------------- normalisation

class Norm:
    def __init__(self):
        self.oids = {}

    def oid(self, o):
        if o < 16384:
            return o
        if o not in self.oids:
            self.oids[o] = f"U{len(self.oids)}"
        return self.oids[o]

    def __call__(self, t, body):
        if t == b"EOF":
            return ("EOF",)
        tc = t.decode()
        if tc == "K":
            return ("K",)
        if tc in ("E", "N"):
            fields = []
            for f in body.split(b"\0"):
                if f:
                    k = chr(f[0])
                    if k in ("F", "L", "R"):  # source file/line/routine: same server, keep out of noise
                        continue
                    fields.append((k, _txt(f[1:].decode(errors="replace"))))
            return (tc, tuple(fields))
        if tc == "A":
            rest = body[4:].split(b"\0")
            return ("A", rest[0].decode(), rest[1].decode())
        if tc == "T":
            n = struct.unpack(">H", body[:2])[0]
            p = 2
            cols = []
            for _ in range(n):
                e = body.index(b"\0", p)
                name = body[p:e].decode()
                p = e + 1
                tab, att, typ, tlen, tmod, fmt = struct.unpack(">IhIhih", body[p:p + 18])
                p += 18
                cols.append((name, self.oid(tab), att, self.oid(typ), tlen, tmod, fmt))
            return ("T", tuple(cols))
        if tc == "t":
            n = struct.unpack(">H", body[:2])[0]
            return ("t", tuple(self.oid(struct.unpack(">I", body[2 + 4 * i:6 + 4 * i])[0]) for i in range(n)))
        if tc == "D":
            n = struct.unpack(">H", body[:2])[0]
            p = 2
            vals = []
            for _ in range(n):
                ln = struct.unpack(">i", body[p:p + 4])[0]
                p += 4
                if ln < 0:
                    vals.append(None)
                else:
                    vals.append(_txt(body[p:p + ln].decode(errors="replace")))
                    p += ln
            return ("D", tuple(vals))
        if tc in ("C", "S", "d", "I"):
            return (tc, _txt(body.decode(errors="replace")))
        if tc == "Z":
            return ("Z", body.decode())
        return (tc, body.hex())


def _txt(s):
    return re.sub(r"pg_temp_\d+", "pg_temp_N", re.sub(r"pg_toast_temp_\d+", "pg_toast_temp_N", s))


# ---------------------------------------------------------------- generator

TZS = ["UTC", "America/New_York", "Asia/Kolkata", "'Europe/Paris'"]


# Statements that leave a session hazard (SPEC S-4), left out with avoid={"hazards"}.
HAZARD = re.compile(r"TEMP TABLE|tmp1|advisory_(?:xact_)?lock|advisory_unlock|LISTEN|PREPARE|EXECUTE|WITH HOLD")


def gen_session(seed, max_steps=18, avoid=(), read_weight=0.40, large=0.0, large_bytes=1100,
                long_names=False, resume=False, copy=0.0):
    """avoid: "prepstmts" (no reads of pg_prepared_statements: finding 2, which listed the engine's
    probe and capture until 2026-12-06; no caller avoids them now), "hazards" (none of the
    statements that keep a session's reads on the writer until cleared, S-4: temporary tables,
    advisory locks, LISTEN, SQL-level PREPARE, WITH HOLD cursors), "unsynced" (every batch
    ends in a Sync, so no Query follows a failed batch before its Sync: finding 1). large: the
    share of Queries, Parses and Binds (with a parameter) made `large_bytes` longer — a comment
    before the text, or the first parameter's value padded (which may make it fail: the same on
    both sides) — so that a proxy inspecting less than that streams them by count. long_names:
    every statement and portal name of the extended protocol is made 63 bytes long, and at each
    use a random suffix is added that the server ignores (it tells names apart by their first 63
    bytes): the same session to the server, different names to an engine that compares whole.
    resume: row-limited portals are run again in later steps (`resume_portals`). copy: the share of
    steps that are a COPY FROM STDIN (`copy_in_steps`)."""
    R = random.Random(seed)
    pad = "/*" + "p" * large_bytes + "*/ "
    st = {"named": [], "portals": [], "tmp": False, "cursors": [], "prepared": []}
    steps = []

    def r_id(): return R.randint(0, 9)
    def r_k(): return R.choice("abcdxyz")

    def read_sql():
        i = r_id()
        return R.choice([
            f"SELECT id, owner, bal FROM acct WHERE id = {i}",
            "SELECT * FROM acct ORDER BY id",
            "SELECT owner, n, total FROM acct_tot ORDER BY owner",
            f"SELECT count(*), sum(amt) FROM ev WHERE acct = {i}",
            "SELECT id, acct, amt, note FROM ev ORDER BY id",
            "SELECT k, v FROM kv ORDER BY k",
            "TABLE kv",
            "SELECT k, v FROM dtwalt.kv ORDER BY k",
            f"SELECT f_bal({i})",
            "SELECT current_setting('search_path'), current_user, session_user",
            "SELECT current_setting('app.tag', true)",
            "SELECT current_setting('TimeZone'), '2020-06-01 12:00:00+00'::timestamptz",
            "SELECT 1.0::float8 / 3, 0.1::float4",
            "SELECT '\\x0102ff'::bytea",
            "SELECT date '2020-03-04', interval '1 day 02:03:04'",
            f"SELECT g FROM generate_series(1, {R.randint(1, 6)}) g",
            f"SELECT 10 / {R.randint(0, 2)}",
            "SELECT * FROM nosuch_table",
            "SELECT count(*) FROM ev WHERE note LIKE 'n1%'",
            "VALUES (1, 'a'), (2, 'b')",
            "SELECT currval('seq1')",
            "SELECT lastval()",
            "SELECT last_value, is_called FROM seq1",
            "SELECT has_table_privilege('kv', 'SELECT'), has_table_privilege('acct', 'UPDATE')",
            "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')",
            "SELECT current_setting('default_transaction_isolation'), current_setting('statement_timeout')",
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
            "SELECT name FROM pg_prepared_statements ORDER BY name" if "prepstmts" not in avoid else "SELECT 2",
            "SELECT name FROM pg_cursors ORDER BY name",
            "SELECT count(*) FROM tmp1",
            "EXPLAIN (COSTS OFF) SELECT * FROM acct WHERE id = 3",
            "SELECT current_setting('enable_seqscan'), current_setting('application_name')",
            "SELECT sum(bal) FROM acct",
            f"SELECT * FROM acct WHERE bal > {R.randint(0, 100)} ORDER BY bal DESC, id LIMIT 3",
            "SELECT pg_is_in_recovery() IS NOT NULL",
            "SELECT to_char(1234.5, '9G999D9'), 1234.5::money IS NOT NULL",
        ])

    def pick(options):
        if "hazards" in avoid:
            options = [o for o in options if not HAZARD.search(o)]
        return R.choice(options)

    def write_sql():
        i = r_id(); n = R.randint(-50, 50)
        return pick([
            f"INSERT INTO ev(acct, amt, note) VALUES ({i}, {n}, 'w{n}') RETURNING id",
            f"UPDATE acct SET bal = bal + {n} WHERE id = {i}",
            f"DELETE FROM ev WHERE id = {R.randint(1, 14)}",
            f"INSERT INTO kv VALUES ('{r_k()}', 'v{n}')",
            f"INSERT INTO kv VALUES ('{r_k()}', 'u{n}') ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            f"UPDATE kv SET v = v || '!' WHERE k = '{r_k()}'",
            "SELECT nextval('seq1')",
            "SELECT nextval('ev_id_seq')",
            f"SELECT setval('seq1', {R.randint(1, 100)})",
            f"WITH x AS (UPDATE acct SET bal = bal - 1 WHERE id = {i} RETURNING id, bal) SELECT * FROM x",
            "CREATE TEMP TABLE IF NOT EXISTS tmp1(a int)",
            "CREATE TEMP TABLE tmp1 AS SELECT id AS a FROM acct",
            f"INSERT INTO tmp1 VALUES ({n})",
            "DROP TABLE IF EXISTS tmp1",
            f"INSERT INTO acct VALUES ({R.randint(5, 12)}, 'new', 1)",
            "SELECT * FROM acct WHERE id = 1 FOR UPDATE",
        ])

    def state_sql():
        return R.choice([
            "SET search_path = dtwalt, dtw", "SET search_path TO dtw, public", "RESET search_path",
            "SET LOCAL search_path = dtwalt, dtw",
            f"SET TimeZone = {R.choice(TZS)}", f"SET LOCAL TimeZone = {R.choice(TZS)}",
            f"SET extra_float_digits = {R.choice([0, 1, 3, -2])}",
            "SET bytea_output = 'escape'", "RESET bytea_output",
            "SET DateStyle = 'SQL, DMY'", "SET IntervalStyle = 'postgres_verbose'",
            f"SET app.tag = 'x{R.randint(0, 9)}'", f"SET LOCAL app.tag = 'l{R.randint(0, 9)}'",
            f"SELECT set_config('app.tag', 'c{R.randint(0, 9)}', {R.choice(['false', 'true'])})",
            "RESET app.tag", "RESET ALL", "DISCARD ALL",
            "SET ROLE dtw_low", "RESET ROLE", "SET ROLE NONE", "SET LOCAL ROLE dtw_low",
            "SET statement_timeout = '3s'", "SET application_name = 'dtwapp'",
            "SET default_transaction_isolation = 'repeatable read'",
            "SET default_transaction_read_only = on", "RESET default_transaction_read_only",
            "SET enable_seqscan = off", "SET lc_numeric = 'C'",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
        ])

    def tx_sql():
        return R.choice([
            "BEGIN", "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ", "BEGIN ISOLATION LEVEL SERIALIZABLE",
            "START TRANSACTION READ ONLY", "BEGIN READ WRITE", "COMMIT", "COMMIT", "ROLLBACK", "END",
            "SAVEPOINT sp1", "ROLLBACK TO SAVEPOINT sp1", "RELEASE sp1", "SAVEPOINT sp2", "ROLLBACK TO sp2",
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "ABORT",
        ])

    def misc_sql():
        i = r_id()
        return pick([
            "PREPARE p1(int) AS SELECT id, owner, bal FROM acct WHERE id = $1", f"EXECUTE p1({i})",
            "DEALLOCATE p1", "DEALLOCATE ALL",
            f"PREPARE p2 AS UPDATE acct SET bal = bal + 1 WHERE id = {i}", "EXECUTE p2",
            "DECLARE c1 CURSOR FOR SELECT id, amt FROM ev ORDER BY id", "FETCH 2 FROM c1", "MOVE 1 IN c1",
            "CLOSE c1", "DECLARE c2 CURSOR WITH HOLD FOR SELECT k, v FROM kv ORDER BY k", "FETCH ALL FROM c2",
            "CLOSE c2", "CLOSE ALL",
            "LISTEN ch1", f"NOTIFY ch1, 'p{i}'", f"SELECT pg_notify('ch1', 'q{i}')", "UNLISTEN ch1", "UNLISTEN *",
            f"SELECT pg_advisory_lock({40 + i % 3})", f"SELECT pg_try_advisory_lock({40 + i % 3})",
            f"SELECT pg_advisory_unlock({40 + i % 3})", f"SELECT pg_advisory_xact_lock({40 + i % 3})",
            "SELECT pg_advisory_unlock_all()",
            "LOCK TABLE kv IN ACCESS SHARE MODE",
            "DO $$BEGIN PERFORM set_config('app.tag', 'do', false); END$$",
            "COPY (SELECT k, v FROM kv ORDER BY k) TO STDOUT",
            "SELECT pg_sleep(0)",
        ])

    def any_sql():
        x = R.random()
        rest = (1.0 - read_weight) / 0.60
        if x < read_weight: return read_sql()
        if x < read_weight + 0.15 * rest: return write_sql()
        if x < read_weight + 0.30 * rest: return state_sql()
        if x < read_weight + 0.45 * rest: return tx_sql()
        return misc_sql()

    PARAM_STMTS = [
        ("SELECT id, owner, bal FROM acct WHERE id = $1", lambda: [str(r_id())]),
        ("SELECT $1::int + 1", lambda: [str(r_id())]),
        ("SELECT k, v FROM kv WHERE k = $1", lambda: [r_k()]),
        ("UPDATE acct SET bal = bal + $2 WHERE id = $1", lambda: [str(r_id()), str(R.randint(-9, 9))]),
        ("INSERT INTO kv VALUES ($1, $2)", lambda: [r_k(), "e" + str(R.randint(0, 99))]),
        ("SELECT id, amt FROM ev WHERE acct = $1 ORDER BY id", lambda: [str(r_id())]),
        ("SELECT set_config('app.tag', $1, false)", lambda: ["b" + str(R.randint(0, 9))]),
    ]

    def ext_batch():
        msgs = []
        for _ in range(R.randint(1, 3)):
            x = R.random()
            if x < 0.1 and st["named"]:
                name = R.choice(st["named"])  # reuse an existing named statement
                params = None
            else:
                if R.random() < 0.45:
                    sql, pg = R.choice(PARAM_STMTS)
                    params = pg()
                else:
                    sql, params = any_sql(), []
                name = R.choice(["", "", "", "s1", "s2", f"s{R.randint(3, 5)}"])
                if R.random() < 0.03:
                    sql = "SELEC 1"
                if R.random() < 0.03:
                    sql = "SELECT 1; SELECT 2"
                msgs.append(("P", name, sql))
                if name and name not in st["named"]:
                    st["named"].append(name)
                if R.random() < 0.25:
                    msgs.append(("D", "S", name))
                if params is None:
                    params = []
            if params is None:
                params = []
            if R.random() < 0.04:
                name = "nostmt"
            portal = R.choice(["", "", "", "pA", "pB"])
            msgs.append(("B", portal, name, params))
            if R.random() < 0.25:
                msgs.append(("D", "P", portal))
            nexec = 1 if R.random() < 0.8 else 2
            for _e in range(nexec):
                lim = R.choice([0, 0, 0, 1, 2])
                ep = portal if R.random() > 0.04 else "nope"
                msgs.append(("E", ep, lim))
                if R.random() < 0.1:
                    msgs.append(("H",))
            if R.random() < 0.15:
                msgs.append(("C", "P", portal))
            if R.random() < 0.1 and name:
                msgs.append(("C", "S", name))
                if name in st["named"]:
                    st["named"].remove(name)
        if large:
            for i, m in enumerate(msgs):
                if m[0] == "P" and R.random() < large:
                    msgs[i] = ("P", m[1], pad + m[2])
                elif m[0] == "B" and m[3] and m[3][0] is not None and R.random() < large:
                    msgs[i] = ("B", m[1], m[2], [m[3][0] + "p" * large_bytes, *m[3][1:]])
        y = R.random()
        if "unsynced" in avoid and y >= 0.82:
            if y < 0.92:
                msgs.append(("H",))
            msgs.append(("S",))
        elif y < 0.82:
            msgs.append(("S",))
        elif y < 0.92:
            msgs.append(("H",))  # Flush: answers so far must come now; the next step continues
        # else: no Sync at all: the next step (often a Query) follows in the same implicit batch
        return {"msgs": msgs}

    n = R.randint(3, max_steps)
    for _ in range(n):
        if copy and R.random() < copy:
            steps.extend(copy_in_steps(R, any_sql))
            continue
        x = R.random()
        if x < 0.55:
            k = 1 if R.random() < 0.7 else R.randint(2, 3)
            sql = "; ".join(any_sql() for _ in range(k))
            if large and R.random() < large:
                sql = pad + sql
            steps.append({"msgs": [("Q", sql)]})
        elif x < 0.93:
            steps.append(ext_batch())
        elif x < 0.97:
            steps.append({"msgs": [("S",)]})
        else:
            steps.append({"msgs": [], "sleep": R.choice([0.03, 0.08, 0.15])})
    if resume:
        resume_portals(steps, random.Random(seed * 7919 + 2))
    if long_names:
        lengthen_names(steps, random.Random(seed * 7919 + 1))
    return steps


COPY_TARGETS = ["COPY kv FROM STDIN", "COPY dtw.kv (k, v) FROM STDIN", "COPY ev (acct, amt, note) FROM STDIN",
                "COPY tmp1 FROM STDIN", "COPY acct FROM STDIN", "COPY nosuch FROM STDIN",
                "COPY kv FROM STDIN WITH (FORMAT csv)", "COPY (SELECT 1) TO STDOUT"]


def copy_in_steps(R, any_sql):
    """A COPY FROM STDIN (the client's data goes where its COPY runs; an error or CopyFail ends it
    as on one server), sent the ways clients send it: the data pipelined behind the Query in one
    packet, or after the CopyInResponse in a step of its own; by simple Query (alone, or before or
    after another statement in it) or by Parse/Bind/Execute with a Sync after the data; ended by
    CopyDone or CopyFail; with rows that fit, that clash with a key or that do not parse; rarely a
    Query in COPY IN mode, which the server refuses by ending the session. Copy messages with no
    COPY in progress are ignored by the server."""
    target = R.choice(COPY_TARGETS)
    rows = []
    for _ in range(R.randint(0, 3)):
        k = R.choice("abcdxyz") + str(R.randint(0, 3))
        rows.append(R.choice([
            f"{k}\tc{R.randint(0, 9)}\n",
            f"{R.randint(1, 9)}\t{R.randint(-5, 5)}\tc{k}\n",
            f"{R.randint(1, 12)}\to{k}\t{R.randint(0, 99)}\n",
            f"{k},csv{R.randint(0, 9)}\n",
            "only-one-column\n",
            "a\tdup\n",
        ]))
    data = [("d", r) for r in rows]
    if data and R.random() < 0.3:
        # one row split over two CopyData messages
        r = data[-1][1]
        cut = R.randint(0, len(r))
        data[-1:] = [("d", r[:cut]), ("d", r[cut:])]
    end = [("c",)] if R.random() < 0.8 else [("f", "client gave up")]
    x = R.random()
    if x < 0.05:
        return [{"msgs": [*data, ("c",)]}]  # no COPY in progress: ignored
    if x < 0.5:
        q = target
        if R.random() < 0.25:
            q = R.choice([f"{any_sql()}; {target}", f"{target}; SELECT 'after copy'"])
        head = [("Q", q)]
        tail = []
    else:
        name = R.choice(["", "", "s1", "cp"])
        head = [("P", name, target), ("B", "", name, []), ("E", "", 0)]
        tail = [("S",)]
    if R.random() < 0.5:
        return [{"msgs": head + data + end + tail}]
    if R.random() < 0.06:
        # The client's protocol violation: a Query in COPY IN mode ends the session (08P01).
        return [{"msgs": head}, {"msgs": [("Q", "SELECT 'in copy'")]}]
    return [{"msgs": head}, {"msgs": data + end + tail}]


def resume_portals(steps, L):
    """After half the steps that run a named portal with a row limit, a later step (the next, or
    the one after) runs that portal again, alone with a Sync: inside a block the portal is still
    there, suspended (E-4), and whatever ran between — reads split off, the engine's probe behind a
    read the writer served — must have left it as the primary alone does. Not the unnamed portal:
    run again after a reader ran it, it is the choice E-4 documents (README); and PostgreSQL 15.20
    itself crashes (SIGSEGV, every backend restarted) on `BEGIN; MOVE 1 IN c1` (fails), Parse, Sync,
    then Execute of the unnamed portal — found by this option on 2026-12-06."""
    i = 0
    while i < len(steps):
        limited = [m[1] for m in steps[i]["msgs"] if m[0] == "E" and m[2] > 0 and m[1]]
        if limited and L.random() < 0.5:
            at = min(len(steps), i + 1 + L.randint(0, 1))
            steps.insert(at, {"msgs": [("E", L.choice(limited), L.choice([0, 1, 2])), ("S",)]})
            if L.random() < 0.5:
                # In a READ COMMITTED block, whose reads the engine may split off (P-5).
                steps.insert(at + 1, {"msgs": [("Q", L.choice(["COMMIT", "ROLLBACK"]))]})
                steps.insert(i, {"msgs": [("Q", "BEGIN ISOLATION LEVEL READ COMMITTED")]})
                i += 1
        i += 1


# The positions of the statement and portal names in each message of a generated step.
NAME_FIELDS = {"P": (1,), "B": (1, 2), "E": (1,), "D": (2,), "C": (2,)}


def lengthen_names(steps, L):
    """Every non-empty name made 63 bytes long (`dtw_<name>~~…`), with a suffix that varies by use."""
    for step in steps:
        for i, m in enumerate(step["msgs"]):
            fields = NAME_FIELDS.get(m[0], ())
            if any(m[f] for f in fields):
                m = list(m)
                for f in fields:
                    if m[f]:
                        m[f] = ("dtw_" + m[f]).ljust(63, "~") + L.choice(["", "a", "bb"])
                step["msgs"][i] = tuple(m)


FINAL_STEP = {"msgs": [("S",), ("Q", "SELECT 'dtw-end'")]}

# ---------------------------------------------------------------- harness


def parse_dsn(dsn):
    d = dict(kv.split("=", 1) for kv in dsn.split())
    return d["host"], int(d["port"]), d.get("user", "app_trust"), d.get("dbname", "app")


SETUP_SQL = r"""
DROP SCHEMA IF EXISTS dtw CASCADE;
DROP SCHEMA IF EXISTS dtwalt CASCADE;
DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dtw_low') THEN CREATE ROLE dtw_low; END IF; END$$;
GRANT dtw_low TO app_trust;
CREATE SCHEMA dtw AUTHORIZATION app_trust;
CREATE SCHEMA dtwalt AUTHORIZATION app_trust;
GRANT USAGE ON SCHEMA dtw, dtwalt TO dtw_low;
SET ROLE app_trust;
CREATE TABLE dtw.acct(id int PRIMARY KEY, owner text NOT NULL, bal numeric(10,2) NOT NULL DEFAULT 0);
CREATE TABLE dtw.ev(id serial PRIMARY KEY, acct int, amt int, note text);
CREATE TABLE dtw.kv(k text PRIMARY KEY, v text);
CREATE TABLE dtwalt.kv(k text PRIMARY KEY, v text);
CREATE SEQUENCE dtw.seq1;
CREATE VIEW dtw.acct_tot AS SELECT owner, count(*) AS n, sum(bal) AS total FROM dtw.acct GROUP BY owner;
CREATE FUNCTION dtw.f_bal(int) RETURNS numeric LANGUAGE sql STABLE AS $f$SELECT bal FROM dtw.acct WHERE id = $1$f$;
GRANT SELECT ON dtw.acct, dtw.acct_tot TO dtw_low;
ALTER TABLE dtw.acct SET (autovacuum_enabled = off); ALTER TABLE dtw.ev SET (autovacuum_enabled = off);
ALTER TABLE dtw.kv SET (autovacuum_enabled = off); ALTER TABLE dtwalt.kv SET (autovacuum_enabled = off);
RESET ROLE;
ALTER ROLE app_trust IN DATABASE app SET search_path = dtw, public;
"""

RESET_SQL = r"""
TRUNCATE dtw.acct, dtw.ev, dtw.kv, dtwalt.kv RESTART IDENTITY;
INSERT INTO dtw.acct SELECT g, 'o' || (g % 3), g * 10 FROM generate_series(1, 8) g;
INSERT INTO dtw.ev(acct, amt, note) SELECT g % 8 + 1, g, 'n' || g FROM generate_series(1, 12) g;
INSERT INTO dtw.kv VALUES ('a', '1'), ('b', '2'), ('c', '3');
INSERT INTO dtwalt.kv VALUES ('a', 'ALT1'), ('z', 'ALT26');
SELECT setval('dtw.seq1', 1, false);
ANALYZE dtw.acct, dtw.ev, dtw.kv, dtwalt.kv;
"""


class Harness:
    def __init__(self, a):
        self.a = a
        self.px = parse_dsn(a.proxy_dsn)
        self.pr = parse_dsn(a.primary_dsn)
        h, p, _, db = self.pr
        self.su = psycopg.connect(f"host={h} port={p} user=postgres dbname={db}", autocommit=True)
        self.su.execute("SET lock_timeout = '3s'")
        self.sb = psycopg.connect(a.standby_dsn.replace("user=app_trust", "user=postgres"), autocommit=True) \
            if a.standby_dsn else None
        self.reasons = Counter()
        self.decisions = Counter()
        # The logins whose backends a session may leave on the primary (reset, lingers).
        self.users = ("app_trust",)

    def setup(self):
        self.su.execute(SETUP_SQL)
        self.wait_standby()

    def wait_standby(self):
        lsn = self.su.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        if not self.sb:
            time.sleep(0.3)
            return
        t0 = time.monotonic()
        while True:
            ok = self.sb.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]
            if ok:
                return
            if time.monotonic() - t0 > 10:
                info = self.sb.execute("SELECT a.pid, a.usename, a.state, a.backend_xmin::text, now() - a.xact_start, "
                                       "left(a.query, 80), (SELECT string_agg(l.relation::regclass::text || ':' || l.mode, ',') "
                                       "FROM pg_locks l WHERE l.pid = a.pid AND l.relation IS NOT NULL) "
                                       "FROM pg_stat_activity a WHERE a.backend_type = 'client backend' "
                                       "AND a.pid <> pg_backend_pid()").fetchall()
                with open(os.path.join(LOG_DIR, "stalls.jsonl"), "a") as f:
                    f.write(json.dumps({"time": time.time(), "standby_backends": info}, default=str) + "\n")
                print(f"STALL: standby did not replay the reset in 10 s; standby backends: {info}", flush=True)
                if time.monotonic() - t0 > 40:
                    raise RuntimeError("standby did not catch up in 40 s")
                time.sleep(1.0)
                continue
            time.sleep(0.005)

    def app_backends(self):
        return self.su.execute("SELECT pid, state, left(query, 60) FROM pg_stat_activity WHERE usename = ANY(%s) "
                               "AND datname = current_database() AND pid <> pg_backend_pid()",
                               (list(self.users),)).fetchall()

    def wait_gone(self, limit=3.0):
        """Waits for the previous session's backends to leave the primary; returns those that did not."""
        t0 = time.monotonic()
        while True:
            rows = self.app_backends()
            if not rows or time.monotonic() - t0 > limit:
                return rows
            time.sleep(0.005)

    def reset(self):
        rows = self.wait_gone()
        if rows:  # clean up so the next session starts fresh (the caller reports the linger)
            self.su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s) "
                            "AND datname = current_database()", (list(self.users),))
            self.wait_gone(5.0)
        self.su.execute(RESET_SQL)
        self.wait_standby()

    def run(self, steps, target, ref_counts=None):
        """Runs the steps on `target` ('ref' or 'proxy'); returns (messages, per-step cumulative counts,
        hang info)."""
        h, p, u, db = self.pr if target == "ref" else self.px
        norm = Norm()
        out = []
        counts = []
        hang = None
        c = Conn(h, p, u, db, timeout=self.a.answer_s)
        try:
            # login
            dl = time.monotonic() + self.a.answer_s
            while True:
                m = c.one(dl)
                if m is None:
                    return out, counts, "login hang"
                out.append(norm(*m))
                if m[0] in (b"Z", b"EOF") or m[0] == b"E":
                    break
            counts.append(len(out))
            for i, step in enumerate(list(steps) + [FINAL_STEP]):
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                data = encode_step(step)
                if data:
                    try:
                        c.send(data)
                    except OSError as e:
                        out.append(("SENDFAIL", str(e)))
                        hang = f"send failed at step {i}"
                        break
                if target == "ref":
                    want = expected_rfqs(step)
                    got = 0
                    quiet = 0.25 if want else (0.08 if ends_open(step) else 0.0)
                    while quiet and (want == 0 or got < want):
                        # fewer RFQs than Syncs+Queries come when an error discards a Query before
                        # the Sync: a quiet window ends the wait
                        m = c.one(time.monotonic() + quiet)
                        if m is None:
                            break
                        out.append(norm(*m))
                        if m[0] == b"EOF":
                            break
                        if m[0] == b"Z":
                            got += 1
                    counts.append(len(out))
                else:
                    need = ref_counts[i + 1] if ref_counts and i + 1 < len(ref_counts) else None
                    dl = time.monotonic() + self.a.answer_s
                    while need is not None and len(out) < need:
                        m = c.one(dl)
                        if m is None:
                            self.short_need = need
                            hang = f"HANG at step {i}: {len(out)} of {need} messages within {self.a.answer_s}s"
                            break
                        out.append(norm(*m))
                        if m[0] == b"EOF":
                            break
                    counts.append(len(out))
                    if hang or (out and out[-1] == ("EOF",)):
                        break
                if out and out[-1] == ("EOF",):
                    break
            # anything extra?
            if not hang:
                dl = time.monotonic() + 0.05
                while (m := c.one(dl)) is not None:
                    out.append(norm(*m))
                    if m[0] == b"EOF":
                        break
        finally:
            c.close()
        return out, counts, hang

    def log_size(self):
        try:
            return os.path.getsize(self.a.proxy_log)
        except (OSError, TypeError):
            return 0

    def log_since(self, off):
        try:
            with open(self.a.proxy_log, "rb") as f:
                f.seek(off)
                return f.read().decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def check(self, steps, record=True):
        """Returns None if same, else a dict describing the divergence."""
        self.reset()
        ref, counts, rhang = self.run(steps, "ref")
        if rhang:
            return {"kind": "REFHANG", "detail": rhang}
        self.reset()
        off = self.log_size()
        got, _, hang = self.run(steps, "proxy", counts)
        time.sleep(0.01)
        log = self.log_since(off)
        reps = 0
        for line in log.splitlines():
            mm = re.search(r"decision (\S+) reason (\S+)", line)
            if mm:
                if record:
                    self.decisions[mm.group(1)] += 1
                    self.reasons[(mm.group(1), mm.group(2))] += 1
                if mm.group(1).startswith("REPLICA"):
                    reps += 1
        self.last_replica = reps
        if hang and getattr(self, "short_need", None) is not None:
            # fewer messages, but every ReadyForQuery the primary gave came: a wrong answer, not a hang
            if sum(1 for m in got if m[0] == "Z") >= sum(1 for m in ref[:self.short_need] if m[0] == "Z"):
                hang = None
            self.short_need = None
        linger = self.wait_gone()
        if linger:
            with open(os.path.join(LOG_DIR, "lingers.jsonl"), "a") as f:
                f.write(json.dumps({"steps": steps, "linger": linger, "log": log[-2000:]}, default=str) + "\n")
        if hang:
            n = len(got)
            return {"kind": "HANG", "detail": hang, "ref": ref, "got": got, "log": log[-3000:],
                    "ref_at": ref[max(0, n - 4):n + 4], "got_at": got[max(0, n - 4):]}
        if ref != got:
            i = next((j for j in range(min(len(ref), len(got))) if ref[j] != got[j]), min(len(ref), len(got)))
            step_of = next((s for s, cnt in enumerate(counts) if cnt > i), len(counts)) - 1
            return {"kind": "DIFF", "index": i, "steps": steps, "step": step_of, "ref": ref, "got": got,
                    "ref_at": ref[max(0, i - 2):i + 3], "got_at": got[max(0, i - 2):i + 3], "log": log[-3000:]}
        if linger:
            return {"kind": "LINGER", "detail": f"writer backend(s) left on the primary 3 s after the client's Terminate: {linger}",
                    "log": log[-3000:]}
        return None


# Divergences of a documented open defect (README "Known open defects"), not counted as new.
KNOWN = {
    "F4b-25P02-for-bind-error": "25P02 or 26000 through the proxy where the primary reports a Bind's "
    "own error inside a failed block",
}


def known_finding(d):
    """Names the documented open defect a divergence is an instance of (None: a new one)."""
    if d["kind"] != "DIFF":
        return None
    i = d["index"]
    g = d["got"][i] if i < len(d["got"]) else ("MISSING",)
    r = d["ref"][i] if i < len(d["ref"]) else ("MISSING",)
    gf = dict(g[1]) if g[0] in ("E", "N") else {}
    rf = dict(r[1]) if r[0] in ("E", "N") else {}
    if (gf.get("C") == "25P02" and rf.get("C") not in (None, "25P02")) or (
        gf.get("C") == "26000" and rf.get("C") == "08P01"
    ):
        return "F4b-25P02-for-bind-error"
    return None
