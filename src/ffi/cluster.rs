//! The engine (SPEC §0, R-1): topology, generations, monitor samples and configuration, shared by
//! every session of a process.

use std::sync::Arc;

use super::config::PolarsplitConfig;
use super::handle::{boundary, create, free, opt_out, try_arg, try_out, try_ref, Castable};
use super::status::POLARSPLIT_OK;
use super::status::{PolarsplitStatus, POLARSPLIT_DONE, POLARSPLIT_ERR_INVALID_ARGUMENT};
use crate::cluster::Engine;
use crate::config::ServerDialect;
use crate::protocol::Lsn;
use crate::token::WriterIdentity;

/// The engine: topology, reader positions and counters shared by all sessions of a process.
/// Thread-safe: any thread may use it concurrently. Sessions keep it alive, so it may be freed
/// while sessions still exist.
pub struct PolarsplitEngine {
    pub(crate) inner: Arc<Engine>,
}

impl Castable for PolarsplitEngine {}

/// Server dialects (SPEC W-7) for `polarsplit_engine_set_dialect`: back to the configured one.
pub const POLARSPLIT_DIALECT_DEFAULT: i32 = -1;
/// PolarDB with the full proxy extension (SPEC W-7 `awide`).
pub const POLARSPLIT_DIALECT_AWIDE: i32 = 0;
/// Upstream PolarDB for PostgreSQL 15 (SPEC W-7 `polardb`).
pub const POLARSPLIT_DIALECT_POLARDB: i32 = 1;
/// Plain PostgreSQL (SPEC W-7 `stock`).
pub const POLARSPLIT_DIALECT_STOCK: i32 = 2;

/// `POLARSPLIT_OK` when the engine knew what the call named, else `POLARSPLIT_DONE`.
fn ok_or_done(known: bool) -> PolarsplitStatus {
    if known {
        POLARSPLIT_OK
    } else {
        POLARSPLIT_DONE
    }
}

/// A hostgroup argument where -1 means "none" (or "the configured one"); anything else must fit
/// in 32 bits.
pub(crate) fn optional_hostgroup(h: i64) -> Result<Option<u32>, PolarsplitStatus> {
    match h {
        -1 => Ok(None),
        h => u32::try_from(h)
            .ok()
            .filter(|h| *h != u32::MAX)
            .map(Some)
            .ok_or(POLARSPLIT_ERR_INVALID_ARGUMENT),
    }
}

/// Creates an engine from a configuration and stores it in `*out`.
///
/// # Safety
/// `config` must be a live configuration; `out` a writable pointer slot.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_new(
    config: *const PolarsplitConfig,
    out: *mut *mut PolarsplitEngine,
) -> PolarsplitStatus {
    boundary! {
        let make = || {
            Ok(PolarsplitEngine {
                inner: Engine::new((*try_ref!(config).inner).clone()),
            })
        };
        // SAFETY: `out` is a writable slot.
        unsafe { create(out, make) }
    }
}

/// Releases the host's reference to an engine. Sessions created from it stay valid. NULL is a
/// no-op.
///
/// # Safety
/// `engine` must be NULL or a live engine handle, freed once.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_free(engine: *mut PolarsplitEngine) {
    // SAFETY: as documented.
    boundary! { unsafe { free(engine) } }
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
    boundary! {
        try_ref!(engine).inner.add_reader(server, hostgroup);
        POLARSPLIT_OK
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
    boundary! { ok_or_done(try_ref!(engine).inner.remove_reader(server)) }
}

/// Marks a reader healthy or not (unhealthy readers are never chosen; a pin on one is dropped).
/// A change is an outage dated by the latest host time the engine saw (SPEC R-1a); a host that
/// knows the time uses `polarsplit_engine_set_reader_health_at`. `POLARSPLIT_DONE` when it is not
/// registered.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_reader_health(
    engine: *const PolarsplitEngine,
    server: u32,
    healthy: bool,
) -> PolarsplitStatus {
    boundary! { ok_or_done(try_ref!(engine).inner.set_reader_health(server, healthy)) }
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
    boundary! { ok_or_done(try_ref!(engine).inner.reader_sample(server, Lsn(lsn), at_ms)) }
}

