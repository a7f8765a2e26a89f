//! Protocol shapes other than one simple Query: extended protocol (P-3 step 6), COPY, function
//! calls, Terminate, encryption and cancel requests.

mod common;

use common::*;
use polarsplit::session::{Event, Outcome, Reason};

const R1: u64 = 601;

fn host() -> Host {
    let mut h = Host::new(config(|_| {}));
    h.connect();
    h
}

fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut b = format!("{name}\0{sql}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes());
    msg(b'P', &b)
}

fn bind(portal: &str, stmt: &str) -> Vec<u8> {
    let mut b = format!("{portal}\0{stmt}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes()); // parameter formats
    b.extend_from_slice(&1i16.to_be_bytes()); // one parameter
    b.extend_from_slice(&1i32.to_be_bytes());
    b.push(b'7');
    b.extend_from_slice(&0i16.to_be_bytes()); // result formats
    msg(b'B', &b)
}

fn describe(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'D', &b)
}

fn execute(portal: &str) -> Vec<u8> {
    let mut b = format!("{portal}\0").into_bytes();
    b.extend_from_slice(&0i32.to_be_bytes());
    msg(b'E', &b)
}

fn sync() -> Vec<u8> {
    msg(b'S', b"")
}

fn flush() -> Vec<u8> {
    msg(b'H', b"")
}

/// psycopg's shape for a query with parameters.
fn unnamed_batch(sql: &str) -> Vec<u8> {
    let mut b = parse("", sql);
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}

fn extended_answer(rows: &[&str], lsn: u64) -> Vec<u8> {
    let mut b = msg(b'1', b"");
    b.extend(msg(b'2', b""));
    b.extend(select_result(rows));
    b.extend(rfq(b'I', Some(lsn), None));
    b
}

#[test]
fn p3_step6_self_contained_extended_read_goes_to_a_reader() {
    let mut h = host();
    let batch = unnamed_batch("SELECT v FROM t WHERE k = $1");
    let acts = h.client(&batch);
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::ReplicaWithWait, Reason::ReadNoTarget)
    );
    // The batch goes to the reader byte for byte.
    assert_eq!(h.take_sent(R1), batch);
    h.backend(R1, &extended_answer(&["7"], 0x1100));
    let got = h.take_client();
    assert_eq!(tags(&got), "12TDCZ");
    assert_eq!(client_rfq_statuses(&got), vec![b'I']);
    assert!(h.streams.balanced());
}

#[test]
fn p3_step6_extended_read_with_a_target_goes_to_the_primary() {
    let mut h = host();
    h.client(&query("INSERT INTO t VALUES (1)"));
    h.writer_answers("INSERT 0 1", b'I', Some(0x5000), None);
    let batch = unnamed_batch("SELECT v FROM t WHERE k = $1");
    let acts = h.client(&batch);
    assert!(
        acts.contains(&A::FwdClient {
            conn: WRITER,
            n: batch.len()
        }),
        "{acts:?}"
    );
    assert_eq!(h.last_decision().reason, Reason::ReadWait);
    h.backend(WRITER, &extended_answer(&["7"], 0x5000));
    assert!(h.streams.balanced());
}

#[test]
fn p3_step6_named_statements_stay_on_the_writer_and_pin_it() {
    let mut h = host();
    let mut b = parse("s1", "SELECT v FROM t WHERE k = $1");
    b.extend(bind("", "s1"));
    b.extend(execute(""));
    b.extend(sync());
    h.client(&b);
    assert_eq!(h.last_decision().outcome, Outcome::ForcePrimary);
    let acts = h.backend(WRITER, &extended_answer(&["7"], 0x1000));
    assert!(acts.contains(&A::PinWriter(true)), "{acts:?}");
}

#[test]
fn extended_flush_then_sync_continues_on_the_writer() {
    let mut h = host();
    let mut first = parse("", "SELECT v FROM t WHERE k = $1");
    first.extend(describe(b'S', ""));
    first.extend(flush());
    let acts = h.client(&first);
    assert!(
        acts.contains(&A::FwdClient {
            conn: WRITER,
            n: first.len()
        }),
        "{acts:?}"
    );
    // The writer answers the Flush without an RFQ.
    let mut ans = msg(b'1', b"");
    ans.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
    ans.extend(row_description(1));
    h.backend(WRITER, &ans);
    let mut second = bind("", "");
    second.extend(execute(""));
    second.extend(sync());
    let acts = h.client(&second);
    assert!(
        acts.contains(&A::FwdClient {
            conn: WRITER,
            n: second.len()
        }),
        "{acts:?}"
    );
    let mut ans = msg(b'2', b"");
    ans.extend(data_row(&["7"]));
    ans.extend(command_complete("SELECT 1"));
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    assert_eq!(tags(&h.take_client()), "1tT2DCZ");
    assert!(h.streams.balanced());
    // The next statement is decided normally.
    let acts = h.client(&query("SELECT 1"));
    assert!(acts.iter().any(|a| matches!(a, A::Acquire { .. })));
}

