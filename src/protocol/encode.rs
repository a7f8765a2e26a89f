//! Encoders for the messages the engine injects: a Query (the wrapped statement), a standard
//! ReadyForQuery, ErrorResponse / NoticeResponse, and a filtered StartupMessage.

use super::rfq::TxStatus;
use super::{tag, Lsn};

/// Appends one tagged message: `tag`, a length placeholder, whatever `body` writes, then patches
/// the length. Returns the message's total size.
pub fn message(out: &mut Vec<u8>, t: u8, body: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    out.push(t);
    out.extend_from_slice(&[0; 4]);
    body(out);
    let len = (out.len() - start - 1) as u32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
    out.len() - start
}

/// A simple Query message whose string is the concatenation of `parts` (one terminating NUL).
/// NUL bytes inside the parts are the caller's problem: the engine only ever passes validated
/// numbers, fixed text and the client's own query bytes (which cannot hold a NUL).
pub fn query(out: &mut Vec<u8>, parts: &[&[u8]]) -> usize {
    message(out, tag::QUERY, |o| {
        for p in parts {
            o.extend_from_slice(p);
        }
        o.push(0);
    })
}

/// A standard 6-byte ReadyForQuery.
pub fn ready_for_query(status: TxStatus) -> [u8; 6] {
    [tag::READY_FOR_QUERY, 0, 0, 0, 5, status.byte()]
}

/// A ReadyForQuery carrying an LSN, for a client that asked for LSNs itself (W-1, P-8).
pub fn ready_for_query_with_lsn(status: TxStatus, lsn: Lsn) -> [u8; 14] {
    let mut m = [0u8; 14];
    m[0] = tag::READY_FOR_QUERY;
    m[1..5].copy_from_slice(&13u32.to_be_bytes());
    m[5] = status.byte();
    m[6..14].copy_from_slice(&lsn.0.to_be_bytes());
    m
}

/// Severity of an injected error or notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Fatal,
    Warning,
    Notice,
}

impl Severity {
    fn text(self) -> &'static [u8] {
        match self {
            Severity::Error => b"ERROR",
            Severity::Fatal => b"FATAL",
            Severity::Warning => b"WARNING",
            Severity::Notice => b"NOTICE",
        }
    }
}

fn field(out: &mut Vec<u8>, code: u8, value: &[u8]) {
    out.push(code);
    // A NUL would end the field early: never let one through.
    out.extend(value.iter().map(|&b| if b == 0 { b'?' } else { b }));
    out.push(0);
}

/// An ErrorResponse (`is_notice == false`) or NoticeResponse with severity, SQLSTATE, message
/// and optional detail.
pub fn error_or_notice(
    out: &mut Vec<u8>,
    is_notice: bool,
    severity: Severity,
    sqlstate: &[u8; 5],
    msg: &[u8],
    detail: Option<&[u8]>,
) -> usize {
    response(out, is_notice, severity, sqlstate, msg, detail, None)
}

/// The fields of an ErrorResponse or NoticeResponse; `source` is the server's source file and
/// routine (`F`, `R`).
fn response(
    out: &mut Vec<u8>,
    is_notice: bool,
    severity: Severity,
    sqlstate: &[u8; 5],
    msg: &[u8],
    detail: Option<&[u8]>,
    source: Option<(&[u8], &[u8])>,
) -> usize {
    let t = if is_notice {
        tag::NOTICE_RESPONSE
    } else {
        tag::ERROR_RESPONSE
    };
    message(out, t, |o| {
        field(o, b'S', severity.text());
        field(o, b'V', severity.text());
        field(o, b'C', sqlstate);
        field(o, b'M', msg);
        if let Some(d) = detail {
            field(o, b'D', d);
        }
        if let Some((file, routine)) = source {
            field(o, b'F', file);
            field(o, b'R', routine);
        }
        o.push(0);
    })
}

/// An ErrorResponse.
pub fn error_response(
    out: &mut Vec<u8>,
    sqlstate: &[u8; 5],
    msg: &[u8],
    detail: Option<&[u8]>,
) -> usize {
    error_or_notice(out, false, Severity::Error, sqlstate, msg, detail)
}

