//! Host-side helpers: frontend message encoders and a decoder of backend bytes into owned
//! messages, for tests, fake hosts and checkers. The decoder parses ReadyForQuery with
//! polarsplit's own [`Rfq`](polarsplit::protocol::Rfq) parser, so what it accepts is what the
//! engine accepts.

use polarsplit::protocol::encode;
use polarsplit::protocol::rfq::{LsnField, Marker, TxStatus};
use polarsplit::protocol::startup::{CANCEL_REQUEST_CODE, SSL_REQUEST_CODE};
use polarsplit::protocol::{frame, tag, BackendMessage, Limits, RfqExtensions};

/// A StartupMessage (protocol 3.0) with these parameters, in order.
pub fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::startup_message(
        &mut out,
        3,
        0,
        params.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
    );
    out
}

/// The startup a polarsplit host sends to a PolarDB server with the `v15` profile (W-1): LSNs
/// and transaction info requested, identity pair included.
pub fn startup_v15(user: &str, database: &str) -> Vec<u8> {
    startup(&[
        ("user", user),
        ("database", database),
        ("_polar_proxy_send_lsn", "1"),
        ("_polar_proxy_send_xact", "1"),
        ("_polar_proxy_client_host", "10.0.0.7"),
        ("_polar_proxy_client_port", "54321"),
    ])
}

/// A plain startup (profile `off`).
pub fn startup_plain(user: &str, database: &str) -> Vec<u8> {
    startup(&[("user", user), ("database", database)])
}

pub fn ssl_request() -> Vec<u8> {
    let mut v = 8u32.to_be_bytes().to_vec();
    v.extend_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    v
}

pub fn cancel_request(pid: i32, secret: u32) -> Vec<u8> {
    let mut v = 16u32.to_be_bytes().to_vec();
    v.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    v.extend_from_slice(&pid.to_be_bytes());
    v.extend_from_slice(&secret.to_be_bytes());
    v
}

/// A simple Query message.
pub fn query(sql: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::query(&mut out, &[sql.as_bytes()]);
    out
}

/// Parse (no parameter types).
pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::PARSE, |o| {
        cstr(o, name);
        cstr(o, sql);
        o.extend_from_slice(&0i16.to_be_bytes());
    });
    out
}

/// Bind with no parameters and text results.
pub fn bind(portal: &str, statement: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::BIND, |o| {
        cstr(o, portal);
        cstr(o, statement);
        o.extend_from_slice(&0i16.to_be_bytes());
        o.extend_from_slice(&0i16.to_be_bytes());
        o.extend_from_slice(&0i16.to_be_bytes());
    });
    out
}

/// Describe a portal (`portal == true`) or a prepared statement.
pub fn describe(portal: bool, name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::DESCRIBE, |o| {
        o.push(if portal { b'P' } else { b'S' });
        cstr(o, name);
    });
    out
}

pub fn execute(portal: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::EXECUTE, |o| {
        cstr(o, portal);
        o.extend_from_slice(&0i32.to_be_bytes());
    });
    out
}

pub fn sync() -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::SYNC, |_| {});
    out
}

pub fn terminate() -> Vec<u8> {
    let mut out = Vec::new();
    encode::message(&mut out, tag::TERMINATE, |_| {});
    out
}

fn cstr(o: &mut Vec<u8>, s: &str) {
    o.extend_from_slice(s.as_bytes());
    o.push(0);
}

/// The fields of an ErrorResponse / NoticeResponse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fields(pub Vec<(u8, String)>);

impl Fields {
    pub fn get(&self, code: u8) -> Option<&str> {
        self.0
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.as_str())
    }

    pub fn severity(&self) -> Option<&str> {
        self.get(b'V').or_else(|| self.get(b'S'))
    }

    pub fn code(&self) -> Option<&str> {
        self.get(b'C')
    }

    pub fn message(&self) -> Option<&str> {
        self.get(b'M')
    }

    pub fn detail(&self) -> Option<&str> {
        self.get(b'D')
    }

    pub fn routine(&self) -> Option<&str> {
        self.get(b'R')
    }
}

/// A backend message, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    AuthOk,
    /// Another authentication request (code).
    Auth(i32),
    ParameterStatus(String, String),
    BackendKeyData {
        pid: i32,
        secret: Vec<u8>,
    },
    ReadyForQuery {
        status: TxStatus,
        lsn: LsnField,
        xact: Option<(Marker, String)>,
        /// The message's length field (5 for a standard or *missing* RFQ).
        len: u32,
    },
    RowDescription(Vec<String>),
    DataRow(Vec<Option<String>>),
    CommandComplete(String),
    Error(Fields),
    Notice(Fields),
    EmptyQuery,
    ParseComplete,
    BindComplete,
    CloseComplete,
    NoData,
    ParameterDescription,
    /// The single-byte answer to an SSLRequest (`'N'`), only at the start of a stream.
    SslRefused,
    Other(u8),
}

