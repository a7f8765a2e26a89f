//! Transcript tests of the end of a client's input: its Terminate, and the end of its stream
//! (`Session::client_eof`). PostgreSQL reads a Terminate (or the end of its input) only after
//! it ran and answered everything before it: the session closes only then (the red team's
//! F1/F2 of 2026-12-05: a Terminate behind a read closed the reader and the client at once, and
//! the end of the input dropped the statements queued behind a read).

mod common;

use common::*;
use polarsplit::Event;

const R1: u64 = 701;
const READ: &str = "SELECT v FROM t WHERE k = 1";

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.connect();
    h
}

fn terminate() -> Vec<u8> {
    msg(b'X', b"")
}

fn reader_answers(h: &mut Host, conn: u64, v: &str) -> Vec<A> {
    let mut b = select_result(&[v]);
    b.extend(rfq(b'I', None, None));
    h.backend(conn, &b)
}

fn closes(acts: &[A]) -> bool {
    acts.contains(&A::CloseClient)
}

/// The session's last action closes the client, and every action before it is applied.
fn closed_last(h: &Host, acts: &[A]) {
    assert_eq!(acts.last(), Some(&A::CloseClient), "{acts:?}");
    assert!(h.session.is_closed());
}

#[test]
fn a_terminate_behind_a_read_waits_for_its_answer() {
    let mut h = host();
    let mut b = query(READ);
    b.extend(terminate());
    let acts = h.client(&b);
    assert!(!closes(&acts), "closed before the read answered: {acts:?}");
    let acts = h.attach(R1);
    assert!(!closes(&acts), "{acts:?}");
    let acts = reader_answers(&mut h, R1, "1");
    closed_last(&h, &acts);
    assert_eq!(
        tags(&h.take_client()),
        "TDCZ",
        "the read's answer reaches the client first"
    );
    // The Terminate went to the writer (the client's own bytes); the reader was let go.
    assert_eq!(tags(&h.take_sent(WRITER)), "X");
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::CloseBackend(c) if *c == R1)
                || matches!(a, A::Release { conn, .. } if *conn == R1)),
        "{acts:?}"
    );
    assert!(h.streams.balanced());
}

#[test]
fn a_terminate_behind_a_write_waits_for_its_answer() {
    let mut h = host();
    let mut b = query("UPDATE t SET v = 2 WHERE k = 1");
    b.extend(terminate());
    let acts = h.client(&b);
    assert!(!closes(&acts), "closed before the write answered: {acts:?}");
    let acts = h.writer_answers("UPDATE 1", b'I', Some(0x3000), None);
    closed_last(&h, &acts);
    assert_eq!(tags(&h.take_client()), "CZ");
    let sent = h.take_sent(WRITER);
    assert_eq!(
        tags(&sent),
        "QX",
        "the Terminate follows the write on the writer"
    );
}

#[test]
fn a_terminate_behind_two_reads_answers_both() {
    let mut h = host();
    let mut b = query("SELECT 1");
    b.extend(query(READ));
    b.extend(terminate());
    h.client(&b);
    h.attach(R1);
    let acts = reader_answers(&mut h, R1, "1");
    assert!(!closes(&acts), "{acts:?}");
    // The second read goes where the engine sends it: answer it there.
    let acts = if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
        h.attach(R1 + 1);
        reader_answers(&mut h, R1 + 1, "2")
    } else if h.session.executing_connection() == Some(R1) {
        reader_answers(&mut h, R1, "2")
    } else {
        // S-1a: after a read with no known position, the primary serves it.
        let mut b = select_result(&["2"]);
        b.extend(rfq(b'I', Some(0x1000), None));
        h.backend(WRITER, &b)
    };
    closed_last(&h, &acts);
    assert_eq!(tags(&h.take_client()), "TDCZTDCZ");
}

