"""The example proxy's bounds and wire fixes (issue 17 point 9, and point 8 through the proxy),
against the real primary + standby: a time bound on logging in, a bound on clients, no busy loop
when descriptors run out, the monitor's FATAL judged by the non-localised severity, reader
credentials of the startup packet's last `user`, the 08P01 FATAL of a client protocol error, and
the event loop's changes of interest (a client that stops reading stalls its backend, then gets
every row) and its reads (input several reads long arrives whole).

Raw sockets speak the protocol where a driver would hide what is tested (half startup packets,
a duplicate `user` key, a malformed message)."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import subprocess
import time

import psycopg
import pytest

from e2e_support import BUILD, PROXY, Proxy, start_proxy, stop_proxy

PG_FATAL = b"VFATAL\0"


def startup(**params: str) -> bytes:
    body = struct.pack(">I", 196608)
    for k, v in params.items():
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack(">I", len(body) + 4) + body


def startup_pairs(pairs: list[tuple[str, str]]) -> bytes:
    body = struct.pack(">I", 196608) + b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in pairs) + b"\0"
    return struct.pack(">I", len(body) + 4) + body


def msg(tag: bytes, body: bytes) -> bytes:
    return tag + struct.pack(">I", len(body) + 4) + body


def read_msg(s: socket.socket) -> tuple[bytes, bytes] | None:
    """One backend message, or None at EOF."""
    head = recv_exact(s, 5)
    if head is None:
        return None
    n = struct.unpack(">I", head[1:])[0] - 4
    body = recv_exact(s, n) if n else b""
    return None if body is None else (head[:1], body)


def recv_exact(s: socket.socket, n: int) -> bytes | None:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def login(s: socket.socket, packet: bytes, password: str | None = None) -> None:
    """Sends a startup packet and answers a cleartext password request; returns after RFQ."""
    s.sendall(packet)
    while True:
        m = read_msg(s)
        assert m is not None, "connection closed during login"
        tag, body = m
        if tag == b"R" and struct.unpack(">I", body[:4])[0] == 3:
            assert password is not None, "the server asked for a password"
            s.sendall(msg(b"p", password.encode() + b"\0"))
        elif tag == b"E":
            raise AssertionError(f"login refused: {body!r}")
        elif tag == b"Z":
            return


def query_one(s: socket.socket, sql: str) -> str:
    s.sendall(msg(b"Q", sql.encode() + b"\0"))
    value = None
    while True:
        m = read_msg(s)
        assert m is not None, "connection closed during a query"
        tag, body = m
        if tag == b"D":
            n = struct.unpack(">i", body[2:6])[0]
            value = body[6:6 + n].decode()
        elif tag == b"E":
            raise AssertionError(f"query failed: {body!r}")
        elif tag == b"Z":
            return value


def closed_within(s: socket.socket, seconds: float) -> bytes | None:
    """What the peer sent before closing, if it closed within `seconds`; None if still open."""
    s.settimeout(0.2)
    got = b""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connect(proxy: Proxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


@pytest.fixture
def fresh_proxy(pair, tmp_path):
    """A proxy per test, started with the test's extra arguments."""
    started = []

    def start(*extra: str, asan: bool = False) -> Proxy:
        p = start_proxy(pair, tmp_path / f"p{len(started)}", asan=asan, extra=list(extra))
        started.append(p)
        return p

    yield start
    for p in started:
        stop_proxy(p)


def test_proxy_auth_timeout_closes_200_half_sent_startup_packets(fresh_proxy):
    timeout = 2.0
    proxy = fresh_proxy("--auth-timeout-ms", str(int(timeout * 1000)))
    half = startup(user="app_trust", database="app")[:6]
    opened: dict[socket.socket, float] = {}
    for _ in range(200):
        s = connect(proxy)
        s.sendall(half)
        opened[s] = time.monotonic()
    # A client that logs in is served meanwhile, and stays served after the deadline.
    with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5) as c:
        sel = selectors.DefaultSelector()
        for s in opened:
            sel.register(s, selectors.EVENT_READ)
        held: dict[socket.socket, float] = {}
        deadline = time.monotonic() + timeout + 10
        while len(held) < len(opened) and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                s = key.fileobj
                try:
                    data = s.recv(64)
                except ConnectionResetError:
                    data = b""
                assert data == b"", f"the proxy answered a half startup packet: {data!r}"
                held[s] = time.monotonic() - opened[s]
                sel.unregister(s)
        sel.close()
        assert len(held) == len(opened), f"{len(opened) - len(held)} half-sent startup packets held past the deadline"
        # Closed by the deadline (never before it: CLOCK_MONOTONIC on both sides), not 35 s later.
        assert min(held.values()) >= timeout - 0.05, min(held.values())
        assert max(held.values()) < timeout + 10
        assert c.execute("SELECT 1").fetchone() == (1,)
        stats = proxy.stats()["proxy"]  # the proxy closed each before its peer saw the close
        assert stats["clients_auth_timeouts"] == 200
        assert stats["clients_active"] == 1  # the one that logged in
    for s in opened:
        s.close()


