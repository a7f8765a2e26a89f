//! Hostile clients (issue 10): a 1 GB length prefix, 100,000 statements in one Query, 10 MB of
//! SQL, SQL nested 100,000 levels deep, invalid UTF-8, NUL bytes inside a Query, a pipelining
//! flood. Each gets a clear error or goes to the primary; nothing panics, the classifier stays
//! linear and never recurses (it runs on a 64 KiB stack here), and the session's heap stays
//! bounded — measured by a counting allocator; the numbers are printed (`--nocapture`).

mod hostile_common;

use std::time::Instant;

use hostile_common::{contains, measure, msg, query, Counting, Lean, WRITER};
use polarsplit::internals::classify::{classify, NotSafe, WriteFunctions};
use polarsplit::{Outcome, Reason, SessionError};

#[global_allocator]
static ALLOC: Counting = Counting;

fn connected() -> Lean {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.connect();
    l.seen = Default::default();
    l.client_fed = 0;
    l.copy = false;
    l
}

/// Feeds `bytes` in socket-sized pieces; returns (peak heap above the start, allocations, s).
fn feed_in_pieces(l: &mut Lean, bytes: &[u8], piece: usize) -> (usize, u64, f64) {
    let t = Instant::now();
    let ((), peak, allocs) = measure(|| {
        for p in bytes.chunks(piece) {
            let n = l.client(p).expect("client bytes");
            assert_eq!(n, p.len());
        }
    });
    (peak, allocs, t.elapsed().as_secs_f64())
}

fn last_decision(l: &Lean) -> polarsplit::Decision {
    *l.seen.decisions.last().expect("a decision")
}

/// Runs `f` on a thread with a 64 KiB stack: a recursive descent over deep input would overflow.
fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(64 << 10)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no stack overflow, no panic")
}

// --- Length prefixes --------------------------------------------------------------------------

