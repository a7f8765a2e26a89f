"""c-examples/replay (the minimal host loop) replays the committed transcripts and prints the
actions an integrator should expect. Built by scripts/test-e2e.sh (make -C c-examples)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("POLARSPLIT_EXAMPLES_BUILD", ROOT / "c-examples" / "build"))
TRANSCRIPTS = ROOT / "c-examples" / "transcripts"


def replay(name: str) -> str:
    binary = BUILD / "replay"
    if not binary.exists():
        pytest.fail(f"{binary} is not built: run `make -C c-examples` (scripts/test-e2e.sh does)")
    out = subprocess.run([str(binary), str(TRANSCRIPTS / name)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_replay_recorded_stock_session():
    out = replay("stock-write-then-read.transcript")
    lines = [line.strip() for line in out.splitlines()]
    decisions = [line for line in lines if line.startswith("DECISION")]
    assert decisions == [
        "DECISION REPLICA_WITH_WAIT reason=READ_NO_TARGET server=1 wait=no",
        "DECISION FORCE_PRIMARY reason=NOT_A_READ",
        "DECISION FORCE_PRIMARY reason=READ_NO_BOUNDED_WAIT target=50340008",
    ]
    assert any(line.startswith("ACQUIRE_READER server=1 [StartupMessage user=app_trust") for line in lines)
    assert 'SEND_BACKEND conn=8 [Q "SELECT balance FROM accounts WHERE id = 1"]' in lines
    assert "RELEASE_READER conn=8" in lines
    # Stock servers report no LSN: behind the write the library probes the primary's position
    # with its own named statement (W-7).
    assert "SEND_BACKEND conn=7 [C P B C E S]" in lines
    assert "CLOSE_CLIENT" in lines
    assert "balanced: yes" in lines


def test_replay_polardb_wait_shows_the_w4_wrapper():
    out = replay("polardb-read-your-writes.transcript")
    assert "DECISION REPLICA_WITH_WAIT reason=READ_WAIT server=1 wait=yes target=23803888" in out
    assert (
        "SEND_BACKEND conn=201 [Q \"SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 1000; "
        "SET polar_xact_split_wait_lsn = '23803888'; SELECT balance FROM accounts WHERE id = 1\"]" in out
    )
    # The hidden SETs' results are dropped. The RowDescription is held until the first row (so a
    # failure before any row can still be retried); that row came in the same input, so the held
    # bytes are relayed from the stream rather than sent as a copy (SPEC P-8, F-3).
    assert "DISCARD_BACKEND conn=201 n=27 [C C C]" in out
    assert "FORWARD_BACKEND conn=201 n=61 [T D C]" in out
    assert "balanced: yes" in out


def test_f1_replay_a_cancel_while_the_read_waits_for_its_reader_connection():
    out = replay("stock-cancel-while-waiting.transcript")
    lines = [line.strip() for line in out.splitlines()]
    at = lines.index("> cancel (unplaced)")
    # The read is answered at once with the server's 57014 and its RFQ; nothing ran it.
    assert lines[at + 1] == "SEND_CLIENT [E Z(I)]", lines[at:at + 3]
    assert not any(line.startswith("SEND_BACKEND conn=8") for line in lines)
    # The connection the host was asked for arrives late and is closed unused.
    assert "CLOSE_BACKEND conn=8" in lines[at:]
    assert "balanced: yes" in lines


def test_f1_replay_a_cancel_forwarded_to_the_reader_closes_that_connection():
    """`cancel_forwarded CONN` (what the proxy records when it forwards a client's cancel) replays
    as polarsplit_session_cancel_forwarded: the reader's 57014 is the client's cancel, answered to
    the client, and the cancelled connection is closed, not handed back to the pool. Without the
    line the same bytes would release the connection: replay must see the call to be faithful."""
    out = replay("stock-cancel-forwarded.transcript")
    lines = [line.strip() for line in out.splitlines()]
    at = lines.index("> cancel forwarded to conn=8")
    rest = lines[at:]
    assert "FORWARD_BACKEND conn=8 n=68 [E]" in rest, rest
    assert "CLOSE_BACKEND conn=8" in rest, rest
    assert not any(line.startswith("RELEASE_READER conn=8") for line in rest), rest
    # Not run again on the writer.
    assert not any(line.startswith(("FORWARD_CLIENT conn=7", "SEND_BACKEND conn=7")) and "SELECT" in line
                   for line in rest), rest
    assert "balanced: yes" in lines