def test_proxy_bounds_clients_refuses_with_53300_and_recovers(fresh_proxy):
    proxy = fresh_proxy("--max-clients", "5")
    held = [psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5) for _ in range(5)]
    try:
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(proxy.dsn(), connect_timeout=5)
        assert "too many clients" in str(refused.value)
        held.pop().close()
        deadline = time.time() + 5
        while True:  # the proxy sees the close at its next poll
            try:
                with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5) as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                break
            except psycopg.OperationalError:
                assert time.time() < deadline, "a freed slot was not reused"
                time.sleep(0.05)
        assert all(c.execute("SELECT 2").fetchone() == (2,) for c in held)
    finally:
        for c in held:
            c.close()
    assert proxy.stats()["proxy"]["clients_refused"] >= 1


def test_proxy_out_of_descriptors_refuses_without_a_busy_loop(pair, tmp_path):
    # The proxy runs with 64 descriptors and no login deadline: idle connections use them up.
    proxy = Proxy(PROXY, pair, workdir=tmp_path, extra=["--auth-timeout-ms", "0"])
    proxy.args = ["prlimit", "--nofile=64:64", "--", *proxy.args]
    proxy.start()
    idle = []
    try:
        deadline = time.time() + 10  # start()'s probe connection is gone: no descriptor frees up later
        while proxy.stats()["proxy"]["clients_active"] != 0:
            assert time.time() < deadline
            time.sleep(0.05)
        for _ in range(70):
            idle.append(connect(proxy))
        # The proxy accepts until its descriptors are used up, then refuses (closes) the rest.
        shed = selectors.DefaultSelector()
        for s in idle:
            shed.register(s, selectors.EVENT_READ)
        assert shed.select(timeout=10), "the proxy never ran out of descriptors"
        shed.close()
        extra = [connect(proxy) for _ in range(5)]  # waiting in the backlog: the old busy loop
        before = cpu_seconds(proxy.proc.pid)
        time.sleep(2)
        spent = cpu_seconds(proxy.proc.pid) - before
        assert spent < 0.5, f"{spent:.2f} s of CPU in 2 s with the descriptors exhausted (a busy loop)"
        for s in extra:
            got = closed_within(s, 3)
            assert got is not None, "a connection beyond the descriptors was left waiting"
            if got:
                assert b"C53300\0" in got
        for s in idle:
            s.close()
        idle.clear()
        deadline = time.time() + 5
        while True:
            try:
                with psycopg.connect(proxy.dsn(), autocommit=True, connect_timeout=5) as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                break
            except psycopg.OperationalError:
                assert time.time() < deadline, "no client served after descriptors were freed"
                time.sleep(0.1)
        assert proxy.stats()["proxy"]["clients_refused"] >= 5
    finally:
        for s in idle:
            s.close()
        stop_proxy(proxy)


def test_proxy_monitor_fatal_is_judged_by_the_nonlocalised_severity(pair, fresh_proxy):
    proxy = fresh_proxy()
    count = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'polarsplit-monitor'"
    deadline = time.time() + 10
    while pair.standby.psql(count) != "1":
        assert time.time() < deadline, "the standby's monitor never connected"
        time.sleep(0.1)
    pair.standby.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = 'polarsplit-monitor'")
    # The server's FATAL is recognised as such (by its 'V' field), before the connection's end.
    deadline = time.time() + 10
    while "monitor of server 1: FATAL 57P01" not in proxy.log_text():
        assert time.time() < deadline, proxy.log_text()[-3000:]
        time.sleep(0.05)
    assert "monitor of server 1: connection lost" not in proxy.log_text()
    # The reader is held out, then back once a new monitor answers.
    deadline = time.time() + 10
    while "is up" not in proxy.log_text():
        assert time.time() < deadline, proxy.log_text()[-3000:]
        time.sleep(0.05)
    assert proxy.log_text().index("is down") < proxy.log_text().index("is up")


