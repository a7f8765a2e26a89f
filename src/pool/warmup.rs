//! Warmup (SPEC R-3): demand signals, and *reserve → handshake outside any engine lock → publish
//! after re-validation* on the [`PoolIndex`].
//!
//! 1. A pool miss for (server, key) — or a BEGIN, when configured — is a [`Demand`], deduplicated
//!    in a bounded [`WarmupQueue`] (a full queue drops the signal and counts it).
//! 2. The host drains demands and calls [`PoolIndex::reserve`]: under the key shard's lock the
//!    per-(server, key) and per-server capacity is checked and a slot is held. The result is a
//!    plain token ([`Reservation`]): no lock and no reference is held while the host connects.
//! 3. The host performs the handshake with no engine lock held.
//! 4. [`PoolIndex::publish`] re-validates under the lock — writer generation and profile
//!    generation captured at reserve against the current ones, the server's membership (still a
//!    healthy reader of the hostgroup, and not removed from the index meanwhile), and capacity
//!    (limits may have been lowered). A stale reservation is discarded and counted, never
//!    published; the host closes the connection it opened. [`PoolIndex::cancel`] releases an
//!    abandoned one (a failed handshake).

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::index::{shard_of, ConnId, ConnState, Entry, IdHasher, PoolIndex, ResEntry, SHARD_BITS};
use super::ReaderKey;
use crate::cluster::readers::{Hostgroup, Readers, ServerId};
use crate::config::{Config, Warmup};

/// A reservation's id: the token the host keeps during its handshake. Ids are never reused by
/// one index; an id that was published, cancelled or discarded is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReservationId(pub u64);

/// A held slot for one new connection to `server` under `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The token to publish or cancel the reservation with.
    pub id: ReservationId,
    /// The reader the new connection is for.
    pub server: ServerId,
    /// The key the new connection will be pooled under (its startup must match it).
    pub key: ReaderKey,
    /// The writer generation captured at reserve.
    pub writer_generation: u64,
}

/// Why a reservation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    #[error("the (server, key) is at its connection limit")]
    /// The (server, key) pair already has its most connections, open or reserved.
    KeyFull,
    #[error("the server is at its connection limit")]
    /// The server already has its most connections, open or reserved.
    ServerFull,
    #[error("the key's profile generation has been invalidated")]
    /// The key's profile generation is older than the index's oldest valid one: a connection with
    /// it could never be used.
    StaleProfile,
}

/// Why a reservation was discarded at publish (the host closes the connection it opened).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    #[error("unknown reservation (already published, cancelled or discarded)")]
    /// The id names no held reservation: it was published, cancelled or discarded before.
    UnknownReservation,
    #[error("the writer generation changed during the handshake")]
    /// The writer changed (failover) during the handshake: the connection's view may predate it.
    StaleWriterGeneration,
    #[error("the profile generation changed during the handshake")]
    /// The startup profile changed during the handshake: the connection's startup is outdated.
    StaleProfile,
    #[error("the server was removed during the handshake")]
    /// The server was removed from the index during the handshake.
    ServerRemoved,
    #[error("the server is no longer a healthy reader of the hostgroup")]
    /// The server is no longer a healthy reader of the hostgroup (as the host's check says).
    NotMember,
    #[error("the (server, key) limit was lowered below its connections")]
    /// The (server, key) limit was lowered below the connections it already has.
    KeyFull,
    #[error("the server limit was lowered below its connections")]
    /// The server's limit was lowered below the connections it already has.
    ServerFull,
    #[error("the connection id is already in the index")]
    /// The host's connection id is already in the index.
    DuplicateConnection,
}

/// The current state a reservation is re-validated against at publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishCheck {
    /// The writer generation now (the engine's writer view of the hostgroup).
    pub writer_generation: u64,
    /// The profile generation now ([`Engine::profile_generation`](crate::Engine::profile_generation)).
    pub profile_generation: u64,
    /// Whether the server is still a healthy reader of the hostgroup the reservation was made
    /// for (evaluated by the caller *before* publish, so no foreign lock is taken under the
    /// index's lock; removal from the index itself is checked under the lock).
    pub member: bool,
}

