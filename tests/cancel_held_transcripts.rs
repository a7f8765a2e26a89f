//! A client's cancel of work the engine still holds (SPEC F-1 with E-1) as protocol traces.
//!
//! An examiner's finding (2026-12-06): a client sent Parse/Bind/Execute of an INSERT and of
//! `SELECT pg_sleep(3)` without a Sync, cancelled, then sent the Sync. The primary alone runs
//! each Execute as it arrives: the cancel stops the sleep (57014) and the implicit transaction
//! rolls the INSERT back. The engine held the batch until its Sync, the host found no connection
//! running anything, the sleep ran its 3 s and the INSERT committed. A cancel of held work now
//! places it as the client's Flush would (E-1) and, once it runs, the session asks the host to
//! forward the cancel there (a `CancelRequest` action with its own key, after the bytes).

mod common;

use common::*;
use polarsplit::{ConnId, Event, ServerDialect, StartupProfile};

const R1: ConnId = 501;

/// The BackendKeyData `Host::connect` gives the session's writer.
const PID: i32 = 77;
const SECRET: [u8; 4] = 88u32.to_be_bytes();

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

/// [`polarsplit::Session::cancel_unplaced`] as a host calls it when `executing_connection`
/// names nothing (an input: then the drain).
fn cancel(h: &mut Host) -> (bool, Vec<A>) {
    let now = h.now;
    let taken = h.session.cancel_unplaced(now).expect("cancel_unplaced");
    (taken, h.drain())
}

fn asks_to_forward_cancel(acts: &[A]) -> bool {
    acts.iter()
        .any(|a| matches!(a, A::Cancel { pid, secret } if *pid == PID && secret[..] == SECRET))
}

/// `batch` with a Flush in front of its first Execute.
fn with_flush_before_first_execute(batch: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut flushed = false;
    for (t, body) in messages(batch) {
        if t == b'E' && !flushed {
            out.extend(flush());
            flushed = true;
        }
        out.extend(msg(t, &body));
    }
    out
}

/// A server's answers to the messages sent before the engine's Flush (their tags in `sent`):
/// what it flushes when it reaches that Flush.
fn answers_before_the_flush(sent: &str) -> Vec<u8> {
    let mut ans = Vec::new();
    for t in sent[..sent.find('H').expect("a Flush")].chars() {
        match t {
            'P' => ans.extend(msg(b'1', b"")),
            'B' => ans.extend(msg(b'2', b"")),
            'C' => ans.extend(msg(b'3', b"")),
            'E' => {
                ans.extend(data_row(&["t"]));
                ans.extend(command_complete("SELECT 1"));
            }
            other => panic!("unexpected {other} in {sent}"),
        }
    }
    ans
}

fn pbe(sql: &str) -> Vec<u8> {
    let mut b = parse("", sql);
    b.extend(bind("", ""));
    b.extend(execute(""));
    b
}

#[test]
fn f1_e1_a_cancel_of_a_batch_held_without_its_sync_runs_it_as_at_a_flush_and_forwards_the_cancel() {
    let mut h = host();
    let mut batch = pbe("INSERT INTO audit(note) VALUES ('x')");
    batch.extend(pbe("SELECT pg_sleep(3) FROM accounts LIMIT 1"));
    h.client(&batch);
    assert!(h.take_sent(WRITER).is_empty(), "held until its Sync (E-1)");
    assert_eq!(h.session.executing_connection(), None);
    let (taken, acts) = cancel(&mut h);
    assert!(taken, "{acts:?}");
    // Placed as at a Flush: the writer gets the client's messages as they are, with the
    // engine's Flush in front of the first Execute (no Sync: the batch stays open).
    assert_eq!(h.take_sent(WRITER), with_flush_before_first_execute(&batch));
    assert_eq!(h.session.executing_connection(), Some(WRITER));
    // The cancel waits until the backend answered what precedes that Execute: PostgreSQL drops
    // a cancel that reaches a backend between messages, so it must meet a running statement.
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
    let acts = h.backend(WRITER, &[msg(b'1', b""), msg(b'2', b"")].concat());
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
    assert_eq!(tags(&h.take_client()), "12", "what the writer flushed");
    // The cancel lands in the sleep: the server skips to the Sync, which follows the batch.
    let mut ans = command_complete("INSERT 0 1");
    ans.extend(msg(b'1', b""));
    ans.extend(msg(b'2', b""));
    ans.extend(cancelled_error());
    h.backend(WRITER, &ans);
    let acts = h.client(&sync());
    assert!(!asks_to_forward_cancel(&acts), "one cancel, one forward");
    assert_eq!(h.take_sent(WRITER), sync());
    h.backend(WRITER, &rfq(b'I', Some(0x1000), None));
    let got = h.take_client();
    assert_eq!(tags(&got), "C12EZ");
    assert!(String::from_utf8_lossy(&got).contains("57014"));
    assert!(h.streams.balanced());
    // The next statement is placed as usual, with no cancel behind it.
    let acts = h.client(&query("INSERT INTO audit(note) VALUES ('y')"));
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
}

