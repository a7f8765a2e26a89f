//! Hostile backends (issue 10): malformed ReadyForQuery extensions, hostile XID lists, results
//! that never end, connections lost in the middle of a message. Each gets a clear error or a
//! fallback, nothing panics, and the session's memory stays bounded: a counting allocator
//! measures the engine's own heap while a lean host forwards by count without holding any byte.

mod common;
mod hostile_common;

use std::time::Instant;

use common::{
    command_complete, data_row, query, rfq, row_description, select_result, tags, Host, A,
};
use hostile_common::{measure, Counting, Lean, WRITER};
use polarsplit::Lsn;
use polarsplit::{Event, Outcome, Reason, SessionError};

#[global_allocator]
static ALLOC: Counting = Counting;

const R1: u64 = 501;

fn host() -> Host {
    let mut h = Host::new(polarsplit_test_support::default_config());
    h.connect();
    h
}

/// A read that goes to a reader: returns the reader's server after attaching `conn`.
fn read_on_reader(h: &mut Host, sql: &str, conn: u64) {
    let acts = h.client(&query(sql));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(conn);
    h.take_sent(conn);
}

/// Every byte the client got is whole messages (the engine never cut into one).
fn whole_messages(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    while rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if len < 4 || rest.len() < 1 + len {
            return false;
        }
        rest = &rest[1 + len..];
    }
    rest.is_empty()
}

// --- Connections lost in the middle of a message (found by the session fuzz target) ----------

/// A DataRow larger than what the engine holds back to forward whole (64 KiB): part of it
/// reaches the client before the rest arrives.
fn big_row() -> Vec<u8> {
    data_row(&[&"r".repeat(100_000)])
}

#[test]
fn reader_lost_mid_row_closes_the_client_without_injecting_bytes_into_the_row() {
    let mut h = host();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    let mut b = row_description(1);
    let row = big_row();
    b.extend_from_slice(&row[..70_000]);
    h.backend(R1, &b);
    let before = h.take_client();
    assert!(
        before.len() > row_description(1).len(),
        "part of the row went out"
    );
    let acts = h.event(R1, Event::ConnectionLost);
    // An ErrorResponse (or anything else) now would land inside the half-sent DataRow: the
    // client could only misread it. The one honest answer is to close the client.
    assert!(
        !acts.iter().any(|a| matches!(a, A::SendClient(_))),
        "{acts:?}"
    );
    assert!(acts.contains(&A::CloseClient), "{acts:?}");
    assert!(h.session.is_closed());
}

#[test]
fn writer_lost_mid_row_closes_the_client_without_injecting_bytes_into_the_row() {
    let mut h = host();
    h.client(&query("SELECT * FROM big FOR UPDATE"));
    let mut b = row_description(1);
    b.extend_from_slice(&big_row()[..70_000]);
    h.backend(WRITER_CONN, &b);
    assert!(!h.take_client().is_empty());
    let acts = h.event(WRITER_CONN, Event::ConnectionLost);
    assert!(
        !acts.iter().any(|a| matches!(a, A::SendClient(_))),
        "{acts:?}"
    );
    assert!(acts.contains(&A::CloseClient), "{acts:?}");
}

#[test]
fn client_violation_while_a_row_streams_closes_without_injecting_bytes_into_the_row() {
    let mut h = host();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    let mut b = row_description(1);
    b.extend_from_slice(&big_row()[..70_000]);
    h.backend(R1, &b);
    assert!(!h.take_client().is_empty());
    let r = h.session.recv_client(&[b'Q', 0, 0, 0, 2], h.now);
    assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
    h.streams.fed_client(&[b'Q', 0, 0, 0, 2]);
    let acts = h.drain();
    assert!(
        !acts.iter().any(|a| matches!(a, A::SendClient(_))),
        "{acts:?}"
    );
    assert!(acts.contains(&A::CloseClient));
}

#[test]
fn writer_lost_while_a_reader_row_streams_closes_without_injecting_bytes_into_the_row() {
    let mut h = host();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    let mut b = row_description(1);
    b.extend_from_slice(&big_row()[..70_000]);
    h.backend(R1, &b);
    assert!(!h.take_client().is_empty());
    let acts = h.event(WRITER_CONN, Event::ConnectionLost);
    assert!(
        !acts.iter().any(|a| matches!(a, A::SendClient(_))),
        "{acts:?}"
    );
    assert!(acts.contains(&A::CloseClient));
}

