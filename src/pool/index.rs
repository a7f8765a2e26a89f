//! The optional pool index (SPEC P-9, R-3): which of the host's reader connections exist, to which
//! server, under which [`ReaderKey`], and whether each is idle, in use, or idle but needing an XID
//! reset (P-7) before it serves anything else.
//!
//! Connections are the host's opaque `u64` ids. The index never opens or closes anything: it
//! hands out ids and tells the host which to close.
//!
//! Layout: the state is split into [`SHARDS`] shards by a hash of the key, so sessions of
//! different users, databases or settings never touch the same lock. A checkout locks exactly one
//! shard. Because `checkin`/`remove`/`mark_dirty` name only the connection, a small directory
//! (itself sharded, by connection id) maps each connection to its key shard. Per-server totals
//! (open + reserved, for the per-server cap) are one packed atomic per server.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard, RwLock};

use super::ReaderKey;
use crate::cluster::readers::{mix, ServerId};

/// The host's id for one backend connection.
pub type ConnId = u64;

/// Number of key shards (a power of two; the low bits of a reservation id name its shard).
pub(super) const SHARDS: usize = 1 << SHARD_BITS;
pub(super) const SHARD_BITS: u32 = 4;
const DIR_SHARDS: usize = 16;

/// A fast, deterministic hasher for ids and keys that are already well-spread integers: one
/// multiply per word (FxHash-style), one full mix at the end.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Connection → index of its key shard.
type DirShard = IdMap<ConnId, u8>;

/// Capacity limits checked when reserving (and again when publishing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLimits {
    /// Connections (open + reserved) per (server, key).
    pub max_per_key: u32,
    /// Connections (open + reserved) per server, over all keys.
    pub max_per_server: u32,
}

impl Default for PoolLimits {
    fn default() -> Self {
        PoolLimits {
            max_per_key: 16,
            max_per_server: 256,
        }
    }
}

impl PoolLimits {
    fn pack(self) -> u64 {
        (u64::from(self.max_per_server) << 32) | u64::from(self.max_per_key)
    }
    fn unpack(v: u64) -> PoolLimits {
        PoolLimits {
            max_per_key: v as u32,
            max_per_server: (v >> 32) as u32,
        }
    }
}

/// A connection handed out by [`PoolIndex::checkout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkout {
    /// The host's id of the connection handed out.
    pub conn: ConnId,
    /// The reader it is connected to.
    pub server: ServerId,
    /// The connection still carries an XID import (P-7): the caller must put
    /// `SET polar_xact_split_xids = ''` in front of whatever it sends first.
    pub needs_reset: bool,
}

/// What the host does with a connection it checked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckinOutcome {
    /// Back in the pool.
    Pooled,
    /// Its server was removed or its key invalidated while it was in use: the index forgot it;
    /// close it.
    Close,
}

/// A call named a connection the index cannot act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("the pool index does not know this connection")]
    /// The index does not know the connection (never published, or already removed).
    UnknownConnection,
    #[error("the connection is not checked out")]
    /// The connection is idle in the pool, not checked out.
    NotInUse,
}

/// Connection counts of one (server, key), one key, or one server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Idle and clean.
    pub idle: u32,
    /// Idle, needing an XID reset before reuse.
    pub dirty: u32,
    /// Checked out by a session.
    pub in_use: u32,
    /// Reservations not yet published or cancelled.
    pub reserved: u32,
}

impl PoolCounts {
    /// Open connections: idle, dirty and in use (reservations not counted).
    pub fn open(&self) -> u32 {
        self.idle + self.dirty + self.in_use
    }
    fn add(&mut self, o: PoolCounts) {
        self.idle += o.idle;
        self.dirty += o.dirty;
        self.in_use += o.in_use;
        self.reserved += o.reserved;
    }
}

/// Counters (SPEC §9: pool hits/misses/warmups), summed over the shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Checkouts that found an idle connection.
    pub hits: u64,
    /// Checkouts that found none.
    pub misses: u64,
    /// Hits that handed out a connection needing an XID reset.
    pub reset_handouts: u64,
    /// Reservations made for new connections.
    pub reserved: u64,
    /// Reservations refused at a connection limit or for a stale profile.
    pub reserve_refused: u64,
    /// Reservations published: new connections added to the pool.
    pub published: u64,
    /// Reservations refused at publish (stale generation, membership, capacity, …).
    pub discarded: u64,
    /// Reservations the host cancelled (a failed handshake).
    pub cancelled: u64,
    /// Connections the index told the host to close.
    pub closed: u64,
}

