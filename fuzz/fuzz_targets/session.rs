#![no_main]
//! See `fuzz/src/session.rs` for what this target drives and which invariants it checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| polarsplit_fuzz::session::run(data));
