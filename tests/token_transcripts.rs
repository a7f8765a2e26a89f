//! Causal tokens (SPEC §11, C-1…C-3) as protocol traces: answered by the engine in the simple
//! and the extended protocol, never forwarded; a presented token only ever raises the target;
//! malformed ones change nothing; the startup options are stripped; reported tokens cover the
//! write they follow.

mod common;

use common::*;
use polarsplit::Counter;
use polarsplit::Lsn;
use polarsplit::{ConnId, Event, Outcome, Reason};
use polarsplit::{ServerDialect, StartupProfile};
use polarsplit::{Token, WriterIdentity};

const R1: ConnId = 951;
const ID: WriterIdentity = WriterIdentity {
    system_id: 7_301_234_567_890_123_456,
    timeline: 2,
};

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.engine.set_writer_identity(0, ID);
    h.connect();
    h
}

fn show_row(got: &[u8]) -> String {
    messages(got)
        .into_iter()
        .find(|(t, _)| *t == b'D')
        .map(|(_, b)| String::from_utf8_lossy(&b[6..]).into_owned())
        .expect("a DataRow")
}

fn acquired(acts: &[A]) -> bool {
    acts.iter().any(|a| matches!(a, A::Acquire { .. }))
}

#[test]
fn c1_show_is_answered_by_the_engine_with_the_sessions_target() {
    let mut h = host();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x16_B374_D848), None);
    h.take_client();
    h.take_sent(WRITER);
    h.client(&query("SHOW polarsplit.causal_token"));
    assert!(h.take_sent(WRITER).is_empty(), "nothing reaches a server");
    let got = h.take_client();
    assert_eq!(tags(&got), "TDCZ");
    assert_eq!(show_row(&got), "ps1:7301234567890123456.2:16/B374D848");
    assert_eq!(client_rfq_statuses(&got), vec![b'I']);
    assert_eq!(h.last_decision().reason, Reason::CausalToken);
    assert_eq!(h.engine.stats().get(Counter::TokensIssued), 1);
    assert!(h.streams.balanced());
}

#[test]
fn c1_show_as_an_extended_batch_is_answered_message_by_message() {
    let mut h = host();
    let mut b = parse("", "SHOW polarsplit.causal_token");
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert!(h.take_sent(WRITER).is_empty());
    let got = h.take_client();
    assert_eq!(tags(&got), "12TDCZ");
    assert_eq!(show_row(&got), "ps1:7301234567890123456.2:0/0");
    // And psycopg's shape with a Describe of the statement and a lone Flush.
    let mut b = parse("s", "SHOW polarsplit.causal_token");
    b.extend(describe(b'S', "s"));
    b.extend(flush());
    h.client(&b);
    assert_eq!(tags(&h.take_client()), "1tT");
    let mut b = bind("", "s");
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(tags(&h.take_client()), "2DCZ");
    assert!(h.streams.balanced());
}

#[test]
fn c2_a_presented_token_raises_the_target_for_the_next_read() {
    let mut h = host();
    let t = Token {
        history: ID,
        lsn: Lsn(0x9000),
    };
    h.client(&query(&format!("SET polarsplit.causal_token = '{t}'")));
    assert!(h.take_sent(WRITER).is_empty(), "never forwarded");
    assert_eq!(tags(&h.take_client()), "CZ");
    assert_eq!(h.engine.stats().get(Counter::TokensAccepted), 1);
    assert!(acquired(&h.client(&query("SELECT v FROM t"))));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!(
        (d.reason, d.target, d.wait),
        (Reason::ReadWait, Lsn(0x9000), true)
    );
    // A token behind the session's target never lowers it.
    let old = Token {
        history: ID,
        lsn: Lsn(0x10),
    };
    h.backend(R1, &{
        let mut b = Vec::new();
        for _ in 0..3 {
            b.extend(command_complete("SET"));
        }
        b.extend(select_result(&["1"]));
        b.extend(rfq(b'I', Some(0x9000), None));
        b
    });
    h.take_client();
    h.client(&query(&format!("SET polarsplit.causal_token = '{old}'")));
    assert!(h.session.lsn_state().target() >= Lsn(0x9000));
}

#[test]
fn c2_a_malformed_token_is_22023_and_changes_nothing() {
    let mut h = host();
    for bad in ["ps1:x", "", "ps1:7301234567890123456.2:0/0A"] {
        h.client(&query(&format!("SET polarsplit.causal_token = '{bad}'")));
        let got = h.take_client();
        assert_eq!(tags(&got), "EZ", "{bad}");
        assert!(String::from_utf8_lossy(&got).contains("22023"));
    }
    assert_eq!(h.engine.stats().get(Counter::TokensRejected), 3);
    assert_eq!(h.session.lsn_state().target(), Lsn::ZERO);
    // Inside a failed transaction: 25P02 like any statement there.
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), None);
    h.client(&query("INSERT INTO t VALUES (1/0)"));
    let mut b = error("ERROR", "22012", "division by zero", None, None);
    b.extend(rfq(b'E', Some(0x1000), None));
    h.backend(WRITER, &b);
    h.take_client();
    h.client(&query("SET polarsplit.causal_token = 'ps1:1.1:0/1'"));
    let got = h.take_client();
    assert_eq!(tags(&got), "EZ");
    assert!(String::from_utf8_lossy(&got).contains("25P02"));
    assert_eq!(client_rfq_statuses(&got), vec![b'E']);
}

