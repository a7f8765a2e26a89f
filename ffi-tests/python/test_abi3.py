"""ABI 3 from Python: the ctypes layouts equal the header's (compiled and measured by the C
compiler), the reader key arrives as a polarsplit_reader_key, and recv_client's error contract."""

import ctypes as C
import subprocess
from pathlib import Path

import polarsplit as ps

ROOT = Path(__file__).resolve().parents[2]


def c_layout(tmp_path, exprs: list[str]) -> list[int]:
    """Values of sizeof/offsetof expressions as the C compiler sees include/polarsplit.h."""
    src = tmp_path / "layout.c"
    body = "".join(f'    printf("%zu\\n", (size_t)({e}));\n' for e in exprs)
    src.write_text(f"#include <stddef.h>\n#include <stdio.h>\n#include \"polarsplit.h\"\nint main(void) {{\n{body}    return 0;\n}}\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", "-I", str(ROOT / "include"), str(src), "-o", str(exe)], check=True)
    return [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]


def test_abi3_ctypes_layouts_equal_the_headers(tmp_path):
    members = [name for name, _ in ps._ACTION_MEMBERS]
    exprs = ["sizeof(polarsplit_action)", "sizeof(polarsplit_client_info)"]
    exprs += [f"offsetof(polarsplit_action, {m})" for m in members]
    exprs += [f"offsetof(polarsplit_action_acquire_reader, {f})" for f in ("server", "key", "startup")]
    exprs += [f"offsetof(polarsplit_decision, {f})" for f in ("target_lsn", "server", "has_server", "attempt")]
    want = c_layout(tmp_path, exprs)
    got = [C.sizeof(ps._Action), C.sizeof(ps._ClientInfo)]
    got += [getattr(ps._Action, m).offset for m in members]
    acquire = dict(ps._ACTION_MEMBERS)["acquire_reader"]
    got += [getattr(acquire, f).offset for f in ("server", "key", "startup")]
    got += [getattr(ps._Decision, f).offset for f in ("target_lsn", "server", "has_server", "attempt")]
    assert got == want


def test_p9_acquire_reader_carries_the_reader_key_struct():
    engine = ps.Engine({"server_dialect": "stock", "startup_profile": "off"}, readers={1: 1})
    host = ps.Host(engine.session(client=("10.0.0.7", 40000)))
    host.client(ps.startup(user="app", database="db"))
    host.event(100, ps.WRITER_CONNECTED)
    host.backend(100, ps.auth_ok() + ps.rfq("I"))
    host.answer_startup_capture(100)  # S-5: the capture behind the startup
    acquire = [a for a in host.client(ps.query("SELECT 1")) if a.kind == "ACQUIRE_READER"]
    assert len(acquire) == 1
    key = acquire[0].key
    assert isinstance(key, ps.ReaderKey) and key.auth_hash != 0 and key.startup_identity_hash == 0
    assert acquire[0].bytes.startswith(b"\0") and b"user\0app\0" in acquire[0].bytes


def test_recv_client_protocol_error_consumes_everything_and_ends_with_the_fatal_and_close():
    engine = ps.Engine({"server_dialect": "stock", "startup_profile": "off"}, readers={1: 1})
    host = ps.Host(engine.session())
    host.client(ps.startup(user="app", database="db"))
    host.event(100, ps.WRITER_CONNECTED)
    host.backend(100, ps.auth_ok() + ps.rfq("I"))
    host.answer_startup_capture(100)  # S-5: the capture behind the startup
    host.take_client()
    write = ps.query("INSERT INTO t VALUES (1)")
    acts = host.client(write + b"Q\0\0\0\x02" + ps.query("SELECT 2"))  # asserts: all consumed
    kinds = [a.kind for a in acts]
    assert kinds[-1] == "CLOSE_CLIENT" and "CLOSE_BACKEND" in kinds and "ACQUIRE_READER" not in kinds
    sent = host.take_sent(100)
    # The message before the violation, as a server would run it; behind it at most the engine's
    # own pipelined probe of the write's position (W-7) — never a byte of what followed the bad one.
    assert sent.startswith(write) and b"SELECT 2" not in sent, sent
    rest = sent[len(write):]
    assert rest == b"" or (ps.tags(rest) == "CPBCES" and b"polarsplit_probe" in rest), sent
    fatal = host.take_client()
    assert ps.tags(fatal) == "E" and b"VFATAL\0" in fatal and b"C08P01\0" in fatal
    assert host.balanced()
    consumed = C.c_size_t(7)
    st = ps.lib.polarsplit_session_recv_client(host.s._s, b"x", 1, 0, C.byref(consumed))
    assert (st, consumed.value) == (ps.ERR_CLOSED, 0)
