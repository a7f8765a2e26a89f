//! Readers under concurrency (SPEC ): samples are read as consistent
//! `(generation, lsn)` pairs while many threads update them, and choice stays valid while the
//! topology changes underneath.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use polarsplit::internals::cluster::readers::{ChoiceRequest, Readers, Waits};
use polarsplit::Lsn;

/// Every LSN written encodes its generation (`gen * 1_000_000 + n`), so a reader that ever sees
/// an LSN of one generation paired with another generation proves a torn sample.
#[test]
fn r1_samples_are_never_torn_across_generations() {
    let r = Arc::new(Readers::new());
    r.upsert(1, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                for i in 0..20_000u64 {
                    let generation = i / 500 + (t % 2);
                    let lsn = generation * 1_000_000 + (i % 500) * 3 + t;
                    r.observe_replay(1, generation, Lsn(lsn), i);
                }
            })
        })
        .collect();
    let checker = {
        let (r, stop) = (Arc::clone(&r), Arc::clone(&stop));
        thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) || checks < 1000 {
                let s = r.snapshot(1).unwrap();
                assert_eq!(
                    s.replay_lsn.0 / 1_000_000,
                    s.generation,
                    "torn sample: {s:?}"
                );
                checks += 1;
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    checker.join().unwrap();
    let s = r.snapshot(1).unwrap();
    assert_eq!(s.generation, 40);
    assert_eq!(s.sample_at_ms, 19_999);
}

#[test]
fn r2_choice_is_always_a_healthy_member_while_topology_changes() {
    let r = Arc::new(Readers::new());
    for s in 0..16 {
        r.upsert(s, s % 2);
    }
    let churn = {
        let r = Arc::clone(&r);
        thread::spawn(move || {
            for i in 0..3000u32 {
                let s = 16 + i % 8;
                r.upsert(s, 0);
                r.set_health(s, i % 3 != 0);
                r.observe_replay(s, 1, Lsn(u64::from(i)), u64::from(i));
                if i % 5 == 0 {
                    r.remove(s);
                }
                if i % 7 == 0 {
                    r.upsert(s, 1);
                }
            }
        })
    };
    let choosers: Vec<_> = (0..2u64)
        .map(|t| {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                for salt in 0..20_000u64 {
                    let exclude = [2, 4];
                    let req = ChoiceRequest {
                        hostgroup: 0,
                        generation: 1,
                        target: Lsn(salt % 100),
                        now_ms: 3000,
                        max_age_ms: 5000,
                        waits: Waits::Bounded,
                        exclude: &exclude,
                        salt: salt ^ t,
                    };
                    if let Some(c) = r.choose(&req) {
                        assert!(!exclude.contains(&c.server));
                        r.begin_use(c.server);
                        r.end_use(c.server);
                    } else {
                        panic!("servers 0, 6, 8, … are always healthy members of hostgroup 0");
                    }
                }
            })
        })
        .collect();
    churn.join().unwrap();
    for c in choosers {
        c.join().unwrap();
    }
    assert!(r.all().iter().all(|s| s.active == 0));
}

/// R-1a under concurrency: while threads report samples, RFQ positions and outages of one
/// reader at rising host times, every snapshot is consistent — a known position's evidence is
/// always newer than the outage it is read with.
#[test]
fn r1a_a_known_position_is_never_read_with_an_older_outage() {
    let r = Arc::new(Readers::new());
    r.upsert(1, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let checker = {
        let (r, stop) = (Arc::clone(&r), Arc::clone(&stop));
        thread::spawn(move || {
            let (mut known, mut unknown) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let s = r.snapshot(1).unwrap();
                if s.known {
                    known += 1;
                    assert!(
                        s.outage_at_ms.is_none_or(|o| s.sample_at_ms > o),
                        "evidence older than the outage: {s:?}"
                    );
                    // Every position written equals its evidence time.
                    assert_eq!(s.replay_lsn.0, s.sample_at_ms, "torn: {s:?}");
                } else {
                    unknown += 1;
                }
            }
            (known, unknown)
        })
    };
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let r = Arc::clone(&r);
            thread::spawn(move || {
                for i in 1..50_000u64 {
                    let at = i * 3 + t;
                    match t {
                        0 => {
                            r.observe_sample(1, 1, Lsn(at), at);
                        }
                        1 => r.observe_rfq(1, 1, Lsn(at), at),
                        _ if i % 50 == 0 => {
                            r.outage(1, at);
                        }
                        _ => {}
                    }
                    if i % 1000 == 0 {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    // A last sample after everything: known again.
    r.observe_sample(1, 1, Lsn(1_000_000), 1_000_000);
    thread::sleep(std::time::Duration::from_millis(5));
    stop.store(true, Ordering::Relaxed);
    let (known, _unknown) = checker.join().unwrap();
    assert!(known > 0);
}
