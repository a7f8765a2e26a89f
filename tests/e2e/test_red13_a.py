"""Examiner round 13, area a (red13-a): hangs, lost or extra messages, protocol flows — the same
client bytes (or driver calls) through the example proxy and on the primary alone, every message
compared (main at 55f10fe).

No finding: nothing probed in about an hour failed, so this module holds no failing test.

Probed, held (each compared with the primary alone, reads shown on the standby by inet_server_port()):
- NOTICE/WARNING raised by a STABLE plpgsql function on the standby: simple and extended protocol,
  a row-limited Execute across a Flush, client_min_messages warning/error; DEBUG1/2/5 and LOG
  levels around a write, the probe and the capture (no extra or missing messages).
- LISTEN made by a trigger (unseen code): notifications sent while the client is idle and between
  reads on the standby reach psycopg's notifies() once.
- Cancels: a standby read (pg_sleep), a hinted read the standby refuses and the primary re-runs,
  a psycopg pipeline holding a sleeping read, asyncpg timeouts in and out of a block; the next
  statement is answered right each time. A cancel and a lock_timeout landing while the writer
  waits for a lock ahead of a reader-only statement it must prepare first (the guard below).
- Pipelines: psycopg pipeline mode with reads, writes, errors midway, duplicate keys, in and out of
  a block; asyncpg executemany of writes and of reads with an error midway; Flush without Sync
  followed by a write (error before or after the Flush), named and unnamed portals across Flushes,
  Describe-only parts, Sync-less bursts of 3,000 Executes past max_batch_bytes, an error inside.
- COPY: COPY (SELECT) TO STDOUT failing midway, in a block behind a standby read, by extended
  protocol (also sharing a batch with reads), COPY FROM with CopyFail in a block, COPY then a
  statement in one Query; asyncpg copy_from_query / copy_records_to_table with a duplicate key.
- SHOW polarsplit.causal_token pipelined behind a sleeping standby read (simple, extended, Flush):
  answers in order.
- Timeouts and closes: idle_session_timeout / idle_in_transaction_session_timeout (read on the
  standby, a pause longer and shorter than T, a slow client reading a standby result past T); the
  standby's or the writer's backend terminated while the client is idle or in a block; a client
  closing its socket mid-stream of a standby result, then fresh clients (no leftover rows);
  ALTER SYSTEM + reload of TimeZone/DateStyle/IntervalStyle (ParameterStatus reaches the client).
"""

from __future__ import annotations

import socket
import struct
import time

import psycopg
import pytest

from test_red2_findings import SYNC, RawConn, bind, describe_message, execute, parse, query

ANSWER_S = 6.0
STMT = "SELECT inet_server_port(), count(*) FROM kv WHERE k <> $1"


class KeyedClient(RawConn):
    """A raw v3 client that keeps its BackendKeyData (to send a CancelRequest)."""

    def __init__(self, port: int):
        super().__init__("127.0.0.1", port, "app_trust", "app", ANSWER_S)
        self.port = port
        self.key = None
        while True:
            m = self.one(time.monotonic() + ANSWER_S)
            assert m is not None and m[0] != b"EOF", f"login failed: {m}"
            if m[0] == b"K":
                self.key = struct.unpack(">II", m[1])
            if m[0] == b"Z":
                break

    def answers(self) -> list[tuple]:
        out, deadline = [], time.monotonic() + ANSWER_S
        while True:
            m = self.one(deadline)
            if m is None:
                return out + [("HANG",)]
            if m[0] == b"EOF":
                return out + [("EOF",)]
            out.append(describe_message(*m))
            if m[0] == b"Z":
                return out

    def cancel(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=ANSWER_S) as s:
            s.sendall(struct.pack(">IIII", 16, 80877102, *self.key))


def session(pair, port: int, how: str, standby_port: int) -> list:
    """A statement prepared by a read (on the standby through the proxy), then a batch that must
    run on the writer (an INSERT, then a Bind of that statement) while another session holds an
    ACCESS EXCLUSIVE lock on the statement's table; the lock's wait ends by lock_timeout or a
    cancel. Returns the messages, where the read ran and the rows the batch left."""
    c = KeyedClient(port)
    locker = psycopg.connect(pair.primary.dsn(dbname="app"))
    out: list = []
    try:
        if how == "lock_timeout":
            c.send(query("SET lock_timeout = '300ms'"))
            out += c.answers()
        c.send(parse("s", STMT), bind("", "s", ("1",)), execute(), SYNC)
        got = c.answers()
        rows = [m for m in got if m[0] == "D"]
        ran = "standby" if rows and str(standby_port).encode() in rows[0][1] else "primary"
        out += [m for m in got if m[0] != "D"]
        pair.wait_replayed()
        locker.execute("LOCK TABLE kv IN ACCESS EXCLUSIVE MODE")
        c.send(parse("", "INSERT INTO audit (note) VALUES ('red13a')"), bind("", ""), execute(),
               bind("", "s", ("1",)), execute(), SYNC)
        if how == "cancel":
            time.sleep(0.5)
            c.cancel()
        out += c.answers()
        locker.rollback()
        c.send(query("SELECT count(*) FROM audit WHERE note = 'red13a'"))
        out += c.answers()
    finally:
        locker.rollback()
        locker.close()
        c.close()
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as a:
            a.execute("DELETE FROM audit WHERE note = 'red13a'")
    return [out, ran]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["lock_timeout", "cancel"])
def test_f1_a_batch_waiting_on_a_lock_ahead_of_a_reader_only_statement_ends_as_on_the_primary(pair, proxy, how):
    """Guard (held on 55f10fe): the engine's hidden Parse of a statement that lives only on the
    standby, placed in front of a writer batch, waits for the same lock as the client's Bind; the
    lock_timeout (55P03) or the client's cancel (57014) must end the batch exactly as on the
    primary alone — INSERT's CommandComplete, the error, the rollback — and never hang."""
    standby = pair.standby.port
    want, _ = session(pair, pair.primary.port, how, standby)
    got, ran = session(pair, proxy.port, how, standby)
    assert ("HANG",) not in want
    assert got == want, f"through the proxy:\n{got}\nthe primary alone:\n{want}"
    assert ran == "standby", "the statement was not prepared on the standby: the case proves nothing"
