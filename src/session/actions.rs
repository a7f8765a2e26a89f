//! What the host must do, in order. Byte payloads live in one arena owned by the queue and are
//! borrowed by the host until its next input (the lifetime rule); counts of forwarded and
//! discarded bytes coalesce so a result set costs one action per input, not one per row.

use std::collections::VecDeque;
use std::ops::Range;

use crate::decision::Decision;
pub use crate::ids::ConnId;
use crate::ids::ServerId;
use crate::pool::ReaderKey;

use super::ReaderStartup;

/// One thing for the host to do. Apply actions in the order they are polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action<'a> {
    /// The client asked for encryption (SSLRequest, or GSSENCRequest when `gss`). Answer it with
    /// one byte ('S'/'G' to accept and run the handshake, 'N' to refuse); the client then sends
    /// a new startup packet (decrypted bytes if you accepted).
    ClientEncryptionRequest {
        /// GSSAPI encryption (GSSENCRequest) rather than TLS (SSLRequest).
        gss: bool,
    },
    /// The client sent a CancelRequest for the session whose writer reported this BackendKeyData.
    /// Find that session, send the cancel to the backend connection it reports as executing
    /// (`Session::executing_connection`), and close this client connection (`CloseClient`
    /// follows). A session also emits it with its own key after `Session::cancel_unplaced`
    /// took a cancel of work it held (F-1), once the bytes that place that work are queued
    /// ahead of it: handle it the same way (no `CloseClient` follows then).
    CancelRequest {
        /// The process id of the BackendKeyData the client names.
        pid: i32,
        /// Its secret key, as the client sent it.
        secret: &'a [u8],
    },
    /// Open a writer connection, send `startup` (a complete StartupMessage: the client's
    /// parameters without `_polar_*` keys, plus the writer role's W-1 keys) and report
    /// `Event::WriterConnected` or `Event::WriterConnectFailed`.
    ConnectWriter {
        /// The StartupMessage to send, length word included.
        startup: &'a [u8],
    },
    /// The routing decision of the next statement (or of a retry), for logs and stats.
    Decision(Decision),
    /// A reader connection to `server` whose key equals `key` is needed. Answer with
    /// `Event::ReaderAttached` (a pooled one, or a new one opened with `startup`) or
    /// `Event::ReaderUnavailable` — never block waiting for a handshake (P-4).
    AcquireReader {
        /// The reader chosen.
        server: ServerId,
        /// The key a pooled connection must have to serve this session (P-9).
        key: ReaderKey,
        /// The StartupMessage for a new connection, length word included.
        startup: &'a [u8],
    },
    /// Send the next `n` bytes of the client stream to backend connection `conn`.
    ForwardClient {
        /// The backend connection to send to.
        conn: ConnId,
        /// How many bytes, counted from the oldest not yet covered by an action.
        n: usize,
    },
    /// Drop the next `n` bytes of the client stream (the engine consumed or replaced them).
    DiscardClient {
        /// How many bytes, counted from the oldest not yet covered by an action.
        n: usize,
    },
    /// Send these engine-built bytes to backend connection `conn`.
    SendBackend {
        /// The backend connection to send to.
        conn: ConnId,
        /// Whole protocol messages, valid until the next input to the session.
        bytes: &'a [u8],
    },
    /// Send the next `n` bytes received from `conn` to the client.
    ForwardBackend {
        /// The backend connection the bytes came from.
        conn: ConnId,
        /// How many bytes (messages, for facts input), counted from the oldest not yet covered.
        n: usize,
    },
    /// Drop the next `n` bytes received from `conn`.
    DiscardBackend {
        /// The backend connection the bytes came from.
        conn: ConnId,
        /// How many bytes (messages, for facts input), counted from the oldest not yet covered.
        n: usize,
    },
    /// Send these engine-built bytes to the client.
    SendClient {
        /// Whole protocol messages, valid until the next input to the session.
        bytes: &'a [u8],
    },
    /// The session no longer needs reader connection `conn`: return it to the pool. When
    /// `needs_reset`, it holds an XID import: whoever uses it next must clear it first (report it
    /// with `needs_reset` in `Event::ReaderAttached`, or send `SET polar_xact_split_xids = ''`).
    ReleaseReader {
        /// The reader connection.
        conn: ConnId,
        /// It holds an XID import that its next user must clear.
        needs_reset: bool,
    },
    /// S-4: the writer connection holds session state (`pinned`), or no longer does. Hosts that
    /// multiplex writer connections must keep a pinned one bound to this client.
    PinWriter {
        /// Whether the writer connection now holds session state.
        pinned: bool,
    },
    /// Close backend connection `conn` and never reuse it.
    CloseBackend {
        /// The backend connection.
        conn: ConnId,
    },
    /// Close the client connection (after sending everything before this action).
    CloseClient,
}

