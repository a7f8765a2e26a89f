//! The optional pool index with warmup (SPEC P-9, R-3) for C hosts.
//!
//! A `polarsplit_pool` is thread-safe: every function may be called from any thread at any time
//! (it is internally sharded and locked briefly; no call blocks on I/O). Connection ids are the
//! host's own `uint64_t` values.

use super::config::PolarsplitConfig;
use super::handle::{boundary, create, free, opt_out, slice, slice_mut, try_arg, try_out, try_ref};
use super::handle::{write_sized, Castable, Growable};
use super::reader_key::{key_arg, PolarsplitReaderKey};
use super::status::{PolarsplitStatus, POLARSPLIT_ERR_BAD_STATE, POLARSPLIT_ERR_INVALID_ARGUMENT};
use super::status::{POLARSPLIT_ERR_NULL, POLARSPLIT_ERR_UNKNOWN_CONNECTION, POLARSPLIT_OK};
use crate::pool::{
    CheckinOutcome, DemandOutcome, DemandReason, PoolCounts, PoolError, PoolIndex, PoolLimits,
    PoolStats, PublishCheck, PublishError, ReservationId, ReserveError, WarmupQueue,
};

/// The pool index and its warmup queue. Thread-safe: share one handle among all host threads.
pub struct PolarsplitPool {
    index: PoolIndex,
    warmup: WarmupQueue,
}

impl Castable for PolarsplitPool {}

/// Result of `polarsplit_pool_checkout`. Frozen for ABI 3.
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

/// Connection counts (of one server, or one key). Frozen for ABI 3.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitPoolCounts {
    /// Idle and clean.
    pub idle: u32,
    /// Idle, needing an XID reset before reuse.
    pub dirty: u32,
    /// Checked out.
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

/// Counters of a pool (SPEC §9). Grows at the end: `polarsplit_pool_read_stats` takes the
/// host's `sizeof`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitPoolStats {
    /// Checkouts that found a compatible idle connection.
    pub hits: u64,
    /// Checkouts that found none.
    pub misses: u64,
    /// Hits handed out with `needs_reset`.
    pub reset_handouts: u64,
    /// Reservations taken.
    pub reserved: u64,
    /// Reservations refused (connection limits, stale profile).
    pub reserve_refused: u64,
    /// Connections published into the pool.
    pub published: u64,
    /// Reservations discarded at publish (re-validation failed).
    pub discarded: u64,
    /// Reservations cancelled by the host.
    pub cancelled: u64,
    /// Connections queued for the host to close.
    pub closed: u64,
    /// Warmup demands queued.
    pub demands_queued: u64,
    /// Demands dropped as duplicates of a queued one.
    pub demands_duplicate: u64,
    /// Demands dropped because the queue was full.
    pub demands_dropped: u64,
    /// Demands ignored because `warmup` does not cover their reason.
    pub demands_disabled: u64,
}

// SAFETY: repr(C) integers.
unsafe impl Growable for PolarsplitPoolStats {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitPoolStats>();
}

/// Why a connection is wanted (`polarsplit_pool_demand`).
pub type PolarsplitDemandReason = i32;
/// A checkout found no compatible idle connection.
pub const POLARSPLIT_DEMAND_MISS: PolarsplitDemandReason = 1;
/// A transaction began (configuration `warmup = begin | both`).
pub const POLARSPLIT_DEMAND_BEGIN: PolarsplitDemandReason = 2;

/// A request to open one connection to `server` under `key` (`polarsplit_pool_drain`). Frozen
/// for ABI 3 (an array element).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitDemand {
    /// The key the new connection must have.
    pub key: PolarsplitReaderKey,
    /// The server to connect to.
    pub server: u32,
    /// Why it is wanted (`POLARSPLIT_DEMAND_*`).
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

