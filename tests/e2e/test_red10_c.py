"""Examiner round 10, area c (red10-c): consistency — read-your-writes, reads in transaction
blocks, causal tokens (SPEC S-1, S-1a, S-3, P-5, P-6, W-7, §11 C-1…C-3) — through the example
proxy against the real primary + hot standby (200 ms apply delay), each answer compared with what
the primary alone shows, or with what the session already saw. Every statement is bounded
(statement_timeout, connect_timeout, e2e_support.bounded).

Found (each test fails on main at ac6cef3, 3 of 3 runs):

- **S-1/P-5/P-6, S-3: the statements of the extended batch that opens a block are applied as
  if outside it** (`test_s1_p5_the_statements_of_the_batch_that_begins_the_block_count_in_the_block`).
  pgjdbc with autocommit off — Spring's and most Java applications' default — sends a
  transaction's `BEGIN` in one batch with its first statement. `writer_unit_rfq`
  (src/session/writer.rs) applies each Execute's effects with `was_active` = false, so for that
  first statement `in_txn` is false in `apply_effects` (src/session/effects.rs): an INSERT
  leaves `read_only_prefix` true and `may_have_written` false, a writer sample then positions
  the uncommitted write (`Session::collect`), and the block's reads go to the standby without
  the block's own row — also after COMMIT, which is not counted as a write (count 1 where the
  primary alone counts 2; with pgjdbc itself 6 of 6 reads in the block and 6 of 6 after
  `commit()`). A `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ` there is dropped (the block's
  reads split, two snapshots), and a `LOCK TABLE … ACCESS EXCLUSIVE` there sends the block's read
  to the standby, where the block's own replayed lock blocks it: a self-deadlock that only a
  statement timeout ends (57014 after 3 s; without one, a hang). DDL there is not marked again at
  COMMIT (`ddl_in_block`): a view over `pg_is_in_recovery()` created so is unknown to the engine
  until the next periodic catalogue load, and read on the standby ('t' where the primary says
  'f', S-7). The same holds for a simple Query `INSERT …; BEGIN`, whose BEGIN turns the Query's
  implicit transaction, INSERT included, into the block.
- **S-3/P-5: a BEGIN inside an open block sets the block's isolation, and the engine ignores it**
  (`test_s3_p5_a_begin_inside_the_block_sets_its_isolation`). PostgreSQL warns "there is
  already a transaction in progress" and applies the options all the same; psycopg with
  autocommit off sends its own BEGIN before the application's `BEGIN ISOLATION LEVEL REPEATABLE
  READ`. The engine takes the isolation only from the BEGIN that opened the block, so the
  REPEATABLE READ (or SERIALIZABLE) block's reads split to the standby and see two snapshots.
- **C-1/S-1a: a causal token does not cover what a read the primary served showed**
  (`test_c1_s1a_a_token_covers_what_a_read_the_primary_served_showed`). On stock servers such a
  read leaves the session's observed position unknown until a probe or writer sample positions
  it; `SHOW polarsplit.causal_token` and the reported ParameterStatus answer the older target
  meanwhile (src/session/tokens.rs, `current_token` refuses only an unknown write position,
  `probe_for_token` probes only for one; a reporting client's RFQ is held only after a write).
  Another session presenting the token reads the row as it was before what the first session
  saw (10 of 10 rounds by ParameterStatus, 6–9 of 10 by SHOW after the adaptive probe backed off).
- **C-1: the reported token does not cover a write committed by `COMMIT AND CHAIN`**
  (`test_c1_a_reported_token_covers_a_write_committed_by_commit_and_chain`). The RFQ after it is
  `T`: no probe, the old block's "may have written" carried into the chain refuses writer
  samples, and the token reported is the one from before the write (6 of 6 rounds: another
  session presenting it misses the committed row).
- **S-5/W-7: the engine's probe inside a block, when it fails, fails the client's block**
  (`test_s5_w7_a_hidden_probe_that_fails_inside_a_block_does_not_fail_the_clients_block`).
  SPEC S-5 keeps hidden writer queries out of blocks because a failing one would abort the
  client's transaction; the probe that follows a read the primary served inside a READ COMMITTED
  block (test_p5_block_reads_after_the_writer) runs there unguarded. With EXECUTE on
  `pg_current_wal_insert_lsn()` revoked from PUBLIC, `BEGIN; SELECT now(); SELECT …; UPDATE …;
  COMMIT` answers 25P02, 25P02, ROLLBACK through the proxy (the UPDATE lost) where the primary
  alone commits it.

Fixed: **S-3/P-5, the statements of a unit that opens the block count in it** (finding 1). The
mechanism: each Execute of a batch was applied as if the batch began where the session was, and a
Query's statements before its BEGIN as outside the block. PostgreSQL runs them in one implicit
transaction that a BEGIN among them makes the block. Now `effects::opens_block_ahead` (with
`exec_in_block`, linear in the batch) decides for `apply_effects` and `writer_unit_rfq`.
Transcript: `s3_p5_a_write_before_the_begin_of_its_query_counts_in_the_block`.

Fixed: **S-3, a BEGIN inside the block sets its isolation** (finding 2): `apply_effects` takes a
nested BEGIN's options as the block's. Transcript: `s3_p5_a_begin_inside_the_block_sets_its_isolation`.

Fixed: **C-1, COMMIT AND CHAIN ends the block** (finding 4): the chained block no longer carries
the old block's writes, so a writer sample may position the commit, and a reporting client's RFQ
waits (up to 1 s) for that sample where no probe may run. Transcript:
`c1_a_write_committed_by_commit_and_chain_is_covered_by_the_reported_token`.

Fixed: **C-1/S-1a, a token covers what a read the primary served showed** (finding 3). The
mechanism: the session's position counted as unknown for tokens only after a write
(`write_unknown`), so an unpositioned read (`observed_unknown`) let `current_token` answer the
older target. Now `Session::current_token` (src/session/tokens.rs) gives no token while either
is unknown; `probe_for_token` probes the idle writer once on demand for an unprobed read as for
an unprobed write (`ProbeCredit::has_skipped`, cleared by the probe sent: a failing probe is not
retried, SHOW answers 55000 naming the read); and a reporting client's RFQ after a read the writer
served waits for the probe behind it, as after a write (`writer_unit_rfq`, src/session/writer.rs).
Transcripts: `c1_s1a_*` in tests/stock_transcripts.rs (each fails without the fix).

Fixed: **S-5/W-7, no hidden statement that can fail runs inside the client's block** (finding
5). The mechanism: `after_writer_send` (src/session/route.rs) pipelined the probe, a function
call, behind a read the writer served inside a READ COMMITTED block, and `send_learning` sent it
in a block under a portal of its own. Now `send_learning` never sends a probe while a block is
(or may be) open, and `after_writer_send` no longer asks for one; the block's end gets the probe
(as it already did for blocks whose reads could not split). The engine's only other hidden
statement inside a block, P-5's touch, is `SELECT 1`, which cannot fail (F-3's abort fails on
purpose). Cost: a block's reads after one the primary served stay on the primary until the
block ends or a writer sample sent after that read arrives (test_p5_block_reads_after_the_writer
now counts the session's next block). Transcripts: `s5_w7_no_probe_runs_inside_a_block_*` and
`e4_p5_s5_no_probe_follows_a_suspended_read_in_a_block` (both fail without the fix); the
simulator's hidden-statement test requires every probe to succeed again.

What held (probed once each, primary alone vs through the proxy, not kept as tests): reads after
an autocommit write, after a block's COMMIT, after `COMMIT AND CHAIN` and `ROLLBACK AND CHAIN`
(the chained block's reads stay on the writer), after `SAVEPOINT; INSERT; ROLLBACK TO` (the row
absent), after a failed INSERT in autocommit and in a block, after a DO block whose inner
exception block wrote and failed, after UPDATE/DELETE/TRUNCATE in and out of blocks, after
`SELECT … FOR UPDATE` in a block; a DO block and a procedure that COMMIT and then raise, and
`INSERT …; COMMIT; SELECT 1/0` as one Query (the committed row seen, and covered by both token
forms); tokens after COPY FROM, a writing function, a `/* route=reader */` writing function the
standby refused, extended and pipelined writes and block commits (both token forms); a token
presented inside a block whose pre-write reads were pinned to the standby (the read went to the
primary); `currval`/`lastval` after `nextval` in and out of blocks, `pg_xact_status` of the
session's own write, `xmin` after an UPDATE, `setval` then a read of the sequence,
`pg_sequence_last_value`/`pg_sequences`; simple-Query and psycopg-pipeline reads pipelined behind
a write inside a block (decided after the write's RFQ, on the primary); pgjdbc-style batches
`BEGIN, UPDATE / COMMIT / BEGIN, SELECT` pipelined (the row seen); `SET default_transaction_isolation`,
`SET SESSION CHARACTERISTICS` and `DISCARD ALL` pipelined with the next BEGIN (the block's reads
stayed on the writer until the capture); a default isolation from `ALTER ROLE … SET` and from
`options` (`-c`, `--name-with-dashes`, upper case, given twice); `COMMIT; BEGIN ISOLATION LEVEL
REPEATABLE READ` and `ROLLBACK; START TRANSACTION …` as one Query inside a block (its reads
stayed on the writer); `SET LOCAL search_path`, `set_config(…, true)` and `SET` in the batch that
opens a block (reads on the writer until the block's end); the pgjdbc-style `BEGIN, SELECT`
batch then `SET TRANSACTION ISOLATION LEVEL` (25001, as the primary: the writer's block was
touched); `BEGIN; SELECT 1/0; ROLLBACK` and a failed read inside a savepoint. A token of another
history (from a proxy that reports no writer identity) is taken at the writer's latest sampled
position, so a write committed just before it may be missed (documented: "as `global` mode
would"; with `--no-writer-samples` no position is known and no wait is made at all). Weaker, not kept: a `/* route=reader */` hint on a writing function (or a STABLE
function that writes through dynamic SQL) that runs on the primary because the read also names
`now()` is not counted as a write — the block's next read and the reads after COMMIT miss its
row once another commit flushed the WAL — where README promises, for the same statements when
a standby refuses them, that "the session's next reads see what it wrote"; a user declaration
that is wrong. `SHOW polarsplit.causal_token` inside a block after a write answers 55000 and
fails the block (documented: 55000 "before the session's write position is known"), and pgjdbc
with autocommit off cannot ask for it (its BEGIN shares the batch: 0A000, documented).
"""