#[test]
fn f1_e1_a_cancel_inside_a_block_runs_the_held_batch_there_and_forwards_the_cancel() {
    let mut h = host();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), None);
    h.take_client();
    h.take_sent(WRITER);
    let mut batch = pbe("INSERT INTO audit(note) VALUES ('x')");
    batch.extend(pbe("SELECT pg_sleep(3) FROM accounts LIMIT 1"));
    h.client(&batch);
    assert!(h.take_sent(WRITER).is_empty());
    let (taken, acts) = cancel(&mut h);
    assert!(taken);
    assert_eq!(h.take_sent(WRITER), with_flush_before_first_execute(&batch));
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
    let acts = h.backend(WRITER, &[msg(b'1', b""), msg(b'2', b"")].concat());
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
    let mut ans = command_complete("INSERT 0 1");
    ans.extend(msg(b'1', b""));
    ans.extend(msg(b'2', b""));
    ans.extend(cancelled_error());
    h.backend(WRITER, &ans);
    h.client(&sync());
    h.backend(WRITER, &rfq(b'E', Some(0x1000), None));
    let got = h.take_client();
    assert_eq!(client_rfq_statuses(&got), vec![b'E'], "the block failed");
    assert!(h.session.in_transaction());
}

#[test]
fn f1_e1_a_cancel_of_a_held_read_batch_places_it_and_forwards_the_cancel_once_its_reader_has_it() {
    let mut h = host();
    let batch = pbe("SELECT pg_sleep(3)");
    let acts = h.client(&batch);
    assert!(!acts.iter().any(|a| matches!(a, A::Acquire { .. })));
    let (taken, acts) = cancel(&mut h);
    assert!(taken);
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "decided now, for a reader: {acts:?}"
    );
    assert!(!asks_to_forward_cancel(&acts), "no server has it yet");
    assert_eq!(h.session.executing_connection(), None);
    // The host answers the connection request: the batch goes there, then the cancel.
    let acts = h.attach(R1);
    assert_eq!(h.session.executing_connection(), Some(R1));
    let sent = tags(&h.take_sent(R1));
    assert!(sent.ends_with("PBHE") && !sent.contains('S'), "{sent}");
    // Forwarded once the reader answered what precedes the client's Execute (the engine's
    // wait in front of it, the client's Parse and Bind).
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
    let acts = h.backend(R1, &answers_before_the_flush(&sent));
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
    h.session.cancel_forwarded(R1);
    // The cancel lands in the client's statement: the client gets its ParseComplete and
    // BindComplete, then the 57014, as from the primary; its Sync follows to the same
    // connection (E-1).
    h.backend(R1, &cancelled_error());
    h.client(&sync());
    assert_eq!(h.take_sent(R1), sync());
    h.backend(R1, &rfq(b'I', None, None));
    let got = h.take_client();
    assert_eq!(tags(&got), "12EZ");
    assert!(String::from_utf8_lossy(&got).contains("57014"));
    assert!(h.streams.balanced());
}

#[test]
fn f1_a_cancel_of_a_batch_waiting_for_its_reader_connection_is_forwarded_once_the_reader_has_it() {
    let mut h = host();
    let mut batch = pbe("SELECT pg_sleep(3)");
    batch.extend(sync());
    let acts = h.client(&batch);
    assert!(acts.iter().any(|a| matches!(a, A::Acquire { .. })));
    assert_eq!(h.session.executing_connection(), None);
    let (taken, acts) = cancel(&mut h);
    assert!(taken, "taken: forwarded once placed");
    assert!(acts.is_empty(), "{acts:?}");
    let acts = h.attach(R1);
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
    let sent = tags(&h.take_sent(R1));
    assert!(sent.ends_with("HES"), "{sent}");
    let acts = h.backend(R1, &answers_before_the_flush(&sent));
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
    // Without a reader the writer takes it, and the cancel follows it there.
    let mut h = host();
    h.client(&batch);
    cancel(&mut h);
    let acts = h.event(
        R1,
        Event::ReaderUnavailable {
            no_credentials: false,
        },
    );
    assert_eq!(h.session.executing_connection(), Some(WRITER));
    let sent = tags(&h.take_sent(WRITER));
    assert!(sent.ends_with("PBHES"), "{sent}");
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
    let acts = h.backend(WRITER, &answers_before_the_flush(&sent));
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
}

