//! ReadyForQuery with the PolarDB extension (SPEC W-2) and the transaction XID list (W-3).

use super::{Lsn, ProtocolError};

/// The transaction status byte of ReadyForQuery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxStatus {
    /// `I`: not in a transaction block.
    Idle,
    /// `T`: in a transaction block.
    InTransaction,
    /// `E`: in a failed transaction block.
    Failed,
}

impl TxStatus {
    /// The status a ReadyForQuery status byte (`I`, `T` or `E`) stands for; `None` for any other byte.
    pub fn from_byte(b: u8) -> Option<TxStatus> {
        match b {
            b'I' => Some(TxStatus::Idle),
            b'T' => Some(TxStatus::InTransaction),
            b'E' => Some(TxStatus::Failed),
            _ => None,
        }
    }

    /// The status byte ReadyForQuery carries for this status.
    pub fn byte(self) -> u8 {
        match self {
            TxStatus::Idle => b'I',
            TxStatus::InTransaction => b'T',
            TxStatus::Failed => b'E',
        }
    }
}

/// Which extensions the connection asked for at startup (W-1): they decide how the bytes after
/// the status byte are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RfqExtensions {
    /// `_polar_proxy_send_lsn` / `_polar_send_lsn`.
    pub lsn: bool,
    /// `_polar_proxy_send_xact` / `_polar_send_xact`.
    pub xact: bool,
}

/// The LSN slot of an RFQ (SPEC P-6 treats the three cases differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LsnField {
    /// No LSN on this RFQ: not requested, or a 5-byte-length RFQ on a connection that asked.
    Missing,
    /// An LSN of 0 was sent.
    Zero,
    /// A real WAL position.
    At(Lsn),
}

impl LsnField {
    /// The position, when the RFQ carried a non-zero one.
    pub fn lsn(self) -> Option<Lsn> {
        match self {
            LsnField::At(l) => Some(l),
            _ => None,
        }
    }
}

/// The marker byte after the LSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marker {
    /// `'x'`: splittable, none of the transaction's WAL is pending a flush.
    Splittable,
    /// `'w'`: the transaction has written WAL that is not flushed yet.
    WalPending,
}

/// Marker and raw (not yet validated) XID list.
#[doc(hidden)] // internal: the wire codec
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XactInfo<'a> {
    pub marker: Marker,
    /// The XID list exactly as sent, without its NUL. Validate with [`XidList::parse`] before use.
    pub xids: &'a [u8],
}

/// A parsed ReadyForQuery.
#[doc(hidden)] // internal: the wire codec
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfq<'a> {
    pub status: TxStatus,
    pub lsn: LsnField,
    /// `None`: no marker (not requested, or the transaction is not splittable).
    pub xact: Option<XactInfo<'a>>,
    /// Whether the body was longer than the standard single status byte.
    pub extended: bool,
}