from __future__ import annotations

import struct
import time

import psycopg
import pytest
from psycopg import sql

from e2e_support import bounded, on_primary, ran_on, warm
from test_red2_findings import SYNC, Client, bind, execute, parse, query

pytestmark = pytest.mark.timeout(90)

OPTS = "-c statement_timeout=5000"
REPORT = OPTS + " -c polarsplit.report_token=on"


def session(dsn: str, options: str = OPTS) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, options=options)


def wait_identity(proxy, timeout: float = 10) -> None:
    """Until the proxy's monitor has reported the writer's identity (C-1): tokens then name the
    writer's history, so a token presented is taken at its position."""
    deadline = time.monotonic() + timeout
    while proxy.stats()["proxy"].get("writer_identities", 0) == 0:
        assert time.monotonic() < deadline, "no writer identity reported"
        time.sleep(0.05)


def present(c, token: str) -> None:
    with bounded(c, 5, "SET polarsplit.causal_token"):
        c.execute(sql.SQL("SET polarsplit.causal_token = {}").format(sql.Literal(token)))


@pytest.fixture
def shared_row(pair, proxy):
    """`r10c_s (k, v)` with the row (1, 0), and `r10c_own` for the session's own writes."""
    drop = ["DROP TABLE IF EXISTS r10c_s, r10c_own"]
    on_primary(pair, *drop,
               "CREATE TABLE r10c_s (k int PRIMARY KEY, v int NOT NULL)",
               "INSERT INTO r10c_s VALUES (1, 0)",
               "CREATE TABLE r10c_own (k int PRIMARY KEY, v int NOT NULL)",
               "INSERT INTO r10c_own VALUES (1, 0)",
               "GRANT ALL ON r10c_s, r10c_own TO PUBLIC")
    wait_identity(proxy)
    yield
    on_primary(pair, *drop)


