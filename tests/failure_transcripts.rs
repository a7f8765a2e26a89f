//! Transcript tests of failures on readers (SPEC §6: F-1, F-2, F-3; W-5).

mod common;

use common::*;
use polarsplit::Counter;
use polarsplit::Lsn;
use polarsplit::{Event, Outcome, Reason};
use polarsplit::{OnReplicaError, OnReplicaLoss, OnWaitTimeout};

const R1: u64 = 401;
const R2: u64 = 402;

/// A session that wrote at LSN 0x5000, so its next read waits.
fn after_write(c: polarsplit::Config) -> Host {
    let mut h = Host::new(c);
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x5000), None);
    h.take_client();
    h
}

fn sets(n: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for _ in 0..n {
        b.extend(command_complete("SET"));
    }
    b
}

const SQL: &str = "SELECT v FROM t WHERE k = 1";

#[test]
fn f2_strict_timeout_is_rerun_on_the_writer_unwrapped() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    h.take_sent(WRITER);
    let mut b = sets(3);
    b.extend(wait_timeout_error());
    b.extend(rfq(b'I', Some(0x4000), None));
    let acts = h.backend(R1, &b);
    assert!(
        acts.contains(&A::Release {
            conn: R1,
            needs_reset: false
        }),
        "{acts:?}"
    );
    // The original statement, unwrapped, on the writer.
    assert_eq!(h.take_sent(WRITER), query(SQL));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.attempt),
        (Outcome::ForcePrimary, Reason::RetryPrimaryAfterTimeout, 1)
    );
    // Nothing of the reader's answer reached the client.
    assert!(h.take_client().is_empty());
    let mut w = select_result(&["fresh"]);
    w.extend(rfq(b'I', Some(0x5100), None));
    h.backend(WRITER, &w);
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert!(String::from_utf8_lossy(&got).contains("fresh"));
    assert_eq!(h.engine.stats().get(Counter::WaitTimeouts), 1);
    assert!(h.streams.balanced());
}

#[test]
fn w5_best_effort_timeout_is_one_warning_then_the_rows() {
    let mut h = after_write(config(&[(
        "on_wait_timeout",
        OnWaitTimeout::Warning.as_str(),
    )]));
    h.client(&query(SQL));
    h.attach(R1);
    assert!(sent_queries(&h.take_sent(R1))[0]
        .starts_with("SET polar_consistency_mode = 'best_effort';"));
    let mut b = sets(3);
    b.extend(notice(
        "WARNING",
        "lsn wait timed out",
        Some("polar_proxy_lsn_wait_timeout"),
    ));
    b.extend(select_result(&["stale"]));
    b.extend(rfq(b'I', Some(0x4000), None));
    h.backend(R1, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "NTDCZ");
    assert_eq!(h.engine.stats().get(Counter::BestEffortWarnings), 1);
    // A user's own warning that merely looks similar is not counted.
    h.client(&query(SQL));
    h.attach(R2);
    let mut b = sets(3);
    b.extend(notice("WARNING", "polar_proxy_lsn_wait_timeout", None));
    b.extend(select_result(&["x"]));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R2, &b);
    assert_eq!(h.engine.stats().get(Counter::BestEffortWarnings), 1);
}

#[test]
fn f2_reader_lost_mid_wait_retries_on_another_reader_then_the_writer() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    let first = h.last_decision().server.unwrap();
    let acts = h.event(R1, Event::ConnectionLost);
    let other = acts
        .iter()
        .find_map(|a| match a {
            A::Acquire { server, .. } => Some(*server),
            _ => None,
        })
        .expect("retry on another reader");
    assert_ne!(other, first);
    h.event(
        R2,
        Event::ReaderAttached {
            server: other,
            fresh: false,
            needs_reset: false,
        },
    );
    assert_eq!(h.last_decision().reason, Reason::RetryOtherReader);
    assert_eq!(h.last_decision().attempt, 1);
    // That one dies too: the writer answers.
    h.event(R2, Event::ConnectionLost);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterLoss);
    assert!(h.take_sent(WRITER).ends_with(&query(SQL)));
    h.writer_answers("SELECT 0", b'I', Some(0x5000), None);
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'I']);
}

#[test]
fn f1_a_cancel_forwarded_to_a_reader_that_is_then_lost_answers_57014_never_retried() {
    // An examiner's finding (2026-12-05): the standby froze, the client's cancel went to it and
    // did nothing, and at the reader deadline the read ran again on the primary and answered
    // rows where the primary alone answers 57014.
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    h.take_sent(WRITER);
    h.session.cancel_forwarded(R1);
    let acts = h.event(R1, Event::ConnectionLost);
    assert!(
        !acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert!(
        h.take_sent(WRITER).is_empty(),
        "not run again on the writer"
    );
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(got.windows(5).any(|w| w == b"57014"));
    // As the server words it: drivers look at the routine.
    assert!(got.windows(18).any(|w| w == b"RProcessInterrupts"));
    assert_eq!(client_rfq_statuses(&got), vec![b'I']);
    assert!(h.streams.balanced());
    // A cancel for an earlier statement does not cancel the next one on another reader.
    h.client(&query(SQL));
    h.attach(R2);
    h.take_sent(WRITER);
    let acts = h.event(R2, Event::ConnectionLost);
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { .. } | A::Decision(_))),
        "retried: {acts:?}"
    );
}

