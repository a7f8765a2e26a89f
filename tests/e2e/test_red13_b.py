"""Examiner round 13, area b (red13-b): drivers' prepared statements — offload and state across
clients (SPEC E-2, S-5, S-6, P-3), through the example proxy against the real primary + hot
standby, each answer compared with a twin session on the primary alone; where a read ran is told
by inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded (statement_timeout
5 s, connect_timeout, e2e_support.bounded via `run`, asyncio.wait_for).

Found (main at 55f10fe, 3 of 3 runs):

Finding 1 (E-2 offload; the last round's lead): **`SET app.tenant = …` keeps every statement the
session prepared before it on the primary for the rest of the session** when its text holds a
literal (any `'…'`, `NULL`, a dollar quote or non-ASCII: `current_setting('app.tenant', true)`
itself). psycopg with `prepare_threshold=0`, two concurrent sessions, each switching `SET ROLE`
and `SET app.tenant = '…'` between reads of an RLS table: 2 of 16 reads per session on the
standby (reasons: `STATEMENT_LEXED_OTHERWISE` 38 of 40 decisions of the reads); answers right.
The same workload with `set_config('app.tenant', %s, false)` instead of SET: 16 of 16; with the
SET but no prepared statements (prepare_threshold=None): 16 of 16; SET ROLE alone costs nothing.
The README promises drivers that prepare "the same offload as simple queries" and counts only
"SET or RESET of anything but `search_path` and the settings known not to touch a parse" — and
the engine does know a placeholder touches no parse: `scan.rs` (set_config's name: a dotted name
sets `set_config_placeholder`, never `set_config_parse_setting`). Mechanism: `route.rs`
`changes_parse_rules` → `effects::may_change_parse_rules` → `Var::from_name("app.tenant")` is
`Var::Other`, and `Var::leaves_parse_alone` (classify/types.rs) is false for `Other`; so
`mirror_before_rules_change` bumps `ClientStatements::rules`, and `lexed_otherwise_stmt`
(statements.rs) refuses every older statement with a literal (batch.rs, `StatementLexedOtherwise`)
for good — the driver never parses it again, and the capture's settle
(`writer.rs::settle_parse_rules`) only helps when the whole state is unchanged. (The same cost
for `SET work_mem`, `SET jit`, … is what the README's "any setting the engine does not know"
names; the placeholder is not one it does not know.)

Finding 2 (E-2 offload with S-5's capture): **asyncpg's Pool sends the next acquirer's first
prepared reads to the primary.** A Pool resets each connection it takes back with `SELECT
pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;` (asyncpg 0.30 `_get_reset_query`).
RESET ALL counts as a change of the parse rules; the capture that follows finds the state
unchanged and settles the rules again (`settle_parse_rules`) — but a read that arrives before
that capture has answered is decided at once, `STATEMENT_LEXED_OTHERWISE`, on the primary,
instead of waiting for the capture as the README says reads do "until the state is known". Two
workers sharing a 2-connection Pool, 10 acquires each, two reads per acquire, no session state
at all: 4 of 40 reads on the standby (36 `STATEMENT_LEXED_OTHERWISE`). One connection, `RESET
ALL` then an immediate read: 1 of 10 on the standby; with 5 ms between them 9 of 10, with 50 ms
10 of 10; a read 0.1 s after the immediate one: 10 of 10. Mechanism: batch.rs's Bind check
(`lexed_otherwise_stmt`) runs before, and regardless of, the pending capture (`settings.known`);
the rules are only settled in `writer.rs` when the capture's rows arrive.

Probed, held (answers equal to the primary's twin, not kept as tests): the four combinations of
psycopg prepare_threshold 0/None × `set_config`/SET for the tenant, two concurrent sessions
switching SET ROLE (two roles and none) and app.tenant over an RLS policy reading current_user
and current_setting (64 reads, all equal); asyncpg Pools with per-acquire `SET ROLE` and
`set_config`/SET of the tenant (120 reads, all equal); asyncpg `RESET ALL`, `CLOSE ALL`,
`UNLISTEN *`, `pg_advisory_unlock_all()` and asyncpg's whole reset query between reads, with 50
ms pauses (10 of 10 on the standby each, with and without a literal); reads without a literal
after `SET app.tenant` / `SET work_mem` (10 of 10 on the standby); `plpgsql.extra_warnings`
with a shadowing plpgsql STABLE function (no call-time WARNING on either server); psycopg
prepare_threshold 0 and 2, two concurrent sessions each (same `_pg3_n` names on one pooled reader):
a prepared read re-resolved after `SET search_path` between two schemas' same-named tables and
after RESET search_path (42P01 as on the primary), `SET ROLE` switching a `"$user"` schema's
shadowing table (the primary re-parses; the standby's answers equal), `DISCARD ALL` and
`DEALLOCATE ALL` then the same texts prepared again under the same names, `DEALLOCATE _pg3_0`
then the same name re-prepared (84 steps, all equal to the twin's answers and SQLSTATEs).
"""

