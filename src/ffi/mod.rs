//! The C ABI: the only place with `extern "C"`, `no_mangle`, `repr(C)` and raw pointers. It
//! validates, converts and delegates — the logic lives in the Rust API.
//!
//! Conventions (the header's top comment states them for C programmers):
//! - every function runs inside a panic boundary; a panic never unwinds into C;
//! - pointers are NULL-checked (`POLARSPLIT_ERR_NULL`), `_free(NULL)` is a no-op;
//! - statuses are `int32_t`: 0 ok, positive informational, negative errors, never reused;
//! - kinds and enums crossing the boundary are integers with `#define`d values, never Rust enums;
//! - borrowed outputs stay valid until the next non-const call on the same handle.

#![allow(clippy::missing_safety_doc)] // Each function's `# Safety` section is in its doc comment.

mod config;
mod engine;
mod pool;
mod session;
mod status;

pub use config::*;
pub use engine::*;
pub use pool::*;
pub use session::*;
pub use status::*;

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The ABI version a host compiled against must equal [`polarsplit_abi_version`].
pub const ABI_VERSION: u32 = parse_u32(env!("POLARSPLIT_ABI_VERSION"));

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The library's version as a NUL-terminated string, e.g. `"0.1.0"`. Compare it with
/// `POLARSPLIT_VERSION` to detect a header/library mismatch.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// The library's ABI version. A host should refuse to run when it differs from the
/// `POLARSPLIT_ABI_VERSION` it was compiled with.
///
/// # Safety
/// Always safe.
#[no_mangle]
pub extern "C" fn polarsplit_abi_version() -> u32 {
    ABI_VERSION
}

/// Runs `f` inside a panic boundary: a panic becomes `POLARSPLIT_ERR_PANIC`.
pub(crate) fn guard(f: impl FnOnce() -> PolarsplitStatus) -> PolarsplitStatus {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(POLARSPLIT_ERR_PANIC)
}

/// Like [`guard`] for functions returning a pointer: a panic becomes NULL.
pub(crate) fn guard_ptr<T>(f: impl FnOnce() -> *mut T) -> *mut T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(std::ptr::null_mut())
}

/// Reads a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char) -> Result<&'a str, PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    // SAFETY: the caller promises a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|_| POLARSPLIT_ERR_INVALID_ARGUMENT)
}

/// Reads a `(ptr, len)` byte argument; NULL is accepted only with `len == 0`.
///
/// # Safety
/// `p` must be NULL or point to `len` readable bytes.
pub(crate) unsafe fn bytes_arg<'a>(p: *const u8, len: usize) -> Result<&'a [u8], PolarsplitStatus> {
    if p.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(POLARSPLIT_ERR_NULL)
        };
    }
    if len > isize::MAX as usize {
        return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: the caller promises `len` readable bytes at `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Copies `text` into a caller buffer as a NUL-terminated string, truncating (at a UTF-8
/// boundary) when it does not fit. Returns the full length of `text` (without NUL), so a caller
/// can retry with a larger buffer. A NULL buffer or zero length writes nothing.
///
/// # Safety
/// `buf` must be NULL or point to `len` writable bytes.
pub(crate) unsafe fn write_text(buf: *mut c_char, len: usize, text: &str) -> usize {
    if !buf.is_null() && len > 0 {
        let mut n = text.len().min(len - 1);
        while n > 0 && !text.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `n + 1 <= len` bytes are writable at `buf`; the source is `text`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}