#[test]
fn f3_reader_lost_after_the_first_row_gets_an_error_and_no_retry() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    h.take_sent(WRITER);
    let mut b = sets(3);
    b.extend(row_description(1));
    b.extend(data_row(&["1"]));
    h.backend(R1, &b);
    let acts = h.event(R1, Event::ConnectionLost);
    assert!(
        !acts
            .iter()
            .any(|a| matches!(a, A::Acquire { .. } | A::Decision(_))),
        "{acts:?}"
    );
    assert!(h.take_sent(WRITER).is_empty(), "no retry");
    let got = h.take_client();
    assert_eq!(tags(&got), "TDEZ");
    assert!(got.windows(5).any(|w| w == b"55000"));
}

#[test]
fn f3_failure_inside_a_transaction_leaves_it_failed() {
    let mut h = Host::new(config(&[]));
    h.connect();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.engine.reader_sample(2, Lsn(0x1000), h.now);
    h.take_client();
    h.client(&query(SQL));
    h.attach(R1);
    // P-5: the split read touches the writer's block (its answer swallowed).
    assert!(ends_with_touch(&h.take_sent(WRITER)));
    h.writer_answers_touch(Some(0x1000), Some((b'x', "")));
    let mut b = row_description(1);
    b.extend(data_row(&["1"]));
    h.backend(R1, &b);
    h.event(R1, Event::ConnectionLost);
    // The hidden failing statement goes to the writer, its error is swallowed, its RFQ (E)
    // reaches the client.
    assert!(is_abort(&h.take_sent(WRITER)));
    let mut w = msg(b'1', b"");
    w.extend(msg(b'2', b""));
    w.extend(msg(b'3', b""));
    w.extend(error(
        "ERROR",
        "P0001",
        "polarsplit: transaction aborted after a failed replica read",
        None,
        None,
    ));
    w.extend(rfq(b'E', Some(0x1000), None));
    h.backend(WRITER, &w);
    let got = h.take_client();
    assert_eq!(tags(&got), "TDEZ");
    assert_eq!(client_rfq_statuses(&got), vec![b'E']);
    assert_eq!(
        got.windows(5).filter(|w| *w == b"P0001").count(),
        0,
        "the abort's own error is swallowed"
    );
    // The rest of the transaction stays on the writer.
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
}

#[test]
fn f1_reader_refusing_the_wait_sets_gets_no_more_waits() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    let server = h.last_decision().server.unwrap();
    h.take_sent(WRITER);
    let mut b = error(
        "ERROR",
        "42704",
        "unrecognized configuration parameter \"polar_consistency_mode\"",
        None,
        None,
    );
    b.extend(rfq(b'I', Some(0x4000), None));
    h.backend(R1, &b);
    assert_eq!(h.take_sent(WRITER), query(SQL));
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    assert!(h.engine.waits_unsupported(server));
    // No SQL error of a hidden statement reaches the client.
    h.writer_answers("SELECT 0", b'I', Some(0x5000), None);
    let got = h.take_client();
    assert!(!got.windows(5).any(|w| w == b"42704"));
}

#[test]
fn f1_cancel_of_the_clients_statement_is_forwarded_never_retried() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    assert_eq!(h.session.executing_connection(), Some(R1));
    h.take_sent(WRITER);
    let mut b = sets(3);
    b.extend(cancelled_error());
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    assert!(h.take_sent(WRITER).is_empty());
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(got.windows(5).any(|w| w == b"57014"));
    assert_eq!(h.engine.stats().get(Counter::Cancels), 1);
}

