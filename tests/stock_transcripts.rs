//! Read-your-writes on stock PostgreSQL (issue 11): no LSN on RFQs, no `_polar_*` keys; the
//! write position is learned by a post-commit probe or a post-commit writer sample; reads go to a
//! reader already caught up, else to the writer — or wait with PostgreSQL 19's WAIT FOR LSN.

mod common;

use common::*;
use polarsplit::cluster::stats::Counter;
use polarsplit::config::{ServerDialect, StartupProfile};
use polarsplit::protocol::Lsn;
use polarsplit::session::{Event, Outcome, Reason};

const R1: u64 = 801;

fn stock(f: impl FnOnce(&mut polarsplit::config::Config)) -> Host {
    let mut h = Host::new(config(|c| {
        c.server_dialect = ServerDialect::Stock;
        c.startup_profile = StartupProfile::Off;
        f(c);
    }));
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.take_client();
    h
}

fn probe_answer(lsn: &str) -> Vec<u8> {
    let mut b = row_description(1);
    b.extend(data_row(&[lsn]));
    b.extend(command_complete("SELECT 1"));
    b.extend(rfq(b'I', None, None));
    b
}

const PROBE: &str = "SELECT pg_current_wal_insert_lsn()";

#[test]
fn i11_probe_after_an_autocommit_write_is_sent_after_the_clients_rfq_and_swallowed() {
    let mut h = stock(|_| {});
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.take_sent(WRITER);
    let acts = h.writer_answers("INSERT 0 1", b'I', None, None);
    // The client's RFQ first (forwarded as is: standard), then the probe.
    let fwd = acts
        .iter()
        .position(|a| matches!(a, A::FwdBackend { .. }))
        .unwrap();
    let probe = acts
        .iter()
        .position(|a| matches!(a, A::SendBackend { .. }))
        .unwrap();
    assert!(fwd < probe, "{acts:?}");
    assert_eq!(sent_queries(&h.take_sent(WRITER)), vec![PROBE.to_string()]);
    assert_eq!(tags(&h.take_client()), "CZ");
    assert!(h.session.lsn_state().write_unknown);
    h.backend(WRITER, &probe_answer("0/5000"));
    assert!(
        h.take_client().is_empty(),
        "the probe's result is swallowed"
    );
    let l = h.session.lsn_state();
    assert!(!l.write_unknown);
    assert_eq!(l.write_lsn, Lsn(0x5000));
    assert_eq!(h.engine.stats().get(Counter::ProbesSent), 1);
    assert_eq!(h.engine.stats().get(Counter::TargetsLearned), 1);
    assert!(h.streams.balanced());
}

#[test]
fn i11_client_query_before_the_probe_answer_goes_to_the_writer_behind_it() {
    let mut h = stock(|_| {});
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.take_client();
    let q = query("SELECT v FROM t");
    let acts = h.client(&q);
    assert!(
        acts.contains(&A::FwdClient {
            conn: WRITER,
            n: q.len()
        }),
        "{acts:?}"
    );
    assert_eq!(h.last_decision().reason, Reason::MissingLsnPrimary);
    // The writer answers the probe, then the client's SELECT.
    let mut b = probe_answer("0/5000");
    b.extend(select_result(&["1"]));
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert!(h.streams.balanced());
}