/// A queued action. `AcquireReader`'s key and startup bytes are the session's cached ones
/// (`ReaderStartup`), filled in by `poll`: a `ReaderKey` here would make every record 40 bytes
/// instead of 32 (issue 20: an idle session keeps room for four).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rec {
    ClientEncryptionRequest { gss: bool },
    CancelRequest { pid: i32, secret: Range<usize> },
    ConnectWriter { startup: Range<usize> },
    Decision(Decision),
    AcquireReader { server: ServerId },
    ForwardClient { conn: ConnId, n: usize },
    DiscardClient { n: usize },
    SendBackend { conn: ConnId, bytes: Range<usize> },
    ForwardBackend { conn: ConnId, n: usize },
    DiscardBackend { conn: ConnId, n: usize },
    SendClient { bytes: Range<usize> },
    ReleaseReader { conn: ConnId, needs_reset: bool },
    PinWriter { pinned: bool },
    CloseBackend { conn: ConnId },
    CloseClient,
}

/// The pending actions of one session.
#[derive(Debug, Default)]
pub(crate) struct ActionQueue {
    recs: VecDeque<Rec>,
    arena: Vec<u8>,
    /// Records queued so far (with the last record's count, a [`TailMark`]).
    pushes: u64,
    /// While a client message streams to a backend connection, bytes the engine builds for
    /// that connection wait here: sent now they would land inside the client's message.
    held: Option<Box<Held>>,
}

#[derive(Debug)]
struct Held {
    conn: ConnId,
    bytes: Vec<u8>,
}

/// The last record as it stood: it changes when a record is queued or the last one grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TailMark {
    pushes: u64,
    n: usize,
}

impl ActionQueue {
    fn push(&mut self, r: Rec) {
        self.pushes += 1;
        self.recs.push_back(r);
    }

    /// The mark of the last record when it discards bytes received from `conn`.
    pub(super) fn discard_tail(&self, conn: ConnId) -> Option<TailMark> {
        match self.recs.back() {
            Some(Rec::DiscardBackend { conn: c, n }) if *c == conn => Some(TailMark {
                pushes: self.pushes,
                n: *n,
            }),
            _ => None,
        }
    }

    /// The last `len` bytes the last record discards of `conn` are forwarded to the client
    /// instead — when that record is still as `mark` saw it (nothing queued or coalesced since:
    /// those bytes are the end of what the host has been told so far). Returns whether they
    /// were; the host then relays them instead of receiving a copy.
    pub(super) fn forward_discarded_tail(
        &mut self,
        conn: ConnId,
        mark: TailMark,
        len: usize,
    ) -> bool {
        if len == 0 || len > mark.n || self.discard_tail(conn) != Some(mark) {
            return false;
        }
        if len == mark.n {
            if let Some(last) = self.recs.back_mut() {
                *last = Rec::ForwardBackend { conn, n: len };
            }
        } else {
            if let Some(Rec::DiscardBackend { n, .. }) = self.recs.back_mut() {
                *n -= len;
            }
            self.push(Rec::ForwardBackend { conn, n: len });
        }
        true
    }