#[test]
fn f1_a_cancel_that_lands_in_a_hidden_statement_in_front_of_the_read_cancels_it_never_retried() {
    // The cancel storm (tests/e2e/test_i17_protocol_fidelity.py): the client's cancel, forwarded
    // to the reader running its read, landed in the settings replay of the fresh connection; the
    // engine took the 57014 for the replay's own failure and ran the read again on the writer, to
    // its end: the client's cancel did nothing. The same for the wait in front of the read (W-4).
    // The client asked to cancel its statement: it ends with 57014, as on one server.
    for in_replay in [true, false] {
        let mut h = after_write(config(&[]));
        if in_replay {
            // A captured setting: a fresh reader gets the replay first, as its own message (S-5).
            h.client(&query("SET search_path = app"));
            let mut ans = command_complete("SET");
            ans.extend(rfq(b'I', Some(0x5000), None));
            ans.extend(capture_answer(&[("search_path", "app")], None));
            h.backend(WRITER, &ans);
            h.take_client();
        }
        h.client(&query(SQL));
        h.attach_fresh(R1);
        h.take_sent(WRITER);
        h.take_sent(R1);
        assert_eq!(h.session.executing_connection(), Some(R1));
        h.session.cancel_forwarded(R1);
        let mut b = if in_replay { Vec::new() } else { sets(1) };
        b.extend(cancelled_error());
        b.extend(rfq(b'I', Some(0x5000), None));
        let acts = h.backend(R1, &b);
        assert!(
            h.take_sent(WRITER).is_empty(),
            "in replay {in_replay}: not run again on the writer"
        );
        assert!(h.take_sent(R1).is_empty(), "nor on the reader");
        assert!(acts.contains(&A::CloseBackend(R1)), "{acts:?}");
        let got = h.take_client();
        assert_eq!(tags(&got), "EZ", "in replay {in_replay}");
        assert!(got.windows(5).any(|w| w == b"57014"));
        assert_eq!(client_rfq_statuses(&got), vec![b'I']);
        assert_eq!(h.engine.stats().get(Counter::Cancels), 1);
        assert!(h.streams.balanced());
        // The session goes on: the next read is placed as usual.
        let acts = h.client(&query(SQL));
        assert!(
            acts.iter().any(|a| matches!(a, A::Acquire { .. })),
            "{acts:?}"
        );
    }
}

#[test]
fn e2_a_reader_connection_that_answered_0a000_is_closed_not_pooled() {
    // A pooled reader connection keeps the statements the engine prepared there. After a DDL
    // changed a column's type, such a statement answers "cached plan must not change result
    // type" (0A000) on that connection for every session that is handed it, until it closes:
    // retried on the writer each time (or refused with `on_replica_error = error`). The
    // connection is closed instead of pooled, so the next session's read prepares afresh.
    // Control: another reusable error keeps the connection pooled.
    for (sqlstate, closed) in [("0A000", true), ("42P01", false)] {
        let mut h = after_write(config(&[]));
        h.client(&query(SQL));
        h.attach(R1);
        h.take_sent(WRITER);
        let mut b = sets(3);
        b.extend(error("ERROR", sqlstate, "refused", None, None));
        b.extend(rfq(b'I', Some(0x4000), None));
        let acts = h.backend(R1, &b);
        assert_eq!(
            acts.contains(&A::CloseBackend(R1)),
            closed,
            "{sqlstate}: {acts:?}"
        );
        assert_eq!(
            acts.iter()
                .any(|a| matches!(a, A::Release { conn, .. } if *conn == R1)),
            !closed,
            "{sqlstate}: {acts:?}"
        );
        // Either way the read runs again on the writer; nothing of the reader's answer
        // reached the client.
        assert_eq!(h.take_sent(WRITER), query(SQL), "{sqlstate}");
        assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
        assert!(h.take_client().is_empty());
    }
}

#[test]
fn f1_fatal_from_a_reader_is_a_lost_connection() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    let b = error(
        "FATAL",
        "57P01",
        "terminating connection due to administrator command",
        None,
        None,
    );
    let acts = h.backend(R1, &b);
    assert!(acts.contains(&A::CloseBackend(R1)), "{acts:?}");
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "retried on another reader"
    );
}

#[test]
fn p8_notices_of_a_retried_attempt_are_not_forwarded() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    let mut b = sets(3);
    b.extend(notice("NOTICE", "from the reader", None));
    b.extend(error(
        "ERROR",
        "25006",
        "cannot execute in a read-only transaction",
        None,
        None,
    ));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    let mut w = notice("NOTICE", "from the writer", None);
    w.extend(select_result(&["1"]));
    w.extend(rfq(b'I', Some(0x5000), None));
    h.backend(WRITER, &w);
    let got = String::from_utf8_lossy(&h.take_client()).into_owned();
    assert!(got.contains("from the writer"));
    assert!(!got.contains("from the reader"));
}

