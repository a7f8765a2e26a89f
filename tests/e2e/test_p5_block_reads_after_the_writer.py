"""SPEC P-5 with S-1a and W-7 end to end (stock PostgreSQL): a READ COMMITTED block's reads go to
the standby before its first write, also after something sent one of the session's reads to the
primary. An examiner's finding of 2026-12-05 (psycopg, autocommit off): after one failed block
(`SELECT 1/0`, which the standby refused and the primary ran again, then ROLLBACK) the next
block's 3,000 reads all stayed on the primary, and so did every read of a block after one read
the primary served (a read of the block's `now()`): each read the primary serves may show newer
data than the standby has, nothing positioned it inside a block, and so the next read went to the
primary too. Now a block in which the standby refused a read ends with a probe, as after a
write, and so does a block whose reads the primary served: its probe positions what they saw,
and the session's next block reads on the standby. (From 2026-12-05 to 2026-12-07 the probe ran
inside the block, right behind such a read; S-5 keeps it out of blocks now — a probe that fails
there aborts the client's transaction — and that block's own reads stay on the primary.)

Each scenario runs the same statements against the primary alone and through the proxy: the
answers must be the same, and most of the block's reads must reach the standby.

W-7's adaptive probe under the same reads: while another client writes, each probe's position is
ahead of what the standby is known to have replayed, so the block's next read goes to the primary
and the probe does not pay. After four such probes the engine probed only every 2nd … 64th
*committed write*, and a session that never writes never counted one: its reads stayed on the
primary for the rest of the session, however far the standby caught up (CI, 2026-12-05: 0 of 200
block reads on the standby, `SPLIT_LSN_UNKNOWN` 197, after a few milliseconds of other WAL). Reads
left unprobed now count towards the next probe as writes do."""

from __future__ import annotations

import time

import psycopg
import pytest

from e2e_support import others_commit

READS = 200
ROWS = "SELECT k, v, inet_server_port() FROM p5_rows WHERE k = %s"


@pytest.fixture(scope="module")
def rows(pair):
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS p5_rows")
        c.execute("CREATE TABLE p5_rows (k int PRIMARY KEY, v text)")
        c.execute("INSERT INTO p5_rows SELECT g, 'v' || g FROM generate_series(1, 50) g")
        c.execute("GRANT ALL ON p5_rows TO PUBLIC")
    pair.wait_replayed()


def after_a_refused_read(c: psycopg.Connection) -> str:
    """A block whose read the standby refuses (the primary answers the same error), rolled back."""
    try:
        c.execute("SELECT 1/0")
    except psycopg.errors.DivisionByZero as e:
        c.rollback()
        return e.sqlstate
    raise AssertionError("no error")


def after_a_read_of_the_blocks_time(c: psycopg.Connection) -> str:
    """A read of the block's own `now()`: the primary serves it (S-7), inside the same block."""
    c.execute("SELECT k, now() IS NOT NULL FROM p5_rows WHERE k = 1").fetchone()
    return "read on the primary"


def block(dsn: str, standby_port: int, before, blocks: int = 1) -> tuple[list, list[bool]]:
    """`before`, then `blocks` blocks of READS reads each on the same connection (`before` in the
    first): all the answers, and which of the last block's reads the standby served."""
    with psycopg.connect(dsn) as c:
        got = [before(c)]
        for _ in range(blocks):
            on_standby = []
            for i in range(READS):
                k = i % 50 + 1
                k, v, port = c.execute(ROWS, (k,)).fetchone()
                got.append((k, v))
                on_standby.append(port == standby_port)
            c.commit()
    return got, on_standby


def settled(pair) -> None:
    """Everything the primary wrote is flushed and replayed. A probe's position is the primary's
    insert position (W-7: an asynchronous commit is visible before it is flushed), and WAL that
    does not flush itself — a page pruned on access, here `pg_attribute`'s after the module's
    `DROP TABLE` — reaches the standby only when the WAL writer flushes it, up to
    `wal_writer_delay` (200 ms) later: until then every probe's position is ahead of the standby,
    and a block's 200 reads, one behind the other, take less than that — they rightly stay on the
    primary (CI, 2026-12-05), and the count says nothing about the probe. A commit flushes it."""
    with psycopg.connect(pair.primary.dsn(dbname="app"), autocommit=True) as c:
        c.execute("SELECT txid_current()")
    pair.wait_replayed()


@pytest.fixture
def caught_up(pair, proxy, rows):
    """The standby replays as soon as it receives: with the shared pair's 200 ms apply delay, any
    commit in the cluster (another test's, autovacuum's) in the 200 ms before a probe leaves the
    standby behind its position that long. The catalogue pages the sessions read are pruned
    before they count: a read through the proxy and one on the primary first."""
    pair.set_apply_delay(0)
    for dsn in (proxy.dsn(), pair.primary.dsn(dbname="app", user="app_trust")):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(ROWS, (1,)).fetchone()
    settled(pair)
    try:
        yield pair
    finally:
        pair.set_apply_delay(200)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("before", [after_a_refused_read, after_a_read_of_the_blocks_time])
