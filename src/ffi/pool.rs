//! The reader key (P-9) and the optional pool index with warmup for C hosts.
//!
//! A `polarsplit_pool` is thread-safe: every function may be called from any thread at any time
//! (it is internally sharded and locked briefly; no call blocks on I/O). Connection ids are the
//! host's own `uint64_t` values.

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{guard, PolarsplitConfig, PolarsplitStatus};
use super::{
    POLARSPLIT_ERR_BAD_STATE, POLARSPLIT_ERR_INVALID_ARGUMENT, POLARSPLIT_ERR_NULL,
    POLARSPLIT_ERR_UNKNOWN_CONNECTION, POLARSPLIT_OK,
};
use crate::pool::{
    CheckinOutcome, DemandOutcome, DemandReason, PoolCounts, PoolError, PoolIndex, PoolLimits,
    PoolStats, PublishCheck, PublishError, ReaderKey, ReaderKeyBuilder, ReservationId,
    ReserveError, WarmupQueue,
};

/// The four-part reader key (SPEC P-9). A pooled reader connection may serve a session only if
/// all four values are equal (`polarsplit_reader_key_compatible`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolarsplitReaderKey {
    /// Bumped when the startup profile or protocol settings change.
    pub profile_generation: u64,
    /// User and database.
    pub auth_hash: u64,
    /// The advertised client identity (LSN-reporting profiles); 0 otherwise.
    pub startup_identity_hash: u64,
    /// Startup parameters and tracked session settings.
    pub startup_options_hash: u64,
}

impl From<ReaderKey> for PolarsplitReaderKey {
    fn from(k: ReaderKey) -> Self {
        PolarsplitReaderKey {
            profile_generation: k.profile_generation,
            auth_hash: k.auth_hash,
            startup_identity_hash: k.startup_identity_hash,
            startup_options_hash: k.startup_options_hash,
        }
    }
}

impl From<PolarsplitReaderKey> for ReaderKey {
    fn from(k: PolarsplitReaderKey) -> Self {
        ReaderKey {
            profile_generation: k.profile_generation,
            auth_hash: k.auth_hash,
            startup_identity_hash: k.startup_identity_hash,
            startup_options_hash: k.startup_options_hash,
        }
    }
}

/// The pool index and its warmup queue. Thread-safe: share one handle among all host threads.
pub struct PolarsplitPool {
    index: PoolIndex,
    warmup: WarmupQueue,
}

/// Result of `polarsplit_pool_checkout`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitCheckout {
    /// The connection handed out (valid when `found`).
    pub conn: u64,
    /// Its server (valid when `found`).
    pub server: u32,
    /// Whether a compatible idle connection was found.
    pub found: bool,
    /// The connection still carries an XID import: put `SET polar_xact_split_xids = '';` in
    /// front of the first statement sent on it.
    pub needs_reset: bool,
}

/// Connection counts (of one server, or one key).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitPoolCounts {
    /// Idle and clean.
    pub idle: u32,
    /// Idle, needing an XID reset before reuse.
    pub dirty: u32,
    pub in_use: u32,
    /// Reservations not yet published or cancelled.
    pub reserved: u32,
}

impl From<PoolCounts> for PolarsplitPoolCounts {
    fn from(c: PoolCounts) -> Self {
        PolarsplitPoolCounts {
            idle: c.idle,
            dirty: c.dirty,
            in_use: c.in_use,
            reserved: c.reserved,
        }
    }
}

/// Counters of a pool (SPEC §9).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitPoolStats {
    pub hits: u64,
    pub misses: u64,
    pub reset_handouts: u64,
    pub reserved: u64,
    pub reserve_refused: u64,
    pub published: u64,
    pub discarded: u64,
    pub cancelled: u64,
    pub closed: u64,
    pub demands_queued: u64,
    pub demands_duplicate: u64,
    pub demands_dropped: u64,
    pub demands_disabled: u64,
}