impl PoolIndex {
    /// R-3 step 2: holds capacity for one new connection to `server` under `key`.
    pub fn reserve(
        &self,
        server: ServerId,
        key: &ReaderKey,
        writer_generation: u64,
    ) -> Result<Reservation, ReserveError> {
        // Taken before the shard lock: the servers map is never locked under a shard.
        let state = self.server_state(server);
        let limits = self.limits();
        let si = shard_of(key);
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let refused =
            if key.profile_generation < self.min_profile_generation.load(Ordering::Acquire) {
                Some(ReserveError::StaleProfile)
            } else {
                let slot = sh
                    .keys
                    .entry(*key)
                    .or_default()
                    .slot_or_insert(server, &state);
                if slot.open() + slot.reserved >= limits.max_per_key {
                    Some(ReserveError::KeyFull)
                } else if !state.try_reserve(limits.max_per_server) {
                    Some(ReserveError::ServerFull)
                } else {
                    slot.reserved += 1;
                    None
                }
            };
        if let Some(e) = refused {
            sh.prune(key);
            sh.stats.reserve_refused += 1;
            return Err(e);
        }
        // Never 0: C hosts may use 0 for "no reservation".
        sh.next_reservation += 1;
        let id = (sh.next_reservation << SHARD_BITS) | si as u64;
        sh.reservations.insert(
            id,
            ResEntry {
                key: *key,
                server,
                writer_generation,
                epoch: state.epoch.load(Ordering::Acquire),
                state,
            },
        );
        sh.stats.reserved += 1;
        Ok(Reservation {
            id: ReservationId(id),
            server,
            key: *key,
            writer_generation,
        })
    }

    /// R-3 step 4: re-validates the reservation and, if it still holds, adds `conn` as an idle
    /// clean connection. The reservation is consumed in every case; on error the host closes
    /// `conn`.
    pub fn publish(
        &self,
        id: ReservationId,
        conn: ConnId,
        check: &PublishCheck,
    ) -> Result<(), PublishError> {
        let si = (id.0 as usize) & ((1 << SHARD_BITS) - 1);
        let limits = self.limits();
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let r = sh
            .reservations
            .remove(&id.0)
            .ok_or(PublishError::UnknownReservation)?;
        let Some(slot) = sh.keys.get_mut(&r.key).and_then(|kp| kp.slot_mut(r.server)) else {
            debug_assert!(false, "a reservation's slot exists while it does");
            return Err(PublishError::UnknownReservation);
        };
        let min_profile = self.min_profile_generation.load(Ordering::Acquire);
        let verdict = if r.writer_generation != check.writer_generation {
            Err(PublishError::StaleWriterGeneration)
        } else if r.key.profile_generation != check.profile_generation
            || r.key.profile_generation < min_profile
        {
            Err(PublishError::StaleProfile)
        } else if r.state.epoch.load(Ordering::Acquire) != r.epoch {
            Err(PublishError::ServerRemoved)
        } else if !check.member {
            Err(PublishError::NotMember)
        } else if slot.open() >= limits.max_per_key {
            // First to publish wins: open connections (this one included) within the limit.
            Err(PublishError::KeyFull)
        } else if !self.dir_try_insert(conn, si) {
            Err(PublishError::DuplicateConnection)
        } else if !r.state.try_open_reserved(limits.max_per_server) {
            self.dir_remove(conn);
            Err(PublishError::ServerFull)
        } else {
            Ok(())
        };
        slot.reserved -= 1;
        match verdict {
            Ok(()) => {
                slot.list(conn, false);
                sh.entries.insert(
                    conn,
                    Entry {
                        key: r.key,
                        server: r.server,
                        state: ConnState::Idle { dirty: false },
                    },
                );
                sh.stats.published += 1;
            }
            Err(_) => {
                r.state.unreserve();
                sh.prune(&r.key);
                sh.stats.discarded += 1;
            }
        }
        verdict
    }

    /// [`PoolIndex::publish`] with membership taken from the reader registry: the server must
    /// still be a healthy reader of `hostgroup` (checked before the index's lock is taken).
    /// Internal: it takes the engine's reader registry, which is not part of the API; hosts use
    /// [`PoolIndex::publish`] with their own membership check (as the C ABI does).
    #[doc(hidden)]
    pub fn publish_checked(
        &self,
        reservation: &Reservation,
        conn: ConnId,
        writer_generation: u64,
        profile_generation: u64,
        readers: &Readers,
        hostgroup: Hostgroup,
    ) -> Result<(), PublishError> {
        let check = PublishCheck {
            writer_generation,
            profile_generation,
            member: readers.is_valid(reservation.server, hostgroup),
        };
        self.publish(reservation.id, conn, &check)
    }

    /// Releases an abandoned reservation (the handshake failed or was given up). Returns false
    /// for an unknown id.
    pub fn cancel(&self, id: ReservationId) -> bool {
        let si = (id.0 as usize) & ((1 << SHARD_BITS) - 1);
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let Some(r) = sh.reservations.remove(&id.0) else {
            return false;
        };
        if let Some(slot) = sh.keys.get_mut(&r.key).and_then(|kp| kp.slot_mut(r.server)) {
            slot.reserved -= 1;
        }
        r.state.unreserve();
        sh.prune(&r.key);
        sh.stats.cancelled += 1;
        true
    }
}

