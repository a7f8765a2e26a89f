"""Examiner round 10, area a (red10-a): protocol fidelity and liveness through the example proxy
against the real primary + hot standby — the same client bytes sent to the primary alone and
through the proxy over a raw v3 socket (test_red2_findings.RawConn), every message compared.
Every read is bounded (a missing answer is ('HANG',) within a few seconds).

Found (2026-12-07, main at ac6cef3):

Finding 1 (E-1, S-5): **the capture is sent into a COPY IN behind a Sync the server ignores.**
A simple Query whose statements change session state and end in `COPY … FROM STDIN` (`SET
application_name = …; COPY t FROM STDIN`, also `SELECT set_config(…); COPY …`), with its
CopyData, a Sync (which PostgreSQL ignores in COPY IN mode, E-1's own rule) and CopyDone sent
before the CopyInResponse came: the primary alone answers `COPY 2`, the ParameterStatus,
ReadyForQuery. Through the proxy the Sync is decided as a batch of its own
(`BATCH_NO_STATEMENT`, src/session/batch.rs `start_writer_batch` → `after_writer_send(id, …,
!shape.copy)`), which judges only that batch's own shape pipelinable, and the capture the SET
made due (route.rs: the COPY Query itself was not pipelinable, so it stayed due) is sent right
behind it — into the COPY: the server refuses the capture's Close (`08P01 unexpected message type
0x43 during COPY from stdin`), the COPY's rows are lost and the session ends (FATAL 08P01, EOF).
6 of 6 for the Sync between the data, before the data, and with a CopyFail instead of CopyDone
(3 of 3); with a temporary table's hazard making the capture due by its back-off instead of a
SET, 2 of 10 (timing). Without a capture due (`INSERT …; COPY`, a plain COPY, a SET in an
earlier Query) the same bytes held. A fix: no hidden work behind a unit while an earlier unit on
the writer may still be in (or about to enter) COPY IN.

Finding 2 (E-1, E-2): **a Parse declaring more than 32767 parameter types ends the session.**
PostgreSQL reads the count as unsigned 16 bits (up to 65535, libpq's limit, and what bulk
statements use); psycopg 3 declares a type for each parameter, so `SELECT count(*) FROM accounts
WHERE id IN (%s, …)` with 40,000 values is answered by the primary alone (100) and through the
proxy ends with FATAL 08P01 `polarsplit: protocol violation by the client: message 'P' is
malformed: negative parameter type count` and a closed connection (a bulk `INSERT … unnest(
ARRAY[%s, …])` the same; pgjdbc's PreparedStatement with 40,000 `setInt`s: 100 from the primary,
through the proxy 08006 "An I/O error occurred while sending to the backend", connection
closed). src/protocol/frontend.rs `FrontendMessage::parse_here` and `read_at` (and the second
reader at line ~477) read it with `i16` and refuse `n < 0`; `any_bind_value`
reads a Bind's format and value counts as `i16` too (harmless today: a Bind that large exceeds
`max_batch_bytes` and goes to the writer, measured; an untyped Parse with 40,000 parameters,
Describe and Bind with 40,000 values and format codes held).

Finding 3 (E-1, E-2, P-1): **the mirror's Sync commits extended work that a failing Query
rolls back.** An INSERT's Parse/Bind/Execute sent without a Sync (then a Flush, as a driver
waiting for its answer does) and a simple Query after it run in one implicit transaction: when
the Query fails (`SET TimeZone = …; SELECT 1/0`, `DEALLOCATE s; SELECT 1/0`) the primary alone
rolls the INSERT back (0 rows). Through the proxy, when the session has a statement prepared
only on readers (`s`, a read run on the standby) and the Query changes how text parses (TimeZone,
client_encoding, standard_conforming_strings: `mirror_before_rules_change`) or names a
reader-only statement (`DEALLOCATE s`, `EXECUTE s`: `mirror_named` → `reader_only_named_in`),
src/session/route.rs `mirror_statements` first sends a hidden Parse of it with a Sync of its own; it skips only while the writer skips to
a Sync (`writer_skipping()`), not while the client's unsynced batch is open there
(`writer_mid_batch()` / `writer_continuation`), so that Sync commits the INSERT before the Query:
every message the client sees is the primary's, but the row stays committed (1 row), 3 of 3 runs,
both spellings, also with the Query in the INSERT's own packet (no Flush), `EXECUTE s`, `SET
client_encoding` / `standard_conforming_strings`, and with a failing FunctionCall instead of the
Query (`int4div(1, 0)`: the FunctionCall path mirrors as for a rules change). With the SET in a
Query of its own before the failing statement, the SET and the error in the extended batch
itself, or the failure in a later extended batch, it held.

Finding 4 (E-2): **a mirror refused in a failed block leaves a reader-only statement missing on
the writer for good.** Same path, in a failed transaction block: a Query that changes parse
rules (`SET TimeZone …`) or names the statement (`DEALLOCATE s`, `EXECUTE s`) is refused with
25P02 on both sides; before it `mirror_statements` marks the statement prepared on the writer
(`statements.set_on_writer`) and sends its hidden Parse, which the failed block refuses as well
(its 25P02 swallowed) — the mark stays. After the ROLLBACK, Bind/Execute of `s` (and `EXECUTE s`)
go to the writer and get 26000 `prepared statement "s" does not exist` where the primary alone
answers the row (3 of 3 spellings, and a read of `pg_prepared_statements`, which mirrors them
all; every later use of the statement fails the same way). The engine's other hidden Parses of
a reader-only statement (`ensure_on_writer` inside a batch, the shape check) held in a failed
block.
A fix for 3 and 4: no mirror while the writer is mid-batch or in a failed block (or mark the
statement only once its ParseComplete came).

Fixed (fixA, 2026-12-07), finding 1: every piece of hidden work that goes to the writer with a
Sync of its own (probe, capture, mirror, reservation of the engine's names, touch of a block,
keep-alive) asks one guard, src/session/mod.rs `writer_takes_hidden_sync`, which refuses while
any unit the writer still owes an answer may be in or enter COPY IN (`writer_may_copy_in`: a
unit in COPY IN, a Query unread or with a COPY, a batch with an Execute of one or of something
unknown) — not only the unit just sent; `after_writer_send` asks it too, so the capture follows
the COPY's ReadyForQuery (transcript: tests/extended_copy_in_transcripts.rs
`e1_s5_no_hidden_work_goes_behind_a_sync_read_in_copy_in_mode_after_a_set`). The mark is one
of the unit queue's counted marks (src/session/units.rs `may_copy_in`), so a long pipeline pays
nothing for it; and C-1's `probe_for_token` asks the guard before it waits for a probe.

Fixed, finding 2: src/protocol `Reader::u16` reads every 16-bit count of a frontend message
unsigned, as `pq_getmsgint(msg, 2)` does: a Parse's parameter type count (`parse_here`,
`read_at`) and a Bind's format and value counts (`any_bind_value`); no signed count reader is
left (unit test: `e1_e2_counts_past_32767_are_read_unsigned_as_the_server_reads_them`).

Fixed, finding 3: the same guard refuses inside something only the client closes
(`writer_mid_batch`: an error's skip, or extended messages not yet synced with a Query behind
them); there route.rs `mirror_statements` sends its Parses without a Sync, joining the client's
batch and counted with its unit (as `ensure_on_writer`'s): an error of theirs is the batch's,
and a skip undoes them with the batch's Parses (transcripts: tests/extended_red2_transcripts.rs
`e1_e2_no_hidden_sync_ends_unsynced_extended_messages_before_the_query_behind_them`,
`e1_e2_a_hidden_parse_failing_inside_the_clients_unsynced_batch_is_the_batchs_error`).

Fixed, finding 4: the guard refuses in a failed block, so no mirror is sent into one (the
statement stays reader-only, and is parsed on the writer when a message names it there after
the block); and a mirror's Parse the server refuses (sent before the failure was known) undoes
its mark: its Parses carry notes (`Who::Mirror`), writer.rs `writer_mirror_message` confirms
them on ParseComplete and `undo_parse`s the refused one and those skipped behind it (transcript:
`e2_a_statement_on_readers_only_is_not_taken_for_prepared_on_the_writer_by_a_refused_mirror`,
both with the block's failure known and pipelined).

What held (probed once each, primary alone vs through the proxy, raw v3 client unless named):
several Syncs in one packet with reads on the standby; row-limited Executes of unnamed and named
portals with PortalSuspended, then Close, Execute again, Describe portal; Parse/Describe/Flush
and Bind/Execute/Flush answered before any Sync (also after a SET, a set_config, an INSERT or
BEGIN in an earlier Flush part, and a temporary table); an INSERT or SET behind a Flush and an
error later in the same batch (rolled back as on the primary); asyncpg's Parse/Describe/Flush
followed by a simple-Query SET, COPY or read; 300 named statements (past
max_prepared_statements) bound again, described and bound in a block; 5,000 and 20,000
pipelined Bind/Execute/Sync batches with writes among them; an error in the middle of a pipeline
(what is skipped to the Sync, a FunctionCall and a Query among skipped messages); Describe of a
failed portal; empty Query, `;;`, empty Parse; FunctionCall alone, in a batch, after an error,
and of set_config (its state kept: reads stay on the writer); Bind errors (wrong count, bad
binary, format count mismatch, bad result format) for statements prepared on the standby; rows of
2.2 MB (simple, row-limited across Flushes, pipelined), 65,535 Bind values, 3 MB Query and Bind
texts, 1,600-column RowDescriptions; a read batch split by a Flush whose next part is 100 kB;
messages trickled 3 bytes at a time; NOTICEs of standby reads (to_tsquery's stop-word notice),
also from a hinted read the standby refuses (F-2 retry: the notice once); ParameterStatus of
application_name, DateStyle, client_encoding, TimeZone, IntervalStyle,
standard_conforming_strings, SET ROLE (is_superuser), SET SESSION AUTHORIZATION and RESET, in
one Query with reads, in extended batches, behind a Flush, SET LOCAL rolled back; 32 other SETs
then reads (superuser too); log_statement = all with client_min_messages = log (no hidden
statement logged to the client); LISTEN/NOTIFY while idle, in a block, between a Flush and its
Sync, after a rolled-back LISTEN, UNLISTEN * and DISCARD ALL; CancelRequest of a standby read
(simple, pipelined behind and ahead of other reads, behind a Flush, in a block: 57014, session
usable) and of another client's idle key (the other client's read on the same pooled reader
was not cancelled); cancel of a COPY IN (57014; the line it names depends on timing);
idle_session_timeout during a slow COPY IN after standby reads; COPY TO STDOUT of a read
(simple, row-limited, behind a Flush); CopyData/CopyDone/CopyFail outside COPY; a failed COPY
with pipelined data; Sync/Flush inside COPY IN without a capture due; startup packets with
protocol 3.1/3.2/3.99 and `_pq_.` options, bad database/user/values, 300 placeholders, a
9,000-byte application_name; an SSLRequest before the startup. Not findings: a CopyData or
CopyDone between a read's Bind and Execute (the primary ignores it; through the proxy the Execute
gets 34000, and a write behind it in the batch is not run) — no client sends CopyData inside a
batch; a GSSENCRequest answered 'N' (the primary accepts it; the client falls back); a startup
packet over 10,000 bytes and malformed messages refused with another message text. The examiners'
random wire differential (`wire_difftest.gen_session`, 24 steps, on a pair of my own: 220 seeds
with COPY IN steps and long messages, 180 with long names and resumed portals, 250 plain, 80
streamed) found no divergence but the documented F4b one.
"""