/// Why a connection is wanted (`polarsplit_pool_demand`).
pub type PolarsplitDemandReason = i32;
/// A checkout found no compatible idle connection.
pub const POLARSPLIT_DEMAND_MISS: PolarsplitDemandReason = 1;
/// A transaction began (configuration `warmup = begin | both`).
pub const POLARSPLIT_DEMAND_BEGIN: PolarsplitDemandReason = 2;

/// A request to open one connection to `server` under `key` (`polarsplit_pool_drain`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitDemand {
    pub key: PolarsplitReaderKey,
    pub server: u32,
    pub reason: PolarsplitDemandReason,
}

/// What became of a reserve, publish or demand call (the call's status is `POLARSPLIT_OK`
/// whenever its arguments were valid). Values are never reused.
pub type PolarsplitPoolOutcome = i32;
/// Reserved, published, or queued.
pub const POLARSPLIT_POOL_OK: PolarsplitPoolOutcome = 0;
/// The (server, key) is at its connection limit.
pub const POLARSPLIT_POOL_KEY_FULL: PolarsplitPoolOutcome = 1;
/// The server is at its connection limit.
pub const POLARSPLIT_POOL_SERVER_FULL: PolarsplitPoolOutcome = 2;
/// The key's profile generation is no longer current.
pub const POLARSPLIT_POOL_STALE_PROFILE: PolarsplitPoolOutcome = 3;
/// The writer generation changed during the handshake.
pub const POLARSPLIT_POOL_STALE_WRITER_GENERATION: PolarsplitPoolOutcome = 4;
/// The server was removed from the pool during the handshake.
pub const POLARSPLIT_POOL_SERVER_REMOVED: PolarsplitPoolOutcome = 5;
/// The server is no longer a healthy reader of the hostgroup.
pub const POLARSPLIT_POOL_NOT_MEMBER: PolarsplitPoolOutcome = 6;
/// The reservation id is unknown (already published, cancelled or discarded).
pub const POLARSPLIT_POOL_UNKNOWN_RESERVATION: PolarsplitPoolOutcome = 7;
/// The connection id is already in the pool.
pub const POLARSPLIT_POOL_DUPLICATE_CONNECTION: PolarsplitPoolOutcome = 8;
/// The same (server, key) demand is already queued.
pub const POLARSPLIT_POOL_DEMAND_DUPLICATE: PolarsplitPoolOutcome = 9;
/// The demand queue is full; the signal was dropped (counted).
pub const POLARSPLIT_POOL_DEMAND_DROPPED: PolarsplitPoolOutcome = 10;
/// The configured `warmup` does not cover this reason.
pub const POLARSPLIT_POOL_DEMAND_DISABLED: PolarsplitPoolOutcome = 11;

fn reserve_outcome(e: ReserveError) -> PolarsplitPoolOutcome {
    match e {
        ReserveError::KeyFull => POLARSPLIT_POOL_KEY_FULL,
        ReserveError::ServerFull => POLARSPLIT_POOL_SERVER_FULL,
        ReserveError::StaleProfile => POLARSPLIT_POOL_STALE_PROFILE,
    }
}

fn publish_outcome(e: PublishError) -> PolarsplitPoolOutcome {
    match e {
        PublishError::UnknownReservation => POLARSPLIT_POOL_UNKNOWN_RESERVATION,
        PublishError::StaleWriterGeneration => POLARSPLIT_POOL_STALE_WRITER_GENERATION,
        PublishError::StaleProfile => POLARSPLIT_POOL_STALE_PROFILE,
        PublishError::ServerRemoved => POLARSPLIT_POOL_SERVER_REMOVED,
        PublishError::NotMember => POLARSPLIT_POOL_NOT_MEMBER,
        PublishError::KeyFull => POLARSPLIT_POOL_KEY_FULL,
        PublishError::ServerFull => POLARSPLIT_POOL_SERVER_FULL,
        PublishError::DuplicateConnection => POLARSPLIT_POOL_DUPLICATE_CONNECTION,
    }
}

fn pool_error(e: PoolError) -> PolarsplitStatus {
    match e {
        PoolError::UnknownConnection => POLARSPLIT_ERR_UNKNOWN_CONNECTION,
        PoolError::NotInUse => POLARSPLIT_ERR_BAD_STATE,
    }
}

