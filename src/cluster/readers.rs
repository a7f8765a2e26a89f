//! The engine's view of reader servers (SPEC R-1, R-1a, R-1b, R-2): hostgroup, health, what is
//! known of each one's replay position (see `health` for the rules), whether it is held out after
//! consecutive failures, whether it can wait for a position, and how many statements each is
//! serving.
//!
//! Shared by every host thread, and on the query path of every statement, so it is built for
//! many readers and many threads at once:
//!
//! - **Topology** (which servers exist, in which hostgroup) is an immutable `Topology` snapshot
//!   — all readers sorted by id, plus each hostgroup's members — rebuilt only when a server is
//!   added, moved or removed. It sits behind a [`ShardedLock`]: a reader takes the read lock of
//!   its own thread's shard (no cache line shared with other threads); a topology writer builds
//!   the new snapshot *outside* that lock and only swaps a pointer under it.
//! - **Per-reader state** lives in atomics on the reader's own cache line: health, the hold-out
//!   flag, wait support, the active count, and the evidence `(generation, lsn, time, outage,
//!   failures …)` under a per-reader sequence lock, so it is always read as one consistent state
//!   (an LSN of one generation is never paired with another generation, a position never with
//!   an older outage) while readers never block writers.
//! - **Choice** (R-2) is one pass over the hostgroup's members with no allocation: it keeps the
//!   two members with the smallest salted hashes in each preference tier (a uniformly random
//!   pair, by rendezvous hashing), then takes the less loaded of the two (power of two choices).
//!   Tiers, best first: known to have reached the target; able to wait for it; the rest.
//! - **Time.** The registry never reads a clock: every input that carries a host time moves a
//!   watermark (the latest host time seen), which dates the inputs that carry none
//!   ([`Readers::set_health`]) conservatively.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::health::{Sampled, SeqState, State};
use crate::protocol::Lsn;

pub use super::health::{backoff_ms, BACKOFF_BASE_MS, BACKOFF_CAP_MS};
pub use crate::ids::{Hostgroup, ServerId};

#[derive(Debug)]
struct Reader {
    healthy: AtomicBool,
    /// Mirrors the state's hold-out flag (read on every choice without the sequence lock).
    held_out: AtomicBool,
    /// The reader refused the wait statements (F-1): it gets no more waits.
    no_wait: AtomicBool,
    /// `server_version_num` as the host reported it (0: unknown).
    version: AtomicU32,
    state: SeqState,
    /// Statements currently served (for R-2's "less loaded").
    active: AtomicU32,
}

impl Reader {
    fn new(state: State) -> Reader {
        Reader {
            healthy: AtomicBool::new(true),
            held_out: AtomicBool::new(false),
            no_wait: AtomicBool::new(false),
            version: AtomicU32::new(0),
            state: SeqState::new(state),
            active: AtomicU32::new(0),
        }
    }

    /// Healthy and not held out (R-1b): a candidate for reader choice and a valid pin.
    fn usable(&self) -> bool {
        self.healthy.load(Ordering::Relaxed) & !self.held_out.load(Ordering::Relaxed)
    }

    /// Applies `f` to the state under its lock and mirrors the hold-out flag.
    fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.state.update(|s| {
            let r = f(s);
            self.held_out.store(s.held_out, Ordering::Relaxed);
            r
        })
    }

    /// R-2's load count: a statement starts here.
    fn begin_use(&self) {
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    /// A statement here ended.
    fn end_use(&self) {
        let _ = self
            .active
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| a.checked_sub(1));
    }

    /// R-1a: a replay position reported on an RFQ (see [`Readers::observe_rfq`]).
    fn observe_rfq(&self, generation: u64, lsn: Lsn, sent_at_ms: u64) {
        // Most RFQs of a busy reader change nothing: decide on a copy first.
        if !self.state.load().rfq(generation, lsn.0, sent_at_ms) {
            return;
        }
        self.update(|s| s.rfq(generation, lsn.0, sent_at_ms));
    }

    /// R-1b: it answered a statement.
    fn answered(&self) {
        if self.state.load().failures != 0 {
            self.update(State::answered);
        }
    }

    fn can_wait(&self, waits: Waits) -> bool {
        !self.no_wait.load(Ordering::Relaxed)
            && match waits {
                Waits::Never => false,
                Waits::Bounded => true,
                Waits::FromVersion(v) => self.version.load(Ordering::Relaxed) >= v,
            }
    }
}

/// One reader in a topology snapshot.
#[derive(Clone, Debug)]
struct Member {
    server: ServerId,
    hostgroup: Hostgroup,
    /// `mix(server)`, computed once: choice only folds the request's salt into it.
    hash: u64,
    /// On its own cache line: active counts and samples of different readers never share one.
    reader: Arc<CachePadded<Reader>>,
}

/// An immutable view of which readers exist and where; replaced whole on every change.
#[derive(Debug, Default)]
struct Topology {
    /// Every reader, sorted by server id.
    all: Vec<Member>,
    /// Each hostgroup with its members (sorted by server id), sorted by hostgroup.
    groups: Vec<(Hostgroup, Vec<Member>)>,
}

