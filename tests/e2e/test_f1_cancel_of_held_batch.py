"""F-1 with E-1: a client's cancel of an extended batch the engine still holds (an examiner's
finding, 2026-12-06). The client sends Parse/Bind/Execute of an INSERT and of a slow read without
a Sync, waits, cancels, then sends the Sync. The primary alone runs each Execute as it arrives: the
cancel stops the sleep at once (57014) and the implicit transaction rolls the INSERT back (inside a
block the block fails). The engine held the batch until its Sync, so the cancel found nothing
running, the sleep ran its full time and the INSERT committed. Now a cancel places the held batch
as the client's Flush would (E-1) and the host forwards the cancel once it runs there.

The same bytes go to the primary directly and through the proxy; compared: the SQLSTATE, the time
to the error (well under the sleep), the transaction status, and whether the INSERT's row exists."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import psycopg
import pytest

from test_red2_findings import Client, RawConn, _msg, bind, execute, parse, query

SLEEP_S = 3
SYNC = _msg(b"S")


def pbe(sql: str) -> bytes:
    return parse("", sql) + bind("", "") + execute()


def send_cancel(port: int, pid: int, key: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">IIII", 16, 80877102, pid, key))
        try:
            s.recv(1)
        except OSError:
            pass


class KeyedClient(Client):
    """The raw client, keeping its BackendKeyData for a CancelRequest."""

    def __init__(self, port: int):
        self.port = port
        RawConn.__init__(self, "127.0.0.1", port, "app_trust", "app", 10)
        login = self.answers(1)
        assert login[-1][0] == "Z", f"login failed: {login}"
        key = [m[1] for m in login if m[0] == "K"]
        assert key, login
        self.pid, self.key = struct.unpack(">II", key[0])


def run(port: int, primary_dsn: str, in_block: bool) -> tuple:
    """The examiner's scenario on `port`: (SQLSTATE, seconds from the Sync to the RFQ, RFQ
    status, whether the INSERT's row exists afterwards)."""
    tag = f"f1-held-{uuid.uuid4().hex}"
    c = KeyedClient(port)
    try:
        if in_block:
            c.send(query("BEGIN"))
            assert c.answers(1)[-1] == ("Z", b"T")
        c.send(pbe(f"INSERT INTO audit(note) VALUES ('{tag}')"),
               pbe(f"SELECT pg_sleep({SLEEP_S}) FROM accounts LIMIT 1"))
        time.sleep(0.7)
        send_cancel(port, c.pid, c.key)
        time.sleep(0.3)
        t0 = time.monotonic()
        c.send(SYNC)
        got = c.answers(1)
        elapsed = time.monotonic() - t0
    finally:
        c.close()
    codes = [m[2] for m in got if m[0] == "E"]
    status = got[-1][1] if got and got[-1][0] == "Z" else got[-1:]
    with psycopg.connect(primary_dsn, autocommit=True) as chk:
        n = chk.execute("SELECT count(*) FROM audit WHERE note = %s", (tag,)).fetchone()[0]
    return codes, elapsed, status, n


@pytest.mark.timeout(120)
@pytest.mark.parametrize("in_block", [False, True], ids=["autocommit", "in_block"])
def test_f1_e1_a_cancel_of_a_batch_held_without_its_sync_stops_it_as_on_the_primary(pair, proxy, in_block):
    for _ in range(2):
        dsn = pair.primary.dsn(dbname="app")
        want = run(pair.primary.port, dsn, in_block)
        got = run(proxy.port, dsn, in_block)
        assert want[0] == ["57014"] and want[1] < 1.5 and want[3] == 0, f"the primary alone: {want}"
        assert got[0] == want[0], f"SQLSTATE through the proxy {got}, the primary alone {want}"
        assert got[1] < 1.5, f"the sleep ran on through the proxy: {got}"
        assert got[2] == want[2], f"transaction status through the proxy {got}, the primary alone {want}"
        assert got[3] == want[3] == 0, f"the INSERT's row through the proxy {got}, the primary alone {want}"