#[test]
fn a_one_gigabyte_length_prefix_is_a_protocol_error_before_anything_is_buffered() {
    for (tag, len) in [
        (b'Q', 1u32 << 30),
        (b'Q', u32::MAX),
        (b'P', 1 << 30),
        (b'p', 0x8000_0000),
        (b'd', 1 << 31),
    ] {
        let mut l = connected();
        l.copy = true;
        let mut hdr = vec![tag];
        hdr.extend_from_slice(&len.to_be_bytes());
        let (r, peak, _) = measure(|| l.client(&hdr));
        match r {
            Err(e @ SessionError::Protocol { .. }) => {
                assert!(e.to_string().contains("exceeds the limit"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(peak < 16 << 10, "{peak} bytes for a refused header");
        assert!(l.seen.close_client);
        assert!(l.session.is_closed());
        let text = String::from_utf8_lossy(&l.seen.send_client).into_owned();
        assert!(
            text.contains("08P01") && text.contains("exceeds the limit"),
            "{text}"
        );
        // Nothing reached the writer.
        assert!(l.seen.client_fwd.is_empty());
        eprintln!(
            "'{}' with length {len}: protocol error, peak heap +{peak} B",
            tag as char
        );
    }
}

#[test]
fn a_startup_packet_with_a_huge_length_is_refused() {
    for len in [10_001u32, 1 << 30, u32::MAX] {
        let mut l = Lean::new(polarsplit_test_support::default_config());
        let (r, peak, _) = measure(|| l.client(&len.to_be_bytes()));
        assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
        assert!(peak < 16 << 10);
        assert!(l.seen.close_client);
    }
}

#[test]
fn a_query_of_one_gigabyte_minus_one_streams_to_the_primary_by_count() {
    // The largest length PostgreSQL accepts: too large to inspect, so the engine streams it to
    // the primary without copying (QUERY_TOO_LARGE).
    let mut l = connected();
    let mut hdr = vec![b'Q'];
    hdr.extend_from_slice(&((1u32 << 30) - 1).to_be_bytes());
    l.client(&hdr).unwrap();
    let d = last_decision(&l);
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::QueryTooLarge)
    );
    let chunk = vec![b' '; 1 << 20];
    let t = Instant::now();
    let ((), peak, allocs) = measure(|| {
        for _ in 0..128 {
            assert_eq!(l.client(&chunk).unwrap(), chunk.len());
        }
    });
    eprintln!(
        "1 GiB Query, first 128 MiB in 1 MiB pieces: {:.2} s, peak heap +{peak} B, {allocs} allocations",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(allocs, 0);
    assert_eq!(l.client_acted(), l.client_fed);
    assert_eq!(l.seen.client_fwd.get(&WRITER).copied(), Some(l.client_fed));
}

// --- Many statements, long SQL, deep nesting --------------------------------------------------

#[test]
fn one_hundred_thousand_statements_in_one_query_go_to_the_primary_in_linear_time() {
    let sql = "SELECT 1;".repeat(100_000);
    assert!(sql.len() < 1 << 20, "inspected (under the 1 MiB limit)");
    let t = Instant::now();
    let c = classify(&sql, &WriteFunctions::defaults());
    let classify_s = t.elapsed().as_secs_f64();
    assert!(!c.is_replica_safe());
    assert_eq!(c.first().not_safe, NotSafe::TooComplex);

    let mut l = connected();
    let (peak, _, secs) = feed_in_pieces(&mut l, &query(sql.as_bytes()), 64 << 10);
    let d = last_decision(&l);
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::TooComplex)
    );
    eprintln!(
        "100,000 statements ({} KiB): classify {classify_s:.3} s; session {secs:.3} s, peak heap +{peak} B",
        sql.len() >> 10
    );
    // One copy of the message in the framer (it came in pieces: at most the 1 MiB inspection
    // limit) and the classifier's statement list (at most its 10,000-statement limit).
    assert!(peak < 5 << 19, "{peak}");
    assert_eq!(l.client_acted(), l.client_fed);
}

#[test]
fn ten_megabytes_of_sql_go_to_the_primary_without_being_copied() {
    let sql = format!("SELECT '{}'", "x".repeat(10 << 20));
    let wf = WriteFunctions::defaults();
    let t = Instant::now();
    let c = classify(&sql, &wf);
    let classify_s = t.elapsed().as_secs_f64();
    assert!(!c.is_replica_safe());
    assert_eq!(c.first().not_safe, NotSafe::TooComplex);

    let mut l = connected();
    let (peak, _, secs) = feed_in_pieces(&mut l, &query(sql.as_bytes()), 64 << 10);
    let d = last_decision(&l);
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::QueryTooLarge)
    );
    eprintln!(
        "10 MiB of SQL: classify {classify_s:.3} s; session {secs:.3} s, peak heap +{peak} B"
    );
    assert!(peak < 64 << 10, "{peak}");
    assert_eq!(l.seen.client_fwd.get(&WRITER).copied(), Some(l.client_fed));
}

