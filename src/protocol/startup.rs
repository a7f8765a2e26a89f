//! The untagged startup phase: StartupMessage, SSLRequest, GSSENCRequest, CancelRequest.

use super::{ProtocolError, Reader};

/// Protocol 3.0's version code.
pub const PROTOCOL_3_0: u32 = 196_608;
pub const SSL_REQUEST_CODE: u32 = 80_877_103;
pub const GSSENC_REQUEST_CODE: u32 = 80_877_104;
pub const CANCEL_REQUEST_CODE: u32 = 80_877_102;

/// A startup-phase packet (body as delivered by the framer: code first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartupPacket<'a> {
    Startup {
        major: u16,
        minor: u16,
        params: StartupParams<'a>,
    },
    SslRequest,
    GssEncRequest,
    /// `secret` is 4 bytes in protocol 3.0 and up to 256 in 3.2.
    Cancel {
        pid: i32,
        secret: &'a [u8],
    },
}

impl<'a> StartupPacket<'a> {
    pub fn parse(body: &'a [u8]) -> Result<StartupPacket<'a>, ProtocolError> {
        let mut r = Reader::new(0, body);
        let code = r.i32("request code")? as u32;
        match code {
            SSL_REQUEST_CODE => {
                r.expect_end("SSLRequest carries no payload")?;
                Ok(StartupPacket::SslRequest)
            }
            GSSENC_REQUEST_CODE => {
                r.expect_end("GSSENCRequest carries no payload")?;
                Ok(StartupPacket::GssEncRequest)
            }
            CANCEL_REQUEST_CODE => {
                let pid = r.i32("cancel pid")?;
                let secret = r.remaining();
                if secret.len() < 4 || secret.len() > 256 {
                    return Err(ProtocolError::Startup("cancel key must be 4 to 256 bytes"));
                }
                Ok(StartupPacket::Cancel { pid, secret })
            }
            _ => {
                let major = (code >> 16) as u16;
                let minor = (code & 0xffff) as u16;
                if major != 3 {
                    return Err(ProtocolError::UnsupportedVersion { major, minor });
                }
                let params = StartupParams::parse(r.remaining())?;
                Ok(StartupPacket::Startup {
                    major,
                    minor,
                    params,
                })
            }
        }
    }
}

/// The `name\0value\0…\0` list of a StartupMessage, validated once so iteration cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartupParams<'a> {
    raw: &'a [u8],
}

impl<'a> StartupParams<'a> {
    fn parse(raw: &'a [u8]) -> Result<StartupParams<'a>, ProtocolError> {
        // Pairs of NUL-terminated strings, then one final NUL.
        let mut r = Reader::new(0, raw);
        loop {
            let key = r
                .cstr("")
                .map_err(|_| ProtocolError::Startup("parameter list is not NUL-terminated"))?;
            if key.is_empty() {
                break;
            }
            r.cstr("")
                .map_err(|_| ProtocolError::Startup("parameter without a value"))?;
        }
        if !r.is_empty() {
            return Err(ProtocolError::Startup("bytes after the parameter list"));
        }
        Ok(StartupParams {
            raw: &raw[..raw.len() - 1],
        })
    }

    /// The parameters in the order the client sent them.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let mut rest = self.raw;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let k_end = rest.iter().position(|&b| b == 0)?;
            let key = &rest[..k_end];
            let after = &rest[k_end + 1..];
            let v_end = after.iter().position(|&b| b == 0)?;
            let value = &after[..v_end];
            rest = &after[v_end + 1..];
            Some((key, value))
        })
    }

    /// The value of `key`, when present (the last one wins, as in PostgreSQL).
    pub fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.iter()
            .filter(|(k, _)| *k == key.as_bytes())
            .last()
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(code: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = code.to_be_bytes().to_vec();
        v.extend_from_slice(rest);
        v
    }

    #[test]
    fn startup_with_params() {
        let b = body(
            PROTOCOL_3_0,
            b"user\0alice\0database\0db\0_polar_send_lsn\x001\0\0",
        );
        match StartupPacket::parse(&b).unwrap() {
            StartupPacket::Startup {
                major: 3,
                minor: 0,
                params,
            } => {
                let v: Vec<_> = params.iter().collect();
                assert_eq!(v.len(), 3);
                assert_eq!(params.get("user"), Some(&b"alice"[..]));
                assert_eq!(params.get("_polar_send_lsn"), Some(&b"1"[..]));
                assert_eq!(params.get("missing"), None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn special_requests() {
        assert_eq!(
            StartupPacket::parse(&body(SSL_REQUEST_CODE, b"")).unwrap(),
            StartupPacket::SslRequest
        );
        assert_eq!(
            StartupPacket::parse(&body(GSSENC_REQUEST_CODE, b"")).unwrap(),
            StartupPacket::GssEncRequest
        );
        let c = body(CANCEL_REQUEST_CODE, &[0, 0, 0, 42, 1, 2, 3, 4]);
        assert_eq!(
            StartupPacket::parse(&c).unwrap(),
            StartupPacket::Cancel {
                pid: 42,
                secret: &[1, 2, 3, 4]
            }
        );
    }

    #[test]
    fn malformed_startups_are_errors() {
        assert!(StartupPacket::parse(&body(PROTOCOL_3_0, b"user\0alice\0")).is_err());
        assert!(StartupPacket::parse(&body(PROTOCOL_3_0, b"user\0")).is_err());
        assert!(StartupPacket::parse(&body(PROTOCOL_3_0, b"user\0a\0\0x")).is_err());
        assert!(matches!(
            StartupPacket::parse(&body(2 << 16, b"\0")),
            Err(ProtocolError::UnsupportedVersion { major: 2, .. })
        ));
        assert!(StartupPacket::parse(&body(SSL_REQUEST_CODE, b"x")).is_err());
        assert!(StartupPacket::parse(&[0, 1]).is_err());
    }
}
