//! A client that pipelines thousands of statements to the writer before it reads an answer: the
//! session's work per statement must not grow with how many are queued. Each new writer unit
//! looked through every queued unit (the pipelining rule, the unit's own lookup, the check for a
//! transaction edge), every Bind of a named statement of unknown row shape and every RFQ
//! through every other batch's shape notes, and every RFQ through the writer's whole response
//! queue: quadratic, and the host's single event loop stalled other clients for seconds (a
//! prober's finding, 2026-12-05: 40,000 pipelined `nextval` took 3.4–6.2 s through the example
//! proxy, 0.36 s on the primary).
//!
//! The measure is the ratio of the session's time for 4N statements to its time for N (N =
//! 5,000), in the same test run, best of three each: linear work gives about 4, the quadratic
//! work gave 12–20 (it fails at the commit before the fix). Only the session's own calls are
//! timed — the input is built beforehand and the actions are only tallied, not copied — and
//! by the thread's CPU time on Linux (`CLOCK_THREAD_CPUTIME_ID`), so neither
//! the test host's copying nor other processes on a busy machine weigh in; the bound (8) is
//! generous besides. (A hook counting unit visits would be machine-independent, but would see
//! only the scans one knew to count, and could not run against the code before the fix.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use polarsplit::{Action, Session};

const N: usize = 5_000;

/// The CPU time this thread has run (`CLOCK_THREAD_CPUTIME_ID`), on 64-bit Linux.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu() -> Option<Duration> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec (64-bit Linux layout) for the call's duration.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (rc == 0).then(|| Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn thread_cpu() -> Option<Duration> {
    None
}

/// A clock for the session's calls: the thread's CPU time, else the wall clock.
struct Clock {
    total: Duration,
}

impl Clock {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (cpu, wall) = (thread_cpu(), Instant::now());
        let out = f();
        self.total += match (cpu, thread_cpu()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => wall.elapsed(),
        };
        out
    }
}

/// Client bytes the session sent on to the writer, and bytes it gave the client.
#[derive(Default)]
struct Tally {
    to_writer: usize,
    to_client: usize,
}

fn drain(s: &mut Session, t: &mut Tally) {
    while let Some(a) = s.poll_action() {
        match a {
            Action::ForwardClient { conn, n } if conn == WRITER => t.to_writer += n,
            Action::ForwardBackend { n, .. } => t.to_client += n,
            Action::SendClient { bytes } => t.to_client += bytes.len(),
            _ => {}
        }
    }
}

/// Feeds the session the client's `input` and then the writer's `answers`, in slices as a
/// host's reads would deliver them, timing only the session's calls.
fn run(input: &[u8], answers: &[u8]) -> (Duration, Tally) {
    let mut h = Host::new(config(&[]));
    h.connect();
    let s = &mut h.session;
    let mut clock = Clock {
        total: Duration::ZERO,
    };
    let mut tally = Tally::default();
    for part in input.chunks(64 << 10) {
        clock.time(|| {
            let n = s.recv_client(part, 0).expect("recv_client");
            assert_eq!(n, part.len());
            drain(s, &mut tally);
        });
    }
    for part in answers.chunks(64 << 10) {
        clock.time(|| {
            s.recv_backend(WRITER, part, 0).expect("recv_backend");
            drain(s, &mut tally);
        });
    }
    assert!(!s.in_transaction() && !s.has_actions());
    (clock.total, tally)
}

/// `n` simple Queries that write, all sent before the writer answers any; then the answers.
fn simple_writes(n: usize) -> Duration {
    let one = query("select nextval('s')");
    let input = one.repeat(n);
    let mut answers = Vec::new();
    for i in 0..n {
        answers.extend(row_description(1));
        answers.extend(data_row(&["1"]));
        answers.extend(command_complete("SELECT 1"));
        answers.extend(rfq(b'I', Some(0x1000 + i as u64), None));
    }
    let (t, tally) = run(&input, &answers);
    assert_eq!(
        tally.to_writer,
        input.len(),
        "every statement went to the writer"
    );
    // The RFQs reach the client without the LSN extension's 8 bytes.
    assert_eq!(
        tally.to_client,
        answers.len() - 8 * n,
        "every answer reached the client"
    );
    t
}

/// A named INSERT prepared once (its row shape never described), then `n` batches of
/// Bind/Execute/Sync pipelined; then the answers.
fn extended_writes(n: usize) -> Duration {
    let mut input = parse("ins", "insert into t values ($1)");
    input.extend(sync());
    let mut batch = bind("", "ins");
    batch.extend(execute(""));
    batch.extend(sync());
    input.extend(batch.repeat(n));
    let mut answers = polarsplit_test_support::be::parse_complete();
    answers.extend(rfq(b'I', Some(0x1000), None));
    for i in 0..n {
        answers.extend(polarsplit_test_support::be::bind_complete());
        answers.extend(command_complete("INSERT 0 1"));
        answers.extend(rfq(b'I', Some(0x1001 + i as u64), None));
    }
    let (t, tally) = run(&input, &answers);
    assert_eq!(
        tally.to_writer,
        input.len(),
        "every batch went to the writer"
    );
    assert_eq!(
        tally.to_client,
        answers.len() - 8 * (n + 1),
        "every answer reached the client"
    );
    t
}

fn best_of_three(f: fn(usize) -> Duration, n: usize) -> Duration {
    (0..3).map(|_| f(n)).min().unwrap_or_default()
}

fn assert_linear(name: &str, f: fn(usize) -> Duration) {
    // Warm up (allocator, caches), then measure N and 4N.
    f(N / 10);
    let small = best_of_three(f, N);
    let large = best_of_three(f, 4 * N);
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-9);
    eprintln!(
        "{name}: {N} statements {small:?}, {} statements {large:?}: ratio {ratio:.1}",
        4 * N
    );
    assert!(
        ratio < 8.0,
        "{name}: 4× the pipelined statements took {ratio:.1}× the session's time ({small:?} → \
         {large:?}): its work per statement grows with the queue"
    );
}

#[test]
fn pipelined_simple_writes_cost_linear_time() {
    assert_linear("simple Query writes", simple_writes);
}

#[test]
fn pipelined_extended_writes_cost_linear_time() {
    assert_linear("Bind/Execute/Sync writes", extended_writes);
}