#[test]
fn c2_a_token_of_another_history_targets_the_writers_latest_position_with_a_notice() {
    let mut h = host();
    h.engine
        .observe_writer_lsn(0, h.engine.writer_view(0).generation, Lsn(0x7777));
    h.client(&query("SET polarsplit.causal_token = 'ps1:42.1:FF/0'"));
    let got = h.take_client();
    assert_eq!(tags(&got), "NCZ");
    assert_eq!(h.session.lsn_state().target(), Lsn(0x7777));
    assert_eq!(h.engine.stats().get(Counter::TokensIgnored), 1);
}

#[test]
fn c2_a_forged_token_far_beyond_the_writer_is_bounded_by_the_wait_timeout() {
    let mut h = host();
    h.client(&query(
        "SET polarsplit.causal_token = 'ps1:7301234567890123456.2:FFFF/0'",
    ));
    h.take_client();
    h.client(&query("SELECT 1"));
    h.attach(R1);
    h.take_sent(WRITER);
    // The reader cannot reach it: its strict wait times out, the writer answers.
    let mut b = command_complete("SET");
    b.extend(command_complete("SET"));
    b.extend(wait_timeout_error());
    b.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &b);
    assert_eq!(h.last_decision().reason, Reason::RetryPrimaryAfterTimeout);
    assert_eq!(h.take_sent(WRITER), query("SELECT 1"));
    // On stock PostgreSQL (no wait): no reader is caught up, the primary at once.
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ]));
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.writer_answers_startup_capture(&[]);
    h.client(&query("SET polarsplit.causal_token = 'ps1:0.0:FFFF/0'"));
    h.client(&query("SELECT 1"));
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ForcePrimary, Reason::ReadNoBoundedWait)
    );
}

#[test]
fn c2_the_startup_option_presents_a_token_and_never_reaches_a_server() {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.engine.set_writer_identity(0, ID);
    let acts = h.client(&startup(&[
        ("user", "app"),
        ("database", "db"),
        (
            "options",
            "-c polarsplit.causal_token=ps1:7301234567890123456.2:0/9000 -c search_path=a",
        ),
    ]));
    let A::ConnectWriter(bytes) = &acts[1] else {
        panic!("{acts:?}")
    };
    let text = String::from_utf8_lossy(bytes);
    assert!(!text.contains("polarsplit"), "{text}");
    assert!(text.contains("-c search_path=a"));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &auth);
    assert_eq!(h.session.lsn_state().target(), Lsn(0x9000));
    // A malformed one ends the session as an invalid startup setting does.
    let mut h = Host::new(config(&[]));
    h.client(&startup(&[
        ("user", "app"),
        ("polarsplit.causal_token", "nope"),
    ]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', Some(0x1000), None));
    let acts = h.backend(WRITER, &auth);
    assert!(acts.contains(&A::CloseClient), "{acts:?}");
    assert!(String::from_utf8_lossy(&h.take_client()).contains("22023"));
}

#[test]
fn c1_reported_tokens_cover_the_write_on_stock_the_rfq_waits_for_the_probe() {
    let mut h = Host::new(config(&[
        ("server_dialect", ServerDialect::Stock.as_str()),
        ("startup_profile", StartupProfile::Off.as_str()),
    ]));
    h.engine.remove_reader(2);
    h.engine.set_writer_identity(0, ID);
    h.client(&startup(&[
        ("user", "app"),
        ("options", "-c polarsplit.report_token=on"),
    ]));
    h.event(WRITER, Event::WriterConnected);
    let mut auth = auth_ok();
    auth.extend(rfq(b'I', None, None));
    h.backend(WRITER, &auth);
    h.writer_answers_startup_capture(&[]);
    let got = h.take_client();
    assert_eq!(tags(&got), "RSZ", "the token at once");
    h.client(&query("UPDATE t SET v = 1"));
    let mut b = command_complete("UPDATE 1");
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    assert_eq!(tags(&h.take_client()), "C", "the RFQ waits for the probe");
    let mut b = probe_answer_rows("0/5000", false);
    b.extend(rfq(b'I', None, None));
    h.backend(WRITER, &b);
    let got = h.take_client();
    assert_eq!(tags(&got), "SZ");
    let ps = messages(&got).remove(0).1;
    assert_eq!(
        String::from_utf8_lossy(&ps),
        "polarsplit.causal_token\0ps1:7301234567890123456.2:0/5000\0"
    );
    assert!(h.streams.balanced());
}

#[test]
fn c2_tokens_inside_a_transaction_raise_the_pre_write_wait() {
    let mut h = host();
    h.client(&query("BEGIN"));
    h.writer_answers("BEGIN", b'T', Some(0x1000), Some((b'x', "")));
    h.take_client();
    h.client(&query(
        "SET polarsplit.causal_token = 'ps1:7301234567890123456.2:0/8000'",
    ));
    let got = h.take_client();
    assert_eq!(client_rfq_statuses(&got), vec![b'T']);
    h.client(&query("SELECT 1"));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!((d.reason, d.target), (Reason::SplitPreWrite, Lsn(0x8000)));
}

#[test]
fn c3_a_new_writer_history_is_a_writer_change() {
    let h = host();
    let g = h.engine.writer_view(0).generation;
    assert_eq!(
        h.engine.set_writer_identity(0, ID),
        g,
        "same history: nothing"
    );
    let next = h
        .engine
        .set_writer_identity(0, WriterIdentity { timeline: 3, ..ID });
    assert_eq!(next, g + 1, "a promotion bumps the generation (S-2)");
}
