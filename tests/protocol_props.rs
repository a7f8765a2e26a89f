//! Property tests of the wire codec: splitting, hostile bytes, and the RFQ extension (SPEC W-2).

use polarsplit::internals::protocol::backend::BackendMessage;
use polarsplit::internals::protocol::framer::{BodyMode, Framer, Step};
use polarsplit::internals::protocol::{Rfq, RfqExtensions};
use polarsplit::{Limits, Lsn, LsnField, Marker, ProtocolError, TxStatus};
use proptest::prelude::*;

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// A valid backend message of a random type.
fn backend_message() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (
            any::<bool>(),
            any::<u64>(),
            prop::option::of(("[xw]", "[0-9]{1,5},[0-9]{1,9}"))
        )
            .prop_map(|(t, lsn, x)| {
                let mut b = vec![if t { b'T' } else { b'I' }];
                b.extend_from_slice(&lsn.to_be_bytes());
                if let Some((m, l)) = x {
                    b.extend_from_slice(m.as_bytes());
                    b.extend_from_slice(l.as_bytes());
                    b.push(0);
                }
                msg(b'Z', &b)
            }),
        "[A-Z ]{1,20}[0-9]{0,3}".prop_map(|t| {
            let mut b = t.into_bytes();
            b.push(0);
            msg(b'C', &b)
        }),
        prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| msg(b'D', &b)),
        prop::collection::vec(any::<u8>(), 0..50).prop_map(|b| msg(b'T', &b)),
        ("[A-Z0-9]{5}", "[a-z ]{0,30}").prop_map(|(c, m)| {
            let b = format!("SERROR\0VERROR\0C{c}\0M{m}\0\0");
            msg(b'E', b.as_bytes())
        }),
        "[a-z ]{0,30}".prop_map(|m| msg(b'N', format!("SWARNING\0M{m}\0\0").as_bytes())),
        ("[a-z_]{1,20}", "[a-z0-9]{0,10}")
            .prop_map(|(n, v)| msg(b'S', format!("{n}\0{v}\0").as_bytes())),
        Just(msg(b'1', b"")),
        Just(msg(b'2', b"")),
        Just(msg(b'n', b"")),
        Just(msg(b'I', b"")),
    ]
}

/// What a consumer sees of a stream: whole messages (inspected) and streamed bodies by count.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Msg(u8, Vec<u8>),
    Opaque(u8, usize),
}

fn mode(tag: u8, _len: usize) -> BodyMode {
    if BackendMessage::needs_body(tag) {
        BodyMode::Inspect
    } else if tag == b'D' {
        // Rows as the session takes them: whole in one step when they can be.
        BodyMode::Skip
    } else {
        BodyMode::Stream
    }
}

/// Feeds `chunks` in order; returns everything seen, checking that streamed counts add up.
fn run(chunks: &[&[u8]]) -> Result<Vec<Seen>, ProtocolError> {
    let mut f = Framer::new(Limits::default());
    let mut seen = Vec::new();
    let mut open: Option<(u8, usize, usize)> = None;
    for chunk in chunks {
        let mut pos = 0;
        loop {
            let (step, n) = f.step(&chunk[pos..], mode)?;
            pos += n;
            match step {
                Step::NeedMore => {
                    assert_eq!(pos, chunk.len(), "NeedMore must consume everything");
                    break;
                }
                Step::Message { tag, body } => seen.push(Seen::Msg(tag, body.to_vec())),
                Step::OpaqueStart { tag, body_len } => {
                    if body_len == 0 {
                        seen.push(Seen::Opaque(tag, 0));
                    } else {
                        open = Some((tag, body_len, 0));
                    }
                }
                Step::NamedStart { .. } => panic!("not asked for"),
                Step::Opaque { tag, body_len } => {
                    assert!(open.is_none(), "a whole message inside another");
                    seen.push(Seen::Opaque(tag, body_len));
                }
                Step::OpaqueBytes { n, done } => {
                    let (tag, len, got) = open.take().expect("bytes without a start");
                    let got = got + n;
                    assert_eq!(done, got == len);
                    if done {
                        seen.push(Seen::Opaque(tag, len));
                    } else {
                        open = Some((tag, len, got));
                    }
                }
            }
        }
    }
    Ok(seen)
}