impl Topology {
    fn build(mut all: Vec<Member>) -> Topology {
        all.sort_by_key(|m| m.server);
        let mut by_group = all.clone();
        // Stable: members stay in server order within a group.
        by_group.sort_by_key(|m| m.hostgroup);
        let mut groups: Vec<(Hostgroup, Vec<Member>)> = Vec::new();
        for m in by_group {
            match groups.last_mut() {
                Some((g, members)) if *g == m.hostgroup => members.push(m),
                _ => groups.push((m.hostgroup, vec![m])),
            }
        }
        Topology { all, groups }
    }

    fn get(&self, server: ServerId) -> Option<&Member> {
        self.all
            .binary_search_by_key(&server, |m| m.server)
            .ok()
            .map(|i| &self.all[i])
    }

    fn group(&self, hostgroup: Hostgroup) -> &[Member] {
        match self.groups.binary_search_by_key(&hostgroup, |(g, _)| *g) {
            Ok(i) => &self.groups[i].1,
            Err(_) => &[],
        }
    }
}

/// What the engine knows about one reader, at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderSnapshot {
    pub server: ServerId,
    pub hostgroup: Hostgroup,
    pub healthy: bool,
    /// The known replay position (`Lsn::ZERO` when none is known: see `known`).
    pub replay_lsn: Lsn,
    /// Whether a position is known (R-1a: none after an outage until newer evidence).
    pub known: bool,
    /// When the evidence for `replay_lsn` was taken.
    pub sample_at_ms: u64,
    /// When the latest monitor sample's query was sent.
    pub last_sample_at_ms: Option<u64>,
    /// The latest outage (R-1a).
    pub outage_at_ms: Option<u64>,
    pub generation: u64,
    /// Consecutive failures (R-1b), and whether they hold the reader out of choice.
    pub failures: u32,
    pub held_out: bool,
    /// R-1b's back-off: no new connection before this host time (`None`: any time).
    pub retry_after_ms: Option<u64>,
    pub active: u32,
}

/// Which readers can wait for a position (W-7), for a reader hostgroup's dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waits {
    /// None (polardb: its wait has no timeout).
    Never,
    /// Every reader that has not refused the wait statements (awide).
    Bounded,
    /// Readers reporting at least this `server_version_num` that have not refused the wait
    /// statement (stock PostgreSQL 19's `WAIT FOR LSN`).
    FromVersion(u32),
}

/// A request for R-2's reader choice.
#[derive(Clone, Copy, Debug)]
pub struct ChoiceRequest<'a> {
    pub hostgroup: Hostgroup,
    /// The writer generation the target belongs to: samples of another generation are unknown.
    pub generation: u64,
    /// The LSN the read needs; `Lsn::ZERO` means any usable reader is caught up.
    pub target: Lsn,
    pub now_ms: u64,
    /// Samples older than this are not used to skip a wait (`reader_lsn_max_age_ms`).
    pub max_age_ms: u64,
    /// Which readers can wait for the target when none is known to have reached it.
    pub waits: Waits,
    /// Readers excluded for this request (they just failed it).
    pub exclude: &'a [ServerId],
    /// Mixed into tie-breaks so choices are deterministic given the inputs yet spread load.
    pub salt: u64,
}

/// The chosen reader: whether it is known (fresh evidence) to have replayed the target, and
/// whether it can wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub server: ServerId,
    pub caught_up: bool,
    pub can_wait: bool,
}

/// What a report changed for a reader (for the engine's counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The report was about a known reader.
    pub found: bool,
    /// It held the reader out just now (R-1b).
    pub held_out: bool,
    /// It let a held-out reader back in (R-1b).
    pub back_in: bool,
    /// A sample was taken at or before the latest outage: not used (R-1a).
    pub before_outage: bool,
    /// The report was an outage (R-1a).
    pub outage: bool,
}

/// One reader's live state as a holder (a session's reader connection) last found it: the
/// registry's per-reader operations through it skip the topology lock while the topology has
/// not changed since (same `epoch`), and look the reader up again when it has. So they act on
/// exactly the reader a lookup by server id would find.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReaderRef {
    epoch: u64,
    server: ServerId,
    /// `None`: no such reader (or never looked up: epoch 0 is never current).
    reader: Option<Arc<CachePadded<Reader>>>,
}

/// The reader registry. `Send + Sync`: one per engine, shared by every host thread.
pub struct Readers {
    topology: ShardedLock<Arc<Topology>>,
    /// Bumped after every topology swap (starts at 1): a [`ReaderRef`] taken at this epoch is
    /// still what a lookup would find.
    epoch: AtomicU64,
    /// Serializes topology writers (so each rebuild starts from the latest snapshot). Readers of
    /// the topology never take it.
    writer: Mutex<()>,
    /// One more than the latest host time any input carried (0: none yet).
    clock: AtomicU64,
}

const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Readers>();
};

