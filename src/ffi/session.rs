//! Sessions: one per client connection, used by one thread at a time.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{bytes_arg, guard, str_arg, write_text, PolarsplitEngine, PolarsplitStatus};
use super::{
    POLARSPLIT_DONE, POLARSPLIT_ERR_BAD_STATE, POLARSPLIT_ERR_CLOSED,
    POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_ERR_NULL, POLARSPLIT_ERR_PANIC,
    POLARSPLIT_ERR_POISONED, POLARSPLIT_ERR_PROTOCOL, POLARSPLIT_ERR_UNKNOWN_CONNECTION,
    POLARSPLIT_OK,
};
use crate::session::{Action, ClientInfo, Event, Session, SessionError};

/// One client's session state machine. Not thread-safe: one thread at a time (it may move
/// between threads between calls).
pub struct PolarsplitSession {
    pub(crate) inner: Session,
    poisoned: bool,
    last_error: String,
    #[cfg(feature = "test-hooks")]
    pub(crate) panic_next: bool,
}

/// Addresses of a client connection (SPEC W-1 identity modes), given at session creation.
/// Every field may be NULL/0 when unknown; LSN reporting is then disabled for the session when
/// the configured identity mode needs the missing address.
#[repr(C)]
pub struct PolarsplitClientInfo {
    /// The real client's address (identity mode `client`), NUL-terminated, or NULL.
    pub client_host: *const c_char,
    pub client_port: u16,
    /// The proxy's own listener address (identity mode `proxy`), or NULL.
    pub proxy_host: *const c_char,
    pub proxy_port: u16,
    /// The writer hostgroup of this client, or -1 for the configured one.
    pub writer_hostgroup: i64,
}

/// Action kinds (`polarsplit_action.kind`). Apply actions in the order polled.
pub type PolarsplitActionKind = u32;
/// Reply to the client's encryption request with one byte ('S'/'G' accept, 'N' refuse); `flag`
/// is true for GSSENCRequest. The client then sends a new startup packet.
pub const POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST: PolarsplitActionKind = 1;
/// A CancelRequest (`pid`, secret in `bytes`): cancel the statement of the session whose writer
/// key matches (see `polarsplit_session_executing_conn`), then close this client connection.
pub const POLARSPLIT_ACTION_CANCEL_REQUEST: PolarsplitActionKind = 2;
/// Open a writer connection, send `bytes` (a StartupMessage) on it, then report
/// `POLARSPLIT_EVENT_WRITER_CONNECTED` (or `_CONNECT_FAILED`).
pub const POLARSPLIT_ACTION_CONNECT_WRITER: PolarsplitActionKind = 3;
/// Informational: a routing decision (`outcome`, `reason`, `target_lsn`, `server`, `wait`,
/// `import_xids`, `attempt`).
pub const POLARSPLIT_ACTION_DECISION: PolarsplitActionKind = 4;
/// A reader connection to `server` whose key equals the `key_*` fields is needed: report
/// `POLARSPLIT_EVENT_READER_ATTACHED` or `_READER_UNAVAILABLE`. A new connection is opened with
/// `bytes` as its StartupMessage. Never block on a handshake.
pub const POLARSPLIT_ACTION_ACQUIRE_READER: PolarsplitActionKind = 5;
/// Send the next `n` client bytes to backend connection `conn`.
pub const POLARSPLIT_ACTION_FORWARD_CLIENT: PolarsplitActionKind = 6;
/// Drop the next `n` client bytes.
pub const POLARSPLIT_ACTION_DISCARD_CLIENT: PolarsplitActionKind = 7;
/// Send `bytes` to backend connection `conn`.
pub const POLARSPLIT_ACTION_SEND_BACKEND: PolarsplitActionKind = 8;
/// Send the next `n` bytes received from `conn` to the client.
pub const POLARSPLIT_ACTION_FORWARD_BACKEND: PolarsplitActionKind = 9;
/// Drop the next `n` bytes received from `conn`.
pub const POLARSPLIT_ACTION_DISCARD_BACKEND: PolarsplitActionKind = 10;
/// Send `bytes` to the client.
pub const POLARSPLIT_ACTION_SEND_CLIENT: PolarsplitActionKind = 11;
/// Return reader connection `conn` to the pool; `flag`: it needs an XID reset before reuse.
pub const POLARSPLIT_ACTION_RELEASE_READER: PolarsplitActionKind = 12;
/// `flag`: the writer connection holds session state and must stay bound to this client.
pub const POLARSPLIT_ACTION_PIN_WRITER: PolarsplitActionKind = 13;
/// Close backend connection `conn`; never reuse it.
pub const POLARSPLIT_ACTION_CLOSE_BACKEND: PolarsplitActionKind = 14;
/// Close the client connection (after sending everything before).
pub const POLARSPLIT_ACTION_CLOSE_CLIENT: PolarsplitActionKind = 15;

