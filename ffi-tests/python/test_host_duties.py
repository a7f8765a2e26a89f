"""The host's duties besides bytes and events, from Python through the C ABI: time (R-1b
next_deadline/on_timeout), a forwarded cancel (F-1), the writer's identity in the tokens (C-1)."""

import polarsplit as ps

STOCK = {"server_dialect": "stock", "startup_profile": "off", "reader_response_timeout_ms": "6000"}


def ready_host(engine) -> ps.Host:
    host = ps.Host(engine.session())
    host.client(ps.startup(user="app", database="db"))
    host.event(100, ps.WRITER_CONNECTED)
    host.backend(100, ps.auth_ok() + ps.rfq("I"))
    host.answer_startup_capture(100)  # S-5: the capture behind the startup
    host.take_client()
    return host


def read_on_reader(host, sql="SELECT 1"):
    acts = host.client(ps.query(sql))
    acquire = [a for a in acts if a.kind == "ACQUIRE_READER"]
    assert len(acquire) == 1, acts
    host.event(201, ps.READER_ATTACHED, acquire[0].server, ps.FLAG_FRESH)
    assert ps.queries(host.take_sent(201)) == [sql]


def test_r1b_deadline_then_timeout_reruns_the_read_on_the_writer():
    engine = ps.Engine(STOCK, readers={1: 1})
    host = ready_host(engine)
    assert host.s.next_deadline() is None
    read_on_reader(host)
    at = host.s.next_deadline()
    assert at == host.s.now + 6000
    assert host.timeout(at - 1) == [] and host.s.next_deadline() == at
    kinds = [a.kind for a in host.timeout(at)]
    assert "CLOSE_BACKEND" in kinds, kinds
    assert ps.queries(host.take_sent(100)) == ["SELECT 1"]  # re-run on the writer (F-2)
    assert host.s.next_deadline() is None
    assert engine.counters()["reader_deadlines"] == 1


def test_f1_cancel_forwarded_closes_the_reader_instead_of_releasing_it():
    for cancel in (False, True):
        engine = ps.Engine(STOCK, readers={1: 1})
        host = ready_host(engine)
        read_on_reader(host)
        conn = host.s.executing_conn()
        assert conn == 201
        if cancel:
            host.s.cancel_forwarded(conn)
        kinds = [a.kind for a in host.backend(201, ps.select_result("1") + ps.rfq("I"))]
        assert ("CLOSE_BACKEND" in kinds) == cancel and ("RELEASE_READER" in kinds) != cancel, kinds
        assert engine.counters()["cancelled_readers_closed"] == int(cancel)


def test_c1_writer_identity_is_the_history_of_the_token():
    engine = ps.Engine({"server_dialect": "awide"}, readers={1: 1})
    assert engine.set_writer_identity(0, 7301234567890123456, 3) == 1
    host = ready_host(engine)
    host.client(ps.query("SHOW polarsplit.causal_token"))
    assert b"ps1:7301234567890123456.3:0/0" in host.take_client()
    assert host.take_sent(100) == b""  # answered by the engine
    assert engine.set_writer_identity(0, 7301234567890123456, 4) == 2  # a promotion: a new history
    engine.connection_closed(201)  # harmless for a connection the engine never saw
