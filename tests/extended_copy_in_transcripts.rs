//! COPY FROM STDIN whose client sends its data before the server's CopyInResponse (SPEC E-1:
//! "the client sees exactly what one server would send"), as protocol traces; the same cases run
//! against real servers in tests/e2e/test_e1_pipelined_copy.py.
//!
//! PostgreSQL ignores a Sync or Flush it reads in COPY IN mode — after the COPY's Execute (or
//! Query) and before the client's CopyDone or CopyFail — and answers a Sync read after them. An
//! examiner found (2026-12) that the engine dropped every client Sync queued behind the COPY's
//! Execute when CopyInResponse arrived, also one the client had sent after its CopyDone: the
//! server's ReadyForQuery then answered nothing the engine expected, and the client got 08P01
//! and a closed connection (a COPY in a transaction block lost its rows). The engine now knows,
//! per queued Sync, whether the client sent it before or after the end of the COPY, and a Sync
//! sent during COPY IN is answered by nothing, whatever started the COPY.

mod common;

use common::*;
use polarsplit::Lsn;
use polarsplit_test_support::be::copy_response;
use polarsplit_test_support::fe::{copy_data, copy_done, copy_fail};

fn host() -> Host {
    let mut h = Host::new(config(&[]));
    h.engine.remove_reader(2);
    h.connect();
    h
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn copy_execute() -> Vec<u8> {
    cat(&[parse("", "COPY t FROM STDIN"), bind("", ""), execute("")])
}

fn copy_in() -> Vec<u8> {
    copy_response(b'G', 1)
}

/// Sends `client` in one input; every byte goes to the writer as it is.
fn to_writer(h: &mut Host, client: &[u8]) {
    h.client(client);
    assert_eq!(h.take_sent(polarsplit_test_support::host::WRITER), client);
}

/// The session goes on: a write runs on the writer and is answered, nothing left over.
fn session_goes_on(h: &mut Host) {
    assert!(!h.session.is_closed(), "closed: {}", h.session.last_error());
    let q = query("INSERT INTO t VALUES (9)");
    h.client(&q);
    assert_eq!(
        h.take_sent(WRITER),
        q,
        "the next statement reaches the writer"
    );
    h.writer_answers("INSERT 0 1", b'I', Some(0x9000), None);
    assert_eq!(tags(&h.take_client()), "CZ");
    assert!(h.streams.balanced());
    assert!(!h.session.is_closed(), "closed: {}", h.session.last_error());
}

#[test]
fn e1_copy_in_data_pipelined_before_copy_in_response_then_sync_is_answered_once() {
    let mut h = host();
    to_writer(
        &mut h,
        &cat(&[copy_execute(), copy_data(b"1\n"), copy_done(), sync()]),
    );
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'I', Some(0x2000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GCZ");
    assert_eq!(
        h.session.lsn_state().write_lsn,
        Lsn(0x2000),
        "the COPY's RFQ is a write's"
    );
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_fail_pipelined_before_copy_in_response_then_sync_is_answered_once() {
    let mut h = host();
    to_writer(
        &mut h,
        &cat(&[
            copy_execute(),
            copy_data(b"1\n"),
            copy_fail("gave up"),
            sync(),
        ]),
    );
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            error(
                "ERROR",
                "57014",
                "COPY from stdin failed: gave up",
                None,
                None,
            ),
            rfq(b'I', Some(0x1000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GEZ");
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_sync_before_and_after_the_pipelined_data_only_the_second_is_answered() {
    let mut h = host();
    to_writer(
        &mut h,
        &cat(&[
            copy_execute(),
            sync(),
            copy_data(b"1\n"),
            copy_done(),
            sync(),
        ]),
    );
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'I', Some(0x2000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GCZ");
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x2000));
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_pipelined_in_a_transaction_block_commits_at_the_commit() {
    let mut h = host();
    h.client(&query("BEGIN"));
    h.take_sent(WRITER);
    h.writer_answers("BEGIN", b'T', Some(0x1000), None);
    assert_eq!(tags(&h.take_client()), "CZ");
    to_writer(
        &mut h,
        &cat(&[copy_execute(), copy_data(b"1\n"), copy_done(), sync()]),
    );
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'T', Some(0x1000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GCZ");
    assert!(h.session.in_transaction());
    let commit = query("COMMIT");
    h.client(&commit);
    assert_eq!(h.take_sent(WRITER), commit);
    h.writer_answers("COMMIT", b'I', Some(0x3000), None);
    assert_eq!(tags(&h.take_client()), "CZ");
    assert!(!h.session.in_transaction());
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x3000));
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_the_next_statement_pipelined_behind_copy_done_joins_the_copys_batch() {
    // The Sync behind the Execute is read in COPY IN mode: the server's batch goes on after
    // CopyDone to the next Sync, so the read behind it runs there too, answered by one RFQ.
    // (A guard: it held before, and must stay so.)
    let mut h = host();
    let read = cat(&[
        parse("", "SELECT v FROM t"),
        bind("", ""),
        execute(""),
        sync(),
    ]);
    h.client(&cat(&[
        copy_execute(),
        sync(),
        copy_data(b"1\n"),
        copy_done(),
        read.clone(),
    ]));
    let mut sent = h.take_sent(WRITER);
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            command_complete("COPY 1"),
        ]),
    );
    sent.extend(h.take_sent(WRITER));
    assert_eq!(tags(&sent), "PBESdcPBES", "all of it on the writer");
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            data_row(&["1"]),
            command_complete("SELECT 1"),
            rfq(b'I', Some(0x2000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GC12DCZ");
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_a_sync_sent_after_copy_in_response_and_before_copy_done_is_ignored() {
    // Parse/Bind/Execute/Flush, then — CopyInResponse seen — a Sync (the server ignores it),
    // the data, CopyDone and the Sync the server answers.
    let mut h = host();
    to_writer(&mut h, &cat(&[copy_execute(), flush()]));
    h.backend(WRITER, &cat(&[msg(b'1', b""), msg(b'2', b""), copy_in()]));
    assert_eq!(tags(&h.take_client()), "12G");
    to_writer(
        &mut h,
        &cat(&[sync(), flush(), copy_data(b"1\n"), copy_done(), sync()]),
    );
    h.backend(
        WRITER,
        &cat(&[command_complete("COPY 1"), rfq(b'I', Some(0x2000), None)]),
    );
    assert_eq!(tags(&h.take_client()), "CZ");
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x2000));
    session_goes_on(&mut h);
}

#[test]
fn e1_simple_query_copy_in_a_sync_and_flush_sent_with_the_data_are_ignored() {
    // A simple-Query COPY: a Sync and a Flush the client sends in COPY IN mode get no answer
    // either, whatever started the COPY — sent before CopyInResponse arrived…
    let mut h = host();
    let copy = query("COPY t FROM STDIN");
    let data = cat(&[copy_data(b"1\n"), copy_done()]);
    h.client(&cat(&[copy.clone(), sync(), flush(), data.clone()]));
    // (A Flush after a Sync asks for nothing: it is not passed on.)
    assert_eq!(h.take_sent(WRITER), cat(&[copy, sync(), data]));
    h.backend(
        WRITER,
        &cat(&[
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'I', Some(0x2000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "GCZ");
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x2000));
    session_goes_on(&mut h);
}

#[test]
fn e1_simple_query_copy_in_a_sync_and_flush_sent_after_copy_in_response_are_ignored() {
    // …or after.
    let mut h = host();
    to_writer(&mut h, &query("COPY t FROM STDIN"));
    h.backend(WRITER, &copy_in());
    assert_eq!(tags(&h.take_client()), "G");
    to_writer(
        &mut h,
        &cat(&[sync(), flush(), copy_data(b"1\n"), copy_done()]),
    );
    h.backend(
        WRITER,
        &cat(&[command_complete("COPY 1"), rfq(b'I', Some(0x2000), None)]),
    );
    assert_eq!(tags(&h.take_client()), "CZ");
    session_goes_on(&mut h);
}

#[test]
fn e1_simple_query_copy_in_a_sync_sent_after_copy_done_is_answered() {
    // A Sync the server reads after CopyDone is outside COPY IN: it gets its own RFQ. (A guard:
    // it held before, and must stay so.)
    let mut h = host();
    to_writer(
        &mut h,
        &cat(&[
            query("COPY t FROM STDIN"),
            copy_data(b"1\n"),
            copy_done(),
            sync(),
        ]),
    );
    h.backend(
        WRITER,
        &cat(&[
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'I', Some(0x2000), None),
            rfq(b'I', Some(0x2000), None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "GCZZ");
    session_goes_on(&mut h);
}

#[test]
fn e1_copy_in_error_mid_copy_the_sync_after_copy_done_is_answered() {
    // The server fails the COPY while the client is still sending: it leaves COPY IN, skips the
    // rest (CopyDone included) to the Sync and answers that Sync. (A guard: it held before, and
    // must stay so.)
    let mut h = host();
    to_writer(&mut h, &cat(&[copy_execute(), flush()]));
    h.backend(WRITER, &cat(&[msg(b'1', b""), msg(b'2', b""), copy_in()]));
    h.take_client();
    to_writer(&mut h, &copy_data(b"x\n"));
    h.backend(
        WRITER,
        &error(
            "ERROR",
            "22P02",
            "invalid input syntax for type integer",
            None,
            None,
        ),
    );
    assert_eq!(tags(&h.take_client()), "E");
    to_writer(&mut h, &cat(&[copy_data(b"2\n"), copy_done(), sync()]));
    h.backend(WRITER, &rfq(b'I', Some(0x1000), None));
    assert_eq!(tags(&h.take_client()), "Z");
    session_goes_on(&mut h);
}

#[test]
fn e1_w7_no_hidden_message_is_pipelined_behind_a_sync_read_in_copy_in_mode() {
    // On a stock server the engine pipelines its position probe behind a write's last message,
    // but not behind a batch that may enter COPY IN: the server would read the probe while in
    // COPY IN and fail the COPY. A Sync joining the batch after a Flush (and read in COPY IN
    // mode) closed it as any batch's: the probe went right behind it.
    let settings = [
        ("server_dialect", polarsplit::ServerDialect::Stock.as_str()),
        ("startup_profile", polarsplit::StartupProfile::Off.as_str()),
    ];
    let mut h = Host::new(config(&settings));
    h.client(&startup(&[("user", "app"), ("database", "db")]));
    h.event(WRITER, polarsplit::Event::WriterConnected);
    h.backend(WRITER, &cat(&[auth_ok(), rfq(b'I', None, None)]));
    h.writer_answers_startup_capture(&[]);
    h.take_client();
    let client = cat(&[
        copy_execute(),
        flush(),
        sync(),
        copy_data(b"1\n"),
        copy_done(),
        sync(),
    ]);
    h.client(&client);
    assert_eq!(
        tags(&h.take_sent(WRITER)),
        tags(&client),
        "nothing of the engine's among the COPY's messages"
    );
    h.backend(
        WRITER,
        &cat(&[
            msg(b'1', b""),
            msg(b'2', b""),
            copy_in(),
            command_complete("COPY 1"),
            rfq(b'I', None, None),
        ]),
    );
    assert_eq!(tags(&h.take_client()), "12GCZ");
    assert!(!h.session.is_closed(), "closed: {}", h.session.last_error());
    assert!(h.streams.balanced());
}

#[test]
fn e1_a_message_other_than_copy_traffic_in_copy_in_mode_reaches_the_server() {
    // The client's protocol violation: a Query (or a Parse) while its COPY IN is open. The
    // primary alone refuses it (08P01) and ends the session; held back as the next unit, it
    // waited for a CopyDone that never comes, and the client for its answer, for ever.
    for next in [
        query("SELECT 1"),
        cat(&[sync(), query("SELECT 1")]),
        parse("", "SELECT 1"),
    ] {
        let mut h = host();
        to_writer(&mut h, &query("COPY t FROM STDIN"));
        h.backend(WRITER, &copy_in());
        assert_eq!(tags(&h.take_client()), "G");
        to_writer(&mut h, &next);
        let mut answer = error(
            "ERROR",
            "08P01",
            "unexpected message type 0x51 during COPY from stdin",
            None,
            None,
        );
        answer.extend(error(
            "FATAL",
            "08P01",
            "terminating connection because protocol synchronization was lost",
            None,
            None,
        ));
        h.backend(WRITER, &answer);
        assert_eq!(
            tags(&h.take_client()),
            "EE",
            "the server's refusal, as it sent it"
        );
    }
}

#[test]
fn e1_s5_no_hidden_work_goes_behind_a_sync_read_in_copy_in_mode_after_a_set() {
    // A Query that changes the session's state and starts a COPY (`SET …; COPY t FROM STDIN`),
    // its data, a Sync (ignored by the server in COPY IN mode) and the end of the COPY, all in
    // one write: the Sync, read before the CopyInResponse came, is a unit of its own, and the
    // capture the SET made due was pipelined right behind it — looking only at the Sync's own
    // shape — into the COPY, where the server refuses it and ends the session (an examiner's
    // finding of 2026-12-07). Nothing of the engine's goes to the writer while a unit queued
    // there may be in COPY IN; the capture follows the COPY's ReadyForQuery.
    let set_then_copy = "SET application_name = 'red10a'; COPY t FROM STDIN";
    let cases: [(&str, Vec<u8>, Vec<u8>, &str); 3] = [
        (
            "sync between the data",
            cat(&[copy_data(b"1\n"), sync(), copy_data(b"2\n"), copy_done()]),
            command_complete("COPY 2"),
            "CGCZ",
        ),
        (
            "sync before the data",
            cat(&[sync(), copy_data(b"1\n"), copy_data(b"2\n"), copy_done()]),
            command_complete("COPY 2"),
            "CGCZ",
        ),
        (
            "sync before a CopyFail",
            cat(&[copy_data(b"1\n"), sync(), copy_fail("no")]),
            error("ERROR", "57014", "COPY from stdin failed: no", None, None),
            "CGEZ",
        ),
    ];
    for (case, data, end, answered) in cases {
        let mut h = host();
        let client = cat(&[query(set_then_copy), data]);
        h.client(&client);
        assert_eq!(
            tags(&h.take_sent(WRITER)),
            tags(&client),
            "{case}: nothing of the engine's among the COPY's messages"
        );
        h.backend(
            WRITER,
            &cat(&[
                command_complete("SET"),
                copy_in(),
                end,
                rfq(b'I', Some(0x2000), None),
            ]),
        );
        assert_eq!(tags(&h.take_client()), answered, "{case}");
        assert!(
            !h.session.is_closed(),
            "{case}: closed: {}",
            h.session.last_error()
        );
        assert!(
            sends_capture(&h.take_sent(WRITER)),
            "{case}: the capture follows the COPY's ReadyForQuery"
        );
        h.backend(
            WRITER,
            &capture_answer(&[("application_name", "red10a")], None),
        );
        session_goes_on(&mut h);
    }
}