    pub(super) fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.recs.len()
    }

    fn stash(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        start..self.arena.len()
    }

    /// Appends bytes built in place by `f` (no intermediate buffer).
    fn stash_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> Range<usize> {
        let start = self.arena.len();
        f(&mut self.arena);
        start..self.arena.len()
    }

    /// Gives back the arena's room beyond the bytes it holds now. Called once, when startup
    /// ends: the writer's StartupMessage (`ConnectWriter`) is the largest thing most sessions
    /// ever stash (256 bytes of room for a typical one), and an idle session would otherwise
    /// keep that room for good. Statements that stash bytes grow the arena again on first use
    /// and keep that (no allocation in steady state).
    pub(super) fn release_arena_room(&mut self) {
        self.arena.shrink_to_fit();
    }

    pub(super) fn client_encryption_request(&mut self, gss: bool) {
        self.push(Rec::ClientEncryptionRequest { gss });
    }

    pub(super) fn cancel_request(&mut self, pid: i32, secret: &[u8]) {
        let secret = self.stash(secret);
        self.push(Rec::CancelRequest { pid, secret });
    }

    pub(super) fn connect_writer_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let startup = self.stash_with(f);
        self.push(Rec::ConnectWriter { startup });
    }

    pub(super) fn decision(&mut self, d: Decision) {
        self.push(Rec::Decision(d));
    }

    /// The key and the startup bytes are the session's cached ones (`poll` fills them in): no
    /// copy. Queued only once that cache is set.
    pub(super) fn acquire_reader(&mut self, server: ServerId) {
        self.push(Rec::AcquireReader { server });
    }

    pub(super) fn forward_client(&mut self, conn: ConnId, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(Rec::ForwardClient { conn: c, n: m }) = self.recs.back_mut() {
            if *c == conn {
                *m += n;
                return;
            }
        }
        self.push(Rec::ForwardClient { conn, n });
    }

    pub(super) fn discard_client(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(Rec::DiscardClient { n: m }) = self.recs.back_mut() {
            *m += n;
            return;
        }
        self.push(Rec::DiscardClient { n });
    }

    pub(super) fn send_backend(&mut self, conn: ConnId, bytes: &[u8]) {
        self.send_backend_with(conn, |o| o.extend_from_slice(bytes));
    }

    pub(super) fn send_backend_with(&mut self, conn: ConnId, f: impl FnOnce(&mut Vec<u8>)) {
        if let Some(h) = self.held.as_deref_mut().filter(|h| h.conn == conn) {
            f(&mut h.bytes);
            return;
        }
        let bytes = self.stash_with(f);
        self.push(Rec::SendBackend { conn, bytes });
    }

    /// A client message is streaming to `conn` (forwarded as it arrives): engine-built bytes
    /// for `conn` are held until [`Self::release_held`].
    pub(super) fn hold_for(&mut self, conn: ConnId) {
        match self.held.as_deref() {
            Some(h) if h.conn == conn => {}
            _ => {
                self.release_held();
                self.held = Some(Box::new(Held {
                    conn,
                    bytes: Vec::new(),
                }));
            }
        }
    }

    /// The client's streamed message ended: what was held goes out, behind it.
    pub(super) fn release_held(&mut self) {
        if let Some(h) = self.held.take() {
            if !h.bytes.is_empty() {
                let bytes = self.stash(&h.bytes);
                self.push(Rec::SendBackend {
                    conn: h.conn,
                    bytes,
                });
            }
        }
    }

    pub(super) fn forward_backend(&mut self, conn: ConnId, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(Rec::ForwardBackend { conn: c, n: m }) = self.recs.back_mut() {
            if *c == conn {
                *m += n;
                return;
            }
        }
        self.push(Rec::ForwardBackend { conn, n });
    }

    pub(super) fn discard_backend(&mut self, conn: ConnId, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(Rec::DiscardBackend { conn: c, n: m }) = self.recs.back_mut() {
            if *c == conn {
                *m += n;
                return;
            }
        }
        self.push(Rec::DiscardBackend { conn, n });
    }

    /// Bytes for the client; consecutive sends merge into one.
    pub(super) fn send_client(&mut self, bytes: &[u8]) {
        self.send_client_with(|a| a.extend_from_slice(bytes));
    }

    pub(super) fn send_client_with(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let r = self.stash_with(f);
        if r.is_empty() {
            return;
        }
        if let Some(Rec::SendClient { bytes }) = self.recs.back_mut() {
            if bytes.end == r.start {
                bytes.end = r.end;
                return;
            }
        }
        self.push(Rec::SendClient { bytes: r });
    }

    pub(super) fn release_reader(&mut self, conn: ConnId, needs_reset: bool) {
        self.push(Rec::ReleaseReader { conn, needs_reset });
    }

    pub(super) fn pin_writer(&mut self, pinned: bool) {
        self.push(Rec::PinWriter { pinned });
    }

    pub(super) fn close_backend(&mut self, conn: ConnId) {
        self.push(Rec::CloseBackend { conn });
    }

    /// A closing session needs no reader: drop its requests not yet polled (the host would
    /// answer them into a closed session).
    pub(super) fn withdraw_reader_requests(&mut self) {
        self.recs
            .retain(|r| !matches!(r, Rec::AcquireReader { .. }));
    }

    pub(super) fn close_client(&mut self) {
        if !matches!(self.recs.back(), Some(Rec::CloseClient)) {
            self.push(Rec::CloseClient);
        }
    }

    /// For an input given as a parsed fact (one whole backend message), byte counts on `conn`
    /// queued since `from` become message counts: each covers exactly that one message.
    pub(super) fn counts_to_messages(&mut self, conn: ConnId, from: usize) {
        for r in self.recs.iter_mut().skip(from) {
            match r {
                Rec::ForwardBackend { conn: c, n } | Rec::DiscardBackend { conn: c, n }
                    if *c == conn =>
                {
                    *n = 1
                }
                _ => {}
            }
        }
    }

    /// The next action, borrowing the arena until the next call. When the queue runs empty the
    /// arena is reset for the next input (its capacity is kept: no allocation in steady state).
    /// The next action. `reader` is the session's cached reader key and StartupMessage, lent
    /// to an `AcquireReader` (filling it in here, not by re-matching the returned action, keeps
    /// the hot path free of a store-forwarding stall on the returned enum).
    pub(super) fn poll<'a>(&'a mut self, reader: Option<&'a ReaderStartup>) -> Option<Action<'a>> {
        let Some(rec) = self.recs.pop_front() else {
            self.arena.clear();
            return None;
        };
        let a = &self.arena;
        Some(match rec {
            Rec::ClientEncryptionRequest { gss } => Action::ClientEncryptionRequest { gss },
            Rec::CancelRequest { pid, secret } => Action::CancelRequest {
                pid,
                secret: &a[secret],
            },
            Rec::ConnectWriter { startup } => Action::ConnectWriter {
                startup: &a[startup],
            },
            Rec::Decision(d) => Action::Decision(d),
            Rec::AcquireReader { server } => match reader {
                Some(r) => Action::AcquireReader {
                    server,
                    key: r.key,
                    startup: &r.bytes,
                },
                // Not reached: `Session::acquire_reader` sets the cache before queueing.
                None => Action::AcquireReader {
                    server,
                    key: ReaderKey::default(),
                    startup: &[],
                },
            },
            Rec::ForwardClient { conn, n } => Action::ForwardClient { conn, n },
            Rec::DiscardClient { n } => Action::DiscardClient { n },
            Rec::SendBackend { conn, bytes } => Action::SendBackend {
                conn,
                bytes: &a[bytes],
            },
            Rec::ForwardBackend { conn, n } => Action::ForwardBackend { conn, n },
            Rec::DiscardBackend { conn, n } => Action::DiscardBackend { conn, n },
            Rec::SendClient { bytes } => Action::SendClient { bytes: &a[bytes] },
            Rec::ReleaseReader { conn, needs_reset } => Action::ReleaseReader { conn, needs_reset },
            Rec::PinWriter { pinned } => Action::PinWriter { pinned },
            Rec::CloseBackend { conn } => Action::CloseBackend { conn },
            Rec::CloseClient => Action::CloseClient,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p8_held_bytes_at_the_end_of_a_discard_are_relayed_while_nothing_followed() {
        let mut q = ActionQueue::default();
        q.discard_backend(2, 9);
        q.discard_backend(2, 34);
        let mark = q.discard_tail(2).expect("a discard of conn 2 is last");
        // Another connection's mark, or more than was discarded: refused.
        assert_eq!(q.discard_tail(3), None);
        assert!(!q.forward_discarded_tail(2, mark, 44));
        assert!(q.forward_discarded_tail(2, mark, 34));
        q.forward_backend(2, 20);
        assert_eq!(q.poll(None), Some(Action::DiscardBackend { conn: 2, n: 9 }));
        assert_eq!(
            q.poll(None),
            Some(Action::ForwardBackend { conn: 2, n: 54 })
        );
        assert_eq!(q.poll(None), None);

        // Anything queued or coalesced after the mark: the bytes are no longer the end.
        q.discard_backend(2, 34);
        let mark = q.discard_tail(2).expect("a discard is last");
        q.discard_backend(2, 5);
        assert!(!q.forward_discarded_tail(2, mark, 34));
        let mark = q.discard_tail(2).expect("a discard is last");
        q.send_client(b"x");
        assert!(!q.forward_discarded_tail(2, mark, 39));
        // The whole record relayed.
        let mut q = ActionQueue::default();
        q.discard_backend(2, 34);
        let mark = q.discard_tail(2).expect("a discard is last");
        assert!(q.forward_discarded_tail(2, mark, 34));
        assert_eq!(
            q.poll(None),
            Some(Action::ForwardBackend { conn: 2, n: 34 })
        );
    }

    #[test]
    fn e1_engine_bytes_wait_behind_a_streaming_client_message() {
        let mut q = ActionQueue::default();
        q.forward_client(1, 100);
        q.hold_for(1);
        // A probe built while the client's message streams to conn 1; conn 2 is not held.
        q.send_backend(1, b"probe");
        q.send_backend(2, b"other");
        q.forward_client(1, 50);
        q.send_backend_with(1, |o| o.extend_from_slice(b"+sync"));
        q.forward_client(1, 7);
        q.release_held();
        q.release_held();
        assert_eq!(
            q.poll(None),
            Some(Action::ForwardClient { conn: 1, n: 100 })
        );
        assert_eq!(
            q.poll(None),
            Some(Action::SendBackend {
                conn: 2,
                bytes: b"other"
            })
        );
        assert_eq!(q.poll(None), Some(Action::ForwardClient { conn: 1, n: 57 }));
        assert_eq!(
            q.poll(None),
            Some(Action::SendBackend {
                conn: 1,
                bytes: b"probe+sync"
            })
        );
        assert_eq!(q.poll(None), None);
        // Nothing held: sent at once.
        q.send_backend(1, b"x");
        assert_eq!(
            q.poll(None),
            Some(Action::SendBackend {
                conn: 1,
                bytes: b"x"
            })
        );
    }

    #[test]
    fn counts_coalesce_and_bytes_are_borrowed() {
        let mut q = ActionQueue::default();
        q.forward_backend(1, 10);
        q.forward_backend(1, 5);
        q.forward_backend(2, 1);
        q.send_client(b"ab");
        q.send_client(b"cd");
        q.discard_client(3);
        q.discard_client(4);
        assert_eq!(
            q.poll(None),
            Some(Action::ForwardBackend { conn: 1, n: 15 })
        );
        assert_eq!(q.poll(None), Some(Action::ForwardBackend { conn: 2, n: 1 }));
        assert_eq!(q.poll(None), Some(Action::SendClient { bytes: b"abcd" }));
        assert_eq!(q.poll(None), Some(Action::DiscardClient { n: 7 }));
        assert_eq!(q.poll(None), None);
        assert!(q.arena.is_empty());
    }
}
