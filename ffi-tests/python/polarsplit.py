"""A small ctypes binding of libpolarsplit's C ABI — the way integrators prototype a host.

    import polarsplit as ps
    engine = ps.Engine({"server_dialect": "stock", "startup_profile": "off"}, readers={1: 1})
    s = engine.session(client=("10.0.0.7", 40000))
    actions = s.recv_client(ps.startup(user="app", database="db"))   # drained for you
    ...

Every input drains the actions at once (the drain rule) and returns them as `Action` tuples
whose `bytes` are copied out of the session (so the lifetime rule cannot bite). `Host` keeps fed
bytes until actions cover them, like `src/host.rs` and a real proxy.

The library is found through $POLARSPLIT_LIB, else target/release/libpolarsplit.so of this
repository (or of $CARGO_TARGET_DIR).
"""

from __future__ import annotations

import ctypes as C
import os
import struct
from pathlib import Path
from typing import NamedTuple

_ROOT = Path(__file__).resolve().parents[2]


def _library_path() -> Path:
    if os.environ.get("POLARSPLIT_LIB"):
        return Path(os.environ["POLARSPLIT_LIB"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", _ROOT / "target"))
    return target / "release" / "libpolarsplit.so"


lib = C.CDLL(str(_library_path()))

ABI_VERSION = 3

# Statuses
OK, DONE = 0, 1
ERR_NULL, ERR_INVALID_ARGUMENT, ERR_BAD_STATE, ERR_PROTOCOL, ERR_CONFIG = -1, -2, -3, -4, -5
ERR_PANIC, ERR_POISONED, ERR_UNKNOWN_CONNECTION, ERR_LIMIT, ERR_CLOSED = -6, -7, -8, -9, -10
ERR_ABI = -11

# Action kinds
ACTION_NAMES = {
    1: "CLIENT_ENCRYPTION_REQUEST", 2: "CANCEL_REQUEST", 3: "CONNECT_WRITER", 4: "DECISION",
    5: "ACQUIRE_READER", 6: "FORWARD_CLIENT", 7: "DISCARD_CLIENT", 8: "SEND_BACKEND",
    9: "FORWARD_BACKEND", 10: "DISCARD_BACKEND", 11: "SEND_CLIENT", 12: "RELEASE_READER",
    13: "PIN_WRITER", 14: "CLOSE_BACKEND", 15: "CLOSE_CLIENT",
}
globals().update({name: kind for kind, name in ACTION_NAMES.items()})

# Events and their flags
WRITER_CONNECTED, WRITER_CONNECT_FAILED, READER_ATTACHED, READER_UNAVAILABLE, CONNECTION_LOST = 1, 2, 3, 4, 5
READER_CONNECT_FAILED = 6
FLAG_FRESH, FLAG_NEEDS_RESET, FLAG_NO_CREDENTIALS, FLAG_STARTING_UP = 1, 2, 4, 8

# Function volatility (polarsplit_function.volatility): pg_proc.provolatile's byte
IMMUTABLE, STABLE, VOLATILE = ord("i"), ord("s"), ord("v")

OUTCOMES = {0: "PASSTHROUGH", 1: "FORCE_PRIMARY", 2: "REPLICA_WITH_WAIT", 3: "REPLICA_TXN_SPLIT", 4: "REJECT"}


class _ClientInfo(C.Structure):
    _fields_ = [
        ("client_host", C.c_char_p), ("client_port", C.c_uint16),
        ("proxy_host", C.c_char_p), ("proxy_port", C.c_uint16),
        ("writer_hostgroup", C.c_int64),
    ]


def _struct(name: str, *fields) -> type:
    return type(name, (C.Structure,), {"_fields_": list(fields)})


# The ABI 3 action: the kind, then one member per kind (include/polarsplit.h). The library writes
# `kind` and that kind's member only, never past the size passed to poll_action.
_Bytes = _struct("_Bytes", ("ptr", C.POINTER(C.c_uint8)), ("len", C.c_size_t))
_ReaderKey = _struct("_ReaderKey", ("profile_generation", C.c_uint64), ("auth_hash", C.c_uint64),
                     ("startup_identity_hash", C.c_uint64), ("startup_options_hash", C.c_uint64))
_Decision = _struct("_Decision", ("outcome", C.c_uint32), ("reason", C.c_uint32), ("target_lsn", C.c_uint64),
                    ("server", C.c_uint32), ("has_server", C.c_bool), ("wait", C.c_bool),
                    ("import_xids", C.c_bool), ("attempt", C.c_uint32))
_Function = _struct("_Function", ("schema", C.c_char_p), ("schema_len", C.c_size_t), ("name", C.c_char_p),
                    ("name_len", C.c_size_t), ("volatility", C.c_uint8))
_ConnCount = _struct("_ConnCount", ("conn", C.c_uint64), ("n", C.c_size_t))
_ACTION_MEMBERS = [
    ("client_encryption_request", _struct("_Encryption", ("gss", C.c_bool))),
    ("cancel_request", _struct("_Cancel", ("pid", C.c_int32), ("secret", _Bytes))),
    ("connect_writer", _struct("_ConnectWriter", ("startup", _Bytes))),
    ("decision", _Decision),
    ("acquire_reader", _struct("_Acquire", ("server", C.c_uint32), ("key", _ReaderKey), ("startup", _Bytes))),
    ("forward_client", _ConnCount),
    ("discard_client", _struct("_DiscardClient", ("n", C.c_size_t))),
    ("send_backend", _struct("_SendBackend", ("conn", C.c_uint64), ("bytes", _Bytes))),
    ("forward_backend", _ConnCount),
    ("discard_backend", _ConnCount),
    ("send_client", _struct("_SendClient", ("bytes", _Bytes))),
    ("release_reader", _struct("_Release", ("conn", C.c_uint64), ("needs_reset", C.c_bool))),
    ("pin_writer", _struct("_Pin", ("pinned", C.c_bool))),
    ("close_backend", _struct("_Close", ("conn", C.c_uint64))),
]
_Action = _struct("_Action", ("kind", C.c_uint32), *_ACTION_MEMBERS)


def _sig(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_P = C.c_void_p
_sig("polarsplit_version", C.c_char_p)
_sig("polarsplit_abi_version", C.c_uint32)
_sig("polarsplit_status_str", C.c_char_p, C.c_int32)
_sig("polarsplit_config_builder_new", _P)
_sig("polarsplit_config_builder_set", C.c_int32, _P, C.c_char_p, C.c_char_p, C.c_char_p, C.c_size_t)
_sig("polarsplit_config_builder_build", C.c_int32, _P, C.POINTER(_P), C.c_char_p, C.c_size_t)
_sig("polarsplit_config_builder_free", None, _P)
_sig("polarsplit_config_free", None, _P)
_sig("polarsplit_engine_new", C.c_int32, _P, C.POINTER(_P))
_sig("polarsplit_engine_free", None, _P)
_sig("polarsplit_engine_add_reader", C.c_int32, _P, C.c_uint32, C.c_uint32)
_sig("polarsplit_engine_set_reader_health", C.c_int32, _P, C.c_uint32, C.c_bool)
_sig("polarsplit_engine_reader_sample", C.c_int32, _P, C.c_uint32, C.c_uint64, C.c_uint64)
_sig("polarsplit_engine_writer_sample", C.c_int32, _P, C.c_uint32, C.c_uint64, C.c_uint64)
_sig("polarsplit_engine_set_writer_identity", C.c_int32, _P, C.c_uint32, C.c_uint64, C.c_uint32,
     C.POINTER(C.c_uint64))
_sig("polarsplit_engine_connection_closed", C.c_int32, _P, C.c_uint64)
_sig("polarsplit_engine_set_reader_health_at", C.c_int32, _P, C.c_uint32, C.c_bool, C.c_uint64)
_sig("polarsplit_engine_reader_monitor_failed", C.c_int32, _P, C.c_uint32, C.c_uint64)
_sig("polarsplit_engine_reader_lost", C.c_int32, _P, C.c_uint32, C.c_uint64)
_sig("polarsplit_engine_reader_connect_failed", C.c_int32, _P, C.c_uint32, C.c_uint64, C.c_bool)
_sig("polarsplit_engine_reader_outage", C.c_int32, _P, C.c_uint32, C.c_uint64)
_sig("polarsplit_engine_reader_retry_after", C.c_int32, _P, C.c_uint32, C.POINTER(C.c_uint64))
_sig("polarsplit_engine_reader_held_out", C.c_int32, _P, C.c_uint32, C.POINTER(C.c_bool))
_sig("polarsplit_engine_prometheus", C.c_int32, _P, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t))
_sig("polarsplit_engine_set_function_catalog", C.c_int32, _P, C.c_char_p, C.c_size_t, C.POINTER(_Function),
     C.c_size_t, C.c_size_t)
_sig("polarsplit_engine_remove_function_catalog", C.c_int32, _P, C.c_char_p, C.c_size_t)
_sig("polarsplit_engine_set_writer_server_version", C.c_int32, _P, C.c_uint32)
_sig("polarsplit_counter_count", C.c_uint32)
_sig("polarsplit_counter_name", C.c_char_p, C.c_uint32)
_sig("polarsplit_engine_counter", C.c_int32, _P, C.c_uint32, C.POINTER(C.c_uint64))
_sig("polarsplit_engine_outcome_count", C.c_int32, _P, C.c_uint32, C.POINTER(C.c_uint64))
_sig("polarsplit_engine_reason_count", C.c_int32, _P, C.c_uint32, C.POINTER(C.c_uint64))
_sig("polarsplit_outcome_name", C.c_char_p, C.c_uint32)
_sig("polarsplit_reason_name", C.c_char_p, C.c_uint32)
_sig("polarsplit_session_new", C.c_int32, _P, C.POINTER(_ClientInfo), C.c_size_t, C.POINTER(_P))
_sig("polarsplit_session_free", None, _P)
_sig("polarsplit_session_recv_client", C.c_int32, _P, C.c_char_p, C.c_size_t, C.c_uint64, C.POINTER(C.c_size_t))
_sig("polarsplit_session_recv_backend", C.c_int32, _P, C.c_uint64, C.c_char_p, C.c_size_t, C.c_uint64)
_sig("polarsplit_session_on_backend_event", C.c_int32, _P, C.c_uint64, C.c_uint32, C.c_uint32, C.c_uint32,
     C.c_uint64)
_sig("polarsplit_session_poll_action", C.c_int32, _P, C.POINTER(_Action), C.c_size_t)
_sig("polarsplit_session_last_error", C.c_size_t, _P, C.c_char_p, C.c_size_t)
_sig("polarsplit_session_next_deadline", C.c_int32, _P, C.POINTER(C.c_uint64))
_sig("polarsplit_session_on_timeout", C.c_int32, _P, C.c_uint64)
_sig("polarsplit_session_cancel_forwarded", C.c_int32, _P, C.c_uint64)
_sig("polarsplit_session_executing_conn", C.c_int32, _P, C.POINTER(C.c_uint64))


def version() -> str:
    return lib.polarsplit_version().decode()


def status_str(st: int) -> str:
    return lib.polarsplit_status_str(st).decode()


def reason_name(code: int) -> str | None:
    n = lib.polarsplit_reason_name(code)
    return n.decode() if n else None


class PolarsplitError(Exception):
    def __init__(self, what: str, status: int, detail: str = ""):
        super().__init__(f"{what}: {status_str(status)} ({status}){': ' + detail if detail else ''}")
        self.status = status


class ReaderKey(NamedTuple):
    """polarsplit_reader_key (SPEC P-9)."""

    profile_generation: int
    auth_hash: int
    startup_identity_hash: int
    startup_options_hash: int


class Action(NamedTuple):
    """One polled action, copied out of the session: `kind` and the fields of its member."""

    kind: str
    conn: int = 0
    server: int = 0
    n: int = 0
    bytes: bytes = b""
    outcome: str = ""
    reason: str = ""
    target_lsn: int = 0
    wait: bool = False
    import_xids: bool = False
    attempt: int = 0
    pid: int = 0
    key: ReaderKey | None = None
    gss: bool = False
    needs_reset: bool = False
    pinned: bool = False


def _copy(b) -> bytes:
    return C.string_at(b.ptr, b.len) if b.len else b""


def _action(a: _Action) -> Action:
    """The Python value of the member `a.kind` selects (no other member is valid)."""
    kind = ACTION_NAMES.get(a.kind, str(a.kind))
    if a.kind == CLIENT_ENCRYPTION_REQUEST:
        return Action(kind, gss=a.client_encryption_request.gss)
    if a.kind == CANCEL_REQUEST:
        return Action(kind, pid=a.cancel_request.pid, bytes=_copy(a.cancel_request.secret))
    if a.kind == CONNECT_WRITER:
        return Action(kind, bytes=_copy(a.connect_writer.startup))
    if a.kind == DECISION:
        d = a.decision
        return Action(kind, server=d.server if d.has_server else 0, outcome=OUTCOMES.get(d.outcome, ""),
                      reason=reason_name(d.reason) or "", target_lsn=d.target_lsn, wait=d.wait,
                      import_xids=d.import_xids, attempt=d.attempt)
    if a.kind == ACQUIRE_READER:
        r = a.acquire_reader
        key = ReaderKey(r.key.profile_generation, r.key.auth_hash, r.key.startup_identity_hash,
                        r.key.startup_options_hash)
        return Action(kind, server=r.server, key=key, bytes=_copy(r.startup))
    if a.kind in (FORWARD_CLIENT, FORWARD_BACKEND, DISCARD_BACKEND):
        m = {FORWARD_CLIENT: a.forward_client, FORWARD_BACKEND: a.forward_backend,
             DISCARD_BACKEND: a.discard_backend}[a.kind]
        return Action(kind, conn=m.conn, n=m.n)
    if a.kind == DISCARD_CLIENT:
        return Action(kind, n=a.discard_client.n)
    if a.kind == SEND_BACKEND:
        return Action(kind, conn=a.send_backend.conn, bytes=_copy(a.send_backend.bytes))
    if a.kind == SEND_CLIENT:
        return Action(kind, bytes=_copy(a.send_client.bytes))
    if a.kind == RELEASE_READER:
        return Action(kind, conn=a.release_reader.conn, needs_reset=a.release_reader.needs_reset)
    if a.kind == PIN_WRITER:
        return Action(kind, pinned=a.pin_writer.pinned)
    if a.kind == CLOSE_BACKEND:
        return Action(kind, conn=a.close_backend.conn)
    return Action(kind)  # CLOSE_CLIENT


class Engine:
    def __init__(self, settings: dict[str, str] | None = None, readers: dict[int, int] | None = None):
        if lib.polarsplit_abi_version() != ABI_VERSION:
            raise RuntimeError("libpolarsplit ABI mismatch")
        b = lib.polarsplit_config_builder_new()
        err = C.create_string_buffer(256)
        for k, v in (settings or {}).items():
            st = lib.polarsplit_config_builder_set(b, k.encode(), str(v).encode(), err, 256)
            if st != OK:
                lib.polarsplit_config_builder_free(b)
                raise PolarsplitError(f"setting {k}", st, err.value.decode())
        cfg = _P()
        st = lib.polarsplit_config_builder_build(b, C.byref(cfg), err, 256)
        if st != OK:
            raise PolarsplitError("build", st, err.value.decode())
        self._e = _P()
        st = lib.polarsplit_engine_new(cfg, C.byref(self._e))
        lib.polarsplit_config_free(cfg)
        if st != OK:
            raise PolarsplitError("engine_new", st)
        for server, hostgroup in (readers or {}).items():
            self.add_reader(server, hostgroup)

    def __del__(self):
        if getattr(self, "_e", None):
            lib.polarsplit_engine_free(self._e)
            self._e = None

    def add_reader(self, server: int, hostgroup: int) -> None:
        lib.polarsplit_engine_add_reader(self._e, server, hostgroup)

    def set_reader_health(self, server: int, healthy: bool) -> None:
        lib.polarsplit_engine_set_reader_health(self._e, server, healthy)

    def reader_sample(self, server: int, lsn: int, at_ms: int) -> int:
        return lib.polarsplit_engine_reader_sample(self._e, server, lsn, at_ms)

    def writer_sample(self, hostgroup: int, lsn: int, sent_at_ms: int) -> int:
        return lib.polarsplit_engine_writer_sample(self._e, hostgroup, lsn, sent_at_ms)

    def set_writer_identity(self, hostgroup: int, system_id: int, timeline: int) -> int:
        """The writer's history for causal tokens (C-1); returns the writer generation."""
        g = C.c_uint64()
        st = lib.polarsplit_engine_set_writer_identity(self._e, hostgroup, system_id, timeline, C.byref(g))
        if st != OK:
            raise PolarsplitError("set_writer_identity", st)
        return g.value

    def connection_closed(self, conn: int) -> None:
        """The host closed a pooled backend connection itself (E-2: the engine forgets it)."""
        lib.polarsplit_engine_connection_closed(self._e, conn)

    # -- reader faults the host saw itself (R-1a, R-1b): each returns OK, or DONE for an unknown reader
    def set_reader_health_at(self, server: int, healthy: bool, now_ms: int) -> int:
        return lib.polarsplit_engine_set_reader_health_at(self._e, server, healthy, now_ms)

    def reader_monitor_failed(self, server: int, now_ms: int) -> int:
        return lib.polarsplit_engine_reader_monitor_failed(self._e, server, now_ms)

    def reader_lost(self, server: int, now_ms: int) -> int:
        return lib.polarsplit_engine_reader_lost(self._e, server, now_ms)

    def reader_connect_failed(self, server: int, now_ms: int, starting_up: bool = False) -> int:
        return lib.polarsplit_engine_reader_connect_failed(self._e, server, now_ms, starting_up)

    def reader_outage(self, server: int, now_ms: int) -> int:
        return lib.polarsplit_engine_reader_outage(self._e, server, now_ms)

    def reader_retry_after(self, server: int) -> int | None:
        """The back-off: the earliest time to open a connection to `server`, or None (any time)."""
        at = C.c_uint64()
        st = lib.polarsplit_engine_reader_retry_after(self._e, server, C.byref(at))
        if st not in (OK, DONE):
            raise PolarsplitError("reader_retry_after", st)
        return at.value if st == OK else None

    def reader_held_out(self, server: int) -> bool | None:
        held = C.c_bool()
        st = lib.polarsplit_engine_reader_held_out(self._e, server, C.byref(held))
        if st not in (OK, DONE):
            raise PolarsplitError("reader_held_out", st)
        return held.value if st == OK else None

    def prometheus(self) -> str:
        """The counters and reader gauges in the Prometheus text format (size query, then the text)."""
        n = C.c_size_t()
        while True:
            st = lib.polarsplit_engine_prometheus(self._e, None, 0, C.byref(n))
            if st != OK:
                raise PolarsplitError("prometheus", st)
            buf = C.create_string_buffer(n.value + 4096)
            st = lib.polarsplit_engine_prometheus(self._e, buf, len(buf), C.byref(n))
            if st != OK:
                raise PolarsplitError("prometheus", st)
            if n.value < len(buf):
                return buf.value.decode()

    # -- the F-policy's input
    def set_function_catalog(self, database: str, functions: list[tuple[str, str, int]]) -> int:
        """The writer's user functions of `database` as (schema, name, volatility) rows; returns the status."""
        arr = (_Function * max(1, len(functions)))()
        keep = []
        for i, (schema, name, vol) in enumerate(functions):
            sb, nb = schema.encode(), name.encode()
            keep += [sb, nb]
            arr[i] = _Function(sb, len(sb), nb, len(nb), vol)
        db = database.encode()
        return lib.polarsplit_engine_set_function_catalog(self._e, db, len(db), arr, len(functions),
                                                          C.sizeof(_Function))

    def remove_function_catalog(self, database: str) -> int:
        db = database.encode()
        return lib.polarsplit_engine_remove_function_catalog(self._e, db, len(db))

    def set_writer_server_version(self, version_num: int) -> int:
        return lib.polarsplit_engine_set_writer_server_version(self._e, version_num)

    def counters(self) -> dict[str, int]:
        out = {}
        v = C.c_uint64()
        for i in range(lib.polarsplit_counter_count()):
            if lib.polarsplit_engine_counter(self._e, i, C.byref(v)) == OK:
                out[lib.polarsplit_counter_name(i).decode()] = v.value
        return out

    def outcomes(self) -> dict[str, int]:
        v = C.c_uint64()
        out = {}
        for code, name in OUTCOMES.items():
            if lib.polarsplit_engine_outcome_count(self._e, code, C.byref(v)) == OK:
                out[name] = v.value
        return out

    def reasons(self) -> dict[str, int]:
        v = C.c_uint64()
        out = {}
        for code in range(128):
            name = reason_name(code)
            if name and lib.polarsplit_engine_reason_count(self._e, code, C.byref(v)) == OK and v.value:
                out[name] = v.value
        return out

    def session(self, client: tuple[str, int] | None = None, proxy: tuple[str, int] | None = None) -> "Session":
        return Session(self, client, proxy)


class Session:
    def __init__(self, engine: Engine, client=None, proxy=None):
        self.engine = engine  # keeps the Python object alive (the library keeps its own reference too)
        self._keep = [client[0].encode() if client else None, proxy[0].encode() if proxy else None]
        info = _ClientInfo(self._keep[0], client[1] if client else 0, self._keep[1], proxy[1] if proxy else 0, -1)
        self._s = _P()
        st = lib.polarsplit_session_new(engine._e, C.byref(info), C.sizeof(info), C.byref(self._s))
        if st != OK:
            raise PolarsplitError("session_new", st)
        self.now = 1000

    def __del__(self):
        if getattr(self, "_s", None):
            lib.polarsplit_session_free(self._s)
            self._s = None

    def last_error(self) -> str:
        buf = C.create_string_buffer(512)
        lib.polarsplit_session_last_error(self._s, buf, 512)
        return buf.value.decode(errors="replace")

    def _check(self, what: str, st: int) -> None:
        if st not in (OK, ERR_PROTOCOL):
            raise PolarsplitError(what, st, self.last_error())

    def drain(self) -> list[Action]:
        out = []
        a = _Action()
        while True:
            st = lib.polarsplit_session_poll_action(self._s, C.byref(a), C.sizeof(a))
            if st == DONE:
                return out
            if st != OK:
                raise PolarsplitError("poll_action", st)
            out.append(_action(a))

    def recv_client(self, data: bytes) -> tuple[int, list[Action]]:
        """Feeds client bytes; returns (consumed, actions). On a protocol error (the session then
        closes) everything is consumed and the actions end with the FATAL and the closes."""
        consumed = C.c_size_t(0)
        st = lib.polarsplit_session_recv_client(self._s, data, len(data), self.now, C.byref(consumed))
        self._check("recv_client", st)
        return consumed.value, self.drain()

    def recv_backend(self, conn: int, data: bytes) -> list[Action]:
        st = lib.polarsplit_session_recv_backend(self._s, conn, data, len(data), self.now)
        self._check("recv_backend", st)
        return self.drain()

    def event(self, conn: int, kind: int, server: int = 0, flags: int = 0) -> list[Action]:
        st = lib.polarsplit_session_on_backend_event(self._s, conn, kind, server, flags, self.now)
        self._check("event", st)
        return self.drain()

    def next_deadline(self) -> int | None:
        """When the session needs on_timeout (R-1b), or None."""
        at = C.c_uint64()
        st = lib.polarsplit_session_next_deadline(self._s, C.byref(at))
        if st not in (OK, DONE):
            raise PolarsplitError("next_deadline", st, self.last_error())
        return at.value if st == OK else None

    def on_timeout(self) -> list[Action]:
        """Reports that `self.now` has come (an input), then drains."""
        st = lib.polarsplit_session_on_timeout(self._s, self.now)
        self._check("on_timeout", st)
        return self.drain()

    def executing_conn(self) -> int | None:
        conn = C.c_uint64()
        st = lib.polarsplit_session_executing_conn(self._s, C.byref(conn))
        return conn.value if st == OK else None

    def cancel_forwarded(self, conn: int) -> None:
        """The host forwarded a CancelRequest to `conn` (F-1). Not an input."""
        st = lib.polarsplit_session_cancel_forwarded(self._s, conn)
        if st != OK:
            raise PolarsplitError("cancel_forwarded", st, self.last_error())


class Host:
    """A host over in-memory streams: keeps fed bytes until actions cover them (src/host.rs)."""

    def __init__(self, session: Session):
        self.s = session
        self.client_pending = bytearray()
        self.backend_pending: dict[int, bytearray] = {}
        self.sent: dict[int, bytearray] = {}
        self.to_client = bytearray()
        self.log: list[Action] = []

    def _apply(self, actions: list[Action]) -> list[Action]:
        for a in actions:
            if a.kind in ("FORWARD_CLIENT", "DISCARD_CLIENT"):
                assert a.n <= len(self.client_pending), f"{a.kind} covers {a.n}, {len(self.client_pending)} kept"
                chunk = bytes(self.client_pending[: a.n])
                del self.client_pending[: a.n]
                if a.kind == "FORWARD_CLIENT":
                    self.sent.setdefault(a.conn, bytearray()).extend(chunk)
            elif a.kind in ("FORWARD_BACKEND", "DISCARD_BACKEND"):
                pending = self.backend_pending.setdefault(a.conn, bytearray())
                assert a.n <= len(pending), f"{a.kind} covers {a.n}, {len(pending)} kept"
                chunk = bytes(pending[: a.n])
                del pending[: a.n]
                if a.kind == "FORWARD_BACKEND":
                    self.to_client.extend(chunk)
            elif a.kind in ("SEND_BACKEND", "CONNECT_WRITER"):
                if a.kind == "SEND_BACKEND":
                    self.sent.setdefault(a.conn, bytearray()).extend(a.bytes)
            elif a.kind == "SEND_CLIENT":
                self.to_client.extend(a.bytes)
            elif a.kind == "CLOSE_CLIENT":
                self.client_pending.clear()  # bytes no action covered go with the connection
        self.log.extend(actions)
        return actions

    def client(self, data: bytes) -> list[Action]:
        consumed, actions = self.s.recv_client(data)
        assert consumed == len(data)
        self.client_pending.extend(data)
        return self._apply(actions)

    def backend(self, conn: int, data: bytes) -> list[Action]:
        actions = self.s.recv_backend(conn, data)
        self.backend_pending.setdefault(conn, bytearray()).extend(data)
        return self._apply(actions)

    def event(self, conn: int, kind: int, server: int = 0, flags: int = 0) -> list[Action]:
        actions = self._apply(self.s.event(conn, kind, server, flags))
        if kind == READER_ATTACHED and flags & FLAG_FRESH:
            actions += self.answer_replay(conn)
        return actions

    def answer_replay(self, conn: int) -> list[Action]:
        """SPEC S-5: a fresh reader connection is first sent the settings replay (its last
        statement the login check); answered as a reader whose login matches the writer's, and
        taken, so a transcript goes on as on a connection with nothing to replay."""
        sent = bytes(self.sent.get(conn, b""))
        if not sent.startswith(b"Q") or b"polarsplit: the reader connection has" not in sent:
            return []
        n = 1 + int.from_bytes(sent[1:5], "big")
        del self.sent[conn][:n]
        statements = sent[:n].count(b"SELECT pg_catalog.set_config(")
        answer = b"".join(command_complete("SELECT 1") for _ in range(statements))
        return self.backend(conn, answer + command_complete("SELECT 0") + rfq("I"))

    def timeout(self, now: int) -> list[Action]:
        """The clock reached `now`: on_timeout (R-1b), then drain."""
        self.s.now = now
        return self._apply(self.s.on_timeout())

    def take_client(self) -> bytes:
        out = bytes(self.to_client)
        self.to_client.clear()
        return out

    def take_sent(self, conn: int) -> bytes:
        out = bytes(self.sent.get(conn, b""))
        self.sent[conn] = bytearray()
        return out

    def answer_startup_capture(self, conn: int, user: str = "app") -> list[Action]:
        """The writer answers the capture the library sends right behind its startup ReadyForQuery
        (SPEC S-5); what was sent to it since the startup is that capture alone, and is taken."""
        sent = self.take_sent(conn)
        assert tags(sent) == "CPBCES" and b"polarsplit_capture" in sent, tags(sent)
        return self.backend(conn, startup_capture_answer(user))

    def balanced(self) -> bool:
        return not self.client_pending and all(not p for p in self.backend_pending.values())

    def decisions(self) -> list[Action]:
        return [a for a in self.log if a.kind == "DECISION"]


# --- PostgreSQL v3 wire helpers --------------------------------------------------------------
def msg(tag: str, body: bytes) -> bytes:
    return tag.encode() + struct.pack(">I", len(body) + 4) + body


def startup(**params: str) -> bytes:
    body = struct.pack(">I", 196608) + b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items())
    body += b"\0"
    return struct.pack(">I", len(body) + 4) + body


def query(sql: str) -> bytes:
    return msg("Q", sql.encode() + b"\0")


def auth_ok() -> bytes:
    return msg("R", struct.pack(">I", 0))


def rfq(status: str = "I", lsn: int | None = None) -> bytes:
    return msg("Z", status.encode() + (struct.pack(">Q", lsn) if lsn is not None else b""))


def command_complete(tag: str) -> bytes:
    return msg("C", tag.encode() + b"\0")


def startup_capture_answer(user: str = "app") -> bytes:
    """The writer's answer to the capture of its session's state that the library sends right
    behind the writer's startup ReadyForQuery (SPEC S-5): CloseComplete, ParseComplete,
    BindComplete, CloseComplete (its statement closed before its Parse and after its Bind: none stays
    prepared), the session authorization and role rows (names and values hex-encoded),
    CommandComplete, ReadyForQuery."""

    def row(kind: str, name: str, value: str) -> bytes:
        cols = [kind.encode(), name.encode().hex().encode(), value.encode().hex().encode()]
        return msg("D", struct.pack(">H", 3) + b"".join(struct.pack(">I", len(c)) + c for c in cols))

    return (steps() + row("2", "session_authorization", user) + row("3", "role", "none")
            + command_complete("SELECT 2") + rfq("I"))


def select_result(*rows: str) -> bytes:
    out = msg("T", struct.pack(">H", 1) + b"c0\0" + bytes(18))
    for r in rows:
        out += msg("D", struct.pack(">HI", 1, len(r)) + r.encode())
    return out + command_complete(f"SELECT {len(rows)}")


def steps() -> bytes:
    """The answers to the Close, Parse, Bind and Close in front of the library's probe and capture
    (W-7, S-5): CloseComplete, ParseComplete, BindComplete, CloseComplete."""
    return msg("3", b"") + msg("1", b"") + msg("2", b"") + msg("3", b"")


def probe_answer(lsn: str) -> bytes:
    """The writer's answer to the library's LSN probe (W-7) outside a block: [`steps`], the
    position's row, CommandComplete, RFQ."""
    out = steps() + msg("D", struct.pack(">HI", 1, len(lsn)) + lsn.encode())
    return out + command_complete("SELECT 1") + rfq("I")


def error(code: str, message: str, severity: str = "ERROR") -> bytes:
    body = f"S{severity}\0V{severity}\0C{code}\0M{message}\0\0".encode()
    return msg("E", body)


def tags(data: bytes) -> str:
    out, pos = [], 0
    while pos + 5 <= len(data):
        out.append(chr(data[pos]))
        pos += 1 + struct.unpack(">I", data[pos + 1: pos + 5])[0]
    return "".join(out)


def queries(data: bytes) -> list[str]:
    out, pos = [], 0
    while pos + 5 <= len(data):
        n = struct.unpack(">I", data[pos + 1: pos + 5])[0]
        if data[pos] == ord("Q"):
            out.append(data[pos + 5: pos + 1 + n - 1].decode())
        pos += 1 + n
    return out
