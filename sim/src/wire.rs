//! What the simulated backends put on the wire: the shared backend builders
//! (`polarsplit-test-support`'s `be`), plus the typed RFQ of W-2 and error/notice fields cleaned
//! so that a simulated server never sends a malformed message.

use polarsplit::Lsn;
use polarsplit::{Marker, TxStatus};

pub(crate) use polarsplit_test_support::be::{self, oid, Column};

/// What the bytes after the RFQ status say (W-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RfqBody {
    pub status: TxStatus,
    /// `None`: no LSN slot (not requested, or a *missing* 5-byte RFQ).
    pub lsn: Option<Lsn>,
    /// Marker and XID list, when the connection asked for transaction info and the transaction
    /// reports one.
    pub xact: Option<(Marker, String)>,
}

pub fn ready_for_query(rfq: &RfqBody) -> Vec<u8> {
    let xact = rfq.xact.as_ref().map(|(m, list)| {
        let m = match m {
            Marker::Splittable => b'x',
            Marker::WalPending => b'w',
        };
        (m, list.as_bytes())
    });
    be::rfq(rfq.status.byte(), rfq.lsn.map(|l| l.0), xact)
}

/// An ErrorResponse or NoticeResponse, field by field; a NUL inside a value becomes `?`.
pub fn fields_message(is_notice: bool, fields: &[(u8, &str)]) -> Vec<u8> {
    let clean: Vec<(u8, String)> = fields
        .iter()
        .map(|(c, v)| (*c, v.replace('\0', "?")))
        .collect();
    let f: Vec<(u8, &str)> = clean.iter().map(|(c, v)| (*c, v.as_str())).collect();
    be::fields(is_notice, &f)
}
