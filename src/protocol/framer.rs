//! Incremental framing: bytes may arrive split anywhere; the framer says "need more" until a
//! message is whole.
//!
//! Bodies the caller wants to inspect are delivered whole ([`Step::Message`]), borrowed from the
//! input when the message arrived in one piece and from the framer's own buffer otherwise. Bodies
//! the caller does not need (data rows, COPY data, passwords) are streamed as counts
//! ([`Step::OpaqueStart`] then [`Step::OpaqueBytes`]; with [`BodyMode::Skip`] one
//! [`Step::Opaque`] when the whole message is in the input) and never copied.

use super::{Limits, ProtocolError};

/// How the caller wants a message body delivered, decided from its tag and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyMode {
    /// Deliver the body whole (it must fit [`Limits::max_inspected_len`]).
    Inspect,
    /// Only count its bytes.
    Stream,
    /// Only count its bytes, and when the whole message is in the input take it in one step
    /// ([`Step::Opaque`]): small rows pass without a second step each.
    Skip,
    /// Only count its bytes after its first `n` NUL-terminated names, which are read first and
    /// come with [`Step::NamedStart`] (at most [`Limits::max_inspected_len`] bytes of them): a
    /// Parse or Bind too large to inspect still says which statement and portal it names.
    StreamNamed(u8),
}

