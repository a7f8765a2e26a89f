//! Transcripts of what the engine knows of its readers (SPEC R-1a, R-1b, R-2, P-4, P-7): a
//! restarted standby behind its old position, frozen readers and the response deadline, readers
//! held out after consecutive failures, pinned readers reused on fresh monitor samples, and the
//! choice of a reader that can wait over the primary.

mod common;

use std::sync::Arc;

use common::*;
use polarsplit::internals::cluster::readers::{BACKOFF_BASE_MS, BACKOFF_CAP_MS};
use polarsplit::Counter;
use polarsplit::Engine;
use polarsplit::Lsn;
use polarsplit::ServerDialect;
use polarsplit::{Event, Outcome, Reason};

const R1: u64 = 501;
const R2: u64 = 502;
const SQL: &str = "SELECT v FROM t WHERE k = 1";

/// A session on an engine whose only reader is server 1, after a committed write at `write`.
fn one_reader(dialect: ServerDialect, write: u64) -> Host {
    let mut h = Host::new(config(&[("server_dialect", dialect.as_str())]));
    h.engine.remove_reader(2);
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(write), None);
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

/// The reader answers the unit in flight: `hidden` SETs, one row, an RFQ reporting `replay`.
fn reader_rows(h: &mut Host, conn: u64, hidden: usize, replay: u64) -> Vec<A> {
    let mut b = sets(hidden);
    b.extend(select_result(&["v"]));
    b.extend(rfq(b'I', Some(replay), None));
    h.backend(conn, &b)
}

fn acquired(acts: &[A]) -> Option<u32> {
    acts.iter().find_map(|a| match a {
        A::Acquire { server, .. } => Some(*server),
        _ => None,
    })
}

fn waits_for(sent: &[u8]) -> Option<u64> {
    let q = sent_queries(sent).into_iter().next()?;
    let i = q.find("polar_xact_split_wait_lsn = '")? + "polar_xact_split_wait_lsn = '".len();
    q[i..].split('\'').next()?.parse().ok()
}

// --- R-1a ------------------------------------------------------------------------------------

/// kill -9 of a standby, restarted behind the position it had reached: the engine must not route
/// a read needing the old target there on the strength of the old evidence.
#[test]
fn r1a_a_reader_restarted_behind_its_old_position_gets_a_wait_not_a_stale_read() {
    let mut h = one_reader(ServerDialect::Awide, 0x5000);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.client(&query(SQL));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!((d.reason, d.wait), (Reason::ReadCaughtUp, false));
    assert_eq!(h.take_sent(R1), query(SQL));
    reader_rows(&mut h, R1, 0, 0x6000);
    h.take_client();
    // The standby is killed: the host sees its pooled connection break.
    h.now += 5;
    h.engine.reader_lost(1, h.now);
    // A monitor answer to a query sent before the crash arrives late: it says nothing now.
    h.engine.reader_sample(1, Lsn(0x6000), h.now - 3);
    // Restarted, it accepts reads while redoing WAL far behind.
    h.now += 5;
    h.engine.reader_sample(1, Lsn(0x2000), h.now);
    let snap = h.engine.readers().snapshot(1).unwrap();
    assert_eq!((snap.known, snap.replay_lsn), (true, Lsn(0x2000)));
    // The session's target is what its last read saw (0x6000, S-1a), above its write.
    h.client(&query(SQL));
    h.attach(R2);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.wait, d.target),
        (
            Outcome::ReplicaWithWait,
            Reason::ReadWait,
            true,
            Lsn(0x6000)
        )
    );
    assert_eq!(waits_for(&h.take_sent(R2)), Some(0x6000));
    reader_rows(&mut h, R2, 3, 0x6000);
    // Once it has caught up (a sample says so), no wait again.
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.client(&query(SQL));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    assert_eq!(h.engine.stats().get(Counter::SamplesBeforeOutage), 1);
}