impl PoolStats {
    fn add(&mut self, o: &PoolStats) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.reset_handouts += o.reset_handouts;
        self.reserved += o.reserved;
        self.reserve_refused += o.reserve_refused;
        self.published += o.published;
        self.discarded += o.discarded;
        self.cancelled += o.cancelled;
        self.closed += o.closed;
    }
}

/// Per-server state shared by every shard that has connections of the server.
#[derive(Debug, Default)]
pub(super) struct ServerState {
    /// Bumped by `remove_server`: reservations taken before it are stale.
    pub(super) epoch: AtomicU64,
    /// `reserved << 32 | open`, one word so the per-server cap is checked atomically.
    load: AtomicU64,
}

const OPEN: u64 = 1;
const RESERVED: u64 = 1 << 32;

impl ServerState {
    fn total(v: u64) -> u64 {
        (v & 0xffff_ffff) + (v >> 32)
    }

    /// One more reservation if the server stays within `max`.
    pub(super) fn try_reserve(&self, max: u32) -> bool {
        self.load
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (Self::total(v) < u64::from(max)).then_some(v + RESERVED)
            })
            .is_ok()
    }

    /// A reservation becomes an open connection if the server's open connections, this one
    /// included, stay within `max` (limits may have been lowered meanwhile; first to publish
    /// wins); otherwise nothing changes.
    pub(super) fn try_open_reserved(&self, max: u32) -> bool {
        self.load
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                ((v & 0xffff_ffff) < u64::from(max)).then_some(v - RESERVED + OPEN)
            })
            .is_ok()
    }

    pub(super) fn unreserve(&self) {
        self.load.fetch_sub(RESERVED, Ordering::AcqRel);
    }

    fn close(&self, n: u64) {
        self.load.fetch_sub(n * OPEN, Ordering::AcqRel);
    }

    fn counts(&self) -> (u32, u32) {
        let v = self.load.load(Ordering::Acquire);
        (v as u32, (v >> 32) as u32)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConnState {
    Idle {
        dirty: bool,
    },
    /// `dirty`: marked during this use. `retired`: close at checkin.
    InUse {
        dirty: bool,
        retired: bool,
    },
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: ReaderKey,
    pub(super) server: ServerId,
    pub(super) state: ConnState,
}

/// One (key, server): its idle connections (clean and dirty kept apart so a checkout prefers a
/// clean one) and how many are in use or reserved.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) server: ServerId,
    pub(super) state: Arc<ServerState>,
    clean: Vec<ConnId>,
    dirty: Vec<ConnId>,
    in_use: u32,
    pub(super) reserved: u32,
}

impl Slot {
    pub(super) fn open(&self) -> u32 {
        (self.clean.len() + self.dirty.len()) as u32 + self.in_use
    }
    fn is_empty(&self) -> bool {
        self.open() == 0 && self.reserved == 0
    }
    fn counts(&self) -> PoolCounts {
        PoolCounts {
            idle: self.clean.len() as u32,
            dirty: self.dirty.len() as u32,
            in_use: self.in_use,
            reserved: self.reserved,
        }
    }
    fn pop(&mut self, dirty: bool) -> Option<ConnId> {
        let c = if dirty {
            self.dirty.pop()
        } else {
            self.clean.pop()
        }?;
        self.in_use += 1;
        Some(c)
    }
    fn unlist(&mut self, conn: ConnId, dirty: bool) {
        let list = if dirty {
            &mut self.dirty
        } else {
            &mut self.clean
        };
        if let Some(i) = list.iter().position(|&c| c == conn) {
            list.swap_remove(i);
        }
    }
    pub(super) fn list(&mut self, conn: ConnId, dirty: bool) {
        if dirty {
            self.dirty.push(conn)
        } else {
            self.clean.push(conn)
        }
    }
}

/// The slots of one key, sorted by server id (deterministic fallback order).
#[derive(Debug, Default)]
pub(super) struct KeyPool {
    pub(super) slots: Vec<Slot>,
}

impl KeyPool {
    pub(super) fn slot_mut(&mut self, server: ServerId) -> Option<&mut Slot> {
        match self.slots.binary_search_by_key(&server, |s| s.server) {
            Ok(i) => Some(&mut self.slots[i]),
            Err(_) => None,
        }
    }