#[test]
fn reader_lost_inside_a_small_row_still_gets_its_error_whole() {
    // A small message is forwarded only once whole: a reader lost inside one left nothing of
    // it with the client, so the engine's error is delivered whole and the session goes on.
    let mut h = host();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    let mut b = row_description(1);
    b.extend(data_row(&["1"]));
    b.extend_from_slice(&data_row(&["0123456789abcdef"])[..9]);
    h.backend(R1, &b);
    let acts = h.event(R1, Event::ConnectionLost);
    assert!(!acts.contains(&A::CloseClient), "{acts:?}");
    let got = h.take_client();
    assert!(whole_messages(&got));
    assert_eq!(tags(&got), "TDEZ");
    assert!(!h.session.is_closed());
}

const WRITER_CONN: u64 = common::WRITER;

// --- Malformed RFQ extensions -----------------------------------------------------------------

/// RFQ bodies that break W-2 on a connection that asked for LSN and XID reporting.
fn malformed_rfq_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let mut lsn = vec![b'T'];
    lsn.extend_from_slice(&0x2000u64.to_be_bytes());
    let with = |tail: &[u8]| {
        let mut v = lsn.clone();
        v.extend_from_slice(tail);
        v
    };
    vec![
        ("empty body", vec![]),
        ("unknown status", vec![b'Q']),
        ("status NUL", vec![0]),
        ("LSN of 3 bytes", vec![b'I', 0, 0, 1]),
        ("LSN of 7 bytes", vec![b'I', 0, 0, 0, 0, 0, 0, 1]),
        ("unknown marker", with(b"q1,2\0")),
        ("marker without NUL", with(b"x1,2")),
        ("marker alone", with(b"x")),
        ("binary marker", with(&[0xff, 0xfe, 0])),
    ]
}

#[test]
fn malformed_rfq_from_the_writer_is_a_clear_protocol_error_and_closes() {
    for (what, body) in malformed_rfq_bodies() {
        let mut h = host();
        h.client(&query("INSERT INTO t VALUES (1)"));
        let mut b = command_complete("INSERT 0 1");
        b.extend(common::msg(b'Z', &body));
        let r = h.session.recv_backend(WRITER_CONN, &b, h.now);
        match r {
            Err(
                e @ SessionError::Protocol {
                    peer: "primary", ..
                },
            ) => assert!(!e.to_string().is_empty(), "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
        h.streams.fed_backend(WRITER_CONN, &b);
        let acts = h.drain();
        assert!(acts.contains(&A::CloseClient), "{what}: {acts:?}");
        assert!(h.session.is_closed(), "{what}");
        let got = h.take_client();
        assert!(whole_messages(&got), "{what}");
        assert!(
            String::from_utf8_lossy(&got).contains("protocol violation by the primary"),
            "{what}"
        );
    }
}

#[test]
fn malformed_rfq_from_a_reader_falls_back_to_the_writer() {
    // Readers ask for LSNs only: bytes after the LSN are skipped (W-2), so only the status and
    // LSN can be malformed.
    for (what, body) in malformed_rfq_bodies().into_iter().take(5) {
        let mut h = host();
        read_on_reader(&mut h, "SELECT v FROM t", R1);
        let mut b = common::msg(b'Z', &body);
        b.extend(rfq(b'I', Some(0x3000), None));
        let acts = h.backend(R1, &b);
        // The reader is dropped (it broke the protocol); the statement is rerun elsewhere — on
        // the other reader or the writer, per F-1 — and completes for the client.
        assert!(acts.contains(&A::CloseBackend(R1)), "{what}: {acts:?}");
        assert!(!h.session.is_closed(), "{what}");
        let mut w = select_result(&["ok"]);
        w.extend(rfq(b'I', Some(0x3000), None));
        if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
            h.attach(R1 + 1);
            h.backend(R1 + 1, &w);
        } else {
            assert_eq!(h.take_sent(WRITER_CONN), query("SELECT v FROM t"), "{what}");
            h.backend(WRITER_CONN, &w);
        }
        let d = h.last_decision();
        assert_eq!(d.attempt, 1, "{what}: {d:?}");
        assert!(
            matches!(
                d.reason,
                Reason::RetryOtherReader | Reason::RetryPrimaryAfterLoss
            ),
            "{what}: {d:?}"
        );
        let got = h.take_client();
        assert_eq!(tags(&got), "TDCZ", "{what}");
        // Every byte of the live streams is accounted for (the closed reader's are the host's
        // to drop with the connection).
        assert!(h.streams.client_pending.is_empty(), "{what}");
        assert!(h.streams.backend(WRITER_CONN).pending.is_empty(), "{what}");
    }
}

// --- Hostile XID lists ------------------------------------------------------------------------

const HOSTILE_XIDS: &[&str] = &[
    "1,2'; DROP TABLE evil; --",
    "1,2' OR 'evil'='evil",
    "evil",
    "1,2,evil",
    "1,18446744073709551616",
    "99999999999999999999999999,1",
    "1",
    "1,,2",
    ",1,2",
    "1,2,",
    "-1,2",
    "1 ,2",
    "1,2\u{00e9}",
    "0x1,2",
];

/// BEGIN, a write whose RFQ carries `xids`, then a read inside the transaction.
fn split_after(h: &mut Host, xids: &str) -> Vec<A> {
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.engine.reader_sample(2, Lsn(0x1000), h.now);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0x2000), Some((b'x', xids)));
    h.take_client();
    h.client(&query("SELECT v FROM t WHERE k = 1"))
}