#[test]
fn classification_time_is_linear_in_the_text_length() {
    // Texts under the classifier's 1 MiB bound, growing 32-fold: linear time grows about 32-fold,
    // quadratic 1024-fold; the bound between leaves room for a debug build's cache effects.
    // The fastest of several interleaved runs filters out a busy machine.
    let wf = WriteFunctions::defaults();
    type Shape = (&'static str, fn(usize) -> String);
    let shapes: [Shape; 4] = [
        ("long literal", |n| format!("SELECT '{}'", "x".repeat(n))),
        ("many columns", |n| {
            format!("SELECT {}1 FROM t", "a, ".repeat(n / 3))
        }),
        ("comments", |n| {
            format!("SELECT 1 {}", "/* c */ ".repeat(n / 8))
        }),
        ("dollar quote", |n| {
            format!("SELECT $q${}$q$", "$".repeat(n))
        }),
    ];
    for (what, make) in shapes {
        let (small, large) = (make(30_000), make(960_000));
        let time = |s: &str| {
            let t = Instant::now();
            std::hint::black_box(classify(s, &wf));
            t.elapsed().as_secs_f64()
        };
        let (mut ts, mut tl) = (f64::MAX, f64::MAX);
        for _ in 0..7 {
            ts = ts.min(time(&small));
            tl = tl.min(time(&large));
        }
        let ratio = tl / ts.max(1e-6);
        eprintln!("{what}: 30 KB {ts:.4} s, 960 KB {tl:.4} s (x{ratio:.1})");
        assert!(ratio < 256.0, "{what}: x{ratio} for 32 times the text");
    }
}

fn nested(depth: usize, open: &str, close: &str) -> String {
    format!("SELECT {}1{}", open.repeat(depth), close.repeat(depth))
}

#[test]
fn sql_nested_one_hundred_thousand_levels_deep_never_recurses() {
    let shapes: Vec<(&str, String)> = vec![
        ("parentheses", nested(100_000, "(", ")")),
        (
            "unclosed parentheses",
            format!("SELECT {}1", "(".repeat(100_000)),
        ),
        ("brackets", nested(100_000, "ARRAY[", "]")),
        ("subqueries", nested(50_000, "(SELECT ", ")")),
        ("CASE", nested(50_000, "CASE WHEN true THEN ", " END")),
        (
            "nested comments",
            format!("SELECT 1 {}x{}", "/*".repeat(100_000), "*/".repeat(100_000)),
        ),
        (
            "BEGIN ATOMIC",
            format!(
                "CREATE FUNCTION f() RETURNS int BEGIN ATOMIC {} END",
                "BEGIN ATOMIC ".repeat(100_000)
            ),
        ),
    ];
    // Closing parentheses without opening ones: a syntax error on any server (the verdict does
    // not matter: whichever server gets it refuses it); it must simply not hurt.
    let closing = format!("SELECT 1{}", ")".repeat(100_000));
    on_small_stack(move || classify(&closing, &WriteFunctions::defaults()));
    for (what, sql) in shapes {
        let len = sql.len();
        let (c, secs) = on_small_stack(move || {
            let t = Instant::now();
            let c = classify(&sql, &WriteFunctions::defaults());
            (c, t.elapsed().as_secs_f64())
        });
        // Deep parentheses exceed the classifier's depth limit; other deep shapes may well be
        // reads (the server's own stack limit refuses them). What matters: no recursion, no
        // panic, linear time.
        if what.contains("parentheses") || what == "subqueries" {
            assert_eq!(c.first().not_safe, NotSafe::TooComplex, "{what}");
        }
        assert!(secs < 5.0, "{what}: {secs} s");
        eprintln!(
            "{what} ({} KiB): {secs:.3} s on a 64 KiB stack, {:?} / {:?}",
            len >> 10,
            c.first().kind,
            c.first().not_safe
        );
    }
    // Through a session, also on a small stack: to the primary as too complex.
    let (outcome, reason) = on_small_stack(|| {
        let mut l = connected();
        let q = query(nested(100_000, "(", ")").as_bytes());
        l.client(&q).unwrap();
        let d = last_decision(&l);
        (d.outcome, d.reason)
    });
    assert_eq!(
        (outcome, reason),
        (Outcome::ForcePrimary, Reason::TooComplex)
    );
}

// --- Bytes that are not text ------------------------------------------------------------------

#[test]
fn invalid_utf8_goes_to_the_primary() {
    for sql in [
        &b"SELECT '\xff\xfe'"[..],
        b"SELECT 1 -- \xc3",
        b"\xed\xa0\x80SELECT 1", // a UTF-16 surrogate in UTF-8 form
        b"SELECT \xf8\x88\x80\x80\x80",
    ] {
        let mut l = connected();
        l.client(&query(sql)).unwrap();
        let d = last_decision(&l);
        assert_eq!(
            (d.outcome, d.reason),
            (Outcome::ForcePrimary, Reason::InvalidUtf8),
            "{sql:?}"
        );
        assert_eq!(l.seen.client_fwd.get(&WRITER).copied(), Some(l.client_fed));
    }
    // In an extended-protocol Parse: unclassifiable, so the primary.
    let mut l = connected();
    let mut p = b"\0SELECT '\xff'\0".to_vec();
    p.extend_from_slice(&0i16.to_be_bytes());
    let mut b = msg(b'P', &p);
    b.extend(msg(b'B', b"\0\0\0\0\0\0\0\0"));
    b.extend(msg(b'E', b"\0\0\0\0\0"));
    b.extend(msg(b'S', b""));
    l.client(&b).unwrap();
    assert_eq!(last_decision(&l).outcome, Outcome::ForcePrimary);
    assert!(l.seen.acquire.is_none());
}

#[test]
fn nul_bytes_inside_a_query_are_a_protocol_error_and_reach_no_backend() {
    for body in [
        &b"SELECT 1\0; DROP TABLE evil\0"[..],
        b"\0SELECT 1\0",
        b"SELECT 1\0\0",
        b"SELECT 1",    // no terminating NUL at all
        b"SELECT 1\0x", // bytes after the NUL
    ] {
        let mut l = connected();
        l.copy = true;
        let r = l.client(&msg(b'Q', body));
        match r {
            Err(e @ SessionError::Protocol { .. }) => assert!(e.to_string().contains("'Q'"), "{e}"),
            other => panic!("{body:?}: {other:?}"),
        }
        assert!(l.seen.client_fwd.is_empty(), "{body:?} was forwarded");
        assert!(l
            .seen
            .send_backend
            .iter()
            .all(|(_, b)| !contains(b, b"evil")));
        assert!(l.seen.close_client);
        assert!(l.seen.decisions.is_empty());
    }
}

#[test]
fn binary_garbage_after_startup_is_a_protocol_error() {
    let mut l = connected();
    let r = l.client(&[0xff, 0, 0, 0, 4]);
    assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
    assert!(l.seen.close_client);
    let mut l = connected();
    let r = l.client(&[b'Q', 0, 0, 0, 3]);
    assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
}

// --- Pipelining flood -------------------------------------------------------------------------

#[test]
fn a_pipelining_flood_is_taken_in_bounded_bites() {
    // 100,000 reads sent at once: the session takes a bounded number of undecided messages
    // and leaves the rest in the host's buffer until the first ones complete.
    let one = query(b"SELECT v FROM t WHERE k = 1");
    let flood: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 100_000)
        .collect();
    let mut l = connected();
    let (r, peak, _) = measure(|| l.client(&flood));
    let taken = r.unwrap();
    eprintln!(
        "pipelining flood of 100,000 Queries ({} KiB): {} taken at once, peak heap +{peak} B",
        flood.len() >> 10,
        taken / one.len()
    );
    assert!(taken < flood.len(), "everything taken at once");
    assert_eq!(taken % one.len(), 0, "stopped at a message boundary");
    assert!(peak < 8 << 20, "{peak}");
}

