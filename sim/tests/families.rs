//! Scenario families for engine capabilities in progress (issues 16–18, SPEC §10, S-5/S-6,
//! R-1a/R-1b, §11): the same random scenarios as the `consistency` test, with a family's
//! workload, faults and checks switched on. Each is `#[ignore]`d until the engine has the
//! capability it names; run them with
//!
//! `cargo test -p polarsplit-sim --test families -- --ignored --nocapture`
//!
//! (`SIM_SCENARIOS=<n>` seeds each, default 300; `SIM_FAMILIES=extended,pipeline` runs that
//! combination in `chosen_families`; replay one with `SIM_SEED=<seed> SIM_FAMILIES=<list>
//! cargo test -p polarsplit-sim --test families replay -- --nocapture`).

use polarsplit_sim::harness::{run_families, Families};

fn scenarios(default: u64) -> u64 {
    std::env::var("SIM_SCENARIOS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs seeds `0..n` with `families`; panics with every failing seed and its first
/// violation.
fn explore(families: Families) {
    let n = scenarios(300);
    let mut failures = Vec::new();
    let mut ops = 0;
    // Violations by kind (digits and quoted text folded), with the first seed of each.
    let mut kinds: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for seed in 0..n {
        let (run, v) = run_families(seed, false, families);
        ops += run.clients.iter().map(Vec::len).sum::<usize>();
        for x in &v {
            let k = kind(x);
            kinds.entry(k).or_insert((0, seed)).0 += 1;
        }
        if !v.is_empty() {
            failures.push(format!(
                "seed {seed}: {} violations, first: {}",
                v.len(),
                v[0]
            ));
        }
    }
    println!(
        "{families:?}: {n} scenarios, {ops} operations, {} failing",
        failures.len()
    );
    for (k, (count, seed)) in &kinds {
        println!("  {count:>6}  (first seed {seed:>4})  {k}");
    }
    assert!(
        failures.is_empty(),
        "{} of {n} scenarios failing (replay with SIM_SEED and SIM_FAMILIES):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A violation's kind: its text with numbers, LSNs and quoted parts folded, cut short.
fn kind(v: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '"' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("\"…\"");
                }
            }
            _ if quoted => {}
            '0'..='9' => {
                while chars
                    .peek()
                    .is_some_and(|c| c.is_ascii_hexdigit() || *c == '/')
                {
                    chars.next();
                }
                out.push('#');
            }
            _ => out.push(ch),
        }
    }
    out.chars().take(120).collect()
}

fn only(f: impl FnOnce(&mut Families)) -> Families {
    let mut x = Families::NONE;
    f(&mut x);
    x
}

#[test]
#[ignore = "waits for E-1/E-2/E-5: prepared statements tracked and placed per connection, \
            Describe-only batches, row-limited Executes on the writer (issue 18)"]
fn e6_extended_protocol_family() {
    explore(only(|f| f.extended = true));
}

#[test]
#[ignore = "waits for E-1: pipelined batches decided in order, a lone Flush that is not a \
            statement, batch failures (issues 17 and 18)"]
fn e1_pipeline_family() {
    explore(only(|f| f.pipeline = true));
}

#[test]
#[ignore = "waits for E-1: a Flush routes what is held and waits for no RFQ (issue 17 point 1)"]
fn e1_flush_family() {
    explore(only(|f| f.flush = true));
}

#[test]
#[ignore = "waits for hidden statements that pass asynchronous messages through (issue 17 \
            point 2)"]
fn s4_notify_family() {
    explore(only(|f| f.notify = true));
}

#[test]
#[ignore = "waits for S-5/S-6: the writer's resulting session state replayed on readers, \
            roles in order, RESET ALL rules, code that changes state (issue 17)"]
fn s5_session_state_family() {
    explore(only(|f| f.session_state = true));
}

#[test]
#[ignore = "waits for R-1a (positions replaced by samples, cleared by an outage) and R-1b \
            (reader response deadline, hold-out) (issue 16)"]
fn r1_reader_faults_family() {
    explore(only(|f| f.reader_faults = true));
}

#[test]
#[ignore = "waits for C-1/C-2: causal tokens (SPEC §11)"]
fn c2_causal_token_family() {
    explore(only(|f| f.causal = true));
}

/// The families named in `SIM_FAMILIES` together (nothing when unset).
#[test]
#[ignore = "runs the families named in SIM_FAMILIES"]
fn chosen_families() {
    let Ok(list) = std::env::var("SIM_FAMILIES") else {
        return;
    };
    explore(Families::parse(&list).expect("SIM_FAMILIES"));
}

/// The extended checker still catches a router that sends every SELECT to a replica, with
/// every family on.
#[test]
fn naive_router_is_caught_with_every_family() {
    let all = Families::parse("all").unwrap();
    let n = scenarios(300).min(60);
    let caught = (0..n)
        .filter(|&seed| !run_families(seed, true, all).1.is_empty())
        .count();
    println!("naive router with every family: {caught}/{n} scenarios with violations");
    assert!(caught > n as usize / 2, "caught only {caught} of {n}");
}

#[test]
fn replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let families =
        Families::parse(&std::env::var("SIM_FAMILIES").unwrap_or_default()).expect("SIM_FAMILIES");
    let naive = std::env::var("SIM_NAIVE").is_ok();
    let (run, v) = run_families(seed, naive, families);
    println!("{:#?}", run.scenario);
    for (c, log) in run.clients.iter().enumerate() {
        for (i, r) in log.iter().enumerate() {
            println!(
                "client {c} op {i} t={}..{}: {} -> {:?}",
                r.sent_at, r.done_at, r.op.sql, r.msgs
            );
        }
    }
    for (t, f) in &run.reader_faults {
        println!("t={t}: {f}");
    }
    if std::env::var("SIM_HISTORY").is_ok() {
        for e in run.cluster.history() {
            println!("t={} {:?}", e.time, e.event);
        }
    }
    for x in &v {
        println!("VIOLATION: {x}");
    }
    assert!(v.is_empty());
}