    pub(super) fn slot_or_insert(
        &mut self,
        server: ServerId,
        state: &Arc<ServerState>,
    ) -> &mut Slot {
        let i = match self.slots.binary_search_by_key(&server, |s| s.server) {
            Ok(i) => i,
            Err(i) => {
                self.slots.insert(
                    i,
                    Slot {
                        server,
                        state: Arc::clone(state),
                        clean: Vec::new(),
                        dirty: Vec::new(),
                        in_use: 0,
                        reserved: 0,
                    },
                );
                i
            }
        };
        &mut self.slots[i]
    }

    /// Preferred servers in order (clean first, then one needing a reset), then — when
    /// `fallback` — any server in id order, clean ones first.
    fn pop(&mut self, preferred: &[ServerId], fallback: bool) -> Option<ConnId> {
        for &s in preferred {
            if let Some(slot) = self.slot_mut(s) {
                if let Some(c) = slot.pop(false).or_else(|| slot.pop(true)) {
                    return Some(c);
                }
            }
        }
        if fallback {
            for dirty in [false, true] {
                for slot in &mut self.slots {
                    if let Some(c) = slot.pop(dirty) {
                        return Some(c);
                    }
                }
            }
        }
        None
    }

    pub(super) fn prune(&mut self) {
        self.slots.retain(|s| !s.is_empty());
    }
}

/// A reservation between `reserve` and `publish`/`cancel`.
#[derive(Debug)]
pub(super) struct ResEntry {
    pub(super) key: ReaderKey,
    pub(super) server: ServerId,
    pub(super) writer_generation: u64,
    pub(super) epoch: u64,
    pub(super) state: Arc<ServerState>,
}

#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) keys: IdMap<ReaderKey, KeyPool>,
    pub(super) entries: IdMap<ConnId, Entry>,
    pub(super) reservations: IdMap<u64, ResEntry>,
    pub(super) next_reservation: u64,
    /// Counted under the shard lock: no shared counter cache line on the hot path.
    pub(super) stats: PoolStats,
}

impl Shard {
    /// Drops a key's empty slots, and the key when nothing is left.
    pub(super) fn prune(&mut self, key: &ReaderKey) {
        if let Some(kp) = self.keys.get_mut(key) {
            kp.prune();
            if kp.slots.is_empty() {
                self.keys.remove(key);
            }
        }
    }
}

/// The pool index. `Send + Sync`: one per engine (or per host pool), shared by every thread.
#[derive(Debug)]
pub struct PoolIndex {
    pub(super) shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// Connection → key shard.
    dir: Box<[CachePadded<Mutex<DirShard>>]>,
    servers: RwLock<IdMap<ServerId, Arc<ServerState>>>,
    limits: AtomicU64,
    /// Keys of older profile generations are incompatible (config/profile change).
    pub(super) min_profile_generation: AtomicU64,
    /// Connections the index forgot and the host must close.
    closing: Mutex<Vec<ConnId>>,
}

const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<PoolIndex>();
};

impl Default for PoolIndex {
    fn default() -> Self {
        PoolIndex::new(PoolLimits::default())
    }
}

pub(super) fn shard_of(key: &ReaderKey) -> usize {
    let mut h = IdHasher::default();
    key.hash(&mut h);
    (h.finish() as usize) & (SHARDS - 1)
}

fn dir_of(conn: ConnId) -> usize {
    (mix(conn) as usize) & (DIR_SHARDS - 1)
}

impl PoolIndex {
    /// An empty index with these capacity limits.
    pub fn new(limits: PoolLimits) -> PoolIndex {
        PoolIndex {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
            dir: (0..DIR_SHARDS).map(|_| CachePadded::default()).collect(),
            servers: RwLock::default(),
            limits: AtomicU64::new(limits.pack()),
            min_profile_generation: AtomicU64::new(0),
            closing: Mutex::default(),
        }
    }

    /// The capacity limits now in force.
    pub fn limits(&self) -> PoolLimits {
        PoolLimits::unpack(self.limits.load(Ordering::Acquire))
    }

    /// New limits apply to later reservations and to publishes of earlier ones; open
    /// connections over a lowered limit stay until the host removes them.
    pub fn set_limits(&self, limits: PoolLimits) {
        self.limits.store(limits.pack(), Ordering::Release);
    }