// --- Messages out of place --------------------------------------------------------------------

#[test]
fn a_password_message_after_authentication_waits_its_turn_and_is_never_cut_into() {
    // Found by the session fuzz target: a PasswordMessage after authentication (only ever a
    // client bug or an attack) was passed to the writer at once, ahead of the statement in
    // flight; a large one was still streaming when the statement fell back to the writer, and
    // the engine's copy of the statement landed inside it.
    use polarsplit::Event;
    let mut l = connected();
    l.copy = true;
    l.client(&query(b"SELECT 1")).unwrap();
    assert!(l.seen.acquire.is_some(), "the read goes to a reader");
    // A 'p' declaring 10,000 bytes, 95 of them sent so far.
    let mut p = vec![b'p'];
    p.extend_from_slice(&10_004u32.to_be_bytes());
    p.extend_from_slice(&[b'}'; 95]);
    assert_eq!(l.client(&p).unwrap(), p.len());
    assert!(
        l.seen.client_fwd.is_empty(),
        "the password passed the statement in flight"
    );
    l.event(
        999,
        Event::ReaderUnavailable {
            no_credentials: true,
        },
    )
    .unwrap();
    // The statement goes to the writer whole, nothing of the 'p' before it or behind it while
    // it runs.
    assert_eq!(l.seen.send_backend.len(), 1);
    assert_eq!(l.seen.send_backend[0], (WRITER, query(b"SELECT 1")));
    assert!(l.seen.client_fwd.is_empty());
    // After the statement, the 'p' follows in order (the server refuses it).
    let mut b = msg(b'C', b"SELECT 1\0");
    b.extend(msg(b'Z', b"I"));
    l.backend(WRITER, &b).unwrap();
    assert_eq!(
        l.seen.client_fwd.get(&WRITER).copied(),
        Some(p.len() as u64)
    );
}