/// polardb has no bounded wait: the read goes to the primary.
#[test]
fn r1a_polardb_a_restarted_reader_behind_the_target_leaves_the_read_on_the_primary() {
    let mut h = one_reader(ServerDialect::PolarDb, 0x5000);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.client(&query(SQL));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::ReadCaughtUp);
    reader_rows(&mut h, R1, 0, 0x6000);
    h.now += 5;
    h.engine.reader_lost(1, h.now);
    h.now += 5;
    h.engine.reader_sample(1, Lsn(0x2000), h.now);
    h.take_sent(WRITER);
    let acts = h.client(&query(SQL));
    assert_eq!(acquired(&acts), None);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::ReadNoBoundedWait)
    );
    assert_eq!(h.take_sent(WRITER), query(SQL));
}

/// A session's own lost reader connection, and a connect refused with 57P03 (the standby is
/// starting up), are outages: evidence taken before them never counts again.
#[test]
fn r1a_a_lost_connection_and_a_57p03_refusal_are_outages() {
    let mut h = one_reader(ServerDialect::PolarDb, 0x5000);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    h.client(&query(SQL));
    h.attach(R1);
    h.take_sent(WRITER);
    // The connection breaks mid-read: the writer answers (the only reader just failed).
    h.event(R1, Event::ConnectionLost);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterLoss);
    h.writer_answers("SELECT 1", b'I', Some(0x5000), None);
    assert!(!h.engine.readers().snapshot(1).unwrap().known);
    // The host's late report of a sample sent before the loss is not used.
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    let acts = h.client(&query(SQL));
    assert_eq!(acquired(&acts), None);
    assert_eq!(h.last_decision().reason, Reason::ReadNoBoundedWait);
    h.writer_answers("SELECT 1", b'I', Some(0x5000), None);
    // A sample after the loss: caught up again.
    h.now += 1;
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    let acts = h.client(&query(SQL));
    assert_eq!(acquired(&acts), Some(1));
    // The standby restarted meanwhile: the connection is refused with 57P03.
    h.take_sent(WRITER);
    h.event(0, Event::ReaderConnectFailed { starting_up: true });
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::NoReaderConnection)
    );
    assert_eq!(h.take_sent(WRITER), query(SQL));
    h.writer_answers("SELECT 1", b'I', Some(0x5000), None);
    assert!(!h.engine.readers().snapshot(1).unwrap().known);
    let stats = h.engine.stats();
    assert_eq!(stats.get(Counter::ReaderStartingUp), 1);
    assert_eq!(stats.get(Counter::ReaderConnectFailures), 1);
    assert_eq!(stats.get(Counter::ReaderFailures), 2);
    assert_eq!(stats.get(Counter::ReaderOutages), 2);
    assert_eq!(h.engine.readers().snapshot(1).unwrap().failures, 2);
}

// --- R-1b ------------------------------------------------------------------------------------

/// A frozen reader (SIGSTOP): nothing answers, its monitor neither. At the deadline the engine
/// closes it and retries the read elsewhere (F-2); the reader has a failure and an outage.
#[test]
fn r1b_a_frozen_reader_is_closed_at_the_deadline_and_the_read_retried() {
    let mut h = Host::new(config(&[]));
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x5000), None);
    h.take_client();
    let t0 = h.now;
    let first = acquired(&h.client(&query(SQL))).unwrap();
    h.attach(R1);
    h.take_sent(R1);
    assert_eq!(h.session.next_deadline(), Some(t0 + 10_000));
    h.now = t0 + 9_999;
    assert!(h.timeout().is_empty(), "not yet");
    h.now = t0 + 10_000;
    let acts = h.timeout();
    assert!(acts.contains(&A::CloseBackend(R1)), "{acts:?}");
    let other = acquired(&acts).expect("retried on the other reader");
    assert_ne!(other, first);
    assert_eq!(h.engine.stats().get(Counter::ReaderDeadlines), 1);
    let snap = h.engine.readers().snapshot(first).unwrap();
    assert_eq!((snap.failures, snap.outage_at_ms), (1, Some(t0 + 10_000)));
    // The retry answers the client.
    h.attach(R2);
    assert_eq!(h.last_decision().reason, Reason::RetryOtherReader);
    reader_rows(&mut h, R2, 3, 0x5000);
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(h.session.next_deadline(), None);
    assert!(h.streams.balanced());
}

