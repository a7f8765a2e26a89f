"""Transcript tests through the C ABI from Python (ctypes): the way an integrator prototypes a host.
Names cite the SPEC requirement each proves."""

import polarsplit as ps

WRITER, READER = 100, 201
AWIDE = {"server_dialect": "awide", "startup_profile": "v15"}
STOCK = {"server_dialect": "stock", "startup_profile": "off"}


def connected(settings, lsn=None):
    engine = ps.Engine(settings, readers={1: 1, 2: 1})
    host = ps.Host(engine.session(client=("10.0.0.7", 40000), proxy=("127.0.0.1", 6432)))
    acts = host.client(ps.startup(user="app", database="db"))
    connect = [a for a in acts if a.kind == "CONNECT_WRITER"]
    assert len(connect) == 1
    host.event(WRITER, ps.WRITER_CONNECTED)
    host.backend(WRITER, ps.auth_ok() + ps.rfq("I", lsn))
    host.answer_startup_capture(WRITER)  # S-5: the capture behind the startup
    assert ps.tags(host.take_client()) == "RZ"
    return engine, host, connect[0].bytes


def test_w1_startup_keys_only_for_polardb_profiles():
    _, _, startup = connected(AWIDE, lsn=0x1000)
    assert b"_polar_proxy_send_lsn" in startup and b"10.0.0.7" in startup
    _, _, startup = connected(STOCK)
    assert b"_polar" not in startup


def test_w4_write_then_read_waits_on_a_reader_with_the_exact_wrapper():
    engine, host, _ = connected(AWIDE, lsn=0x1000)
    host.client(ps.query("INSERT INTO t VALUES (1)"))
    assert host.decisions()[-1].outcome == "FORCE_PRIMARY"
    assert ps.queries(host.take_sent(WRITER)) == ["INSERT INTO t VALUES (1)"]
    host.backend(WRITER, ps.command_complete("INSERT 0 1") + ps.rfq("I", 97500059720))
    host.take_client()

    acts = host.client(ps.query("SELECT v FROM t WHERE k = 1"))
    acquire = [a for a in acts if a.kind == "ACQUIRE_READER"]
    assert len(acquire) == 1 and acquire[0].key[1] != 0
    host.event(READER, ps.READER_ATTACHED, acquire[0].server, ps.FLAG_FRESH)
    d = host.decisions()[-1]
    assert (d.outcome, d.reason, d.wait, d.target_lsn) == ("REPLICA_WITH_WAIT", "READ_WAIT", True, 97500059720)
    assert ps.queries(host.take_sent(READER)) == [
        "SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 1000; "
        "SET polar_xact_split_wait_lsn = '97500059720'; SELECT v FROM t WHERE k = 1"
    ]
    acts = host.backend(READER, ps.command_complete("SET") * 3 + ps.select_result("7") + ps.rfq("I", 97500059800))
    assert ps.tags(host.take_client()) == "TDCZ"  # hidden results swallowed, a standard RFQ (P-8)
    assert any(a.kind == "RELEASE_READER" and a.conn == READER for a in acts)
    assert host.balanced()  # forwarded + discarded = fed
    assert engine.counters()["waits_sent"] == 1
    assert engine.outcomes()["REPLICA_WITH_WAIT"] == 1
    assert engine.reasons() == {"NOT_A_READ": 1, "READ_WAIT": 1}