/// One framing step.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// Every input byte was consumed and no message is complete yet.
    NeedMore,
    /// A whole message. `tag` is 0 for an untagged startup-phase packet, whose body starts with
    /// its 4-byte request code.
    Message { tag: u8, body: &'a [u8] },
    /// The header of a streamed message; its body follows as [`Step::OpaqueBytes`].
    OpaqueStart { tag: u8, body_len: usize },
    /// A whole message asked for with [`BodyMode::Skip`]: its header and its `body_len` body
    /// bytes were all in the input and are consumed (what [`Step::OpaqueStart`] and a final
    /// [`Step::OpaqueBytes`] would say, in one step).
    Opaque { tag: u8, body_len: usize },
    /// `n` more bytes of a streamed body; `done` when it is complete.
    OpaqueBytes { n: usize, done: bool },
    /// The header and the first bytes of a message asked for with [`BodyMode::StreamNamed`]:
    /// `head` is its body up to the NUL that ends the last name asked for (or as much as the
    /// limit allowed, when they are longer: then fewer NULs are in it), counted as consumed;
    /// the rest of the body follows as [`Step::OpaqueBytes`] (none when `head` is all of it).
    NamedStart {
        tag: u8,
        body_len: usize,
        head: &'a [u8],
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Buffering {
        tag: u8,
        body_len: usize,
    },
    /// Reading the names of a [`BodyMode::StreamNamed`] body into `buf`: `left` NULs to go.
    Naming {
        tag: u8,
        body_len: usize,
        left: u8,
    },
    Streaming {
        remaining: usize,
    },
}

/// A stateful framer for one direction of one connection.
#[derive(Debug)]
pub struct Framer {
    limits: Limits,
    untagged_next: bool,
    hdr: [u8; 5],
    /// Bytes of `hdr` filled (0..=5): a byte, so that the flags pack beside it (8 bytes less
    /// per framer, two per session).
    hdr_len: u8,
    state: State,
    buf: Vec<u8>,
    clear_buf: bool,
    /// Boxed: a failed framer is rare, and it keeps the framer small (one per connection).
    failed: Option<Box<ProtocolError>>,
}

impl Framer {
    /// A framer for tagged messages (a backend stream, or a client stream after startup).
    pub fn new(limits: Limits) -> Framer {
        Framer {
            limits,
            untagged_next: false,
            hdr: [0; 5],
            hdr_len: 0,
            state: State::Header,
            buf: Vec::new(),
            clear_buf: false,
            failed: None,
        }
    }

    /// A framer whose next message is an untagged startup-phase packet (a client stream).
    pub fn new_startup(limits: Limits) -> Framer {
        let mut f = Framer::new(limits);
        f.untagged_next = true;
        f
    }

    /// The next message is untagged again (after an SSLRequest or GSSENCRequest was answered
    /// with 'N', the client sends another startup packet).
    pub fn expect_untagged(&mut self) {
        self.untagged_next = true;
    }

    /// From now on messages are tagged.
    pub fn expect_tagged(&mut self) {
        self.untagged_next = false;
    }

    /// True between messages (no partial header or body held).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Header && self.hdr_len == 0
    }

    /// Bytes of a partial message currently copied inside the framer.
    pub fn buffered(&self) -> usize {
        self.hdr_len as usize + if self.clear_buf { 0 } else { self.buf.len() }
    }

    /// Bytes of the incomplete message in progress that were consumed but reported in no step
    /// yet: a partial header, or a buffered message's header and body so far (a streamed
    /// message's bytes are reported as they come).
    pub fn unreported(&self) -> usize {
        let body = if self.clear_buf { 0 } else { self.buf.len() };
        match self.state {
            State::Header => self.hdr_len as usize,
            State::Buffering { tag: 0, .. } => 4 + body,
            State::Buffering { .. } | State::Naming { .. } => 5 + body,
            State::Streaming { .. } => 0,
        }
    }

    /// Consumes a prefix of `input` and reports what it completed. Returns the step and how many
    /// input bytes it consumed. `mode` is asked once per message, when its header is complete.
    ///
    /// After an error the framer stays failed and returns the same error.
    #[inline(always)]
    pub fn step<'a>(
        &'a mut self,
        input: &'a [u8],
        mode: impl FnOnce(u8, usize) -> BodyMode,
    ) -> Result<(Step<'a>, usize), ProtocolError> {
        if let Some(e) = &self.failed {
            return Err((**e).clone());
        }
        if self.clear_buf {
            self.buf.clear();
            self.clear_buf = false;
        }
        match self.state {
            State::Header => self.step_header(input, mode),
            State::Buffering { tag, body_len } => {
                let want = body_len - self.buf.len();
                let n = want.min(input.len());
                self.buf.extend_from_slice(&input[..n]);
                if self.buf.len() < body_len {
                    return Ok((Step::NeedMore, n));
                }
                self.state = State::Header;
                self.clear_buf = true;
                Ok((
                    Step::Message {
                        tag,
                        body: &self.buf,
                    },
                    n,
                ))
            }
            State::Naming {
                tag,
                body_len,
                left,
            } => Ok(self.name_more(input, tag, body_len, left)),
            State::Streaming { remaining } => {
                let n = remaining.min(input.len());
                if n == 0 {
                    return Ok((Step::NeedMore, 0));
                }
                let left = remaining - n;
                self.state = if left == 0 {
                    State::Header
                } else {
                    State::Streaming { remaining: left }
                };
                Ok((Step::OpaqueBytes { n, done: left == 0 }, n))
            }
        }
    }

    #[inline(always)]
    fn step_header<'a>(
        &'a mut self,
        input: &'a [u8],
        mode: impl FnOnce(u8, usize) -> BodyMode,
    ) -> Result<(Step<'a>, usize), ProtocolError> {
        let hdr_size = if self.untagged_next { 4 } else { 5 };
        let (hdr, take) = match input.get(..hdr_size) {
            // The common case: the whole header is in the input, read in place.
            Some(h) if self.hdr_len == 0 => (h, hdr_size),
            _ => {
                let have = self.hdr_len as usize;
                let take = (hdr_size - have).min(input.len());
                self.hdr[have..have + take].copy_from_slice(&input[..take]);
                // At most 5.
                self.hdr_len = (have + take) as u8;
                if have + take < hdr_size {
                    return Ok((Step::NeedMore, take));
                }
                self.hdr_len = 0;
                (&self.hdr[..hdr_size], take)
            }
        };
        let (tag, len_bytes) = match *hdr {
            [a, b, c, d] => (0u8, [a, b, c, d]),
            [t, a, b, c, d] => (t, [a, b, c, d]),
            // Not reached (a header is 4 or 5 bytes); a zero length is refused below.
            _ => (0u8, [0; 4]),
        };
        let len = u32::from_be_bytes(len_bytes);
        let result = self.check_len(tag, len);
        let body_len = match result {
            Ok(b) => b,
            Err(e) => {
                self.failed = Some(Box::new(e.clone()));
                return Err(e);
            }
        };
        let untagged = self.untagged_next;
        // A startup packet is always inspected: it is small and routing needs it.
        let mode = if untagged {
            BodyMode::Inspect
        } else {
            mode(tag, body_len)
        };
        if untagged {
            // Whatever follows a startup packet is tagged unless the caller says otherwise.
            self.untagged_next = false;
        }
        match mode {
            BodyMode::Inspect => {
                if !untagged && body_len > self.limits.max_inspected_len {
                    let e = ProtocolError::TooLarge {
                        tag,
                        len: body_len,
                        limit: self.limits.max_inspected_len,
                    };
                    self.failed = Some(Box::new(e.clone()));
                    return Err(e);
                }
                let rest = &input[take..];
                if rest.len() >= body_len {
                    return Ok((
                        Step::Message {
                            tag,
                            body: &rest[..body_len],
                        },
                        take + body_len,
                    ));
                }
                self.buf.reserve(body_len);
                self.buf.extend_from_slice(rest);
                self.state = State::Buffering { tag, body_len };
                Ok((Step::NeedMore, take + rest.len()))
            }
            BodyMode::Skip if input.len() - take >= body_len => {
                Ok((Step::Opaque { tag, body_len }, take + body_len))
            }
            BodyMode::StreamNamed(names) => {
                self.buf.clear();
                let (step, n) = self.name_more(&input[take..], tag, body_len, names);
                Ok((step, take + n))
            }
            BodyMode::Stream | BodyMode::Skip => {
                if body_len > 0 {
                    self.state = State::Streaming {
                        remaining: body_len,
                    };
                }
                Ok((Step::OpaqueStart { tag, body_len }, take))
            }
        }
    }

    /// Reads names of a [`BodyMode::StreamNamed`] body into `buf` from `input` (`left` NULs to
    /// go); once they are read, or the body or the limit ends first, the body streams.
    fn name_more<'a>(
        &'a mut self,
        input: &'a [u8],
        tag: u8,
        body_len: usize,
        mut left: u8,
    ) -> (Step<'a>, usize) {
        let room = body_len.min(self.limits.max_inspected_len) - self.buf.len();
        let avail = &input[..room.min(input.len())];
        let mut n = if left == 0 { 0 } else { avail.len() };
        for (i, &b) in avail[..n].iter().enumerate() {
            if b == 0 {
                left = left.saturating_sub(1);
                if left == 0 {
                    n = i + 1;
                    break;
                }
            }
        }
        self.buf.extend_from_slice(&avail[..n]);
        if left > 0 && self.buf.len() < body_len.min(self.limits.max_inspected_len) {
            self.state = State::Naming {
                tag,
                body_len,
                left,
            };
            return (Step::NeedMore, n);
        }
        let remaining = body_len - self.buf.len();
        self.state = if remaining == 0 {
            State::Header
        } else {
            State::Streaming { remaining }
        };
        self.clear_buf = true;
        (
            Step::NamedStart {
                tag,
                body_len,
                head: &self.buf,
            },
            n,
        )
    }

    fn check_len(&self, tag: u8, len: u32) -> Result<usize, ProtocolError> {
        if len < 4 {
            return Err(ProtocolError::LengthTooSmall { tag, len });
        }
        let total = len as usize;
        if self.untagged_next {
            if total < 8 {
                return Err(ProtocolError::Startup("packet shorter than 8 bytes"));
            }
            if total > self.limits.max_startup_len {
                return Err(ProtocolError::TooLarge {
                    tag,
                    len: total,
                    limit: self.limits.max_startup_len,
                });
            }
        } else if total > self.limits.max_message_len {
            return Err(ProtocolError::TooLarge {
                tag,
                len: total,
                limit: self.limits.max_message_len,
            });
        }
        Ok(total - 4)
    }
}

