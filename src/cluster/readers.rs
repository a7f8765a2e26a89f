//! The engine's view of reader servers (SPEC ): hostgroup, health, the latest known replay
//! LSN with its sample time and writer generation, and how many statements each is serving.
//!
//! Shared by every host thread. Reads on the query path (choice, "is it caught up?") take a
//! shared lock; LSN samples and active counts are atomics so concurrent updates do not serialize.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::protocol::Lsn;

/// The host's id for a server (any value it likes, stable for the server's life).
pub type ServerId = u32;
/// A numbered set of servers (ProxySQL's term).
pub type Hostgroup = u32;

#[derive(Debug)]
struct Reader {
    hostgroup: AtomicU32,
    healthy: AtomicBool,
    /// Latest known replay LSN, within `generation`.
    replay_lsn: AtomicU64,
    /// Host time (ms) of the sample that produced `replay_lsn`.
    sample_at_ms: AtomicU64,
    /// Writer generation the sample belongs to.
    generation: AtomicU64,
    /// Statements currently served (for R-2's "less loaded").
    active: AtomicU32,
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

/// The reader registry.
#[derive(Debug, Default)]
pub struct Readers {
    map: RwLock<BTreeMap<ServerId, Arc<Reader>>>,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64 finalizer: deterministic, well spread.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Readers {
    pub fn new() -> Readers {
        Readers::default()
    }

    /// Adds a reader (healthy, no sample) or moves an existing one to `hostgroup`.
    pub fn upsert(&self, server: ServerId, hostgroup: Hostgroup) {
        let mut map = self.map.write();
        match map.get(&server) {
            Some(r) => r.hostgroup.store(hostgroup, Ordering::Relaxed),
            None => {
                map.insert(
                    server,
                    Arc::new(Reader {
                        hostgroup: AtomicU32::new(hostgroup),
                        healthy: AtomicBool::new(true),
                        replay_lsn: AtomicU64::new(0),
                        sample_at_ms: AtomicU64::new(0),
                        generation: AtomicU64::new(0),
                        active: AtomicU32::new(0),
                    }),
                );
            }
        }
    }

    pub fn remove(&self, server: ServerId) -> bool {
        self.map.write().remove(&server).is_some()
    }

    fn get(&self, server: ServerId) -> Option<Arc<Reader>> {
        self.map.read().get(&server).cloned()
    }

    pub fn set_health(&self, server: ServerId, healthy: bool) -> bool {
        match self.get(server) {
            Some(r) => {
                r.healthy.store(healthy, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Records a replay position (monitor sample or a reader's own RFQ). Within a generation the
    /// position only rises; a sample of a newer generation replaces the old one; a sample of an
    /// older generation is ignored. The sample time always moves to the newest.
    pub fn observe_replay(&self, server: ServerId, generation: u64, lsn: Lsn, at_ms: u64) -> bool {
        let Some(r) = self.get(server) else {
            return false;
        };
        // A short critical section per reader keeps (generation, lsn, time) consistent.
        let cur_gen = r.generation.load(Ordering::Acquire);
        if generation < cur_gen {
            return false;
        }
        if generation > cur_gen {
            r.generation.store(generation, Ordering::Release);
            r.replay_lsn.store(lsn.0, Ordering::Release);
        } else {
            r.replay_lsn.fetch_max(lsn.0, Ordering::AcqRel);
        }
        r.sample_at_ms.fetch_max(at_ms, Ordering::AcqRel);
        true
    }

    pub fn snapshot(&self, server: ServerId) -> Option<ReaderSnapshot> {
        let map = self.map.read();
        map.get(&server).map(|r| Self::snap(server, r))
    }

    fn snap(server: ServerId, r: &Reader) -> ReaderSnapshot {
        ReaderSnapshot {
            server,
            hostgroup: r.hostgroup.load(Ordering::Relaxed),
            healthy: r.healthy.load(Ordering::Relaxed),
            replay_lsn: Lsn(r.replay_lsn.load(Ordering::Acquire)),
            sample_at_ms: r.sample_at_ms.load(Ordering::Acquire),
            generation: r.generation.load(Ordering::Acquire),
            active: r.active.load(Ordering::Relaxed),
        }
    }

    /// All readers, ordered by server id.
    pub fn all(&self) -> Vec<ReaderSnapshot> {
        self.map
            .read()
            .iter()
            .map(|(&s, r)| Self::snap(s, r))
            .collect()
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
        self.snapshot(server).is_some_and(|s| {
            s.hostgroup == hostgroup
                && s.healthy
                && Self::fresh_at(&s, generation, target, now_ms, max_age_ms)
        })
    }

    fn fresh_at(
        s: &ReaderSnapshot,
        generation: u64,
        target: Lsn,
        now_ms: u64,
        max_age_ms: u64,
    ) -> bool {
        if target.is_zero() {
            return true;
        }
        s.generation == generation
            && s.replay_lsn >= target
            && now_ms.saturating_sub(s.sample_at_ms) <= max_age_ms
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
        self.map.read().iter().any(|(&s, r)| {
            let s = Self::snap(s, r);
            s.hostgroup == hostgroup
                && s.healthy
                && Self::fresh_at(&s, generation, target, now_ms, max_age_ms)
        })
    }

    /// Whether `server` is still a healthy reader of `hostgroup` (a pin stays valid).
    pub fn is_valid(&self, server: ServerId, hostgroup: Hostgroup) -> bool {
        self.snapshot(server)
            .is_some_and(|s| s.hostgroup == hostgroup && s.healthy)
    }

    /// among healthy, non-excluded readers of the hostgroup, prefer those known to have
    /// reached the target, then the less loaded; ties broken by a hash of the salt and server id.
    /// Deterministic given the registry state and the request.
    pub fn choose(&self, req: &ChoiceRequest<'_>) -> Option<Choice> {
        let map = self.map.read();
        let mut best: Option<(bool, u32, u64, ServerId)> = None;
        for (&server, r) in map.iter() {
            if req.exclude.contains(&server) {
                continue;
            }
            let s = Self::snap(server, r);
            if s.hostgroup != req.hostgroup || !s.healthy {
                continue;
            }
            let caught = Self::fresh_at(&s, req.generation, req.target, req.now_ms, req.max_age_ms);
            let tie = mix(req.salt ^ u64::from(server));
            let better = match best {
                None => true,
                Some((bc, ba, bt, _)) => {
                    (caught, std::cmp::Reverse(s.active), std::cmp::Reverse(tie))
                        > (bc, std::cmp::Reverse(ba), std::cmp::Reverse(bt))
                }
            };
            if better {
                best = Some((caught, s.active, tie, server));
            }
        }
        best.map(|(caught_up, _, _, server)| Choice { server, caught_up })
    }

    /// A statement starts on `server` (R-2's load count).
    pub fn begin_use(&self, server: ServerId) {
        if let Some(r) = self.get(server) {
            r.active.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A statement on `server` ended.
    pub fn end_use(&self, server: ServerId) {
        if let Some(r) = self.get(server) {
            let _ = r
                .active
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| a.checked_sub(1));
        }
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
}
