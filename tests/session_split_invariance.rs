//! Bytes may arrive split anywhere (STYLE, SPEC §0): every split of the same conversation yields
//! the same decisions and the same bytes on every stream.

mod common;

use common::*;
use polarsplit::Lsn;
use polarsplit::{ConnId, Decision, Event};
use proptest::prelude::*;

const R: ConnId = 501;

/// One input of a scripted conversation.
#[derive(Clone, Debug)]
enum Step {
    Client(Vec<u8>),
    Backend(ConnId, Vec<u8>),
    Attach,
}

fn sets(n: usize) -> Vec<u8> {
    (0..n).flat_map(|_| command_complete("SET")).collect()
}

/// A conversation touching the main paths: startup, a write, a waited read on a reader, a
/// transaction with a pre-write read, a write and a split read, COMMIT, a pipelined pair.
fn script() -> Vec<Step> {
    let mut auth = auth_ok();
    auth.extend(param_status("server_version", "15.8"));
    auth.extend(backend_key(1, 2));
    auth.extend(rfq(b'I', Some(0x1000), None));
    let mut ins = command_complete("INSERT 0 1");
    ins.extend(rfq(b'I', Some(0x5000), None));
    let mut waited = sets(3);
    waited.extend(select_result(&["a", "b", "c"]));
    waited.extend(rfq(b'I', Some(0x5100), None));
    let mut begin = command_complete("BEGIN");
    begin.extend(rfq(b'T', Some(0x5100), Some((b'x', ""))));
    // The writer's answer to the hidden touch of its block the first split read sends (P-5).
    let mut touch = touch_answer();
    touch.extend(rfq(b'T', Some(0x5100), Some((b'x', ""))));
    let mut pre = select_result(&["x"]);
    pre.extend(rfq(b'I', Some(0x5200), None));
    let mut txn_ins = command_complete("INSERT 0 1");
    txn_ins.extend(rfq(b'T', Some(0x6000), Some((b'x', "1,900"))));
    let mut split = sets(4);
    split.extend(notice("NOTICE", "hello", None));
    split.extend(select_result(&["y", "z"]));
    split.extend(rfq(b'I', Some(0x6100), None));
    let mut commit = command_complete("COMMIT");
    commit.extend(rfq(b'I', Some(0x6200), None));
    let mut pipelined = query("UPDATE t SET v = 2");
    pipelined.extend(query("SHOW search_path"));
    let mut upd = command_complete("UPDATE 1");
    upd.extend(rfq(b'I', Some(0x7000), None));
    // Several rows in a row (they pass as a run when they arrive together).
    let mut show = row_description(1);
    show.extend(data_row(&["public"]));
    show.extend(data_row(&["second"]));
    show.extend(data_row(&[""]));
    show.extend(command_complete("SHOW"));
    show.extend(rfq(b'I', Some(0x7000), None));
    vec![
        Step::Client(startup(&[("user", "app"), ("database", "db")])),
        Step::Backend(WRITER, auth),
        // The capture of the writer session's login-time state that follows its startup (S-5).
        Step::Backend(WRITER, capture_answer(&[], None)),
        Step::Client(query("INSERT INTO t VALUES (1)")),
        Step::Backend(WRITER, ins),
        Step::Client(query("SELECT v FROM t")),
        Step::Attach,
        Step::Backend(R, waited),
        Step::Client(query("BEGIN")),
        Step::Backend(WRITER, begin),
        Step::Client(query("SELECT 1")),
        Step::Attach,
        Step::Backend(WRITER, touch),
        Step::Backend(R, pre),
        Step::Client(query("INSERT INTO t VALUES (2)")),
        Step::Backend(WRITER, txn_ins),
        Step::Client(query("SELECT v FROM t WHERE k = 2")),
        Step::Backend(R, split),
        Step::Client(query("COMMIT")),
        Step::Backend(WRITER, commit),
        Step::Client(pipelined),
        Step::Backend(WRITER, upd),
        Step::Backend(WRITER, show),
    ]
}

/// Runs the script, splitting each byte input at the given cut points. Returns what every side
/// received and the decisions.
fn run(cuts: &[usize]) -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<Decision>) {
    let mut h = Host::new(config(&[]));
    h.engine.reader_sample(1, Lsn(0x5100), h.now);
    h.engine.reader_sample(2, Lsn(0x5100), h.now);
    let mut cut_iter = cuts.iter().cycle();
    let mut connected = false;
    for step in script() {
        match step {
            Step::Client(bytes) => {
                for piece in split(&bytes, *cut_iter.next().unwrap_or(&0)) {
                    h.client(piece);
                }
                if !connected {
                    h.event(WRITER, Event::WriterConnected);
                    connected = true;
                }
            }
            Step::Backend(conn, bytes) => {
                for piece in split(&bytes, *cut_iter.next().unwrap_or(&0)) {
                    h.backend(conn, piece);
                }
            }
            Step::Attach => {
                h.attach(R);
            }
        }
    }
    assert!(h.streams.balanced(), "forwarded + discarded = fed");
    let to_client = h.take_client();
    let to_writer = h.take_sent(WRITER);
    let to_reader = h.take_sent(R);
    (to_client, to_writer, to_reader, h.decisions())
}

/// Splits into pieces of `step` bytes (0: whole).
fn split(bytes: &[u8], step: usize) -> Vec<&[u8]> {
    if step == 0 {
        vec![bytes]
    } else {
        bytes.chunks(step).collect()
    }
}

#[test]
fn whole_conversation_is_sane() {
    let (client, writer, reader, decisions) = run(&[0]);
    assert_eq!(
        client_rfq_statuses(&client),
        vec![b'I', b'I', b'I', b'T', b'T', b'T', b'T', b'I', b'I', b'I']
    );
    assert!(sent_queries(&reader)
        .iter()
        .any(|q| q.starts_with("SET polar_xact_split_xids = '1,900'")));
    assert!(!writer.is_empty());
    assert_eq!(decisions.len(), 9);
}

#[test]
fn byte_by_byte_equals_whole() {
    assert_eq!(run(&[1]), run(&[0]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn every_split_yields_the_same_streams_and_decisions(cuts in prop::collection::vec(0usize..40, 1..30)) {
        prop_assert_eq!(run(&cuts), run(&[0]));
    }
}
