"""Several client sessions at once, interleaved step by step, on the primary alone and through the
proxy (SPEC S-6, S-5, S-1a): a pooled reader connection that one session used serves the next
session that reads, so whatever one client left on it (settings, role, search_path, prepared
statements under the same names, imports) must not reach another. The sessions log in as two
users whose defaults differ (`search_path`, `TimeZone`, `extra_float_digits`, privileges), some
with startup options of their own, so a reader connection that keeps another login's state
answers visibly differently.

Each session is a `wire_difftest.gen_session` session. A seeded schedule runs their steps in one
global order; after every step the run through the proxy waits until the standby has replayed
every commit of the primary, so a read of another session's committed write is not stale (S-1a promises a session
only what it observed) and every difference is a defect. Lock waits between the sessions end by
`lock_timeout` (given at login, so every run sees the same error at the same step); notifications
between the sessions arrive while the receiver is idle, between steps, in both runs. Each
session's messages are compared in order with the primary alone's."""
from __future__ import annotations

import os
import random
import re
import socket
import struct
import time

import wire_difftest as wd
from test_red2_findings import RawConn, _z

# A second login with its own default search_path (dtwalt first: `kv` is dtwalt.kv to it) and
# fewer privileges (no `ev`; `acct` read-only), so a read run as the other user answers differently.
SETUP_SQL = r"""
DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dtw_u2') THEN CREATE ROLE dtw_u2 LOGIN; END IF; END$$;
GRANT dtw_low TO dtw_u2;
GRANT USAGE ON SCHEMA dtw, dtwalt TO dtw_u2;
GRANT SELECT ON dtw.acct, dtw.acct_tot, dtw.kv TO dtw_u2;
GRANT SELECT, INSERT, UPDATE ON dtwalt.kv TO dtw_u2;
GRANT USAGE, SELECT, UPDATE ON SEQUENCE dtw.seq1 TO dtw_u2;
ALTER ROLE dtw_u2 IN DATABASE app SET search_path = dtwalt, dtw;
ALTER ROLE dtw_u2 IN DATABASE app SET TimeZone = 'Asia/Kolkata';
ALTER ROLE dtw_u2 IN DATABASE app SET extra_float_digits = 0;
"""

TEARDOWN_SQL = "ALTER ROLE dtw_u2 IN DATABASE app RESET ALL"

# Startup options a session may add to its login (S-5: the login's state is the writer's too).
LOGIN_OPTIONS = ["", "", "-c search_path=dtwalt,dtw", "-c TimeZone=America/New_York", "-c app.tag=login",
                 "-c DateStyle=German", "-c statement_timeout=5s"]

USERS = ("app_trust", "dtw_u2")

# Lock waits between the sessions (a row another session's open block updated, an advisory lock
# it holds) end with 55P03 this long after they start, inside the step that waits.
LOCK_TIMEOUT_MS = 150


class LoginConn(RawConn):
    """A raw v3 connection whose StartupMessage also carries `options`."""

    def __init__(self, host, port, user, db, timeout, options):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = (struct.pack(">I", 196608) + _z("user") + _z(user) + _z("database") + _z(db)
                + _z("options") + _z(options) + b"\0")
        self.s.sendall(struct.pack(">I", len(body) + 4) + body)
        self.buf = b""
        self.eof = False


def gen_interleaved(seed, sessions=3, max_steps=10, read_weight=0.55, hazards=True):
    """The sessions' steps, their logins (user, extra startup options) and the global order of
    (session, step index). Without `hazards` no session takes state that keeps its reads on the writer (S-4), so more of them
    go to the standby's pooled connections."""
    R = random.Random(seed * 104729 + 17)
    avoid = set() if hazards else {"hazards"}
    all_steps = [wd.gen_session(seed * 1000 + j, max_steps, avoid, read_weight) for j in range(sessions)]
    users = [(USERS[j % 2] if R.random() < 0.8 else R.choice(USERS), R.choice(LOGIN_OPTIONS))
             for j in range(sessions)]
    # A step that leaves an Execute behind its last Sync, Flush or Query: the primary alone may
    # run it as it arrives, the proxy holds the batch until it is routed (E-1) — when its Sync
    # comes. Within the session nothing tells the two apart (no answer comes before the Sync),
    # but another session may (a sequence's next value, a lock): the session's next step
    # follows at once, and a session never ends with such a batch open.
    for steps in all_steps:
        if steps and leaves_batch_open(steps[-1]):
            steps.append({"msgs": [("S",)]})
    left = [list(range(len(s))) for s in all_steps]
    order = []
    open_in = None
    while any(left):
        j = open_in if open_in is not None else R.choice([k for k in range(sessions) if left[k]])
        i = left[j].pop(0)
        order.append((j, i))
        open_in = j if leaves_batch_open(all_steps[j][i]) and left[j] else None
    return all_steps, users, order


def leaves_batch_open(step) -> bool:
    """Whether the step sends an Execute after its last Sync, Flush or Query."""
    tags = [m[0] for m in step.get("msgs", [])]
    last = max((i for i, t in enumerate(tags) if t in ("S", "H", "Q")), default=-1)
    return "E" in tags[last + 1:]


