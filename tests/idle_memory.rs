//! Heap an idle session holds (issue 20's target: an idle session ≤ 2 KiB), connected and after
//! one write, counted by a global allocator in this test binary: the live bytes of boxed
//! sessions (the `Session` value itself and everything it owns), which do not depend on timing.
//! The same workload as `benches/engine.rs`'s memory rows.

use std::sync::Arc;

use polarsplit::{ClientInfo, Engine, Event, Session};
use polarsplit_test_support::alloc::live_bytes;
use polarsplit_test_support::be::{self, command_complete};
use polarsplit_test_support::fe::{self, query};
use polarsplit_test_support::host::capture_answer_as;

// The workspace's counting allocator: live bytes per thread, so tests on other threads do not
// disturb the count.
#[global_allocator]
static A: polarsplit_test_support::alloc::Counting = polarsplit_test_support::alloc::Counting;

const WRITER: u64 = 1;
const TARGET: i64 = 2048;

fn drain(s: &mut Session) {
    while s.poll_action().is_some() {}
}

/// A connected idle session, boxed as a host holds it (startup, writer connected, its
/// authentication and first ReadyForQuery, and the answer to the capture of the writer
/// session's login-time state that follows it, S-5).
fn connected(engine: &Arc<Engine>) -> Box<Session> {
    let mut s = Box::new(Session::new(
        engine.clone(),
        ClientInfo {
            client_addr: Some(("10.0.0.1".into(), 5000)),
            ..ClientInfo::default()
        },
    ));
    s.recv_client(&fe::startup_plain("app", "db"), 0).unwrap();
    drain(&mut s);
    s.on_backend_event(WRITER, Event::WriterConnected, 0)
        .unwrap();
    drain(&mut s);
    let mut auth = be::auth_ok();
    auth.extend(be::rfq(b'I', Some(0x1000), None));
    s.recv_backend(WRITER, &auth, 0).unwrap();
    drain(&mut s);
    s.recv_backend(WRITER, &capture_answer_as("app", &[], None), 0)
        .unwrap();
    drain(&mut s);
    s
}

/// The same session after one write answered by the writer (an UPDATE, its CommandComplete and
/// ReadyForQuery): idle again.
fn after_write(engine: &Arc<Engine>) -> Box<Session> {
    let mut s = connected(engine);
    s.recv_client(&query("UPDATE t SET v = 1 WHERE k = 7"), 0)
        .unwrap();
    drain(&mut s);
    let mut a = command_complete("UPDATE 1");
    a.extend(be::rfq(b'I', Some(0x9000), None));
    s.recv_backend(WRITER, &a, 0).unwrap();
    drain(&mut s);
    assert!(!s.has_actions() && !s.in_transaction());
    s
}

/// Live heap bytes per session of `n` sessions made by `make`, kept alive together.
fn bytes_per_session(engine: &Arc<Engine>, make: fn(&Arc<Engine>) -> Box<Session>) -> i64 {
    const N: i64 = 200;
    // Warm up what the engine builds on first use (classifier caches, tables): not the
    // session's.
    drop(make(engine));
    let mut sessions = Vec::with_capacity(N as usize);
    let before = live_bytes();
    for _ in 0..N {
        sessions.push(make(engine));
    }
    let per = (live_bytes() - before) as i64 / N;
    drop(sessions);
    per
}

fn engine() -> Arc<Engine> {
    let engine = Engine::new(polarsplit_test_support::config(&[("seed", "1")]));
    engine.add_reader(1, 1);
    engine
}

#[test]
fn issue20_connected_idle_session_holds_at_most_2_kib() {
    let per = bytes_per_session(&engine(), connected);
    println!("connected idle session: {per} B");
    assert!(
        per >= std::mem::size_of::<Session>() as i64,
        "the count covers the boxed session ({per} B)"
    );
    assert!(per <= TARGET, "a connected idle session holds {per} B");
}

#[test]
fn issue20_idle_session_after_a_write_holds_at_most_2_kib() {
    let engine = engine();
    let per = bytes_per_session(&engine, after_write);
    println!("idle session after one write: {per} B");
    assert!(
        per >= std::mem::size_of::<Session>() as i64,
        "the count covers the boxed session ({per} B)"
    );
    assert!(
        per <= TARGET,
        "an idle session after one write holds {per} B"
    );
    // A write leaves the session's position behind: the count is of sessions that wrote.
    assert!(after_write(&engine).lsn_state().write_lsn.0 >= 0x9000);
}