#[test]
fn f2_policies_error_and_disconnect() {
    // on_replica_error = error: the reader's own error is forwarded as is.
    let mut h = after_write(config(&[(
        "on_replica_error",
        OnReplicaError::Error.as_str(),
    )]));
    h.client(&query(SQL));
    h.attach(R1);
    let mut b = sets(3);
    b.extend(error("ERROR", "22012", "division by zero", None, None));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(got.windows(5).any(|w| w == b"22012"));
    // on_wait_timeout = error: an engine-built 55000 naming the cause.
    let mut h = after_write(config(&[(
        "on_wait_timeout",
        OnWaitTimeout::Error.as_str(),
    )]));
    h.client(&query(SQL));
    h.attach(R1);
    let mut b = sets(3);
    b.extend(wait_timeout_error());
    b.extend(rfq(b'I', Some(0x4000), None));
    h.backend(R1, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(got.windows(5).any(|w| w == b"55000"));
    assert!(String::from_utf8_lossy(&got).contains("did not reach the session's position in time"));
    // on_replica_loss = disconnect.
    let mut h = after_write(config(&[(
        "on_replica_loss",
        OnReplicaLoss::Disconnect.as_str(),
    )]));
    h.client(&query(SQL));
    h.attach(R1);
    let acts = h.event(R1, Event::ConnectionLost);
    assert!(acts.contains(&A::CloseClient));
    assert!(h.session.is_closed());
}

#[test]
fn f3_error_after_the_row_description_is_still_retried() {
    // PostgreSQL sends RowDescription before executing a SELECT: a writing function the standby
    // refuses fails after it. The RowDescription is held, so the retry is allowed. (An unknown
    // function is read-safe only with `unknown_functions = replica`: F-policy.)
    let mut h = after_write(config(&[(
        "unknown_functions",
        polarsplit::UnknownFunctions::Replica.as_str(),
    )]));
    h.client(&query("SELECT f_that_writes()"));
    h.attach(R1);
    h.take_sent(WRITER);
    let mut b = sets(3);
    b.extend(row_description(1));
    b.extend(error(
        "ERROR",
        "25006",
        "cannot execute UPDATE in a read-only transaction",
        None,
        None,
    ));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    assert_eq!(h.take_sent(WRITER), query("SELECT f_that_writes()"));
    assert!(
        h.take_client().is_empty(),
        "nothing of the reader's attempt reached the client"
    );
    let mut w = select_result(&["done"]);
    w.extend(rfq(b'I', Some(0x5100), None));
    h.backend(WRITER, &w);
    assert_eq!(tags(&h.take_client()), "TDCZ");
}

#[test]
fn p8_held_messages_of_a_retried_attempt_never_surface_later() {
    let mut h = after_write(config(&[]));
    h.client(&query(SQL));
    h.attach(R1);
    let mut b = sets(3);
    b.extend(notice("NOTICE", "from the failed attempt", None));
    b.extend(row_description(1));
    b.extend(error("ERROR", "XX001", "injected", None, None));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    h.writer_answers("SELECT 0", b'I', Some(0x5000), None);
    // A later reader statement: its result begins, and only its own messages reach the client.
    h.client(&query("SELECT 1"));
    h.attach(R2);
    let hidden = sent_queries(&h.take_sent(R2))[0]
        .matches("SET polar")
        .count();
    let mut b = sets(hidden);
    b.extend(select_result(&["1"]));
    b.extend(rfq(b'I', Some(0x5100), None));
    h.backend(R2, &b);
    let got = h.take_client();
    assert!(!String::from_utf8_lossy(&got).contains("from the failed attempt"));
    assert_eq!(tags(&got), "CZTDCZ");
}

#[test]
fn f2_a_read_the_reader_refused_and_the_writer_ran_positions_the_sessions_writes() {
    // A statement classified a read (here an unknown function with `unknown_functions =
    // replica`; a hint or a mislabelled STABLE function alike) that the standby refuses as a
    // write (25006) runs again on the writer — and may have written there: its RFQ raises the
    // session's write position (P-6), so the next read waits for it (S-1a).
    let mut h = after_write(config(&[(
        "unknown_functions",
        polarsplit::UnknownFunctions::Replica.as_str(),
    )]));
    h.client(&query("SELECT f_that_writes()"));
    h.attach(R1);
    h.take_sent(WRITER);
    let mut b = sets(3);
    b.extend(error(
        "ERROR",
        "25006",
        "cannot execute INSERT in a read-only transaction",
        None,
        None,
    ));
    b.extend(rfq(b'I', Some(0x5000), None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterError);
    assert_eq!(h.take_sent(WRITER), query("SELECT f_that_writes()"));
    let mut w = select_result(&["1"]);
    w.extend(rfq(b'I', Some(0x7000), None));
    h.backend(WRITER, &w);
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x7000));
    // The reader is known at 0x5000 only: the next read waits for 0x7000.
    h.client(&query(SQL));
    h.attach(R2);
    let d = h.last_decision();
    assert_eq!(d.target, Lsn(0x7000), "{d:?}");
    assert!(d.wait, "{d:?}");
    // A read the writer served without a reader attempt stays a read (nothing raised).
    let mut h = after_write(config(&[]));
    h.engine.remove_reader(1);
    h.engine.remove_reader(2);
    h.client(&query(SQL));
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    h.writer_answers("SELECT 1", b'I', Some(0x7000), None);
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x5000));
}
