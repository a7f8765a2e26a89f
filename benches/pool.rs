//! Throughput of the engine-wide shared parts under concurrency (issue 7), each against a single
//! `Mutex<HashMap>` baseline measured in the same run:
//!
//! - `checkout_checkin`: `PoolIndex::checkout` + `checkin` of a random key of 16 (4 servers × 8
//!   idle connections per key), vs. one mutex over a key → idle list map and a connection → key
//!   map.
//! - `choose`: `Readers::choose` + `begin_use` + `end_use` over 8 readers of a hostgroup with
//!   random targets, vs. one mutex over a server → state map scanned for the best reader.
//!
//! - `control_no_sharing`: thread-local work only — the machine's real parallelism, the ceiling
//!   for any scaling above.
//!
//! With 1, 2 and 4 threads. Criterion reports each as elements (operations) per second; at the
//! end a table gives ops/s of both (the median over criterion's calls, warm-up included) and the
//! ratio polarsplit / baseline, from the same run. Run: `cargo bench --bench pool`.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use polarsplit::internals::cluster::readers::{ChoiceRequest, Readers, Waits};
use polarsplit::Lsn;
use polarsplit::{PoolIndex, PoolLimits, PublishCheck, ReaderKey};

const THREADS: [usize; 3] = [1, 2, 4];
const KEYS: u64 = 16;
const SERVERS: u32 = 4;
const CONNS_PER_SLOT: u64 = 8;
const READERS: u32 = 8;

/// (workload, implementation, threads) → ops/s of every criterion call (warm-up included).
type Tally = Mutex<BTreeMap<(&'static str, &'static str, usize), Vec<f64>>>;

fn key(i: u64) -> ReaderKey {
    ReaderKey {
        profile_generation: 1,
        auth_hash: 0xa000 + i,
        startup_identity_hash: 0,
        startup_options_hash: i % 3,
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Runs `iters` operations split over `threads` threads; returns the wall time.
fn run_threads<F>(threads: usize, iters: u64, op: F) -> Duration
where
    F: Fn(&mut Rng) + Sync,
{
    let per = iters.div_ceil(threads as u64);
    let barrier = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (op, barrier) = (&op, &barrier);
            s.spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t as u64 + 1) * 0x1234_5678));
                barrier.wait();
                for _ in 0..per {
                    op(&mut rng);
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // Scope end joins every thread.
        start
    })
    .elapsed()
}

// ---- checkout / checkin ----------------------------------------------------------------------

fn filled_index() -> PoolIndex {
    let p = PoolIndex::new(PoolLimits {
        max_per_key: 64,
        max_per_server: 4096,
    });
    let mut conn = 1;
    for k in 0..KEYS {
        for s in 0..SERVERS {
            for _ in 0..CONNS_PER_SLOT {
                let r = p.reserve(s, &key(k), 1).unwrap();
                let check = PublishCheck {
                    writer_generation: 1,
                    profile_generation: 1,
                    member: true,
                };
                p.publish(r.id, conn, &check).unwrap();
                conn += 1;
            }
        }
    }
    p
}

/// The straightforward implementation: one lock over everything.
#[derive(Default)]
struct BaselinePool {
    idle: HashMap<(ReaderKey, u32), Vec<u64>>,
    conns: HashMap<u64, (ReaderKey, u32)>,
}

fn filled_baseline() -> Mutex<BaselinePool> {
    let mut b = BaselinePool::default();
    let mut conn = 1;
    for k in 0..KEYS {
        for s in 0..SERVERS {
            for _ in 0..CONNS_PER_SLOT {
                b.idle.entry((key(k), s)).or_default().push(conn);
                b.conns.insert(conn, (key(k), s));
                conn += 1;
            }
        }
    }
    Mutex::new(b)
}

fn baseline_checkout(b: &Mutex<BaselinePool>, k: &ReaderKey, preferred: u32) -> Option<u64> {
    let mut g = b.lock().unwrap();
    if let Some(c) = g.idle.get_mut(&(*k, preferred)).and_then(Vec::pop) {
        return Some(c);
    }
    (0..SERVERS).find_map(|s| g.idle.get_mut(&(*k, s)).and_then(Vec::pop))
}