/// Outcomes (`polarsplit_action.outcome`, SPEC P-1).
pub const POLARSPLIT_OUTCOME_PASSTHROUGH: u32 = 0;
pub const POLARSPLIT_OUTCOME_FORCE_PRIMARY: u32 = 1;
pub const POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT: u32 = 2;
pub const POLARSPLIT_OUTCOME_REPLICA_TXN_SPLIT: u32 = 3;
pub const POLARSPLIT_OUTCOME_REJECT: u32 = 4;

/// One action. Fields not used by `kind` are zero/NULL. `bytes` points into the session and is
/// valid until the next non-const call on it. This struct only grows at the end.
#[repr(C)]
pub struct PolarsplitAction {
    pub kind: PolarsplitActionKind,
    /// Backend connection id (the host's own).
    pub conn: u64,
    /// Reader server id (ACQUIRE_READER, DECISION when a reader was chosen).
    pub server: u32,
    /// Byte count (FORWARD_* / DISCARD_*).
    pub n: usize,
    pub bytes: *const u8,
    pub bytes_len: usize,
    pub outcome: u32,
    pub reason: u32,
    pub target_lsn: u64,
    pub wait: bool,
    pub import_xids: bool,
    pub attempt: u32,
    /// Kind-specific flag (see each kind).
    pub flag: bool,
    /// CANCEL_REQUEST: the backend process id.
    pub pid: i32,
    /// ACQUIRE_READER: the reader key (SPEC P-9).
    pub key_profile_generation: u64,
    pub key_auth_hash: u64,
    pub key_startup_identity_hash: u64,
    pub key_startup_options_hash: u64,
}

/// Event kinds for `polarsplit_session_on_backend_event`.
pub type PolarsplitEventKind = u32;
/// The writer connection of CONNECT_WRITER is open and its startup packet sent.
pub const POLARSPLIT_EVENT_WRITER_CONNECTED: PolarsplitEventKind = 1;
pub const POLARSPLIT_EVENT_WRITER_CONNECT_FAILED: PolarsplitEventKind = 2;
/// A reader connection for ACQUIRE_READER (`server`; flags FRESH, NEEDS_RESET).
pub const POLARSPLIT_EVENT_READER_ATTACHED: PolarsplitEventKind = 3;
/// No reader connection can be had now (flag NO_CREDENTIALS: never for this user).
pub const POLARSPLIT_EVENT_READER_UNAVAILABLE: PolarsplitEventKind = 4;
/// Connection `conn` broke.
pub const POLARSPLIT_EVENT_CONNECTION_LOST: PolarsplitEventKind = 5;

/// READER_ATTACHED: opened for this request (startup-default settings).
pub const POLARSPLIT_EVENT_FLAG_FRESH: u32 = 1;
/// READER_ATTACHED: the connection still holds an XID import.
pub const POLARSPLIT_EVENT_FLAG_NEEDS_RESET: u32 = 2;
/// READER_UNAVAILABLE: this user cannot log in on the readers at all.
pub const POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS: u32 = 4;

