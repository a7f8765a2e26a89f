//! Sessions: one per client connection, used by one thread at a time. Inputs, the action poll,
//! and what a host needs for cancel requests and logs.

use std::ffi::c_char;

use super::action::{write_action, write_none, PolarsplitAction};
use super::cluster::{optional_hostgroup, PolarsplitEngine};
use super::event::{event_from_c, PolarsplitEventKind};
use super::facts::{fact_fields, fact_from_c, Fields, PolarsplitBackendFact};
use super::facts::{POLARSPLIT_FACT_ERROR, POLARSPLIT_FACT_NOTICE};
use super::handle::{boundary, create, free, opt_out, read_sized, slice, slice_mut, text};
use super::handle::{try_arg, try_mut, try_out, try_ref, write_text, Castable, Growable};
use super::status::{session_status, PolarsplitStatus, POLARSPLIT_DONE, POLARSPLIT_ERR_ABI};
use super::status::{POLARSPLIT_ERR_NULL, POLARSPLIT_ERR_POISONED, POLARSPLIT_OK};
use crate::session::{ClientInfo, Session, SessionError};

/// One client's session state machine. Not thread-safe: one thread at a time (it may move
/// between threads between calls).
pub struct PolarsplitSession {
    inner: Session,
    poisoned: bool,
    /// The host's action struct could not hold an action (`POLARSPLIT_ERR_ABI`).
    refused: bool,
    last_error: String,
    #[cfg(feature = "test-hooks")]
    panic_next: bool,
}

impl Castable for PolarsplitSession {
    fn unusable(&self) -> Option<PolarsplitStatus> {
        if self.poisoned {
            Some(POLARSPLIT_ERR_POISONED)
        } else if self.refused {
            Some(POLARSPLIT_ERR_ABI)
        } else {
            None
        }
    }

    fn poison(&mut self) {
        self.poisoned = true;
        self.last_error = "internal panic: the session is poisoned".to_string();
    }

    fn on_use(&mut self) {
        #[cfg(feature = "test-hooks")]
        if std::mem::take(&mut self.panic_next) {
            panic!("polarsplit test hook: forced panic");
        }
    }
}

impl PolarsplitSession {
    /// The status of a session input's result; a refusal's text becomes the last error.
    fn status<T>(&mut self, r: Result<T, SessionError>) -> PolarsplitStatus {
        match r {
            Ok(_) => POLARSPLIT_OK,
            Err(e) => {
                self.last_error = e.to_string();
                session_status(&e)
            }
        }
    }
}

/// Addresses of a client connection (SPEC W-1 identity modes), given at session creation.
/// Every field may be NULL/0 when unknown; LSN reporting is then disabled for the session when
/// the configured identity mode needs the missing address. Grows at the end:
/// `polarsplit_session_new` takes the host's `sizeof`; a field appended later reads as 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitClientInfo {
    /// The real client's address (identity mode `client`), NUL-terminated, or NULL.
    pub client_host: *const c_char,
    /// The real client's port.
    pub client_port: u16,
    /// The proxy's own listener address (identity mode `proxy`), or NULL.
    pub proxy_host: *const c_char,
    /// The proxy's listener port.
    pub proxy_port: u16,
    /// The writer hostgroup of this client, or -1 for the configured one.
    pub writer_hostgroup: i64,
}

// SAFETY: repr(C) integers and raw pointers.
unsafe impl Growable for PolarsplitClientInfo {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitClientInfo>();
}

/// An optional (host, port) of the client info.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn opt_addr(p: *const c_char, port: u16) -> Result<Option<(String, u16)>, PolarsplitStatus> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: a NUL-terminated string.
    Ok(Some((unsafe { text(p) }?.to_string(), port)))
}

/// The Rust client info of a C one.
///
/// # Safety
/// The strings in `i` must be NULL or NUL-terminated.
unsafe fn client_info(i: &PolarsplitClientInfo) -> Result<ClientInfo, PolarsplitStatus> {
    Ok(ClientInfo {
        // SAFETY: as documented.
        client_addr: unsafe { opt_addr(i.client_host, i.client_port) }?,
        // SAFETY: as documented.
        proxy_addr: unsafe { opt_addr(i.proxy_host, i.proxy_port) }?,
        writer_hostgroup: optional_hostgroup(i.writer_hostgroup)?,
    })
}