// --- Session state a client can make the engine remember ----------------------------------------

#[test]
fn sets_repeated_inside_an_open_transaction_do_not_grow_the_session() {
    // SET inside a transaction is remembered until COMMIT (S-4). A client that keeps a
    // transaction open and repeats SET — 10,000 times here, 100 per Query — must not make the
    // engine's memory grow with it.
    use hostile_common::{command_complete, live_bytes, rfq};
    let mut l = connected();
    l.client(&query(b"BEGIN")).unwrap();
    let mut b = command_complete("BEGIN");
    b.extend(rfq(b'T', Some(0x1000), Some((b'x', b""))));
    l.backend(WRITER, &b).unwrap();
    let value = "x".repeat(200);
    let one = format!("SET search_path = '{value}'; ");
    let sql = one.repeat(100);
    let mut answer = Vec::new();
    for _ in 0..100 {
        answer.extend(command_complete("SET"));
    }
    answer.extend(rfq(b'T', Some(0x1000), Some((b'x', b""))));
    let round = |l: &mut Lean| {
        l.client(&query(sql.as_bytes())).unwrap();
        l.backend(WRITER, &answer).unwrap();
    };
    round(&mut l);
    let before = live_bytes();
    let t = Instant::now();
    for _ in 0..99 {
        round(&mut l);
    }
    let grown = live_bytes() - before;
    eprintln!(
        "10,000 SETs in one open transaction: {:.2} s, session heap grew by {grown} B",
        t.elapsed().as_secs_f64()
    );
    assert!(grown < 128 << 10, "the session grew by {grown} bytes");
    // COMMIT: the settings it could not follow keep the session on the writer (S-4).
    l.client(&query(b"COMMIT")).unwrap();
    let mut b = command_complete("COMMIT");
    b.extend(rfq(b'I', Some(0x1100), None));
    l.backend(WRITER, &b).unwrap();
    l.client(&query(b"SELECT 1")).unwrap();
    assert_eq!(last_decision(&l).outcome, Outcome::ForcePrimary);
}

/// A StartupMessage of a protocol version no server speaks (4.0) is refused as PostgreSQL refuses
/// it — FATAL 0A000 "unsupported frontend protocol 4.0: server supports 3.0 to 3.0" — not as a
/// protocol violation (08P01), so a client that tries it recognises the answer.
#[test]
fn an_unsupported_protocol_version_is_refused_as_the_server_refuses_it() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    let mut body = Vec::new();
    body.extend_from_slice(b"user\0app\0\0");
    let r = l.client(&polarsplit_test_support::fe::untagged(4 << 16, &body));
    assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
    assert!(l.seen.close_client);
    let text = String::from_utf8_lossy(&l.seen.send_client).into_owned();
    assert!(
        text.contains("0A000")
            && text.contains("unsupported frontend protocol 4.0: server supports 3.0 to 3.0"),
        "{text}"
    );
}