fn baseline_checkin(b: &Mutex<BaselinePool>, conn: u64) {
    let mut g = b.lock().unwrap();
    let Some(&slot) = g.conns.get(&conn) else {
        return;
    };
    g.idle.entry(slot).or_default().push(conn);
}

fn bench_checkout(c: &mut Criterion, tally: &Tally) {
    let mut group = c.benchmark_group("checkout_checkin");
    group.throughput(Throughput::Elements(1));
    let index = Arc::new(filled_index());
    let base = Arc::new(filled_baseline());
    for threads in THREADS {
        group.bench_function(BenchmarkId::new("polarsplit", threads), |b| {
            b.iter_custom(|iters| {
                let t = run_threads(threads, iters, |rng| {
                    let r = rng.next();
                    let k = key(r % KEYS);
                    let pref = [(r >> 32) as u32 % SERVERS];
                    if let Some(co) = index.checkout(&k, &pref) {
                        black_box(index.checkin(co.conn, false).is_ok());
                    }
                });
                record(tally, "checkout_checkin", "polarsplit", threads, iters, t);
                t
            })
        });
        group.bench_function(BenchmarkId::new("mutex_hashmap", threads), |b| {
            b.iter_custom(|iters| {
                let t = run_threads(threads, iters, |rng| {
                    let r = rng.next();
                    let k = key(r % KEYS);
                    if let Some(conn) = baseline_checkout(&base, &k, (r >> 32) as u32 % SERVERS) {
                        baseline_checkin(&base, black_box(conn));
                    }
                });
                record(
                    tally,
                    "checkout_checkin",
                    "mutex_hashmap",
                    threads,
                    iters,
                    t,
                );
                t
            })
        });
    }
    group.finish();
}

// ---- reader choice ---------------------------------------------------------------------------

fn filled_readers() -> Readers {
    let r = Readers::new();
    for s in 0..READERS {
        r.upsert(s, 1);
        r.observe_replay(s, 1, Lsn(1000 + u64::from(s) * 100), 1000);
    }
    r
}

#[derive(Clone, Copy)]
struct BaselineReader {
    hostgroup: u32,
    healthy: bool,
    generation: u64,
    lsn: u64,
    at_ms: u64,
    active: u32,
}

fn filled_baseline_readers() -> Mutex<HashMap<u32, BaselineReader>> {
    Mutex::new(
        (0..READERS)
            .map(|s| {
                (
                    s,
                    BaselineReader {
                        hostgroup: 1,
                        healthy: true,
                        generation: 1,
                        lsn: 1000 + u64::from(s) * 100,
                        at_ms: 1000,
                        active: 0,
                    },
                )
            })
            .collect(),
    )
}

/// R-2 the simple way: scan under the lock for (caught up, least active, hash), take it.
fn baseline_choose(m: &Mutex<HashMap<u32, BaselineReader>>, target: u64, salt: u64) -> Option<u32> {
    let mut g = m.lock().unwrap();
    let mut best: Option<(bool, std::cmp::Reverse<u32>, u64, u32)> = None;
    for (&s, r) in g.iter() {
        if r.hostgroup != 1 || !r.healthy {
            continue;
        }
        let caught =
            target == 0 || (r.generation == 1 && r.lsn >= target && r.at_ms + 5000 >= 1000);
        let cand = (
            caught,
            std::cmp::Reverse(r.active),
            (salt ^ u64::from(s)).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            s,
        );
        if best.is_none_or(|b| cand > b) {
            best = Some(cand);
        }
    }
    let s = best?.3;
    if let Some(r) = g.get_mut(&s) {
        r.active += 1;
    }
    Some(s)
}

fn baseline_end(m: &Mutex<HashMap<u32, BaselineReader>>, s: u32) {
    if let Some(r) = m.lock().unwrap().get_mut(&s) {
        r.active = r.active.saturating_sub(1);
    }
}

