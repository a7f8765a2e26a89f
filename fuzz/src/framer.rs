//! The incremental framer (`protocol::framer`) on arbitrary bytes and arbitrary splits.
//!
//! Invariants:
//! - it never panics, always makes progress (a non-empty input is consumed or yields a step);
//! - it never consumes more than it was given, and never buffers more than one inspected body
//!   (`buffered() <= max_inspected_len + 5`, the startup limit for the startup packet);
//! - every split of the same bytes yields the same messages, streamed counts and error as the
//!   whole bytes in one piece ("bytes may arrive split anywhere");
//! - an error sticks: the next step returns the same error;
//! - for tagged streams with every body inspected, the contiguous `frame()` agrees.

use polarsplit::internals::protocol::framer::{frame, BodyMode, Framer, Step};
use polarsplit::{Limits, ProtocolError};

use super::input::Input;

#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Msg(u8, Vec<u8>),
    Opaque(u8, usize),
    Named(u8, usize, Vec<u8>),
    Bytes(usize),
    Err(ProtocolError),
}

/// Inspect, stream (names first or not) or skip, decided by the tag and a mask from the input (as the session does by tag
/// and length).
fn mode(mask: u8, t: u8, len: usize) -> BodyMode {
    if (t.rotate_left(u32::from(mask & 7)) ^ mask) & 1 == 0 && len % 3 != 1 {
        BodyMode::Inspect
    } else if (t ^ mask) & 2 == 0 {
        BodyMode::Skip
    } else if (t ^ mask) & 4 == 0 {
        // A large Parse's or Bind's names read before the rest streams.
        BodyMode::StreamNamed(mask >> 6)
    } else {
        BodyMode::Stream
    }
}

fn push(seen: &mut Vec<Seen>, s: Seen) {
    if let (Some(Seen::Bytes(a)), Seen::Bytes(b)) = (seen.last_mut(), &s) {
        *a += b;
        return;
    }
    seen.push(s);
}

fn drive(payload: &[u8], cuts: &[usize], startup: bool, limits: Limits, mask: u8) -> Vec<Seen> {
    let mut f = if startup {
        Framer::new_startup(limits)
    } else {
        Framer::new(limits)
    };
    let mut seen = Vec::new();
    let mut pos = 0;
    let mut cut_i = 0;
    while pos < payload.len() {
        let len = cuts.get(cut_i).copied().unwrap_or(usize::MAX).max(1);
        cut_i += 1;
        let end = pos.saturating_add(len).min(payload.len());
        let mut chunk = &payload[pos..end];
        pos = end;
        while !chunk.is_empty() {
            let step = f.step(chunk, |t, l| mode(mask, t, l));
            let (s, n) = match step {
                Ok(x) => x,
                Err(e) => {
                    // Errors stick.
                    assert_eq!(f.step(b"x", |_, _| BodyMode::Inspect).unwrap_err(), e);
                    push(&mut seen, Seen::Err(e));
                    return seen;
                }
            };
            assert!(n <= chunk.len(), "consumed {n} of {}", chunk.len());
            let record = match s {
                Step::NeedMore => {
                    assert!(n > 0, "NeedMore without progress on a non-empty input");
                    None
                }
                Step::Message { tag, body } => Some(Seen::Msg(tag, body.to_vec())),
                Step::OpaqueStart { tag, body_len } => Some(Seen::Opaque(tag, body_len)),
                Step::NamedStart {
                    tag,
                    body_len,
                    head,
                } => {
                    assert!(head.len() <= body_len.min(limits.max_inspected_len));
                    Some(Seen::Named(tag, body_len, head.to_vec()))
                }
                // The same as a start and its whole body, however the input was cut.
                Step::Opaque { tag, body_len } => {
                    push(&mut seen, Seen::Opaque(tag, body_len));
                    (body_len > 0).then_some(Seen::Bytes(body_len))
                }
                Step::OpaqueBytes { n, .. } => Some(Seen::Bytes(n)),
            };
            if let Some(r) = record {
                push(&mut seen, r);
            }
            chunk = &chunk[n..];
            let bound = limits.max_inspected_len.max(limits.max_startup_len) + 5;
            assert!(f.buffered() <= bound, "framer buffers {}", f.buffered());
        }
    }
    seen
}

pub fn run(data: &[u8]) {
    let mut inp = Input::new(data);
    let startup = inp.bool();
    let limits = Limits {
        max_startup_len: *inp.pick(&[8, 64, 10_000]),
        max_inspected_len: *inp.pick(&[0, 1, 7, 64, 1 << 20]),
        max_message_len: *inp.pick(&[4, 100, 4096, (1 << 30) - 1]),
    };
    let mask = inp.u8();
    let ncuts = inp.below(16);
    let cuts: Vec<usize> = (0..ncuts).map(|_| usize::from(inp.u8()) + 1).collect();
    let payload = inp.rest();

    let whole = drive(payload, &[], startup, limits, mask);
    let split = drive(payload, &cuts, startup, limits, mask);
    assert_eq!(whole, split, "a split changed what the framer saw");
    let bytewise = drive(payload, &[1; 64], startup, limits, mask);
    assert_eq!(
        whole, bytewise,
        "byte-by-byte feeding changed what the framer saw"
    );

    // The contiguous framer agrees with the incremental one on tagged, all-inspected streams.
    if !startup {
        let inspected = {
            let mut f = Framer::new(limits);
            let mut out = Vec::new();
            let mut rest = payload;
            while !rest.is_empty() {
                match f.step(rest, |_, _| BodyMode::Inspect) {
                    Ok((Step::Message { tag, body }, n)) => {
                        out.push(Ok((tag, body.to_vec())));
                        rest = &rest[n..];
                    }
                    Ok((_, n)) => rest = &rest[n..],
                    Err(e) => {
                        out.push(Err(e));
                        break;
                    }
                }
            }
            out
        };
        let mut contiguous = Vec::new();
        let mut rest = payload;
        loop {
            match frame(rest, &limits) {
                Ok(Some(fr)) => {
                    assert_eq!(fr.wire_len, fr.body.len() + 5);
                    if fr.body.len() > limits.max_inspected_len {
                        // The incremental framer refuses to inspect it; frame() has no such limit.
                        break;
                    }
                    contiguous.push(Ok((fr.tag, fr.body.to_vec())));
                    rest = &rest[fr.wire_len..];
                }
                Ok(None) => break,
                Err(e) => {
                    contiguous.push(Err(e));
                    break;
                }
            }
        }
        let n = contiguous.len();
        assert_eq!(&inspected[..n.min(inspected.len())], &contiguous[..]);
    }
}
