#!/usr/bin/env python3
"""Writes the hand-made seeds of the framer, rfq and classify targets (fuzz/seeds/<target>/).

Each seed follows its harness's decoding (fuzz/src/<target>.rs). The session target's seeds are
not made here: they are the corpus of a 40-minute campaign (1.57 M executions) reduced to a set
cover of its coverage edges with
    fuzz/target/.../session -set_cover_merge=1 -use_counters=0 fuzz/seeds/session <corpus>
because its operation encoding is best explored by the fuzzer itself.

Usage: python3 fuzz/seeds/make-seeds.py   (rewrites framer/, rfq/, classify/)
"""
import hashlib
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def msg(tag, body=b""):
    return bytes([tag]) + struct.pack(">I", len(body) + 4) + body


def startup(params):
    body = struct.pack(">I", 196608)
    for k, v in params:
        body += k + b"\0" + v + b"\0"
    body += b"\0"
    return struct.pack(">I", len(body) + 4) + body


def rfq(status, lsn=None, xact=None):
    b = status
    if lsn is not None:
        b += struct.pack(">Q", lsn)
    if xact is not None:
        b += xact[0] + xact[1] + b"\0"
    return msg(ord("Z"), b)


def write(target, seeds):
    d = os.path.join(HERE, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in seeds:
        h = hashlib.sha1(data).hexdigest()[:12]
        with open(os.path.join(d, f"{name}-{h}"), "wb") as f:
            f.write(data)


def framer():
    # startup flag, startup limit, inspect limit, message limit, mode mask, cut count, cuts, bytes
    backend = (
        msg(ord("R"), struct.pack(">i", 0))
        + msg(ord("S"), b"server_version\x0015.8\0")
        + msg(ord("K"), struct.pack(">ii", 77, 88))
        + rfq(b"I", 0x40B664F8)
        + msg(ord("T"), b"\0\x01v\0" + b"\0" * 18)
        + msg(ord("D"), b"\0\x01\0\0\0\x017")
        + msg(ord("C"), b"SELECT 1\0")
        + rfq(b"T", 0x1000, (b"x", b"1,732"))
    )
    client = startup([(b"user", b"app"), (b"database", b"db")]) + msg(ord("Q"), b"SELECT 1\0")
    ssl = struct.pack(">II", 8, 80877103) + startup([(b"user", b"u")])
    return [
        ("backend-whole", bytes([0, 2, 4, 3, 0x00, 0]) + backend),
        ("backend-cut", bytes([0, 2, 4, 3, 0x55, 5, 1, 3, 7, 2, 250]) + backend),
        ("backend-stream", bytes([0, 2, 2, 3, 0xFF, 3, 5, 1, 9]) + backend),
        ("client-startup", bytes([1, 2, 4, 3, 0x10, 2, 4, 4]) + client),
        ("client-ssl", bytes([1, 2, 4, 3, 0x01, 0]) + ssl),
        ("too-large", bytes([0, 0, 1, 1, 0, 0]) + msg(ord("Q"), b"x" * 200)),
        ("length-below-four", bytes([0, 2, 4, 3, 0, 0]) + b"Q\0\0\0\x02"),
        ("gigabyte", bytes([0, 2, 4, 3, 0, 0]) + b"D\x40\0\0\0" + b"x" * 32),
    ]


def rfq_seeds():
    lsn = struct.pack(">Q", 0x40B664F8)
    both, lsn_only = 3, 1
    z = ord("Z")
    return [
        ("idle-lsn", bytes([both, z]) + b"I" + lsn),
        ("standard", bytes([both, z]) + b"I"),
        ("split-x", bytes([both, z]) + b"T" + lsn + b"x1,732\0"),
        ("split-w", bytes([both, z]) + b"T" + lsn + b"w3,733,732\0"),
        ("split-empty", bytes([both, z]) + b"T" + lsn + b"x\0"),
        ("split-future", bytes([both, z]) + b"T" + lsn + b"x1,2\0future"),
        ("lsn-only", bytes([lsn_only, z]) + b"E" + lsn + b"zzz"),
        ("zero-lsn", bytes([both, z]) + b"T" + b"\0" * 8),
        ("short-lsn", bytes([both, z]) + b"I\0\0\x01"),
        ("hostile-xids", bytes([both, z]) + b"T" + lsn + b"x1,2'; DROP TABLE x; --\0"),
        ("overflow-xids", bytes([both, z]) + b"T" + lsn + b"x1,18446744073709551616\0"),
        ("max-xids", bytes([both, z]) + b"T" + lsn + b"x18446744073709551615,1\0"),
        ("error", bytes([0, ord("E")]) + b"SERROR\0VERROR\0C25006\0Mcannot execute\0\0"),
        ("wait-timeout", bytes([0, ord("E")])
         + b"SERROR\0C72000\0Mtimeout\0Dpolar_proxy_lsn_wait_timeout\0Rpolar_proxy_wait_for_lsn\0\0"),
        ("key-data", bytes([0, ord("K")]) + struct.pack(">ii", 77, 88)),
        ("auth-sasl", bytes([0, ord("R")]) + struct.pack(">i", 10) + b"SCRAM-SHA-256\0\0"),
        ("param-status", bytes([0, ord("S")]) + b"in_hot_standby\0off\0"),
        ("query", bytes([0, ord("Q")]) + b"SELECT 1\0"),
        ("parse", bytes([0, ord("P")]) + b"s1\0SELECT $1\0\0\x01\0\0\0\x17"),
        ("bind", bytes([0, ord("B")]) + b"\0s1\0\0\0\0\0\0\0"),
        ("startup", bytes([0, 0]) + struct.pack(">I", 196608) + b"user\0app\0database\0db\0\0"),
        ("cancel", bytes([0, 0]) + struct.pack(">Iii", 80877102, 77, 88)),
        ("copy-in", bytes([0, ord("G")]) + b"\0\0\0"),
    ]


SQL = [
    "SELECT abalance FROM pgbench_accounts WHERE aid = 7",
    "select * from t where k = $1",
    "INSERT INTO t VALUES (1) RETURNING *",
    "UPDATE t SET v = v + 1 WHERE k = 1",
    "WITH w AS (DELETE FROM t RETURNING *) SELECT * FROM w",
    "SELECT * FROM t FOR NO KEY UPDATE",
    "SELECT nextval('s')",
    'SELECT "nextval"(\'s\')',
    "SELECT pg_advisory_lock(1)",
    "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; COMMIT",
    "START TRANSACTION READ ONLY",
    "SET search_path = app, \"$user\"",
    "SET LOCAL statement_timeout = 5",
    "RESET ALL",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "/* route=primary */ SELECT 1",
    "SELECT $q$ ; DELETE FROM t; $q$",
    "SELECT E'\\' ; DELETE FROM t; --'",
    "SELECT 1 /* nested /* comment */ ; DELETE */",
    "EXPLAIN ANALYZE DELETE FROM t",
    "COPY t TO STDOUT",
    "CREATE FUNCTION f() RETURNS int BEGIN ATOMIC SELECT 1; END",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "TABLE t",
    "VALUES (1), (2)",
    "SELECT * FROM ROWS FROM (generate_series(1, 3))",
    "LISTEN ch; NOTIFY ch",
    "SELECT 1;;; ;",
    "",
    "SELECT 'unterminated",
    "SELECT U&\"d\\0061t\\+000061\" FROM t",
]


def classify():
    seeds = []
    for i, sql in enumerate(SQL):
        # First byte 0 (mod 20): plain text; then the 4-byte shape parameter (unused).
        seeds.append((f"sql{i:02}", bytes([0]) + struct.pack(">I", 0) + sql.encode()))
    seeds += [
        ("nested", bytes([1]) + struct.pack(">I", 5000) + b"1"),
        ("unbalanced", bytes([2]) + struct.pack(">I", 3001) + b"1"),
        ("many", bytes([3]) + struct.pack(">I", 20000) + b"SELECT 1"),
        ("huge", bytes([4]) + struct.pack(">I", 10) + b"SELECT 'x'"),
        ("open-quotes", bytes([5]) + struct.pack(">I", 4001) + b"x"),
    ]
    return seeds


if __name__ == "__main__":
    write("framer", framer())
    write("rfq", rfq_seeds())
    write("classify", classify())