/// The value of a `Result<_, PolarsplitStatus>`, or return the status.
macro_rules! ok_or_return {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(status) => return status,
        }
    };
}

/// # Safety
/// `p` must be NULL or point to a readable key.
unsafe fn key_arg(p: *const PolarsplitReaderKey) -> Result<ReaderKey, PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    // SAFETY: non-NULL and readable by contract.
    Ok(unsafe { *p }.into())
}

/// # Safety
/// `p` must be NULL or a live pool.
unsafe fn pool_arg<'a>(p: *const PolarsplitPool) -> Result<&'a PolarsplitPool, PolarsplitStatus> {
    // SAFETY: NULL or a live pool (shared, internally synchronised).
    unsafe { p.as_ref() }.ok_or(POLARSPLIT_ERR_NULL)
}

/// # Safety
/// `pool` must be NULL or a live pool; `key` NULL or a readable key.
unsafe fn pool_and_key<'a>(
    pool: *const PolarsplitPool,
    key: *const PolarsplitReaderKey,
) -> Result<(&'a PolarsplitPool, ReaderKey), PolarsplitStatus> {
    // SAFETY: as documented.
    unsafe { Ok((pool_arg(pool)?, key_arg(key)?)) }
}

/// The bytes of a NUL-terminated string (any encoding: startup values need not be UTF-8).
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn cbytes<'a>(p: *const c_char) -> Result<&'a [u8], PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    // SAFETY: a NUL-terminated string by contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// (name, value) byte strings.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// `n` (name, value) string pairs from two parallel arrays; NULL arrays only with `n == 0`.
///
/// # Safety
/// Each array must be NULL (with `n == 0`) or hold `n` NUL-terminated strings.
unsafe fn cpairs<'a>(
    names: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> Result<Pairs<'a>, PolarsplitStatus> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if names.is_null() || values.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    (0..n)
        .map(|i| {
            // SAFETY: both arrays hold `n` string pointers.
            unsafe { Ok((cbytes(*names.add(i))?, cbytes(*values.add(i))?)) }
        })
        .collect()
}

/// Whether a connection opened under key `a` may serve a session whose key is `b` (all four
/// values equal). NULL arguments give `false`.
///
/// # Safety
/// `a` and `b` must be NULL or point to readable keys.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_reader_key_compatible(
    a: *const PolarsplitReaderKey,
    b: *const PolarsplitReaderKey,
) -> bool {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NULL or readable keys.
        match unsafe { (key_arg(a), key_arg(b)) } {
            (Ok(a), Ok(b)) => a.compatible_with(&b),
            _ => false,
        }
    }))
    .unwrap_or(false)
}

/// Computes the reader key (P-9) of a connection into `*out`: `profile_generation` as given;
/// `user` and `database` hashed into `auth_hash`; the advertised identity into
/// `startup_identity_hash` — pass `identity_host = NULL` when the startup profile reports no
/// LSN (the hash is then 0); the startup parameters (`param_names[i]`, `param_values[i]`) and
/// the tracked session settings (`setting_names[i]`, `setting_values[i]`) into
/// `startup_options_hash`, each set independent of order (names compare case-insensitively;
/// a repeated name keeps its last value).
///
/// # Safety
/// `user`, `database` and every array element must be NUL-terminated strings;
/// `identity_host` NULL or a NUL-terminated string; each array NULL (only with a count of 0)
/// or holding that many pointers; `out` a writable key.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_reader_key_build(
    profile_generation: u64,
    user: *const c_char,
    database: *const c_char,
    identity_host: *const c_char,
    identity_port: u16,
    param_names: *const *const c_char,
    param_values: *const *const c_char,
    n_params: usize,
    setting_names: *const *const c_char,
    setting_values: *const *const c_char,
    n_settings: usize,
    out: *mut PolarsplitReaderKey,
) -> PolarsplitStatus {
    guard(|| {
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: the caller passes strings and arrays as documented.
        let parsed = unsafe {
            (|| {
                let user = cbytes(user)?;
                let database = cbytes(database)?;
                let identity = if identity_host.is_null() {
                    None
                } else {
                    Some(cbytes(identity_host)?)
                };
                let params = cpairs(param_names, param_values, n_params)?;
                let settings = cpairs(setting_names, setting_values, n_settings)?;
                Ok((user, database, identity, params, settings))
            })()
        };
        let (user, database, identity, params, settings) = match parsed {
            Ok(v) => v,
            Err(s) => return s,
        };
        let mut b = ReaderKeyBuilder::new(profile_generation, user, database);
        if let Some(host) = identity {
            b.identity(true, host, identity_port);
        }
        for (n, v) in params {
            b.startup_param(n, v);
        }
        for (n, v) in settings {
            b.setting(n, v);
        }
        // SAFETY: `out` is a writable key.
        unsafe { *out = b.build().into() };
        POLARSPLIT_OK
    })
}

