//! PostgreSQL v3 wire protocol: framing, the untagged startup phase, frontend and backend
//! messages, the PolarDB ReadyForQuery extension (SPEC W-2, W-3) and encoders for what the engine
//! injects.
//!
//! Everything here is pure and borrows the caller's bytes: parsing never copies a message body,
//! never reads past a message's end, and reports malformed input as a [`ProtocolError`]. This
//! module depends on nothing else in the crate.

#[doc(hidden)]
pub mod backend;
#[doc(hidden)]
pub mod encode;
#[doc(hidden)]
pub mod framer;
#[doc(hidden)]
pub mod frontend;
pub mod rfq;
#[doc(hidden)]
pub mod startup;

use std::fmt;

pub use backend::{AuthRequest, BackendMessage, ErrorFields};
pub use framer::{frame, BodyMode, Frame, Framer, Step};
pub use frontend::FrontendMessage;
pub use rfq::{LsnField, Marker, Rfq, RfqExtensions, TxStatus, XactInfo, XidError, XidList};
pub use startup::StartupPacket;

/// A WAL position, compared as an unsigned integer (SPEC §1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// No position: nothing to wait for.
    pub const ZERO: Lsn = Lsn(0);

    /// Whether this is [`Lsn::ZERO`].
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Parses PostgreSQL's `X/Y` text form (hexadecimal halves).
    pub fn parse_text(s: &str) -> Option<Lsn> {
        let (hi, lo) = s.trim().split_once('/')?;
        if hi.is_empty() || lo.is_empty() || hi.len() > 8 || lo.len() > 8 {
            return None;
        }
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        Some(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

/// `X/Y`, as PostgreSQL prints it.
impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

/// Message type bytes.
pub mod tag {
    // Each constant is the type byte of the message of the same name in the PostgreSQL protocol
    // documentation ("Message Formats"); a doc line per constant would only repeat its name.
    #![allow(missing_docs)]
    // Frontend.
    pub const QUERY: u8 = b'Q';
    pub const PARSE: u8 = b'P';
    pub const BIND: u8 = b'B';
    pub const EXECUTE: u8 = b'E';
    pub const DESCRIBE: u8 = b'D';
    pub const CLOSE: u8 = b'C';
    pub const SYNC: u8 = b'S';
    pub const FLUSH: u8 = b'H';
    pub const TERMINATE: u8 = b'X';
    pub const FUNCTION_CALL: u8 = b'F';
    /// PasswordMessage, GSSResponse, SASLInitialResponse and SASLResponse share this byte.
    pub const PASSWORD: u8 = b'p';
    // Both directions.
    pub const COPY_DATA: u8 = b'd';
    pub const COPY_DONE: u8 = b'c';
    pub const COPY_FAIL: u8 = b'f';
    // Backend.
    pub const AUTHENTICATION: u8 = b'R';
    pub const BACKEND_KEY_DATA: u8 = b'K';
    pub const BIND_COMPLETE: u8 = b'2';
    pub const CLOSE_COMPLETE: u8 = b'3';
    pub const COMMAND_COMPLETE: u8 = b'C';
    pub const COPY_IN_RESPONSE: u8 = b'G';
    pub const COPY_OUT_RESPONSE: u8 = b'H';
    pub const COPY_BOTH_RESPONSE: u8 = b'W';
    pub const DATA_ROW: u8 = b'D';
    pub const EMPTY_QUERY_RESPONSE: u8 = b'I';
    pub const ERROR_RESPONSE: u8 = b'E';
    pub const FUNCTION_CALL_RESPONSE: u8 = b'V';
    pub const NEGOTIATE_PROTOCOL_VERSION: u8 = b'v';
    pub const NO_DATA: u8 = b'n';
    pub const NOTICE_RESPONSE: u8 = b'N';
    pub const NOTIFICATION_RESPONSE: u8 = b'A';
    pub const PARAMETER_DESCRIPTION: u8 = b't';
    pub const PARAMETER_STATUS: u8 = b'S';
    pub const PARSE_COMPLETE: u8 = b'1';
    pub const PORTAL_SUSPENDED: u8 = b's';
    pub const READY_FOR_QUERY: u8 = b'Z';
    pub const ROW_DESCRIPTION: u8 = b'T';
}

/// Size limits for messages the engine must see whole. Bodies larger than these are either
/// streamed through uninspected (the session decides) or refused with [`ProtocolError::TooLarge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The startup-phase packet (PostgreSQL itself refuses more than 10,000 bytes).
    pub max_startup_len: usize,
    /// Any message whose body the engine buffers to parse it.
    pub max_inspected_len: usize,
    /// Absolute bound on a declared message length (PostgreSQL's own bound is 1 GiB - 1).
    pub max_message_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_startup_len: 10_000,
            max_inspected_len: 1 << 20,
            max_message_len: (1 << 30) - 1,
        }
    }
}

