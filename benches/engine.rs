//! The engine's cost on the query path (issue 9), always as a ratio to baselines measured in the
//! same run on the same inputs (these machines are noisy):
//!
//! - statement classification, cold and cached, against `sqlparser`'s full parse (what a naive
//!   router pays);
//! - one full cycle through the session API (client Query in, actions out, a typical backend
//!   result in, actions out) for a plain replica read, a wrapped read-your-writes read and a
//!   split read, against the same parse and against a floor that only frames the same bytes;
//! - heap allocations per cycle and bytes per idle session (a counting allocator).
//!
//! `cargo bench --bench engine` (add `-- quick` for a short run). Measurement: interleaved
//! batches (subject, baseline, subject, …), the median ns/op of each is reported.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use polarsplit::classify::{classify, Classifier, WriteFunctions};
use polarsplit::config::Config;
use polarsplit::protocol::framer::{BodyMode, Framer, Step};
use polarsplit::protocol::{Limits, Lsn};
use polarsplit::session::{Action, ClientInfo, Event, Session};
use polarsplit::Engine;
use polarsplit_test_support::be::{self, command_complete};
use polarsplit_test_support::fe::{self, query};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(n as i64 - l.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const REPORTING: &str = "WITH recent AS (SELECT o.customer_id, o.order_id, o.amount, o.created_at, \
row_number() OVER (PARTITION BY o.customer_id ORDER BY o.created_at DESC) AS rn FROM orders o \
WHERE o.created_at >= now() - interval '30 days' AND o.status IN ('paid', 'shipped', 'delivered')), \
totals AS (SELECT r.customer_id, sum(r.amount) AS total, count(*) AS orders, avg(r.amount) AS avg_amount, \
max(r.created_at) AS last_order FROM recent r GROUP BY r.customer_id HAVING sum(r.amount) > 100), \
ranked AS (SELECT t.*, rank() OVER (ORDER BY t.total DESC) AS total_rank, \
percent_rank() OVER (ORDER BY t.orders DESC) AS order_pct, lag(t.total) OVER (ORDER BY t.total DESC) AS prev_total \
FROM totals t) SELECT c.customer_id, c.name, c.email, c.country, r.total, r.orders, r.avg_amount, r.last_order, \
r.total_rank, r.order_pct, r.prev_total, coalesce(s.segment, 'none') AS segment, \
CASE WHEN r.total > 10000 THEN 'platinum' WHEN r.total > 5000 THEN 'gold' WHEN r.total > 1000 THEN 'silver' \
ELSE 'bronze' END AS tier, (SELECT count(*) FROM support_tickets st WHERE st.customer_id = c.customer_id \
AND st.opened_at >= now() - interval '90 days') AS tickets_90d, (SELECT string_agg(DISTINCT p.category, ', ' \
ORDER BY p.category) FROM recent r2 JOIN order_items oi ON oi.order_id = r2.order_id JOIN products p \
ON p.product_id = oi.product_id WHERE r2.customer_id = c.customer_id) AS categories FROM ranked r \
JOIN customers c ON c.customer_id = r.customer_id LEFT JOIN segments s ON s.customer_id = c.customer_id \
WHERE r.total_rank <= 500 AND c.deleted_at IS NULL AND c.country = ANY (ARRAY['US', 'CA', 'GB', 'DE', 'FR']) \
ORDER BY r.total_rank, c.customer_id LIMIT 500 OFFSET 0";

fn statements() -> Vec<(&'static str, String)> {
    vec![
        ("pgbench point select", "SELECT abalance FROM pgbench_accounts WHERE aid = 48213".into()),
        ("pgbench update", "UPDATE pgbench_accounts SET abalance = abalance + -2748 WHERE aid = 48213".into()),
        (
            "3-table join",
            "SELECT o.order_id, c.name, p.title FROM orders o JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id WHERE o.order_id = 91724".into(),
        ),
        ("2 KB reporting query", REPORTING.into()),
        ("locking read", "SELECT * FROM accounts WHERE id = 7 FOR UPDATE".into()),
        (
            "data-modifying CTE",
            "WITH moved AS (DELETE FROM queue WHERE id IN (SELECT id FROM queue ORDER BY id LIMIT 10) RETURNING *) SELECT count(*) FROM moved".into(),
        ),
        ("transaction control", "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY".into()),
    ]
}

/// Median ns/op of `f` over interleaved batches, for each of several functions.
fn measure(quick: bool, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let samples = if quick { 9 } else { 31 };
    // Calibrate the batch size on the first function: ~2 ms per batch.
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            (fs[0])();
        }
        if t.elapsed().as_micros() > 2000 || iters > 1 << 24 {
            break;
        }
        iters *= 2;
    }
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); fs.len()];
    for _ in 0..samples {
        for (k, f) in fs.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            results[k].push(t.elapsed().as_nanos() as f64 / iters as f64);
        }
    }
    results
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        })
        .collect()
}

