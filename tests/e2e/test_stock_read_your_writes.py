"""Read-your-writes on stock PostgreSQL with real offload (issue 11): after a write the library
learns its position (post-commit probe, writer samples) and sends the session's reads to the
standby as soon as the monitor has seen it replay that far — never earlier, never stale.

Run on the real pair with the 200 ms apply delay and with none; the share of post-write reads the
standby served is printed (pytest -s) and checked: with no delay, most of them once the monitor
interval has passed."""

import time

import psycopg
import pytest

from e2e_support import ports

ROUNDS = 60
# The proxy's monitors sample every 10 ms: wait a few intervals before the read.
AFTER_WRITE_S = 0.05


@pytest.mark.parametrize("delay_ms", [200, 0])
def test_i11_post_write_reads_are_never_stale_and_offloaded_once_replayed(pair, proxy, delay_ms, capsys):
    pair.set_apply_delay(delay_ms)
    key = 500 + delay_ms
    try:
        with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as p:
            p.execute("INSERT INTO kv VALUES (%s, 0) ON CONFLICT (k) DO UPDATE SET v = 0", (key,))
        pair.wait_replayed()
        before = proxy.stats()
        stale = on_standby = 0
        # One session: its reads follow its own writes.
        with psycopg.connect(proxy.dsn(), autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            for i in range(1, ROUNDS + 1):
                c.execute("UPDATE kv SET v = %s WHERE k = %s", (i, key))
                time.sleep(AFTER_WRITE_S)
                v, port = c.execute("SELECT v, inet_server_port() FROM kv WHERE k = %s", (key,)).fetchone()
                stale += v != i
                on_standby += ports(pair)[port] == "standby"
        after = proxy.stats()
    finally:
        pair.set_apply_delay(200)
    learned = after["counter"]["targets_learned"] - before["counter"]["targets_learned"]
    probes = after["counter"]["probes_sent"] - before["counter"]["probes_sent"]
    with capsys.disabled():
        print(
            f"\n  apply delay {delay_ms} ms: {on_standby}/{ROUNDS} post-write reads served by the standby "
            f"({100 * on_standby / ROUNDS:.0f}%), {stale} stale; {probes} probes, {learned} positions learned"
        )
    assert stale == 0
    assert learned >= ROUNDS // 2, "the writes' positions were learned"
    if delay_ms == 0:
        assert on_standby > ROUNDS // 2, "with no apply delay most post-write reads use the standby"
    else:
        # 50 ms after the write a standby 200 ms behind has not replayed it: the primary answers.
        assert on_standby < ROUNDS // 4