/// An ErrorResponse the engine answers on a server's behalf, as that server would word it:
/// with the source `file` and `routine` fields PostgreSQL sends. Drivers decide by the routine
/// (pgjdbc and asyncpg prepare a statement again after 0A000 from `RevalidateCachedQuery`); one
/// without it is an error they never recover from, where the primary's is one they do.
pub fn server_error(
    out: &mut Vec<u8>,
    sqlstate: &[u8; 5],
    msg: &[u8],
    file: &[u8],
    routine: &[u8],
) -> usize {
    response(
        out,
        false,
        Severity::Error,
        sqlstate,
        msg,
        None,
        Some((file, routine)),
    )
}

/// A NoticeResponse of severity WARNING.
pub fn warning(out: &mut Vec<u8>, sqlstate: &[u8; 5], msg: &[u8], detail: Option<&[u8]>) -> usize {
    error_or_notice(out, true, Severity::Warning, sqlstate, msg, detail)
}

/// A StartupMessage (untagged) with the given parameters in order.
pub fn startup_message<'p>(
    out: &mut Vec<u8>,
    major: u16,
    minor: u16,
    params: impl IntoIterator<Item = (&'p [u8], &'p [u8])>,
) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&((u32::from(major) << 16) | u32::from(minor)).to_be_bytes());
    for (k, v) in params {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out.push(0);
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out.len() - start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::backend::BackendMessage;
    use crate::protocol::framer::frame;
    use crate::protocol::frontend::FrontendMessage;
    use crate::protocol::startup::StartupPacket;
    use crate::protocol::{Limits, RfqExtensions};

    #[test]
    fn query_round_trips() {
        let mut out = Vec::new();
        let n = query(&mut out, &[b"SET a = 1; ", b"SELECT 1"]);
        assert_eq!(n, out.len());
        let f = frame(&out, &Limits::default()).unwrap().unwrap();
        let (t, body, len) = (f.tag, f.body, f.wire_len);
        assert_eq!(len, out.len());
        assert_eq!(
            FrontendMessage::parse(t, body).unwrap(),
            FrontendMessage::Query {
                sql: b"SET a = 1; SELECT 1"
            }
        );
    }

    #[test]
    fn rfq_bytes() {
        assert_eq!(ready_for_query(TxStatus::InTransaction), *b"Z\0\0\0\x05T");
        let m = ready_for_query_with_lsn(TxStatus::Idle, Lsn(0x1122));
        let f = frame(&m, &Limits::default()).unwrap().unwrap();
        let (t, body) = (f.tag, f.body);
        let ext = RfqExtensions {
            lsn: true,
            xact: false,
        };
        match BackendMessage::parse(t, body, ext).unwrap() {
            BackendMessage::ReadyForQuery(r) => {
                assert_eq!(r.lsn.lsn(), Some(Lsn(0x1122)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_round_trips_and_nul_is_neutralised() {
        let mut out = Vec::new();
        error_response(&mut out, b"55000", b"no reader\0x", Some(b"detail"));
        let f = frame(&out, &Limits::default()).unwrap().unwrap();
        let (t, body) = (f.tag, f.body);
        match BackendMessage::parse(t, body, RfqExtensions::default()).unwrap() {
            BackendMessage::ErrorResponse(f) => {
                assert_eq!(f.code(), Some(&b"55000"[..]));
                assert_eq!(f.message(), Some(&b"no reader?x"[..]));
                assert_eq!(f.detail(), Some(&b"detail"[..]));
                assert_eq!(f.severity(), Some(&b"ERROR"[..]));
            }
            other => panic!("{other:?}"),
        }
        out.clear();
        warning(&mut out, b"01000", b"w", None);
        let f = frame(&out, &Limits::default()).unwrap().unwrap();
        let (t, body) = (f.tag, f.body);
        assert!(matches!(
            BackendMessage::parse(t, body, RfqExtensions::default()).unwrap(),
            BackendMessage::NoticeResponse(_)
        ));
    }

    #[test]
    fn startup_round_trips() {
        let mut out = Vec::new();
        startup_message(
            &mut out,
            3,
            0,
            [(&b"user"[..], &b"bob"[..]), (&b"database"[..], &b"db"[..])],
        );
        match StartupPacket::parse(&out[4..]).unwrap() {
            StartupPacket::Startup { params, .. } => {
                assert_eq!(params.get("user"), Some(&b"bob"[..]));
                assert_eq!(params.iter().count(), 2);
            }
            other => panic!("{other:?}"),
        }
    }
}
