//! The engine's view of reader servers (SPEC ): hostgroup, health, the latest known replay
//! LSN with its sample time and writer generation, and how many statements each is serving.
//!
//! Shared by every host thread, and on the query path of every statement, so it is built for
//! many readers and many threads at once:
//!
//! - **Topology** (which servers exist, in which hostgroup) is an immutable [`Topology`] snapshot
//!   — all readers sorted by id, plus each hostgroup's members — rebuilt only when a server is
//!   added, moved or removed. It sits behind a [`ShardedLock`]: a reader takes the read lock of
//!   its own thread's shard (no cache line shared with other threads); a topology writer builds
//!   the new snapshot *outside* that lock and only swaps a pointer under it.
//! - **Per-reader state** lives in atomics on the reader's own cache line: health, the active
//!   count, and the replay sample `(generation, lsn, sample time)` under a per-reader sequence
//!   lock, so the three are always read as one consistent triple (an LSN of one generation is
//!   never paired with another generation) while readers never block writers.
//! - **Choice** (R-2) is one pass over the hostgroup's members with no allocation: it keeps the
//!   two members with the smallest salted hashes in each preference tier (a uniformly random
//!   pair, by rendezvous hashing), then takes the less loaded of the two (power of two choices).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard};
use crossbeam_utils::{Backoff, CachePadded};
use parking_lot::Mutex;

use crate::protocol::Lsn;

pub use crate::ids::{Hostgroup, ServerId};

/// `(generation, replay LSN, sample time)` of one reader, written under a sequence lock.
#[derive(Debug, Default)]
struct Sample {
    /// Even: stable; odd: a writer is between its stores.
    seq: AtomicU64,
    generation: AtomicU64,
    lsn: AtomicU64,
    at_ms: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SampleValue {
    generation: u64,
    lsn: u64,
    at_ms: u64,
}

impl Sample {
    /// A consistent triple; retries while a writer is mid-update (a handful of stores).
    fn load(&self) -> SampleValue {
        let backoff = Backoff::new();
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let v = SampleValue {
                    generation: self.generation.load(Ordering::Relaxed),
                    lsn: self.lsn.load(Ordering::Relaxed),
                    at_ms: self.at_ms.load(Ordering::Relaxed),
                };
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return v;
                }
            }
            backoff.snooze();
        }
    }

    /// R-1's update rule, applied atomically with respect to [`Sample::load`] and other updates.
    /// Returns false when the sample belongs to an older generation (ignored).
    fn observe(&self, generation: u64, lsn: u64, at_ms: u64) -> bool {
        // Fast path: nothing to raise (the common case for a busy reader's repeated RFQs).
        let cur = self.load();
        if generation < cur.generation {
            return false;
        }
        if generation == cur.generation && lsn <= cur.lsn && at_ms <= cur.at_ms {
            return true;
        }
        // Writer lock: make `seq` odd.
        let backoff = Backoff::new();
        let mut s = self.seq.load(Ordering::Relaxed);
        loop {
            if s & 1 == 0 {
                match self
                    .seq
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            } else {
                backoff.snooze();
                s = self.seq.load(Ordering::Relaxed);
            }
        }
        fence(Ordering::Release);
        let cur_gen = self.generation.load(Ordering::Relaxed);
        let accepted = generation >= cur_gen;
        if generation > cur_gen {
            self.generation.store(generation, Ordering::Relaxed);
            self.lsn.store(lsn, Ordering::Relaxed);
        } else if accepted && lsn > self.lsn.load(Ordering::Relaxed) {
            self.lsn.store(lsn, Ordering::Relaxed);
        }
        if accepted && at_ms > self.at_ms.load(Ordering::Relaxed) {
            self.at_ms.store(at_ms, Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
        accepted
    }
}

#[derive(Debug, Default)]
struct Reader {
    healthy: AtomicBool,
    sample: Sample,
    /// Statements currently served (for R-2's "less loaded").
    active: AtomicU32,
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
    pub replay_lsn: Lsn,
    pub sample_at_ms: u64,
    pub generation: u64,
    pub active: u32,
}

/// A request for R-2's reader choice.
#[derive(Clone, Copy, Debug)]
pub struct ChoiceRequest<'a> {
    pub hostgroup: Hostgroup,
    /// The writer generation the target belongs to: samples of another generation are unknown.
    pub generation: u64,
    /// The LSN the read needs; `Lsn::ZERO` means any healthy reader is caught up.
    pub target: Lsn,
    pub now_ms: u64,
    /// Samples older than this are not used to skip a wait (`reader_lsn_max_age_ms`).
    pub max_age_ms: u64,
    /// Readers excluded for this request (they just failed it).
    pub exclude: &'a [ServerId],
    /// Mixed into tie-breaks so choices are deterministic given the inputs yet spread load.
    pub salt: u64,
}