from __future__ import annotations

import struct
import time

import psycopg
import pytest

from e2e_support import STANDBY_PORTS, connect, on_primary, run
from test_red2_findings import FLUSH, SYNC, Client, _msg, bind, exchange, execute, parse, query

pytestmark = pytest.mark.timeout(120)

TABLE = "red10a_copy"


@pytest.fixture(scope="module")
def copy_table(pair):
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}", f"CREATE TABLE {TABLE} (a int)",
               f"GRANT ALL ON {TABLE} TO PUBLIC")
    yield TABLE
    on_primary(pair, f"DROP TABLE IF EXISTS {TABLE}")


def copy_data(row: bytes) -> bytes:
    return _msg(b"d", row)


COPY_DONE = _msg(b"c")


def same_answers(pair, proxy, steps, times: int = 1):
    """Runs `steps` on a new session of the primary alone and of the proxy `times` times; each
    proxied transcript must equal the primary's."""
    for _ in range(times):
        want = exchange(pair.primary.port, steps)
        assert ("HANG",) not in want and ("EOF",) not in want, want
        got = exchange(proxy.port, steps)
        assert got == want, f"through the proxy:\n{got}\nthe primary alone:\n{want}"


# -- Finding 1: the capture sent into a COPY IN behind a Sync the server ignores (E-1, S-5) -------
# A simple Query `SET …; COPY t FROM STDIN`, and in the same write its CopyData, a Sync, more
# CopyData and CopyDone. The primary alone ignores the Sync (COPY IN mode: Sync and Flush are
# ignored) and answers CommandComplete COPY 2, ParameterStatus, ReadyForQuery. Through the proxy
# the Sync, read before the CopyInResponse came, is a unit of its own (BATCH_NO_STATEMENT) on
# the writer, and `after_writer_send` pipelines the capture the SET made due right behind it —
# into the COPY: the server refuses the capture's Close (08P01 "unexpected message type 0x43
# during COPY from stdin"), the COPY is lost and the connection is closed (FATAL 08P01).
@pytest.mark.parametrize("where", ["sync_between_data", "sync_before_data"])
def test_e1_sync_inside_copy_in_after_a_set_keeps_the_copy_and_the_session(pair, proxy, copy_table, where):
    data = [copy_data(b"1\n"), SYNC, copy_data(b"2\n")] if where == "sync_between_data" else [
        SYNC, copy_data(b"1\n"), copy_data(b"2\n")]
    steps = [
        ([query("SELECT 1")], 1),
        ([query(f"SET application_name = 'red10a'; COPY {copy_table} FROM STDIN"), *data, COPY_DONE], 1),
        ([query(f"SELECT count(*) FROM {copy_table}; TRUNCATE {copy_table}")], 1),
    ]
    same_answers(pair, proxy, steps, times=2)


