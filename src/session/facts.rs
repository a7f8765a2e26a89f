//! The parallel input for libpq-based hosts (SPEC §0): backend messages already parsed into
//! facts instead of raw bytes. Each fact is one whole message; the resulting
//! `ForwardBackend`/`DiscardBackend` actions for that connection count messages (always 1):
//! forward or drop the message the host just reported.

use super::*;
use crate::protocol::backend::BackendMessage;
use crate::protocol::{encode, tag, LsnField, Marker};

/// One backend message, as a libpq-based host knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendFact<'a> {
    /// ReadyForQuery, with what the PolarDB extension reported (W-2).
    ReadyForQuery {
        /// The transaction status byte.
        status: TxStatus,
        /// The LSN the connection reported with it, if it asked for LSNs.
        lsn: LsnField,
        /// Marker and raw XID list, when the server sent them.
        xact: Option<(Marker, &'a [u8])>,
    },
    /// CommandComplete: a statement finished.
    CommandComplete {
        /// The command tag (`INSERT 0 1`, `SELECT 3`), without its NUL.
        tag: &'a [u8],
    },
    /// ErrorResponse fields as (field code, value) pairs.
    Error {
        /// The fields, each a field type byte (`C` for SQLSTATE, `M` for the message, …) and its value.
        fields: &'a [(u8, &'a [u8])],
    },
    /// NoticeResponse fields as (field code, value) pairs.
    Notice {
        /// The fields, each a field type byte and its value, as for `Error`.
        fields: &'a [(u8, &'a [u8])],
    },
    /// ParameterStatus: the server reports a run-time parameter's value.
    ParameterStatus {
        /// The parameter's name.
        name: &'a [u8],
        /// Its new value.
        value: &'a [u8],
    },
    /// Any other message by its type byte (rows, descriptions, COPY data…): only its kind
    /// matters to routing.
    Other {
        /// The message's type byte (`D` for DataRow, `T` for RowDescription, …).
        tag: u8,
    },
}

impl Session {
    /// Feeds one backend message given as a fact (libpq-based hosts). See the module docs for
    /// how the resulting actions count.
    pub fn recv_backend_fact(
        &mut self,
        conn: ConnId,
        fact: BackendFact<'_>,
        now_ms: u64,
    ) -> Result<(), SessionError> {
        self.check_input(now_ms)?;
        let Some(i) = self.backend_index(conn) else {
            return Err(self.fail(SessionError::UnknownConnection(conn)));
        };
        let ext = self.backend(i).ext;
        let mut bytes = Vec::new();
        match fact {
            BackendFact::ReadyForQuery { status, lsn, xact } => {
                encode::message(&mut bytes, tag::READY_FOR_QUERY, |o| {
                    o.push(status.byte());
                    if ext.lsn {
                        match lsn {
                            LsnField::Missing => return,
                            LsnField::Zero => o.extend_from_slice(&0u64.to_be_bytes()),
                            LsnField::At(l) => o.extend_from_slice(&l.0.to_be_bytes()),
                        }
                    }
                    if let (true, Some((m, xids))) = (ext.xact, xact) {
                        o.push(match m {
                            Marker::Splittable => b'x',
                            Marker::WalPending => b'w',
                        });
                        // A NUL inside the list would end it early: W-3 validation refuses
                        // what remains, never SQL.
                        o.extend(xids.iter().map(|&b| if b == 0 { b'?' } else { b }));
                        o.push(0);
                    }
                });
            }
            BackendFact::CommandComplete { tag: t } => {
                encode::message(&mut bytes, tag::COMMAND_COMPLETE, |o| {
                    o.extend(t.iter().filter(|&&b| b != 0));
                    o.push(0);
                });
            }
            BackendFact::Error { fields } | BackendFact::Notice { fields } => {
                let t = if matches!(fact, BackendFact::Error { .. }) {
                    tag::ERROR_RESPONSE
                } else {
                    tag::NOTICE_RESPONSE
                };
                encode::message(&mut bytes, t, |o| {
                    for (code, value) in fields.iter().filter(|(c, _)| *c != 0) {
                        o.push(*code);
                        o.extend(value.iter().filter(|&&b| b != 0));
                        o.push(0);
                    }
                    o.push(0);
                });
            }
            BackendFact::ParameterStatus { name, value } => {
                encode::message(&mut bytes, tag::PARAMETER_STATUS, |o| {
                    o.extend(name.iter().filter(|&&b| b != 0));
                    o.push(0);
                    o.extend(value.iter().filter(|&&b| b != 0));
                    o.push(0);
                });
            }
            BackendFact::Other { tag: t } => {
                let empty_ok = !BackendMessage::needs_body(t)
                    || matches!(
                        t,
                        tag::PARSE_COMPLETE
                            | tag::BIND_COMPLETE
                            | tag::CLOSE_COMPLETE
                            | tag::NO_DATA
                            | tag::PORTAL_SUSPENDED
                            | tag::EMPTY_QUERY_RESPONSE
                            | tag::COPY_DONE
                    );
                if !empty_ok || t == tag::READY_FOR_QUERY {
                    return Err(self.fail(SessionError::Protocol {
                        peer: "host",
                        source: ProtocolError::Malformed {
                            tag: t,
                            what: "this fact needs its fields (use its own kind)",
                        },
                    }));
                }
                encode::message(&mut bytes, t, |_| {});
            }
        }
        let from = self.out.len();
        let r = self.recv_backend_bytes(conn, &bytes);
        self.out.counts_to_messages(conn, from);
        r
    }
}