/// A long report on a reader whose monitor keeps answering is never killed.
#[test]
fn r1b_a_long_read_on_a_reader_whose_monitor_answers_is_not_killed() {
    let mut h = one_reader(ServerDialect::Awide, 0x5000);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    let t0 = h.now;
    h.client(&query(SQL));
    h.attach(R1);
    h.now = t0 + 4_000;
    assert!(h.engine.reader_sample(1, Lsn(0x6100), h.now));
    assert!(h.engine.readers().sampled_since(1, t0));
    assert_eq!(h.session.next_deadline(), Some(t0 + 14_000));
    h.now = t0 + 10_000;
    assert!(h.timeout().is_empty());
    h.now = t0 + 13_000;
    h.engine.reader_sample(1, Lsn(0x6200), h.now);
    h.now = t0 + 20_000;
    assert!(h.timeout().is_empty());
    // The report ends: the rows reach the client.
    h.now = t0 + 21_000;
    reader_rows(&mut h, R1, 0, 0x6200);
    assert_eq!(tags(&h.take_client()), "TDCZ");
    assert_eq!(h.engine.stats().get(Counter::ReaderDeadlines), 0);
    assert_eq!(h.engine.readers().snapshot(1).unwrap().failures, 0);
}

/// A report still streaming its rows is never killed, even while its monitor answers nothing
/// (its postmaster frozen, the monitor's backend too): the deadline counts from the reader's
/// last bytes. Counted from when the statement was sent, a 40 MB report was cut at 30,000 of
/// 40,000 rows (an examiner's finding of 2026-12-07).
#[test]
fn r1b_a_read_still_streaming_rows_is_not_killed_while_its_monitor_is_silent() {
    let mut h = one_reader(ServerDialect::Awide, 0x5000);
    h.engine.reader_sample(1, Lsn(0x6000), h.now);
    let t0 = h.now;
    h.client(&query(SQL));
    h.attach(R1);
    h.take_sent(R1);
    assert_eq!(h.session.next_deadline(), Some(t0 + 10_000));
    h.now = t0 + 6_000;
    let mut rows = row_description(1);
    rows.extend(data_row(&["1"]));
    h.backend(R1, &rows);
    assert_eq!(h.session.next_deadline(), Some(t0 + 16_000));
    h.now = t0 + 12_000;
    h.backend(R1, &data_row(&["2"]));
    h.now = t0 + 21_999;
    assert!(h.timeout().is_empty(), "it answered 10 s ago");
    h.now = t0 + 22_000;
    let acts = h.timeout();
    assert!(
        acts.contains(&A::CloseBackend(R1)),
        "silent for 10 s: {acts:?}"
    );
    assert_eq!(h.engine.stats().get(Counter::ReaderDeadlines), 1);
}

