//! The one status type of the C ABI, and how Rust errors map onto it.

use std::ffi::c_char;

use crate::session::SessionError;

/// Result of every fallible call: 0 ok, positive informational, negative error. Values are never
/// reused for another meaning.
pub type PolarsplitStatus = i32;

/// Success.
pub const POLARSPLIT_OK: PolarsplitStatus = 0;
/// Informational: there is nothing more to poll (no further action), or the call's subject was
/// unknown and nothing changed (each function says which).
pub const POLARSPLIT_DONE: PolarsplitStatus = 1;
/// A required pointer argument was NULL.
pub const POLARSPLIT_ERR_NULL: PolarsplitStatus = -1;
/// An argument was out of range or not valid (bad UTF-8, unknown kind value, …).
pub const POLARSPLIT_ERR_INVALID_ARGUMENT: PolarsplitStatus = -2;
/// The call is not allowed now (e.g. an input while actions are still pending: drain them
/// first).
pub const POLARSPLIT_ERR_BAD_STATE: PolarsplitStatus = -3;
/// The peer's bytes violate the protocol; the session can no longer follow the stream (see the
/// session's error text, and each input function for what to do).
pub const POLARSPLIT_ERR_PROTOCOL: PolarsplitStatus = -4;
/// A configuration setting or combination was refused (see the error text).
pub const POLARSPLIT_ERR_CONFIG: PolarsplitStatus = -5;
/// A panic was caught inside the library. A session that panicked is poisoned.
pub const POLARSPLIT_ERR_PANIC: PolarsplitStatus = -6;
/// The session is poisoned by an earlier panic: only `polarsplit_session_free`,
/// `polarsplit_session_last_error` and `polarsplit_session_is_poisoned` work. Route the client
/// to the primary yourself or close it.
pub const POLARSPLIT_ERR_POISONED: PolarsplitStatus = -7;
/// Bytes or an event came for a backend connection the session is not using.
pub const POLARSPLIT_ERR_UNKNOWN_CONNECTION: PolarsplitStatus = -8;
/// A bound was exceeded (message size, buffered bytes, queue length).
pub const POLARSPLIT_ERR_LIMIT: PolarsplitStatus = -9;
/// The session is closed (the client terminated, broke the protocol, or a policy closed it):
/// only `polarsplit_session_free` is useful.
pub const POLARSPLIT_ERR_CLOSED: PolarsplitStatus = -10;
/// The host was built against a header this library cannot serve: a struct size below its ABI
/// 3.0 size, or an action whose member lies beyond the host's `polarsplit_action` (a kind newer
/// than the host). Nothing was written. For an action, the session is then unusable: free it.
pub const POLARSPLIT_ERR_ABI: PolarsplitStatus = -11;

/// The status of a refused or failed session input. Exhaustive: a new error of the Rust API
/// must be given its status here.
pub(crate) fn session_status(e: &SessionError) -> PolarsplitStatus {
    match e {
        SessionError::ActionsPending | SessionError::UnexpectedEvent(_) => POLARSPLIT_ERR_BAD_STATE,
        SessionError::Closed => POLARSPLIT_ERR_CLOSED,
        SessionError::UnknownConnection(_) => POLARSPLIT_ERR_UNKNOWN_CONNECTION,
        SessionError::Protocol { .. } => POLARSPLIT_ERR_PROTOCOL,
    }
}

/// A short, static, NUL-terminated description of a status. Unknown values get
/// `"unknown status"`.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_status_str(status: PolarsplitStatus) -> *const c_char {
    let s: &'static str = match status {
        POLARSPLIT_OK => "ok\0",
        POLARSPLIT_DONE => "done: no more actions\0",
        POLARSPLIT_ERR_NULL => "a required pointer argument was NULL\0",
        POLARSPLIT_ERR_INVALID_ARGUMENT => "invalid argument\0",
        POLARSPLIT_ERR_BAD_STATE => "call not allowed in the current state\0",
        POLARSPLIT_ERR_PROTOCOL => "protocol violation by a peer\0",
        POLARSPLIT_ERR_CONFIG => "configuration refused\0",
        POLARSPLIT_ERR_PANIC => "internal panic caught; the session is poisoned\0",
        POLARSPLIT_ERR_POISONED => "session poisoned by an earlier panic\0",
        POLARSPLIT_ERR_UNKNOWN_CONNECTION => "bytes from a connection the session is not using\0",
        POLARSPLIT_ERR_LIMIT => "a size or count limit was exceeded\0",
        POLARSPLIT_ERR_CLOSED => "the session is closed\0",
        POLARSPLIT_ERR_ABI => "the host was built for another layout of this ABI\0",
        _ => "unknown status\0",
    };
    s.as_ptr().cast()
}