/// An RFQ with an LSN and, when given, the `x` marker with this XID list (W-2).
fn rfq(status: u8, lsn: u64, xact: Option<&str>) -> Vec<u8> {
    be::rfq(status, Some(lsn), xact.map(|x| (b'x', x.as_bytes())))
}

/// RowDescription, three DataRows, CommandComplete: a typical small result.
fn result_set() -> Vec<u8> {
    let mut b = be::row_description(&[be::Column::new("abalance", be::oid::INT4)]);
    for v in ["-2748", "1024", "77"] {
        b.extend(be::data_row(&[Some(v)]));
    }
    b.extend(command_complete("SELECT 3"));
    b
}

const WRITER: u64 = 1;
const READER: u64 = 2;

/// A session that is connected, with reader 1 registered.
fn ready_session(engine: &Arc<Engine>) -> Session {
    let mut s = Session::new(
        engine.clone(),
        ClientInfo {
            client_addr: Some(("10.0.0.1".into(), 5000)),
            ..ClientInfo::default()
        },
    );
    s.recv_client(&fe::startup_plain("app", "db"), 0).unwrap();
    while s.poll_action().is_some() {}
    s.on_backend_event(WRITER, Event::WriterConnected, 0)
        .unwrap();
    while s.poll_action().is_some() {}
    let mut auth = be::auth_ok();
    auth.extend(rfq(b'I', 0x1000, None));
    s.recv_backend(WRITER, &auth, 0).unwrap();
    while s.poll_action().is_some() {}
    s
}

/// Drains the actions, touching each (a host would apply them).
fn drain(s: &mut Session) -> usize {
    let mut n = 0;
    while let Some(a) = s.poll_action() {
        n += match a {
            Action::SendBackend { bytes, .. } | Action::SendClient { bytes } => bytes.len(),
            Action::ForwardBackend { n, .. } | Action::ForwardClient { n, .. } => n,
            _ => 1,
        };
    }
    n
}

/// One cycle on a reader: the Query, the attach, the reader's answer.
fn reader_cycle(s: &mut Session, q: &[u8], answer: &[u8]) {
    s.recv_client(q, 1).unwrap();
    black_box(drain(s));
    if s.pinned_reader().is_none() {
        s.on_backend_event(
            READER,
            Event::ReaderAttached {
                server: 1,
                fresh: false,
                needs_reset: false,
            },
            1,
        )
        .unwrap();
        black_box(drain(s));
    }
    s.recv_backend(READER, answer, 1).unwrap();
    black_box(drain(s));
}

/// `cargo bench --bench engine -- profile-plain`: only the plain replica read cycle, for 10 s, to
/// run under a profiler (`perf record --call-graph dwarf target/release/deps/engine-… profile-plain`).
fn profile_plain() {
    let engine = Engine::new(Config {
        seed: 1,
        ..Config::default()
    });
    engine.add_reader(1, 1);
    let q = query("SELECT abalance FROM pgbench_accounts WHERE aid = 48213");
    let mut answer = result_set();
    answer.extend(rfq(b'I', 0x1000, None));
    let mut s = ready_session(&engine);
    let start = Instant::now();
    let mut cycles = 0u64;
    while start.elapsed().as_secs() < 10 {
        for _ in 0..1000 {
            reader_cycle(&mut s, &q, &answer);
        }
        cycles += 1000;
    }
    let ns = start.elapsed().as_nanos() as f64 / cycles as f64;
    println!("{cycles} plain read cycles, {ns:.0} ns each");
}