/// Sessions of one engine whose only reader fails to connect `reader_failure_threshold` times in
/// a row: from then on new sessions read on the primary without asking for a connection, until a
/// monitor sample taken after the latest failure lets it back in.
#[test]
fn r1b_a_held_out_reader_sends_new_sessions_straight_to_the_primary_until_a_sample() {
    let engine = Engine::new(config(&[]));
    engine.add_reader(1, 1);
    engine.reader_sample(1, Lsn(0x6000), 1_000);
    let mut now = 1_000;
    let session = |engine: &Arc<Engine>, now: u64| {
        let mut h = Host::on(engine, now);
        h.connect();
        h
    };
    for i in 0..3u32 {
        now += 2_000; // each attempt paid the host's connect timeout
        let mut h = session(&engine, now);
        assert_eq!(acquired(&h.client(&query(SQL))), Some(1), "attempt {i}");
        h.take_sent(WRITER);
        h.event(0, Event::ReaderConnectFailed { starting_up: false });
        assert_eq!(h.take_sent(WRITER), query(SQL));
        let expect_back_off = now + (BACKOFF_BASE_MS << i);
        assert_eq!(engine.reader_retry_after(1), Some(expect_back_off));
        assert_eq!(engine.reader_held_out(1), i == 2);
    }
    assert_eq!(engine.stats().get(Counter::ReadersHeldOut), 1);
    // Held out: no AcquireReader at all, the read is the primary's.
    for _ in 0..3 {
        now += 100;
        let mut h = session(&engine, now);
        h.take_sent(WRITER);
        let acts = h.client(&query(SQL));
        assert_eq!(acquired(&acts), None, "{acts:?}");
        let d = h.last_decision();
        assert_eq!(
            (d.outcome, d.reason),
            (Outcome::ForcePrimary, Reason::NoReaderAvailable)
        );
        assert_eq!(h.take_sent(WRITER), query(SQL));
    }
    // The monitor keeps sampling: a sample sent at the latest failure is not "after" it.
    engine.reader_sample(1, Lsn(0x6000), 7_000);
    assert!(engine.reader_held_out(1));
    now += 100;
    engine.reader_sample(1, Lsn(0x6000), now);
    assert!(!engine.reader_held_out(1));
    assert_eq!(engine.reader_retry_after(1), None);
    assert_eq!(engine.stats().get(Counter::ReadersBackIn), 1);
    let mut h = session(&engine, now + 1);
    assert_eq!(acquired(&h.client(&query(SQL))), Some(1));
    h.attach(R1);
    reader_rows(&mut h, R1, 0, 0x6000);
    // It answered: the consecutive count restarts.
    let snap = engine.readers().snapshot(1).unwrap();
    assert_eq!((snap.failures, snap.held_out), (0, false));
}

/// R-1b while the standby accepts no new connection but its established ones answer (a frozen
/// postmaster, a firewall dropping new connections): the monitor keeps sampling on its old
/// connection. The first sample after a failure lifts the back-off (as for a standby that was
/// down and is back); a session's connect that began after it and failed too shows the samples
/// prove nothing of new connections — from then on the back-off paces new connections whatever
/// the monitor says, so new sessions do not each wait for a connect that hangs (an examiner's
/// finding, 2026-12-07: 6 of 7 new sessions waited 2 s where the primary alone answered at once).
#[test]
fn r1b_a_monitor_answering_on_an_old_connection_does_not_lift_the_back_off_for_good() {
    let engine = Engine::new(config(&[]));
    engine.add_reader(1, 1);
    engine.reader_sample(1, Lsn(0x6000), 1_000);
    let session = |engine: &Arc<Engine>, now: u64| {
        let mut h = Host::on(engine, now);
        h.connect();
        h
    };
    // A session asks at 1_100; its connect hangs to the host's 2 s timeout.
    let mut h = session(&engine, 1_100);
    assert_eq!(acquired(&h.client(&query(SQL))), Some(1));
    h.take_sent(WRITER);
    h.now = 3_100;
    h.event(0, Event::ReaderConnectFailed { starting_up: false });
    assert_eq!(engine.reader_retry_after(1), Some(3_100 + BACKOFF_BASE_MS));
    // The monitor answers on its old connection: the back-off is lifted.
    engine.reader_sample(1, Lsn(0x6000), 3_110);
    assert_eq!(engine.reader_retry_after(1), None);
    // The next session's connect began after that sample and hangs too.
    let mut h = session(&engine, 3_120);
    assert_eq!(acquired(&h.client(&query(SQL))), Some(1));
    h.take_sent(WRITER);
    h.now = 5_120;
    h.event(0, Event::ReaderConnectFailed { starting_up: false });
    for t in [5_130, 5_140, 5_300] {
        engine.reader_sample(1, Lsn(0x6000), t);
        assert_eq!(
            engine.reader_retry_after(1),
            Some(5_120 + 2 * BACKOFF_BASE_MS),
            "the monitor's samples say nothing of new connections now"
        );
    }
}