#[test]
fn i11_read_goes_to_a_caught_up_reader_else_stays_on_the_writer() {
    let mut h = stock(|_| {});
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("0/5000"));
    // No reader has replayed 0/5000: the writer.
    h.engine.reader_sample(1, Lsn(0x4000), h.now);
    h.engine.reader_sample(2, Lsn(0x4fff), h.now);
    h.client(&query("SELECT v FROM t"));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::ReadNoBoundedWait)
    );
    assert_eq!(h.engine.stats().get(Counter::ReadsKeptOnWriter), 1);
    h.writer_answers("SELECT 1", b'I', None, None);
    // Reader 2 catches up: it serves the read, unwrapped (stock has no wait before 19).
    h.engine.reader_sample(2, Lsn(0x5000), h.now);
    let acts = h.client(&query("SELECT v FROM t"));
    assert!(
        acts.iter()
            .any(|a| matches!(a, A::Acquire { server: 2, .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.take_sent(R1), query("SELECT v FROM t"));
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    assert_eq!(h.engine.stats().get(Counter::ReadsToCaughtUpReader), 1);
}

#[test]
fn i11_post_commit_writer_sample_positions_the_write_without_a_probe() {
    let mut h = stock(|c| c.lsn_probe = false);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    assert!(
        h.take_sent(WRITER)
            .ends_with(&query("INSERT INTO t VALUES (1)")),
        "no probe"
    );
    // A sample whose query was sent in the same millisecond as the acknowledgement may predate
    // the commit: not used.
    h.engine.writer_sample(0, Lsn(0x6000), h.now);
    h.client(&query("SELECT 1"));
    assert_eq!(h.last_decision().reason, Reason::MissingLsnPrimary);
    h.writer_answers("SELECT 1", b'I', None, None);
    h.now += 5;
    h.engine.writer_sample(0, Lsn(0x6100), h.now);
    h.engine.reader_sample(1, Lsn(0x7000), h.now);
    h.engine.reader_sample(2, Lsn(0x7000), h.now);
    let acts = h.client(&query("SELECT 2"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x6100));
}

#[test]
fn i11_stock_transaction_reads_before_the_first_write_only() {
    let mut h = stock(|_| {});
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', None, None);
    h.take_client();
    let acts = h.client(&query("SELECT 1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    let mut b = select_result(&["1"]);
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(client_rfq_statuses(&h.take_client()), vec![b'T']);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', None, None);
    h.client(&query("SELECT 2"));
    let d = h.last_decision();
    assert_eq!(d.outcome, Outcome::ForcePrimary);
    assert_eq!(d.reason, Reason::SplitLsnUnknown);
    h.writer_answers("SELECT 1", b'T', None, None);
    // COMMIT of a transaction that wrote: probed.
    h.client(&query("COMMIT"));
    h.take_sent(WRITER);
    h.writer_answers("COMMIT", b'I', None, None);
    assert_eq!(sent_queries(&h.take_sent(WRITER)), vec![PROBE.to_string()]);
}

#[test]
fn i11_pg19_waits_with_wait_for_lsn_and_its_timeout_is_recognised_by_position() {
    let mut h = stock(|_| {});
    h.engine.set_server_version(1, 190_000);
    h.engine.set_server_version(2, 190_000);
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', None, None);
    h.backend(WRITER, &probe_answer("16/B374D848"));
    h.take_client();
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec!["WAIT FOR LSN '16/B374D848' WITH (TIMEOUT '1000ms'); SELECT v FROM t".to_string()]
    );
    let d = h.last_decision();
    assert_eq!((d.reason, d.wait), (Reason::ReadWait, true));
    // The timeout answers the hidden WAIT FOR: a wait timeout, re-run on the writer.
    h.take_sent(WRITER);
    let mut b = error(
        "ERROR",
        "57014",
        "canceling statement due to timeout",
        None,
        None,
    );
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterTimeout);
    assert_eq!(h.take_sent(WRITER), query("SELECT v FROM t"));
    assert!(h.take_client().is_empty());
    h.writer_answers("SELECT 0", b'I', None, None);
    h.take_client();
    // A 57014 answering the client's own statement after the wait is a cancel: forwarded.
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    let mut b = msg(b'C', b"WAIT\0");
    b.extend(error(
        "ERROR",
        "57014",
        "canceling statement due to user request",
        None,
        None,
    ));
    b.extend(rfq(b'I', None, None));
    h.backend(R1, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert_eq!(h.engine.stats().get(Counter::Cancels), 1);
}