def test_wire_helpers_severity_and_startup_keys():
    """The proxy's wire helpers on the messages a localised server sends (c-examples/proxy/
    test_wire.c): 'S' translated, 'V' not; truncated bodies; a duplicate startup key."""
    binary = BUILD / "test-wire"
    if not binary.exists():
        pytest.fail(f"{binary} is not built: run `make -C c-examples`")
    out = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def test_proxy_reader_credentials_are_those_of_the_last_user_key(pair, fresh_proxy):
    proxy = fresh_proxy()
    before = proxy.stats()["proxy"]["reader_no_credentials"]
    # PostgreSQL logs in as the last `user`: app_clear (cleartext, in the credential map). The
    # first one, app_nocreds, has no credentials: looked up by it, the read would stay on the
    # primary with READER_NO_CREDENTIALS.
    packet = startup_pairs([("user", "app_nocreds"), ("database", "app"), ("user", "app_clear")])
    with connect(proxy) as s:
        login(s, packet, password="clear-pw")
        assert query_one(s, "SELECT current_user") == "app_clear"
        # Where the read ran (pg_is_in_recovery() is server-dependent, S-7: the primary answers it).
        assert query_one(s, "SELECT inet_server_port()::text") == str(pair.standby.port), proxy.log_text()[-3000:]
        s.sendall(msg(b"X", b""))
    assert proxy.stats()["proxy"]["reader_no_credentials"] == before


def test_proxy_client_protocol_error_gets_the_08p01_fatal_before_the_close(pair, fresh_proxy):
    proxy = fresh_proxy(asan=True)
    with connect(proxy) as s:
        login(s, startup(user="app_trust", database="app"))
        assert query_one(s, "SELECT 1") == "1"
        s.sendall(msg(b"Q", b"SELECT 2\0") + b"Q\0\0\0\x02")  # a valid query, then a bad length
        got = closed_within(s, 10)
    assert got is not None, "the proxy kept the connection open"
    assert PG_FATAL in got and b"C08P01\0" in got, got
    assert b"polarsplit" in got


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_proxy_event_loop_a_client_that_stops_reading_stalls_its_backend_and_gets_every_row(pair, fresh_proxy):
    """The loop's interest in each descriptor changes while it runs: a client whose output is
    full (HIGH_WATER) stops the reads of the backend that feeds it, and reading again resumes
    them. Three pipelined 20 MB results with the client reading nothing for two seconds: the
    proxy holds a bounded part of them (the rest waits in the servers' sockets), then every row
    and every ReadyForQuery arrives once the client reads (a lost change of interest hangs here,
    bounded by the socket timeout)."""
    proxy = fresh_proxy()
    rows, width, queries = 20000, 1000, 3
    sql = f"SELECT repeat('x', {width}) FROM generate_series(1, {rows})"
    with connect(proxy) as s:
        login(s, startup(user="app_trust", database="app"))
        assert query_one(s, "SELECT 1") == "1"
        base = rss_kib(proxy.proc.pid)
        s.sendall(b"".join(msg(b"Q", sql.encode() + b"\0") for _ in range(queries)))
        time.sleep(2)
        held = rss_kib(proxy.proc.pid) - base
        s.settimeout(10)
        got_rows = rfqs = 0
        where = b""
        while rfqs < queries:
            m = read_msg(s)
            assert m is not None, "the proxy closed the connection"
            tag, body = m
            if tag == b"D":
                got_rows += 1
                assert len(body) == 2 + 4 + width
            elif tag == b"E":
                raise AssertionError(f"query failed: {body!r}")
            elif tag == b"Z":
                rfqs += 1
        where = query_one(s, "SELECT inet_server_port()::text").encode()
        s.sendall(msg(b"X", b""))
    assert got_rows == rows * queries
    # 60 MB were asked for; without the stall the proxy would have buffered most of them.
    assert held < 16 * 1024, f"the proxy grew by {held} KiB while its client read nothing"
    assert where == str(pair.standby.port).encode(), "the reads were not on the standby (the reader path)"


def test_proxy_event_loop_input_larger_than_one_read_is_taken_whole(pair, fresh_proxy):
    """The loop reads a socket until a read comes back short (64 KiB at a time), then waits for
    it again: a Query several reads long, sent at once and then in pieces with pauses, arrives
    whole, and the end of the connection right behind a message is still seen."""
    proxy = fresh_proxy()
    n = 300_000
    q = msg(b"Q", f"SELECT length('{'x' * n}')".encode() + b"\0")
    with connect(proxy) as s:
        login(s, startup(user="app_trust", database="app"))
        s.sendall(q)
        assert read_msg(s)[0] == b"T"
        tag, body = read_msg(s)
        assert tag == b"D" and body[6:].decode() == str(n)
        while read_msg(s)[0] != b"Z":
            pass
        for i in range(0, len(q), 100_000):
            s.sendall(q[i:i + 100_000])
            time.sleep(0.05)
        assert read_msg(s)[0] == b"T"
        tag, body = read_msg(s)
        assert tag == b"D" and body[6:].decode() == str(n)
        while read_msg(s)[0] != b"Z":
            pass
        # Terminate and the close in one go: the proxy ends the session (its writer goes too).
        s.sendall(msg(b"X", b""))
        s.shutdown(socket.SHUT_WR)
        assert closed_within(s, 5) is not None, "the proxy did not close after Terminate"