def test_p5_s1a_a_blocks_reads_reach_the_standby_after_a_read_the_primary_served(caught_up, proxy, before):
    pair = caught_up
    # A read the primary served inside the block leaves what it saw unpositioned until the
    # block's end: no probe runs inside a block (S-5: it can fail, and would abort the client's
    # transaction — test_red10_c), so that block's reads stay on the primary unless a writer
    # sample lands between two of them (the cost). The probe behind the block's end positions
    # it: the session's next block is the one counted. (Until 2026-12-07 a probe ran inside the
    # block, and the same block's reads were counted.)
    blocks = 2 if before is after_a_read_of_the_blocks_time else 1
    direct, _ = block(pair.primary.dsn(dbname="app", user="app_trust"), pair.standby.port, before,
                      blocks)
    settled(pair)
    through, on_standby = block(proxy.dsn(), pair.standby.port, before, blocks)
    assert through == direct
    # Reads one behind the other: the first ones stay on the primary while the standby is behind
    # the probe's position — a few milliseconds of replay, longer if the cluster wrote WAL no
    # commit flushed yet — and, once four probes did not pay, the next probe comes only after 2,
    # 4, 8, … reads (W-7's backoff: CI, 2026-12-05, 167 of 200 on the standby with the first
    # 30 on the primary). Every probe that pays puts the rest on the standby: before the probe
    # inside the block, 0 of 200.
    tail = on_standby[READS // 2:]
    assert sum(tail) >= len(tail) * 0.9 and sum(on_standby) >= READS * 0.6, (
        sum(on_standby), on_standby.index(True) if True in on_standby else None, proxy.stats()["reason"])


@pytest.mark.timeout(60)
def test_w7_p5_a_blocks_reads_return_to_the_standby_after_other_clients_wal_kept_it_behind(pair, proxy, rows):
    # The apply delay keeps the standby 200 ms behind the other client's commits.
    assert pair.apply_delay_ms == 200
    with psycopg.connect(proxy.dsn()) as c:
        with others_commit(pair):
            # The primary serves it (S-7); the probe behind it is at a position the standby
            # has not replayed yet.
            c.execute("SELECT k, now() FROM p5_rows WHERE k = 1").fetchone()
            # Reads while the other client writes: the standby is behind every probe's position,
            # so they go to the primary (correctly) and the probes do not pay.
            on_primary, deadline = 0, time.monotonic() + 10
            while on_primary < 30 and time.monotonic() < deadline:
                _, _, port = c.execute(ROWS, (1,)).fetchone()
                on_primary += port != pair.standby.port
        assert on_primary >= 30, "the other client's WAL never kept the standby behind"
        # No probe runs inside the block (S-5, since 2026-12-07): what a read on the primary saw
        # is positioned by a writer sample sent after its ReadyForQuery (README, `lsn_probe`).
        # Reads back to back leave no room for one — each read on the primary sees the latest
        # state again, and the host's samples, in milliseconds, come every 10 ms — so they stay
        # on the primary (CI, 2026-12-07: 0 of the last 100 in one run of several). With 20 ms
        # between reads a sample fits, and once the standby has replayed the burst (a few
        # hundred milliseconds) a read is the standby's.
        pauses, deadline = 0, time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.02)
            pauses += 1
            if c.execute(ROWS, (1,)).fetchone()[2] == pair.standby.port:
                break
        else:
            pytest.fail(f"no read of the block reached the standby in 10 s: {proxy.stats()['reason']}")
        # From there on the reads are the standby's, back to back: what each showed is bounded
        # by the standby's own position (S-1a), so none reopens the session's position.
        ports = [c.execute(ROWS, (i % 50 + 1,)).fetchone()[2] for i in range(READS)]
        c.commit()
    last = ports[-100:]
    assert sum(p == pair.standby.port for p in last) >= 90, (
        pauses,
        sum(p == pair.standby.port for p in ports),
        proxy.stats()["reason"],
    )


def pdo_block(dsn: str, standby_port: int) -> tuple[list, list[bool]]:
    """One block as PHP PDO with native prepares runs it (libpq: PQprepare, PQexecPrepared, then
    `DEALLOCATE` as a simple Query when the statement object is dropped, inside the block)."""
    with psycopg.connect(dsn) as c:
        pg = c.pgconn
        got, on_standby = [], []
        assert pg.exec_(b"BEGIN").status == psycopg.pq.ExecStatus.COMMAND_OK
        for i in range(20):
            name = b"pdo_stmt_%08x" % i
            r = pg.prepare(name, ROWS.replace("%s", "$1").encode())
            assert r.status == psycopg.pq.ExecStatus.COMMAND_OK, r.error_message
            r = pg.exec_prepared(name, [str(i % 50 + 1).encode()])
            assert r.status == psycopg.pq.ExecStatus.TUPLES_OK, r.error_message
            got.append((r.get_value(0, 0), r.get_value(0, 1)))
            on_standby.append(int(r.get_value(0, 2)) == standby_port)
            r = pg.exec_(b"DEALLOCATE " + name)
            assert r.status == psycopg.pq.ExecStatus.COMMAND_OK, r.error_message
            got.append(r.command_status)
        assert pg.exec_(b"COMMIT").status == psycopg.pq.ExecStatus.COMMAND_OK
    return got, on_standby


@pytest.mark.timeout(60)
def test_p5_a_blocks_reads_stay_pre_write_reads_after_deallocate(caught_up, proxy):
    # An examiner's probe (PHP PDO, native prepares, 2026-12-05): the block's first read on the
    # standby, every later one on the primary (`SPLIT_NO_MARKER`): `DEALLOCATE` ended the
    # block's read-only prefix though it changes nothing a reader would see.
    pair = caught_up
    direct, _ = pdo_block(pair.primary.dsn(dbname="app", user="app_trust"), pair.standby.port)
    settled(pair)
    through, on_standby = pdo_block(proxy.dsn(), pair.standby.port)
    assert through == direct
    assert sum(on_standby) >= 18, (on_standby, proxy.stats()["reason"])