/// Creates a session for a new client connection and stores it in `*out`. `info` may be NULL
/// (no addresses known; the configured writer hostgroup); otherwise `info_size` is
/// `sizeof(polarsplit_client_info)` as the host was built with (`POLARSPLIT_ERR_ABI` when
/// smaller than ABI 3.0's).
///
/// # Safety
/// `engine` must be a live engine; `info` NULL or `info_size` readable bytes of a struct whose
/// strings are NULL or NUL-terminated; `out` a writable pointer slot.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_new(
    engine: *const PolarsplitEngine,
    info: *const PolarsplitClientInfo,
    info_size: usize,
    out: *mut *mut PolarsplitSession,
) -> PolarsplitStatus {
    boundary! {
        let make = || {
            let e = try_ref!(engine);
            let info = if info.is_null() {
                ClientInfo::default()
            } else {
                // SAFETY: `info_size` readable bytes; its strings NULL or NUL-terminated.
                unsafe { client_info(&read_sized(info, info_size)?)? }
        };
        Ok(PolarsplitSession {
            inner: Session::new(e.inner.clone(), info),
            poisoned: false,
            refused: false,
            last_error: String::new(),
            #[cfg(feature = "test-hooks")]
            panic_next: false,
        })
        };
        // SAFETY: `out` is a writable slot.
        unsafe { create(out, make) }
    }
}

/// Frees a session (also a poisoned one). NULL is a no-op.
///
/// # Safety
/// `session` must be NULL or a live session, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_free(session: *mut PolarsplitSession) {
    // SAFETY: as documented.
    boundary! { unsafe { free(session) } }
}

/// Feeds `len` bytes the client sent, then poll actions until `POLARSPLIT_DONE`. Keep every
/// byte fed until a FORWARD_CLIENT or DISCARD_CLIENT action covers it.
///
/// `POLARSPLIT_OK`: `*consumed` bytes were taken — all of them, unless too many pipelined
/// statements are undecided: keep the rest and offer it again after the next backend input.
///
/// `POLARSPLIT_ERR_PROTOCOL`: the client broke the protocol and the session is closed.
/// `*consumed` is `len`: every byte passed is taken (offer none again). Drain the actions and
/// carry them all out in order: byte actions cover the client's messages before the violation,
/// as usual; then SEND_CLIENT carries the 08P01 FatalResponse (send it), CLOSE_BACKEND closes
/// each backend connection and CLOSE_CLIENT comes last. Client bytes no byte action covered (the
/// bad message and everything after it) are dropped with the connection. No action asks for an
/// answer: the session refuses every later input with `POLARSPLIT_ERR_CLOSED`.
///
/// Any other status: `*consumed` is 0, nothing was taken and nothing changed (there are no new
/// actions, except after `POLARSPLIT_ERR_PANIC`: the session is then poisoned).
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
    // SAFETY: NULL or writable.
    let mut consumed = unsafe { opt_out(consumed) };
    if let Some(c) = consumed.as_mut() {
        c.set(0);
    }
    boundary! {
        let mut s = try_mut!(session);
        // SAFETY: `len` readable bytes.
        let b = try_arg!(unsafe { slice(bytes, len) });
        let r = s.inner.recv_client(b, now_ms);
        let taken = match &r {
            Ok(n) => *n,
            Err(SessionError::Protocol { .. }) => len,
            Err(_) => 0,
        };
        if let Some(mut c) = consumed {
            c.set(taken);
        }
        s.status(r)
    }
}

/// The client's input ended: its connection closed, or half-closed (`shutdown(SHUT_WR)`), or
/// failed. An input (poll actions until `POLARSPLIT_DONE` after it). Call it once every byte
/// the client sent was taken by `polarsplit_session_recv_client` (offer what it did not take
/// again first, after backend input, as usual), and keep the session: as PostgreSQL at the end
/// of its input, the session still runs and answers everything the client sent before it, in
/// order — statements queued behind a read go to the writer once it answered — and emits
/// CLOSE_CLIENT after the last answer. Until then keep executing its actions and feeding the
/// backends' bytes and events: send the answers while the client's socket takes them (a
/// half-closed client reads them all); once a write fails, drop what is for the client and go
/// on. The host bounds the wait (the client is gone, a statement may run long): closing the
/// session then is what closing the client always was. An incomplete message at the end is
/// never run (its bytes are discarded by an action); one partly sent to a server already ends
/// the session at once (CLOSE_BACKEND, CLOSE_CLIENT). Before the client logged in, with nothing
/// queued, the session closes at once. After the client's Terminate it changes nothing (the
/// session closes once that Terminate's predecessors answered). `POLARSPLIT_ERR_CLOSED` after
/// the session ended, `POLARSPLIT_ERR_BAD_STATE` while actions are pending; then nothing
/// changed. (New within ABI 3: a host that never calls it closes the session itself at the
/// end of the client's input, as before, and loses what the client queued.)
///
/// # Safety
/// `session` must be a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_client_eof(
    session: *mut PolarsplitSession,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        let r = s.inner.client_eof(now_ms);
        s.status(r)
    }
}

