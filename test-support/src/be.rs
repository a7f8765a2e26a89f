//! Backend (server → client) messages, as a PostgreSQL 15 / PolarDB backend puts them on the
//! wire, with the PolarDB RFQ extensions (W-2).
//!
//! Strings are written as given (see [`crate::fe`]); a simulated server that must never send a
//! malformed message cleans its own text first.

use crate::fe::cstr;
pub use crate::fe::msg;

/// PostgreSQL type OIDs used in RowDescription.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const INT8: u32 = 20;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const VOID: u32 = 2278;
    pub const PG_LSN: u32 = 3220;
}

/// A result column of a RowDescription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub type_oid: u32,
    pub typlen: i16,
    pub typmod: i32,
}

impl Column {
    /// A column of a known type, with that type's length and no modifier.
    pub fn new(name: &str, type_oid: u32) -> Column {
        let typlen = match type_oid {
            oid::BOOL => 1,
            oid::INT4 | oid::VOID => 4,
            oid::INT8 | oid::PG_LSN => 8,
            _ => -1,
        };
        Column {
            name: name.to_string(),
            type_oid,
            typlen,
            typmod: -1,
        }
    }

    /// A column whose type fields are all zero (routing never reads them).
    pub fn untyped(name: &str) -> Column {
        Column {
            name: name.to_string(),
            type_oid: 0,
            typlen: 0,
            typmod: 0,
        }
    }
}

/// AuthenticationOk.
pub fn auth_ok() -> Vec<u8> {
    auth(0, &[])
}

/// An Authentication request: `code` (3 cleartext, 5 MD5, 10 SASL, …) and its payload.
pub fn auth(code: i32, payload: &[u8]) -> Vec<u8> {
    let mut b = code.to_be_bytes().to_vec();
    b.extend_from_slice(payload);
    msg(b'R', &b)
}

pub fn param_status(name: &str, value: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, name.as_bytes());
    cstr(&mut b, value.as_bytes());
    msg(b'S', &b)
}

pub fn backend_key(pid: i32, secret: u32) -> Vec<u8> {
    let mut b = pid.to_be_bytes().to_vec();
    b.extend_from_slice(&secret.to_be_bytes());
    msg(b'K', &b)
}

/// A ReadyForQuery: status (`I`/`T`/`E`), then, on connections that asked for them, the
/// 8-byte LSN and the marker (`x`/`w`) with its NUL-terminated XID list (W-2).
pub fn rfq(status: u8, lsn: Option<u64>, xact: Option<(u8, &[u8])>) -> Vec<u8> {
    let mut b = vec![status];
    if let Some(l) = lsn {
        b.extend_from_slice(&l.to_be_bytes());
    }
    if let Some((m, x)) = xact {
        b.push(m);
        cstr(&mut b, x);
    }
    msg(b'Z', &b)
}

pub fn command_complete(tag: &str) -> Vec<u8> {
    let mut b = Vec::new();
    cstr(&mut b, tag.as_bytes());
    msg(b'C', &b)
}

pub fn row_description(cols: &[Column]) -> Vec<u8> {
    let mut b = (cols.len() as i16).to_be_bytes().to_vec();
    for c in cols {
        cstr(&mut b, c.name.as_bytes());
        b.extend_from_slice(&0u32.to_be_bytes()); // table oid
        b.extend_from_slice(&0i16.to_be_bytes()); // attnum
        b.extend_from_slice(&c.type_oid.to_be_bytes());
        b.extend_from_slice(&c.typlen.to_be_bytes());
        b.extend_from_slice(&c.typmod.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes()); // text format
    }
    msg(b'T', &b)
}

