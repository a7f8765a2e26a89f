//! Sessions: one per client connection, used by one thread at a time.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{guard, write_text, PolarsplitEngine, PolarsplitStatus};
use super::{POLARSPLIT_ERR_NULL, POLARSPLIT_ERR_PANIC, POLARSPLIT_ERR_POISONED, POLARSPLIT_OK};
use crate::session::{ClientInfo, Session};

/// One client's session state machine. Not thread-safe: one thread at a time (it may move
/// between threads between calls).
pub struct PolarsplitSession {
    #[allow(dead_code)]
    pub(crate) inner: Session,
    poisoned: bool,
    last_error: String,
}

#[allow(dead_code)] // The session input/output functions use these.
impl PolarsplitSession {
    pub(crate) fn set_error(&mut self, text: impl Into<String>) {
        self.last_error = text.into();
    }
}

#[allow(dead_code)]
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
        match catch_unwind(AssertUnwindSafe(|| f(&mut *s))) {
            Ok(status) => status,
            Err(_) => {
                s.poisoned = true;
                s.last_error = "internal panic: the session is poisoned".to_string();
                POLARSPLIT_ERR_PANIC
            }
        }
    })
}

/// Creates a session for a new client connection and stores it in `*out`.
///
/// # Safety
/// `engine` must be a live engine; `out` a writable pointer slot.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_session_new(
    engine: *const PolarsplitEngine,
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
        // SAFETY: a live engine handle (shared, thread-safe).
        let e = unsafe { &*engine };
        let s = PolarsplitSession {
            inner: Session::new(e.inner.clone(), ClientInfo::default()),
            poisoned: false,
            last_error: String::new(),
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
        // SAFETY: `buf` is NULL or `len` writable bytes.
        unsafe { write_text(buf, len, &s.last_error) }
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
