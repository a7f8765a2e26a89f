//! Backend (server → client) messages that routing needs. Result rows and descriptions are kept
//! as opaque lengths: the engine forwards them by count.

use super::rfq::{Rfq, RfqExtensions};
use super::{tag, ProtocolError, Reader};

/// An authentication request (`'R'`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthRequest<'a> {
    Ok,
    KerberosV5,
    CleartextPassword,
    Md5Password {
        salt: [u8; 4],
    },
    Gss,
    GssContinue,
    Sspi,
    /// The mechanism list, NUL-separated, as sent.
    Sasl {
        mechanisms: &'a [u8],
    },
    SaslContinue,
    SaslFinal,
    Other(i32),
}

/// The fields of an ErrorResponse or NoticeResponse, validated once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorFields<'a> {
    raw: &'a [u8],
}

impl<'a> ErrorFields<'a> {
    fn parse(t: u8, body: &'a [u8]) -> Result<ErrorFields<'a>, ProtocolError> {
        let mut r = Reader::new(t, body);
        loop {
            let code = r.u8("field list is not terminated")?;
            if code == 0 {
                break;
            }
            r.cstr("field value is not NUL-terminated")?;
        }
        r.expect_end("bytes after the field list")?;
        Ok(ErrorFields { raw: body })
    }

    /// `(field code, value)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a [u8])> + 'a {
        let mut rest = self.raw;
        std::iter::from_fn(move || {
            let (&code, after) = rest.split_first()?;
            if code == 0 {
                return None;
            }
            let end = after.iter().position(|&b| b == 0)?;
            let v = &after[..end];
            rest = &after[end + 1..];
            Some((code, v))
        })
    }

    pub fn get(&self, code: u8) -> Option<&'a [u8]> {
        self.iter().find(|(c, _)| *c == code).map(|(_, v)| v)
    }

    /// The non-localized severity (`V`, PostgreSQL ≥ 9.6), else the localized one (`S`).
    pub fn severity(&self) -> Option<&'a [u8]> {
        self.get(b'V').or_else(|| self.get(b'S'))
    }

    /// SQLSTATE (`C`).
    pub fn code(&self) -> Option<&'a [u8]> {
        self.get(b'C')
    }

    pub fn message(&self) -> Option<&'a [u8]> {
        self.get(b'M')
    }

    pub fn detail(&self) -> Option<&'a [u8]> {
        self.get(b'D')
    }

    /// The server routine that raised it (`R`).
    pub fn routine(&self) -> Option<&'a [u8]> {
        self.get(b'R')
    }

    /// FATAL or PANIC: the server closes the connection after this.
    pub fn is_fatal(&self) -> bool {
        matches!(self.severity(), Some(b"FATAL") | Some(b"PANIC"))
    }
}