impl PolarsplitSession {
    fn status_of(&mut self, e: SessionError) -> PolarsplitStatus {
        self.last_error = e.to_string();
        match e {
            SessionError::ActionsPending | SessionError::UnexpectedEvent(_) => {
                POLARSPLIT_ERR_BAD_STATE
            }
            SessionError::Closed => POLARSPLIT_ERR_CLOSED,
            SessionError::UnknownConnection(_) => POLARSPLIT_ERR_UNKNOWN_CONNECTION,
            SessionError::Protocol { .. } => POLARSPLIT_ERR_PROTOCOL,
            #[allow(unreachable_patterns)]
            _ => POLARSPLIT_ERR_BAD_STATE,
        }
    }

    #[cfg(feature = "test-hooks")]
    fn maybe_panic(&mut self) {
        if std::mem::take(&mut self.panic_next) {
            panic!("polarsplit test hook: forced panic");
        }
    }

    #[cfg(not(feature = "test-hooks"))]
    fn maybe_panic(&mut self) {}
}

/// Runs `f` on a live, unpoisoned session inside a panic boundary. A panic poisons the session.
///
/// # Safety
/// `session` must be NULL or a live session not used concurrently.
pub(crate) unsafe fn with_session(
    session: *mut PolarsplitSession,
    f: impl FnOnce(&mut PolarsplitSession) -> PolarsplitStatus,
) -> PolarsplitStatus {
    guard(|| {
        if session.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: non-NULL and, by contract, a live session used by one thread at a time.
        let s = unsafe { &mut *session };
        if s.poisoned {
            return POLARSPLIT_ERR_POISONED;
        }
        match catch_unwind(AssertUnwindSafe(|| {
            s.maybe_panic();
            f(&mut *s)
        })) {
            Ok(status) => status,
            Err(_) => {
                s.poisoned = true;
                s.last_error = "internal panic: the session is poisoned".to_string();
                POLARSPLIT_ERR_PANIC
            }
        }
    })
}

/// Reads an optional host string.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn opt_host(p: *const c_char, port: u16) -> Result<Option<(String, u16)>, PolarsplitStatus> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let h = unsafe { str_arg(p) }?;
    Ok(Some((h.to_string(), port)))
}

/// Creates a session for a new client connection and stores it in `*out`. `info` may be NULL
/// (no addresses known; the configured writer hostgroup).
///
/// # Safety
/// `engine` must be a live engine; `info` NULL or a valid struct whose strings are NULL or
/// NUL-terminated; `out` a writable pointer slot.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_new(
    engine: *const PolarsplitEngine,
    info: *const PolarsplitClientInfo,
    out: *mut *mut PolarsplitSession,
) -> PolarsplitStatus {
    guard(|| {
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: `out` is a writable slot.
        unsafe { *out = std::ptr::null_mut() };
        if engine.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        let mut ci = ClientInfo::default();
        if !info.is_null() {
            // SAFETY: a valid struct per the contract.
            let i = unsafe { &*info };
            // SAFETY: its strings are NULL or NUL-terminated.
            let (client, proxy) = match unsafe {
                (
                    opt_host(i.client_host, i.client_port),
                    opt_host(i.proxy_host, i.proxy_port),
                )
            } {
                (Ok(c), Ok(p)) => (c, p),
                (Err(s), _) | (_, Err(s)) => return s,
            };
            ci.client_addr = client;
            ci.proxy_addr = proxy;
            ci.writer_hostgroup = match i.writer_hostgroup {
                -1 => None,
                h if (0..i64::from(u32::MAX)).contains(&h) => Some(h as u32),
                _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
            };
        }
        // SAFETY: a live engine handle (shared, thread-safe).
        let e = unsafe { &*engine };
        let s = PolarsplitSession {
            inner: Session::new(e.inner.clone(), ci),
            poisoned: false,
            last_error: String::new(),
            #[cfg(feature = "test-hooks")]
            panic_next: false,
        };
        // SAFETY: `out` is a writable slot.
        unsafe { *out = Box::into_raw(Box::new(s)) };
        POLARSPLIT_OK
    })
}