READ_S = "SELECT v, inet_server_port() FROM r10c_s WHERE k = 1"


@pytest.mark.parametrize("how", ["parameter_status", "show"])
def test_c1_s1a_a_token_covers_what_a_read_the_primary_served_showed(pair, proxy, shared_row, how):
    """C-1 with S-1/S-1a: the token is the session's *target* — max(write, observed) — and S-1a
    counts in it everything an earlier statement of the session saw. Another client (here: a
    direct connection to the primary) commits v = i; session A reads the row with `/* route=primary
    */` (a fresh read an application asks of the primary) and sees i; A takes its token — as the
    `polarsplit.causal_token` ParameterStatus it asked for with `polarsplit.report_token=on`, or
    by `SHOW polarsplit.causal_token` — and hands it to session B, which presents it and reads
    the row. B must see at least what A saw (i).

    On stock servers a read the primary served leaves the session's observed position unknown
    until a probe or a writer sample positions it (`observed_unknown`, W-7); the token is issued
    without it: `Session::current_token` (src/session/tokens.rs) refuses only an unknown *write*
    position (55000, or `probe_for_token` probes first), and for a reporting client the RFQ is held
    for the probe only after a write. So B's read goes to the standby at A's older position and
    shows i - 1: 10 of 10 rounds by ParameterStatus, 6–9 of 10 by SHOW (once the adaptive
    probe has backed off, README W-7: reads the primary served are then left unprobed too)."""
    options = REPORT if how == "parameter_status" else OPTS
    behind = []
    with session(pair.primary.dsn(user="app_trust", dbname="app")) as other, \
            session(proxy.dsn(), options) as a, session(proxy.dsn()) as b:
        warm(a)
        warm(b)
        if how == "show":
            # Writes in a row whose probes no read uses: the adaptive probe backs off (W-7).
            for _ in range(8):
                with bounded(a, 5, "A's own write"):
                    a.execute("UPDATE r10c_own SET v = v + 1 WHERE k = 1")
            time.sleep(0.4)
        for i in range(1, 11):
            other.execute("UPDATE r10c_s SET v = %s WHERE k = 1", (i,))
            with bounded(a, 5, "A's read on the primary"):
                seen_a, port_a = a.execute("/* route=primary */ " + READ_S).fetchone()
            assert seen_a == i and ran_on(port_a) == "primary", (seen_a, port_a)
            if how == "show":
                with bounded(a, 5, "SHOW polarsplit.causal_token"):
                    token = a.execute("SHOW polarsplit.causal_token").fetchone()[0]
            else:
                token = a.info.parameter_status("polarsplit.causal_token")
            present(b, token)
            with bounded(b, 5, "B's read with A's token"):
                seen_b, port_b = b.execute(READ_S).fetchone()
            if seen_b < seen_a:
                behind.append((i, seen_b, ran_on(port_b), token))
            time.sleep(0.25)  # the standby catches up with A's position before the next round
    assert not behind, (f"B, presenting A's token, saw less than A had seen in {len(behind)} of 10 "
                        f"rounds (round, B's value, where, token): {behind}")