/// A backend message, borrowing its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendMessage<'a> {
    Authentication(AuthRequest<'a>),
    BackendKeyData { pid: i32, secret: &'a [u8] },
    ParameterStatus { name: &'a [u8], value: &'a [u8] },
    ReadyForQuery(Rfq<'a>),
    CommandComplete { tag: &'a [u8] },
    ErrorResponse(ErrorFields<'a>),
    NoticeResponse(ErrorFields<'a>),
    EmptyQueryResponse,
    RowDescription { len: usize },
    DataRow { len: usize },
    ParseComplete,
    BindComplete,
    CloseComplete,
    NoData,
    PortalSuspended,
    ParameterDescription { len: usize },
    CopyInResponse { len: usize },
    CopyOutResponse { len: usize },
    CopyBothResponse { len: usize },
    CopyData { len: usize },
    CopyDone,
    NotificationResponse { len: usize },
    FunctionCallResponse { len: usize },
    NegotiateProtocolVersion { len: usize },
}

impl<'a> BackendMessage<'a> {
    /// Parses a backend message body. `ext` says which RFQ extensions the connection requested.
    pub fn parse(
        t: u8,
        body: &'a [u8],
        ext: RfqExtensions,
    ) -> Result<BackendMessage<'a>, ProtocolError> {
        let mut r = Reader::new(t, body);
        let empty =
            |r: &Reader<'_>, m: BackendMessage<'a>| r.expect_end("unexpected payload").map(|_| m);
        let len = body.len();
        Ok(match t {
            tag::AUTHENTICATION => {
                let code = r.i32("authentication code")?;
                let a = match code {
                    0 => AuthRequest::Ok,
                    2 => AuthRequest::KerberosV5,
                    3 => AuthRequest::CleartextPassword,
                    5 => {
                        let s = r.bytes(4, "MD5 salt")?;
                        AuthRequest::Md5Password {
                            salt: [s[0], s[1], s[2], s[3]],
                        }
                    }
                    7 => AuthRequest::Gss,
                    8 => AuthRequest::GssContinue,
                    9 => AuthRequest::Sspi,
                    10 => AuthRequest::Sasl {
                        mechanisms: r.remaining(),
                    },
                    11 => AuthRequest::SaslContinue,
                    12 => AuthRequest::SaslFinal,
                    other => AuthRequest::Other(other),
                };
                BackendMessage::Authentication(a)
            }
            tag::BACKEND_KEY_DATA => {
                let pid = r.i32("process id")?;
                let secret = r.remaining();
                if secret.len() < 4 || secret.len() > 256 {
                    return Err(ProtocolError::Malformed {
                        tag: t,
                        what: "secret key must be 4 to 256 bytes",
                    });
                }
                BackendMessage::BackendKeyData { pid, secret }
            }
            tag::PARAMETER_STATUS => {
                let name = r.cstr("parameter name")?;
                let value = r.cstr("parameter value")?;
                r.expect_end("bytes after the value")?;
                BackendMessage::ParameterStatus { name, value }
            }
            tag::READY_FOR_QUERY => BackendMessage::ReadyForQuery(Rfq::parse(body, ext)?),
            tag::COMMAND_COMPLETE => {
                let tag = r.cstr("command tag")?;
                r.expect_end("bytes after the command tag")?;
                BackendMessage::CommandComplete { tag }
            }
            tag::ERROR_RESPONSE => BackendMessage::ErrorResponse(ErrorFields::parse(t, body)?),
            tag::NOTICE_RESPONSE => BackendMessage::NoticeResponse(ErrorFields::parse(t, body)?),
            tag::EMPTY_QUERY_RESPONSE => empty(&r, BackendMessage::EmptyQueryResponse)?,
            tag::ROW_DESCRIPTION => BackendMessage::RowDescription { len },
            tag::DATA_ROW => BackendMessage::DataRow { len },
            tag::PARSE_COMPLETE => empty(&r, BackendMessage::ParseComplete)?,
            tag::BIND_COMPLETE => empty(&r, BackendMessage::BindComplete)?,
            tag::CLOSE_COMPLETE => empty(&r, BackendMessage::CloseComplete)?,
            tag::NO_DATA => empty(&r, BackendMessage::NoData)?,
            tag::PORTAL_SUSPENDED => empty(&r, BackendMessage::PortalSuspended)?,
            tag::PARAMETER_DESCRIPTION => BackendMessage::ParameterDescription { len },
            tag::COPY_IN_RESPONSE => BackendMessage::CopyInResponse { len },
            tag::COPY_OUT_RESPONSE => BackendMessage::CopyOutResponse { len },
            tag::COPY_BOTH_RESPONSE => BackendMessage::CopyBothResponse { len },
            tag::COPY_DATA => BackendMessage::CopyData { len },
            tag::COPY_DONE => empty(&r, BackendMessage::CopyDone)?,
            tag::NOTIFICATION_RESPONSE => BackendMessage::NotificationResponse { len },
            tag::FUNCTION_CALL_RESPONSE => BackendMessage::FunctionCallResponse { len },
            tag::NEGOTIATE_PROTOCOL_VERSION => BackendMessage::NegotiateProtocolVersion { len },
            _ => {
                return Err(ProtocolError::UnexpectedTag {
                    tag: t,
                    side: "server",
                })
            }
        })
    }

    /// Whether routing needs this message's body (otherwise it can be streamed by count).
    pub fn needs_body(t: u8) -> bool {
        matches!(
            t,
            tag::AUTHENTICATION
                | tag::BACKEND_KEY_DATA
                | tag::PARAMETER_STATUS
                | tag::READY_FOR_QUERY
                | tag::COMMAND_COMPLETE
                | tag::ERROR_RESPONSE
                | tag::NOTICE_RESPONSE
                | tag::EMPTY_QUERY_RESPONSE
                | tag::PARSE_COMPLETE
                | tag::BIND_COMPLETE
                | tag::CLOSE_COMPLETE
                | tag::NO_DATA
                | tag::PORTAL_SUSPENDED
                | tag::COPY_DONE
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::rfq::{LsnField, TxStatus};
    use crate::protocol::Lsn;

    const NO_EXT: RfqExtensions = RfqExtensions {
        lsn: false,
        xact: false,
    };

    #[test]
    fn error_fields() {
        let body = b"SERROR\0VERROR\0C72000\0Mcanceling wait\0Dpolar_proxy_lsn_wait_timeout\0Rpolar_proxy_wait_for_lsn\0\0";
        match BackendMessage::parse(b'E', body, NO_EXT).unwrap() {
            BackendMessage::ErrorResponse(f) => {
                assert_eq!(f.severity(), Some(&b"ERROR"[..]));
                assert_eq!(f.code(), Some(&b"72000"[..]));
                assert_eq!(f.detail(), Some(&b"polar_proxy_lsn_wait_timeout"[..]));
                assert_eq!(f.routine(), Some(&b"polar_proxy_wait_for_lsn"[..]));
                assert!(!f.is_fatal());
                assert_eq!(f.iter().count(), 6);
            }
            other => panic!("{other:?}"),
        }
        let fatal = b"SFATAL\0C57P01\0Mterminating\0\0";
        match BackendMessage::parse(b'E', fatal, NO_EXT).unwrap() {
            BackendMessage::ErrorResponse(f) => assert!(f.is_fatal()),
            other => panic!("{other:?}"),
        }
        assert!(BackendMessage::parse(b'E', b"SERROR\0", NO_EXT).is_err());
        assert!(BackendMessage::parse(b'N', b"SWARNING", NO_EXT).is_err());
        assert!(BackendMessage::parse(b'N', b"\0x", NO_EXT).is_err());
    }

    #[test]
    fn simple_messages() {
        assert_eq!(
            BackendMessage::parse(b'C', b"INSERT 0 1\0", NO_EXT).unwrap(),
            BackendMessage::CommandComplete { tag: b"INSERT 0 1" }
        );
        assert_eq!(
            BackendMessage::parse(b'S', b"in_hot_standby\0on\0", NO_EXT).unwrap(),
            BackendMessage::ParameterStatus {
                name: b"in_hot_standby",
                value: b"on"
            }
        );
        assert_eq!(
            BackendMessage::parse(b'K', &[0, 0, 0, 7, 1, 2, 3, 4], NO_EXT).unwrap(),
            BackendMessage::BackendKeyData {
                pid: 7,
                secret: &[1, 2, 3, 4]
            }
        );
        assert_eq!(
            BackendMessage::parse(b'R', &[0, 0, 0, 5, 9, 8, 7, 6], NO_EXT).unwrap(),
            BackendMessage::Authentication(AuthRequest::Md5Password { salt: [9, 8, 7, 6] })
        );
        assert_eq!(
            BackendMessage::parse(b'R', b"\0\0\0\x0aSCRAM-SHA-256\0\0", NO_EXT).unwrap(),
            BackendMessage::Authentication(AuthRequest::Sasl {
                mechanisms: b"SCRAM-SHA-256\0\0"
            })
        );
        assert_eq!(
            BackendMessage::parse(b'D', &[0; 10], NO_EXT).unwrap(),
            BackendMessage::DataRow { len: 10 }
        );
        assert!(BackendMessage::parse(b'1', b"x", NO_EXT).is_err());
        assert!(BackendMessage::parse(b'#', b"", NO_EXT).is_err());
        let ext = RfqExtensions {
            lsn: true,
            xact: true,
        };
        let mut rfq = vec![b'T'];
        rfq.extend_from_slice(&7u64.to_be_bytes());
        match BackendMessage::parse(b'Z', &rfq, ext).unwrap() {
            BackendMessage::ReadyForQuery(r) => {
                assert_eq!(r.status, TxStatus::InTransaction);
                assert_eq!(r.lsn, LsnField::At(Lsn(7)));
            }
            other => panic!("{other:?}"),
        }
    }
}