impl<'a> Rfq<'a> {
    /// Parses an RFQ body (after the tag and length) per W-2. Length-driven: never reads past
    /// `body`; bytes after the last field the connection asked for are skipped.
    pub fn parse(body: &'a [u8], ext: RfqExtensions) -> Result<Rfq<'a>, ProtocolError> {
        let (&status, mut rest) = body
            .split_first()
            .ok_or(ProtocolError::Rfq("missing status byte"))?;
        let status =
            TxStatus::from_byte(status).ok_or(ProtocolError::Rfq("unknown status byte"))?;
        let extended = !rest.is_empty();
        let mut lsn = LsnField::Missing;
        if ext.lsn && !rest.is_empty() {
            if rest.len() < 8 {
                return Err(ProtocolError::Rfq("LSN shorter than 8 bytes"));
            }
            let mut a = [0u8; 8];
            a.copy_from_slice(&rest[..8]);
            let v = u64::from_be_bytes(a);
            lsn = if v == 0 {
                LsnField::Zero
            } else {
                LsnField::At(Lsn(v))
            };
            rest = &rest[8..];
        }
        let mut xact = None;
        if ext.xact && !rest.is_empty() {
            let marker = match rest[0] {
                b'x' => Marker::Splittable,
                b'w' => Marker::WalPending,
                _ => return Err(ProtocolError::Rfq("marker is neither 'x' nor 'w'")),
            };
            let list = &rest[1..];
            let nul = list
                .iter()
                .position(|&b| b == 0)
                .ok_or(ProtocolError::Rfq("XID list is not NUL-terminated"))?;
            xact = Some(XactInfo {
                marker,
                xids: &list[..nul],
            });
            // Anything after the NUL is for a newer server: skipped.
        }
        Ok(Rfq {
            status,
            lsn,
            xact,
            extended,
        })
    }
}

/// Longest XID list accepted (W-3 "bounded length").
#[doc(hidden)] // internal: the wire codec
pub const MAX_XID_LIST_LEN: usize = 4096;

/// Why an XID list was refused (W-3). A refused list makes the transaction unsplittable; it is
/// never placed in SQL.
#[doc(hidden)] // internal: the wire codec
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XidError {
    #[error("longer than {max} bytes ({len})")]
    TooLong { len: usize, max: usize },
    #[error("byte 0x{byte:02x} at offset {pos} is neither a digit nor a comma")]
    InvalidByte { pos: usize, byte: u8 },
    #[error("empty field")]
    EmptyField,
    #[error("fewer than two fields (command id and XID)")]
    TooFewFields,
    #[error("a field does not fit in 64 bits")]
    Overflow,
}

/// A validated XID list: `<command id>,<xid>[,<xid>…]` (digits and commas only), or empty.
#[doc(hidden)] // internal: the wire codec
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XidList<'a> {
    text: &'a str,
}

impl<'a> XidList<'a> {
    pub const EMPTY: XidList<'static> = XidList { text: "" };

