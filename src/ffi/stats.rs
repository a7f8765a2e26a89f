//! Counters (SPEC §9): named engine counters, decisions by outcome and by reason, and all of
//! them with the per-reader gauges in the Prometheus text format.

use std::ffi::c_char;

use super::cluster::PolarsplitEngine;
use super::decision::{outcome_from_c, reason_from_c, PolarsplitOutcome, PolarsplitReason};
use super::handle::{boundary, try_arg, try_out, try_ref, write_text};
use super::status::POLARSPLIT_ERR_NULL;
use super::status::{PolarsplitStatus, POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_OK};
use crate::cluster::stats::{Counter, Stats};

/// The number of named counters; valid indexes are `0 .. polarsplit_counter_count()`.
///
/// # Safety
/// Always safe.
#[no_mangle]
pub extern "C" fn polarsplit_counter_count() -> u32 {
    Counter::ALL.len() as u32
}

/// The name of counter `index` (static, NUL-terminated), or NULL when out of range.
///
/// # Safety
/// Always safe.
#[no_mangle]
pub extern "C" fn polarsplit_counter_name(index: u32) -> *const c_char {
    match Counter::ALL.get(index as usize) {
        Some(c) => c.c_name().as_ptr().cast(),
        None => std::ptr::null(),
    }
}

/// Reads one count of the engine into `*value`; `get` gives `None` for an index or code the engine
/// does not know (`POLARSPLIT_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// `engine` must be NULL or a live engine; `value` NULL or writable.
unsafe fn read_count(
    engine: *const PolarsplitEngine,
    value: *mut u64,
    get: impl FnOnce(&Stats) -> Option<u64>,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let mut value = try_out!(value);
        value.set(try_arg!(get(e.inner.stats()).ok_or(POLARSPLIT_ERR_INVALID_ARGUMENT)));
        POLARSPLIT_OK
    }
}

/// Reads counter `index` into `*value`.
///
/// # Safety
/// `engine` must be a live engine; `value` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_counter(
    engine: *const PolarsplitEngine,
    index: u32,
    value: *mut u64,
) -> PolarsplitStatus {
    let counter = Counter::ALL.get(index as usize);
    // SAFETY: as documented.
    unsafe { read_count(engine, value, |s| counter.map(|c| s.get(*c))) }
}

/// Decisions taken with `outcome` (`POLARSPLIT_OUTCOME_*`) into `*value`.
///
/// # Safety
/// `engine` must be a live engine; `value` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_outcome_count(
    engine: *const PolarsplitEngine,
    outcome: PolarsplitOutcome,
    value: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: as documented.
    unsafe {
        read_count(engine, value, |s| {
            outcome_from_c(outcome).map(|o| s.outcome(o))
        })
    }
}

/// Decisions taken for `reason` (`POLARSPLIT_REASON_*`) into `*value`. Reason numbers are below
/// 1024; `polarsplit_reason_name` names every one this library knows.
///
/// # Safety
/// `engine` must be a live engine; `value` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reason_count(
    engine: *const PolarsplitEngine,
    reason: PolarsplitReason,
    value: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: as documented.
    unsafe {
        read_count(engine, value, |s| {
            reason_from_c(reason).map(|r| s.reason(r))
        })
    }
}

/// Every counter, the decisions by outcome and by reason, and the per-reader gauges (known
/// position, lag behind the writer, health, hold-out, consecutive failures, active statements)
/// in the Prometheus text exposition format (SPEC §9), as one text rendered now. `*len` gets
/// the text's full length in bytes (without the NUL); up to `cap - 1` bytes of it and a NUL are
/// written to `buf` (truncated at a UTF-8 boundary when it does not fit). `*len >= cap` means it
/// was truncated: call again with a larger buffer — counters may have grown in between, so
/// leave room. `buf` NULL with `cap` 0 only asks for the size. Returns `POLARSPLIT_OK`.
///
/// # Safety
/// `engine` must be a live engine; `buf` NULL (only with `cap` 0) or `cap` writable bytes;
/// `len` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_prometheus(
    engine: *const PolarsplitEngine,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let mut len = try_out!(len);
        if buf.is_null() && cap != 0 {
            return POLARSPLIT_ERR_NULL;
        }
        let text = e.inner.prometheus();
        // SAFETY: `buf` is NULL (with `cap` 0) or `cap` writable bytes.
        len.set(unsafe { write_text(buf, cap, &text) });
        POLARSPLIT_OK
    }
}