/// Whether `server` is a registered reader (the fault reports below change nothing for another).
fn known_reader(e: &PolarsplitEngine, server: u32) -> bool {
    e.inner.readers().snapshot(server).is_some()
}

/// A fault report on reader `server`: `POLARSPLIT_DONE` (nothing changes) when it is not a
/// registered reader, else `report` runs and the answer is `POLARSPLIT_OK`.
fn report_on_reader(
    e: &PolarsplitEngine,
    server: u32,
    report: impl FnOnce(&Engine),
) -> PolarsplitStatus {
    if !known_reader(e, server) {
        return POLARSPLIT_DONE;
    }
    report(&e.inner);
    POLARSPLIT_OK
}

/// The host's health verdict for a reader at host time `now_ms` (SPEC R-1, R-1a): unhealthy
/// readers are never chosen (a pin on one is dropped), and a change either way is an outage —
/// only evidence taken after `now_ms` (a monitor sample whose query was sent later) gives the
/// reader a known position again. Prefer it to `polarsplit_engine_set_reader_health`, which
/// dates the change by the latest time the engine saw. `POLARSPLIT_DONE` when the reader is not
/// registered.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_reader_health_at(
    engine: *const PolarsplitEngine,
    server: u32,
    healthy: bool,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! {
        ok_or_done(try_ref!(engine).inner.set_reader_health_at(server, healthy, now_ms))
    }
}

/// The host's monitor query to reader `server` failed at host time `now_ms` (SPEC R-1a, R-1b):
/// its connection broke or answered an error, or it answered nothing within the host's monitor
/// timeout. An outage (nothing known of the reader's position before `now_ms` counts) and a
/// failure toward its hold-out (`reader_failure_threshold` consecutive failures hold it out of
/// reader choice until a monitor sample taken after the latest one). A monitor connection that
/// could not be opened is `polarsplit_engine_reader_connect_failed` instead (one report per
/// failure). `POLARSPLIT_DONE` when the reader is not registered (nothing changes).
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_monitor_failed(
    engine: *const PolarsplitEngine,
    server: u32,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! { report_on_reader(try_ref!(engine), server, |e| e.reader_monitor_failed(server, now_ms)) }
}

/// A connection to reader `server` that no session uses broke at host time `now_ms` (SPEC R-1a,
/// R-1b): a pooled idle connection that got EOF, an error or a FATAL (e.g. 57P01 at a shutdown).
/// An outage and a failure. A session's own connection is reported to the session instead
/// (`POLARSPLIT_EVENT_CONNECTION_LOST`); a connection the host closed itself (idle too long) is
/// no loss. Report the connection's id with `polarsplit_engine_connection_closed` too.
/// `POLARSPLIT_DONE` when the reader is not registered (nothing changes).
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_lost(
    engine: *const PolarsplitEngine,
    server: u32,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! { report_on_reader(try_ref!(engine), server, |e| e.reader_lost(server, now_ms)) }
}

/// A connection the host opened to reader `server` on its own — a warm-up, a pool refill, a
/// monitor connection, one whose session went away during its handshake — could not be opened at
/// host time `now_ms` (SPEC R-1a, R-1b): the TCP connect was refused or failed, the handshake
/// timed out, or the server answered the startup with an ErrorResponse; `starting_up` when that
/// was SQLSTATE 57P03 (the standby accepts no connections yet). An outage and a failure. A
/// connection a session asked for (ACQUIRE_READER) is reported to that session instead
/// (`POLARSPLIT_EVENT_READER_CONNECT_FAILED`); an authentication failure (28P01, 28000) is no
/// failure of the reader. `POLARSPLIT_DONE` when the reader is not registered (nothing changes).
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_connect_failed(
    engine: *const PolarsplitEngine,
    server: u32,
    now_ms: u64,
    starting_up: bool,
) -> PolarsplitStatus {
    boundary! { report_on_reader(try_ref!(engine), server, |e| e.reader_connect_failed(server, now_ms, starting_up)) }
}