# -- Finding 2: a Parse declaring more than 32767 parameter types ends the session (E-1, E-2) -----
# PostgreSQL reads a Parse's parameter type count as an unsigned 16-bit integer (postgres.c,
# `pq_getmsgint(…, 2)`): up to 65535 parameters, libpq's own limit, and what bulk statements of
# ORMs and drivers use. psycopg 3 (like libpq's PQprepare/PQexecParams with types, and pgjdbc)
# declares a type for every parameter. A read `… WHERE id IN (%s, …)` with 40,000 values: the
# primary alone answers it; through the proxy the client gets FATAL 08P01 "polarsplit: protocol
# violation by the client: message 'P' is malformed: negative parameter type count" and its
# connection is closed (src/protocol/frontend.rs `parse_here` and `read_at` read the count as i16
# and refuse a negative one; `any_bind_value` reads a Bind's format and value counts as i16 too).
def test_e1_a_read_with_40000_typed_parameters_is_answered_as_on_the_primary(pair, proxy):
    n = 40_000
    sql = "SELECT count(*) FROM accounts WHERE id IN (" + ", ".join(["%s"] * n) + ")"
    params = list(range(n))

    def ask(dsn):
        with connect(dsn) as c:
            run(c, "SELECT 1")
            try:
                return ("ok", run(c, sql, params))
            except psycopg.Error as e:
                return ("error", e.sqlstate, str(e).splitlines()[0], "closed" if c.closed else "open")

    want = ask(pair.primary.dsn(user="app_trust", dbname="app"))
    assert want == ("ok", [(100,)]), want
    assert ask(proxy.dsn()) == want