fn split_at_points(bytes: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts {
        out.push(bytes[last..c].to_vec());
        last = c;
    }
    out.push(bytes[last..].to_vec());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Every way of splitting a valid stream yields the same messages.
    #[test]
    fn framing_is_split_invariant(
        msgs in prop::collection::vec(backend_message(), 1..12),
        points in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let stream: Vec<u8> = msgs.concat();
        let whole = run(&[&stream]).unwrap();
        prop_assert_eq!(whole.len(), msgs.len());
        let pieces = split_at_points(&stream, &points);
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        prop_assert_eq!(&run(&refs).unwrap(), &whole);
        // Byte by byte, the most adversarial split.
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(&run(&bytes).unwrap(), &whole);
        // Every inspected message parses.
        let ext = RfqExtensions { lsn: true, xact: true };
        for s in &whole {
            if let Seen::Msg(t, b) = s {
                prop_assert!(BackendMessage::parse(*t, b, ext).is_ok());
            }
        }
    }

    /// Random bytes never panic: the framer and every parser either succeed or name an error.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000), cut in any::<usize>()) {
        let pieces = split_at_points(&bytes, &[cut]);
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        if let Ok(seen) = run(&refs) {
            for s in seen {
                if let Seen::Msg(t, b) = s {
                    for ext in [RfqExtensions::default(), RfqExtensions { lsn: true, xact: true }] {
                        if let Err(e) = BackendMessage::parse(t, &b, ext) {
                            prop_assert!(!e.to_string().is_empty());
                        }
                    }
                    let _ = polarsplit::internals::protocol::FrontendMessage::parse(t, &b);
                }
            }
        }
        let mut f = Framer::new_startup(Limits::default());
        if let Ok((Step::Message { body, .. }, _)) = f.step(&bytes, mode) {
            let _ = polarsplit::internals::protocol::StartupPacket::parse(body);
        }
    }
}

/// W-2: each RFQ shape, and every truncation of its body, parses exactly as specified.
#[test]
fn w2_every_truncation_parses_as_specified() {
    let ext = RfqExtensions {
        lsn: true,
        xact: true,
    };
    let lsn = 0x0000_0016_B374_D848u64;
    let mut with_lsn = vec![b'I'];
    with_lsn.extend_from_slice(&lsn.to_be_bytes());
    let mut x_list = vec![b'T'];
    x_list.extend_from_slice(&lsn.to_be_bytes());
    x_list.extend_from_slice(b"x1,732\0");
    let mut w_list = vec![b'T'];
    w_list.extend_from_slice(&lsn.to_be_bytes());
    w_list.extend_from_slice(b"w3,733,732\0");
    let mut trailing = x_list.clone();
    trailing.extend_from_slice(b"\x01\x02future");

    for full in [&with_lsn, &x_list, &w_list, &trailing] {
        for cut in 0..=full.len() {
            let body = &full[..cut];
            let r = Rfq::parse(body, ext);
            match cut {
                0 => assert!(r.is_err(), "empty body"),
                1 => {
                    let r = r.unwrap();
                    assert_eq!(r.lsn, LsnField::Missing, "status only = missing LSN");
                    assert_eq!(r.xact, None);
                }
                2..=8 => assert_eq!(
                    r.unwrap_err(),
                    ProtocolError::Rfq("LSN shorter than 8 bytes")
                ),
                9 => {
                    let r = r.unwrap();
                    assert_eq!(r.lsn, LsnField::At(Lsn(lsn)));
                    assert_eq!(r.xact, None, "no marker");
                }
                _ => {
                    let nul_at = full[10..].iter().position(|&b| b == 0).map(|p| p + 10);
                    match nul_at {
                        Some(nul) if cut > nul => {
                            let r = r.unwrap();
                            let x = r.xact.unwrap();
                            assert_eq!(x.xids, &full[10..nul]);
                            assert_eq!(
                                x.marker,
                                if full[9] == b'x' {
                                    Marker::Splittable
                                } else {
                                    Marker::WalPending
                                }
                            );
                        }
                        _ => assert_eq!(
                            r.unwrap_err(),
                            ProtocolError::Rfq("XID list is not NUL-terminated")
                        ),
                    }
                }
            }
        }
        // Truncating the *message* (not the body) only ever asks for more bytes.
        let m = msg(b'Z', full);
        for cut in 0..m.len() {
            let mut f = Framer::new(Limits::default());
            let (step, n) = f.step(&m[..cut], mode).unwrap();
            assert_eq!((step, n), (Step::NeedMore, cut));
        }
    }
    // The status byte is kept whatever follows.
    assert_eq!(
        Rfq::parse(&x_list, ext).unwrap().status,
        TxStatus::InTransaction
    );
}