/// Why bytes could not be understood. Every variant names what was wrong; none is a panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A declared length below 4 (the length counts itself).
    #[error("message '{}' declares length {len}, less than the 4 bytes of the length itself", printable(*tag))]
    LengthTooSmall {
        /// The message's type byte (0 in the startup phase).
        tag: u8,
        /// The length it declared.
        len: u32,
    },
    /// A message longer than the [`Limits`] allow for its kind.
    #[error("message '{}' of {len} bytes exceeds the limit of {limit} bytes", printable(*tag))]
    TooLarge {
        /// The message's type byte (0 in the startup phase).
        tag: u8,
        /// Its declared length.
        len: usize,
        /// The limit it exceeded.
        limit: usize,
    },
    /// A malformed startup-phase packet (what is wrong).
    #[error("startup packet: {0}")]
    Startup(&'static str),
    /// A StartupMessage of a protocol version the engine does not speak (only 3.0).
    #[error("unsupported protocol version {major}.{minor}")]
    UnsupportedVersion {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// A message whose body does not parse as its type says.
    #[error("message '{}' is malformed: {what}", printable(*tag))]
    Malformed {
        /// The message's type byte.
        tag: u8,
        /// What was wrong.
        what: &'static str,
    },
    /// A type byte that peer never sends.
    #[error("unexpected message type '{}' from the {side}", printable(*tag))]
    UnexpectedTag {
        /// The type byte.
        tag: u8,
        /// `"client"` or `"server"`.
        side: &'static str,
    },
    /// A malformed PolarDB ReadyForQuery extension (what is wrong).
    #[error("ReadyForQuery extension: {0}")]
    Rfq(&'static str),
    /// A malformed transaction XID list (the `'x'` marker's payload).
    #[error("transaction XID list: {0}")]
    XidList(#[from] XidError),
}

fn printable(tag: u8) -> String {
    if tag.is_ascii_graphic() {
        (tag as char).to_string()
    } else {
        format!("\\x{tag:02x}")
    }
}

/// A cursor over a message body: length-checked reads, never past the end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    tag: u8,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(tag: u8, buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, tag }
    }

    fn err(&self, what: &'static str) -> ProtocolError {
        ProtocolError::Malformed {
            tag: self.tag,
            what,
        }
    }

    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, ProtocolError> {
        let (&b, rest) = self.buf.split_first().ok_or_else(|| self.err(what))?;
        self.buf = rest;
        Ok(b)
    }

    /// A 16-bit count, unsigned as the server reads it (`pq_getmsgint(msg, 2)`: a Parse's
    /// parameter types, a Bind's formats and values, a FunctionCall's arguments, up to 65535).
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, ProtocolError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, ProtocolError> {
        let b = self.bytes(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn bytes(
        &mut self,
        n: usize,
        what: &'static str,
    ) -> Result<&'a [u8], ProtocolError> {
        if self.buf.len() < n {
            return Err(self.err(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// [`Self::cstr`] for a statement or portal name: the empty one (the unnamed statement and
    /// portal, in most extended messages) is found without the memchr's setup.
    #[inline]
    pub(crate) fn name(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        if let Some((&0, rest)) = self.buf.split_first() {
            let empty = &self.buf[..0];
            self.buf = rest;
            return Ok(empty);
        }
        self.cstr(what)
    }

    /// A NUL-terminated string (without its NUL).
    pub(crate) fn cstr(&mut self, what: &'static str) -> Result<&'a [u8], ProtocolError> {
        let nul = find_nul(self.buf).ok_or_else(|| self.err(what))?;
        let s = &self.buf[..nul];
        self.buf = &self.buf[nul + 1..];
        Ok(s)
    }

    pub(crate) fn expect_end(&self, what: &'static str) -> Result<(), ProtocolError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.err(what))
        }
    }
}

/// The position of the first NUL byte. Eight bytes at a time (SQL texts are long, and the
/// standard library's memchr walks an unaligned head and tail byte by byte): a word has a zero
/// byte exactly when `(w - 0x01…01) & !w & 0x80…80` is non-zero.
pub(crate) fn find_nul(b: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut chunks = b.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let z = w.wrapping_sub(LO) & !w & HI;
        if z != 0 {
            // Little-endian: the lowest flagged byte is the first zero (flags above it may be
            // borrows, never below it).
            return Some(at + (z.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&x| x == 0)
        .map(|p| at + p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time search finds what a byte loop finds, wherever the NUL is and
        /// whatever surrounds it (bytes 0x01 and 0x80 are the ones a zero-byte test confuses).
        #[test]
        fn find_nul_is_the_first_zero_byte(b in prop::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(0x80u8), Just(0xffu8), any::<u8>()], 0..40)) {
            prop_assert_eq!(find_nul(&b), b.iter().position(|&x| x == 0));
        }
    }

    #[test]
    fn lsn_text_round_trip() {
        let l = Lsn::parse_text("16/B374D848").unwrap();
        assert_eq!(l.0, 97_500_059_720);
        assert_eq!(l.to_string(), "16/B374D848");
        assert_eq!(Lsn::parse_text("0/0"), Some(Lsn(0)));
        assert_eq!(Lsn::parse_text("x/1"), None);
        assert_eq!(Lsn::parse_text("1/"), None);
        assert_eq!(Lsn::parse_text("123456789/1"), None);
    }
}