    /// Validates strictly per W-3.
    pub fn parse(bytes: &'a [u8]) -> Result<XidList<'a>, XidError> {
        if bytes.is_empty() {
            return Ok(XidList { text: "" });
        }
        if bytes.len() > MAX_XID_LIST_LEN {
            return Err(XidError::TooLong {
                len: bytes.len(),
                max: MAX_XID_LIST_LEN,
            });
        }
        if let Some(pos) = bytes
            .iter()
            .position(|&b| !(b.is_ascii_digit() || b == b','))
        {
            return Err(XidError::InvalidByte {
                pos,
                byte: bytes[pos],
            });
        }
        let mut fields = 0usize;
        for field in bytes.split(|&b| b == b',') {
            if field.is_empty() {
                return Err(XidError::EmptyField);
            }
            let mut v: u64 = 0;
            for &d in field {
                v = v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(d - b'0')))
                    .ok_or(XidError::Overflow)?;
            }
            fields += 1;
        }
        if fields < 2 {
            return Err(XidError::TooFewFields);
        }
        // Only ASCII digits and commas remain: valid UTF-8.
        let text =
            std::str::from_utf8(bytes).map_err(|_| XidError::InvalidByte { pos: 0, byte: 0 })?;
        Ok(XidList { text })
    }

    pub fn as_str(&self) -> &'a str {
        self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The fields as numbers: command id, then the XIDs.
    pub fn fields(&self) -> impl Iterator<Item = u64> + 'a {
        self.text
            .split(',')
            .filter(|f| !f.is_empty())
            .map(|f| f.parse::<u64>().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: RfqExtensions = RfqExtensions {
        lsn: true,
        xact: true,
    };

    /// Test bodies live for the whole test run (leaked on purpose: tiny and test-only).
    fn body(status: u8, lsn: Option<u64>, tail: &[u8]) -> &'static [u8] {
        let mut v = vec![status];
        if let Some(l) = lsn {
            v.extend_from_slice(&l.to_be_bytes());
        }
        v.extend_from_slice(tail);
        Vec::leak(v)
    }

    #[test]
    fn w2_standard_rfq_has_missing_lsn() {
        let r = Rfq::parse(b"I", BOTH).unwrap();
        assert_eq!(r.status, TxStatus::Idle);
        assert_eq!(r.lsn, LsnField::Missing);
        assert_eq!(r.xact, None);
        assert!(!r.extended);
    }

    #[test]
    fn w2_lsn_positioned_and_zero() {
        let r = Rfq::parse(body(b'I', Some(0x40b6_64f8), b""), BOTH).unwrap();
        assert_eq!(r.lsn, LsnField::At(Lsn(0x40b6_64f8)));
        assert_eq!(r.xact, None);
        let r = Rfq::parse(body(b'T', Some(0), b""), BOTH).unwrap();
        assert_eq!(r.lsn, LsnField::Zero);
    }

    #[test]
    fn w2_marker_and_xids() {
        let r = Rfq::parse(body(b'T', Some(5), b"x1,732\0"), BOTH).unwrap();
        assert_eq!(
            r.xact,
            Some(XactInfo {
                marker: Marker::Splittable,
                xids: b"1,732"
            })
        );
        let r = Rfq::parse(body(b'T', Some(5), b"w3,733,732\0"), BOTH).unwrap();
        assert_eq!(r.xact.unwrap().marker, Marker::WalPending);
        let r = Rfq::parse(body(b'T', Some(5), b"x\0"), BOTH).unwrap();
        assert_eq!(r.xact.unwrap().xids, b"");
    }

    #[test]
    fn w2_trailing_bytes_are_skipped() {
        let r = Rfq::parse(body(b'T', Some(5), b"x1,2\0future"), BOTH).unwrap();
        assert_eq!(r.xact.unwrap().xids, b"1,2");
        // Without the xact extension, bytes after the LSN are skipped.
        let ext = RfqExtensions {
            lsn: true,
            xact: false,
        };
        let r = Rfq::parse(body(b'I', Some(9), b"zzz"), ext).unwrap();
        assert_eq!(r.lsn, LsnField::At(Lsn(9)));
        assert_eq!(r.xact, None);
        // Without any extension, an extended body is skipped whole.
        let r = Rfq::parse(body(b'I', Some(9), b""), RfqExtensions::default()).unwrap();
        assert_eq!(r.lsn, LsnField::Missing);
        assert!(r.extended);
    }

    #[test]
    fn w2_errors() {
        assert!(Rfq::parse(b"", BOTH).is_err());
        assert!(Rfq::parse(b"Q", BOTH).is_err());
        assert!(Rfq::parse(&[b'I', 0, 0, 1], BOTH).is_err());
        assert!(Rfq::parse(body(b'T', Some(1), b"q1,2\0"), BOTH).is_err());
        assert!(Rfq::parse(body(b'T', Some(1), b"x1,2"), BOTH).is_err());
    }

    #[test]
    fn w3_xid_list_validation() {
        assert_eq!(XidList::parse(b"").unwrap().as_str(), "");
        let l = XidList::parse(b"1,732").unwrap();
        assert_eq!(l.fields().collect::<Vec<_>>(), vec![1, 732]);
        assert_eq!(XidList::parse(b"3,733,732").unwrap().as_str(), "3,733,732");
        assert_eq!(
            XidList::parse(b"1,2; DROP TABLE x"),
            Err(XidError::InvalidByte { pos: 3, byte: b';' })
        );
        assert!(matches!(
            XidList::parse(b"1, 2"),
            Err(XidError::InvalidByte { .. })
        ));
        assert!(matches!(
            XidList::parse(b"-1,2"),
            Err(XidError::InvalidByte { .. })
        ));
        assert!(matches!(
            XidList::parse(b"+1,2"),
            Err(XidError::InvalidByte { .. })
        ));
        assert_eq!(XidList::parse(b"1"), Err(XidError::TooFewFields));
        assert_eq!(XidList::parse(b"1,,2"), Err(XidError::EmptyField));
        assert_eq!(XidList::parse(b"1,2,"), Err(XidError::EmptyField));
        assert_eq!(XidList::parse(b",1,2"), Err(XidError::EmptyField));
        assert_eq!(
            XidList::parse(b"1,18446744073709551616"),
            Err(XidError::Overflow)
        );
        assert!(XidList::parse(b"1,18446744073709551615").is_ok());
        let big = "1,".repeat(5 * 1024);
        assert!(matches!(
            XidList::parse(big.as_bytes()),
            Err(XidError::TooLong { .. })
        ));
    }
}