def test_c1_a_reported_token_covers_a_write_committed_by_commit_and_chain(pair, proxy, shared_row):
    """C-1: for a client that asked for tokens with its RFQs (`polarsplit.report_token=on`), "the
    client's RFQ after a write is held until the probe answers, so the token they see covers the
    write". `COMMIT AND CHAIN` commits the block's write and opens the next block at once (RFQ
    `T`): the engine carries the old block's state into the chain (`writer_unit_rfq` calls
    `end_txn` only at an `I` RFQ; src/session/writer.rs), no probe runs inside a block, and writer
    samples are refused for a block that "may have written" (`Session::collect`), so the
    committed write stays unpositioned for the whole chained block and the reported token is the
    one from before it. Session B presenting that token reads the row on the standby without A's
    committed write (5–6 of 6 rounds); the primary alone — and A itself — show it."""
    missed = []
    with session(proxy.dsn(), REPORT) as a, session(proxy.dsn()) as b:
        warm(a)
        warm(b)
        for i in range(1, 7):
            with bounded(a, 5, "A's block"):
                a.execute("BEGIN")
                a.execute("UPDATE r10c_s SET v = %s WHERE k = 1", (i,))
                a.execute("COMMIT AND CHAIN")
            token = a.info.parameter_status("polarsplit.causal_token")
            present(b, token)
            with bounded(b, 5, "B's read with A's token"):
                seen_b, port_b = b.execute(READ_S).fetchone()
            with bounded(a, 5, "A ends the chained block"):
                a.execute("COMMIT")
            if seen_b != i:
                missed.append((i, seen_b, ran_on(port_b), token))
            time.sleep(0.3)
    assert not missed, (f"B, presenting the token A was reported after COMMIT AND CHAIN, missed "
                        f"A's committed write in {len(missed)} of 6 rounds (round, B's value, "
                        f"where, token): {missed}")


