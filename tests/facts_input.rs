//! SPEC §0: libpq-based hosts feed already-parsed facts; decisions and effects match the byte
//! path, and byte actions count whole messages.

mod common;

use common::*;
use polarsplit::{BackendFact, ConnId, Outcome, Reason};
use polarsplit::{Lsn, LsnField, Marker, TxStatus};

const R1: ConnId = 701;

/// Feeds one fact and returns the actions, printed.
fn fact(h: &mut Host, conn: ConnId, f: BackendFact<'_>) -> Vec<String> {
    h.session.recv_backend_fact(conn, f, h.now).expect("fact");
    let mut out = Vec::new();
    while let Some(a) = h.session.poll_action() {
        out.push(format!("{a:?}"));
    }
    out
}

#[test]
fn s0_facts_drive_write_then_read_like_bytes() {
    let mut h = Host::new(config(&[]));
    h.connect();
    h.client(&query("INSERT INTO t VALUES (1)"));
    // The writer's answer as facts.
    let acts = fact(
        &mut h,
        WRITER,
        BackendFact::CommandComplete { tag: b"INSERT 0 1" },
    );
    assert_eq!(
        acts,
        vec![format!("ForwardBackend {{ conn: {WRITER}, n: 1 }}")]
    );
    let acts = fact(
        &mut h,
        WRITER,
        BackendFact::ReadyForQuery {
            status: TxStatus::Idle,
            lsn: LsnField::At(Lsn(0x5000)),
            xact: None,
        },
    );
    // The extended RFQ is dropped (1 message) and a standard one sent instead.
    assert_eq!(
        acts[0],
        format!("DiscardBackend {{ conn: {WRITER}, n: 1 }}")
    );
    assert!(acts[1].starts_with("SendClient"));
    assert_eq!(h.session.lsn_state().write_lsn, Lsn(0x5000));

    // The read waits on a reader; its hidden SET results are dropped message by message.
    h.client(&query("SELECT v FROM t"));
    h.attach(R1);
    let d = h.last_decision();
    assert_eq!(
        (d.outcome, d.reason, d.wait),
        (Outcome::ReplicaWithWait, Reason::ReadWait, true)
    );
    let mut forwarded = 0;
    let mut dropped = 0;
    let steps: Vec<BackendFact<'_>> = vec![
        BackendFact::CommandComplete { tag: b"SET" },
        BackendFact::CommandComplete { tag: b"SET" },
        BackendFact::CommandComplete { tag: b"SET" },
        BackendFact::Other { tag: b'T' },
        BackendFact::Other { tag: b'D' },
        BackendFact::CommandComplete { tag: b"SELECT 1" },
        BackendFact::ReadyForQuery {
            status: TxStatus::Idle,
            lsn: LsnField::At(Lsn(0x5100)),
            xact: None,
        },
    ];
    for f in steps {
        for s in fact(&mut h, R1, f) {
            if s.starts_with("ForwardBackend") {
                assert!(s.ends_with("n: 1 }"), "{s}");
                forwarded += 1;
            }
            if s.starts_with("DiscardBackend") {
                assert!(s.ends_with("n: 1 }"), "{s}");
                dropped += 1;
            }
        }
    }
    // The RowDescription is held (dropped, then sent by the engine before the first row); D and C
    // are forwarded; the 3 SETs and the RFQ dropped.
    assert_eq!((forwarded, dropped), (2, 5));
    assert_eq!(h.session.lsn_state().observed_lsn, Lsn(0x5100));
}

#[test]
fn s0_fact_with_marker_feeds_the_split() {
    let mut h = Host::new(config(&[]));
    h.connect();
    h.client(&query("BEGIN"));
    let _ = fact(
        &mut h,
        WRITER,
        BackendFact::CommandComplete { tag: b"BEGIN" },
    );
    fact(
        &mut h,
        WRITER,
        BackendFact::ReadyForQuery {
            status: TxStatus::InTransaction,
            lsn: LsnField::At(Lsn(0x100)),
            xact: Some((Marker::Splittable, b"")),
        },
    );
    assert!(h.session.in_transaction());
    // The pre-write read goes to a reader, as with bytes.
    h.engine.reader_sample(1, Lsn(0x100), h.now);
    h.engine.reader_sample(2, Lsn(0x100), h.now);
    let acts = h.client(&query("SELECT 1"));
    assert!(
        acts.iter().any(|a| matches!(a, A::Acquire { .. })),
        "{acts:?}"
    );
}