/// Frees a session (also a poisoned one). NULL is a no-op.
///
/// # Safety
/// `session` must be NULL or a live session, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_free(session: *mut PolarsplitSession) {
    let _ = guard(|| {
        if !session.is_null() {
            // SAFETY: a live session; ownership returns to Rust.
            drop(unsafe { Box::from_raw(session) });
        }
        POLARSPLIT_OK
    });
}

/// Feeds `len` bytes the client sent. `*consumed` receives how many were taken: all of them,
/// unless too many pipelined statements are undecided — keep the rest and feed it again after
/// the next backend input. Then poll actions until `POLARSPLIT_DONE`.
///
/// On `POLARSPLIT_ERR_PROTOCOL` the client broke the protocol: poll the actions (an error for
/// the client and the closes) and see `polarsplit_session_last_error`.
///
/// # Safety
/// `session` must be a live session; `bytes` NULL (with `len` 0) or `len` readable bytes;
/// `consumed` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_recv_client(
    session: *mut PolarsplitSession,
    bytes: *const u8,
    len: usize,
    now_ms: u64,
    consumed: *mut usize,
) -> PolarsplitStatus {
    if !consumed.is_null() {
        // SAFETY: writable per the contract.
        unsafe { *consumed = 0 };
    }
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            let b = match bytes_arg(bytes, len) {
                Ok(b) => b,
                Err(st) => return st,
            };
            match s.inner.recv_client(b, now_ms) {
                Ok(n) => {
                    if !consumed.is_null() {
                        *consumed = n;
                    }
                    POLARSPLIT_OK
                }
                Err(e) => s.status_of(e),
            }
        })
    }
}

/// Feeds `len` bytes received from backend connection `conn`, then poll actions until
/// `POLARSPLIT_DONE`. `POLARSPLIT_ERR_UNKNOWN_CONNECTION` when the session does not use `conn`.
///
/// # Safety
/// `session` must be a live session; `bytes` NULL (with `len` 0) or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_recv_backend(
    session: *mut PolarsplitSession,
    conn: u64,
    bytes: *const u8,
    len: usize,
    now_ms: u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            let b = match bytes_arg(bytes, len) {
                Ok(b) => b,
                Err(st) => return st,
            };
            match s.inner.recv_backend(conn, b, now_ms) {
                Ok(()) => POLARSPLIT_OK,
                Err(e) => s.status_of(e),
            }
        })
    }
}

/// Reports an event about backend connection `conn` (`POLARSPLIT_EVENT_*`, with
/// `POLARSPLIT_EVENT_FLAG_*` bits in `flags`; `server` for READER_ATTACHED). Then poll actions.
/// An unknown `kind` or flag bit is `POLARSPLIT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `session` must be a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_on_backend_event(
    session: *mut PolarsplitSession,
    conn: u64,
    kind: PolarsplitEventKind,
    server: u32,
    flags: u32,
    now_ms: u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            let all = POLARSPLIT_EVENT_FLAG_FRESH
                | POLARSPLIT_EVENT_FLAG_NEEDS_RESET
                | POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS;
            if flags & !all != 0 {
                return POLARSPLIT_ERR_INVALID_ARGUMENT;
            }
            let ev = match kind {
                POLARSPLIT_EVENT_WRITER_CONNECTED => Event::WriterConnected,
                POLARSPLIT_EVENT_WRITER_CONNECT_FAILED => Event::WriterConnectFailed,
                POLARSPLIT_EVENT_READER_ATTACHED => Event::ReaderAttached {
                    server,
                    fresh: flags & POLARSPLIT_EVENT_FLAG_FRESH != 0,
                    needs_reset: flags & POLARSPLIT_EVENT_FLAG_NEEDS_RESET != 0,
                },
                POLARSPLIT_EVENT_READER_UNAVAILABLE => Event::ReaderUnavailable {
                    no_credentials: flags & POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS != 0,
                },
                POLARSPLIT_EVENT_CONNECTION_LOST => Event::ConnectionLost,
                _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
            };
            match s.inner.on_backend_event(conn, ev, now_ms) {
                Ok(()) => POLARSPLIT_OK,
                Err(e) => s.status_of(e),
            }
        })
    }
}

