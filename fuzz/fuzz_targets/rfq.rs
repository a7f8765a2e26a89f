#![no_main]
//! See `fuzz/src/rfq.rs` for what this target drives and which invariants it checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| polarsplit_fuzz::rfq::run(data));