impl Default for Readers {
    fn default() -> Readers {
        Readers {
            topology: ShardedLock::new(Arc::new(Topology::default())),
            epoch: AtomicU64::new(1),
            writer: Mutex::new(()),
            clock: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("readers", &self.all())
            .finish()
    }
}

/// splitmix64's finalizer: deterministic and well spread (no per-process seed).
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// One 64×64→128-bit multiply, folded: a cheap, well-spread combination of two mixed values
/// (the per-member part of choice's hashing).
fn fold_mul(x: u64, k: u64) -> u64 {
    let m = u128::from(x) * u128::from(k);
    (m as u64) ^ ((m >> 64) as u64)
}

/// The two sampled candidates of one preference tier: the members with the smallest and
/// second-smallest salted hash. For well-spread hashes that pair is a uniformly random pair of
/// distinct members (rendezvous hashing: stable when unrelated members come and go).
#[derive(Clone, Copy)]
struct Tier {
    first: (u64, ServerId, u32),
    second: (u64, ServerId, u32),
}

impl Tier {
    const EMPTY: Tier = Tier {
        first: (u64::MAX, 0, 0),
        second: (u64::MAX, 0, 0),
    };

    fn offer(&mut self, hash: u64, server: ServerId, active: u32) {
        // A new minimum is rare after the first few members: these branches predict well.
        if hash < self.first.0 {
            self.second = self.first;
            self.first = (hash, server, active);
        } else if hash < self.second.0 {
            self.second = (hash, server, active);
        }
    }

    /// Power of two choices: the less loaded of the two samples; on equal load the first.
    fn pick(&self) -> Option<ServerId> {
        let (h1, s1, a1) = self.first;
        let (h2, s2, a2) = self.second;
        if h1 == u64::MAX {
            return None;
        }
        Some(if h2 != u64::MAX && a2 < a1 { s2 } else { s1 })
    }
}

impl Readers {
    pub fn new() -> Readers {
        Readers::default()
    }

    /// The current topology, under this thread's shard of the read lock.
    fn read(&self) -> ShardedLockReadGuard<'_, Arc<Topology>> {
        // A poisoned lock can only come from a panic while swapping a pointer, which cannot
        // happen; the snapshot is immutable anyway.
        self.topology
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current(&self) -> Arc<Topology> {
        Arc::clone(&self.read())
    }

    /// Rebuilds the topology from `members` (outside the topology lock) and swaps it in.
    fn publish(&self, members: Vec<Member>) {
        let next = Arc::new(Topology::build(members));
        let old = {
            let mut w = self
                .topology
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            std::mem::replace(&mut *w, next)
        };
        // After the swap: whoever sees the new epoch finds the new topology under the lock.
        self.epoch.fetch_add(1, Ordering::Release);
        drop(old); // outside the lock
    }

    /// Moves the watermark to `t` (the latest host time seen). On every RFQ: a plain load
    /// unless the time is new (at most one store per host millisecond).
    fn tick(&self, t: u64) {
        let t = t.saturating_add(1);
        if t > self.clock.load(Ordering::Relaxed) {
            self.clock.fetch_max(t, Ordering::Relaxed);
        }
    }