fn demand_outcome(o: DemandOutcome) -> PolarsplitPoolOutcome {
    match o {
        DemandOutcome::Queued => POLARSPLIT_POOL_OK,
        DemandOutcome::Duplicate => POLARSPLIT_POOL_DEMAND_DUPLICATE,
        DemandOutcome::Dropped => POLARSPLIT_POOL_DEMAND_DROPPED,
        DemandOutcome::Disabled => POLARSPLIT_POOL_DEMAND_DISABLED,
    }
}

fn demand_reason_to_c(r: DemandReason) -> PolarsplitDemandReason {
    match r {
        DemandReason::Miss => POLARSPLIT_DEMAND_MISS,
        DemandReason::Begin => POLARSPLIT_DEMAND_BEGIN,
    }
}

fn demand_reason_from_c(r: PolarsplitDemandReason) -> Result<DemandReason, PolarsplitStatus> {
    [DemandReason::Miss, DemandReason::Begin]
        .into_iter()
        .find(|x| demand_reason_to_c(*x) == r)
        .ok_or(POLARSPLIT_ERR_INVALID_ARGUMENT)
}

/// The status of a pool call on a connection id.
fn pool_status(r: Result<(), PoolError>) -> PolarsplitStatus {
    match r {
        Ok(()) => POLARSPLIT_OK,
        Err(PoolError::UnknownConnection) => POLARSPLIT_ERR_UNKNOWN_CONNECTION,
        Err(PoolError::NotInUse) => POLARSPLIT_ERR_BAD_STATE,
    }
}

/// A pool call on one connection id.
///
/// # Safety
/// `pool` must be NULL or a live pool.
unsafe fn on_conn<T>(
    pool: *const PolarsplitPool,
    f: impl FnOnce(&PoolIndex) -> Result<T, PoolError>,
) -> PolarsplitStatus {
    boundary! { pool_status(f(&try_ref!(pool).index).map(|_| ())) }
}

/// A pool call that queues connections for the host to close; `*queued`, if not NULL, gets how
/// many.
///
/// # Safety
/// `pool` must be NULL or a live pool; `queued` NULL or writable.
unsafe fn queue_closes(
    pool: *const PolarsplitPool,
    queued: *mut usize,
    f: impl FnOnce(&PoolIndex) -> usize,
) -> PolarsplitStatus {
    boundary! {
        let n = f(&try_ref!(pool).index);
        // SAFETY: as documented.
        if let Some(mut q) = unsafe { opt_out(queued) } {
            q.set(n);
        }
        POLARSPLIT_OK
    }
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
    boundary! {
        let make = || {
            let config = try_ref!(config);
            if max_per_key == 0 || max_per_server == 0 {
                return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
            }
            Ok(PolarsplitPool {
                index: PoolIndex::new(PoolLimits {
                    max_per_key,
                    max_per_server,
                }),
                warmup: WarmupQueue::from_config(&config.inner),
            })
        };
        // SAFETY: `out` is a writable slot.
        unsafe { create(out, make) }
    }
}