/// The floor: only framing the same bytes, no decision.
fn frame_only(q: &[u8], answer: &[u8]) -> usize {
    let limits = Limits::default();
    let mut n = 0;
    for bytes in [q, answer] {
        let mut f = Framer::new(limits);
        let mut pos = 0;
        while pos < bytes.len() {
            match f.step(&bytes[pos..], |t, _| {
                if t == b'D' || t == b'T' {
                    BodyMode::Stream
                } else {
                    BodyMode::Inspect
                }
            }) {
                Ok((Step::NeedMore, _)) => break,
                Ok((_, k)) => {
                    pos += k;
                    n += 1;
                }
                Err(_) => break,
            }
        }
    }
    n
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick" || a == "--quick");
    if std::env::args().any(|a| a == "profile-plain") {
        profile_plain();
        return;
    }
    // cargo bench passes `--bench`; ignore everything else.
    let wf = WriteFunctions::defaults();
    let dialect = PostgreSqlDialect {};

    println!("## Statement classification (median ns/op; ratio = polarsplit / sqlparser parse)\n");
    println!("| statement | sqlparser parse | cold classify | ratio | cached classify | ratio |");
    println!("|---|---:|---:|---:|---:|---:|");
    let classifier = Classifier::new(wf.clone(), 4096);
    let mut point_parse_ns = 0.0;
    for (name, sql) in statements() {
        let _ = classifier.classify(&sql);
        let r = measure(
            quick,
            &mut [
                &mut || {
                    black_box(Parser::parse_sql(&dialect, black_box(&sql)).ok());
                },
                &mut || {
                    black_box(classify(black_box(&sql), &wf));
                },
                &mut || {
                    black_box(classifier.classify(black_box(&sql)));
                },
            ],
        );
        if name == "pgbench point select" {
            point_parse_ns = r[0];
        }
        println!(
            "| {name} | {:.0} | {:.0} | 1/{:.1} | {:.0} | 1/{:.1} |",
            r[0],
            r[1],
            r[0] / r[1],
            r[2],
            r[0] / r[2]
        );
    }

    println!("\n## Full cycle through the session API (client Query in … backend result in, actions drained)\n");
    println!("| cycle | frame-only floor | polarsplit | × floor | sqlparser parse of the statement | ratio to parse | allocations/cycle |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let engine = Engine::new(Config {
        seed: 1,
        ..Config::default()
    });
    engine.add_reader(1, 1);
    let point = "SELECT abalance FROM pgbench_accounts WHERE aid = 48213";
    let q = query(point);
    // Plain read: nothing to wait for.
    let mut plain = result_set();
    plain.extend(rfq(b'I', 0x1000, None));
    // Wrapped read: the session wrote at 0x9000 (the reader is not known caught up).
    let mut wrapped = Vec::new();
    for _ in 0..3 {
        wrapped.extend(command_complete("SET"));
    }
    wrapped.extend(result_set());
    wrapped.extend(rfq(b'I', 0x9000, None));
    // Split read: inside a transaction after a write; the pinned reader is reused.
    let mut split = Vec::new();
    for _ in 0..4 {
        split.extend(command_complete("SET"));
    }
    split.extend(result_set());
    split.extend(rfq(b'I', 0x8000, None));

    for (name, answer) in [
        ("plain replica read", &plain),
        ("wrapped read-your-writes read", &wrapped),
        ("split read in a transaction", &split),
    ] {
        let mut s = ready_session(&engine);
        match name {
            "wrapped read-your-writes read" => {
                s.recv_client(&query("UPDATE t SET v = 1"), 0).unwrap();
                drain(&mut s);
                let mut a = command_complete("UPDATE 1");
                a.extend(rfq(b'I', 0x9000, None));
                s.recv_backend(WRITER, &a, 0).unwrap();
                drain(&mut s);
            }
            "split read in a transaction" => {
                s.recv_client(&query("BEGIN"), 0).unwrap();
                drain(&mut s);
                let mut a = command_complete("BEGIN");
                a.extend(rfq(b'T', 0x1000, Some("")));
                s.recv_backend(WRITER, &a, 0).unwrap();
                drain(&mut s);
                engine.reader_sample(1, Lsn(0x1000), 0);
                reader_cycle(&mut s, &q, &plain);
                s.recv_client(&query("UPDATE t SET v = 1"), 0).unwrap();
                drain(&mut s);
                let mut a = command_complete("UPDATE 1");
                a.extend(rfq(b'T', 0x8000, Some("1,900")));
                s.recv_backend(WRITER, &a, 0).unwrap();
                drain(&mut s);
            }
            _ => {}
        }
        // Warm up (caches, buffer capacities), then count allocations over 1000 cycles.
        for _ in 0..100 {
            reader_cycle(&mut s, &q, answer);
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        for _ in 0..1000 {
            reader_cycle(&mut s, &q, answer);
        }
        let allocs = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / 1000.0;
        let r = measure(
            quick,
            &mut [
                &mut || {
                    black_box(frame_only(black_box(&q), black_box(answer)));
                },
                &mut || reader_cycle(&mut s, &q, answer),
                &mut || {
                    black_box(Parser::parse_sql(&dialect, black_box(point)).ok());
                },
            ],
        );
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.0} | 1/{:.1} | {allocs:.2} |",
            r[0],
            r[1],
            r[1] / r[0],
            r[2],
            r[2] / r[1]
        );
    }

    println!("\n## Memory per idle session\n");
    let n = 1000;
    let live_before = LIVE.load(Ordering::Relaxed);
    let sessions: Vec<Session> = (0..n).map(|_| ready_session(&engine)).collect();
    let live_after = LIVE.load(Ordering::Relaxed);
    let per = (live_after - live_before) as f64 / n as f64;
    println!(
        "{n} connected idle sessions: {:.0} bytes of heap each (the Session value itself is {} bytes of that when boxed by a host)",
        per,
        std::mem::size_of::<Session>()
    );
    drop(sessions);
    println!("\nTargets: cached plain read cycle ≤ 1/10 of one parse; cold point-select classification ≤ 1/5 of one parse (parse here: {point_parse_ns:.0} ns); 0 allocations per cached cycle; idle session ≤ 2 KiB.");
}
