//! Driving the engine through the simulated cluster: a fake host ([`host`]), random client
//! workloads ([`workload`]) and the consistency checker ([`check`]).
//!
//! Every scenario is a function of its seed: [`run_seed`] replays any failure exactly.

pub mod check;
pub mod families;
pub mod host;
pub mod shape;
pub mod workload;

pub use check::{check, Violation};
pub use families::Families;
pub use host::{coverage, Host, Run, Scenario};

/// Runs the scenario of `seed` (with the engine, or with the naive router) and checks it.
pub fn run_seed(seed: u64, naive: bool) -> (Run, Vec<Violation>) {
    run_families(seed, naive, Families::NONE)
}

/// Runs the scenario of `seed` with these families switched on, and checks it.
pub fn run_families(seed: u64, naive: bool, families: Families) -> (Run, Vec<Violation>) {
    let mut sc = Scenario::random(seed).with_families(families);
    sc.naive = naive;
    let run = Host::new(sc).run();
    let v = check(&run);
    (run, v)
}
