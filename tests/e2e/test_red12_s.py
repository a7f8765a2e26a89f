"""Examiner round 12, area s (red12-s): who a read runs as, and state that leaks between clients
through the example proxy's pooled reader connections (SPEC S-4, S-5, S-6, P-9, E-2), against the
real primary + hot standby, each answer compared with a twin session on the primary alone; where a
read ran is told by inet_server_port() (replica-safe on purpose, S-7). Every statement is bounded
(statement_timeout, connect_timeout, e2e_support.bounded via `run`).

Found (main at 89a9885, 3 of 3 runs):

Finding 1 (S-6, E-2): **a statement whose text spells the transaction's start (`'now'`) keeps,
on readers, the time of its first parse — another client's.** PostgreSQL reads a date/time
literal when it parses the statement: `'now'::timestamptz` is the start of the transaction the
Parse ran in, frozen into the statement (`'today'`, `'tomorrow'`, `'yesterday'` the same, by day).
A client that parses the text again gets its own transaction's time. Through the proxy, a
client's Parse of a read becomes, on a reader, the engine's `polarsplit_s_<hash>` statement of
that text, and "a statement one session prepared there serves the next session that parses the
same text" (src/session/statements.rs module doc, `statement_hash`; README "Pooled readers carry
nothing to another client") — bound again without a new parse. So psycopg's
`execute("SELECT %s::int, 'now'::timestamptz = now(), 'now'::timestamptz …", (1,))` (an unnamed
Parse each time, as any parameterised query before psycopg's prepare_threshold, and every new
asyncpg/pgjdbc session's first use) answers `true` and the current time every time on the primary
alone, and through the proxy, on the standby, `false` and the time of the first client's parse:
for the same client a moment later and for every later client (measured: three sessions 0.3 s
apart all read 11:37:51.35 where their own now() was up to 1.3 s later; asyncpg, three sessions
0.6 s apart: each session's first read on the primary alone answers its own connection time,
through the proxy sessions 2 and 3 answered session 1's; the simple protocol, which prepares
nothing, held; inside a block such reads stay on the writer, P-5). The engine already knows such literals (`lexer::may_spell_txn_time`,
`Effects::TXN_VALUE`, used to keep a block's reads together, P-5) but not for the reuse of a
prepared statement. A query like `… WHERE created_at > 'now'::timestamptz - interval '5 min'`
then filters with another client's, older, clock. A fix: never reuse (or pool) an engine
statement whose text may spell the transaction's time; parse it afresh for each client Parse.

Finding 2 (S-6, E-2, P-8): **a reused reader statement drops the notices and warnings its
parse gives.** The same reuse skips the Parse, and with it every message PostgreSQL sends while
parsing: `NOTICE 42622 identifier "aaa…" will be truncated to "aaa…"` for a name longer than 63
bytes (an ORM's generated alias), and, under `standard_conforming_strings = off`, `WARNING 22P06
nonstandard use of \\\\ in a string literal`. On the primary alone each Parse of the text sends
it (psycopg: every parameterised execution before prepare_threshold; a new session's prepared
statement); through the proxy only the first parse on a reader connection does — the same client's
next execution and every later client get none (measured: 1 of 4 reads with the NOTICE through
the proxy, 4 of 4 on the primary; the WARNING 2 of 4 against 4 of 4). A fix: reuse a reader's
statement only for a text whose parse sends nothing (or replay the parse's notices with it).

What held (probed once each against a twin on the primary alone, not kept as tests): reads as
the session's role and user after `SET ROLE` granted by another session a moment before (first
reads on the primary, then the standby) and after that membership was revoked (as r on both, the
primary keeps it; a fresh replay refused, reads back on the primary); a superuser's `SET SESSION
AUTHORIZATION app_trust`, `SET ROLE`, `RESET SESSION AUTHORIZATION`, SSA to a NOLOGIN role, `SET
ROLE NONE`, `SET SESSION AUTHORIZATION DEFAULT` with RLS over current_user/session_user, and the
ParameterStatus values (in_hot_standby, default_transaction_read_only, is_superuser,
session_authorization, TimeZone, DateStyle, application_name…) the client holds after each; a
login made NOLOGIN, `CONNECTION LIMIT 0`, `REVOKE CONNECT ON DATABASE` after the session began
(reads fall back to the primary, no error reaches the client); `CONNECTION LIMIT 1`/`2` with
reconnects and two sessions (reader connections are the standby's, never refused on the primary);
password logins (password, md5, scram) with right and wrong passwords, `app_nocreds` kept on the
primary; `COPY (SELECT current_user, …) TO STDOUT` after SET ROLE and a placeholder; client
encodings LATIN1, WIN1252, LATIN9, EUC_JP, SQL_ASCII, UTF8 on the same data (bytes and 22P05 equal);
`BEGIN; SET ROLE; PREPARE TRANSACTION` (55000), `COMMIT/ROLLBACK PREPARED` of a missing name in a
block, `COMMIT AND CHAIN` of a failed block, SAVEPOINT/RELEASE/ROLLBACK TO around SET ROLE and a
placeholder, `END`/`ABORT`, `SET LOCAL ROLE` then `SET ROLE` in one block; `set_config('app.tenant',
%s, false)` and `set_config('role', %s, false)` as psycopg prepared statements executed by Bind
only (12 rounds, all reads on the standby with the primary's rows); a schema's USAGE revoked after
a read was prepared on a pooled reader (42501 as on the primary, the reader's plans are reset by
the namespace change); a column added directly on the primary under a pooled `SELECT *` (the new
columns, on the standby); 240 parameterised reads of settings-dependent literals (TimeZone,
DateStyle, IntervalStyle, standard_conforming_strings, array_nulls, transform_null_equals, xmloption,
lc_monetary, escape_string_warning, backslash_quote, timezone_abbreviations) over 24 sessions, and
178 with SET/RESET/RESET ALL between reads of one session, all equal; `idle_session_timeout = 1s`
replayed on pooled readers across sessions; a client gone (RST/FIN) right after sending a read
behind a 36-setting state, then a client of the same state (60 reads, all its own state); a client
gone with a suspended row-limited portal on a reader (next clients' now() their own); the i17
property test (200 sequences from seed 912000, 10,900 reads) and the interleaved-sessions
differential (seeds 100-111, both modes): 0 divergences.

Seen outside this area (not kept, for the reader-fault examiners): with the pair's 200 ms apply
delay, a read of a table another session had just `LOCK … ACCESS EXCLUSIVE`-ed and committed
waits on the standby for the replayed lock until the commit record is applied; under the
session's `statement_timeout = '100ms'` the client gets 57014 (3 of 3) where the primary alone
answers in 1 ms (the same with `lock_timeout` is retried on the primary). A standby applies the
lock record at once and delays only the commit record, so this needs `recovery_min_apply_delay`
or a replay stalled between the two records.
"""