# -- Finding 3: the mirror's Sync commits extended work a failing Query rolls back (E-1, E-2, P-1) -
# Extended messages sent without a Sync (an INSERT's Parse/Bind/Execute, then a Flush) and then a
# simple Query run in one implicit transaction: when the Query fails, PostgreSQL rolls the INSERT
# back. Through the proxy, when the session has a statement prepared only on readers and the
# Query changes how statements parse (`SET TimeZone …`) or names that statement (`DEALLOCATE s`),
# the engine first parses the statement on the writer with a Sync of its own
# (src/session/route.rs `mirror_statements`, from `mirror_before_rules_change` and
# `mirror_named`; it checks `writer_skipping()` but not that the writer is inside the client's
# unsynced batch, `writer_mid_batch()`), and that Sync commits the INSERT before the Query runs:
# the client sees the same messages, but the row the primary alone rolled back stays committed.
# The same with the Query in the INSERT's packet (no Flush) and with a failing FunctionCall, which
# `mirror_before_rules_change` treats as a rules change (unseen code).
READ_TS = "SELECT '2020-01-01 00:00'::timestamptz::text, inet_server_port() > 0"


def _rows_of(pair, table: str) -> int:
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _reads_on_the_standby(c: Client) -> bool:
    """Waits until a plain read of this raw session runs on the standby (warm-up, S-5/P-4)."""
    for _ in range(60):
        c.send(query("SELECT inet_server_port()"))
        got = c.answers(1)
        rows = [m for m in got if m[0] == "D"]
        if rows and int(rows[0][1][6:].decode()) in STANDBY_PORTS:
            return True
        time.sleep(0.05)
    return False


def _function_call(pair, name: str, *args: bytes) -> bytes:
    """A FunctionCall message (text arguments, text result) of the built-in `name`."""
    with psycopg.connect(pair.primary.dsn(dbname="app")) as c:
        oid = c.execute("SELECT %s::regprocedure::oid", (name,)).fetchone()[0]
    body = struct.pack(">IH", oid, 0) + struct.pack(">H", len(args))
    for a in args:
        body += struct.pack(">i", len(a)) + a
    return _msg(b"F", body + struct.pack(">h", 0))