#[test]
fn copy_from_stdin_streams_client_data_to_the_writer() {
    let mut h = host();
    h.client(&query("COPY t FROM STDIN"));
    h.backend(WRITER, &msg(b'G', &[0, 0, 1, 0, 0]));
    let mut data = msg(b'd', b"1\t2\n");
    data.extend(msg(b'd', b"3\t4\n"));
    data.extend(msg(b'c', b""));
    let acts = h.client(&data);
    assert!(
        acts.contains(&A::FwdClient {
            conn: WRITER,
            n: data.len()
        }),
        "{acts:?}"
    );
    h.writer_answers("COPY 2", b'I', Some(0x2000), None);
    assert_eq!(tags(&h.take_client()), "GCZ");
    assert!(h.session.lsn_state().write_lsn.0 == 0x2000);
    assert!(h.streams.balanced());
}

#[test]
fn copy_to_stdout_is_forwarded_by_count() {
    let mut h = host();
    h.client(&query("COPY t TO STDOUT"));
    let mut ans = msg(b'H', &[0, 0, 1, 0, 0]);
    for _ in 0..100 {
        ans.extend(msg(b'd', b"some row data\n"));
    }
    ans.extend(msg(b'c', b""));
    ans.extend(command_complete("COPY 100"));
    ans.extend(rfq(b'I', Some(0x2000), None));
    let acts = h.backend(WRITER, &ans);
    // Forwarded in a few coalesced actions, not one per row.
    let forwards = acts
        .iter()
        .filter(|a| matches!(a, A::FwdBackend { .. }))
        .count();
    assert!(forwards <= 2, "{acts:?}");
    assert!(h.streams.balanced());
}

#[test]
fn function_call_and_terminate() {
    let mut h = host();
    let f = msg(b'F', &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    let acts = h.client(&f);
    assert!(acts.contains(&A::FwdClient {
        conn: WRITER,
        n: f.len()
    }));
    assert_eq!(h.last_decision().reason, Reason::NotAStatement);
    let mut ans = msg(b'V', &[0, 0, 0, 0]);
    ans.extend(rfq(b'I', Some(0x1000), None));
    h.backend(WRITER, &ans);
    let x = msg(b'X', b"");
    let acts = h.client(&x);
    assert_eq!(
        acts,
        vec![A::FwdClient { conn: WRITER, n: 5 }, A::CloseClient]
    );
    assert!(h.session.is_closed());
}

#[test]
fn ssl_request_then_startup_and_cancel_request() {
    let mut h = Host::new(config(|_| {}));
    let mut ssl = 8u32.to_be_bytes().to_vec();
    ssl.extend_from_slice(&80_877_103u32.to_be_bytes());
    let acts = h.client(&ssl);
    assert_eq!(acts, vec![A::DropClient(8), A::Encryption { gss: false }]);
    let acts = h.client(&startup(&[("user", "u")]));
    assert!(matches!(acts[1], A::ConnectWriter(_)));

    let mut h = Host::new(config(|_| {}));
    let mut cancel = 16u32.to_be_bytes().to_vec();
    cancel.extend_from_slice(&80_877_102u32.to_be_bytes());
    cancel.extend_from_slice(&42i32.to_be_bytes());
    cancel.extend_from_slice(&[1, 2, 3, 4]);
    let acts = h.client(&cancel);
    assert_eq!(
        acts,
        vec![
            A::DropClient(16),
            A::Cancel {
                pid: 42,
                secret: vec![1, 2, 3, 4]
            },
            A::CloseClient
        ]
    );
}

#[test]
fn writer_async_notification_while_a_reader_answers_is_held_until_the_statement_ends() {
    let mut h = host();
    h.client(&query("SELECT 1"));
    h.attach(R1);
    h.backend(R1, &row_description(1));
    // The writer sends a NOTIFY-style message while the reader is mid-result.
    let mut note = 7i32.to_be_bytes().to_vec();
    note.extend_from_slice(b"chan\0payload\0");
    h.backend(WRITER, &msg(b'A', &note));
    let mut rest = data_row(&["1"]);
    rest.extend(command_complete("SELECT 1"));
    rest.extend(rfq(b'I', Some(0x1000), None));
    h.backend(R1, &rest);
    assert_eq!(tags(&h.take_client()), "TDCAZ");
}

#[test]
fn writer_lost_closes_the_client_with_an_error() {
    let mut h = host();
    let acts = h.event(WRITER, Event::ConnectionLost);
    assert!(acts.contains(&A::CloseClient));
    let got = h.take_client();
    assert!(got.windows(5).any(|w| w == b"08006"));
}