    /// The latest host time any input carried.
    pub fn clock(&self) -> Option<u64> {
        self.clock.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Adds a reader (healthy, nothing known) or moves an existing one to `hostgroup` (keeping
    /// what is known of it). A reader added again after removal knows nothing from before: its
    /// evidence must be newer than the latest host time the registry saw.
    pub fn upsert(&self, server: ServerId, hostgroup: Hostgroup) {
        let _w = self.writer.lock();
        let cur = self.current();
        let mut members = cur.all.clone();
        match members.binary_search_by_key(&server, |m| m.server) {
            Ok(i) if members[i].hostgroup == hostgroup => return,
            Ok(i) => members[i].hostgroup = hostgroup,
            Err(i) => {
                let reader = Reader::new(State::new(self.clock()));
                members.insert(
                    i,
                    Member {
                        server,
                        hostgroup,
                        hash: mix(u64::from(server)),
                        reader: Arc::new(CachePadded::new(reader)),
                    },
                );
            }
        }
        self.publish(members);
    }

    pub fn remove(&self, server: ServerId) -> bool {
        let _w = self.writer.lock();
        let cur = self.current();
        let Ok(i) = cur.all.binary_search_by_key(&server, |m| m.server) else {
            return false;
        };
        let mut members = cur.all.clone();
        members.remove(i);
        self.publish(members);
        true
    }

    /// Runs `f` on the reader's live state, if it exists.
    fn with<T>(&self, server: ServerId, f: impl FnOnce(&Member) -> T) -> Option<T> {
        self.read().get(server).map(f)
    }

    /// Runs `f` on the reader's live state, if it exists, through `r`: without the topology
    /// lock when `r` was last refreshed for `server` at the current epoch; otherwise `r` is
    /// refreshed first (one lookup, as [`Readers::with`]).
    fn via<T>(
        &self,
        r: &mut ReaderRef,
        server: ServerId,
        f: impl FnOnce(&Reader) -> T,
    ) -> Option<T> {
        // Read before the lookup: a swap in between leaves `r` one epoch behind (looked up
        // again next time), never ahead of what it holds.
        let epoch = self.epoch.load(Ordering::Acquire);
        if r.epoch != epoch || r.server != server {
            r.reader = self.with(server, |m| Arc::clone(&m.reader));
            r.epoch = epoch;
            r.server = server;
        }
        r.reader.as_deref().map(|c| f(c))
    }

    /// The host's health verdict, dated by the watermark (the latest host time seen). Prefer
    /// [`Readers::set_health_at`]. See there.
    pub fn set_health(&self, server: ServerId, healthy: bool) -> bool {
        let at = self.clock().unwrap_or(0);
        self.set_health_at(server, healthy, at).found
    }

    /// The host's health verdict at host time `now_ms`. R-1a: a change either way is an outage —
    /// going down, what was known no longer holds; coming back, nothing learned while it was
    /// down counts: only evidence taken after `now_ms` gives it a position again.
    pub fn set_health_at(&self, server: ServerId, healthy: bool, now_ms: u64) -> Change {
        self.tick(now_ms);
        self.with(server, |m| {
            let was = m.reader.healthy.swap(healthy, Ordering::Relaxed);
            if was != healthy {
                m.reader.update(|s| s.outage(now_ms));
            }
            Change {
                found: true,
                outage: was != healthy,
                ..Change::default()
            }
        })
        .unwrap_or_default()
    }

    /// R-1a: a monitor sample of `lsn` whose query was sent at host time `at_ms`, under writer
    /// `generation`. It replaces the known position (it may lower it) unless it was taken at or
    /// before the reader's latest outage; a sample older than the latest one is ignored. R-1b: a
    /// sample taken after the latest failure lets a held-out reader back in.
    pub fn observe_sample(
        &self,
        server: ServerId,
        generation: u64,
        lsn: Lsn,
        at_ms: u64,
    ) -> Change {
        self.tick(at_ms);
        self.with(server, |m| {
            let r = m.reader.update(|s| s.sample(generation, lsn.0, at_ms));
            Change {
                found: true,
                back_in: r == Sampled::Accepted { back_in: true },
                before_outage: r == Sampled::BeforeOutage,
                ..Change::default()
            }
        })
        .unwrap_or_default()
    }

    /// The older name of [`Readers::observe_sample`]; returns whether the reader exists.
    pub fn observe_replay(&self, server: ServerId, generation: u64, lsn: Lsn, at_ms: u64) -> bool {
        self.observe_sample(server, generation, lsn, at_ms).found
    }

    /// R-1a: a replay position the reader reported on the RFQ ending a statement sent at host
    /// time `sent_at_ms`. It may raise the known position only when newer than the latest
    /// sample and the latest outage; it never lowers it. Lock-free when it changes nothing.
    pub fn observe_rfq(&self, server: ServerId, generation: u64, lsn: Lsn, sent_at_ms: u64) {
        self.tick(sent_at_ms);
        self.with(server, |m| {
            m.reader.observe_rfq(generation, lsn, sent_at_ms)
        });
    }

    /// [`Readers::observe_rfq`] through a held [`ReaderRef`].
    pub(crate) fn observe_rfq_via(
        &self,
        r: &mut ReaderRef,
        server: ServerId,
        generation: u64,
        lsn: Lsn,
        sent_at_ms: u64,
    ) {
        self.tick(sent_at_ms);
        self.via(r, server, |reader| {
            reader.observe_rfq(generation, lsn, sent_at_ms)
        });
    }

    /// R-1a: the reader was out at host time `now_ms` (a lost or refused connection, a failed
    /// monitor, a restart the host noticed): no known position until newer evidence.
    pub fn outage(&self, server: ServerId, now_ms: u64) -> bool {
        self.tick(now_ms);
        self.with(server, |m| m.reader.update(|s| s.outage(now_ms)))
            .is_some()
    }

    /// R-1b: a failure of this reader at host time `now_ms`; at `threshold` consecutive ones it
    /// is held out of choice (0: never).
    pub fn failed(&self, server: ServerId, now_ms: u64, threshold: u32) -> Change {
        self.failed_since(server, None, now_ms, threshold)
    }

    /// [`Self::failed`] of a connect attempt that began at host time `began`, when known
    /// (R-1b: one begun after a monitor sample showed the server answering, that failed all the
    /// same, stops samples from lifting the back-off).
    pub fn failed_since(
        &self,
        server: ServerId,
        began: Option<u64>,
        now_ms: u64,
        threshold: u32,
    ) -> Change {
        self.tick(now_ms);
        self.with(server, |m| Change {
            found: true,
            held_out: m.reader.update(|s| s.failure(now_ms, threshold, began)),
            ..Change::default()
        })
        .unwrap_or_default()
    }

    /// R-1b: the reader answered a statement: its consecutive failures restart from zero.
    pub fn answered(&self, server: ServerId) {
        self.with(server, |m| m.reader.answered());
    }

    /// [`Readers::answered`] through a held [`ReaderRef`].
    pub(crate) fn answered_via(&self, r: &mut ReaderRef, server: ServerId) {
        self.via(r, server, Reader::answered);
    }

    /// R-1b: whether the host's monitor sampled this reader with a query sent at or after
    /// `at_ms` (the reader answered something since then).
    pub fn sampled_since(&self, server: ServerId, at_ms: u64) -> bool {
        self.last_sample_at(server).is_some_and(|t| t >= at_ms)
    }

    /// When the latest monitor sample's query was sent.
    pub fn last_sample_at(&self, server: ServerId) -> Option<u64> {
        self.with(server, |m| m.reader.state.load().last_sample)
            .flatten()
    }

    /// R-1b: the earliest host time at which the host should open a new connection to `server`
    /// (pool refills, warmups, a connection for `AcquireReader`): `None` when it may connect any
    /// time — no failure since its last answer, or its monitor answered a query sent after the
    /// latest failure. Otherwise the latest failure plus a back-off that doubles with each
    /// consecutive failure ([`BACKOFF_BASE_MS`] … [`BACKOFF_CAP_MS`]).
    pub fn retry_after(&self, server: ServerId) -> Option<u64> {
        self.with(server, |m| m.reader.state.load().retry_after())
            .flatten()
    }

    /// R-1b: whether `server` is held out of reader choice.
    pub fn is_held_out(&self, server: ServerId) -> bool {
        self.with(server, |m| m.reader.held_out.load(Ordering::Relaxed))
            .unwrap_or(false)
    }

    /// Whether `server` refused the wait statements, and its `server_version_num` (W-7).
    pub fn set_wait_support(&self, server: ServerId, refused: bool, version: Option<u32>) {
        self.with(server, |m| {
            m.reader.no_wait.store(refused, Ordering::Relaxed);
            if let Some(v) = version {
                m.reader.version.store(v, Ordering::Relaxed);
            }
        });
    }

    /// Whether `server` can wait for a position under `waits` (W-7).
    pub fn can_wait(&self, server: ServerId, waits: Waits) -> bool {
        self.with(server, |m| m.reader.can_wait(waits))
            .unwrap_or(false)
    }

    pub fn snapshot(&self, server: ServerId) -> Option<ReaderSnapshot> {
        self.with(server, Self::snap)
    }

    fn snap(m: &Member) -> ReaderSnapshot {
        let s = m.reader.state.load();
        ReaderSnapshot {
            server: m.server,
            hostgroup: m.hostgroup,
            healthy: m.reader.healthy.load(Ordering::Relaxed),
            replay_lsn: Lsn(s.position().unwrap_or(0)),
            known: s.known,
            sample_at_ms: s.at_ms,
            last_sample_at_ms: s.last_sample,
            outage_at_ms: s.outage,
            generation: s.generation,
            failures: s.failures,
            held_out: s.held_out,
            retry_after_ms: s.retry_after(),
            active: m.reader.active.load(Ordering::Relaxed),
        }
    }

    /// All readers, ordered by server id.
    pub fn all(&self) -> Vec<ReaderSnapshot> {
        // Copy the snapshot pointer, then allocate outside the lock.
        self.current().all.iter().map(Self::snap).collect()
    }

    /// Whether `server` is a usable reader of `hostgroup` known (fresh evidence of `generation`,
    /// newer than its latest outage) to have replayed `target`.
    pub fn is_caught_up(
        &self,
        server: ServerId,
        hostgroup: Hostgroup,
        generation: u64,
        target: Lsn,
        now_ms: u64,
        max_age_ms: u64,
    ) -> bool {
        self.with(server, |m| {
            m.hostgroup == hostgroup
                && m.reader.usable()
                && Self::fresh_at(m, generation, target, now_ms, max_age_ms)
        })
        .unwrap_or(false)
    }

    fn fresh_at(m: &Member, generation: u64, target: Lsn, now_ms: u64, max_age_ms: u64) -> bool {
        target.is_zero()
            || m.reader
                .state
                .load()
                .caught_up(generation, target.0, now_ms, max_age_ms)
    }

    /// Whether any usable reader of `hostgroup` is known to have replayed `target` (P-5's `'w'`
    /// exception).
    pub fn any_caught_up(
        &self,
        hostgroup: Hostgroup,
        generation: u64,
        target: Lsn,
        now_ms: u64,
        max_age_ms: u64,
    ) -> bool {
        self.read()
            .group(hostgroup)
            .iter()
            .any(|m| m.reader.usable() && Self::fresh_at(m, generation, target, now_ms, max_age_ms))
    }

    /// Whether `server` is still a usable reader of `hostgroup` (a pin stays valid): healthy and
    /// not held out.
    pub fn is_valid(&self, server: ServerId, hostgroup: Hostgroup) -> bool {
        self.with(server, |m| m.hostgroup == hostgroup && m.reader.usable())
            .unwrap_or(false)
    }

    /// among usable (healthy, not held out), non-excluded readers of the hostgroup, prefer
    /// those known to have reached the target, then those that can wait for it (so a read that
    /// needs a wait is not sent to the primary while some reader could wait), then the rest;
    /// among those equally preferred, sample two (deterministically, from `salt`) and take the
    /// one with fewer active statements (power of two choices; on equal load the first sample).
    /// Deterministic given the registry state and the request; one pass, no allocation, no lock
    /// other than this thread's shard of the topology read lock.
    pub fn choose(&self, req: &ChoiceRequest<'_>) -> Option<Choice> {
        let topology = self.read();
        let (mut caught_up, mut waitable, mut rest) = (Tier::EMPTY, Tier::EMPTY, Tier::EMPTY);
        let salt = mix(req.salt);
        for m in topology.group(req.hostgroup) {
            if !m.reader.usable() || req.exclude.contains(&m.server) {
                continue;
            }
            // Top bit cleared: u64::MAX stays free to mean "no candidate".
            let hash = fold_mul(salt ^ m.hash, 0x9e37_79b9_7f4a_7c15) >> 1;
            let active = m.reader.active.load(Ordering::Relaxed);
            if Self::fresh_at(m, req.generation, req.target, req.now_ms, req.max_age_ms) {
                caught_up.offer(hash, m.server, active);
            } else if m.reader.can_wait(req.waits) {
                waitable.offer(hash, m.server, active);
            } else {
                rest.offer(hash, m.server, active);
            }
        }
        let pick = |tier: &Tier, caught_up: bool, can_wait: bool| {
            tier.pick().map(|server| Choice {
                server,
                caught_up,
                can_wait,
            })
        };
        pick(&caught_up, true, false)
            .or_else(|| pick(&waitable, false, true))
            .or_else(|| pick(&rest, false, false))
    }

    /// A statement starts on `server` (R-2's load count).
    pub fn begin_use(&self, server: ServerId) {
        self.with(server, |m| m.reader.begin_use());
    }

    /// A statement on `server` ended.
    pub fn end_use(&self, server: ServerId) {
        self.with(server, |m| m.reader.end_use());
    }

    /// [`Readers::begin_use`] through a held [`ReaderRef`].
    pub(crate) fn begin_use_via(&self, r: &mut ReaderRef, server: ServerId) {
        self.via(r, server, Reader::begin_use);
    }

    /// [`Readers::end_use`] through a held [`ReaderRef`].
    pub(crate) fn end_use_via(&self, r: &mut ReaderRef, server: ServerId) {
        self.via(r, server, Reader::end_use);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(target: u64, exclude: &[ServerId]) -> ChoiceRequest<'_> {
        ChoiceRequest {
            hostgroup: 1,
            generation: 0,
            target: Lsn(target),
            now_ms: 1000,
            max_age_ms: 100,
            waits: Waits::Bounded,
            exclude,
            salt: 7,
        }
    }

    fn choice(server: ServerId, caught_up: bool, can_wait: bool) -> Option<Choice> {
        Some(Choice {
            server,
            caught_up,
            can_wait,
        })
    }

    #[test]
    fn r2_counts_through_a_held_ref_reach_the_reader_a_lookup_finds() {
        let r = Readers::new();
        let active = |s| r.snapshot(s).map(|x| x.active);
        r.upsert(10, 1);
        let mut h = ReaderRef::default();
        r.begin_use_via(&mut h, 10);
        assert_eq!(active(10), Some(1));
        r.end_use_via(&mut h, 10);
        assert_eq!(active(10), Some(0));
        // A hostgroup move keeps the reader (and its count).
        r.begin_use_via(&mut h, 10);
        r.upsert(10, 2);
        assert_eq!(active(10), Some(1));
        r.end_use_via(&mut h, 10);
        assert_eq!(active(10), Some(0));
        // Removed meanwhile: harmless; added again: the new reader, nothing from before.
        r.begin_use_via(&mut h, 10);
        r.remove(10);
        r.end_use_via(&mut h, 10);
        assert_eq!(active(10), None);
        r.upsert(10, 1);
        assert_eq!(active(10), Some(0));
        r.begin_use_via(&mut h, 10);
        assert_eq!(active(10), Some(1));
        r.observe_rfq_via(&mut h, 10, 0, Lsn(70), 5);
        assert!(r
            .snapshot(10)
            .is_some_and(|x| x.known && x.replay_lsn == Lsn(70)));
        // The same ref used for another server follows it.
        r.upsert(11, 1);
        r.begin_use_via(&mut h, 11);
        assert_eq!((active(10), active(11)), (Some(1), Some(1)));
        r.failed(11, 6, 0);
        assert_eq!(r.snapshot(11).map(|x| x.failures), Some(1));
        r.answered_via(&mut h, 11);
        assert_eq!(r.snapshot(11).map(|x| x.failures), Some(0));
    }

    #[test]
    fn r2_prefers_caught_up_then_less_loaded() {
        let r = Readers::new();
        r.upsert(10, 1);
        r.upsert(11, 1);
        r.upsert(12, 2);
        r.observe_replay(10, 0, Lsn(50), 990);
        r.observe_replay(11, 0, Lsn(100), 990);
        assert_eq!(r.choose(&req(80, &[])), choice(11, true, false));
        // Stale sample: not known caught up.
        let mut q = req(80, &[]);
        q.now_ms = 2000;
        assert!(!r.choose(&q).unwrap().caught_up);
        // Excluded.
        assert_eq!(r.choose(&req(80, &[11])), choice(10, false, true));
        // Less loaded among equals.
        r.begin_use(10);
        assert_eq!(r.choose(&req(0, &[])).unwrap().server, 11);
        r.end_use(10);
        r.begin_use(11);
        assert_eq!(r.choose(&req(0, &[])).unwrap().server, 10);
        // Unhealthy readers are skipped; wrong hostgroup never chosen.
        r.set_health(10, false);
        r.set_health(11, false);
        assert_eq!(r.choose(&req(0, &[])), None);
    }

    #[test]
    fn r1a_samples_replace_the_position_lower_ones_too_and_generations_reset() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.observe_replay(1, 3, Lsn(100), 10);
        // A restarted standby reports less: that is where it is now.
        r.observe_replay(1, 3, Lsn(90), 20);
        let s = r.snapshot(1).unwrap();
        assert_eq!((s.replay_lsn, s.sample_at_ms, s.known), (Lsn(90), 20, true));
        assert!(!r.is_caught_up(1, 1, 3, Lsn(100), 20, 100));
        // A sample older than the latest one, or of an older generation, changes nothing.
        r.observe_replay(1, 3, Lsn(500), 15);
        r.observe_replay(1, 2, Lsn(500), 30);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(90));
        r.observe_replay(1, 4, Lsn(5), 40);
        let s = r.snapshot(1).unwrap();
        assert_eq!((s.replay_lsn, s.generation), (Lsn(5), 4));
        assert!(!r.is_caught_up(1, 1, 3, Lsn(5), 40, 100));
        assert!(r.is_caught_up(1, 1, 4, Lsn(5), 40, 100));
    }