INSERT_UNSYNCED = "INSERT INTO {t} VALUES (1)"
SET_TZ_AND_FAIL = "SET TimeZone = 'Asia/Kolkata'; SELECT 1/0"
# What follows the INSERT's Parse/Bind/Execute: (messages, ReadyForQuerys they answer) per packet.
AFTER_THE_INSERT = {
    "flush_then_set_timezone_and_an_error": lambda pair: [
        ([FLUSH], 0), ([query(SET_TZ_AND_FAIL)], 1), ([SYNC], 1)],
    "flush_then_deallocate_and_an_error": lambda pair: [
        ([FLUSH], 0), ([query("DEALLOCATE s; SELECT 1/0")], 1), ([SYNC], 1)],
    "same_packet_set_timezone_and_an_error": lambda pair: [
        ([query(SET_TZ_AND_FAIL), SYNC], 2)],
    "flush_then_a_failing_function_call": lambda pair: [
        ([FLUSH], 0), ([_function_call(pair, "int4div(int4,int4)", b"1", b"0")], 1), ([SYNC], 1)],
}


@pytest.mark.parametrize("after", sorted(AFTER_THE_INSERT))
def test_e1_a_failure_behind_unsynced_extended_messages_rolls_them_back(pair, proxy, copy_table, after):
    tail = AFTER_THE_INSERT[after](pair)
    insert = [parse("", INSERT_UNSYNCED.format(t=copy_table)), bind("", ""), execute()]
    steps = [([parse("s", READ_TS), bind("", "s"), execute(), SYNC], 1),
             ([*insert, *tail[0][0]], tail[0][1]), *tail[1:]]
    outcome = {}
    for where, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        on_primary(pair, f"TRUNCATE {copy_table}")
        c = Client(port)
        try:
            warm = where == "primary" or _reads_on_the_standby(c)
            assert warm, "no read of the session reached the standby"
            got = []
            for parts, rfqs in steps:
                c.send(*parts)
                got += c.answers(rfqs)
        finally:
            c.close()
        outcome[where] = (got, _rows_of(pair, copy_table))
    on_primary(pair, f"TRUNCATE {copy_table}")
    assert outcome["primary"][1] == 0, outcome["primary"]
    assert outcome["proxy"] == outcome["primary"], (
        f"through the proxy: {outcome['proxy'][1]} row(s) committed, the primary alone: "
        f"{outcome['primary'][1]}\n{outcome['proxy'][0]}\n{outcome['primary'][0]}")


# -- Finding 4: a mirror refused in a failed block leaves the statement missing on the writer (E-2)
# In a failed transaction block, a Query that changes how text parses (`SET TimeZone …`) or names
# a statement the client prepared only on readers (`DEALLOCATE s`, `EXECUTE s`) is refused with
# 25P02, on the primary alone as through the proxy. Before it, `mirror_statements` marks the
# reader-only statement as prepared on the writer (`statements.set_on_writer`) and sends its
# hidden Parse — which the failed block refuses too (25P02, swallowed). Nothing undoes the mark:
# after the ROLLBACK the statement is sent to the writer (whose parse rules it follows now) and
# every use of it is refused there, 26000 `prepared statement "s" does not exist`, where the
# primary alone answers it — for the rest of the session (drivers keep such statements cached).
@pytest.mark.parametrize("refused", ["SET TimeZone = 'Asia/Kolkata'", "DEALLOCATE s", "EXECUTE s"])
def test_e2_a_statement_prepared_on_readers_survives_a_refused_query_in_a_failed_block(pair, proxy, refused):
    steps = [
        ([parse("s", READ_TS), bind("", "s"), execute(), SYNC], 1),
        ([query("BEGIN")], 1),
        ([query("SELECT 1/0")], 1),
        ([query(refused)], 1),
        ([query("ROLLBACK")], 1),
        ([bind("", "s"), execute(), SYNC], 1),
        ([query("EXECUTE s")], 1),
    ]
    outcome = {}
    for where, port in (("primary", pair.primary.port), ("proxy", proxy.port)):
        c = Client(port)
        try:
            warm = where == "primary" or _reads_on_the_standby(c)
            assert warm, "no read of the session reached the standby"
            got = []
            for parts, rfqs in steps:
                c.send(*parts)
                got += c.answers(rfqs)
        finally:
            c.close()
        outcome[where] = got
    assert [m for m in outcome["primary"] if m[0] == "E"] == [
        ("E", "ERROR", "22012", "division by zero"),
        ("E", "ERROR", "25P02", "current transaction is aborted, commands ignored until end of transaction block"),
    ], outcome["primary"]
    assert outcome["proxy"] == outcome["primary"]
