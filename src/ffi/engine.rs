//! Engine-wide inputs (topology, monitor samples, generations, configuration) and counters.

use std::ffi::c_char;

use super::{guard, PolarsplitConfig, PolarsplitEngine, PolarsplitStatus};
use super::{POLARSPLIT_DONE, POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_ERR_NULL, POLARSPLIT_OK};
use crate::cluster::stats::Counter;
use crate::config::ServerDialect;
use crate::protocol::Lsn;
use crate::session::{Outcome, Reason};

/// Server dialects (SPEC W-7) for `polarsplit_engine_set_dialect`.
pub const POLARSPLIT_DIALECT_DEFAULT: i32 = -1;
pub const POLARSPLIT_DIALECT_AWIDE: i32 = 0;
pub const POLARSPLIT_DIALECT_POLARDB: i32 = 1;
pub const POLARSPLIT_DIALECT_STOCK: i32 = 2;

/// `POLARSPLIT_OK` when the engine knew what the call named, else `POLARSPLIT_DONE`.
fn ok_or_done(known: bool) -> PolarsplitStatus {
    if known {
        POLARSPLIT_OK
    } else {
        POLARSPLIT_DONE
    }
}

/// Runs `f` on a live engine inside a panic boundary.
///
/// # Safety
/// `engine` must be NULL or a live engine.
unsafe fn with_engine(
    engine: *const PolarsplitEngine,
    f: impl FnOnce(&PolarsplitEngine) -> PolarsplitStatus,
) -> PolarsplitStatus {
    guard(|| {
        if engine.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: a live engine (thread-safe, shared).
        f(unsafe { &*engine })
    })
}

/// Registers a reader server (or moves it to another hostgroup). Healthy, no replay sample yet.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_add_reader(
    engine: *const PolarsplitEngine,
    server: u32,
    hostgroup: u32,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            e.inner.add_reader(server, hostgroup);
            POLARSPLIT_OK
        })
    }
}

/// Forgets a reader server. `POLARSPLIT_DONE` when it was not registered.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_remove_reader(
    engine: *const PolarsplitEngine,
    server: u32,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe { with_engine(engine, |e| ok_or_done(e.inner.remove_reader(server))) }
}

/// Marks a reader healthy or not (unhealthy readers are never chosen; a pin on one is dropped).
/// `POLARSPLIT_DONE` when it is not registered.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_reader_health(
    engine: *const PolarsplitEngine,
    server: u32,
    healthy: bool,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            ok_or_done(e.inner.set_reader_health(server, healthy))
        })
    }
}

/// A monitor sample of a reader's replay LSN (e.g. `pg_last_wal_replay_lsn()`), taken at host
/// time `at_ms` (SPEC R-1). `POLARSPLIT_DONE` when the reader is unknown or in no hostgroup
/// mapped to a writer.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_sample(
    engine: *const PolarsplitEngine,
    server: u32,
    lsn: u64,
    at_ms: u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            ok_or_done(e.inner.reader_sample(server, Lsn(lsn), at_ms))
        })
    }
}

/// A monitor sample of the writer's LSN for a writer hostgroup (e.g.
/// `pg_current_wal_insert_lsn()`), whose query was *sent* at host time `sent_at_ms` (use the send
/// time, not the answer's arrival: only then does a sample bound a write acknowledged before it).
/// It feeds `global` mode and, on servers whose RFQs carry no LSN, positions writes the client
/// saw acknowledged strictly before `sent_at_ms`.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_writer_sample(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    lsn: u64,
    sent_at_ms: u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            e.inner
                .writer_sample(writer_hostgroup, Lsn(lsn), sent_at_ms);
            POLARSPLIT_OK
        })
    }
}

/// Records a reader's `server_version_num` (e.g. 150018). On stock PostgreSQL 19 and later the
/// engine may make that reader wait with `WAIT FOR LSN`.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_server_version(
    engine: *const PolarsplitEngine,
    server: u32,
    version_num: u32,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            e.inner.set_server_version(server, version_num);
            POLARSPLIT_OK
        })
    }
}