/// Creates a pool index with its warmup queue and stores it in `*out`. The queue's mode and
/// bound come from `config` (`warmup`, `warmup_queue_capacity`); `max_per_key` bounds the
/// connections (open + reserved) per (server, key), `max_per_server` per server; both must be
/// at least 1 (`POLARSPLIT_ERR_INVALID_ARGUMENT` otherwise).
///
/// # Safety
/// `config` must be a live configuration; `out` a writable pointer slot. Free the pool with
/// `polarsplit_pool_free`.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_new(
    config: *const PolarsplitConfig,
    max_per_key: u32,
    max_per_server: u32,
    out: *mut *mut PolarsplitPool,
) -> PolarsplitStatus {
    guard(|| {
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: `out` is a writable slot.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: NULL or a live configuration (shared, read-only).
        let Some(config) = (unsafe { config.as_ref() }) else {
            return POLARSPLIT_ERR_NULL;
        };
        if max_per_key == 0 || max_per_server == 0 {
            return POLARSPLIT_ERR_INVALID_ARGUMENT;
        }
        let pool = PolarsplitPool {
            index: PoolIndex::new(PoolLimits {
                max_per_key,
                max_per_server,
            }),
            warmup: WarmupQueue::from_config(&config.inner),
        };
        // SAFETY: `out` is a writable slot.
        unsafe { *out = Box::into_raw(Box::new(pool)) };
        POLARSPLIT_OK
    })
}

/// Frees a pool. The host still owns (and closes) every connection it held. NULL is a no-op.
///
/// # Safety
/// `pool` must be NULL or a live pool no other thread is using, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_free(pool: *mut PolarsplitPool) {
    let _ = guard(|| {
        if !pool.is_null() {
            // SAFETY: a live pool; ownership returns to Rust.
            drop(unsafe { Box::from_raw(pool) });
        }
        POLARSPLIT_OK
    });
}

/// Hands out an idle connection whose key equals `*key` exactly: from the `preferred` servers
/// in order, then (unless `preferred_only`) from any server. `out->found` says whether one was
/// found; when `out->needs_reset` is set the host must prefix the reset (see
/// `polarsplit_checkout`). On a miss, signal demand with `polarsplit_pool_demand`.
///
/// # Safety
/// `pool` must be a live pool; `key` a readable key; `preferred` NULL (only with
/// `n_preferred == 0`) or `n_preferred` readable ids; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_checkout(
    pool: *const PolarsplitPool,
    key: *const PolarsplitReaderKey,
    preferred: *const u32,
    n_preferred: usize,
    preferred_only: bool,
    out: *mut PolarsplitCheckout,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: pointers as documented.
        let (pool, key) = ok_or_return!(unsafe { pool_and_key(pool, key) });
        if out.is_null() || (preferred.is_null() && n_preferred != 0) {
            return POLARSPLIT_ERR_NULL;
        }
        let preferred: &[u32] = if n_preferred == 0 {
            &[]
        } else {
            // SAFETY: `n_preferred` readable ids.
            unsafe { std::slice::from_raw_parts(preferred, n_preferred) }
        };
        let got = if preferred_only {
            pool.index.checkout_from(&key, preferred)
        } else {
            pool.index.checkout(&key, preferred)
        };
        let result = match got {
            Some(c) => PolarsplitCheckout {
                conn: c.conn,
                server: c.server,
                found: true,
                needs_reset: c.needs_reset,
            },
            None => PolarsplitCheckout::default(),
        };
        // SAFETY: `out` is writable.
        unsafe { *out = result };
        POLARSPLIT_OK
    })
}