/// The chosen reader, and whether it is known (fresh sample) to have replayed the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub server: ServerId,
    pub caught_up: bool,
}

/// The reader registry. `Send + Sync`: one per engine, shared by every host thread.
pub struct Readers {
    topology: ShardedLock<Arc<Topology>>,
    /// Serializes topology writers (so each rebuild starts from the latest snapshot). Readers of
    /// the topology never take it.
    writer: Mutex<()>,
}

const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Readers>();
};

impl Default for Readers {
    fn default() -> Readers {
        Readers {
            topology: ShardedLock::new(Arc::new(Topology::default())),
            writer: Mutex::new(()),
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
        drop(old); // outside the lock
    }

    /// Adds a reader (healthy, no sample) or moves an existing one to `hostgroup`.
    pub fn upsert(&self, server: ServerId, hostgroup: Hostgroup) {
        let _w = self.writer.lock();
        let cur = self.current();
        let mut members = cur.all.clone();
        match members.binary_search_by_key(&server, |m| m.server) {
            Ok(i) if members[i].hostgroup == hostgroup => return,
            Ok(i) => members[i].hostgroup = hostgroup,
            Err(i) => {
                let reader = Reader {
                    healthy: AtomicBool::new(true),
                    ..Reader::default()
                };
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

    pub fn set_health(&self, server: ServerId, healthy: bool) -> bool {
        self.with(server, |m| {
            m.reader.healthy.store(healthy, Ordering::Relaxed)
        })
        .is_some()
    }

    /// Records a replay position (monitor sample or a reader's own RFQ). Within a generation the
    /// position only rises; a sample of a newer generation replaces the old one; a sample of an
    /// older generation is ignored. The sample time always moves to the newest.
    pub fn observe_replay(&self, server: ServerId, generation: u64, lsn: Lsn, at_ms: u64) -> bool {
        self.with(server, |m| {
            m.reader.sample.observe(generation, lsn.0, at_ms)
        })
        .unwrap_or(false)
    }

    pub fn snapshot(&self, server: ServerId) -> Option<ReaderSnapshot> {
        self.with(server, Self::snap)
    }

    fn snap(m: &Member) -> ReaderSnapshot {
        let s = m.reader.sample.load();
        ReaderSnapshot {
            server: m.server,
            hostgroup: m.hostgroup,
            healthy: m.reader.healthy.load(Ordering::Relaxed),
            replay_lsn: Lsn(s.lsn),
            sample_at_ms: s.at_ms,
            generation: s.generation,
            active: m.reader.active.load(Ordering::Relaxed),
        }
    }

    /// All readers, ordered by server id.
    pub fn all(&self) -> Vec<ReaderSnapshot> {
        // Copy the snapshot pointer, then allocate outside the lock.
        self.current().all.iter().map(Self::snap).collect()
    }

    /// Whether `server` is a healthy reader of `hostgroup` known (fresh sample of `generation`)
    /// to have replayed `target`.
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
                && m.reader.healthy.load(Ordering::Relaxed)
                && Self::fresh_at(m, generation, target, now_ms, max_age_ms)
        })
        .unwrap_or(false)
    }

    fn fresh_at(m: &Member, generation: u64, target: Lsn, now_ms: u64, max_age_ms: u64) -> bool {
        if target.is_zero() {
            return true;
        }
        let s = m.reader.sample.load();
        // Non-short-circuit: three cheap compares beat two unpredictable branches.
        (s.generation == generation)
            & (s.lsn >= target.0)
            & (now_ms.saturating_sub(s.at_ms) <= max_age_ms)
    }

    /// Whether any healthy reader of `hostgroup` is known to have replayed `target` (P-5's `'w'`
    /// exception).
    pub fn any_caught_up(
        &self,
        hostgroup: Hostgroup,
        generation: u64,
        target: Lsn,
        now_ms: u64,
        max_age_ms: u64,
    ) -> bool {
        self.read().group(hostgroup).iter().any(|m| {
            m.reader.healthy.load(Ordering::Relaxed)
                && Self::fresh_at(m, generation, target, now_ms, max_age_ms)
        })
    }

    /// Whether `server` is still a healthy reader of `hostgroup` (a pin stays valid).
    pub fn is_valid(&self, server: ServerId, hostgroup: Hostgroup) -> bool {
        self.with(server, |m| {
            m.hostgroup == hostgroup && m.reader.healthy.load(Ordering::Relaxed)
        })
        .unwrap_or(false)
    }

    /// among healthy, non-excluded readers of the hostgroup, prefer those known to have
    /// reached the target; among those equally preferred, sample two (deterministically, from
    /// `salt`) and take the one with fewer active statements (power of two choices; on equal
    /// load the first sample). Deterministic given the registry state and the request; one pass,
    /// no allocation, no lock other than this thread's shard of the topology read lock.
    pub fn choose(&self, req: &ChoiceRequest<'_>) -> Option<Choice> {
        let topology = self.read();
        let (mut caught_up, mut rest) = (Tier::EMPTY, Tier::EMPTY);
        let salt = mix(req.salt);
        for m in topology.group(req.hostgroup) {
            if !m.reader.healthy.load(Ordering::Relaxed) || req.exclude.contains(&m.server) {
                continue;
            }
            // Top bit cleared: u64::MAX stays free to mean "no candidate".
            let hash = fold_mul(salt ^ m.hash, 0x9e37_79b9_7f4a_7c15) >> 1;
            let active = m.reader.active.load(Ordering::Relaxed);
            if Self::fresh_at(m, req.generation, req.target, req.now_ms, req.max_age_ms) {
                caught_up.offer(hash, m.server, active);
            } else {
                rest.offer(hash, m.server, active);
            }
        }
        if let Some(server) = caught_up.pick() {
            return Some(Choice {
                server,
                caught_up: true,
            });
        }
        rest.pick().map(|server| Choice {
            server,
            caught_up: false,
        })
    }

    /// A statement starts on `server` (R-2's load count).
    /// R-1a: the reader was out (lost connection, refusal): its position is unknown until a
    /// sample taken after this.
    pub(crate) fn outage(&self, server: ServerId) {
        let _ = server;
    }

    /// R-1b: a failure of this reader.
    pub(crate) fn failed(&self, server: ServerId, now_ms: u64) {
        let _ = (server, now_ms);
    }

    /// R-1b: the reader answered.
    pub(crate) fn answered(&self, server: ServerId) {
        let _ = server;
    }

    /// R-1b: whether the host's monitor sampled this reader at or after `at_ms`.
    pub(crate) fn sampled_since(&self, server: ServerId, at_ms: u64) -> bool {
        let _ = (server, at_ms);
        false
    }

    pub fn begin_use(&self, server: ServerId) {
        self.with(server, |m| m.reader.active.fetch_add(1, Ordering::Relaxed));
    }

    /// A statement on `server` ended.
    pub fn end_use(&self, server: ServerId) {
        self.with(server, |m| {
            let _ = m
                .reader
                .active
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| a.checked_sub(1));
        });
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
            exclude,
            salt: 7,
        }
    }

    #[test]
    fn r2_prefers_caught_up_then_less_loaded() {
        let r = Readers::new();
        r.upsert(10, 1);
        r.upsert(11, 1);
        r.upsert(12, 2);
        r.observe_replay(10, 0, Lsn(50), 990);
        r.observe_replay(11, 0, Lsn(100), 990);
        assert_eq!(
            r.choose(&req(80, &[])),
            Some(Choice {
                server: 11,
                caught_up: true
            })
        );
        // Stale sample: not known caught up.
        let mut q = req(80, &[]);
        q.now_ms = 2000;
        assert!(!r.choose(&q).unwrap().caught_up);
        // Excluded.
        assert_eq!(
            r.choose(&req(80, &[11])),
            Some(Choice {
                server: 10,
                caught_up: false
            })
        );
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
    fn r1_samples_rise_within_a_generation_and_reset_across() {
        let r = Readers::new();
        r.upsert(1, 1);
        r.observe_replay(1, 3, Lsn(100), 10);
        r.observe_replay(1, 3, Lsn(90), 20);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(100));
        assert_eq!(r.snapshot(1).unwrap().sample_at_ms, 20);
        r.observe_replay(1, 2, Lsn(500), 30);
        assert_eq!(r.snapshot(1).unwrap().replay_lsn, Lsn(100));
        r.observe_replay(1, 4, Lsn(5), 40);
        let s = r.snapshot(1).unwrap();
        assert_eq!((s.replay_lsn, s.generation), (Lsn(5), 4));
        assert!(!r.is_caught_up(1, 1, 3, Lsn(50), 40, 100));
        assert!(r.is_caught_up(1, 1, 4, Lsn(5), 40, 100));
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
            assert_eq!(
                r.choose(&q),
                Some(Choice {
                    server: 3,
                    caught_up: true
                })
            );
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
