//! Reader connections: the compatibility key (SPEC P-9), the optional pool index, and warmup with
//! reserve → handshake → publish.
//!
//! Hosts with their own pool use only [`ReaderKey`] (built with [`ReaderKeyBuilder`]); others may
//! keep their reader connections in a [`PoolIndex`] and let a [`WarmupQueue`] tell them which to
//! open.
//!
//! # Lock order
//!
//! The engine-wide shared parts take their locks only in this order, each held briefly, none
//! ever held across a call into the host or while a connection is opened:
//!
//! 1. `Readers`' topology writer mutex, then its `ShardedLock` (write side) — only to swap a
//!    snapshot pointer. The pool never calls into `Readers` while holding a pool lock
//!    ([`PoolIndex::publish_checked`] asks `Readers` first, then locks).
//! 2. `PoolIndex::servers` (the per-server state map) — alone: looked up before a shard is
//!    locked, never under one.
//! 3. One `PoolIndex` key shard at a time (never two; bulk operations visit shards one by one).
//! 4. A `PoolIndex` directory shard — alone, or under a key shard (3 → 4), never the reverse.
//! 5. `PoolIndex::closing` (connections to close) — alone.
//! 6. `WarmupQueue`'s lock — a leaf, never combined with any other.
//!
//! Per-reader LSN samples, health, active counts and per-server totals are atomics, read and
//! written without locks.

mod index;
mod key;
mod warmup;

pub use index::{
    CheckinOutcome, Checkout, ConnId, PoolCounts, PoolError, PoolIndex, PoolLimits, PoolStats,
};
pub(crate) use key::KeyedHash;
pub use key::{
    auth_hash, ReaderKey, ReaderKeyBuilder, AUTHORIZATION_KEY, READER_CONFIGURATION_KEY, ROLE_KEY,
    SETTINGS_DIGEST_KEY,
};
pub use warmup::{
    Demand, DemandOutcome, DemandReason, PublishCheck, PublishError, Reservation, ReservationId,
    ReserveError, WarmupQueue, WarmupStats,
};
