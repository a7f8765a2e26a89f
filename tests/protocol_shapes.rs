//! Protocol shapes other than one simple Query or an extended batch (those are in
//! `extended_transcripts.rs`): COPY, function calls, Terminate, encryption and cancel requests.

mod common;

use common::*;
use polarsplit::{Event, Reason};

const R1: u64 = 601;

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.connect();
    h
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
    let mut h = Host::new(config(&[]));
    let mut ssl = 8u32.to_be_bytes().to_vec();
    ssl.extend_from_slice(&80_877_103u32.to_be_bytes());
    let acts = h.client(&ssl);
    assert_eq!(acts, vec![A::DropClient(8), A::Encryption { gss: false }]);
    let acts = h.client(&startup(&[("user", "u")]));
    assert!(matches!(acts[1], A::ConnectWriter(_)));

    let mut h = Host::new(config(&[]));
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
