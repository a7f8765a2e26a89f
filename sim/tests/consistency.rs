//! The main evidence that the engine is correct (issue 4): random scenarios of several clients
//! against the simulated cluster, with randomized lag and faults, checked against exactly what
//! SPEC S-1a promises. A naive router must be caught by the same checker.
//!
//! The scenario families (`harness::families`, [`CI_FAMILIES`]: all of them) run together on the
//! first [`family_scenarios`] seeds as well; `tests/families.rs` runs each alone, on demand.
//!
//! Replay one scenario: `SIM_SEED=<seed> cargo test -p polarsplit-sim --test consistency replay -- --nocapture`
//! (with families: `SIM_SEED=<seed> SIM_FAMILIES=<list> cargo test -p polarsplit-sim --test families replay -- --nocapture`).
//! A longer soak: `SIM_SCENARIOS=50000 cargo test --release -p polarsplit-sim --test consistency soak -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::time::Instant;

use polarsplit::{Outcome, Reason};
use polarsplit_sim::harness::{coverage, run_families, run_seed, Families};

/// The families on in CI, every one of them: prepared statements as drivers use them (E-2,
/// E-5), pipelines and batch failures (E-1), batches routed at a Flush (E-1), LISTEN/NOTIFY
/// through hidden statements (S-4), the writer's session state replayed on readers (S-5/S-6),
/// readers that crash, restart behind, freeze and refuse (R-1a/R-1b), and causal tokens taken
/// with SHOW and presented by another session (§11). Together, on the same scenarios.
const CI_FAMILIES: &str = "extended,pipeline,flush,notify,session_state,reader_faults,causal";

/// Seeds run with [`CI_FAMILIES`] on (`SIM_FAMILY_SCENARIOS`, default 400).
fn family_scenarios() -> u64 {
    std::env::var("SIM_FAMILY_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400)
}

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

/// E-6: the random scenarios with the families the engine passes switched on, checked by the
/// same checker plus the families' checks (what one server sends for every Execute, no
/// notification lost, a presented token makes its write visible).
#[test]
fn e6_families_keep_every_promise_across_random_scenarios() {
    let start = Instant::now();
    let families = Families::parse(CI_FAMILIES).expect("CI_FAMILIES");
    let n = family_scenarios();
    let mut failures = Vec::new();
    let mut ops = 0usize;
    for seed in 0..n {
        let (run, v) = run_families(seed, false, families);
        ops += run.clients.iter().map(|c| c.len()).sum::<usize>();
        if !v.is_empty() {
            failures.push(format!(
                "seed {seed}: {} violations, first: {}",
                v.len(),
                v[0]
            ));
        }
    }
    println!(
        "{CI_FAMILIES}: {n} scenarios, {ops} client operations in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failing scenarios (replay with SIM_SEED and SIM_FAMILIES={CI_FAMILIES}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The checker still catches a router that sends every SELECT to a replica with those
/// families on.
#[test]
fn naive_router_is_caught_with_the_ci_families() {
    let families = Families::parse(CI_FAMILIES).expect("CI_FAMILIES");
    let n = family_scenarios().min(100);
    let (mut caught, mut stale) = (0, 0);
    for seed in 0..n {
        let (_, v) = run_families(seed, true, families);
        caught += usize::from(!v.is_empty());
        stale += usize::from(
            v.iter()
                .any(|x| x.contains("read-your-writes") || x.contains("causal token")),
        );
    }
    println!(
        "naive router with {CI_FAMILIES}: {caught}/{n} scenarios with violations, {stale} with stale reads"
    );
    assert!(caught > n as usize / 2, "caught only {caught} of {n}");
    assert!(
        stale > 0,
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