@pytest.fixture
def one_row(pair):
    drop = ["DROP TABLE IF EXISTS r10c_r", "DROP VIEW IF EXISTS r10c_v"]
    on_primary(pair, *drop, "CREATE TABLE r10c_r (k int PRIMARY KEY, v int NOT NULL)",
               "INSERT INTO r10c_r VALUES (1, 1)", "GRANT ALL ON r10c_r TO PUBLIC")
    yield
    on_primary(pair, *drop)


READ_R = "SELECT v, inet_server_port() FROM r10c_r WHERE k = 1"


@pytest.mark.parametrize("begin", ["BEGIN ISOLATION LEVEL REPEATABLE READ",
                                   "START TRANSACTION ISOLATION LEVEL SERIALIZABLE"])
def test_s3_p5_a_begin_inside_the_block_sets_its_isolation(pair, proxy, one_row, begin):
    """S-3/P-5: only a READ COMMITTED block's reads may leave the writer, and the block's
    isolation is what the server runs. A BEGIN/START TRANSACTION sent inside an open block is
    answered with a WARNING ("there is already a transaction in progress") — and PostgreSQL
    applies its options all the same (`standard_ProcessUtility`, TRANS_STMT_BEGIN, sets
    `transaction_isolation` for each option; no query has run yet, so it is allowed): the block
    becomes REPEATABLE READ / SERIALIZABLE. This is what psycopg does with autocommit off when the
    application starts its own block: psycopg sends `BEGIN` before the application's first
    statement, here `BEGIN ISOLATION LEVEL REPEATABLE READ`.

    The engine takes a block's isolation only from the BEGIN that opened it (`writer_unit_rfq`,
    `now_in_txn && !was_active`, src/session/writer.rs) and ignores the options of a later one
    (`apply_effects` matches `Kind::Begin(_)` only to follow `in_txn`, src/session/effects.rs;
    `SET TRANSACTION` is applied there, BEGIN is not). So the block counts as READ COMMITTED and
    its reads go to the standby, each in a snapshot of its own: the block reads v = 1, another
    session commits v = 2, and after the standby replayed it the block reads 2 through the proxy
    where the primary alone, in one snapshot, reads 1 again (3 of 3 runs)."""
    seen = {}
    for name, dsn in {"primary": pair.primary.dsn(user="app_trust", dbname="app"),
                      "proxy": proxy.dsn()}.items():
        on_primary(pair, "UPDATE r10c_r SET v = 1 WHERE k = 1")
        time.sleep(0.3)
        with session(dsn) as c, session(pair.primary.dsn(dbname="app")) as other:
            if name == "proxy":
                warm(c)
            c.autocommit = False  # psycopg sends BEGIN before the first statement
            with bounded(c, 5, "the block"):
                c.execute(begin)
                first = c.execute(READ_R).fetchone()
                other.execute("UPDATE r10c_r SET v = 2 WHERE k = 1")
                time.sleep(0.7)  # past the standby's 200 ms apply delay and the monitor's sample
                second = c.execute(READ_R).fetchone()
                c.commit()
        seen[name] = (first[0], second[0], ran_on(first[1]), ran_on(second[1]))
    assert seen["primary"][:2] == (1, 1), seen
    assert seen["proxy"][:2] == seen["primary"][:2], (
        f"one {begin.split(' LEVEL ')[1]} block read v twice: the primary alone {seen['primary'][:2]}, "
        f"through the proxy {seen['proxy'][:2]} (ran on {seen['proxy'][2:]})")