impl Msg {
    pub fn is_rfq(&self) -> bool {
        matches!(self, Msg::ReadyForQuery { .. })
    }
}

/// An incremental decoder of one connection's backend stream.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    ext: RfqExtensions,
    expect_ssl_answer: bool,
}

impl Decoder {
    /// `ext`: what the connection asked for at startup (it decides how RFQs are read).
    pub fn new(ext: RfqExtensions) -> Decoder {
        Decoder {
            buf: Vec::new(),
            ext,
            expect_ssl_answer: false,
        }
    }

    /// The next byte is the one-byte answer to an SSLRequest.
    pub fn expect_ssl_answer(&mut self) {
        self.expect_ssl_answer = true;
    }

    /// Feeds bytes; returns every message completed. Panics on bytes that are not valid
    /// backend messages (the simulator must never send such).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Msg> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        if self.expect_ssl_answer && !self.buf.is_empty() {
            self.expect_ssl_answer = false;
            let b = self.buf.remove(0);
            assert_eq!(b, b'N', "SSLRequest answer");
            out.push(Msg::SslRefused);
        }
        loop {
            let f = match frame(&self.buf, &Limits::default()) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => panic!("backend framing: {e}"),
            };
            let n = f.wire_len;
            out.push(decode_one(f.tag, f.body, self.ext));
            self.buf.drain(..n);
        }
        out
    }

    /// Bytes of an incomplete message held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// Decodes a whole stream at once (see [`Decoder::feed`]).
pub fn decode_all(bytes: &[u8], ext: RfqExtensions) -> Vec<Msg> {
    let mut d = Decoder::new(ext);
    let v = d.feed(bytes);
    assert_eq!(d.buffered(), 0, "trailing partial message");
    v
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn decode_one(t: u8, body: &[u8], ext: RfqExtensions) -> Msg {
    let parsed = BackendMessage::parse(t, body, ext)
        .unwrap_or_else(|e| panic!("backend message '{}': {e}", char::from(t)));
    match parsed {
        BackendMessage::Authentication(polarsplit::protocol::AuthRequest::Ok) => Msg::AuthOk,
        BackendMessage::Authentication(_) => {
            Msg::Auth(i32::from_be_bytes([body[0], body[1], body[2], body[3]]))
        }
        BackendMessage::ParameterStatus { name, value } => Msg::ParameterStatus(s(name), s(value)),
        BackendMessage::BackendKeyData { pid, secret } => Msg::BackendKeyData {
            pid,
            secret: secret.to_vec(),
        },
        BackendMessage::ReadyForQuery(r) => Msg::ReadyForQuery {
            status: r.status,
            lsn: r.lsn,
            xact: r.xact.map(|x| (x.marker, s(x.xids))),
            len: body.len() as u32 + 4,
        },
        BackendMessage::CommandComplete { tag } => Msg::CommandComplete(s(tag)),
        BackendMessage::ErrorResponse(f) => {
            Msg::Error(Fields(f.iter().map(|(c, v)| (c, s(v))).collect()))
        }
        BackendMessage::NoticeResponse(f) => {
            Msg::Notice(Fields(f.iter().map(|(c, v)| (c, s(v))).collect()))
        }
        BackendMessage::EmptyQueryResponse => Msg::EmptyQuery,
        BackendMessage::ParseComplete => Msg::ParseComplete,
        BackendMessage::BindComplete => Msg::BindComplete,
        BackendMessage::CloseComplete => Msg::CloseComplete,
        BackendMessage::NoData => Msg::NoData,
        BackendMessage::ParameterDescription { .. } => Msg::ParameterDescription,
        BackendMessage::RowDescription { .. } => Msg::RowDescription(row_description(body)),
        BackendMessage::DataRow { .. } => Msg::DataRow(data_row(body)),
        _ => Msg::Other(t),
    }
}

fn row_description(b: &[u8]) -> Vec<String> {
    let n = i16::from_be_bytes([b[0], b[1]]) as usize;
    let mut i = 2;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let end = i + b[i..].iter().position(|&x| x == 0).expect("column name");
        out.push(s(&b[i..end]));
        i = end + 1 + 18;
    }
    out
}

fn data_row(b: &[u8]) -> Vec<Option<String>> {
    let n = i16::from_be_bytes([b[0], b[1]]) as usize;
    let mut i = 2;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        i += 4;
        if len < 0 {
            out.push(None);
        } else {
            let len = len as usize;
            out.push(Some(s(&b[i..i + len])));
            i += len;
        }
    }
    out
}