class Interleaved:
    """Runs interleaved sessions on the primary alone ('ref') or through the proxy, with a
    `wire_difftest.Harness` for the servers (reset, standby waits, the proxy's log)."""

    def __init__(self, h: wd.Harness):
        self.h = h

    def wait_flushed(self, limit=10.0):
        """Waits until the standby has replayed every commit of the primary. An open block's WAL
        may sit unflushed, or flushed only up to the middle of a record, for as long as the block
        lasts; a commit of our own flushes everything inserted before it, up to a record's end."""
        h = self.h
        if h.su.execute("SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn()").fetchone()[0]:
            h.su.execute("SELECT pg_current_xact_id()")
        lsn = h.su.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        t0 = time.monotonic()
        while not h.sb.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            if time.monotonic() - t0 > limit:
                raise RuntimeError(f"the standby did not replay {lsn} in {limit} s")
            time.sleep(0.003)

    def run(self, all_steps, users, order, target, ref_counts=None):
        h = self.h
        host, port, _, db = h.pr if target == "ref" else h.px
        k = len(all_steps)
        norms = [wd.Norm() for _ in range(k)]
        outs = [[] for _ in range(k)]
        counts = []  # after each global step: that session's message count
        conns = []
        hang = None
        schedule = [("login", j, None) for j in range(k)] + [("step", j, i) for j, i in order] \
            + [("final", j, None) for j in range(k)]
        try:
            for n, (what, j, i) in enumerate(schedule):
                out = outs[j]
                if what == "login":
                    user, extra = users[j]
                    opts = f"-c lock_timeout={LOCK_TIMEOUT_MS} {extra}".strip()
                    conns.append(LoginConn(host, port, user, db, h.a.answer_s, opts))
                    step = {"msgs": []}
                    want = 1
                else:
                    step = all_steps[j][i] if what == "step" else wd.FINAL_STEP
                    if step.get("sleep"):
                        time.sleep(step["sleep"])
                    data = wd.encode_step(step)
                    if data and not (out and out[-1] == ("EOF",)):
                        try:
                            conns[j].send(data)
                        except OSError as e:
                            out.append(("SENDFAIL", str(e)))
                    want = wd.expected_rfqs(step)
                c = conns[j]
                if target == "ref":
                    got = 0
                    quiet = 0.25 if want else (0.08 if wd.ends_open(step) else 0.0)
                    while quiet and (want == 0 or got < want):
                        m = c.one(time.monotonic() + quiet)
                        if m is None:
                            break
                        out.append(norms[j](*m))
                        if m[0] == b"EOF":
                            break
                        if m[0] == b"Z" or (what == "login" and m[0] == b"E"):
                            got += 1
                else:
                    need = ref_counts[n]
                    dl = time.monotonic() + h.a.answer_s
                    while len(out) < need:
                        m = c.one(dl)
                        if m is None:
                            hang = (f"HANG at schedule step {n} (session {j}, {what} {i}): "
                                    f"{len(out)} of {need} messages within {h.a.answer_s}s")
                            break
                        out.append(norms[j](*m))
                        if m[0] == b"EOF":
                            break
                    if hang:
                        break
                counts.append(len(out))
                # Another session's committed writes are on the standby before the next step
                # (the primary alone needs no wait: a short pause lets notifications arrive).
                if target == "ref":
                    time.sleep(0.01)
                else:
                    self.wait_flushed()
            if not hang:
                for j, c in enumerate(conns):
                    dl = time.monotonic() + 0.05
                    while (m := c.one(dl)) is not None:
                        outs[j].append(norms[j](*m))
                        if m[0] == b"EOF":
                            break
        finally:
            for c in conns:
                c.close()
        return outs, counts, hang

    def check(self, all_steps, users, order):
        """None when every session's messages are the primary alone's, else a dict."""
        h = self.h
        h.reset()
        ref, counts, rhang = self.run(all_steps, users, order, "ref")
        if rhang:
            return {"kind": "REFHANG", "detail": rhang}
        h.reset()
        off = h.log_size()
        got, _, hang = self.run(all_steps, users, order, "proxy", counts)
        time.sleep(0.01)
        log = h.log_since(off)
        self.replica = 0
        for mm in re.finditer(r"decision (\S+) reason (\S+)", log):
            h.reasons[(mm.group(1), mm.group(2))] += 1
            self.replica += mm.group(1).startswith("REPLICA")
        linger = h.wait_gone()
        if hang:
            return {"kind": "HANG", "detail": hang, "log": log[-3000:]}
        for j in range(len(ref)):
            r, g = ref[j], got[j]
            if r != g:
                i = next((x for x in range(min(len(r), len(g))) if r[x] != g[x]), min(len(r), len(g)))
                return {"kind": "DIFF", "session": j, "user": users[j], "index": i,
                        "ref_at": r[max(0, i - 3):i + 3], "got_at": g[max(0, i - 3):i + 3],
                        "ref": r, "got": g, "log": log[-3000:]}
        if linger:
            return {"kind": "LINGER", "detail": f"writer backend(s) left after the clients' Terminate: {linger}"}
        return None


def seeds_from_env(name: str, default: str) -> list[int]:
    out: list[int] = []
    for part in os.environ.get(name, default).split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out
