"""Reader faults a host reports itself, its back-off, the Prometheus text and the writer's function
catalogue, from Python through the C ABI (SPEC R-1a, R-1b, §9, F-policy) — the calls the example
proxy makes, in the order it makes them."""

import polarsplit as ps

STOCK = {"server_dialect": "stock", "startup_profile": "off"}


def ready_host(engine) -> ps.Host:
    host = ps.Host(engine.session())
    host.client(ps.startup(user="app", database="db"))
    host.event(100, ps.WRITER_CONNECTED)
    host.backend(100, ps.auth_ok() + ps.rfq("I"))
    host.answer_startup_capture(100)  # S-5: the capture behind the startup
    host.take_client()
    return host


def acquire(host, sql):
    acts = host.client(ps.query(sql))
    return [a for a in acts if a.kind == "ACQUIRE_READER"]


def test_r1b_a_host_that_honours_the_back_off_sends_reads_to_the_writer_until_a_later_sample():
    engine = ps.Engine(STOCK, readers={1: 1})
    assert engine.reader_retry_after(1) is None and engine.reader_held_out(1) is False
    # The host's own connection attempts fail (a refused TCP connect, a 57P03 refusal).
    assert engine.reader_connect_failed(1, 1000) == ps.OK
    assert engine.reader_connect_failed(1, 1200, starting_up=True) == ps.OK
    assert engine.reader_retry_after(1) == 1600
    # A session asks for a reader: the host has none pooled and the back-off says not yet, so it
    # answers READER_UNAVAILABLE (no failure of the reader) and the writer answers the read.
    host = ready_host(engine)
    host.s.now = 1300
    got = acquire(host, "SELECT 1")
    assert [a.server for a in got] == [1]
    host.event(0, ps.READER_UNAVAILABLE, 1, 0)
    assert ps.queries(host.take_sent(100)) == ["SELECT 1"]
    counters = engine.counters()
    assert counters["reader_connect_failures"] == 2 and counters["reader_starting_up"] == 1
    assert counters["reader_failures"] == 2
    # Third failure, from the host's monitor: held out; sessions no longer ask for it.
    assert engine.reader_monitor_failed(1, 1400) == ps.OK
    assert engine.reader_held_out(1) is True
    host.backend(100, ps.select_result("1") + ps.rfq("I"))
    # Behind a read the writer served on a stock server, the library's probe positions what it
    # saw (S-1a): answered (the Close, Parse, Bind and Close, the position, CommandComplete, RFQ).
    host.backend(100, ps.probe_answer("0/2000"))
    host.take_client()
    assert acquire(host, "SELECT 2") == []
    assert ps.queries(host.take_sent(100)) == ["SELECT 2"]
    host.backend(100, ps.select_result("2") + ps.rfq("I"))
    host.backend(100, ps.probe_answer("0/2000"))
    # The monitor samples again (query sent after the latest failure): back in, no back-off.
    assert engine.reader_sample(1, 0x3000, 1500) == ps.OK
    assert engine.reader_held_out(1) is False and engine.reader_retry_after(1) is None
    assert [a.server for a in acquire(host, "SELECT 3")] == [1]
    assert engine.counters()["readers_back_in"] == 1


def test_r1a_fault_reports_show_in_the_prometheus_gauges():
    engine = ps.Engine(STOCK, readers={1: 1})
    known = 'polarsplit_reader_position_known{server="1",hostgroup="1"} '
    engine.reader_sample(1, 0x4000, 1000)
    assert known + "1\n" in engine.prometheus()
    assert engine.reader_lost(1, 2000) == ps.OK
    text = engine.prometheus()
    assert known + "0\n" in text
    assert 'polarsplit_reader_consecutive_failures{server="1",hostgroup="1"} 1\n' in text
    assert "\npolarsplit_reader_outages_total 1\n" in text
    engine.reader_sample(1, 0x4000, 2001)
    assert known + "1\n" in engine.prometheus()
    # Unknown readers: DONE, nothing changes.
    for call in (engine.reader_lost, engine.reader_monitor_failed, engine.reader_outage):
        assert call(9, 3000) == ps.DONE
    assert engine.reader_connect_failed(9, 3000) == ps.DONE
    assert engine.set_reader_health_at(9, False, 3000) == ps.DONE
    assert engine.reader_held_out(9) is None and engine.reader_retry_after(9) is None
    assert "\npolarsplit_reader_outages_total 1\n" in engine.prometheus()


def test_f_policy_the_catalogue_decides_user_function_calls_per_database():
    engine = ps.Engine(STOCK, readers={1: 1})
    engine.reader_sample(1, 0x1000, 500)
    sql = "SELECT f_stable_read()"
    assert acquire(ready_host(engine), sql) == []  # control: unknown, the writer
    assert engine.set_function_catalog("db", [("public", "f_stable_read", ps.STABLE),
                                              ("public", "f_volatile", ps.VOLATILE)]) == ps.OK
    assert len(acquire(ready_host(engine), sql)) == 1
    assert acquire(ready_host(engine), "SELECT f_volatile()") == []
    # Dropped and recreated as volatile: the next catalogue says so.
    assert engine.set_function_catalog("db", [("public", "f_stable_read", ps.VOLATILE)]) == ps.OK
    assert acquire(ready_host(engine), sql) == []
    assert engine.set_function_catalog("db", [("public", "", ps.STABLE)]) == ps.ERR_INVALID_ARGUMENT
    assert engine.set_function_catalog("db", [("public", "g", ord("x"))]) == ps.ERR_INVALID_ARGUMENT
    assert engine.remove_function_catalog("db") == ps.OK and engine.remove_function_catalog("db") == ps.DONE
    assert engine.set_writer_server_version(150018) == ps.OK
    assert engine.reasons().get("UNKNOWN_FUNCTION", 0) >= 1 and engine.reasons().get("USER_FUNCTION", 0) >= 2