/// Writes the next action into `*out` and returns `POLARSPLIT_OK`, or returns
/// `POLARSPLIT_DONE` when none is left (and zeroes `*out`). Pointers in `*out` are valid until
/// the next non-const call on the session.
///
/// # Safety
/// `session` must be a live session; `out` a writable `polarsplit_action`.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_poll_action(
    session: *mut PolarsplitSession,
    out: *mut PolarsplitAction,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            if out.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            let mut a = PolarsplitAction {
                kind: 0,
                conn: 0,
                server: 0,
                n: 0,
                bytes: std::ptr::null(),
                bytes_len: 0,
                outcome: 0,
                reason: 0,
                target_lsn: 0,
                wait: false,
                import_xids: false,
                attempt: 0,
                flag: false,
                pid: 0,
                key_profile_generation: 0,
                key_auth_hash: 0,
                key_startup_identity_hash: 0,
                key_startup_options_hash: 0,
            };
            let status = match s.inner.poll_action() {
                None => POLARSPLIT_DONE,
                Some(action) => {
                    fill(&mut a, action);
                    POLARSPLIT_OK
                }
            };
            *out = a;
            status
        })
    }
}

fn set_bytes(a: &mut PolarsplitAction, b: &[u8]) {
    a.bytes = b.as_ptr();
    a.bytes_len = b.len();
}

fn fill(a: &mut PolarsplitAction, action: Action<'_>) {
    match action {
        Action::ClientEncryptionRequest { gss } => {
            a.kind = POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST;
            a.flag = gss;
        }
        Action::CancelRequest { pid, secret } => {
            a.kind = POLARSPLIT_ACTION_CANCEL_REQUEST;
            a.pid = pid;
            set_bytes(a, secret);
        }
        Action::ConnectWriter { startup } => {
            a.kind = POLARSPLIT_ACTION_CONNECT_WRITER;
            set_bytes(a, startup);
        }
        Action::Decision(d) => {
            a.kind = POLARSPLIT_ACTION_DECISION;
            a.outcome = d.outcome as u32;
            a.reason = d.reason as u32;
            a.target_lsn = d.target.0;
            a.server = d.server.unwrap_or(0);
            a.flag = d.server.is_some();
            a.wait = d.wait;
            a.import_xids = d.import;
            a.attempt = u32::from(d.attempt);
        }
        Action::AcquireReader {
            server,
            key,
            startup,
        } => {
            a.kind = POLARSPLIT_ACTION_ACQUIRE_READER;
            a.server = server;
            a.key_profile_generation = key.profile_generation;
            a.key_auth_hash = key.auth_hash;
            a.key_startup_identity_hash = key.startup_identity_hash;
            a.key_startup_options_hash = key.startup_options_hash;
            set_bytes(a, startup);
        }
        Action::ForwardClient { conn, n } => {
            a.kind = POLARSPLIT_ACTION_FORWARD_CLIENT;
            a.conn = conn;
            a.n = n;
        }
        Action::DiscardClient { n } => {
            a.kind = POLARSPLIT_ACTION_DISCARD_CLIENT;
            a.n = n;
        }
        Action::SendBackend { conn, bytes } => {
            a.kind = POLARSPLIT_ACTION_SEND_BACKEND;
            a.conn = conn;
            set_bytes(a, bytes);
        }
        Action::ForwardBackend { conn, n } => {
            a.kind = POLARSPLIT_ACTION_FORWARD_BACKEND;
            a.conn = conn;
            a.n = n;
        }
        Action::DiscardBackend { conn, n } => {
            a.kind = POLARSPLIT_ACTION_DISCARD_BACKEND;
            a.conn = conn;
            a.n = n;
        }
        Action::SendClient { bytes } => {
            a.kind = POLARSPLIT_ACTION_SEND_CLIENT;
            set_bytes(a, bytes);
        }
        Action::ReleaseReader { conn, needs_reset } => {
            a.kind = POLARSPLIT_ACTION_RELEASE_READER;
            a.conn = conn;
            a.flag = needs_reset;
        }
        Action::PinWriter { pinned } => {
            a.kind = POLARSPLIT_ACTION_PIN_WRITER;
            a.flag = pinned;
        }
        Action::CloseBackend { conn } => {
            a.kind = POLARSPLIT_ACTION_CLOSE_BACKEND;
            a.conn = conn;
        }
        Action::CloseClient => a.kind = POLARSPLIT_ACTION_CLOSE_CLIENT,
        #[allow(unreachable_patterns)]
        _ => {}
    }
}

