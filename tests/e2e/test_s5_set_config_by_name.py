"""SPEC S-5 end to end: `set_config()` of a setting its text names is followed as a SET of it.

An examiner's finding of 2026-12-05 (an application stack as it is used): Django, with
`USE_TZ = True`, runs `SELECT set_config('TimeZone', 'UTC', false)` on every new connection whose
server TimeZone is not exactly 'UTC' (Debian's is 'Etc/UTC'). The engine took every `set_config`
as code it cannot see into: the session got the unseen-code hazard, and every later read of the
connection — Django keeps its connections — went to the primary (0 of 3,000 reads offloaded). The
same held for the row-level security idiom `SELECT set_config('app.tenant', $1, false)`.

A literal first argument says which setting changed: the capture behind the statement reads the
resulting state (a placeholder asked for by the name the text gives), the replay brings readers to
it, and reads go on to readers. Every answer below is compared with the primary's, and the next
client on a pooled reader must see nothing of the setting."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, bounded, on_primary

SCHEMA = [
    "DROP TABLE IF EXISTS s5sc_rls",
    "CREATE TABLE s5sc_rls (tenant int, secret text)",
    "INSERT INTO s5sc_rls SELECT g % 3 + 1, 'sec-' || g FROM generate_series(1, 9) g",
    "ALTER TABLE s5sc_rls ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY s5sc_p ON s5sc_rls FOR SELECT"
    " USING (tenant = nullif(current_setting('app.s5sc_tenant', true), '')::int)",
    "GRANT SELECT ON s5sc_rls TO PUBLIC",
]

READS = 12


@pytest.fixture(scope="module")
def rls(pair):
    on_primary(pair, *SCHEMA)
    pair.wait_replayed()
    yield
    on_primary(pair, SCHEMA[0])


def django_connection(dsn: str) -> tuple[list, int]:
    """What Django does when it connects with USE_TZ, then reads: the answers (without the port)
    and how many of the reads a standby answered."""
    out, on_standby = [], 0
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 40, "set_config('TimeZone') then reads"):
        c.execute("SELECT set_config('TimeZone', 'UTC', false)")
        time.sleep(0.4)  # nothing was written; the standby (200 ms apply delay) is current
        for _ in range(READS):
            tz, stamp, port = c.execute(
                "SELECT current_setting('TimeZone'), '2026-12-05 10:00:00+01'::timestamptz::text,"
                " inet_server_port()").fetchone()
            out.append((tz, stamp))
            on_standby += port in STANDBY_PORTS
    return out, on_standby


@pytest.mark.timeout(90)
def test_s5_django_set_config_of_timezone_keeps_its_reads_on_readers_with_the_setting(pair, proxy):
    direct, _ = django_connection(pair.primary.dsn(user="app_trust", dbname="app"))
    assert direct == [("UTC", "2026-12-05 09:00:00+00")] * READS, direct
    proxied, on_standby = django_connection(proxy.dsn())
    assert proxied == direct
    # Before: 0 of them (the unseen-code hazard, for the connection's lifetime).
    assert on_standby >= READS - 2, f"{on_standby} of {READS} reads on the standby"


def tenant_session(dsn: str) -> tuple[list, int]:
    """The row-level security idiom: the tenant set by set_config with a bound value, reads, the
    tenant switched, reads; then the answers and how many reads a standby answered."""
    out, on_standby = [], 0
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 40, "set_config('app.tenant') then reads"):
        for tenant in ("2", "3"):
            c.execute("SELECT set_config('app.s5sc_tenant', %s, false)", (tenant,))
            time.sleep(0.4)
            for _ in range(READS // 2):
                rows, port = c.execute(
                    "SELECT string_agg(secret, ',' ORDER BY secret), inet_server_port() FROM s5sc_rls").fetchone()
                out.append((tenant, rows))
                on_standby += port in STANDBY_PORTS
    return out, on_standby


def fresh_client(dsn: str, n: int = 4) -> list:
    """New sessions (on pooled readers, through the proxy): nothing of another's tenant."""
    out = []
    for _ in range(n):
        with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 20, "a fresh client's read"):
            out.append(c.execute(
                "SELECT current_setting('app.s5sc_tenant', true), count(*) FROM s5sc_rls").fetchone())
    return out


@pytest.mark.timeout(120)
def test_s5_set_config_of_a_placeholder_named_in_the_text_is_replayed_and_leaves_nothing_behind(pair, proxy, rls):
    direct, _ = tenant_session(pair.primary.dsn(user="app_trust", dbname="app"))
    assert direct == [("2", "sec-1,sec-4,sec-7")] * (READS // 2) + [("3", "sec-2,sec-5,sec-8")] * (READS // 2)
    proxied, on_standby = tenant_session(proxy.dsn())
    assert proxied == direct
    assert on_standby >= READS - 4, f"{on_standby} of {READS} reads on the standby"
    primary_fresh = fresh_client(pair.primary.dsn(user="app_trust", dbname="app"))
    assert primary_fresh == [(None, 0)] * 4
    assert fresh_client(proxy.dsn()) == primary_fresh


@pytest.mark.timeout(90)
def test_s5_set_config_whose_setting_the_text_does_not_name_keeps_the_session_on_the_primary(pair, proxy, rls):
    """The name computed: the capture cannot know which placeholder to ask for (the safe side)."""
    sql = "SELECT set_config('app.' || 's5sc_tenant', '2', false)"
    with psycopg.connect(proxy.dsn(), autocommit=True) as c, bounded(c, 30, "a computed name then reads"):
        c.execute(sql)
        time.sleep(0.4)
        got = [c.execute("SELECT count(*), inet_server_port() FROM s5sc_rls").fetchone() for _ in range(4)]
    assert [n for n, _ in got] == [3] * 4
    assert not any(port in STANDBY_PORTS for _, port in got), got


def set_config_then_write(dsn: str) -> tuple:
    """A state change while the capture of an earlier one is in flight, then a write at once."""
    with psycopg.connect(dsn, autocommit=True) as c, bounded(c, 30, "SET, set_config, a write, a read"):
        c.execute("SET app.s5sc_other = 'o'")
        c.execute("SELECT set_config('TimeZone', 'Asia/Tokyo', false), set_config('app.s5sc_tenant', '2', false)")
        c.execute("UPDATE kv SET v = v WHERE k = -1")
        time.sleep(0.4)
        return c.execute("SELECT current_setting('TimeZone'), current_setting('app.s5sc_tenant', true),"
                         " current_setting('app.s5sc_other', true)").fetchone()


@pytest.mark.timeout(120)
def test_s5_a_capture_in_flight_is_ended_by_its_own_batch_not_by_a_probe_before_it(pair, proxy):
    """An examiner's finding of 2026-12-05: the probe batch behind the set_config (a statement
    that may write) answered while the capture due after it rode behind the write; its
    ReadyForQuery was taken for the capture's, the session's state became nothing, and the reads
    ran on the standby without any of the session's settings (3 of 10)."""
    direct = set_config_then_write(pair.primary.dsn(user="app_trust", dbname="app"))
    assert direct == ("Asia/Tokyo", "2", "o")
    through = [set_config_then_write(proxy.dsn()) for _ in range(8)]
    assert through == [direct] * 8, through
