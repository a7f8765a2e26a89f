"""A client that leaves with work queued (the red team's F1/F2 of 2026-12-05), through the proxy
against the primary alone, over raw sockets.

PostgreSQL runs every statement it read before the end of its input (or a Terminate), in order,
and sends every answer the client still reads: a client that sends `read; insert` as two Query
messages and then closes its socket (close or half-close, with or without a Terminate) gets the
insert run, and a half-closed client reads every answer. The proxy closed the session at the
client's end at once (the insert queued behind the read never ran, a half-closed client got no
byte), and at a Terminate behind statements it dropped their answers."""

from __future__ import annotations

import random
import socket
import struct
import time

import psycopg
import pytest


def _msg(t: bytes, body: bytes = b"") -> bytes:
    return t + struct.pack("!I", len(body) + 4) + body


def Q(sql: str) -> bytes:
    return _msg(b"Q", sql.encode() + b"\0")


TERM = _msg(b"X")


class Raw:
    """A trust-auth protocol-3 client on a raw socket."""

    def __init__(self, port: int, user: str = "app_trust", db: str = "app"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = struct.pack("!I", 196608) + b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
        self.s.sendall(struct.pack("!I", len(body) + 4) + body)
        self.buf = b""
        while self.read()[0] != b"Z":
            pass

    def read(self) -> tuple[bytes, bytes]:
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!I", self.buf[1:5])[0]:
            d = self.s.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        n = struct.unpack("!I", self.buf[1:5])[0]
        t, b = self.buf[:1], self.buf[5 : 1 + n]
        self.buf = self.buf[1 + n :]
        return t, b

    def read_to_end(self) -> list[str]:
        """Message types (rows with their values) until the server closes."""
        out = []
        try:
            while True:
                t, b = self.read()
                if t == b"D":
                    (ln,) = struct.unpack("!i", b[2:6])
                    out.append("D:" + b[6 : 6 + ln].decode())
                elif t == b"C":
                    out.append("C:" + b[:-1].decode())
                else:
                    out.append(t.decode())
        except (EOFError, OSError):
            pass
        return out


def _port(dsn_or_port) -> int:
    return dsn_or_port if isinstance(dsn_or_port, int) else int(dsn_or_port)


def _count(pair, k: int) -> int:
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        return c.execute("SELECT count(*) FROM kv WHERE k = %s", (k,)).fetchone()[0]


def _wait_count(pair, k: int, want: int, timeout: float = 5.0) -> int:
    deadline = time.time() + timeout
    while True:
        n = _count(pair, k)
        if n == want or time.time() > deadline:
            return n
        time.sleep(0.05)


def _leave(port: int, payload: bytes, end: str) -> list[str] | None:
    c = Raw(port)
    time.sleep(0.3)  # the standby's apply delay: the read can go to it
    c.s.sendall(payload)
    if end == "close":
        c.s.close()
        return None
    c.s.shutdown(socket.SHUT_WR)
    got = c.read_to_end()
    c.s.close()
    return got


@pytest.mark.parametrize("end", ["close", "half-close"])
@pytest.mark.parametrize("terminate", [False, True], ids=["no-terminate", "terminate"])
def test_the_insert_queued_behind_a_read_runs_when_the_client_leaves(pair, proxy, end, terminate):
    seen = {}
    for where, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        k = random.randint(10**7, 10**9)
        payload = Q("SELECT count(*) FROM accounts") + Q(f"INSERT INTO kv VALUES ({k}, 1)")
        got = _leave(port, payload + (TERM if terminate else b""), end)
        seen[where] = (_wait_count(pair, k, 1), got)
    assert seen["primary"][0] == 1, seen
    assert seen["proxy"] == seen["primary"], f"through the proxy vs the primary alone: {seen}"
    if end == "half-close":
        assert seen["proxy"][1] == ["T", "D:100", "C:SELECT 1", "Z", "C:INSERT 0 1", "Z"], seen


@pytest.mark.parametrize(
    "payload",
    [
        Q("SELECT count(*) FROM accounts"),
        Q("UPDATE accounts SET balance = balance WHERE id = 2"),
        Q("SELECT 1") + Q("SELECT count(*) FROM accounts"),
    ],
    ids=["read", "update", "two-reads"],
)
def test_a_half_closed_client_reads_every_answer(pair, proxy, payload):
    got = {where: _leave(port, payload, "half-close") for where, port in (("primary", pair.primary.port), ("proxy", proxy.port))}
    assert got["primary"], got
    assert got["proxy"] == got["primary"], got


@pytest.mark.parametrize(
    "payload",
    [
        Q("SELECT count(*) FROM accounts") + TERM,
        Q("UPDATE accounts SET balance = balance WHERE id = 2") + TERM,
        Q("SELECT 1") + Q("SELECT count(*) FROM accounts") + TERM,
    ],
    ids=["read", "update", "two-reads"],
)
def test_a_terminate_behind_statements_comes_after_their_answers(pair, proxy, payload):
    """The client sends statements and a Terminate, keeps its socket open and reads to the end."""
    got = {}
    for where, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        c = Raw(port)
        time.sleep(0.3)
        c.s.sendall(payload)
        got[where] = c.read_to_end()
        c.s.close()
    assert got["primary"] and got["primary"][-1] == "Z", got
    assert got["proxy"] == got["primary"], got