/// The backend connection executing the client's current statement (for a CancelRequest):
/// `POLARSPLIT_OK` with `*conn` set, or `POLARSPLIT_DONE` when nothing is executing.
///
/// # Safety
/// `session` must be a live session; `conn` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_executing_conn(
    session: *mut PolarsplitSession,
    conn: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            if conn.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            match s.inner.executing_connection() {
                Some(c) => {
                    *conn = c;
                    POLARSPLIT_OK
                }
                None => POLARSPLIT_DONE,
            }
        })
    }
}

/// The writer's BackendKeyData as the client saw it (to match a CancelRequest): `*pid` and up
/// to `cap` bytes of the secret into `secret` with its length in `*secret_len`. `POLARSPLIT_DONE`
/// before the writer sent one.
///
/// # Safety
/// `session` must be a live session; `pid` and `secret_len` writable; `secret` `cap` writable
/// bytes (or NULL with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_backend_key(
    session: *mut PolarsplitSession,
    pid: *mut i32,
    secret: *mut u8,
    cap: usize,
    secret_len: *mut usize,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            if pid.is_null() || secret_len.is_null() || (secret.is_null() && cap > 0) {
                return POLARSPLIT_ERR_NULL;
            }
            match s.inner.backend_key() {
                None => POLARSPLIT_DONE,
                Some((p, key)) => {
                    *pid = p;
                    *secret_len = key.len();
                    let n = key.len().min(cap);
                    if n > 0 {
                        std::ptr::copy_nonoverlapping(key.as_ptr(), secret, n);
                    }
                    POLARSPLIT_OK
                }
            }
        })
    }
}

/// Copies the session's last error text (empty when none) into `buf` as a NUL-terminated
/// string, truncated to `len` bytes. Returns the full length of the text (without NUL); a
/// result `>= len` means it was truncated. Works on a poisoned session. Returns 0 for NULL.
///
/// # Safety
/// `session` must be NULL or a live session; `buf` NULL or `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_last_error(
    session: *const PolarsplitSession,
    buf: *mut c_char,
    len: usize,
) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        if session.is_null() {
            return 0;
        }
        // SAFETY: a live session; read-only here.
        let s = unsafe { &*session };
        let text = if s.last_error.is_empty() {
            s.inner.last_error()
        } else {
            &s.last_error
        };
        // SAFETY: `buf` is NULL or `len` writable bytes.
        unsafe { write_text(buf, len, text) }
    }))
    .unwrap_or(0)
}

/// Whether the session was poisoned by a panic (1) or not (0); 0 for NULL.
///
/// # Safety
/// `session` must be NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_is_poisoned(session: *const PolarsplitSession) -> bool {
    // SAFETY: NULL or a live session, read-only.
    !session.is_null() && unsafe { (*session).poisoned }
}

