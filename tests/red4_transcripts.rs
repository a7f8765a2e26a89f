//! Examiner round 4 (red4): pipelines deeper than the session's bound on undecided client
//! input (SPEC E-1). The session takes at most `MAX_PENDING_MESSAGES` undecided messages (and a
//! bounded number of bytes of their copies) and leaves the rest in the host's buffer; a batch
//! whose Sync lies beyond that bound must still be decided, or the client waits forever —
//! measured through the example proxy with libpq's pipeline mode (tests/e2e/test_red4_findings.py).

mod common;

use common::*;
use polarsplit::{ConnId, Outcome, Reason};

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

/// libpq's PQsendQueryParams in pipeline mode: Parse, Bind, Describe portal, Execute, no Sync.
fn pipelined_read(i: usize) -> Vec<u8> {
    let mut b = parse("", &format!("SELECT {i}, v FROM t WHERE k = $1"));
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b
}

/// Feeds `bytes` as a host does: what the session does not consume is fed again after the
/// actions are drained. Returns how many bytes were consumed when no further progress is made.
fn feed_until_stuck(h: &mut Host, bytes: &[u8]) -> usize {
    let mut at = 0;
    while at < bytes.len() {
        let n = h
            .session
            .recv_client(&bytes[at..], h.now)
            .expect("recv_client");
        h.streams.fed_client(&bytes[at..at + n]);
        h.drain();
        if n == 0 {
            break;
        }
        at += n;
    }
    at
}

/// 300 pipelined reads and one Sync (1,201 messages, ~25 KB: under `max_batch_bytes`, over
/// the session's 1,024 undecided messages). Before: the session stopped taking input at 1,024
/// messages while it waited for the batch's Sync, and nothing could ever arrive to unblock it.
#[test]
fn e1_a_pipeline_longer_than_the_undecided_message_bound_is_taken_whole() {
    let mut h = host();
    let mut b = Vec::new();
    for i in 0..300 {
        b.extend(pipelined_read(i));
    }
    b.extend(sync());
    assert!(b.len() < 64 << 10, "under max_batch_bytes: {}", b.len());
    let taken = feed_until_stuck(&mut h, &b);
    assert_eq!(
        taken,
        b.len(),
        "the session stopped taking the batch before its Sync"
    );
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::BatchTooLarge)
    );
    assert_eq!(
        h.take_sent(WRITER),
        b,
        "the whole batch on the writer, as the client sent it"
    );
}

/// Batches of one read each, pipelined back to back (libpq: PQpipelineSync after every query)
/// for more than the bytes of copies the session keeps. The copies of decided messages stay in
/// the session's buffer while anything is queued, so once it reached its bound with the last
/// batch incomplete, that batch waited for a Sync the session no longer took.
#[test]
fn e1_a_pipeline_of_batches_over_the_copy_bound_is_answered() {
    let mut h = host();
    let mut one = pipelined_read(1);
    one.extend(sync());
    // Enough batches for 4.5 MB, and the last one cut before its Sync.
    let batches = (9 << 19) / one.len() + 1;
    let mut b = Vec::new();
    for _ in 0..batches {
        b.extend_from_slice(&one);
    }
    b.truncate(b.len() - 5);
    let mut answer = msg(b'1', b"");
    answer.extend(msg(b'2', b""));
    answer.extend(row_description(2));
    answer.extend(data_row(&["1", "7"]));
    answer.extend(command_complete("SELECT 1"));
    answer.extend(rfq(b'I', Some(0x1000), None));
    // As a host does: the client's bytes are fed again after each backend input, and the
    // backends answer one batch at a time, so the session's queue never runs empty.
    let mut at = 0;
    let mut answered = 0usize;
    let mut reader = 700;
    let mut owed: Vec<(ConnId, usize)> = Vec::new();
    for _ in 0..(batches * 4) {
        let n = h.session.recv_client(&b[at..], h.now).expect("recv_client");
        h.streams.fed_client(&b[at..at + n]);
        let mut acts = h.drain();
        at += n;
        if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
            reader += 1;
            acts = h.attach_fresh(reader);
        }
        drop(acts);
        for conn in [WRITER, reader] {
            let sent = h.take_sent(conn);
            let syncs = messages(&sent).iter().filter(|m| m.0 == b'S').count();
            if syncs > 0 {
                owed.push((conn, syncs));
            }
        }
        let Some((conn, left)) = owed.first_mut() else {
            break;
        };
        let conn = *conn;
        *left -= 1;
        if *left == 0 {
            owed.remove(0);
        }
        if h.backend(conn, &answer)
            .iter()
            .any(|a| matches!(a, A::Acquire { .. }))
        {
            reader += 1;
            h.attach_fresh(reader);
        }
        answered += 1;
        h.take_client();
    }
    assert_eq!(
        at,
        b.len(),
        "the session stopped taking input after {answered} of {} batches",
        batches - 1
    );
    assert_eq!(answered, batches - 1, "every complete batch answered");
}