/// Returns a checked-out connection. `dirty`: this use left an XID import on it. `*close` is
/// set when the index forgot the connection (its server was removed or its key invalidated
/// while in use): the host closes it. `POLARSPLIT_ERR_UNKNOWN_CONNECTION` for an id the pool
/// does not know, `POLARSPLIT_ERR_BAD_STATE` for one that is not checked out.
///
/// # Safety
/// `pool` must be a live pool; `close` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_checkin(
    pool: *const PolarsplitPool,
    conn: u64,
    dirty: bool,
    close: *mut bool,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if close.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        match pool.index.checkin(conn, dirty) {
            Ok(outcome) => {
                // SAFETY: `close` is writable.
                unsafe { *close = outcome == CheckinOutcome::Close };
                POLARSPLIT_OK
            }
            Err(e) => pool_error(e),
        }
    })
}

/// Forgets a connection (closed or broken by the host), idle or in use.
///
/// # Safety
/// `pool` must be a live pool.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_remove(
    pool: *const PolarsplitPool,
    conn: u64,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        match unsafe { pool_arg(pool) } {
            Ok(p) => p
                .index
                .remove(conn)
                .map_or_else(pool_error, |_| POLARSPLIT_OK),
            Err(s) => s,
        }
    })
}

/// Marks a connection (idle or in use) as carrying an XID import: it is handed out again only
/// with `needs_reset`.
///
/// # Safety
/// `pool` must be a live pool.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_mark_dirty(
    pool: *const PolarsplitPool,
    conn: u64,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        match unsafe { pool_arg(pool) } {
            Ok(p) => p
                .index
                .mark_dirty(conn)
                .map_or_else(pool_error, |_| POLARSPLIT_OK),
            Err(s) => s,
        }
    })
}

/// A server left the topology: its idle connections are queued for closing (fetch them with
/// `polarsplit_pool_drain_closed`; `*queued`, if not NULL, gets how many), in-use ones are
/// reported by their checkin, and reservations taken before now are refused at publish.
///
/// # Safety
/// `pool` must be a live pool; `queued` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_remove_server(
    pool: *const PolarsplitPool,
    server: u32,
    queued: *mut usize,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        let n = pool.index.remove_server(server);
        if !queued.is_null() {
            // SAFETY: writable when not NULL.
            unsafe { *queued = n };
        }
        POLARSPLIT_OK
    })
}

/// A configuration/profile change: every connection whose key's `profile_generation` is older
/// than `profile_generation` becomes incompatible — never handed out again; idle ones are queued
/// for closing (`*queued`, if not NULL, gets how many), in-use ones reported by their checkin.
///
/// # Safety
/// `pool` must be a live pool; `queued` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_invalidate_before(
    pool: *const PolarsplitPool,
    profile_generation: u64,
    queued: *mut usize,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        let n = pool.index.invalidate_before(profile_generation);
        if !queued.is_null() {
            // SAFETY: writable when not NULL.
            unsafe { *queued = n };
        }
        POLARSPLIT_OK
    })
}

/// Moves up to `cap` connection ids the host must close into `out`; `*n` gets how many. Call
/// until `*n < cap`.
///
/// # Safety
/// `pool` must be a live pool; `out` NULL (only with `cap == 0`) or `cap` writable ids; `n`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_drain_closed(
    pool: *const PolarsplitPool,
    out: *mut u64,
    cap: usize,
    n: *mut usize,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if n.is_null() || (out.is_null() && cap != 0) {
            return POLARSPLIT_ERR_NULL;
        }
        let got = if cap == 0 {
            0
        } else {
            // SAFETY: `cap` writable ids at `out`.
            let out = unsafe { std::slice::from_raw_parts_mut(out, cap) };
            pool.index.take_closed_into(out)
        };
        // SAFETY: `n` is writable.
        unsafe { *n = got };
        POLARSPLIT_OK
    })
}

