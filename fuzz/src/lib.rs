//! The fuzz harnesses of polarsplit. Each module has `pub fn run(data: &[u8])`, which decodes the
//! fuzzer's bytes into inputs for one part of the library and panics when an invariant breaks.
//!
//! The modules depend only on `polarsplit` and `std`, so `tests/hostile_fuzz_regressions.rs`
//! includes them with `#[path]` and replays every input under `fuzz/regressions/<target>/` in
//! `cargo test`: a crash found by the fuzzer becomes a regression test by committing its input.

pub mod classify;
pub mod framer;
pub mod input;
pub mod rfq;
pub mod session;