/// The writer of `writer_hostgroup` changed identity (failover, switchover): its generation is
/// bumped and stored in `*generation` (may be NULL). Sessions forget their LSNs (SPEC S-2).
///
/// # Safety
/// `engine` must be a live engine; `generation` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_writer_changed(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    generation: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            let g = e.inner.writer_changed(writer_hostgroup);
            if !generation.is_null() {
                *generation = g;
            }
            POLARSPLIT_OK
        })
    }
}

/// Maps a writer hostgroup to its reader hostgroup, or to none with `reader_hostgroup = -1`.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_reader_hostgroup(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    reader_hostgroup: i64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            let r = match reader_hostgroup {
                -1 => None,
                h if (0..i64::from(u32::MAX)).contains(&h) => Some(h as u32),
                _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
            };
            e.inner.set_reader_hostgroup(writer_hostgroup, r);
            POLARSPLIT_OK
        })
    }
}

/// Sets the server dialect of a writer hostgroup's pair (`POLARSPLIT_DIALECT_*`;
/// `POLARSPLIT_DIALECT_DEFAULT` returns to the configured one).
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_dialect(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    dialect: i32,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            let d = match dialect {
                POLARSPLIT_DIALECT_DEFAULT => None,
                POLARSPLIT_DIALECT_AWIDE => Some(ServerDialect::Awide),
                POLARSPLIT_DIALECT_POLARDB => Some(ServerDialect::PolarDb),
                POLARSPLIT_DIALECT_STOCK => Some(ServerDialect::Stock),
                _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
            };
            e.inner.set_dialect(writer_hostgroup, d);
            POLARSPLIT_OK
        })
    }
}

/// Replaces the engine's configuration at runtime. Sessions adopt it at their next statement;
/// pooled readers opened under an older profile become incompatible (their key changes).
///
/// # Safety
/// `engine` and `config` must be live handles.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_replace_config(
    engine: *const PolarsplitEngine,
    config: *const PolarsplitConfig,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            if config.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            let c = &*config;
            e.inner.replace_config((*c.inner).clone());
            POLARSPLIT_OK
        })
    }
}

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
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            if value.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            match Counter::ALL.get(index as usize) {
                Some(c) => {
                    *value = e.inner.stats().get(*c);
                    POLARSPLIT_OK
                }
                None => POLARSPLIT_ERR_INVALID_ARGUMENT,
            }
        })
    }
}

/// Decisions taken with `outcome` (`POLARSPLIT_OUTCOME_*`) into `*value`.
///
/// # Safety
/// `engine` must be a live engine; `value` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_outcome_count(
    engine: *const PolarsplitEngine,
    outcome: u32,
    value: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            if value.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            match u8::try_from(outcome).ok().and_then(Outcome::from_u8) {
                Some(o) => {
                    *value = e.inner.stats().outcome(o);
                    POLARSPLIT_OK
                }
                None => POLARSPLIT_ERR_INVALID_ARGUMENT,
            }
        })
    }
}

/// Decisions taken for reason code `reason` into `*value` (`polarsplit_reason_name` names them;
/// codes are stable and below 128).
///
/// # Safety
/// `engine` must be a live engine; `value` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reason_count(
    engine: *const PolarsplitEngine,
    reason: u32,
    value: *mut u64,
) -> PolarsplitStatus {
    // SAFETY: per the contract.
    unsafe {
        with_engine(engine, |e| {
            if value.is_null() {
                return POLARSPLIT_ERR_NULL;
            }
            match u16::try_from(reason).ok().and_then(Reason::from_u16) {
                Some(r) => {
                    *value = e.inner.stats().reason(r);
                    POLARSPLIT_OK
                }
                None => POLARSPLIT_ERR_INVALID_ARGUMENT,
            }
        })
    }
}