def test_p3_stock_reads_leave_the_writer_until_the_first_write():
    engine, host, _ = connected(STOCK)
    acts = host.client(ps.query("SELECT 1"))
    acquire = [a for a in acts if a.kind == "ACQUIRE_READER"][0]
    assert b"_polar" not in acquire.bytes
    host.event(READER, ps.READER_ATTACHED, acquire.server, ps.FLAG_FRESH)
    assert host.decisions()[-1].reason == "READ_NO_TARGET"
    assert ps.queries(host.take_sent(READER)) == ["SELECT 1"]  # nothing in front: no wait on stock
    host.backend(READER, ps.select_result("1") + ps.rfq("I"))
    assert ps.tags(host.take_client()) == "TDCZ"

    host.client(ps.query("UPDATE t SET v = 2"))
    # W-7: the probe (an engine-named extended statement) rides in the same write.
    assert ps.tags(host.take_sent(WRITER)) == "QCPBCES"
    host.backend(WRITER, ps.command_complete("UPDATE 1") + ps.rfq("I"))
    assert engine.counters()["missing_lsn"] == 1
    # A read waits for the probe's answer; no standby is known to have replayed the write,
    # and stock PostgreSQL 15 cannot wait: the writer.
    n = len(host.decisions())
    host.client(ps.query("SELECT v FROM t"))
    assert len(host.decisions()) == n, "not decided before the probe answered"
    row = ps.msg("D", b"\x00\x01\x00\x00\x00\x060/5000")
    host.backend(WRITER, ps.steps() + row + ps.command_complete("SELECT 1") + ps.rfq("I"))
    d = host.decisions()[-1]
    assert (d.outcome, d.reason) == ("FORCE_PRIMARY", "READ_NO_BOUNDED_WAIT")
    assert ps.queries(host.take_sent(WRITER))[-1] == "SELECT v FROM t"
    assert ps.tags(host.take_client()) == "CZ", "nothing of the probe"


def test_p4_user_without_reader_credentials_never_leaves_the_writer():
    engine, host, _ = connected(STOCK)
    host.client(ps.query("SELECT 1"))
    host.event(0, ps.READER_UNAVAILABLE, 1, ps.FLAG_NO_CREDENTIALS)
    d = host.decisions()[-1]
    assert (d.outcome, d.reason) == ("FORCE_PRIMARY", "READER_NO_CREDENTIALS")
    assert ps.queries(host.take_sent(WRITER)) == ["SELECT 1"]
    host.backend(WRITER, ps.select_result("1") + ps.rfq("I"))
    acts = host.client(ps.query("SELECT 2"))
    assert not any(a.kind == "ACQUIRE_READER" for a in acts)  # never asked again
    assert host.decisions()[-1].reason == "READER_NO_CREDENTIALS"


def test_f1_reader_lost_before_rows_retries_then_writer():
    engine, host, _ = connected(STOCK)
    acts = host.client(ps.query("SELECT 1"))
    server = [a for a in acts if a.kind == "ACQUIRE_READER"][0].server
    host.event(READER, ps.READER_ATTACHED, server, ps.FLAG_FRESH)
    acts = host.event(READER, ps.CONNECTION_LOST)
    # F-2 default replica_then_primary: one more reader first.
    other = [a for a in acts if a.kind == "ACQUIRE_READER"]
    assert other and other[0].server != server
    host.event(0, ps.READER_UNAVAILABLE, other[0].server)
    assert ps.queries(host.take_sent(WRITER)) == ["SELECT 1"]
    host.backend(WRITER, ps.select_result("1") + ps.rfq("I"))
    assert ps.tags(host.take_client()) == "TDCZ"


def test_drain_rule_is_enforced():
    engine = ps.Engine(STOCK, readers={1: 1})
    s = engine.session()
    st = ps.lib.polarsplit_session_recv_client(s._s, ps.startup(user="u"), len(ps.startup(user="u")), 1, None)
    assert st == ps.OK
    st = ps.lib.polarsplit_session_recv_client(s._s, ps.query("SELECT 1"), 14, 1, None)
    assert st == ps.ERR_BAD_STATE
    assert s.drain()


def test_f3_refused_after_row_description():
    """A SELECT calling a function that writes: PostgreSQL sends RowDescription, then the standby's
    25006. The reader's RowDescription is held until its first row, so the statement is re-run on
    the primary (F-2) and nothing of the reader's attempt reaches the client."""
    engine, host, _ = connected(STOCK)
    # The hint declares the (unknown) function read-safe: F-policy.
    acts = host.client(ps.query("/* route=reader */ SELECT log_note('hello')"))
    server = [a for a in acts if a.kind == "ACQUIRE_READER"][0].server
    host.event(READER, ps.READER_ATTACHED, server, ps.FLAG_FRESH)
    row_desc = ps.msg("T", b"\x00\x01log_note\x00" + bytes(18))
    host.backend(READER, row_desc + ps.error("25006", "cannot execute INSERT in a read-only transaction") + ps.rfq("I"))
    assert ps.tags(host.take_client()) == ""
    assert ps.queries(host.take_sent(WRITER)) == ["/* route=reader */ SELECT log_note('hello')"]