#[test]
fn the_end_of_the_input_runs_the_write_queued_behind_a_read() {
    let mut h = host();
    let mut b = query(READ);
    b.extend(query("INSERT INTO kv VALUES (1, 1)"));
    h.client(&b);
    let acts = h.session.client_eof(h.now);
    assert!(acts.is_ok());
    let acts = h.drain();
    assert!(
        !closes(&acts),
        "closed with a read and a write queued: {acts:?}"
    );
    h.attach(R1);
    reader_answers(&mut h, R1, "1");
    // The insert reached the writer once the read answered.
    let sent = h.take_sent(WRITER);
    assert!(
        sent_queries(&sent).iter().any(|q| q.starts_with("INSERT")),
        "{:?}",
        sent_queries(&sent)
    );
    assert!(!h.session.is_closed());
    let acts = h.writer_answers("INSERT 0 1", b'I', Some(0x4000), None);
    closed_last(&h, &acts);
    assert_eq!(
        tags(&h.take_client()),
        "TDCZCZ",
        "a half-closed client reads every answer"
    );
    // The engine's Terminate follows the insert on the writer.
    assert_eq!(tags(&h.take_sent(WRITER)), "X");
    assert!(h.streams.balanced());
}

#[test]
fn the_end_of_the_input_after_a_terminate_changes_nothing() {
    let mut h = host();
    let mut b = query(READ);
    b.extend(terminate());
    h.client(&b);
    h.session.client_eof(h.now).expect("client_eof");
    assert!(!closes(&h.drain()));
    h.attach(R1);
    let acts = reader_answers(&mut h, R1, "1");
    closed_last(&h, &acts);
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "X",
        "one Terminate: the client's"
    );
}

#[test]
fn the_end_of_the_input_mid_message_drops_that_message() {
    let mut h = host();
    let mut b = query("UPDATE t SET v = 2 WHERE k = 1");
    let partial = query(READ);
    b.extend_from_slice(&partial[..7]);
    h.client(&b);
    h.session.client_eof(h.now).expect("client_eof");
    let acts = h.drain();
    assert!(!closes(&acts), "{acts:?}");
    let acts = h.writer_answers("UPDATE 1", b'I', Some(0x3000), None);
    closed_last(&h, &acts);
    assert_eq!(tags(&h.take_client()), "CZ");
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "QX",
        "the incomplete read never runs"
    );
    assert!(h.streams.balanced(), "its bytes are covered (discarded)");
}

#[test]
fn the_end_of_an_idle_session_closes_at_once() {
    let mut h = host();
    h.session.client_eof(h.now).expect("client_eof");
    let acts = h.drain();
    closed_last(&h, &acts);
    assert_eq!(tags(&h.take_sent(WRITER)), "X");
}

#[test]
fn a_terminate_behind_a_batch_without_sync_ends_when_the_writer_closes() {
    let mut h = host();
    let mut b = polarsplit_test_support::fe::parse("", "UPDATE t SET v = 3");
    b.extend(polarsplit_test_support::fe::bind("", ""));
    b.extend(polarsplit_test_support::fe::execute(""));
    b.extend(terminate());
    let acts = h.client(&b);
    // Nothing will complete the batch: the Terminate reaches the writer behind it (the server
    // rolls it back and closes, answering nothing, as with the primary alone).
    assert!(!closes(&acts), "{acts:?}");
    assert!(tags(&h.take_sent(WRITER)).ends_with('X'));
    let acts = h.event(WRITER, Event::ConnectionLost);
    closed_last(&h, &acts);
    assert!(
        h.take_client().is_empty(),
        "no 08006 after the client's own Terminate"
    );
}

#[test]
fn client_bytes_after_a_terminate_are_discarded() {
    let mut h = host();
    let mut b = query(READ);
    b.extend(terminate());
    b.extend(query("INSERT INTO kv VALUES (2, 2)"));
    h.client(&b);
    h.attach(R1);
    let acts = reader_answers(&mut h, R1, "1");
    closed_last(&h, &acts);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        "X",
        "nothing after the Terminate runs"
    );
    assert!(h.streams.balanced());
}