/// Reader `server` was out at host time `now_ms` in a way no other call names (SPEC R-1a): the
/// host saw it restart (`pg_postmaster_start_time()` moved), be re-cloned, or change timeline.
/// Nothing known of its position before `now_ms` counts. Not a failure. `POLARSPLIT_DONE` when
/// the reader is not registered.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_outage(
    engine: *const PolarsplitEngine,
    server: u32,
    now_ms: u64,
) -> PolarsplitStatus {
    boundary! { report_on_reader(try_ref!(engine), server, |e| e.reader_outage(server, now_ms)) }
}

/// The back-off of reader `server` (SPEC R-1b): `POLARSPLIT_OK` with `*at` the earliest host
/// time at which the host should open a new connection to it — for an ACQUIRE_READER it has no
/// pooled connection for (answer `POLARSPLIT_EVENT_READER_UNAVAILABLE` until then), pool
/// refills and warm-ups. While it is failing, keep at most one connection attempt in flight to
/// it. `POLARSPLIT_DONE` (`*at` untouched): any time — no failure since it last answered, or a
/// monitor sample taken after its latest failure lifted the back-off, or the reader is not
/// registered. The back-off doubles with each consecutive failure, from 200 ms to 3.2 s.
///
/// # Safety
/// `engine` must be a live engine; `at` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_retry_after(
    engine: *const PolarsplitEngine,
    server: u32,
    at: *mut u64,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let mut at = try_out!(at);
        match e.inner.reader_retry_after(server) {
            Some(t) => {
                at.set(t);
                POLARSPLIT_OK
            }
            None => POLARSPLIT_DONE,
        }
    }
}

/// Whether reader `server` is held out of reader choice (SPEC R-1b: after
/// `reader_failure_threshold` consecutive failures, until a monitor sample taken after the latest
/// one) into `*held_out`. `POLARSPLIT_DONE` (`*held_out` untouched) when it is not registered.
///
/// # Safety
/// `engine` must be a live engine; `held_out` writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_held_out(
    engine: *const PolarsplitEngine,
    server: u32,
    held_out: *mut bool,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let mut out = try_out!(held_out);
        if !known_reader(e, server) {
            return POLARSPLIT_DONE;
        }
        out.set(e.inner.reader_held_out(server));
        POLARSPLIT_OK
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
    boundary! {
        try_ref!(engine).inner.writer_sample(writer_hostgroup, Lsn(lsn), sent_at_ms);
        POLARSPLIT_OK
    }
}

/// The writer's `pg_conf_load_time()` for a writer hostgroup, in microseconds since the Unix
/// epoch (e.g. `(date_part('epoch', pg_conf_load_time()) * 1000000)::int8`, read with the
/// monitor's sample). When it moves forward the writer reloaded its configuration: settings
/// sessions have from it may have changed without a ParameterStatus (most are not reported), so
/// each session captures its state again before its next read leaves the writer (SPEC S-5).
/// Report it from one connection only: the value is the backend's own (when it applied the
/// reload, at its next command), so two connections report one reload at two times. A host
/// that reports none leaves such a reload unseen until something else makes a session capture
/// its state again.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_writer_config_loaded(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    load_time_us: u64,
) -> PolarsplitStatus {
    boundary! {
        try_ref!(engine).inner.writer_config_loaded(writer_hostgroup, load_time_us);
        POLARSPLIT_OK
    }
}

