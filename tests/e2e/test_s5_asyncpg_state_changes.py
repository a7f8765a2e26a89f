"""SPEC S-5, E-1 end to end: a state change sent as Parse/Describe/Flush, then Bind/Execute/Sync —
what asyncpg sends for `fetch()` (and `execute()` with arguments). The batch opens on the writer at
the Flush and its Execute joins later; the engine counted it only as a statement that may write,
never as one that may change the session's state, so no capture followed and reads on the standby
ran with the old role, search_path or placeholder (an examiner's finding of 2026-12-05: 5 of 5
statements, including a NOINHERIT login's `SET ROLE NONE` that kept reading with the role it had
dropped). Each step is compared with the primary alone: three reads after it, with the role, a
placeholder, the search_path's table and what row-level security lets the session see."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from e2e_support import on_primary

READ = ("SELECT current_user::text, current_setting('s5a.zone', true), "
        "(SELECT v FROM s5a_t), (SELECT string_agg(secret, ',' ORDER BY secret) FROM public.s5a_rls)")

STEPS = [
    "SELECT set_config('s5a.zone', 'globex', false)",
    "SELECT set_config('role', 's5a_rr', false)",
    "SET ROLE s5a_rr",
    "SET search_path = s5a_b, public",
    "SELECT set_config('search_path', 's5a_b, public', false)",
]


@pytest.fixture(scope="module")
def s5a(pair):
    on_primary(
        pair,
        "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 's5a_rr') THEN CREATE ROLE s5a_rr; END IF;"
        " IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 's5a_web') THEN"
        " CREATE ROLE s5a_web LOGIN NOINHERIT; END IF; END$$",
        "GRANT s5a_rr TO s5a_web, app_trust",
        "DROP TABLE IF EXISTS public.s5a_t, public.s5a_rls, public.s5a_only_rr",
        "DROP SCHEMA IF EXISTS s5a_b CASCADE",
        "CREATE SCHEMA s5a_b", "GRANT USAGE ON SCHEMA s5a_b TO PUBLIC",
        "CREATE TABLE public.s5a_t (v text)", "INSERT INTO public.s5a_t VALUES ('public')",
        "CREATE TABLE s5a_b.s5a_t (v text)", "INSERT INTO s5a_b.s5a_t VALUES ('s5a_b')",
        "GRANT SELECT ON public.s5a_t, s5a_b.s5a_t TO PUBLIC",
        "CREATE TABLE public.s5a_rls (owner name, secret text)",
        "INSERT INTO public.s5a_rls VALUES ('app_trust', 'mine'), ('s5a_rr', 'rr-secret')",
        "ALTER TABLE public.s5a_rls ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY s5a_p ON public.s5a_rls FOR SELECT USING (owner = current_user)",
        "GRANT SELECT ON public.s5a_rls TO PUBLIC",
        "CREATE TABLE public.s5a_only_rr (x int)", "INSERT INTO public.s5a_only_rr VALUES (1), (2)",
        "GRANT SELECT ON public.s5a_only_rr TO s5a_rr",
    )
    return pair


async def after(port: int, step: str) -> list:
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="app_trust", database="app", ssl=False,
                              timeout=10, command_timeout=10)
    try:
        await c.fetch(step)
        await asyncio.sleep(0.5)  # past the standby's apply delay: the reads may leave the writer
        return [tuple(await c.fetchrow(READ)) for _ in range(3)]
    finally:
        await asyncio.wait_for(c.close(), 10)


async def dropped_role(port: int) -> list:
    """A NOINHERIT login takes a role by simple Query (captured), then drops it by `fetch`."""
    c = await asyncpg.connect(host="127.0.0.1", port=port, user="s5a_web", database="app", ssl=False,
                              timeout=10, command_timeout=10)
    try:
        await c.execute("SET ROLE s5a_rr")
        await asyncio.sleep(0.3)
        await c.fetch("SET ROLE NONE")
        await asyncio.sleep(0.5)
        out = []
        for _ in range(3):
            try:
                out.append(tuple(await c.fetchrow("SELECT current_user::text, count(*) FROM public.s5a_only_rr")))
            except asyncpg.PostgresError as e:
                out.append(("error", e.sqlstate))
        return out
    finally:
        await asyncio.wait_for(c.close(), 10)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("step", STEPS)
def test_s5_e1_a_state_change_sent_as_asyncpg_fetch_rules_the_reads_after_it(s5a, proxy, step):
    direct = asyncio.run(after(s5a.primary.port, step))
    time.sleep(0.2)
    through = asyncio.run(after(proxy.port, step))
    assert through == direct


@pytest.mark.timeout(60)
def test_s5_e1_a_role_dropped_by_asyncpg_fetch_reads_with_no_more_privilege_than_on_the_primary(s5a, proxy):
    direct = asyncio.run(dropped_role(s5a.primary.port))
    assert direct == [("error", "42501")] * 3, direct
    assert asyncio.run(dropped_role(proxy.port)) == direct