def _pbe(text: str) -> bytes:
    return parse("", text) + bind("", "") + execute()


def _values(answer: list) -> list:
    """The first column of every DataRow and the SQLSTATE of every error of an answer."""
    out = []
    for m in answer:
        if m[0] == "D":
            body = m[1]
            n = struct.unpack(">i", body[2:6])[0]
            out.append(body[6:6 + n].decode())
        elif m[0] in ("E", "HANG"):
            out.append(m)
    return out


READ_COUNT = "SELECT count(*), inet_server_port() FROM r10c_r"


def _opening_batch(c: Client, statement: str) -> None:
    """The batch pgjdbc sends for a transaction's first statement with autocommit off: its
    `BEGIN` and the statement, one Sync."""
    c.send(_pbe("BEGIN"), _pbe(statement), SYNC)
    opened = c.answers(1)
    assert not [m for m in opened if m[0] in ("E", "HANG")], opened


def _block_own_write(c: Client, pair, one_query: bool = False) -> tuple:
    if one_query:
        # A simple Query whose implicit transaction the BEGIN turns into the block.
        c.send(query("INSERT INTO r10c_r VALUES (2, 2); BEGIN"))
        opened = c.answers(1)
        assert not [m for m in opened if m[0] in ("E", "HANG")], opened
    else:
        _opening_batch(c, "INSERT INTO r10c_r VALUES (2, 2)")
    with session(pair.primary.dsn(dbname="app")) as other:
        # Any other commit (a busy primary has them all the time) flushes the block's WAL, which
        # the standby then replays; its own commit record is delayed, the block's INSERT is not.
        other.execute("UPDATE r10c_r SET v = v WHERE k = 1")
    time.sleep(0.7)
    c.send(query(READ_COUNT))
    in_block = _values(c.answers(1))
    c.send(query("COMMIT"))
    c.answers(1)
    c.send(query(READ_COUNT))
    after_commit = _values(c.answers(1))
    return in_block, after_commit