/// What the framer says of a stream of Parses and Binds read with `BodyMode::StreamNamed`:
/// each message's tag, length and head, and that its remaining bytes were all counted.
fn run_named(limits: Limits, chunks: &[&[u8]]) -> Vec<(u8, usize, Vec<u8>)> {
    let mut f = Framer::new(limits);
    let mut seen = Vec::new();
    let mut left = 0usize;
    let mode = |t: u8, _| BodyMode::StreamNamed(if t == b'B' { 2 } else { 1 });
    for chunk in chunks {
        let mut pos = 0;
        loop {
            let (step, n) = f.step(&chunk[pos..], mode).unwrap();
            pos += n;
            match step {
                Step::NeedMore => {
                    assert_eq!(pos, chunk.len(), "NeedMore must consume everything");
                    break;
                }
                Step::NamedStart {
                    tag,
                    body_len,
                    head,
                } => {
                    assert_eq!(left, 0, "a start inside another message");
                    assert!(head.len() <= body_len.min(limits.max_inspected_len));
                    left = body_len - head.len();
                    seen.push((tag, body_len, head.to_vec()));
                }
                Step::OpaqueBytes { n, done } => {
                    assert!(n <= left, "more bytes than the body has");
                    left -= n;
                    assert_eq!(done, left == 0);
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(left, 0, "a body not counted to its end");
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// E-2: a Parse or Bind too large to inspect still has its names read, however its bytes
    /// are cut — the statement name (and a Bind's portal) with their NULs, or as many bytes as
    /// the limit allows when they are longer — and every other byte of it is counted.
    #[test]
    fn e2_the_names_of_a_streamed_parse_or_bind_are_read_however_it_is_split(
        msgs in prop::collection::vec(
            (any::<bool>(), "[a-z_0-9]{0,40}", "[a-z_0-9]{0,40}", prop::collection::vec(any::<u8>(), 0..100)),
            1..6,
        ),
        limit in 1usize..90,
        points in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let limits = Limits { max_inspected_len: limit, ..Limits::default() };
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for (is_bind, a, b, rest) in &msgs {
            let names = if *is_bind { format!("{a}\0{b}\0") } else { format!("{a}\0") };
            let mut body = names.clone().into_bytes();
            body.extend_from_slice(rest);
            let head = names.len().min(limit);
            let tag = if *is_bind { b'B' } else { b'P' };
            want.push((tag, body.len(), body[..head].to_vec()));
            stream.extend(msg(tag, &body));
        }
        prop_assert_eq!(&run_named(limits, &[&stream]), &want);
        let pieces = split_at_points(&stream, &points);
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        prop_assert_eq!(&run_named(limits, &refs), &want);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        prop_assert_eq!(&run_named(limits, &bytes), &want);
    }
}
