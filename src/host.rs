//! A reference implementation of the host's side of the byte contract, over in-memory streams.
//!
//! It does exactly what a proxy does with the byte actions: it keeps every byte it fed to the
//! session until an action covers it, forwards or drops by count, and sends engine-built bytes.
//! Tests, the simulator's fake host and Rust hosts use it; it is also the executable statement of
//! the contract: forwarded + discarded = fed, in order, per stream.

use std::collections::{BTreeMap, VecDeque};

use crate::session::{Action, ConnId};

/// The bytes of one backend connection as the host sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendStream {
    /// Received from the server, fed to the session, not yet covered by an action.
    pub pending: VecDeque<u8>,
    /// Everything sent to the server (forwarded client bytes and engine-built bytes).
    pub sent: Vec<u8>,
    /// Bytes received from the server and fed to the session.
    pub fed: u64,
    /// Bytes received from the server that were forwarded to the client.
    pub forwarded: u64,
    /// Bytes received from the server that were dropped.
    pub discarded: u64,
}

/// Host-side streams of one client session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Streams {
    /// Client bytes fed to the session, not yet covered by an action.
    pub client_pending: VecDeque<u8>,
    /// Everything delivered to the client.
    pub to_client: Vec<u8>,
    /// Bytes received from the client and fed to the session.
    pub client_fed: u64,
    /// Client bytes forwarded to a backend connection.
    pub client_forwarded: u64,
    /// Client bytes dropped.
    pub client_discarded: u64,
    /// Each backend connection's streams, by the host's connection id.
    pub backends: BTreeMap<ConnId, BackendStream>,
}

/// A byte action the streams could not carry out: the engine broke the contract.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("host contract violated: {0}")]
pub struct ContractError(pub String);

fn take(q: &mut VecDeque<u8>, n: usize, what: &str) -> Result<Vec<u8>, ContractError> {
    if q.len() < n {
        return Err(ContractError(format!(
            "{what}: asked for {n} bytes, only {} pending",
            q.len()
        )));
    }
    Ok(q.drain(..n).collect())
}

impl Streams {
    /// Empty streams: nothing fed, sent or delivered.
    pub fn new() -> Streams {
        Streams::default()
    }

    /// Records client bytes the session consumed.
    pub fn fed_client(&mut self, bytes: &[u8]) {
        self.client_pending.extend(bytes);
        self.client_fed += bytes.len() as u64;
    }

    /// Records backend bytes fed to the session.
    pub fn fed_backend(&mut self, conn: ConnId, bytes: &[u8]) {
        let b = self.backends.entry(conn).or_default();
        b.pending.extend(bytes);
        b.fed += bytes.len() as u64;
    }

    /// The streams of backend connection `conn` (empty ones when it is new).
    pub fn backend(&mut self, conn: ConnId) -> &mut BackendStream {
        self.backends.entry(conn).or_default()
    }

    /// Carries out one byte action; other actions are ignored (the caller handles them).
    pub fn apply(&mut self, action: &Action<'_>) -> Result<(), ContractError> {
        match *action {
            Action::ForwardClient { conn, n } => {
                let bytes = take(&mut self.client_pending, n, "ForwardClient")?;
                self.client_forwarded += n as u64;
                self.backend(conn).sent.extend_from_slice(&bytes);
            }
            Action::DiscardClient { n } => {
                take(&mut self.client_pending, n, "DiscardClient")?;
                self.client_discarded += n as u64;
            }
            Action::SendBackend { conn, bytes } => {
                self.backend(conn).sent.extend_from_slice(bytes);
            }
            Action::ConnectWriter { .. } => {}
            Action::ForwardBackend { conn, n } => {
                let b = self.backend(conn);
                let bytes = take(&mut b.pending, n, "ForwardBackend")?;
                b.forwarded += n as u64;
                self.to_client.extend_from_slice(&bytes);
            }
            Action::DiscardBackend { conn, n } => {
                let b = self.backend(conn);
                take(&mut b.pending, n, "DiscardBackend")?;
                b.discarded += n as u64;
            }
            Action::SendClient { bytes } => self.to_client.extend_from_slice(bytes),
            _ => {}
        }
        Ok(())
    }

    /// Whether every fed byte was covered by an action (true between messages).
    pub fn balanced(&self) -> bool {
        self.client_pending.is_empty() && self.backends.values().all(|b| b.pending.is_empty())
    }
}