    pub(super) fn shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i].lock()
    }

    pub(super) fn server_state(&self, server: ServerId) -> Arc<ServerState> {
        if let Some(s) = self.servers.read().get(&server) {
            return Arc::clone(s);
        }
        Arc::clone(self.servers.write().entry(server).or_default())
    }

    fn dir_get(&self, conn: ConnId) -> Option<usize> {
        self.dir[dir_of(conn)]
            .lock()
            .get(&conn)
            .map(|&s| usize::from(s))
    }

    /// Records `conn` → `shard` unless `conn` is already known (one check-and-insert, so two
    /// publishes of the same id in different shards cannot both succeed).
    pub(super) fn dir_try_insert(&self, conn: ConnId, shard: usize) -> bool {
        match self.dir[dir_of(conn)].lock().entry(conn) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(shard as u8);
                true
            }
        }
    }

    pub(super) fn dir_remove(&self, conn: ConnId) {
        self.dir[dir_of(conn)].lock().remove(&conn);
    }

    /// P-9: an idle connection whose key equals `key` exactly, from the `preferred` servers in
    /// order, then from any server (lowest id first). Clean connections are preferred; one that
    /// still carries an XID import is handed out only with `needs_reset = true`.
    pub fn checkout(&self, key: &ReaderKey, preferred: &[ServerId]) -> Option<Checkout> {
        self.take(key, preferred, true)
    }

    /// Like [`PoolIndex::checkout`], but only from the `servers` given (e.g. the reader R-2
    /// chose).
    pub fn checkout_from(&self, key: &ReaderKey, servers: &[ServerId]) -> Option<Checkout> {
        self.take(key, servers, false)
    }

    fn take(&self, key: &ReaderKey, preferred: &[ServerId], fallback: bool) -> Option<Checkout> {
        let stale = key.profile_generation < self.min_profile_generation.load(Ordering::Acquire);
        let mut guard = self.shard(shard_of(key));
        let sh = &mut *guard;
        let conn = if stale {
            None
        } else {
            sh.keys
                .get_mut(key)
                .and_then(|kp| kp.pop(preferred, fallback))
        };
        let Some(conn) = conn else {
            sh.stats.misses += 1;
            return None;
        };
        let e = sh.entries.get_mut(&conn)?;
        // The only place a connection leaves the idle state: the reset flag comes from the
        // connection's own state, not from which list it was found in.
        let needs_reset = matches!(e.state, ConnState::Idle { dirty: true });
        e.state = ConnState::InUse {
            dirty: false,
            retired: false,
        };
        sh.stats.hits += 1;
        sh.stats.reset_handouts += u64::from(needs_reset);
        Some(Checkout {
            conn,
            server: e.server,
            needs_reset,
        })
    }

    /// Returns a checked-out connection. `dirty`: this use left an XID import on it (a
    /// [`PoolIndex::mark_dirty`] during the use counts too). Only a handout with `needs_reset`
    /// clears that state.
    pub fn checkin(&self, conn: ConnId, dirty: bool) -> Result<CheckinOutcome, PoolError> {
        let si = self.dir_get(conn).ok_or(PoolError::UnknownConnection)?;
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let e = sh
            .entries
            .get_mut(&conn)
            .ok_or(PoolError::UnknownConnection)?;
        let ConnState::InUse {
            dirty: marked,
            retired,
        } = e.state
        else {
            return Err(PoolError::NotInUse);
        };
        let (key, server) = (e.key, e.server);
        let dirty = dirty || marked;
        if retired {
            sh.entries.remove(&conn);
        } else {
            e.state = ConnState::Idle { dirty };
        }
        let Some(slot) = sh.keys.get_mut(&key).and_then(|kp| kp.slot_mut(server)) else {
            debug_assert!(false, "a connection's slot exists while it does");
            return Err(PoolError::UnknownConnection);
        };
        slot.in_use -= 1;
        if retired {
            slot.state.close(1);
            sh.prune(&key);
            sh.stats.closed += 1;
            self.dir_remove(conn);
            Ok(CheckinOutcome::Close)
        } else {
            slot.list(conn, dirty);
            Ok(CheckinOutcome::Pooled)
        }
    }

    /// Forgets a connection (the host closed it or it broke), idle or in use. Returns its
    /// server.
    pub fn remove(&self, conn: ConnId) -> Result<ServerId, PoolError> {
        let si = self.dir_get(conn).ok_or(PoolError::UnknownConnection)?;
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let e = sh
            .entries
            .remove(&conn)
            .ok_or(PoolError::UnknownConnection)?;
        if let Some(slot) = sh.keys.get_mut(&e.key).and_then(|kp| kp.slot_mut(e.server)) {
            match e.state {
                ConnState::Idle { dirty } => slot.unlist(conn, dirty),
                ConnState::InUse { .. } => slot.in_use -= 1,
            }
            slot.state.close(1);
        }
        sh.prune(&e.key);
        self.dir_remove(conn);
        Ok(e.server)
    }

    /// The connection carries an XID import (P-7): it is handed out again only with
    /// `needs_reset`. Idle or in use.
    pub fn mark_dirty(&self, conn: ConnId) -> Result<(), PoolError> {
        let si = self.dir_get(conn).ok_or(PoolError::UnknownConnection)?;
        let mut guard = self.shard(si);
        let sh = &mut *guard;
        let e = sh
            .entries
            .get_mut(&conn)
            .ok_or(PoolError::UnknownConnection)?;
        match e.state {
            ConnState::Idle { dirty: true } => {}
            ConnState::Idle { dirty: false } => {
                e.state = ConnState::Idle { dirty: true };
                if let Some(slot) = sh.keys.get_mut(&e.key).and_then(|kp| kp.slot_mut(e.server)) {
                    slot.unlist(conn, false);
                    slot.list(conn, true);
                }
            }
            ConnState::InUse { retired, .. } => {
                e.state = ConnState::InUse {
                    dirty: true,
                    retired,
                }
            }
        }
        Ok(())
    }

    /// The server left the topology: its idle connections are forgotten and queued for the
    /// host to close ([`PoolIndex::take_closed`]), those in use are closed at checkin, and
    /// reservations taken before now are refused at publish. Returns how many were queued.
    pub fn remove_server(&self, server: ServerId) -> usize {
        // Bump first: a publish that does not see the bump lands before the scan below. A
        // server the index never saw has no connections or reservations to affect.
        let Some(state) = self.servers.read().get(&server).cloned() else {
            return 0;
        };
        state.epoch.fetch_add(1, Ordering::AcqRel);
        self.retire(|_, s| s == server)
    }

    /// A configuration or profile change (P-9, §8): every connection whose key has a
    /// `profile_generation` older than `generation` is incompatible from now on — never checked
    /// out again; idle ones are queued for closing, in-use ones closed at checkin; reservations
    /// of such keys are refused. Returns how many were queued.
    pub fn invalidate_before(&self, generation: u64) -> usize {
        self.min_profile_generation
            .fetch_max(generation, Ordering::AcqRel);
        self.retire(|k, _| k.profile_generation < generation)
    }

    fn retire(&self, matches: impl Fn(&ReaderKey, ServerId) -> bool) -> usize {
        let mut close = Vec::new();
        let mut pruned = Vec::new();
        for i in 0..SHARDS {
            let mut guard = self.shard(i);
            let sh = &mut *guard;
            let from = close.len();
            pruned.clear();
            for (key, kp) in sh.keys.iter_mut() {
                for slot in kp.slots.iter_mut().filter(|s| matches(key, s.server)) {
                    let n = slot.clean.len() + slot.dirty.len();
                    close.extend(slot.clean.drain(..).chain(slot.dirty.drain(..)));
                    slot.state.close(n as u64);
                    pruned.push(*key);
                }
            }
            for key in &pruned {
                sh.prune(key);
            }
            for &conn in &close[from..] {
                sh.entries.remove(&conn);
                self.dir_remove(conn);
            }
            sh.stats.closed += (close.len() - from) as u64;
            for e in sh.entries.values_mut() {
                if let ConnState::InUse { dirty, .. } = e.state {
                    if matches(&e.key, e.server) {
                        e.state = ConnState::InUse {
                            dirty,
                            retired: true,
                        };
                    }
                }
            }
        }
        close.sort_unstable();
        let n = close.len();
        self.closing.lock().extend_from_slice(&close);
        n
    }

    /// Takes the connections the index has forgotten and the host must close.
    pub fn take_closed(&self) -> Vec<ConnId> {
        std::mem::take(&mut *self.closing.lock())
    }

    /// Moves up to `out.len()` connections to close into `out`; returns how many.
    pub fn take_closed_into(&self, out: &mut [ConnId]) -> usize {
        let mut q = self.closing.lock();
        let n = out.len().min(q.len());
        for (o, c) in out.iter_mut().zip(q.drain(..n)) {
            *o = c;
        }
        n
    }

    /// Counts of one (server, key).
    pub fn slot_counts(&self, server: ServerId, key: &ReaderKey) -> PoolCounts {
        let mut sh = self.shard(shard_of(key));
        sh.keys
            .get_mut(key)
            .and_then(|kp| kp.slot_mut(server))
            .map(|s| s.counts())
            .unwrap_or_default()
    }

    /// Counts of one key over all servers.
    pub fn key_counts(&self, key: &ReaderKey) -> PoolCounts {
        let sh = self.shard(shard_of(key));
        let mut c = PoolCounts::default();
        if let Some(kp) = sh.keys.get(key) {
            for s in &kp.slots {
                c.add(s.counts());
            }
        }
        c
    }

    /// Counts of one server over all keys (visits every shard: for stats, not the hot path).
    pub fn server_counts(&self, server: ServerId) -> PoolCounts {
        let mut c = PoolCounts::default();
        for i in 0..SHARDS {
            let sh = self.shard(i);
            for kp in sh.keys.values() {
                for s in kp.slots.iter().filter(|s| s.server == server) {
                    c.add(s.counts());
                }
            }
        }
        c
    }

    /// The index's counters so far, summed over its shards.
    pub fn stats(&self) -> PoolStats {
        let mut t = PoolStats::default();
        for i in 0..SHARDS {
            t.add(&self.shard(i).stats);
        }
        t
    }

    /// Checks every internal invariant (lists match states, counts match entries, per-server
    /// totals match slots, the directory matches the shards). Meaningful when no other thread
    /// is using the index; for tests.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        let mut per_server: IdMap<ServerId, (u64, u64)> = IdMap::default();
        let mut entries = 0usize;
        for i in 0..SHARDS {
            let sh = self.shard(i);
            entries += sh.entries.len();
            for (key, kp) in &sh.keys {
                if shard_of(key) != i {
                    return Err(format!("key {key:?} in shard {i}"));
                }
                for s in &kp.slots {
                    if s.is_empty() {
                        return Err(format!("empty slot {} of {key:?} kept", s.server));
                    }
                    for (list, dirty) in [(&s.clean, false), (&s.dirty, true)] {
                        for c in list {
                            match sh.entries.get(c) {
                                Some(e)
                                    if e.key == *key
                                        && e.server == s.server
                                        && e.state == ConnState::Idle { dirty } => {}
                                other => {
                                    return Err(format!("listed {c} (dirty {dirty}) is {other:?}"))
                                }
                            }
                        }
                    }
                    let in_use = sh
                        .entries
                        .values()
                        .filter(|e| {
                            e.key == *key
                                && e.server == s.server
                                && matches!(e.state, ConnState::InUse { .. })
                        })
                        .count();
                    let reserved = sh
                        .reservations
                        .values()
                        .filter(|r| r.key == *key && r.server == s.server)
                        .count();
                    if in_use != s.in_use as usize || reserved != s.reserved as usize {
                        return Err(format!("slot {} of {key:?}: counts drifted", s.server));
                    }
                    let t = per_server.entry(s.server).or_default();
                    t.0 += u64::from(s.open());
                    t.1 += u64::from(s.reserved);
                }
            }
            for (c, e) in &sh.entries {
                let listed = sh
                    .keys
                    .get(&e.key)
                    .and_then(|kp| kp.slots.iter().find(|s| s.server == e.server))
                    .map(|s| s.clean.contains(c) || s.dirty.contains(c));
                let ok = match e.state {
                    ConnState::Idle { .. } => listed == Some(true),
                    ConnState::InUse { .. } => listed == Some(false),
                };
                if !ok {
                    return Err(format!("connection {c} {e:?} listed {listed:?}"));
                }
                if self.dir_get(*c) != Some(i) {
                    return Err(format!("directory disagrees about {c}"));
                }
            }
        }
        let dir: usize = self.dir.iter().map(|d| d.lock().len()).sum();
        if dir != entries {
            return Err(format!("directory has {dir} connections, shards {entries}"));
        }
        for (server, st) in self.servers.read().iter() {
            let (open, reserved) = st.counts();
            let want = per_server.get(server).copied().unwrap_or_default();
            if (u64::from(open), u64::from(reserved)) != want {
                return Err(format!(
                    "server {server}: totals ({open}, {reserved}), slots {want:?}"
                ));
            }
        }
        Ok(())
    }
}