from __future__ import annotations

import threading

import pytest

from e2e_support import STANDBY_PORTS, asyncpg_pool_reads, connect, on_primary, ran_on, reasons_since, run, warm

SETUP = [
    "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'red13b_a') THEN CREATE ROLE red13b_a; END IF;"
    " IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'red13b_b') THEN CREATE ROLE red13b_b; END IF; END$$",
    "GRANT red13b_a, red13b_b TO app_trust",
    "CREATE TABLE red13b_rls (owner name, tenant text, v int)",
    "INSERT INTO red13b_rls VALUES ('red13b_a', 't1', 1), ('red13b_b', 't2', 2), ('app_trust', 't1', 3),"
    " ('x', 't2', 4), ('x', 't3', 5)",
    "ALTER TABLE red13b_rls ENABLE ROW LEVEL SECURITY",
    "CREATE POLICY red13b_p ON red13b_rls USING (owner = current_user OR tenant = current_setting('app.tenant', true))",
    "GRANT SELECT ON red13b_rls TO PUBLIC",
]
DROP = ["DROP TABLE IF EXISTS red13b_rls", "DROP ROLE IF EXISTS red13b_a", "DROP ROLE IF EXISTS red13b_b"]


@pytest.fixture(scope="module")
def objects(pair):
    on_primary(pair, *DROP, *SETUP)
    pair.wait_replayed()
    try:
        yield pair
    finally:
        on_primary(pair, *DROP)



# -- Finding 1: SET of a placeholder strands the session's prepared statements on the primary ------

READ = ("SELECT current_user, current_setting('app.tenant', true),"
        " (SELECT array_agg(v ORDER BY v) FROM red13b_rls WHERE v > %s), inet_server_port()")
SEQ = [("red13b_a", "t1"), ("red13b_b", "t2"), (None, "t3"), ("red13b_a", "t2")] * 2


def tenant_session(dsn: str, proxied: bool, how: str, threshold, out: list) -> None:
    """Switches role and tenant, then two reads, for each step of SEQ: (role, tenant, answer, where)."""
    with connect(dsn, prepare_threshold=threshold) as c:
        if proxied:
            warm(c)
        for role, tenant in SEQ:
            run(c, f"SET ROLE {role}" if role else "RESET ROLE")
            if how == "SET":
                run(c, f"SET app.tenant = '{tenant}'")
            else:
                run(c, "SELECT set_config('app.tenant', %s, false)", (tenant,))
            for _ in range(2):
                row = run(c, READ, (0,))[0]
                out.append((role, tenant, row[:-1], ran_on(row[-1])))


def two_sessions(proxy, how, threshold):
    outs, errors = [[], []], []

    def one(i):
        try:
            tenant_session(proxy.dsn(), True, how, threshold, outs[i])
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return outs


@pytest.mark.timeout(120)
def test_e2_set_of_a_placeholder_keeps_no_prepared_read_off_the_standby(objects, proxy):
    twin = []
    tenant_session(objects.primary.dsn(dbname="app", user="app_trust"), False, "SET", 0, twin)
    # The control: the same sessions setting the tenant with set_config (also prepared).
    control = two_sessions(proxy, "set_config", 0)
    before = proxy.stats()["reason"]
    outs = two_sessions(proxy, "SET", 0)
    reasons = reasons_since(proxy, before)
    for o in control + outs:
        assert [r[:3] for r in o] == [r[:3] for r in twin], (o, twin)
    share_control = [sum(r[3] == "standby" for r in o) for o in control]
    share = [sum(r[3] == "standby" for r in o) for o in outs]
    assert min(share_control) >= 12, f"control (set_config): {share_control} of 16 on the standby"
    assert min(share) >= 12, (
        f"psycopg prepare_threshold=0, SET ROLE and SET app.tenant between reads: {share} of 16 reads per "
        f"session on the standby (with set_config instead of SET: {share_control} of 16); reasons {reasons}")


# -- Finding 2: asyncpg's Pool reset sends the next acquirer's first reads to the primary -----------

APG_READ = ("SELECT current_user::text, current_setting('app.tenant', true),"
            " (SELECT array_agg(v ORDER BY v) FROM red13b_rls WHERE v > $1), inet_server_port()")



@pytest.mark.timeout(120)
def test_e2_s5_asyncpg_pool_reads_after_its_reset_reach_the_standby(objects, proxy):
    twin = asyncpg_pool_reads(objects.primary.port, APG_READ)
    before = proxy.stats()["reason"]
    out = asyncpg_pool_reads(proxy.port, APG_READ)
    reasons = reasons_since(proxy, before)
    assert sorted(a for a, _ in out) == sorted(a for a, _ in twin), (out, twin)
    on_standby = sum(p in STANDBY_PORTS for _, p in out)
    assert on_standby >= 30, (
        f"asyncpg Pool (reset query ending in RESET ALL at each release), no session state: {on_standby} of "
        f"{len(out)} prepared reads on the standby; reasons {reasons}")