/// Feeds `len` bytes received from backend connection `conn`, then poll actions until
/// `POLARSPLIT_DONE`. `POLARSPLIT_ERR_UNKNOWN_CONNECTION` when the session does not use `conn`
/// (the bytes were not taken). On `POLARSPLIT_ERR_PROTOCOL` the bytes were taken: drain the
/// actions, they say what to close (a reader's violation is absorbed; the writer's ends the
/// session).
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
    boundary! {
        let mut s = try_mut!(session);
        // SAFETY: `len` readable bytes.
        let b = try_arg!(unsafe { slice(bytes, len) });
        let r = s.inner.recv_backend(conn, b, now_ms);
        s.status(r)
    }
}

/// Feeds one backend message of connection `conn` as parsed facts (hosts that never see raw
/// backend bytes, e.g. libpq-based ones); `fact_size` is `sizeof(polarsplit_backend_fact)` as the
/// host was built with. The resulting FORWARD_BACKEND / DISCARD_BACKEND actions for `conn` have
/// `n == 1`: forward or drop that message. Then poll actions.
///
/// # Safety
/// `session` must be a live session; `fact` NULL or `fact_size` readable bytes of a struct whose
/// pointers are NULL (with a zero length) or point to their lengths of readable bytes/fields.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_recv_backend_fact(
    session: *mut PolarsplitSession,
    conn: u64,
    fact: *const PolarsplitBackendFact,
    fact_size: usize,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        // SAFETY: `fact_size` readable bytes.
        let f = try_arg!(unsafe { read_sized(fact, fact_size) });
        let fields: Fields<'_> = if matches!(f.kind, POLARSPLIT_FACT_ERROR | POLARSPLIT_FACT_NOTICE) {
            // SAFETY: the struct's pointers are as documented.
            try_arg!(unsafe { fact_fields(&f) })
        } else {
            Vec::new()
        };
        // SAFETY: as above.
        let parsed = try_arg!(unsafe { fact_from_c(&f, &fields) });
        let r = s.inner.recv_backend_fact(conn, parsed, now_ms);
        s.status(r)
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
    boundary! {
        let mut s = try_mut!(session);
        let ev = try_arg!(event_from_c(kind, server, flags));
        let r = s.inner.on_backend_event(conn, ev, now_ms);
        s.status(r)
    }
}

/// Writes the next action into `*out` and returns `POLARSPLIT_OK`, or writes kind
/// `POLARSPLIT_ACTION_NONE` and returns `POLARSPLIT_DONE` when none is left. Pass
/// `out_size = sizeof(polarsplit_action)`: only `kind` and the kind's member are written, never
/// past `out_size`. `POLARSPLIT_ERR_ABI` (nothing written) when `out_size` is below ABI 3.0's
/// struct, or when the next action's kind is newer than the host (its member lies beyond
/// `out_size`): the session is then unusable — free it and close the client. Pointers in `*out`
/// are valid until the next non-const call on the session.
///
/// # Safety
/// `session` must be a live session; `out` NULL or `out_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_poll_action(
    session: *mut PolarsplitSession,
    out: *mut PolarsplitAction,
    out_size: usize,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        if out_size < PolarsplitAction::BASE_SIZE {
            return POLARSPLIT_ERR_ABI;
        }
        let Some(action) = s.inner.poll_action() else {
            // SAFETY: `out_size >= BASE_SIZE` writable bytes.
            unsafe { write_none(out) };
            return POLARSPLIT_DONE;
        };
        // SAFETY: `out_size >= BASE_SIZE` writable bytes.
        match unsafe { write_action(out, out_size, action) } {
            Ok(()) => POLARSPLIT_OK,
            Err(status) => {
                s.refused = true;
                s.last_error = "the host's polarsplit_action is too small for the next action: \
                                it was built against an older header"
                    .to_string();
                status
            }
        }
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
    boundary! {
        let s = try_mut!(session);
        let mut conn = try_out!(conn);
        match s.inner.executing_connection() {
            Some(c) => {
                conn.set(c);
                POLARSPLIT_OK
            }
            None => POLARSPLIT_DONE,
        }
    }
}