/// The stable name of an outcome (`"FORCE_PRIMARY"`, …), or NULL for an unknown value.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_outcome_name(outcome: u32) -> *const c_char {
    use crate::session::Outcome;
    let s: &'static str = match u8::try_from(outcome).ok().and_then(Outcome::from_u8) {
        Some(Outcome::Passthrough) => "PASSTHROUGH\0",
        Some(Outcome::ForcePrimary) => "FORCE_PRIMARY\0",
        Some(Outcome::ReplicaWithWait) => "REPLICA_WITH_WAIT\0",
        Some(Outcome::ReplicaTxnSplit) => "REPLICA_TXN_SPLIT\0",
        Some(Outcome::Reject) => "REJECT\0",
        None => return std::ptr::null(),
    };
    s.as_ptr().cast()
}

/// The stable name of a reason code (`"READ_WAIT"`, …), or NULL for an unknown value.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_reason_name(reason: u32) -> *const c_char {
    use crate::session::Reason;
    match u16::try_from(reason).ok().and_then(Reason::from_u16) {
        Some(r) => r.c_name().as_ptr().cast(),
        None => std::ptr::null(),
    }
}

/// Test hook: the next call on this session panics inside the library (to prove that the panic
/// boundary poisons just that session). Only in builds with the `test-hooks` feature.
///
/// # Safety
/// `session` must be a live session.
#[cfg(feature = "test-hooks")]
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_test_panic_next(
    session: *mut PolarsplitSession,
) -> PolarsplitStatus {
    guard(|| {
        if session.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: a live session.
        unsafe { (*session).panic_next = true };
        POLARSPLIT_OK
    })
}

/// Fact kinds for `polarsplit_session_recv_backend_fact` (libpq-based hosts, SPEC §0).
pub const POLARSPLIT_FACT_READY_FOR_QUERY: u32 = 1;
pub const POLARSPLIT_FACT_COMMAND_COMPLETE: u32 = 2;
pub const POLARSPLIT_FACT_ERROR: u32 = 3;
pub const POLARSPLIT_FACT_NOTICE: u32 = 4;
pub const POLARSPLIT_FACT_PARAMETER_STATUS: u32 = 5;
/// Any other message, by its type byte in `tag` (rows, descriptions, COPY data…).
pub const POLARSPLIT_FACT_OTHER: u32 = 6;

/// `polarsplit_backend_fact.lsn_state`.
pub const POLARSPLIT_LSN_MISSING: u32 = 0;
pub const POLARSPLIT_LSN_ZERO: u32 = 1;
pub const POLARSPLIT_LSN_AT: u32 = 2;

/// One ErrorResponse/NoticeResponse field.
#[repr(C)]
pub struct PolarsplitErrorField {
    /// The field code ('S', 'V', 'C', 'M', 'D', 'R', …).
    pub code: u8,
    pub value: *const u8,
    pub value_len: usize,
}

/// One backend message as parsed facts. Fields not used by `kind` are ignored.
#[repr(C)]
pub struct PolarsplitBackendFact {
    pub kind: u32,
    /// READY_FOR_QUERY: 'I', 'T' or 'E'.
    pub status: u8,
    /// READY_FOR_QUERY: `POLARSPLIT_LSN_*`, and the LSN when AT.
    pub lsn_state: u32,
    pub lsn: u64,
    /// READY_FOR_QUERY: 0 (no marker), 'x' or 'w', and the raw XID list.
    pub marker: u8,
    pub xids: *const u8,
    pub xids_len: usize,
    /// COMMAND_COMPLETE: the tag. PARAMETER_STATUS: the name.
    pub text: *const u8,
    pub text_len: usize,
    /// PARAMETER_STATUS: the value.
    pub value: *const u8,
    pub value_len: usize,
    /// ERROR / NOTICE: the fields.
    pub fields: *const PolarsplitErrorField,
    pub fields_len: usize,
    /// OTHER: the message type byte.
    pub tag: u8,
}