/// A reader's `pg_conf_load_time()`, in microseconds since the Unix epoch (as for
/// [`polarsplit_engine_writer_config_loaded`], read with the reader's monitor sample). When it
/// moves forward the standby reloaded its configuration, which changes the settings of every
/// connection to it, pooled ones too: every reader key changes, so connections pooled before
/// are not handed out again, and fresh ones are checked against the writer session's settings
/// by the settings replay (SPEC S-5). Report it from one connection per reader only. A host
/// that reports none leaves such a reload unseen by pooled connections.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_reader_config_loaded(
    engine: *const PolarsplitEngine,
    server: u32,
    load_time_us: u64,
) -> PolarsplitStatus {
    boundary! {
        try_ref!(engine).inner.reader_config_loaded(server, load_time_us);
        POLARSPLIT_OK
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
    boundary! {
        try_ref!(engine).inner.set_server_version(server, version_num);
        POLARSPLIT_OK
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
    boundary! {
        let g = try_ref!(engine).inner.writer_changed(writer_hostgroup);
        // SAFETY: NULL or writable.
        if let Some(mut out) = unsafe { opt_out(generation) } {
            out.set(g);
        }
        POLARSPLIT_OK
    }
}

/// The writer's history for causal tokens (SPEC C-1, C-3): its system identifier (`SELECT
/// system_identifier FROM pg_catalog.pg_control_system()`) and the timeline it writes now (the
/// first 8 hexadecimal digits of `pg_walfile_name(pg_current_wal_insert_lsn())`; not
/// `pg_control_checkpoint()`, which lags a promotion). Report it at start and whenever the
/// monitor reads it again: every proxy process that reports the same identity formats and
/// accepts the same tokens. Until the host reports one (or after it reports `0, 0`: unknown),
/// tokens carry history `0.0` and hold only where the same writer is seen. An identity other
/// than the one known before is a new writer history: the generation is bumped as by
/// `polarsplit_engine_writer_changed` (sessions forget their LSNs, SPEC S-2) — the first
/// identity reported is not a change. The writer generation after the call is stored in
/// `*generation` (may be NULL).
///
/// # Safety
/// `engine` must be a live engine; `generation` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_set_writer_identity(
    engine: *const PolarsplitEngine,
    writer_hostgroup: u32,
    system_id: u64,
    timeline: u32,
    generation: *mut u64,
) -> PolarsplitStatus {
    boundary! {
        let e = try_ref!(engine);
        let identity = WriterIdentity { system_id, timeline };
        let g = e.inner.set_writer_identity(writer_hostgroup, identity);
        // SAFETY: NULL or writable.
        if let Some(mut out) = unsafe { opt_out(generation) } {
            out.set(g);
        }
        POLARSPLIT_OK
    }
}

/// The host closed backend connection `conn` itself — a pooled reader connection it timed out
/// as idle, or one that broke or said something while idle in its pool, or one it could not
/// pool: the engine forgets what it knew of that connection (the statements prepared on it,
/// SPEC E-2), so the id may be used again for another connection. Connections the session
/// asked to close (CLOSE_BACKEND) and those reported lost to a session need no report;
/// reporting one anyway is harmless. Returns `POLARSPLIT_OK`.
///
/// # Safety
/// `engine` must be a live engine.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_engine_connection_closed(
    engine: *const PolarsplitEngine,
    conn: u64,
) -> PolarsplitStatus {
    boundary! {
        try_ref!(engine).inner.connection_closed(conn);
        POLARSPLIT_OK
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
    boundary! {
        let e = try_ref!(engine);
        let r = try_arg!(optional_hostgroup(reader_hostgroup));
        e.inner.set_reader_hostgroup(writer_hostgroup, r);
        POLARSPLIT_OK
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
    boundary! {
        let e = try_ref!(engine);
        let d = match dialect {
            POLARSPLIT_DIALECT_DEFAULT => None,
            POLARSPLIT_DIALECT_AWIDE => Some(ServerDialect::Awide),
            POLARSPLIT_DIALECT_POLARDB => Some(ServerDialect::PolarDb),
            POLARSPLIT_DIALECT_STOCK => Some(ServerDialect::Stock),
            _ => return POLARSPLIT_ERR_INVALID_ARGUMENT,
        };
        e.inner.set_dialect(writer_hostgroup, d);
        POLARSPLIT_OK
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
    boundary! {
        let e = try_ref!(engine);
        e.inner.replace_config((*try_ref!(config).inner).clone());
        POLARSPLIT_OK
    }
}