/// Counts of one server over all keys.
///
/// # Safety
/// `pool` must be a live pool; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_server_counts(
    pool: *const PolarsplitPool,
    server: u32,
    out: *mut PolarsplitPoolCounts,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: `out` is writable.
        unsafe { *out = pool.index.server_counts(server).into() };
        POLARSPLIT_OK
    })
}

/// Counts of one key over all servers.
///
/// # Safety
/// `pool` must be a live pool; `key` readable; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_key_counts(
    pool: *const PolarsplitPool,
    key: *const PolarsplitReaderKey,
    out: *mut PolarsplitPoolCounts,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: pointers as documented.
        let (pool, key) = ok_or_return!(unsafe { pool_and_key(pool, key) });
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        // SAFETY: `out` is writable.
        unsafe { *out = pool.index.key_counts(&key).into() };
        POLARSPLIT_OK
    })
}

/// Copies the pool's counters into `*out`.
///
/// # Safety
/// `pool` must be a live pool; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_read_stats(
    pool: *const PolarsplitPool,
    out: *mut PolarsplitPoolStats,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if out.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        let PoolStats {
            hits,
            misses,
            reset_handouts,
            reserved,
            reserve_refused,
            published,
            discarded,
            cancelled,
            closed,
        } = pool.index.stats();
        let w = pool.warmup.stats();
        let stats = PolarsplitPoolStats {
            hits,
            misses,
            reset_handouts,
            reserved,
            reserve_refused,
            published,
            discarded,
            cancelled,
            closed,
            demands_queued: w.queued,
            demands_duplicate: w.duplicates,
            demands_dropped: w.dropped,
            demands_disabled: w.disabled,
        };
        // SAFETY: `out` is writable.
        unsafe { *out = stats };
        POLARSPLIT_OK
    })
}

/// Signals that a connection to `server` under `*key` is wanted (`reason`:
/// `POLARSPLIT_DEMAND_MISS` or `POLARSPLIT_DEMAND_BEGIN`). Deduplicated and bounded; `*outcome`,
/// if not NULL, gets `POLARSPLIT_POOL_OK` (queued), `_DEMAND_DUPLICATE`, `_DEMAND_DROPPED` or
/// `_DEMAND_DISABLED`.
///
/// # Safety
/// `pool` must be a live pool; `key` readable; `outcome` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_demand(
    pool: *const PolarsplitPool,
    server: u32,
    key: *const PolarsplitReaderKey,
    reason: PolarsplitDemandReason,
    outcome: *mut PolarsplitPoolOutcome,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: pointers as documented.
        let (pool, key) = ok_or_return!(unsafe { pool_and_key(pool, key) });
        let reason = match reason {
            POLARSPLIT_DEMAND_MISS => DemandReason::Miss,
            POLARSPLIT_DEMAND_BEGIN => DemandReason::Begin,
            _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
        };
        let o = match pool.warmup.demand(server, &key, reason) {
            DemandOutcome::Queued => POLARSPLIT_POOL_OK,
            DemandOutcome::Duplicate => POLARSPLIT_POOL_DEMAND_DUPLICATE,
            DemandOutcome::Dropped => POLARSPLIT_POOL_DEMAND_DROPPED,
            DemandOutcome::Disabled => POLARSPLIT_POOL_DEMAND_DISABLED,
        };
        if !outcome.is_null() {
            // SAFETY: writable when not NULL.
            unsafe { *outcome = o };
        }
        POLARSPLIT_OK
    })
}