/// One whole tagged message found at the start of a contiguous buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub tag: u8,
    pub body: &'a [u8],
    /// Tag, length and body: the bytes this message occupies on the wire.
    pub wire_len: usize,
}

/// Frames one tagged message at the start of a contiguous buffer: `Ok(None)` when more bytes are
/// needed.
pub fn frame<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Frame<'a>>, ProtocolError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let tag = buf[0];
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    if len < 4 {
        return Err(ProtocolError::LengthTooSmall { tag, len });
    }
    let len = len as usize;
    if len > limits.max_message_len {
        return Err(ProtocolError::TooLarge {
            tag,
            len,
            limit: limits.max_message_len,
        });
    }
    if buf.len() < 1 + len {
        return Ok(None);
    }
    Ok(Some(Frame {
        tag,
        body: &buf[5..1 + len],
        wire_len: 1 + len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn whole_message_is_borrowed_from_input() {
        let bytes = msg(b'Z', b"I");
        let mut f = Framer::new(Limits::default());
        let (step, n) = f.step(&bytes, |_, _| BodyMode::Inspect).unwrap();
        assert_eq!(n, 6);
        match step {
            Step::Message { tag, body } => {
                assert_eq!(tag, b'Z');
                assert_eq!(body, b"I");
                assert_eq!(body.as_ptr(), bytes[5..].as_ptr());
            }
            other => panic!("{other:?}"),
        }
        assert!(f.at_boundary());
    }

    #[test]
    fn byte_by_byte_needs_more_until_whole() {
        let bytes = msg(b'C', b"SELECT 1\0");
        let mut f = Framer::new(Limits::default());
        for i in 0..bytes.len() - 1 {
            let (step, n) = f.step(&bytes[i..i + 1], |_, _| BodyMode::Inspect).unwrap();
            assert_eq!((step, n), (Step::NeedMore, 1));
        }
        let last = bytes.len() - 1;
        let (step, _) = f.step(&bytes[last..], |_, _| BodyMode::Inspect).unwrap();
        assert_eq!(
            step,
            Step::Message {
                tag: b'C',
                body: b"SELECT 1\0"
            }
        );
    }

    #[test]
    fn streamed_body_is_counted_not_copied() {
        let bytes = msg(b'D', &[7u8; 100]);
        let mut f = Framer::new(Limits::default());
        let (step, n) = f.step(&bytes[..50], |_, _| BodyMode::Stream).unwrap();
        assert_eq!(
            step,
            Step::OpaqueStart {
                tag: b'D',
                body_len: 100
            }
        );
        assert_eq!(n, 5);
        let (step, n) = f.step(&bytes[5..50], |_, _| BodyMode::Stream).unwrap();
        assert_eq!((step, n), (Step::OpaqueBytes { n: 45, done: false }, 45));
        let (step, n) = f.step(&bytes[50..], |_, _| BodyMode::Stream).unwrap();
        assert_eq!((step, n), (Step::OpaqueBytes { n: 55, done: true }, 55));
        assert_eq!(f.buffered(), 0);
        assert!(f.at_boundary());
    }

    #[test]
    fn streamed_message_whole_in_the_input_is_one_step() {
        let mut bytes = msg(b'D', &[7u8; 100]);
        bytes.extend(msg(b'C', b"SELECT 1\0"));
        let mut f = Framer::new(Limits::default());
        let (step, n) = f.step(&bytes, |_, _| BodyMode::Skip).unwrap();
        assert_eq!(
            (step, n),
            (
                Step::Opaque {
                    tag: b'D',
                    body_len: 100
                },
                105
            )
        );
        assert!(f.at_boundary());
        // An empty streamed body is whole as soon as its header is.
        let empty = msg(b'D', b"");
        let (step, n) = f.step(&empty, |_, _| BodyMode::Skip).unwrap();
        assert_eq!(
            (step, n),
            (
                Step::Opaque {
                    tag: b'D',
                    body_len: 0
                },
                5
            )
        );
        // One byte short: the body streams.
        let (step, n) = f.step(&bytes[..104], |_, _| BodyMode::Skip).unwrap();
        assert_eq!(
            (step, n),
            (
                Step::OpaqueStart {
                    tag: b'D',
                    body_len: 100
                },
                5
            )
        );
        assert_eq!(f.buffered(), 0);
        // Stream never takes a body in the header's step.
        let mut f = Framer::new(Limits::default());
        let (step, n) = f.step(&bytes, |_, _| BodyMode::Stream).unwrap();
        assert_eq!(
            (step, n),
            (
                Step::OpaqueStart {
                    tag: b'D',
                    body_len: 100
                },
                5
            )
        );
    }

    #[test]
    fn length_below_four_is_an_error_and_sticks() {
        let mut f = Framer::new(Limits::default());
        let bad = [b'Q', 0, 0, 0, 3];
        let e = f.step(&bad, |_, _| BodyMode::Inspect).unwrap_err();
        assert_eq!(e, ProtocolError::LengthTooSmall { tag: b'Q', len: 3 });
        assert_eq!(f.step(b"x", |_, _| BodyMode::Inspect).unwrap_err(), e);
    }

    #[test]
    fn inspected_message_over_limit_is_refused_before_buffering() {
        let limits = Limits {
            max_inspected_len: 10,
            ..Limits::default()
        };
        let mut f = Framer::new(limits);
        let hdr = [b'Q', 0, 0, 0, 100];
        let e = f.step(&hdr, |_, _| BodyMode::Inspect).unwrap_err();
        assert!(matches!(
            e,
            ProtocolError::TooLarge {
                len: 96,
                limit: 10,
                ..
            }
        ));
        assert_eq!(f.buffered(), 0);
    }

    #[test]
    fn one_gigabyte_prefix_is_refused() {
        let mut f = Framer::new(Limits::default());
        let hdr = [b'Q', 0x40, 0, 0, 0];
        let e = f.step(&hdr, |_, _| BodyMode::Stream).unwrap_err();
        assert!(matches!(e, ProtocolError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn untagged_startup_then_tagged() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&8u32.to_be_bytes());
        bytes.extend_from_slice(&80877103u32.to_be_bytes());
        let mut f = Framer::new_startup(Limits::default());
        let (step, n) = f.step(&bytes, |_, _| BodyMode::Stream).unwrap();
        assert_eq!(n, 8);
        assert_eq!(
            step,
            Step::Message {
                tag: 0,
                body: &80877103u32.to_be_bytes()
            }
        );
        let q = msg(b'Q', b"select 1\0");
        let (step, _) = f.step(&q, |_, _| BodyMode::Inspect).unwrap();
        assert!(matches!(step, Step::Message { tag: b'Q', .. }));
    }

    #[test]
    fn oversized_startup_is_refused() {
        let mut f = Framer::new_startup(Limits::default());
        let e = f
            .step(&20_000u32.to_be_bytes(), |_, _| BodyMode::Inspect)
            .unwrap_err();
        assert!(matches!(e, ProtocolError::TooLarge { tag: 0, .. }));
    }

    #[test]
    fn frame_contiguous() {
        let bytes = msg(b'Z', b"T");
        assert_eq!(frame(&bytes[..5], &Limits::default()).unwrap(), None);
        assert_eq!(
            frame(&bytes, &Limits::default()).unwrap(),
            Some(Frame {
                tag: b'Z',
                body: &b"T"[..],
                wire_len: 6
            })
        );
    }
}