/// The back-off grows while the reader keeps failing and is capped; a lost connection, a
/// deadline and a failed monitor query count like a failed connect.
#[test]
fn r1b_back_off_grows_while_failing_and_is_capped() {
    let engine = Engine::new(config(&[]));
    engine.add_reader(1, 1);
    let mut now = 10_000;
    let mut last = 0;
    for i in 0..8 {
        now += 1_000;
        match i % 3 {
            0 => engine.reader_monitor_failed(1, now),
            1 => engine.reader_lost(1, now),
            _ => engine.reader_connect_failed(1, now, false),
        }
        let wait = engine.reader_retry_after(1).unwrap() - now;
        assert!(wait >= last && wait <= BACKOFF_CAP_MS);
        last = wait;
    }
    assert_eq!(last, BACKOFF_CAP_MS);
    assert_eq!(engine.stats().get(Counter::MonitorFailures), 3);
    assert_eq!(engine.stats().get(Counter::ReaderFailures), 8);
    assert!(engine.reader_held_out(1));
}

// --- P-7 -------------------------------------------------------------------------------------

/// BEGIN, a pre-write read that pins reader 1 (its RFQ reports 0x1000), then a write at `write`.
fn pinned_after_write(dialect: ServerDialect, write: u64) -> Host {
    let mut h = Host::new(config(&[("server_dialect", dialect.as_str())]));
    h.engine.remove_reader(2);
    h.connect();
    h.now = 10_000;
    let marker = (dialect == ServerDialect::Awide).then_some((b'x', ""));
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), marker);
    h.engine.reader_sample(1, Lsn(0x1000), h.now);
    h.client(&query("SELECT 1"));
    h.attach(R1);
    assert_eq!(h.last_decision().reason, Reason::SplitPreWrite);
    h.take_sent(R1);
    // The writer answers the hidden touch of its block (P-5).
    h.writer_answers_touch(Some(0x1000), marker);
    reader_rows(&mut h, R1, 0, 0x1000);
    assert_eq!(h.session.pinned_reader(), Some(R1));
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'T', Some(write), Some((b'x', "1,733")));
    h.take_client();
    h
}

/// awide: a split read on the pinned reader skips its wait when a fresh monitor sample (not
/// only the pin's own RFQ) shows the reader past the target; a stale sample, or one taken before
/// the reader's latest outage, does not.
#[test]
fn p7_a_pinned_reader_is_reused_without_a_wait_on_a_fresh_monitor_sample() {
    let mut h = pinned_after_write(ServerDialect::Awide, 0x8000);
    // A sample older than reader_lsn_max_age_ms (5000): the wait is sent.
    h.engine.reader_sample(1, Lsn(0x9000), h.now - 6_000);
    h.client(&query(SQL));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.wait),
        (Outcome::ReplicaTxnSplit, Reason::SplitRead, true)
    );
    assert_eq!(waits_for(&h.take_sent(R1)), Some(0x8000));
    reader_rows(&mut h, R1, 4, 0x8100);
    // Another write: the pin's own RFQ (0x8100) is behind it; a fresh sample is past it.
    h.client(&query("INSERT INTO t VALUES (2)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0xA000), Some((b'x', "2,733")));
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0xB000), h.now);
    h.client(&query(SQL));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.wait, d.server),
        (Outcome::ReplicaTxnSplit, false, Some(1))
    );
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec![format!("SET polar_xact_split_xids = '2,733'; {SQL}")]
    );
    reader_rows(&mut h, R1, 1, 0xB000);
    // A sample taken, then an outage of the reader: the sample no longer counts.
    h.client(&query("INSERT INTO t VALUES (3)"));
    h.writer_answers("INSERT 0 1", b'T', Some(0xC000), Some((b'x', "3,733")));
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0xD000), h.now);
    h.now += 1;
    h.engine.reader_outage(1, h.now);
    h.client(&query(SQL));
    assert!(h.last_decision().wait);
    assert_eq!(waits_for(&h.take_sent(R1)), Some(0xC000));
}