fn bench_choose(c: &mut Criterion, tally: &Tally) {
    let mut group = c.benchmark_group("choose");
    group.throughput(Throughput::Elements(1));
    let readers = Arc::new(filled_readers());
    let base = Arc::new(filled_baseline_readers());
    for threads in THREADS {
        group.bench_function(BenchmarkId::new("polarsplit", threads), |b| {
            b.iter_custom(|iters| {
                let t = run_threads(threads, iters, |rng| {
                    let r = rng.next();
                    let req = ChoiceRequest {
                        hostgroup: 1,
                        generation: 1,
                        target: Lsn(r % 2000),
                        now_ms: 1000,
                        max_age_ms: 5000,
                        waits: Waits::Bounded,
                        exclude: &[],
                        salt: r,
                    };
                    if let Some(ch) = readers.choose(&req) {
                        readers.begin_use(ch.server);
                        readers.end_use(black_box(ch.server));
                    }
                });
                record(tally, "choose", "polarsplit", threads, iters, t);
                t
            })
        });
        group.bench_function(BenchmarkId::new("mutex_hashmap", threads), |b| {
            b.iter_custom(|iters| {
                let t = run_threads(threads, iters, |rng| {
                    let r = rng.next();
                    if let Some(s) = baseline_choose(&base, r % 2000, r) {
                        baseline_end(&base, black_box(s));
                    }
                });
                record(tally, "choose", "mutex_hashmap", threads, iters, t);
                t
            })
        });
    }
    group.finish();
}

// ---- control --------------------------------------------------------------------------------

/// No shared state at all: how much parallelism the machine really gives this process (the
/// ceiling for any scaling above).
fn bench_control(c: &mut Criterion, tally: &Tally) {
    let mut group = c.benchmark_group("control_no_sharing");
    group.throughput(Throughput::Elements(1));
    for threads in THREADS {
        group.bench_function(BenchmarkId::new("local_work", threads), |b| {
            b.iter_custom(|iters| {
                let t = run_threads(threads, iters, |rng| {
                    let mut x = rng.next();
                    for _ in 0..16 {
                        x = black_box(x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(7));
                    }
                    black_box(x);
                });
                record(tally, "control", "local_work", threads, iters, t);
                t
            })
        });
    }
    group.finish();
}

// ---- report ----------------------------------------------------------------------------------

fn record(
    tally: &Tally,
    workload: &'static str,
    imp: &'static str,
    threads: usize,
    iters: u64,
    t: Duration,
) {
    if t.is_zero() {
        return;
    }
    let rate = iters as f64 / t.as_secs_f64();
    tally
        .lock()
        .unwrap()
        .entry((workload, imp, threads))
        .or_default()
        .push(rate);
}

fn report(tally: &Tally) {
    let g = tally.lock().unwrap();
    // The median call: robust to the stalls a shared machine inflicts on single samples.
    let rate = |w, i, t| {
        g.get(&(w, i, t)).map_or(f64::NAN, |v: &Vec<f64>| {
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
    };
    println!();
    println!(
        "{:<18} {:>7} {:>16} {:>16} {:>8}",
        "workload", "threads", "polarsplit op/s", "mutex+map op/s", "ratio"
    );
    for w in ["checkout_checkin", "choose"] {
        for t in THREADS {
            let (p, b) = (rate(w, "polarsplit", t), rate(w, "mutex_hashmap", t));
            println!("{w:<18} {t:>7} {p:>16.0} {b:>16.0} {:>7.2}x", p / b);
        }
    }
    let control: Vec<String> = THREADS
        .iter()
        .map(|&t| {
            format!(
                "{t}: {:.2}x",
                rate("control", "local_work", t) / rate("control", "local_work", 1)
            )
        })
        .collect();
    println!(
        "control (no shared state) throughput relative to 1 thread — {}",
        control.join(", ")
    );
    println!(
        "(hardware threads available: {})",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}

fn main() {
    let tally = Tally::default();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_checkout(&mut c, &tally);
    bench_choose(&mut c, &tally);
    bench_control(&mut c, &tally);
    c.final_summary();
    report(&tally);
}