def _block_isolation(c: Client, pair) -> tuple:
    _opening_batch(c, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    c.send(query(READ_R))
    first = _values(c.answers(1))
    with session(pair.primary.dsn(dbname="app")) as other:
        other.execute("UPDATE r10c_r SET v = 2 WHERE k = 1")
    time.sleep(0.7)  # past the standby's 200 ms apply delay and the monitor's sample
    c.send(query(READ_R))
    second = _values(c.answers(1))
    c.send(query("COMMIT"))
    c.answers(1)
    return first, second


def _block_lock(c: Client, pair) -> tuple:
    _opening_batch(c, "LOCK TABLE r10c_r IN ACCESS EXCLUSIVE MODE")
    with session(pair.primary.dsn(dbname="app")) as other:
        other.execute("UPDATE accounts SET balance = balance WHERE id = 1")  # flushes the WAL
    time.sleep(0.7)
    started = time.monotonic()
    c.send(query(READ_COUNT))
    in_block = _values(c.answers(1))
    waited = time.monotonic() - started
    c.send(query("COMMIT"))
    c.answers(1)
    return in_block, waited < 1.0


def _block_ddl(c: Client, pair) -> tuple:
    _opening_batch(c, "CREATE VIEW r10c_v AS SELECT pg_catalog.pg_is_in_recovery() AS r")
    time.sleep(0.5)  # the proxy reloads the database's catalogue at once (DDL seen)
    c.send(query("COMMIT"))
    c.answers(1)
    got = []
    for _ in range(4):
        time.sleep(0.4)  # the standby replays the view
        c.send(query("SELECT r, inet_server_port() FROM r10c_v"))
        got += _values(c.answers(1))
    return tuple(got)


CASES = {"own_write": (_block_own_write, (["2"], ["2"])),
         "own_write_then_begin_in_one_query": (lambda c, p: _block_own_write(c, p, True), (["2"], ["2"])),
         "set_transaction": (_block_isolation, (["1"], ["1"])),
         "lock": (_block_lock, (["1"], True)),
         "ddl": (_block_ddl, ("f", "f", "f", "f"))}


@pytest.mark.parametrize("case", list(CASES))
def test_s1_p5_the_statements_of_the_batch_that_begins_the_block_count_in_the_block(pair, proxy, one_row, case):
    """S-1/P-5/P-6 and S-3: pgjdbc with autocommit off (Spring's and most Java applications'
    default) sends a transaction's `BEGIN` in the same extended batch as its first statement:
    Parse/Bind/Execute `BEGIN`, Parse/Bind/Execute the statement, Sync. At that batch's RFQ the
    engine opens the block with BEGIN's options, then applies each Execute's effects "as if the
    batch began where the session was": `writer_unit_rfq` (src/session/writer.rs) passes
    `was_active` = false to `apply_effects` for every Execute, so for the statement behind the
    BEGIN `in_txn` is false (src/session/effects.rs), and what only counts inside a block is
    dropped:

    - `own_write`: the block's first statement is an INSERT. Its `read_only_prefix = false` and
      `may_have_written = true` are not recorded. The block's write is an unknown position
      (`write_unknown`) only until the next writer sample, which `Session::collect` lets position
      it because the block "has not written"; then the block's reads take the pre-write path
      (`SPLIT_PRE_WRITE`) to the standby, which has replayed the INSERT's WAL but not its commit
      (any other session's commit flushed it): the block's read misses its own row. And its
      COMMIT is not counted as a write (`unit_may_write`: COMMIT writes only if the block may
      have written), so the session's next read goes to the standby before the commit is
      replayed and misses the committed row (S-1). Measured with pgjdbc 42.x
      (`setAutoCommit(false)`, `executeUpdate("INSERT …")`, then reads): 6 of 6 reads in the
      block and 6 of 6 after `commit()` counted 1 row on the standby where the primary alone
      counts 2, in 2 of 2 runs. Here: count 1 instead of 2 in the block and after COMMIT.
    - `own_write_then_begin_in_one_query`: the same with a simple Query `INSERT …; BEGIN`: the
      BEGIN turns the Query's implicit transaction into the block, so the INSERT is the block's
      (uncommitted until COMMIT), but `apply_effects` follows `in_txn` statement by statement and
      the INSERT comes before the BEGIN: same answers (1 where the primary alone counts 2).
    - `set_transaction`: the block's first statement is `SET TRANSACTION ISOLATION LEVEL
      REPEATABLE READ`, handled only `if in_txn`: the block counts as READ COMMITTED and its
      reads go to the standby, each in a snapshot of its own. The block reads v = 1, another
      session commits v = 2, and once the standby replayed it the block reads 2 through the
      proxy, 1 on the primary alone (also measured with pgjdbc, `Statement.execute`).
    - `lock`: the block's first statement is `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` (a common
      way to serialise a job). P-5's prefix rule keeps such a block's reads on the writer; here the
      LOCK is not seen in the block, so its next read goes to the standby, where the replayed lock
      — the block's own — blocks it until the block ends, which waits for that read: a
      self-deadlock, ended only by the session's statement_timeout (3 s here: 57014 where the
      primary alone answers at once; without a timeout the client hangs for good, R-1b never
      ends a read on a standby whose monitor answers).
    - `ddl`: the block's first statement creates a view over `pg_is_in_recovery()` (S-7: a read
      of it belongs to the primary). DDL inside a block marks the catalogue changed now and again
      at the block's end (`ddl_in_block`), since the load the first mark starts cannot see the
      uncommitted view; with `in_txn` false the second mark is not made, so after COMMIT the
      database's last report lacks the view until the next periodic load (10 s): the view is
      read on the standby and answers 't' where the primary alone answers 'f' (4 of 4 reads in
      the 2 s after COMMIT; the same DDL as simple Queries: 'f', on the primary)."""
    run, expected = CASES[case]
    seen = {}
    for name, port in {"primary": pair.primary.port, "proxy": proxy.port}.items():
        on_primary(pair, "DELETE FROM r10c_r WHERE k <> 1", "UPDATE r10c_r SET v = 1 WHERE k = 1",
                   "DROP VIEW IF EXISTS r10c_v")
        time.sleep(0.3)
        if name == "proxy":
            with session(proxy.dsn()) as w:
                warm(w)
        c = Client(port)
        try:
            c.send(query("SET statement_timeout = 3000"))
            c.answers(1)
            for _ in range(20):  # the session's state learnt, its reads on the standby (warm)
                c.send(query("SELECT 1"))
                c.answers(1)
            seen[name] = run(c, pair)
        finally:
            c.close()
    assert seen["primary"] == expected, seen
    assert seen["proxy"] == seen["primary"], (
        f"{case}: the primary alone {seen['primary']}, through the proxy {seen['proxy']}")


@pytest.fixture
def probe_not_public(pair, one_row):
    """`pg_current_wal_insert_lsn()` not executable by PUBLIC (a hardening some sites apply to
    the WAL functions; the proxy's monitors run as a superuser and are not affected)."""
    on_primary(pair, "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() FROM PUBLIC")
    try:
        yield
    finally:
        on_primary(pair, "GRANT EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() TO PUBLIC")


def test_s5_w7_a_hidden_probe_that_fails_inside_a_block_does_not_fail_the_clients_block(pair, proxy, probe_not_public):
    """SPEC S-5: "Hidden writer queries run only outside transaction blocks (inside one, a hidden
    query would … abort the client's transaction if it failed; F-3's deliberate abort is the one
    exception)". Since test_p5_block_reads_after_the_writer the engine sends its W-7 probe
    (`SELECT pg_catalog.pg_current_wal_insert_lsn()`, under the portal `polarsplit_probe`) *inside*
    a READ COMMITTED block, behind a read the primary served (S-1a), and nothing guards its
    failure: when the session's role may not run the function — here EXECUTE revoked from
    PUBLIC — the probe's error aborts the client's block on the writer. The client's `SELECT now()`
    (kept on the primary: SPLIT_TXN_VALUE) is answered, then every statement of its block gets
    25P02 and its COMMIT answers ROLLBACK — its UPDATE is lost — where the primary alone runs the
    block and commits it. Outside blocks the same probe fails harmlessly (the session's reads
    just stay on the primary)."""
    steps = ["BEGIN", "SELECT now() IS NOT NULL", "SELECT v FROM r10c_r WHERE k = 1",
             "UPDATE r10c_r SET v = 5 WHERE k = 1", "COMMIT"]
    seen = {}
    for name, dsn in {"primary": pair.primary.dsn(user="app_trust", dbname="app"),
                      "proxy": proxy.dsn()}.items():
        on_primary(pair, "UPDATE r10c_r SET v = 1 WHERE k = 1")
        with session(dsn) as c:
            if name == "proxy":
                warm(c)
            got = []
            for s in steps:
                try:
                    with bounded(c, 5, s):
                        cur = c.execute(s)
                        got.append(cur.fetchall() if cur.description else cur.statusmessage)
                except psycopg.Error as e:
                    got.append(e.sqlstate)
        with session(pair.primary.dsn(dbname="app")) as admin:
            got.append(admin.execute("SELECT v FROM r10c_r WHERE k = 1").fetchone()[0])
        seen[name] = got
    assert seen["primary"] == ["BEGIN", [(True,)], [(1,)], "UPDATE 1", "COMMIT", 5], seen
    assert seen["proxy"] == seen["primary"], (
        f"the primary alone {seen['primary']}, through the proxy {seen['proxy']}")
