"""S-6 (pooled readers carry no client's state to another), with S-5 and S-1a, as a property over
several sessions at once: random sessions of two users with different default search_paths and
privileges (`wire_interleaved.py`) run interleaved step by step on the primary alone and through
the proxy, whose pooled reader connections pass from one session to the next, and every message
each client receives must be the primary alone's, in order, with no hang and no writer backend
left behind. Bounded: `WIRE_INTERLEAVED_SEEDS` and `WIRE_INTERLEAVED_READER_SEEDS` (default 0-11 each, about
20 s each on the shared pair)."""

from __future__ import annotations

import time

import psycopg
import pytest

import wire_difftest as wd
import wire_interleaved as wi
from e2e_support import REPORT, start_proxy, stop_proxy


@pytest.fixture(scope="module")
def interleaved(pair, tmp_path_factory):
    su = pair.primary.dsn(dbname="app")
    with psycopg.connect(su, autocommit=True) as c:
        c.execute(wd.SETUP_SQL)
        c.execute(wi.SETUP_SQL)
    pair.wait_replayed()
    proxy = start_proxy(pair, tmp_path_factory.mktemp("wire-interleaved"))
    args = type("Args", (), {})()
    args.proxy_dsn = proxy.dsn()
    args.primary_dsn = pair.primary.dsn(user="app_trust", dbname="app")
    args.standby_dsn = pair.standby.dsn(user="app_trust", dbname="app")
    args.proxy_log = str(proxy.log)
    args.answer_s = 4.0
    h = wd.Harness(args)
    h.users = wi.USERS
    try:
        yield wi.Interleaved(h)
    finally:
        h.su.close()
        if h.sb is not None:
            h.sb.close()
        stop_proxy(proxy)
        with psycopg.connect(su, autocommit=True) as c:
            c.execute(wi.TEARDOWN_SQL)
            c.execute("ALTER ROLE app_trust IN DATABASE app RESET search_path")
            c.execute("DROP SCHEMA IF EXISTS dtw CASCADE")
            c.execute("DROP SCHEMA IF EXISTS dtwalt CASCADE")
        pair.wait_replayed()


# (sessions, share of reads, session hazards, seeds variable, default seeds): three sessions as
# generated; and four read-heavy sessions that take no hazard (S-4), so that most of their reads
# go to the standby and its pooled connections pass between the users often.
PROFILES = {
    "as_generated": (3, 0.55, True, "WIRE_INTERLEAVED_SEEDS", "0-11"),
    "readers": (4, 0.8, False, "WIRE_INTERLEAVED_READER_SEEDS", "0-11"),
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_s6_interleaved_sessions_of_two_users_answer_as_the_primary_alone(interleaved, profile):
    t0 = time.monotonic()
    sessions, reads, hazards, env, default = PROFILES[profile]
    seeds = wi.seeds_from_env(env, default)
    failures, known, on_standby = [], {}, 0
    for seed in seeds:
        all_steps, users, order = wi.gen_interleaved(seed, sessions, read_weight=reads, hazards=hazards)
        d = interleaved.check(all_steps, users, order)
        on_standby += interleaved.replica
        if d is None:
            continue
        name = wd.known_finding(d)
        if name:
            known[name] = known.get(name, 0) + 1
            continue
        failures.append(f"seed {seed}: {d['kind']} {d.get('detail', '')} session {d.get('session')} "
                        f"({d.get('user')})\n  primary: {d.get('ref_at')}\n  proxy:   {d.get('got_at')}\n"
                        f"  users {users}\n  order {order}\n  steps {all_steps}")
    REPORT.setdefault("interleaved sessions, primary alone vs through the proxy", []).append(
        f"{profile}: {len(seeds)} runs of {sessions} sessions in {time.monotonic() - t0:.0f} s: {len(failures)} new divergences, "
        f"known {known or 0}, {on_standby} statements on the standby; reasons {dict(interleaved.h.reasons.most_common(12))}")
    interleaved.h.reasons.clear()
    assert not failures, "\n".join(failures[:5])