/// Frees a pool. The host still owns (and closes) every connection it held. NULL is a no-op.
///
/// # Safety
/// `pool` must be NULL or a live pool no other thread is using, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_free(pool: *mut PolarsplitPool) {
    // SAFETY: as documented.
    boundary! { unsafe { free(pool) } }
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
    boundary! {
        let pool = try_ref!(pool);
        // SAFETY: a readable key, `n_preferred` readable ids.
        let (key, preferred) = unsafe { (try_arg!(key_arg(key)), try_arg!(slice(preferred, n_preferred))) };
        let mut out = try_out!(out);
        let got = if preferred_only {
            pool.index.checkout_from(&key, preferred)
        } else {
            pool.index.checkout(&key, preferred)
        };
        out.set(match got {
            Some(c) => PolarsplitCheckout {
                conn: c.conn,
                server: c.server,
                found: true,
                needs_reset: c.needs_reset,
            },
            None => PolarsplitCheckout::default(),
        });
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        let mut close = try_out!(close);
        let r = pool.index.checkin(conn, dirty);
        if let Ok(outcome) = &r {
            close.set(*outcome == CheckinOutcome::Close);
        }
        pool_status(r.map(|_| ()))
    }
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
    // SAFETY: as documented.
    unsafe { on_conn(pool, |i| i.remove(conn)) }
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
    // SAFETY: as documented.
    unsafe { on_conn(pool, |i| i.mark_dirty(conn)) }
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
    // SAFETY: as documented.
    unsafe { queue_closes(pool, queued, |i| i.remove_server(server)) }
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
    // SAFETY: as documented.
    unsafe { queue_closes(pool, queued, |i| i.invalidate_before(profile_generation)) }
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
    boundary! {
        let pool = try_ref!(pool);
        let mut n = try_out!(n);
        // SAFETY: `cap` writable ids.
        let ids = try_arg!(unsafe { slice_mut(out, cap) });
        n.set(if ids.is_empty() { 0 } else { pool.index.take_closed_into(ids) });
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        try_out!(out).set(pool.index.server_counts(server).into());
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        // SAFETY: a readable key.
        let key = try_arg!(unsafe { key_arg(key) });
        try_out!(out).set(pool.index.key_counts(&key).into());
        POLARSPLIT_OK
    }
}

/// Copies the pool's counters into `*out`, of which the host has `out_size` bytes: pass
/// `sizeof(polarsplit_pool_stats)`. Counters appended later are not written to an older host's
/// smaller struct; a size below the ABI 3.0 struct is `POLARSPLIT_ERR_ABI`.
///
/// # Safety
/// `pool` must be a live pool; `out` NULL or `out_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_pool_read_stats(
    pool: *const PolarsplitPool,
    out: *mut PolarsplitPoolStats,
    out_size: usize,
) -> PolarsplitStatus {
    boundary! {
        let pool = try_ref!(pool);
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
        // SAFETY: `out_size` writable bytes.
        try_arg!(unsafe { write_sized(out, out_size, &stats) });
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        // SAFETY: a readable key.
        let key = try_arg!(unsafe { key_arg(key) });
        let reason = try_arg!(demand_reason_from_c(reason));
        let o = demand_outcome(pool.warmup.demand(server, &key, reason));
        // SAFETY: NULL or writable.
        if let Some(mut out) = unsafe { opt_out(outcome) } {
            out.set(o);
        }
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        let mut n = try_out!(n);
        if out.is_null() && cap != 0 {
            return POLARSPLIT_ERR_NULL;
        }
        let demands = pool.warmup.drain(cap);
        for (i, d) in demands.iter().enumerate() {
            let c = PolarsplitDemand {
                key: d.key.into(),
                server: d.server,
                reason: demand_reason_to_c(d.reason),
            };
            // SAFETY: `i < demands.len() <= cap` writable demands at `out`.
            unsafe { out.add(i).write(c) };
        }
        n.set(demands.len());
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        // SAFETY: a readable key.
        let key = try_arg!(unsafe { key_arg(key) });
        let (mut reservation, mut outcome) = (try_out!(reservation), try_out!(outcome));
        let (id, o) = match pool.index.reserve(server, &key, writer_generation) {
            Ok(r) => (r.id.0, POLARSPLIT_POOL_OK),
            Err(e) => (0, reserve_outcome(e)),
        };
        reservation.set(id);
        outcome.set(o);
        POLARSPLIT_OK
    }
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
    boundary! {
        let pool = try_ref!(pool);
        let mut outcome = try_out!(outcome);
        let check = PublishCheck {
            writer_generation,
            profile_generation,
            member: still_member,
        };
        outcome.set(match pool.index.publish(ReservationId(reservation), conn, &check) {
            Ok(()) => POLARSPLIT_POOL_OK,
            Err(e) => publish_outcome(e),
        });
        POLARSPLIT_OK
    }
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
    boundary! {
        if try_ref!(pool).index.cancel(ReservationId(reservation)) {
            POLARSPLIT_OK
        } else {
            POLARSPLIT_ERR_INVALID_ARGUMENT
        }
    }
}