#[test]
fn hostile_xid_lists_never_reach_sql_and_make_the_transaction_unsplittable() {
    for xids in HOSTILE_XIDS {
        let mut h = host();
        let acts = split_after(&mut h, xids);
        if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
            h.attach(R1);
        }
        let d = h.last_decision();
        assert!(!d.import, "{xids:?} was imported: {d:?}");
        assert_ne!(d.outcome, Outcome::ReplicaTxnSplit, "{xids:?}");
        assert_eq!(d.outcome, Outcome::ForcePrimary, "{xids:?}: {d:?}");
        // No byte sequence of the list beyond a plain number reaches any backend.
        for a in &h.log {
            if let A::SendBackend { bytes, .. } = a {
                let text = String::from_utf8_lossy(bytes);
                assert!(!text.contains("evil"), "{xids:?} reached SQL: {text}");
                assert!(!text.contains("polar_xact_split_xids = '1,"), "{text}");
            }
        }
        assert!(!String::from_utf8_lossy(&h.take_sent(R1)).contains("evil"));
    }
}

#[test]
fn a_valid_xid_list_is_imported_digit_for_digit() {
    let mut h = host();
    let acts = split_after(&mut h, "3,733,732");
    assert!(acts.iter().any(|a| matches!(a, A::Acquire { .. })));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!((d.outcome, d.import), (Outcome::ReplicaTxnSplit, true));
    let sent = String::from_utf8_lossy(&h.take_sent(R1)).into_owned();
    assert!(
        sent.contains("SET polar_xact_split_xids = '3,733,732'; "),
        "{sent}"
    );
}

#[test]
fn an_xid_list_longer_than_the_bound_is_refused() {
    let long = format!("1,{}", "7,".repeat(3000)) + "7";
    assert!(long.len() > polarsplit::internals::protocol::rfq::MAX_XID_LIST_LEN);
    let mut h = host();
    split_after(&mut h, &long);
    let d = h.last_decision();
    assert!(!d.import);
    assert_eq!(d.outcome, Outcome::ForcePrimary);
    assert_eq!(d.reason, Reason::SplitInvalidXids);
}

// --- Results that never end -------------------------------------------------------------------

const CHUNK: usize = 64 << 10;

/// A 64 KiB chunk of whole DataRows of `row` bytes each (the last one cut to fit, continued in
/// the next chunk: rows straddle chunk boundaries like they do on a socket).
fn row_stream(total: usize, row: usize) -> impl Iterator<Item = Vec<u8>> {
    let value = "x".repeat(row);
    let one = data_row(&[value.as_str()]);
    let mut cursor = 0usize;
    let mut sent = 0usize;
    std::iter::from_fn(move || {
        if sent >= total {
            return None;
        }
        let mut c = Vec::with_capacity(CHUNK);
        while c.len() < CHUNK {
            let take = (one.len() - cursor).min(CHUNK - c.len());
            c.extend_from_slice(&one[cursor..cursor + take]);
            cursor = (cursor + take) % one.len();
        }
        sent += c.len();
        Some(c)
    })
}

