//! Multi-threaded stress of the engine-wide shared parts (SPEC, P-9, P-7, R-3): every
//! thread chooses readers, checks connections out and in, marks them dirty, signals demand,
//! reserves and publishes, while one thread also moves LSNs, health, topology and generations.
//! Bounded by a fixed operation count (well under a few seconds in a debug build).
//!
//! Checked while running (a violation panics the thread): a connection is never held by two
//! threads at once, never handed out under another key, never handed out carrying an XID import
//! without `needs_reset`. Checked at the end: the index's internal invariants, and its counts
//! against the connections the threads know to be alive.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use polarsplit::internals::cluster::readers::{ChoiceRequest, Readers, Waits};
use polarsplit::Lsn;
use polarsplit::Warmup;
use polarsplit::{CheckinOutcome, DemandReason, PoolIndex, PoolLimits, ReaderKey, WarmupQueue};

const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 100_000;
const MAX_CONNS: usize = 64 * 1024;
const SERVERS: u32 = 6;
const HOSTGROUP: u32 = 1;
const USERS: u64 = 4;

/// What the test knows about each connection id it ever published.
struct Track {
    /// `profile_generation << 8 | user`, set before publish.
    key: AtomicU64,
    server: AtomicU32,
    held: AtomicBool,
    import: AtomicBool,
    alive: AtomicBool,
}

struct World {
    readers: Readers,
    pool: PoolIndex,
    warmup: WarmupQueue,
    writer_generation: AtomicU64,
    profile_generation: AtomicU64,
    next_conn: AtomicU64,
    track: Vec<Track>,
    hits: AtomicU64,
}