    #[test]
    fn r1a_rfq_positions_raise_only_when_newer_than_the_latest_sample() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.observe_sample(1, 1, Lsn(100), 50);
        // A statement sent before the sample: its RFQ says less than the sample.
        r.observe_rfq(1, 1, Lsn(400), 49);
        r.observe_rfq(1, 1, Lsn(400), 50);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(100));
        r.observe_rfq(1, 1, Lsn(400), 51);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(400));
        r.observe_rfq(1, 1, Lsn(300), 52);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(400), "never lowered");
        assert!(r.is_caught_up(1, 1, 1, Lsn(400), 60, 100));
        // The next sample replaces it.
        r.observe_sample(1, 1, Lsn(350), 60);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(350));
    }

    #[test]
    fn r1a_an_outage_clears_and_evidence_taken_before_it_never_counts() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.observe_sample(1, 1, Lsn(900), 100);
        assert!(r.is_caught_up(1, 1, 1, Lsn(900), 100, 5000));
        // A connection to it broke at 110.
        assert!(r.outage(1, 110));
        let s = r.snapshot(1).unwrap();
        assert_eq!(
            (s.known, s.replay_lsn, s.outage_at_ms),
            (false, Lsn::ZERO, Some(110))
        );
        assert!(!r.is_caught_up(1, 1, 1, Lsn(1), 120, 5000));
        // A sample and an RFQ taken before the outage, reported after it: not used.
        r.observe_sample(1, 1, Lsn(900), 105);
        r.observe_rfq(1, 1, Lsn(900), 108);
        assert!(!r.snapshot(1).unwrap().known);
        // The restarted standby, sampled after: far behind.
        r.observe_sample(1, 1, Lsn(200), 111);
        assert!(!r.is_caught_up(1, 1, 1, Lsn(900), 120, 5000));
        assert!(r.is_caught_up(1, 1, 1, Lsn(200), 120, 5000));
        // Down and back up (dated by the latest time seen, 111): both transitions are outages.
        r.set_health(1, false);
        r.set_health(1, true);
        assert!(!r.snapshot(1).unwrap().known);
        r.observe_sample(1, 1, Lsn(250), 111);
        assert!(!r.snapshot(1).unwrap().known);
        r.observe_sample(1, 1, Lsn(250), 112);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(250));
        // Removed and added again: only evidence newer than anything seen before counts.
        r.remove(1);
        r.upsert(1, 1);
        r.observe_sample(1, 1, Lsn(260), 112);
        assert!(!r.snapshot(1).unwrap().known);
        r.observe_sample(1, 1, Lsn(260), 113);
        assert!(r.snapshot(1).unwrap().known);
    }

    #[test]
    fn r1b_a_held_out_reader_is_not_chosen_until_a_later_sample() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.upsert(2, 1);
        for t in 0..2 {
            assert!(!r.failed(1, 100 + t, 3).held_out);
        }
        assert!(r.failed(1, 102, 3).held_out);
        assert!(r.is_held_out(1));
        assert!(!r.is_valid(1, 1));
        for salt in 0..50 {
            let mut q = req(0, &[]);
            q.salt = salt;
            assert_eq!(r.choose(&q).unwrap().server, 2);
        }
        r.answered(1);
        assert!(r.is_held_out(1), "an answer does not let it back in");
        let c = r.observe_sample(1, 0, Lsn(10), 102);
        assert!(
            !c.back_in && r.is_held_out(1),
            "taken at the latest failure: not after"
        );
        let c = r.observe_sample(1, 0, Lsn(10), 103);
        assert!(c.back_in && !r.is_held_out(1));
        assert!(r.is_valid(1, 1));
    }

    #[test]
    fn r1b_sampled_since_and_retry_after() {
        let r = Readers::new();
        r.upsert(1, 1);
        assert!(!r.sampled_since(1, 0));
        r.observe_sample(1, 0, Lsn(10), 500);
        assert!(r.sampled_since(1, 500));
        assert!(r.sampled_since(1, 400));
        assert!(!r.sampled_since(1, 501));
        // An outage does not erase that the monitor answered then.
        r.outage(1, 600);
        assert!(r.sampled_since(1, 500));
        assert_eq!(r.last_sample_at(1), Some(500));
        assert_eq!(r.retry_after(1), None);
        r.failed(1, 700, 3);
        assert_eq!(r.retry_after(1), Some(700 + BACKOFF_BASE_MS));
        r.failed(1, 800, 3);
        assert_eq!(r.retry_after(1), Some(800 + 2 * BACKOFF_BASE_MS));
        r.observe_sample(1, 0, Lsn(10), 801);
        assert_eq!(r.retry_after(1), None);
        assert_eq!(r.retry_after(99), None);
    }

    #[test]
    fn r2_a_reader_that_can_wait_is_preferred_to_one_that_cannot() {
        let r = Readers::new();
        for s in 1..=4 {
            r.upsert(s, 1);
        }
        // Readers 1..3 refused the wait statements; 4 is the only one that can wait.
        for s in 1..=3 {
            r.set_wait_support(s, true, None);
        }
        for _ in 0..5 {
            r.begin_use(4);
        }
        for salt in 0..50u64 {
            let mut q = req(80, &[]);
            q.salt = salt;
            assert_eq!(r.choose(&q), choice(4, false, true));
        }
        // No reader can wait under polardb: any of them, none waitable.
        let mut q = req(80, &[]);
        q.waits = Waits::Never;
        assert!(!r.choose(&q).unwrap().can_wait);
        // Stock: only readers reporting version 19 or later.
        r.set_wait_support(4, false, Some(150_008));
        r.set_wait_support(2, false, Some(190_000));
        q.waits = Waits::FromVersion(190_000);
        for salt in 0..50u64 {
            q.salt = salt;
            assert_eq!(r.choose(&q), choice(2, false, true));
        }
        assert!(r.can_wait(2, Waits::FromVersion(190_000)));
        assert!(!r.can_wait(4, Waits::FromVersion(190_000)));
        assert!(r.can_wait(4, Waits::Bounded));
        assert!(!r.can_wait(4, Waits::Never));
    }

    #[test]
    fn r2_power_of_two_never_picks_the_single_loaded_reader_and_is_deterministic() {
        let r = Readers::new();
        for s in 1..=8 {
            r.upsert(s, 1);
        }
        r.begin_use(5);
        let mut seen = std::collections::BTreeSet::new();
        for salt in 0..200u64 {
            let mut q = req(0, &[]);
            q.salt = salt;
            let c = r.choose(&q).unwrap();
            // Two distinct candidates are sampled: the one loaded reader always loses.
            assert_ne!(c.server, 5);
            assert_eq!(r.choose(&q), Some(c), "same state and request, same choice");
            seen.insert(c.server);
        }
        // The salt spreads choices over every unloaded reader.
        assert_eq!(seen.len(), 7, "{seen:?}");
    }

    #[test]
    fn r2_caught_up_tier_wins_over_load() {
        let r = Readers::new();
        for s in 1..=4 {
            r.upsert(s, 1);
        }
        r.observe_replay(3, 0, Lsn(100), 1000);
        for _ in 0..10 {
            r.begin_use(3);
        }
        for salt in 0..50u64 {
            let mut q = req(80, &[]);
            q.salt = salt;
            assert_eq!(r.choose(&q), choice(3, true, false));
        }
        let mut q = req(80, &[3]);
        q.salt = 9;
        let c = r.choose(&q).unwrap();
        assert!(!c.caught_up && c.server != 3);
    }

    #[test]
    fn r1_moving_a_reader_keeps_its_state_and_remove_forgets_it() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.observe_replay(1, 2, Lsn(70), 5);
        r.begin_use(1);
        r.upsert(1, 9);
        let s = r.snapshot(1).unwrap();
        assert_eq!((s.hostgroup, s.replay_lsn, s.active), (9, Lsn(70), 1));
        assert!(!r.is_valid(1, 1));
        assert!(r.is_valid(1, 9));
        assert_eq!(r.choose(&req(0, &[])), None);
        assert!(r.any_caught_up(9, 2, Lsn(70), 5, 100));
        assert!(r.remove(1));
        assert!(!r.remove(1));
        assert!(!r.observe_replay(1, 2, Lsn(80), 6));
        assert!(r.all().is_empty());
    }
}