/// polardb (no bounded wait): later reads of a pinned transaction split only once the pinned
/// reader is known past the transaction's LSN — a fresh monitor sample is such knowledge.
#[test]
fn p7_polardb_later_reads_of_a_pinned_transaction_split_on_a_fresh_monitor_sample() {
    let mut h = pinned_after_write(ServerDialect::PolarDb, 0x8000);
    h.client(&query(SQL));
    assert_eq!(
        h.last_decision().reason,
        Reason::SplitNoCaughtUpReader,
        "nothing shows the pin past 0x8000"
    );
    h.writer_answers("SELECT 1", b'T', Some(0x8000), Some((b'x', "1,733")));
    // A stale sample is not enough either.
    h.engine.reader_sample(1, Lsn(0x9000), h.now - 6_000);
    h.client(&query(SQL));
    assert_eq!(h.last_decision().reason, Reason::SplitNoCaughtUpReader);
    h.writer_answers("SELECT 1", b'T', Some(0x8000), Some((b'x', "1,733")));
    h.now += 10;
    h.engine.reader_sample(1, Lsn(0x9000), h.now);
    h.client(&query(SQL));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.server),
        (Outcome::ReplicaTxnSplit, Reason::SplitRead, Some(1))
    );
    assert_eq!(
        sent_queries(&h.take_sent(R1)),
        vec![format!("SET polar_xact_split_xids = '1,733'; {SQL}")]
    );
    reader_rows(&mut h, R1, 1, 0x9000);
    assert_eq!(client_rfq_statuses(&h.take_client()).last(), Some(&b'T'));
}

// --- R-2 -------------------------------------------------------------------------------------

/// After one reader refused the wait settings (42704), reads that need a wait go to the reader
/// that can wait — never to the primary while one can.
#[test]
fn r2_a_reader_that_can_wait_is_chosen_over_the_primary_after_another_refused_waits() {
    let mut h = Host::new(config(&[]));
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x5000), None);
    let refusing = acquired(&h.client(&query(SQL))).unwrap();
    h.attach(R1);
    let mut b = error(
        "ERROR",
        "42704",
        "unrecognized configuration parameter \"polar_consistency_mode\"",
        None,
        None,
    );
    b.extend(rfq(b'I', Some(0x4000), None));
    h.backend(R1, &b);
    assert!(h.engine.waits_unsupported(refusing));
    h.writer_answers("SELECT 1", b'I', Some(0x5000), None);
    let other = if refusing == 1 { 2 } else { 1 };
    for i in 0..20u64 {
        let write = 0x6000 + i * 0x100;
        h.client(&query("INSERT INTO t VALUES (2)"));
        h.writer_answers("INSERT 0 1", b'I', Some(write), None);
        let acts = h.client(&query(SQL));
        assert_eq!(acquired(&acts), Some(other), "read {i}: {acts:?}");
        h.attach(R2);
        let d = h.last_decision();
        assert_eq!((d.outcome, d.wait), (Outcome::ReplicaWithWait, true));
        assert_eq!(waits_for(&h.take_sent(R2)), Some(write));
        // It answers from before the write's position: the next read needs a wait again.
        reader_rows(&mut h, R2, 3, write - 1);
    }
    assert_eq!(h.engine.stats().get(Counter::ReadsKeptOnWriter), 0);
}

// --- §9 --------------------------------------------------------------------------------------

