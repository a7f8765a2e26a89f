//! The C ABI: the only place with `extern "C"`, `no_mangle`, `repr(C)` and raw pointers. It
//! validates, converts and delegates — the logic lives in the Rust API.
//!
//! One module per Rust module it exposes: `config`, `cluster` (the engine) with `stats` and
//! `functions` (the F-policy's catalogue), `session` with `action`, `event`, `facts` and
//! `decision`, `pool` with `reader_key`; `status` is the one status type and `handle` the one idiom every exported function follows (a panic
//! boundary, checked handles and arguments, the growth rule for structs). The header's top
//! comment (`cbindgen.toml`) states the contract for C programmers.

#![allow(clippy::missing_safety_doc)]
// Each function's `# Safety` section is in its doc comment.
// The items stay `pub` although the module is private: cbindgen writes only `pub` items into the
// header, and the `#[no_mangle]` functions are exported from the cdylib whatever their path.
#![allow(unreachable_pub)]

mod handle;

mod action;
mod cluster;
mod config;
mod decision;
mod event;
mod facts;
mod functions;
mod pool;
mod reader_key;
mod session;
mod stats;
mod status;

use std::ffi::c_char;

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

/// The library's ABI version. A host refuses to run when it differs from the
/// `POLARSPLIT_ABI_VERSION` it was compiled with (the SONAME carries it too).
///
/// # Safety
/// Always safe.
#[no_mangle]
pub extern "C" fn polarsplit_abi_version() -> u32 {
    ABI_VERSION
}