fn stream_through(l: &mut Lean, conn: u64, total: usize, row: usize) -> (usize, u64, f64) {
    // Warm up (first chunk may grow the action queue once), then measure.
    let mut chunks = row_stream(total, row);
    let first = chunks.next().expect("a chunk");
    l.backend(conn, &first).expect("first chunk");
    let chunks: Vec<Vec<u8>> = chunks.collect();
    let t = Instant::now();
    let ((), peak, allocs) = measure(|| {
        for c in &chunks {
            l.backend(conn, c).expect("chunk");
        }
    });
    (peak, allocs, t.elapsed().as_secs_f64())
}

#[test]
fn a_result_that_never_ends_streams_through_the_writer_in_bounded_memory() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.copy = false;
    l.connect();
    l.client(&query("SELECT * FROM endless FOR UPDATE"))
        .unwrap();
    l.backend(WRITER, &row_description(1)).unwrap();
    let total = 256 << 20;
    let (peak, allocs, secs) = stream_through(&mut l, WRITER, total, 100);
    eprintln!(
        "writer: {} MiB of 109-byte DataRows in 64 KiB chunks: {secs:.2} s, peak heap +{peak} B, {allocs} allocations",
        total >> 20
    );
    assert_eq!(allocs, 0, "the engine allocated while streaming rows");
    assert!(peak < 4096, "peak heap grew by {peak} bytes");
    // Everything fed is forwarded but the row in progress (small messages reach the client
    // whole: the host keeps its bytes until it completes).
    let held = l.backend_fed[&WRITER] - l.backend_acted(WRITER);
    assert!(held < 109, "{held} bytes not acted on");
}

#[test]
fn a_result_that_never_ends_streams_through_a_reader_in_bounded_memory() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.copy = false;
    l.connect();
    // A write, so the read waits (the hidden statements are swallowed first).
    l.client(&query("INSERT INTO t VALUES (1)")).unwrap();
    let mut b = command_complete("INSERT 0 1");
    b.extend(rfq(b'I', Some(0x5000), None));
    l.backend(WRITER, &b).unwrap();
    l.client(&query("SELECT * FROM endless")).unwrap();
    let server = l.seen.acquire.expect("AcquireReader");
    l.event(
        R1,
        Event::ReaderAttached {
            server,
            fresh: false,
            needs_reset: false,
        },
    )
    .unwrap();
    let mut b = Vec::new();
    for _ in 0..3 {
        b.extend(command_complete("SET"));
    }
    b.extend(row_description(1));
    l.backend(R1, &b).unwrap();
    let total = 128 << 20;
    let (peak, allocs, secs) = stream_through(&mut l, R1, total, 1000);
    eprintln!(
        "reader: {} MiB of 1009-byte DataRows in 64 KiB chunks: {secs:.2} s, peak heap +{peak} B, {allocs} allocations",
        total >> 20
    );
    assert_eq!(allocs, 0);
    assert!(peak < 4096, "peak heap grew by {peak} bytes");
    let held = l.backend_fed[&R1] - l.backend_acted(R1);
    assert!(held < 1009, "{held} bytes not acted on");
}

#[test]
fn one_gigabyte_data_row_is_streamed_by_count() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.copy = false;
    l.connect();
    l.client(&query("SELECT * FROM huge FOR UPDATE")).unwrap();
    l.backend(WRITER, &row_description(1)).unwrap();
    // A DataRow declaring (1 GiB - 1) bytes: the largest PostgreSQL allows.
    let mut hdr = vec![b'D'];
    hdr.extend_from_slice(&((1u32 << 30) - 1).to_be_bytes());
    l.backend(WRITER, &hdr).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let t = Instant::now();
    let ((), peak, allocs) = measure(|| {
        for _ in 0..256 {
            l.backend(WRITER, &chunk).unwrap();
        }
    });
    eprintln!(
        "one 1 GiB DataRow, first 256 MiB: {:.2} s, peak heap +{peak} B, {allocs} allocations",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(allocs, 0);
    assert_eq!(l.backend_acted(WRITER), l.backend_fed[&WRITER]);
}