/// The counters and per-reader gauges in the Prometheus text format.
#[test]
fn s9_prometheus_text_has_reader_gauges_and_the_r1_counters() {
    let h = Host::new(config(&[]));
    h.engine.writer_sample(0, Lsn(0x9000), 1_000);
    h.engine.reader_sample(1, Lsn(0x8000), 1_000);
    for t in 0..3 {
        h.engine.reader_connect_failed(2, 2_000 + t, false);
    }
    let text = h.engine.prometheus();
    for line in [
        "polarsplit_readers_held_out_total 1",
        "polarsplit_reader_connect_failures_total 3",
        "polarsplit_reader_deadlines_total 0",
        "polarsplit_reader_replay_lsn{server=\"1\",hostgroup=\"1\"} 32768",
        "polarsplit_reader_lag_bytes{server=\"1\",hostgroup=\"1\"} 4096",
        "polarsplit_reader_position_known{server=\"2\",hostgroup=\"1\"} 0",
        "polarsplit_reader_held_out{server=\"1\",hostgroup=\"1\"} 0",
        "polarsplit_reader_held_out{server=\"2\",hostgroup=\"1\"} 1",
        "polarsplit_reader_consecutive_failures{server=\"2\",hostgroup=\"1\"} 3",
        "polarsplit_decisions_total{outcome=\"FORCE_PRIMARY\"} 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // Unknown positions have no replay or lag sample at all.
    assert!(!text.contains("polarsplit_reader_replay_lsn{server=\"2\""));
    assert!(!text.contains("polarsplit_reader_lag_bytes{server=\"2\""));
    // Every sample line belongs to a declared metric.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let name = l.split(['{', ' ']).next().unwrap();
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "undeclared {name}"
        );
    }
}

/// The offload P-7 bought, measured (issue 16): polardb transactions whose first read pinned the
/// reader, then a write, then four reads, while a background committer keeps the writer moving
/// and the monitor's samples of the reader trail it by a random lag. A post-write read splits
/// exactly when the latest fresh sample shows the pinned reader past the transaction's write;
/// before P-7 used the samples, none did (the pin's own RFQ was always behind the write). Prints
/// the share; the equivalence is the assertion.
#[test]
fn p7_post_write_reads_of_pinned_transactions_split_on_fresh_samples_measured() {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let (mut reads, mut split, mut expected) = (0u32, 0u32, 0u32);
    let mut mismatches = Vec::new();
    for txn in 0..300u64 {
        let write = 0x10_000 + txn * 0x100;
        let mut h = pinned_after_write(ServerDialect::PolarDb, write);
        // The background committer: the writer moves on; the reader's replay trails it.
        let mut writer_pos = write + 0x800;
        let mut sample = write.saturating_sub(next(0x3000));
        let txn_lsn = write;
        for _ in 0..4 {
            h.now += 10;
            writer_pos += next(0x800);
            sample = (sample + next(0x1000)).min(writer_pos);
            h.engine.reader_sample(1, Lsn(sample), h.now);
            let caught_up = sample >= txn_lsn;
            h.client(&query(SQL));
            let d = h.last_decision();
            reads += 1;
            let did = d.outcome == Outcome::ReplicaTxnSplit;
            split += u32::from(did);
            expected += u32::from(caught_up);
            if did != caught_up {
                mismatches.push((txn, sample, txn_lsn, d.reason));
            }
            if did {
                h.take_sent(R1);
                reader_rows(&mut h, R1, 1, sample);
            } else {
                h.writer_answers("SELECT 1", b'T', Some(txn_lsn), Some((b'x', "1,733")));
            }
            h.take_client();
        }
    }
    println!(
        "P-7 offload: {split} of {reads} post-write reads in pinned transactions split \
         ({:.1}%), {expected} had a fresh sample past the write",
        100.0 * f64::from(split) / f64::from(reads)
    );
    assert!(
        mismatches.is_empty(),
        "{:?}",
        &mismatches[..mismatches.len().min(5)]
    );
    assert!(split > 0, "the workload gives fresh samples past the write");
}
