//! The PolarDB ReadyForQuery extension (SPEC W-2), the transaction XID list (W-3), and the other
//! message parsers a peer's bytes reach (backend messages, frontend messages, startup packets).
//!
//! Invariants:
//! - no parser panics or reads outside its body; borrowed fields point into the body;
//! - `XidList::parse` accepts exactly the W-3 grammar (checked against an independent reference):
//!   `<digits>,<digits>[,<digits>…]`, every field fits in 64 bits, at most `MAX_XID_LIST_LEN`
//!   bytes — so an accepted list is only digits and commas, safe to place inside a quoted SQL
//!   literal; its `fields()` are exactly the numbers written;
//! - an accepted RFQ's LSN is the 8 big-endian bytes after the status, `Zero` exactly when 0.

use polarsplit::internals::protocol::backend::BackendMessage;
use polarsplit::internals::protocol::frontend::FrontendMessage;
use polarsplit::internals::protocol::rfq::MAX_XID_LIST_LEN;
use polarsplit::internals::protocol::startup::StartupPacket;
use polarsplit::internals::protocol::{Rfq, RfqExtensions, XidList};
use polarsplit::LsnField;

use super::input::Input;

/// W-3, written independently of the library: `Some(fields)` when valid.
fn reference_xids(b: &[u8]) -> Option<Vec<u64>> {
    if b.is_empty() {
        return Some(Vec::new());
    }
    if b.len() > MAX_XID_LIST_LEN {
        return None;
    }
    let text = std::str::from_utf8(b).ok()?;
    let mut out = Vec::new();
    for f in text.split(',') {
        if f.is_empty() || !f.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out.push(f.parse::<u64>().ok()?);
    }
    (out.len() >= 2).then_some(out)
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    inner.is_empty() || (i >= o && i + inner.len() <= o + outer.len())
}

fn check_xids(b: &[u8]) {
    let got = XidList::parse(b);
    let want = reference_xids(b);
    match (&got, &want) {
        (Ok(l), Some(fields)) => {
            assert_eq!(l.as_str().as_bytes(), b);
            assert!(l.as_str().bytes().all(|c| c.is_ascii_digit() || c == b','));
            assert_eq!(&l.fields().collect::<Vec<_>>(), fields);
            assert_eq!(l.is_empty(), b.is_empty());
        }
        (Err(_), None) => {}
        _ => panic!("XidList::parse({b:?}) = {got:?}, W-3 says {want:?}"),
    }
}

pub fn run(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let ext = RfqExtensions {
        lsn: sel & 1 != 0,
        xact: sel & 2 != 0,
    };
    let t = inp.u8();
    let body = inp.rest();

    // The RFQ parser on any body.
    if let Ok(r) = Rfq::parse(body, ext) {
        assert_eq!(r.status.byte(), body[0]);
        assert_eq!(r.extended, body.len() > 1);
        match r.lsn {
            LsnField::Missing => assert!(!ext.lsn || body.len() == 1),
            LsnField::Zero => assert_eq!(&body[1..9], &[0; 8]),
            LsnField::At(l) => {
                assert_ne!(l.0, 0);
                assert_eq!(l.0.to_be_bytes(), body[1..9]);
            }
        }
        if let Some(x) = r.xact {
            assert!(ext.xact);
            assert!(within(body, x.xids));
            assert!(!x.xids.contains(&0));
            check_xids(x.xids);
        }
    }
    // The XID list grammar on the raw body, and on the body read as text up to its first NUL.
    check_xids(body);
    if let Some(nul) = body.iter().position(|&b| b == 0) {
        check_xids(&body[..nul]);
    }

    // Every other parser a peer reaches, with the tag from the input.
    if let Ok(m) = BackendMessage::parse(t, body, ext) {
        if let BackendMessage::ReadyForQuery(r) = m {
            assert_eq!(Some(r), Rfq::parse(body, ext).ok());
        }
        if let BackendMessage::BackendKeyData { secret, .. } = m {
            assert!(within(body, secret) && (4..=256).contains(&secret.len()));
        }
        if let BackendMessage::ErrorResponse(f) | BackendMessage::NoticeResponse(f) = m {
            for (_, v) in f.iter() {
                assert!(within(body, v));
            }
            let _ = (f.is_fatal(), f.code(), f.message(), f.detail(), f.routine());
        }
    }
    if let Ok(FrontendMessage::Query { sql }) = FrontendMessage::parse(t, body) {
        // A Query is exactly one NUL-terminated string.
        assert_eq!(sql.len() + 1, body.len());
        assert!(!sql.contains(&0));
    }
    let _ = FrontendMessage::is_known_tag(t);
    if let Ok(StartupPacket::Startup { params, .. }) = StartupPacket::parse(body) {
        for (k, v) in params.iter() {
            assert!(within(body, k) && within(body, v));
            assert!(!k.contains(&0) && !v.contains(&0));
        }
    }
}