/// The host forwarded a CancelRequest to backend connection `conn` (SPEC F-1): call it right
/// after sending the cancel to the connection `polarsplit_session_executing_conn` named. A
/// reader connection that may have received a cancel is then closed when the session is done
/// with it (a CLOSE_BACKEND action instead of RELEASE_READER), never handed to another session:
/// the cancel's signal may land after the statement it was meant for has ended, on whatever that
/// connection runs next. A `conn` that is not one of the session's readers (the writer, a
/// connection already released) changes nothing. Not an input: it queues no action, is allowed
/// while actions are pending, and needs no drain. Returns `POLARSPLIT_OK`.
///
/// # Safety
/// `session` must be a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_cancel_forwarded(
    session: *mut PolarsplitSession,
    conn: u64,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        s.inner.cancel_forwarded(conn);
        POLARSPLIT_OK
    }
}

/// The client sent a CancelRequest while `polarsplit_session_executing_conn` answered
/// `POLARSPLIT_DONE` (SPEC F-1): no server has the client's current work yet. An input (drain
/// after it, as after any). A simple Query waiting for its reader connection is answered at
/// once with the server's 57014 "canceling statement due to user request" (inside a transaction
/// block the block fails, as on the primary) and nothing runs it; the host still answers the
/// ACQUIRE_READER it was given (a connection attached for it is closed unused: a CLOSE_BACKEND
/// action), and until that answer the session starts nothing new. Any other work the session
/// holds — an extended batch whose Sync or Flush has not arrived, a statement waiting for the
/// engine's probe or capture, a batch waiting for its reader connection — is placed as the
/// client's Flush would place it (E-1), as soon as what it waits for allows, and once it runs
/// on a connection the session emits a CANCEL_REQUEST action with its own BackendKeyData, after
/// the bytes that placed it (in this drain or a later one): the host handles it as any
/// CANCEL_REQUEST — `polarsplit_session_executing_conn` then names the connection — and calls
/// `polarsplit_session_cancel_forwarded`. Returns `POLARSPLIT_OK` when the cancel was taken
/// (drain), `POLARSPLIT_DONE` when the session holds no client work (PostgreSQL too ignores a
/// cancel that reaches a backend waiting for a command), or an error as for any input.
///
/// # Safety
/// `session` must be a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_cancel_unplaced(
    session: *mut PolarsplitSession,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        match s.inner.cancel_unplaced(now_ms) {
            Ok(false) => POLARSPLIT_DONE,
            r => s.status(r),
        }
    }
}

/// The earliest host time (in the milliseconds of the `now_ms` the host passes) at which the
/// session needs `polarsplit_session_on_timeout` (SPEC R-1b: a reader statement that has had no
/// answer for `reader_response_timeout_ms`). `POLARSPLIT_OK` with `*at` set, or
/// `POLARSPLIT_DONE` with `*at = UINT64_MAX` when the session has no deadline. Read it after
/// every drain (any input may set, move or clear it) and take it into the host's poll timeout.
/// Changes nothing; allowed while actions are pending.
///
/// # Safety
/// `session` must be a live session; `at` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_next_deadline(
    session: *mut PolarsplitSession,
    at: *mut u64,
) -> PolarsplitStatus {
    boundary! {
        let s = try_mut!(session);
        let mut at = try_out!(at);
        match s.inner.next_deadline() {
            Some(t) => {
                at.set(t);
                POLARSPLIT_OK
            }
            None => {
                at.set(u64::MAX);
                POLARSPLIT_DONE
            }
        }
    }
}

/// Reports that host time `now_ms` has come (SPEC R-1b): an input, like the `recv_*` functions
/// — then poll actions until `POLARSPLIT_DONE`. Call it when the time from
/// `polarsplit_session_next_deadline` has passed; an early or extra call is harmless (nothing is
/// due yet: no actions). A reader whose statement has had no answer within
/// `reader_response_timeout_ms` — and whose monitor reported no sample since the statement was
/// sent (a long report on a healthy reader is never cut short: its deadline moves on) — is
/// treated as lost: the actions close it (CLOSE_BACKEND) and retry the statement per the failure
/// policy (SPEC F-2, F-3) or answer the client. `POLARSPLIT_ERR_BAD_STATE` while actions are
/// pending, `POLARSPLIT_ERR_CLOSED` after the session ended; then nothing changed.
///
/// # Safety
/// `session` must be a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_on_timeout(
    session: *mut PolarsplitSession,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! {
        let mut s = try_mut!(session);
        let r = s.inner.on_timeout(now_ms);
        s.status(r)
    }
}