/// Why a connection is wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DemandReason {
    /// A checkout found no idle connection for (server, key).
    Miss,
    /// A transaction began (`warmup = begin | both`): a split read may need a reader soon.
    Begin,
}

/// A request to the host: open a connection to `server` under `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demand {
    /// The reader to connect to.
    pub server: ServerId,
    /// The key the connection must have (its startup parameters and settings).
    pub key: ReaderKey,
    /// Why the connection is wanted.
    pub reason: DemandReason,
}

/// What became of a demand signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemandOutcome {
    /// Queued for the host's next drain.
    Queued,
    /// The same (server, key) is already waiting to be drained.
    Duplicate,
    /// The queue is full; counted.
    Dropped,
    /// `warmup` does not cover this reason.
    Disabled,
}

/// Counters of the queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarmupStats {
    /// Demands queued, ever.
    pub queued: u64,
    /// Demands ignored because the same (server, key) was already queued.
    pub duplicates: u64,
    /// Demands dropped because the queue was full.
    pub dropped: u64,
    /// Demands ignored because `warmup` does not cover their reason.
    pub disabled: u64,
}

#[derive(Debug)]
struct QueueInner {
    queue: VecDeque<Demand>,
    pending: HashSet<(ServerId, ReaderKey), BuildHasherDefault<IdHasher>>,
}

/// The bounded, deduplicated demand queue. `Send + Sync`. Its lock is a leaf: nothing else is
/// locked while it is held, and it allocates nothing under it (both containers are sized at
/// construction).
#[derive(Debug)]
pub struct WarmupQueue {
    mode: Warmup,
    capacity: usize,
    inner: Mutex<QueueInner>,
    queued: AtomicU64,
    duplicates: AtomicU64,
    dropped: AtomicU64,
    disabled: AtomicU64,
}

const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<WarmupQueue>();
};

impl WarmupQueue {
    /// An empty queue for `mode`, holding at most `capacity` demands (all memory allocated now).
    pub fn new(mode: Warmup, capacity: usize) -> WarmupQueue {
        WarmupQueue {
            mode,
            capacity,
            inner: Mutex::new(QueueInner {
                queue: VecDeque::with_capacity(capacity),
                pending: HashSet::with_capacity_and_hasher(capacity, Default::default()),
            }),
            queued: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            disabled: AtomicU64::new(0),
        }
    }

    /// `warmup` and `warmup_queue_capacity` from the configuration.
    pub fn from_config(config: &Config) -> WarmupQueue {
        WarmupQueue::new(config.warmup, config.warmup_queue_capacity)
    }

    /// The `warmup` mode the queue was made for.
    pub fn mode(&self) -> Warmup {
        self.mode
    }

    fn enabled(&self, reason: DemandReason) -> bool {
        matches!(
            (self.mode, reason),
            (Warmup::Demand | Warmup::Both, DemandReason::Miss)
                | (Warmup::Begin | Warmup::Both, DemandReason::Begin)
        )
    }

    /// Signals that a connection to `server` under `key` is wanted.
    pub fn demand(&self, server: ServerId, key: &ReaderKey, reason: DemandReason) -> DemandOutcome {
        let (outcome, counter) = if !self.enabled(reason) {
            (DemandOutcome::Disabled, &self.disabled)
        } else {
            let mut q = self.inner.lock();
            if q.pending.contains(&(server, *key)) {
                (DemandOutcome::Duplicate, &self.duplicates)
            } else if q.queue.len() >= self.capacity {
                (DemandOutcome::Dropped, &self.dropped)
            } else {
                q.pending.insert((server, *key));
                q.queue.push_back(Demand {
                    server,
                    key: *key,
                    reason,
                });
                (DemandOutcome::Queued, &self.queued)
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        outcome
    }

    /// Takes up to `max` demands, oldest first.
    pub fn drain(&self, max: usize) -> Vec<Demand> {
        let mut out = Vec::with_capacity(max.min(self.capacity));
        let mut q = self.inner.lock();
        while out.len() < max {
            let Some(d) = q.queue.pop_front() else { break };
            q.pending.remove(&(d.server, d.key));
            out.push(d);
        }
        out
    }

    /// How many demands wait to be drained.
    pub fn len(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// Whether no demand waits to be drained.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queue's counters so far.
    pub fn stats(&self) -> WarmupStats {
        WarmupStats {
            queued: self.queued.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            disabled: self.disabled.load(Ordering::Relaxed),
        }
    }
}
