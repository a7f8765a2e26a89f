//! Replays the fuzz harnesses of `fuzz/` (libFuzzer targets, run by `scripts/test-fuzz.sh`) in
//! `cargo test`, on every committed seed and every input that once failed
//! (`fuzz/seeds/<target>/`, `fuzz/regressions/<target>/`). The harness code is the fuzz crate's
//! own, included here by path: the same invariants, checked in an ordinary debug build.

#[path = "../fuzz/src/classify.rs"]
mod classify;
#[path = "../fuzz/src/framer.rs"]
mod framer;
#[path = "../fuzz/src/input.rs"]
mod input;
#[path = "../fuzz/src/rfq.rs"]
mod rfq;
#[path = "../fuzz/src/session.rs"]
mod session;

use std::path::Path;

/// Runs `run` on every file of `fuzz/seeds/<target>` and `fuzz/regressions/<target>`; returns
/// how many there were.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).expect("read a fuzz input");
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "fuzz input {} fails its harness", f.display());
            n += 1;
        }
    }
    n
}

#[test]
fn fuzz_framer_seeds_and_regressions() {
    assert!(replay("framer", framer::run) > 0);
}

#[test]
fn fuzz_rfq_seeds_and_regressions() {
    assert!(replay("rfq", rfq::run) > 0);
}

#[test]
fn fuzz_classify_seeds_and_regressions() {
    assert!(replay("classify", classify::run) > 0);
}

#[test]
fn fuzz_session_seeds_and_regressions() {
    assert!(replay("session", session::run) > 0);
}

#[test]
fn fuzz_harnesses_run_on_empty_and_tiny_inputs() {
    for data in [&b""[..], b"\0", b"\xff", &[0xab; 3]] {
        framer::run(data);
        rfq::run(data);
        classify::run(data);
        session::run(data);
    }
}
