//! An owned mirror of the engine's borrowed `Action`, for assertions and logs.

use crate::api::{Action, ConnId, Decision, ReaderKey, ServerId};

/// An owned copy of an action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum A {
    Encryption { gss: bool },
    Cancel { pid: i32, secret: Vec<u8> },
    ConnectWriter(Vec<u8>),
    Decision(Decision),
    Acquire { server: ServerId, key: ReaderKey },
    FwdClient { conn: ConnId, n: usize },
    DropClient(usize),
    SendBackend { conn: ConnId, bytes: Vec<u8> },
    FwdBackend { conn: ConnId, n: usize },
    DropBackend { conn: ConnId, n: usize },
    SendClient(Vec<u8>),
    Release { conn: ConnId, needs_reset: bool },
    PinWriter(bool),
    CloseBackend(ConnId),
    CloseClient,
}

impl A {
    /// The owned copy of `a`. Panics on an action this mirror does not know yet (a new kind
    /// must be added here, never mapped to something else).
    pub fn of(a: &Action<'_>) -> A {
        match *a {
            Action::ClientEncryptionRequest { gss } => A::Encryption { gss },
            Action::CancelRequest { pid, secret } => A::Cancel {
                pid,
                secret: secret.to_vec(),
            },
            Action::ConnectWriter { startup } => A::ConnectWriter(startup.to_vec()),
            Action::Decision(d) => A::Decision(d),
            Action::AcquireReader { server, key, .. } => A::Acquire { server, key },
            Action::ForwardClient { conn, n } => A::FwdClient { conn, n },
            Action::DiscardClient { n } => A::DropClient(n),
            Action::SendBackend { conn, bytes } => A::SendBackend {
                conn,
                bytes: bytes.to_vec(),
            },
            Action::ForwardBackend { conn, n } => A::FwdBackend { conn, n },
            Action::DiscardBackend { conn, n } => A::DropBackend { conn, n },
            Action::SendClient { bytes } => A::SendClient(bytes.to_vec()),
            Action::ReleaseReader { conn, needs_reset } => A::Release { conn, needs_reset },
            Action::PinWriter { pinned } => A::PinWriter(pinned),
            Action::CloseBackend { conn } => A::CloseBackend(conn),
            Action::CloseClient => A::CloseClient,
            _ => panic!("an action the mirror does not know: {a:?}"),
        }
    }
}