/// Moves up to `cap` queued demands, oldest first, into `out`; `*n` gets how many.
///
/// # Safety
/// `pool` must be a live pool; `out` NULL (only with `cap == 0`) or `cap` writable demands;
/// `n` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_drain(
    pool: *const PolarsplitPool,
    out: *mut PolarsplitDemand,
    cap: usize,
    n: *mut usize,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if n.is_null() || (out.is_null() && cap != 0) {
            return POLARSPLIT_ERR_NULL;
        }
        let demands = pool.warmup.drain(cap);
        for (i, d) in demands.iter().enumerate() {
            let c = PolarsplitDemand {
                key: d.key.into(),
                server: d.server,
                reason: match d.reason {
                    DemandReason::Miss => POLARSPLIT_DEMAND_MISS,
                    DemandReason::Begin => POLARSPLIT_DEMAND_BEGIN,
                },
            };
            // SAFETY: `i < cap` writable demands at `out`.
            unsafe { out.add(i).write(c) };
        }
        // SAFETY: `n` is writable.
        unsafe { *n = demands.len() };
        POLARSPLIT_OK
    })
}

/// Reserves capacity for one new connection to `server` under `*key`. On
/// `*outcome == POLARSPLIT_POOL_OK`, `*reservation` is the token to pass to
/// `polarsplit_pool_publish` after the handshake (done with no library lock held), or to
/// `polarsplit_pool_cancel`; otherwise `*reservation` is 0 and `*outcome` says why
/// (`_KEY_FULL`, `_SERVER_FULL`, `_STALE_PROFILE`). `writer_generation` is the writer generation
/// now; publish re-checks it.
///
/// # Safety
/// `pool` must be a live pool; `key` readable; `reservation` and `outcome` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_reserve(
    pool: *const PolarsplitPool,
    server: u32,
    key: *const PolarsplitReaderKey,
    writer_generation: u64,
    reservation: *mut u64,
    outcome: *mut PolarsplitPoolOutcome,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: pointers as documented.
        let (pool, key) = ok_or_return!(unsafe { pool_and_key(pool, key) });
        if reservation.is_null() || outcome.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        let (id, o) = match pool.index.reserve(server, &key, writer_generation) {
            Ok(r) => (r.id.0, POLARSPLIT_POOL_OK),
            Err(e) => (0, reserve_outcome(e)),
        };
        // SAFETY: both are writable.
        unsafe {
            *reservation = id;
            *outcome = o;
        }
        POLARSPLIT_OK
    })
}

/// Publishes connection `conn`, opened for `reservation`, after re-validating it: the writer
/// and profile generations must equal those captured at reserve (pass the current ones), the
/// server must not have been removed meanwhile and must still be a healthy reader of the
/// hostgroup (`still_member`, from the host's view), and capacity must allow it. The
/// reservation is consumed in every case. `*outcome` is `POLARSPLIT_POOL_OK` (the connection is
/// now idle in the pool) or the reason it was discarded — then the host closes `conn`.
///
/// # Safety
/// `pool` must be a live pool; `outcome` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_publish(
    pool: *const PolarsplitPool,
    reservation: u64,
    conn: u64,
    writer_generation: u64,
    profile_generation: u64,
    still_member: bool,
    outcome: *mut PolarsplitPoolOutcome,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        let pool = ok_or_return!(unsafe { pool_arg(pool) });
        if outcome.is_null() {
            return POLARSPLIT_ERR_NULL;
        }
        let check = PublishCheck {
            writer_generation,
            profile_generation,
            member: still_member,
        };
        let o = match pool.index.publish(ReservationId(reservation), conn, &check) {
            Ok(()) => POLARSPLIT_POOL_OK,
            Err(e) => publish_outcome(e),
        };
        // SAFETY: `outcome` is writable.
        unsafe { *outcome = o };
        POLARSPLIT_OK
    })
}

/// Releases an abandoned reservation (the handshake failed). `POLARSPLIT_ERR_INVALID_ARGUMENT`
/// for an unknown (already published, cancelled or discarded) reservation.
///
/// # Safety
/// `pool` must be a live pool.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_cancel(
    pool: *const PolarsplitPool,
    reservation: u64,
) -> PolarsplitStatus {
    guard(|| {
        // SAFETY: NULL or a live pool.
        match unsafe { pool_arg(pool) } {
            Ok(p) if p.index.cancel(ReservationId(reservation)) => POLARSPLIT_OK,
            Ok(_) => POLARSPLIT_ERR_INVALID_ARGUMENT,
            Err(s) => s,
        }
    })
}
