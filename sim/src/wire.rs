//! Backend (server → client) message encoders: what a PostgreSQL 15 / PolarDB backend puts on
//! the wire. Built on `polarsplit::protocol::encode::message` for the framing.

use polarsplit::protocol::encode::message;
use polarsplit::protocol::rfq::{Marker, TxStatus};
use polarsplit::protocol::{tag, Lsn};

/// PostgreSQL type OIDs used in RowDescription.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const INT8: u32 = 20;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const VOID: u32 = 2278;
    pub const PG_LSN: u32 = 3220;
}

/// A result column: name and type OID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub type_oid: u32,
}

impl Column {
    pub fn new(name: &str, type_oid: u32) -> Column {
        Column {
            name: name.to_string(),
            type_oid,
        }
    }
}

pub fn auth_ok(out: &mut Vec<u8>) {
    message(out, tag::AUTHENTICATION, |o| {
        o.extend_from_slice(&0i32.to_be_bytes())
    });
}

pub fn parameter_status(out: &mut Vec<u8>, name: &str, value: &str) {
    message(out, tag::PARAMETER_STATUS, |o| {
        cstr(o, name.as_bytes());
        cstr(o, value.as_bytes());
    });
}

pub fn backend_key_data(out: &mut Vec<u8>, pid: i32, secret: u32) {
    message(out, tag::BACKEND_KEY_DATA, |o| {
        o.extend_from_slice(&pid.to_be_bytes());
        o.extend_from_slice(&secret.to_be_bytes());
    });
}

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

pub fn ready_for_query(out: &mut Vec<u8>, rfq: &RfqBody) {
    message(out, tag::READY_FOR_QUERY, |o| {
        o.push(rfq.status.byte());
        if let Some(l) = rfq.lsn {
            o.extend_from_slice(&l.0.to_be_bytes());
        }
        if let Some((m, list)) = &rfq.xact {
            o.push(match m {
                Marker::Splittable => b'x',
                Marker::WalPending => b'w',
            });
            cstr(o, list.as_bytes());
        }
    });
}

pub fn row_description(out: &mut Vec<u8>, cols: &[Column]) {
    message(out, tag::ROW_DESCRIPTION, |o| {
        o.extend_from_slice(&(cols.len() as i16).to_be_bytes());
        for c in cols {
            cstr(o, c.name.as_bytes());
            o.extend_from_slice(&0u32.to_be_bytes()); // table oid
            o.extend_from_slice(&0i16.to_be_bytes()); // attnum
            o.extend_from_slice(&c.type_oid.to_be_bytes());
            let len: i16 = match c.type_oid {
                oid::BOOL => 1,
                oid::INT4 => 4,
                oid::INT8 | oid::PG_LSN => 8,
                oid::VOID => 4,
                _ => -1,
            };
            o.extend_from_slice(&len.to_be_bytes());
            o.extend_from_slice(&(-1i32).to_be_bytes()); // typmod
            o.extend_from_slice(&0i16.to_be_bytes()); // text format
        }
    });
}

pub fn data_row(out: &mut Vec<u8>, values: &[Option<String>]) {
    message(out, tag::DATA_ROW, |o| {
        o.extend_from_slice(&(values.len() as i16).to_be_bytes());
        for v in values {
            match v {
                Some(s) => {
                    o.extend_from_slice(&(s.len() as i32).to_be_bytes());
                    o.extend_from_slice(s.as_bytes());
                }
                None => o.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
    });
}

pub fn command_complete(out: &mut Vec<u8>, tag_text: &str) {
    message(out, tag::COMMAND_COMPLETE, |o| cstr(o, tag_text.as_bytes()));
}

pub fn empty_query(out: &mut Vec<u8>) {
    message(out, tag::EMPTY_QUERY_RESPONSE, |_| {});
}

pub fn parse_complete(out: &mut Vec<u8>) {
    message(out, tag::PARSE_COMPLETE, |_| {});
}

pub fn bind_complete(out: &mut Vec<u8>) {
    message(out, tag::BIND_COMPLETE, |_| {});
}

pub fn close_complete(out: &mut Vec<u8>) {
    message(out, tag::CLOSE_COMPLETE, |_| {});
}

pub fn no_data(out: &mut Vec<u8>) {
    message(out, tag::NO_DATA, |_| {});
}

pub fn parameter_description(out: &mut Vec<u8>) {
    message(out, tag::PARAMETER_DESCRIPTION, |o| {
        o.extend_from_slice(&0i16.to_be_bytes())
    });
}

/// An ErrorResponse or NoticeResponse, field by field (`(code, value)`, in order).
pub fn fields_message(out: &mut Vec<u8>, is_notice: bool, fields: &[(u8, &str)]) {
    let t = if is_notice {
        tag::NOTICE_RESPONSE
    } else {
        tag::ERROR_RESPONSE
    };
    message(out, t, |o| {
        for (code, v) in fields {
            o.push(*code);
            cstr(o, v.as_bytes());
        }
        o.push(0);
    });
}

fn cstr(o: &mut Vec<u8>, s: &[u8]) {
    o.extend(s.iter().map(|&b| if b == 0 { b'?' } else { b }));
    o.push(0);
}