/// Feeds one backend message of connection `conn` as parsed facts (hosts that never see raw
/// backend bytes, e.g. libpq-based ones). The resulting FORWARD_BACKEND / DISCARD_BACKEND
/// actions for `conn` have `n == 1`: forward or drop that message. Then poll actions.
///
/// # Safety
/// `session` must be a live session; `fact` a valid struct whose pointers are NULL (with a zero
/// length) or point to their lengths of readable bytes/fields.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_recv_backend_fact(
    session: *mut PolarsplitSession,
    conn: u64,
    fact: *const PolarsplitBackendFact,
    now_ms: u64,
) -> PolarsplitStatus {
    use crate::protocol::{Lsn, LsnField, Marker, TxStatus};
    use crate::session::BackendFact;
    // SAFETY: per the contract.
    unsafe {
        with_session(session, |s| {
            if fact.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            let f = &*fact;
            let text = match bytes_arg(f.text, f.text_len) {
                Ok(b) => b,
                Err(st) => return st,
            };
            let field_vec: Vec<(u8, &[u8])>;
            let parsed = match f.kind {
                POLARSPLIT_FACT_READY_FOR_QUERY => {
                    let Some(status) = TxStatus::from_byte(f.status) else {
                        return POLARSPLIT_ERR_INVALID_ARGUMENT;
                    };
                    let lsn = match f.lsn_state {
                        POLARSPLIT_LSN_MISSING => LsnField::Missing,
                        POLARSPLIT_LSN_ZERO => LsnField::Zero,
                        POLARSPLIT_LSN_AT if f.lsn != 0 => LsnField::At(Lsn(f.lsn)),
                        POLARSPLIT_LSN_AT => LsnField::Zero,
                        _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
                    };
                    let xids = match bytes_arg(f.xids, f.xids_len) {
                        Ok(b) => b,
                        Err(st) => return st,
                    };
                    let xact = match f.marker {
                        0 => None,
                        b'x' => Some((Marker::Splittable, xids)),
                        b'w' => Some((Marker::WalPending, xids)),
                        _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
                    };
                    BackendFact::ReadyForQuery { status, lsn, xact }
                }
                POLARSPLIT_FACT_COMMAND_COMPLETE => BackendFact::CommandComplete { tag: text },
                POLARSPLIT_FACT_ERROR | POLARSPLIT_FACT_NOTICE => {
                    if f.fields.is_null() && f.fields_len > 0 {
                        return POLARSPLIT_ERR_NULL;
                    }
                    if f.fields_len > isize::MAX as usize / size_of::<PolarsplitErrorField>() {
                        // No such array can exist: refuse before making a slice of it.
                        return POLARSPLIT_ERR_INVALID_ARGUMENT;
                    }
                    let raw: &[PolarsplitErrorField] = if f.fields_len == 0 {
                        &[]
                    } else {
                        std::slice::from_raw_parts(f.fields, f.fields_len)
                    };
                    let mut v = Vec::with_capacity(raw.len());
                    for field in raw {
                        match bytes_arg(field.value, field.value_len) {
                            Ok(b) => v.push((field.code, b)),
                            Err(st) => return st,
                        }
                    }
                    field_vec = v;
                    if f.kind == POLARSPLIT_FACT_ERROR {
                        BackendFact::Error { fields: &field_vec }
                    } else {
                        BackendFact::Notice { fields: &field_vec }
                    }
                }
                POLARSPLIT_FACT_PARAMETER_STATUS => {
                    let value = match bytes_arg(f.value, f.value_len) {
                        Ok(b) => b,
                        Err(st) => return st,
                    };
                    BackendFact::ParameterStatus { name: text, value }
                }
                POLARSPLIT_FACT_OTHER => BackendFact::Other { tag: f.tag },
                _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
            };
            match s.inner.recv_backend_fact(conn, parsed, now_ms) {
                Ok(()) => POLARSPLIT_OK,
                Err(e) => s.status_of(e),
            }
        })
    }
}