/// The writer's BackendKeyData as the client saw it (to match a CancelRequest): `*pid` and up
/// to `cap` bytes of the secret into `secret` with its length in `*secret_len`. `POLARSPLIT_DONE`
/// before the writer sent one (PostgreSQL sends it once authentication succeeded).
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
    boundary! {
        let s = try_mut!(session);
        let (mut pid, mut secret_len) = (try_out!(pid), try_out!(secret_len));
        // SAFETY: `cap` writable bytes.
        let secret = try_arg!(unsafe { slice_mut(secret, cap) });
        let Some((p, key)) = s.inner.backend_key() else {
            return POLARSPLIT_DONE;
        };
        pid.set(p);
        secret_len.set(key.len());
        let n = key.len().min(secret.len());
        secret[..n].copy_from_slice(&key[..n]);
        POLARSPLIT_OK
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
    boundary! {
        let s = try_ref!(session);
        let text = if s.last_error.is_empty() {
            s.inner.last_error()
        } else {
            &s.last_error
        };
        // SAFETY: `buf` is NULL or `len` writable bytes.
        unsafe { write_text(buf, len, text) }
    }
}

/// Whether the session was poisoned by a panic (true) or not; false for NULL.
///
/// # Safety
/// `session` must be NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_is_poisoned(session: *const PolarsplitSession) -> bool {
    boundary! { try_ref!(session).poisoned }
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
    boundary! {
        // SAFETY: NULL or a live session (not `try_mut!`: that would run the hook it arms).
        let Some(s) = (unsafe { session.as_mut() }) else {
            return POLARSPLIT_ERR_NULL;
        };
        s.panic_next = true;
        POLARSPLIT_OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::action::{POLARSPLIT_ACTION_CLOSE_CLIENT, POLARSPLIT_ACTION_SEND_CLIENT};
    use crate::ffi::cluster::{polarsplit_engine_free, polarsplit_engine_new};
    use crate::ffi::config::polarsplit_config_free;
    use crate::ffi::config::{polarsplit_config_builder_build, polarsplit_config_builder_new};
    use crate::ffi::status::POLARSPLIT_ERR_PROTOCOL;
    use std::mem::MaybeUninit;

    fn session() -> (*mut PolarsplitEngine, *mut PolarsplitSession) {
        unsafe {
            let mut c = std::ptr::null_mut();
            let mut e = std::ptr::null_mut();
            let mut s = std::ptr::null_mut();
            let b = polarsplit_config_builder_new();
            assert_eq!(
                polarsplit_config_builder_build(b, &mut c, std::ptr::null_mut(), 0),
                0
            );
            assert_eq!(polarsplit_engine_new(c, &mut e), 0);
            polarsplit_config_free(c);
            assert_eq!(polarsplit_session_new(e, std::ptr::null(), 0, &mut s), 0);
            (e, s)
        }
    }

    fn drain(s: *mut PolarsplitSession) -> Vec<PolarsplitAction> {
        let mut v = Vec::new();
        loop {
            let mut a = MaybeUninit::<PolarsplitAction>::zeroed();
            let st = unsafe {
                polarsplit_session_poll_action(s, a.as_mut_ptr(), size_of::<PolarsplitAction>())
            };
            if st == POLARSPLIT_DONE {
                return v;
            }
            assert_eq!(st, POLARSPLIT_OK);
            v.push(unsafe { a.assume_init() });
        }
    }

    #[test]
    fn recv_client_protocol_error_consumes_everything_and_ends_with_the_fatal_and_close() {
        let (e, s) = session();
        let bad = [0u8, 0, 0, 3]; // a startup length below its own header
        let mut consumed = 99;
        let st = unsafe { polarsplit_session_recv_client(s, bad.as_ptr(), 4, 0, &mut consumed) };
        assert_eq!((st, consumed), (POLARSPLIT_ERR_PROTOCOL, 4));
        let kinds: Vec<u32> = drain(s).iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds.first(),
            Some(&POLARSPLIT_ACTION_SEND_CLIENT),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.last(),
            Some(&POLARSPLIT_ACTION_CLOSE_CLIENT),
            "{kinds:?}"
        );
        unsafe {
            polarsplit_session_free(s);
            polarsplit_engine_free(e);
        }
    }

    #[test]
    fn poll_action_refuses_a_struct_smaller_than_abi_3_0_and_writes_nothing() {
        let (e, s) = session();
        let mut mem = [0x77u8; 64];
        let st = unsafe { polarsplit_session_poll_action(s, mem.as_mut_ptr().cast(), 16) };
        assert_eq!(st, POLARSPLIT_ERR_ABI);
        assert!(mem.iter().all(|b| *b == 0x77));
        let st = unsafe { polarsplit_session_poll_action(s, std::ptr::null_mut(), 16) };
        assert_eq!(st, POLARSPLIT_ERR_NULL);
        unsafe {
            polarsplit_session_free(s);
            polarsplit_engine_free(e);
        }
    }
}