from __future__ import annotations

import time

import pytest

from e2e_support import STANDBY_PORTS, connect, ran_on, run, warm

# -- Finding 1: a transaction-time literal is read at the client's own parse ------------------------

NOW_READ = "SELECT %s::int AS red12s_now, 'now'::timestamptz = now(), 'now'::timestamptz, now(), inet_server_port()"


def now_reads(dsn: str, proxied: bool) -> list[tuple]:
    """Three sessions one after the other, two parameterised reads each (psycopg: an unnamed
    Parse each time), 0.3 s apart: (literal equals now(), literal, now(), where it ran)."""
    out = []
    for _ in range(3):
        with connect(dsn) as c:
            if proxied:
                warm(c)
            for _ in range(2):
                _, same, literal, now, port = run(c, NOW_READ, (1,))[0]
                out.append((same, literal, now, ran_on(port)))
                time.sleep(0.3)
    return out


@pytest.mark.timeout(60)
def test_s6_e2_a_transaction_time_literal_is_the_clients_own_parse_not_another_clients(pair, proxy):
    primary = now_reads(pair.primary.dsn(dbname="app", user="app_trust"), False)
    proxied = now_reads(proxy.dsn(), True)
    assert [r[0] for r in primary] == [True] * 6, primary
    # Fixed (2026-12-07) by keeping a prepared statement with such a literal on the writer
    # (`PREPARED_CLOCK_LITERAL`): only the writer's statement holds the time of the client's own
    # Parse. The reads ran on the standby when this test was written.
    assert all(r[3] == "primary" for r in proxied), proxied
    stale = [(str(lit), str(now), where) for same, lit, now, where in proxied if not same]
    assert not stale, (
        f"through the proxy {len(stale)} of 6 reads answered a 'now' literal that is not their "
        f"transaction's start (literal, now(), where): {stale}; on the primary alone 6 of 6 equal")


# -- Finding 2: the notices a statement's parse sends reach the client at each parse -----------------

LONG_ALIAS = "red12s_" + "a" * 63
TRUNCATED_READ = f"SELECT %s::int, 1 AS {LONG_ALIAS}, inet_server_port()"


def notices_per_read(dsn: str, proxied: bool, setup: list[str], sql: str) -> list[tuple]:
    """Two sessions, two parameterised reads each: (the notices' severity and SQLSTATE, where)."""
    out = []
    for _ in range(2):
        with connect(dsn) as c:
            notes = []
            c.add_notice_handler(lambda d: notes.append((d.severity_nonlocalized, d.sqlstate)))
            if proxied:
                warm(c)
            for s in setup:
                run(c, s)
            for _ in range(2):
                notes.clear()
                port = run(c, sql, (1,))[0][-1]
                out.append((tuple(notes), ran_on(port)))
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["identifier truncated", "nonstandard backslash"])
def test_s6_p8_the_notices_of_a_reads_parse_reach_the_client_at_each_parse(pair, proxy, case):
    setup, sql = {
        "identifier truncated": ([], TRUNCATED_READ),
        "nonstandard backslash": (["SET standard_conforming_strings = off"],
                                  "SELECT %s::int, 'red12s\\\\x', inet_server_port()"),
    }[case]
    primary = notices_per_read(pair.primary.dsn(dbname="app", user="app_trust"), False, setup, sql)
    proxied = notices_per_read(proxy.dsn(), True, setup, sql)
    assert all(n for n, _ in primary), primary
    assert any(w == "standby" for _, w in proxied), f"no read ran on the standby: {proxied}"
    assert [n for n, _ in proxied] == [n for n, _ in primary], (
        f"notices per read through the proxy {proxied}; on the primary alone {primary}")