#[test]
fn f1_a_cancel_of_a_read_waiting_for_the_probe_is_forwarded_once_the_read_runs() {
    // Stock PostgreSQL: the read pipelined behind a write waits for the write's probe (W-7),
    // the client's RFQ with it; the client cancels meanwhile.
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ]));
    h.engine.remove_reader(2);
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(backend_key(PID, 88));
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.writer_answers_startup_capture(&[]);
    h.take_client();
    let mut two = query("INSERT INTO t VALUES (1)");
    let read = query("SELECT pg_sleep(3)");
    two.extend_from_slice(&read);
    h.client(&two);
    let sent = h.take_sent(WRITER);
    assert!(!sent.ends_with(&read), "the read waits");
    // The write answered; its probe has not.
    let mut ans = command_complete("INSERT 0 1");
    ans.extend(rfq(b'I', None, None));
    h.backend(WRITER, &ans);
    assert_eq!(h.session.executing_connection(), None);
    let (taken, acts) = cancel(&mut h);
    assert!(taken);
    assert!(
        !asks_to_forward_cancel(&acts),
        "nothing runs it yet: {acts:?}"
    );
    // The probe answers: the read is placed, and the cancel follows it.
    let mut p = probe_answer_rows("0/7000", false);
    p.extend(rfq(b'I', None, None));
    let mut acts = h.backend(WRITER, &p);
    if acts.iter().any(|a| matches!(a, A::Acquire { .. })) {
        acts = h.attach(R1);
    }
    assert!(asks_to_forward_cancel(&acts), "{acts:?}");
    assert!(h.session.executing_connection().is_some());
}

#[test]
fn f1_a_cancel_with_nothing_held_is_not_taken_and_forwards_nothing() {
    let mut h = host();
    let (taken, acts) = cancel(&mut h);
    assert!(!taken && acts.is_empty(), "{acts:?}");
    // A statement that ran and answered: nothing runs, nothing is held.
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x5000), None);
    h.take_client();
    let (taken, acts) = cancel(&mut h);
    assert!(!taken && acts.is_empty(), "{acts:?}");
    // Nor is a later statement cancelled by it.
    let acts = h.client(&query("INSERT INTO t VALUES (2)"));
    assert!(!asks_to_forward_cancel(&acts), "{acts:?}");
}

/// A simple-Query read cancelled while its reader connection is being opened is answered by the
/// engine (57014); when the host then reports the connection failed, the failure is the
/// reader's and the session goes on. Refused as an event without a request, it left the
/// request standing and the session answered nothing again (an examiner's finding of
/// 2026-12-07: the standby's postmaster frozen, a cancel at 0.5 s, then `SELECT 1` unanswered).
#[test]
fn f1_a_cancel_of_a_query_waiting_for_its_reader_connection_then_a_failed_connect_leaves_the_session_answering(
) {
    let mut h = host();
    let acts = h.client(&query("SELECT pg_sleep(3)"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    let (taken, _) = cancel(&mut h);
    assert!(taken);
    assert_eq!(tags(&h.take_client()), "EZ");
    h.event(0, Event::ReaderConnectFailed { starting_up: false });
    assert_eq!(
        h.engine
            .stats()
            .get(polarsplit::Counter::ReaderConnectFailures),
        1
    );
    // The next statement runs: on a reader connection the host opens now.
    let acts = h.client(&query("SELECT 1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    let sent = h.take_sent(R1);
    assert!(sent.ends_with(&query("SELECT 1")), "{:?}", tags(&sent));
    h.backend(R1, &{
        let mut b = select_result(&["1"]);
        b.extend(rfq(b'I', Some(0x5000), None));
        b
    });
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert!(h.streams.balanced());
}
