//! Heap allocations per statement cycle in steady state (issue 9's target: zero for cached
//! statements), counted by a global allocator in this test binary.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use polarsplit::Event;
use polarsplit::Lsn;

struct Counting;

static COUNT: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // Only the measuring thread counts: the test harness runs other tests on other threads.
    static ON: Cell<bool> = const { Cell::new(false) };
}

fn counting() -> bool {
    ON.try_with(|c| c.get()).unwrap_or(false)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(p, l, n) }
    }
}

/// One measurement at a time (the counter is shared).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[global_allocator]
static A: Counting = Counting;

/// Drains actions without copying them (a real host would apply them).
fn drain(h: &mut Host) {
    while h.session.poll_action().is_some() {}
}

fn cycle(h: &mut Host, q: &[u8], conn: u64, answer: &[u8], attach: bool) {
    h.session.recv_client(q, h.now).unwrap();
    drain(h);
    if attach {
        h.session
            .on_backend_event(
                conn,
                Event::ReaderAttached {
                    server: 1,
                    fresh: false,
                    needs_reset: false,
                },
                h.now,
            )
            .unwrap();
        drain(h);
    }
    h.session.recv_backend(conn, answer, h.now).unwrap();
    drain(h);
}

fn measure(h: &mut Host, q: &[u8], conn: u64, answer: &[u8], attach: bool) -> u64 {
    // Warm up: caches, buffers, capacities.
    for _ in 0..50 {
        cycle(h, q, conn, answer, attach);
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    COUNT.store(0, Ordering::Relaxed);
    ON.with(|c| c.set(true));
    for _ in 0..100 {
        cycle(h, q, conn, answer, attach);
    }
    ON.with(|c| c.set(false));
    COUNT.load(Ordering::Relaxed)
}

#[test]
fn cached_plain_read_cycle_allocates_nothing() {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    let q = query("SELECT abalance FROM pgbench_accounts WHERE aid = 42");
    let mut ans = select_result(&["1234"]);
    ans.extend(rfq(b'I', Some(0x1000), None));
    let n = measure(&mut h, &q, 201, &ans, true);
    assert_eq!(n, 0, "allocations in 100 plain-read cycles");
}

#[test]
fn cached_wrapped_read_cycle_allocates_nothing() {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h.client(&query("UPDATE t SET v = 1"));
    h.writer_answers("UPDATE 1", b'I', Some(0x9000), None);
    h.engine.reader_sample(1, Lsn(0x10), h.now);
    let q = query("SELECT v FROM t WHERE k = 1");
    let mut ans = Vec::new();
    for _ in 0..3 {
        ans.extend(command_complete("SET"));
    }
    ans.extend(select_result(&["1"]));
    ans.extend(rfq(b'I', Some(0x9000), None));
    let n = measure(&mut h, &q, 201, &ans, true);
    assert_eq!(n, 0, "allocations in 100 wrapped-read cycles");
}

#[test]
fn cached_writer_statement_cycle_allocates_nothing() {
    let mut h = Host::new(config(&[]));
    h.connect();
    let q = query("UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7");
    let mut ans = command_complete("UPDATE 1");
    ans.extend(rfq(b'I', Some(0x9000), None));
    let n = measure(&mut h, &q, WRITER, &ans, false);
    assert_eq!(n, 0, "allocations in 100 writer cycles");
}

/// Attaches reader connection 201 as opened for this request (nothing prepared on it yet),
/// and answers its settings replay (S-5's login check: nothing else to replay).
fn attach_fresh(h: &mut Host) {
    h.event(
        201,
        Event::ReaderAttached {
            server: 1,
            fresh: true,
            needs_reset: false,
        },
    );
    assert!(h.answer_bare_replay(201).is_some(), "the login check first");
}

#[test]
fn e2_cached_unnamed_extended_read_cycle_allocates_nothing() {
    // psycopg's and `pgbench -M extended`'s shape: Parse/Bind/Describe/Execute/Sync of the
    // unnamed statement, the same text every time (issue 20's extended-cycle target).
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    let batch = unnamed_batch("SELECT abalance FROM pgbench_accounts WHERE aid = $1");
    h.client(&batch);
    attach_fresh(&mut h);
    assert_eq!(tags(&h.take_sent(201)), "PBDES");
    h.backend(201, &parsed_answer(&["1234"], Some(0x1000)));
    assert_eq!(tags(&h.take_client()), "12TDCZ");
    // Prepared on the pooled connection now: the reader is sent only Bind/Describe/Execute/Sync.
    h.client(&batch);
    h.attach(201);
    assert_eq!(tags(&h.take_sent(201)), "BDES");
    let ans = bound_answer(&["1234"], Some(0x1000));
    h.backend(201, &ans);
    assert_eq!(tags(&h.take_client()), "12TDCZ");
    let n = measure(&mut h, &batch, 201, &ans, true);
    assert_eq!(n, 0, "allocations in 100 unnamed extended-read cycles");
}

#[test]
fn e2_cached_named_extended_read_cycle_allocates_nothing() {
    // A named prepared statement executed again and again (psycopg after prepare_threshold,
    // asyncpg, JDBC, `pgbench -M prepared`): Bind/Describe/Execute/Sync.
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    let mut prep = parse("s1", "SELECT abalance FROM pgbench_accounts WHERE aid = $1");
    prep.extend(sync());
    h.client(&prep);
    attach_fresh(&mut h);
    let mut ans = msg(b'1', b"");
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(201, &ans);
    assert_eq!(tags(&h.take_client()), "1Z");
    h.take_sent(201);
    let batch = named_execute("s1");
    h.client(&batch);
    h.attach(201);
    assert_eq!(tags(&h.take_sent(201)), "BDES");
    let ans = bound_answer(&["1234"], Some(0x1000));
    h.backend(201, &ans);
    assert_eq!(tags(&h.take_client()), "2TDCZ");
    let n = measure(&mut h, &batch, 201, &ans, true);
    assert_eq!(n, 0, "allocations in 100 named extended-read cycles");
}

#[test]
fn e1_cached_writer_extended_cycle_allocates_nothing() {
    // `pgbench -M extended`'s UPDATE: the batch goes to the writer by count, its Execute's
    // classification kept for the effects at its RFQ.
    let mut h = Host::new(config(&[]));
    h.connect();
    let batch = unnamed_batch("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = 7");
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b'2', b""));
    ans.extend(msg(b'n', b""));
    ans.extend(command_complete("UPDATE 1"));
    ans.extend(rfq(b'I', Some(0x9000), None));
    h.client(&batch);
    assert_eq!(tags(&h.take_sent(WRITER)), "PBDES");
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "12nCZ");
    let n = measure(&mut h, &batch, WRITER, &ans, false);
    assert_eq!(n, 0, "allocations in 100 writer extended cycles");
}
