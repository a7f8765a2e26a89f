//! The main evidence that the engine is correct (issue 4): random scenarios of several clients
//! against the simulated cluster, with randomized lag and faults, checked against exactly what
//! SPEC S-1a promises. A naive router must be caught by the same checker.
//!
//! Replay one scenario: `SIM_SEED=<seed> cargo test -p polarsplit-sim --test consistency replay -- --nocapture`.
//! A longer soak: `SIM_SCENARIOS=50000 cargo test --release -p polarsplit-sim --test consistency soak -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::time::Instant;

use polarsplit::session::{Outcome, Reason};
use polarsplit_sim::harness::{coverage, run_seed};

fn scenarios(default: u64) -> u64 {
    std::env::var("SIM_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs seeds `0..n` with the engine; panics with every failing seed.
fn explore(n: u64) -> (BTreeMap<Outcome, u64>, BTreeMap<Reason, u64>) {
    let start = Instant::now();
    let mut outcomes = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    let mut failures = Vec::new();
    let mut ops = 0usize;
    for seed in 0..n {
        let (run, v) = run_seed(seed, false);
        ops += run.clients.iter().map(|c| c.len()).sum::<usize>();
        let (o, r) = coverage(&run.decisions);
        for (k, c) in o {
            *outcomes.entry(k).or_insert(0) += c;
        }
        for (k, c) in r {
            *reasons.entry(k).or_insert(0) += c;
        }
        if !v.is_empty() {
            failures.push(format!(
                "seed {seed}: {} violations, first: {}",
                v.len(),
                v[0]
            ));
        }
    }
    let mut report = format!(
        "{n} scenarios, {ops} client operations in {:.1} s\noutcomes:\n",
        start.elapsed().as_secs_f64()
    );
    for (o, c) in &outcomes {
        report.push_str(&format!("  {:<28} {c}\n", o.name()));
    }
    report.push_str("reasons:\n");
    for (r, c) in &reasons {
        report.push_str(&format!("  {:<28} {c}\n", r.name()));
    }
    print!("{report}");
    // The test command prints this file after the tests (captured output is hidden).
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/sim-coverage.txt");
    let _ = std::fs::write(path, &report);
    assert!(
        failures.is_empty(),
        "{} failing scenarios (replay with SIM_SEED):\n{}",
        failures.len(),
        failures.join("\n")
    );
    (outcomes, reasons)
}

#[test]
fn s1a_engine_keeps_every_promise_across_random_scenarios() {
    let (outcomes, _) = explore(scenarios(2000));
    for o in Outcome::ALL {
        assert!(
            outcomes.get(&o).copied().unwrap_or(0) > 0,
            "outcome {} never occurred",
            o.name()
        );
    }
}

#[test]
fn naive_router_is_caught_by_the_checker() {
    let mut caught = 0;
    let mut ryw = 0;
    let n = scenarios(2000).min(300);
    for seed in 0..n {
        let (_, v) = run_seed(seed, true);
        if !v.is_empty() {
            caught += 1;
        }
        if v.iter().any(|x| x.contains("read-your-writes")) {
            ryw += 1;
        }
    }
    println!("naive router: {caught}/{n} scenarios with violations, {ryw} with read-your-writes violations");
    assert!(
        ryw > 0,
        "the checker must catch the naive router's stale reads"
    );
}

#[test]
fn replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let naive = std::env::var("SIM_NAIVE").is_ok();
    let (run, v) = run_seed(seed, naive);
    println!("{:#?}", run.scenario);
    for (c, log) in run.clients.iter().enumerate() {
        for (i, r) in log.iter().enumerate() {
            println!(
                "client {c} op {i} t={}..{}: {} -> {:?}",
                r.sent_at, r.done_at, r.op.sql, r.msgs
            );
        }
    }
    for d in &run.decisions {
        println!("{d:?}");
    }
    if std::env::var("SIM_HISTORY").is_ok() {
        for e in run.cluster.history() {
            match &e.event {
                polarsplit_sim::Event::Statement(s) => println!(
                    "t={} {} q{} [{}/{}] {:?} {:?} import={:?}",
                    e.time,
                    s.conn,
                    s.query_seq,
                    s.index,
                    s.of,
                    s.text,
                    s.result,
                    s.snapshot.as_ref().and_then(|x| x.import.clone())
                ),
                other => println!("t={} {other:?}", e.time),
            }
        }
    }
    for x in &v {
        println!("VIOLATION: {x}");
    }
    assert!(v.is_empty());
}

#[test]
#[ignore]
fn soak() {
    explore(scenarios(50_000));
}