/// A DataRow; `None` is NULL.
pub fn data_row<V: AsRef<[u8]>>(values: &[Option<V>]) -> Vec<u8> {
    let mut b = (values.len() as i16).to_be_bytes().to_vec();
    for v in values {
        match v {
            Some(v) => {
                let v = v.as_ref();
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    msg(b'D', &b)
}

pub fn empty_query() -> Vec<u8> {
    msg(b'I', &[])
}

pub fn parse_complete() -> Vec<u8> {
    msg(b'1', &[])
}

pub fn bind_complete() -> Vec<u8> {
    msg(b'2', &[])
}

pub fn close_complete() -> Vec<u8> {
    msg(b'3', &[])
}

pub fn no_data() -> Vec<u8> {
    msg(b'n', &[])
}

pub fn portal_suspended() -> Vec<u8> {
    msg(b's', &[])
}

pub fn parameter_description(types: &[u32]) -> Vec<u8> {
    let mut b = (types.len() as i16).to_be_bytes().to_vec();
    for t in types {
        b.extend_from_slice(&t.to_be_bytes());
    }
    msg(b't', &b)
}

/// NotificationResponse (LISTEN/NOTIFY): the notifying backend's pid, channel, payload.
pub fn notification(pid: i32, channel: &str, payload: &str) -> Vec<u8> {
    let mut b = pid.to_be_bytes().to_vec();
    cstr(&mut b, channel.as_bytes());
    cstr(&mut b, payload.as_bytes());
    msg(b'A', &b)
}

/// CopyInResponse / CopyOutResponse (`tag` `G` / `H`) in text format with `cols` columns.
pub fn copy_response(tag: u8, cols: u16) -> Vec<u8> {
    let mut b = vec![0];
    b.extend_from_slice(&cols.to_be_bytes());
    for _ in 0..cols {
        b.extend_from_slice(&0i16.to_be_bytes());
    }
    msg(tag, &b)
}

pub fn copy_data(data: &[u8]) -> Vec<u8> {
    msg(b'd', data)
}

pub fn copy_done() -> Vec<u8> {
    msg(b'c', &[])
}

/// An ErrorResponse (`notice == false`) or NoticeResponse, field by field (`(code, value)`,
/// in order), with the terminating NUL.
pub fn fields(notice: bool, fields: &[(u8, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (code, v) in fields {
        b.push(*code);
        cstr(&mut b, v.as_bytes());
    }
    b.push(0);
    msg(if notice { b'N' } else { b'E' }, &b)
}

/// An ErrorResponse: severity (`S` and `V`), SQLSTATE, message, optional detail and routine.
pub fn error(
    severity: &str,
    code: &str,
    message: &str,
    detail: Option<&str>,
    routine: Option<&str>,
) -> Vec<u8> {
    let mut f = vec![
        (b'S', severity),
        (b'V', severity),
        (b'C', code),
        (b'M', message),
    ];
    f.extend(detail.map(|d| (b'D', d)));
    f.extend(routine.map(|r| (b'R', r)));
    fields(false, &f)
}

/// A NoticeResponse with SQLSTATE 01000.
pub fn notice(severity: &str, message: &str, detail: Option<&str>) -> Vec<u8> {
    let mut f = vec![
        (b'S', severity),
        (b'V', severity),
        (b'C', "01000"),
        (b'M', message),
    ];
    f.extend(detail.map(|d| (b'D', d)));
    fields(true, &f)
}

/// The `awide` strict wait-timeout error of W-5.
pub fn wait_timeout_error() -> Vec<u8> {
    error(
        "ERROR",
        "72000",
        "canceling statement due to lsn wait timeout",
        Some("polar_proxy_lsn_wait_timeout"),
        Some("polar_proxy_wait_for_lsn"),
    )
}

/// A complete one-column SELECT answer: RowDescription, one DataRow per value, CommandComplete.
pub fn select_result(rows: &[&str]) -> Vec<u8> {
    let mut b = row_description(&[Column::untyped("c0")]);
    for r in rows {
        b.extend(data_row(&[Some(r)]));
    }
    b.extend(command_complete(&format!("SELECT {}", rows.len())));
    b
}