#[test]
fn a_length_prefix_over_one_gigabyte_from_the_writer_is_a_protocol_error() {
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.connect();
    l.client(&query("SELECT * FROM t FOR UPDATE")).unwrap();
    let mut hdr = vec![b'D'];
    hdr.extend_from_slice(&(1u32 << 30).to_be_bytes());
    let ((), peak, _) = measure(|| {
        let r = l.backend(WRITER, &hdr);
        assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
    });
    assert!(peak < 64 << 10);
    assert!(l.seen.close_client);
    assert!(String::from_utf8_lossy(&l.seen.send_client).contains("exceeds the limit"));
    // u32::MAX too.
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.connect();
    let mut hdr = vec![b'N'];
    hdr.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        l.backend(WRITER, &hdr),
        Err(SessionError::Protocol { .. })
    ));
}

#[test]
fn a_reader_message_over_the_inspection_limit_is_streamed_by_count_not_buffered() {
    let mut h = host();
    read_on_reader(&mut h, "SELECT v FROM t", R1);
    // A 2 MiB NoticeResponse: over the 1 MiB a message may have to be parsed, so it passes by
    // count (forwarded or dropped), never copied.
    let mut hdr = vec![b'N'];
    hdr.extend_from_slice(&((2u32 << 20) + 4).to_be_bytes());
    let body = vec![b'x'; 2 << 20];
    let ((), peak, _) = measure(|| {
        h.backend(R1, &hdr);
        h.backend(R1, &body[..1 << 20]);
        h.backend(R1, &body[1 << 20..]);
    });
    // The host's own stream bookkeeping copies the bytes; the engine must not add to that.
    assert!(peak < (4 << 20) + (64 << 10), "{peak}");
    assert!(!h.session.is_closed());
    assert!(h.streams.balanced());
}

// --- A writer that answers too early ----------------------------------------------------------

#[test]
fn a_writer_ready_before_the_clients_message_ended_is_a_protocol_violation() {
    // Found by the session fuzz target: a FunctionCall of ~1 GB streams to the writer; a
    // (broken or hostile) writer answers ReadyForQuery before the message ended; the engine
    // then sent its post-commit LSN probe into the middle of the client's message.
    let mut h = host();
    let mut f = vec![b'F'];
    f.extend_from_slice(&0x3B3B_3B3Bu32.to_be_bytes());
    f.extend_from_slice(&[0; 64]);
    h.client(&f);
    assert!(!h.take_sent(WRITER_CONN).is_empty());
    let mut b = common::error("ERROR", "42883", "no such function", None, None);
    b.extend(rfq(b'I', Some(0x2000), None));
    let r = h.session.recv_backend(WRITER_CONN, &b, h.now);
    assert!(matches!(r, Err(SessionError::Protocol { .. })), "{r:?}");
    h.streams.fed_backend(WRITER_CONN, &b);
    let acts = h.drain();
    assert!(
        !acts.iter().any(|a| matches!(a, A::SendBackend { .. })),
        "{acts:?}"
    );
    assert!(acts.contains(&A::CloseClient));
}

// --- Chatter that is held back ----------------------------------------------------------------

#[test]
fn endless_notices_before_a_reader_result_are_held_in_bounded_memory() {
    // A reader's notices are held until its result begins (they may belong to a failed attempt
    // that is retried elsewhere). 100,000 of them must not grow the session without bound.
    let mut l = Lean::new(polarsplit_test_support::default_config());
    l.copy = false;
    l.connect();
    l.client(&query("SELECT v FROM t")).unwrap();
    let server = l.seen.acquire.expect("AcquireReader");
    l.event(
        R1,
        Event::ReaderAttached {
            server,
            fresh: false,
            needs_reset: false,
        },
    )
    .unwrap();
    let notice = common::notice("NOTICE", &"n".repeat(100), None);
    let chunk: Vec<u8> = notice.repeat(500);
    let ((), peak, _) = measure(|| {
        for _ in 0..200 {
            l.backend(R1, &chunk).unwrap();
        }
    });
    eprintln!(
        "100,000 notices ({} MiB) held before a reader's result: peak heap +{peak} B",
        (chunk.len() * 200) >> 20
    );
    assert!(peak < 512 << 10, "{peak}");
    // And the writer's own asynchronous chatter while the reader answers.
    let note = common::notice("NOTICE", "from the writer", None);
    let wchunk: Vec<u8> = note.repeat(1000);
    let ((), wpeak, _) = measure(|| {
        for _ in 0..100 {
            l.backend(WRITER, &wchunk).unwrap();
        }
    });
    assert!(wpeak < 512 << 10, "{wpeak}");
}