fn key(profile_generation: u64, user: u64) -> ReaderKey {
    ReaderKey {
        profile_generation,
        auth_hash: 1000 + user,
        startup_identity_hash: 0,
        startup_options_hash: user % 2,
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic per thread.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

impl World {
    fn track(&self, conn: u64) -> &Track {
        &self.track[conn as usize]
    }

    /// A session's statement: R-2 choice, checkout, use, checkin (or a demand on a miss).
    fn statement(&self, rng: &mut Rng) {
        let profile = self.profile_generation.load(Ordering::Acquire);
        let user = rng.below(USERS);
        let k = key(profile, user);
        let exclude = [rng.below(u64::from(SERVERS)) as u32 + 1];
        let req = ChoiceRequest {
            hostgroup: HOSTGROUP,
            generation: self.writer_generation.load(Ordering::Acquire),
            target: Lsn(rng.below(2000)),
            now_ms: 1000,
            max_age_ms: 5000,
            waits: Waits::Bounded,
            exclude: if rng.below(4) == 0 { &exclude } else { &[] },
            salt: rng.next(),
        };
        let Some(choice) = self.readers.choose(&req) else {
            return;
        };
        self.readers.begin_use(choice.server);
        match self.pool.checkout(&k, &[choice.server]) {
            Some(c) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                let t = self.track(c.conn);
                assert!(
                    !t.held.swap(true, Ordering::AcqRel),
                    "connection {} handed out twice at once",
                    c.conn
                );
                assert_eq!(
                    t.key.load(Ordering::Acquire),
                    (profile << 8) | user,
                    "connection {} crossed keys",
                    c.conn
                );
                assert_eq!(t.server.load(Ordering::Acquire), c.server);
                assert!(t.alive.load(Ordering::Acquire));
                if t.import.load(Ordering::Acquire) {
                    assert!(c.needs_reset, "dirty connection {} without reset", c.conn);
                }
                if c.needs_reset {
                    t.import.store(false, Ordering::Release); // the caller sent the reset
                }
                // A split read leaves an import, reported by mark_dirty during the use, by a
                // dirty checkin, or both.
                let dirty = rng.below(3) == 0;
                let how = rng.below(3);
                if dirty {
                    t.import.store(true, Ordering::Release);
                    if how != 0 {
                        self.pool.mark_dirty(c.conn).unwrap();
                    }
                }
                let report = dirty && how != 1;
                let broke = rng.below(50) == 0;
                t.held.store(false, Ordering::Release);
                if broke {
                    t.alive.store(false, Ordering::Release);
                    self.pool.remove(c.conn).unwrap();
                } else if self.pool.checkin(c.conn, report).unwrap() == CheckinOutcome::Close {
                    t.alive.store(false, Ordering::Release);
                }
            }
            None => {
                self.warmup.demand(choice.server, &k, DemandReason::Miss);
            }
        }
        self.readers.end_use(choice.server);
    }

    /// The host's warmup loop: drain, reserve, "handshake" without locks, publish.
    fn warm(&self, rng: &mut Rng) {
        for d in self.warmup.drain(4) {
            let writer = self.writer_generation.load(Ordering::Acquire);
            let Ok(r) = self.pool.reserve(d.server, &d.key, writer) else {
                continue;
            };
            let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
            // Some handshakes fail: the reservation is abandoned.
            if conn as usize >= MAX_CONNS || rng.below(20) == 0 {
                self.pool.cancel(r.id);
                continue;
            }
            thread::yield_now(); // the handshake, outside every engine lock
            let t = self.track(conn);
            t.key.store(
                (d.key.profile_generation << 8) | (d.key.auth_hash - 1000),
                Ordering::Release,
            );
            t.server.store(d.server, Ordering::Release);
            t.alive.store(true, Ordering::Release);
            let published = self.pool.publish_checked(
                &r,
                conn,
                self.writer_generation.load(Ordering::Acquire),
                self.profile_generation.load(Ordering::Acquire),
                &self.readers,
                HOSTGROUP,
            );
            if published.is_err() {
                t.alive.store(false, Ordering::Release);
            }
        }
    }

    fn close_queued(&self) {
        for c in self.pool.take_closed() {
            let t = self.track(c);
            assert!(!t.held.load(Ordering::Acquire), "closing a held connection");
            t.alive.store(false, Ordering::Release);
        }
    }

    /// Topology, LSNs and generations moving underneath.
    fn churn(&self, rng: &mut Rng, i: usize) {
        let server = rng.below(u64::from(SERVERS)) as u32 + 1;
        match rng.below(100) {
            0..=59 => {
                let g = self.writer_generation.load(Ordering::Acquire);
                self.readers.observe_replay(server, g, Lsn(i as u64), 1000);
            }
            60..=79 => {
                self.readers.set_health(server, rng.below(4) != 0);
            }
            80..=89 => {
                self.readers.remove(server);
                self.pool.remove_server(server);
                self.close_queued();
                self.readers.upsert(server, HOSTGROUP);
            }
            90..=96 => {
                self.writer_generation.fetch_add(1, Ordering::AcqRel);
            }
            _ => {
                let g = self.profile_generation.fetch_add(1, Ordering::AcqRel) + 1;
                self.pool.invalidate_before(g);
                self.close_queued();
            }
        }
    }
}

#[test]
fn r2_r3_p7_p9_stress_all_threads_at_once_keep_every_invariant() {
    let world = Arc::new(World {
        readers: Readers::new(),
        pool: PoolIndex::new(PoolLimits {
            max_per_key: 3,
            max_per_server: 10,
        }),
        warmup: WarmupQueue::new(Warmup::Demand, 16),
        writer_generation: AtomicU64::new(1),
        profile_generation: AtomicU64::new(1),
        next_conn: AtomicU64::new(1),
        track: (0..MAX_CONNS)
            .map(|_| Track {
                key: AtomicU64::new(0),
                server: AtomicU32::new(0),
                held: AtomicBool::new(false),
                import: AtomicBool::new(false),
                alive: AtomicBool::new(false),
            })
            .collect(),
        hits: AtomicU64::new(0),
    });
    for s in 1..=SERVERS {
        world.readers.upsert(s, HOSTGROUP);
    }
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let w = Arc::clone(&world);
            thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
                for i in 0..OPS_PER_THREAD {
                    match rng.below(100) {
                        0..=79 => w.statement(&mut rng),
                        80..=97 => w.warm(&mut rng),
                        // Topology churn is rare: it empties pools.
                        _ if rng.below(8) == 0 => w.churn(&mut rng, i),
                        _ => {
                            w.readers.observe_replay(
                                rng.below(u64::from(SERVERS)) as u32 + 1,
                                w.writer_generation.load(Ordering::Acquire),
                                Lsn(i as u64),
                                1000,
                            );
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a stress thread found a violation");
    }

    let w = &world;
    w.close_queued();
    w.pool.check_consistency().unwrap();
    // Nobody holds anything; every connection the index counts is one the threads know alive.
    let alive: Vec<u64> = (1..w.next_conn.load(Ordering::Relaxed).min(MAX_CONNS as u64))
        .filter(|&c| w.track(c).alive.load(Ordering::Acquire))
        .collect();
    assert!(alive
        .iter()
        .all(|&c| !w.track(c).held.load(Ordering::Acquire)));
    let mut open = 0;
    for s in 1..=SERVERS {
        let c = w.pool.server_counts(s);
        assert_eq!((c.in_use, c.reserved), (0, 0), "server {s}: {c:?}");
        assert!(c.open() <= w.pool.limits().max_per_server);
        open += c.open();
    }
    assert_eq!(open as usize, alive.len());
    let st = w.pool.stats();
    assert_eq!(st.hits, w.hits.load(Ordering::Relaxed));
    assert!(st.hits > 1000, "the stress reused connections: {st:?}");
    assert!(
        st.published > 100 && st.reset_handouts > 100 && st.cancelled > 0 && st.discarded > 0,
        "{st:?}"
    );
    assert!(w.readers.all().iter().all(|r| r.active == 0));
    eprintln!(
        "pool stats after the stress: {st:?}; warmup: {:?}",
        w.warmup.stats()
    );
}
