//! Owned views of byte streams, parsed with the engine's own parsers (what they accept is what
//! the engine accepts): backend messages as [`Msg`] (incrementally, per connection, with
//! [`Decoder`]), frontend streams as messages, tags and Query texts.

use crate::api::{
    frame, AuthRequest, BackendMessage, FrontendMessage, Limits, LsnField, Marker, RfqExtensions,
    TxStatus,
};

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

    /// The non-localised severity (`V`), else the localised one (`S`).
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
    PortalSuspended,
    Notification {
        pid: i32,
        channel: String,
        payload: String,
    },
    /// The single-byte answer to an SSLRequest (`'N'`), only at the start of a stream.
    SslRefused,
    Other(u8),
}

impl Msg {
    pub fn is_rfq(&self) -> bool {
        matches!(self, Msg::ReadyForQuery { .. })
    }

    /// Messages a server may send at any time, not as the answer to anything (asynchronous).
    pub fn is_async(&self) -> bool {
        matches!(
            self,
            Msg::Notice(_) | Msg::ParameterStatus(..) | Msg::Notification { .. }
        )
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
    /// backend messages (a test's servers must never send such).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Msg> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        if self.expect_ssl_answer && !self.buf.is_empty() {
            self.expect_ssl_answer = false;
            let b = self.buf.remove(0);
            assert_eq!(b, b'N', "SSLRequest answer");
            out.push(Msg::SslRefused);
        }
        let mut used = 0;
        loop {
            let f = match frame(&self.buf[used..], &Limits::default()) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => panic!("backend framing: {e}"),
            };
            used += f.wire_len;
            out.push(decode_one(f.tag, f.body, self.ext));
        }
        self.buf.drain(..used);
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
        BackendMessage::Authentication(AuthRequest::Ok) => Msg::AuthOk,
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
        BackendMessage::PortalSuspended => Msg::PortalSuspended,
        BackendMessage::ParameterDescription { .. } => Msg::ParameterDescription,
        BackendMessage::RowDescription { .. } => Msg::RowDescription(row_description(body)),
        BackendMessage::DataRow { .. } => Msg::DataRow(data_row(body)),
        BackendMessage::NotificationResponse { .. } => notification(body),
        _ => Msg::Other(t),
    }
}

/// Cuts a NUL-terminated string at `*i`; panics on a malformed message.
fn take_cstr(b: &[u8], i: &mut usize, what: &str) -> String {
    let end = *i
        + b[*i..]
            .iter()
            .position(|&x| x == 0)
            .unwrap_or_else(|| panic!("{what}: no NUL"));
    let v = s(&b[*i..end]);
    *i = end + 1;
    v
}

fn notification(b: &[u8]) -> Msg {
    assert!(b.len() >= 4, "NotificationResponse: short");
    let pid = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let mut i = 4;
    let channel = take_cstr(b, &mut i, "NotificationResponse channel");
    let payload = take_cstr(b, &mut i, "NotificationResponse payload");
    Msg::Notification {
        pid,
        channel,
        payload,
    }
}

fn row_description(b: &[u8]) -> Vec<String> {
    let n = i16::from_be_bytes([b[0], b[1]]) as usize;
    let mut i = 2;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(take_cstr(b, &mut i, "column name"));
        i += 18;
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

/// Splits a byte stream of tagged messages into (tag, body); panics on a trailing part.
pub fn messages(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(f) = frame(bytes, &Limits::default()).expect("framing") {
        out.push((f.tag, f.body.to_vec()));
        bytes = &bytes[f.wire_len..];
    }
    assert!(bytes.is_empty(), "trailing partial message");
    out
}

/// How many whole tagged messages `bytes` starts with, and their total length.
pub fn whole_messages(bytes: &[u8]) -> (usize, usize) {
    let (mut n, mut used) = (0, 0);
    while let Ok(Some(f)) = frame(&bytes[used..], &Limits::default()) {
        n += 1;
        used += f.wire_len;
    }
    (n, used)
}

/// Tags of the messages in a byte stream, as a string (e.g. "TDDCZ").
pub fn tags(bytes: &[u8]) -> String {
    messages(bytes).iter().map(|(t, _)| *t as char).collect()
}

/// The SQL of the Query messages in a frontend byte stream.
pub fn sent_queries(bytes: &[u8]) -> Vec<String> {
    messages(bytes)
        .into_iter()
        .filter_map(|(t, b)| match FrontendMessage::parse(t, &b) {
            Ok(FrontendMessage::Query { sql }) => Some(s(sql)),
            _ => None,
        })
        .collect()
}

/// Every RFQ the client received is the standard 6-byte one (P-8): returns their statuses.
pub fn client_rfq_statuses(bytes: &[u8]) -> Vec<u8> {
    messages(bytes)
        .into_iter()
        .filter(|(t, _)| *t == b'Z')
        .map(|(_, b)| {
            assert_eq!(b.len(), 1, "an extended RFQ reached the client");
            b[0]
        })
        .collect()
}

/// Parses an RFQ body a client got (for clients that asked for LSNs).
pub fn parse_client_rfq(body: &[u8]) -> (TxStatus, Option<u64>) {
    let ext = RfqExtensions {
        lsn: true,
        xact: false,
    };
    match BackendMessage::parse(b'Z', body, ext).expect("an RFQ") {
        BackendMessage::ReadyForQuery(r) => (r.status, r.lsn.lsn().map(|l| l.0)),
        other => panic!("not an RFQ: {other:?}"),
    }
}
