//! Actions (`polarsplit_session_poll_action`): what the host must do, one per poll, in order.
//!
//! ABI 3 layout: the kind, then one member per kind. The host allocates the struct and passes
//! the `sizeof` it was built with; the library writes `kind` and the member of that kind only —
//! never a byte past that size (see the header's top comment, GROWTH). A kind added in a later
//! 3.x gets its own member appended at the end, so a host's size also says which kinds it knows:
//! an action whose member lies beyond it is refused with `POLARSPLIT_ERR_ABI`, never delivered
//! as something else.

use std::mem::{offset_of, size_of};

use super::decision::PolarsplitDecision;
use super::handle::Growable;
use super::reader_key::PolarsplitReaderKey;
use super::status::{PolarsplitStatus, POLARSPLIT_ERR_ABI};
use crate::session::Action;

/// Action kinds (`polarsplit_action.kind`): one of `POLARSPLIT_ACTION_*`. Apply actions in the
/// order polled.
pub type PolarsplitActionKind = u32;
/// No action: written by a poll that returns `POLARSPLIT_DONE`.
pub const POLARSPLIT_ACTION_NONE: PolarsplitActionKind = 0;
/// Answer the client's encryption request (member `client_encryption_request`).
pub const POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST: PolarsplitActionKind = 1;
/// A CancelRequest arrived on this client connection (member `cancel_request`).
pub const POLARSPLIT_ACTION_CANCEL_REQUEST: PolarsplitActionKind = 2;
/// Open the writer connection (member `connect_writer`).
pub const POLARSPLIT_ACTION_CONNECT_WRITER: PolarsplitActionKind = 3;
/// Informational: a routing decision (member `decision`).
pub const POLARSPLIT_ACTION_DECISION: PolarsplitActionKind = 4;
/// A reader connection is needed (member `acquire_reader`).
pub const POLARSPLIT_ACTION_ACQUIRE_READER: PolarsplitActionKind = 5;
/// Send the next client bytes to a backend (member `forward_client`).
pub const POLARSPLIT_ACTION_FORWARD_CLIENT: PolarsplitActionKind = 6;
/// Drop the next client bytes (member `discard_client`).
pub const POLARSPLIT_ACTION_DISCARD_CLIENT: PolarsplitActionKind = 7;
/// Send engine-built bytes to a backend (member `send_backend`).
pub const POLARSPLIT_ACTION_SEND_BACKEND: PolarsplitActionKind = 8;
/// Send the next bytes of a backend to the client (member `forward_backend`).
pub const POLARSPLIT_ACTION_FORWARD_BACKEND: PolarsplitActionKind = 9;
/// Drop the next bytes of a backend (member `discard_backend`).
pub const POLARSPLIT_ACTION_DISCARD_BACKEND: PolarsplitActionKind = 10;
/// Send engine-built bytes to the client (member `send_client`).
pub const POLARSPLIT_ACTION_SEND_CLIENT: PolarsplitActionKind = 11;
/// Return a reader connection to the pool (member `release_reader`).
pub const POLARSPLIT_ACTION_RELEASE_READER: PolarsplitActionKind = 12;
/// The writer connection holds session state, or no longer does (member `pin_writer`).
pub const POLARSPLIT_ACTION_PIN_WRITER: PolarsplitActionKind = 13;
/// Close a backend connection and never reuse it (member `close_backend`).
pub const POLARSPLIT_ACTION_CLOSE_BACKEND: PolarsplitActionKind = 14;
/// Close the client connection after sending everything before this action. No member.
pub const POLARSPLIT_ACTION_CLOSE_CLIENT: PolarsplitActionKind = 15;

/// Bytes lent by the library: valid until the next non-const call on the session (the lifetime
/// rule). `ptr` is never NULL, also when `len` is 0 (then it must not be read).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitBytes {
    /// The first byte.
    pub ptr: *const u8,
    /// How many bytes.
    pub len: usize,
}

impl From<&[u8]> for PolarsplitBytes {
    fn from(b: &[u8]) -> Self {
        PolarsplitBytes {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }
}

/// CLIENT_ENCRYPTION_REQUEST: the client sent SSLRequest (or GSSENCRequest). Answer with one byte
/// sent to the client: 'S' (or 'G') to accept and run the handshake, 'N' to refuse. The client
/// then sends a new startup packet (decrypted bytes, if accepted).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitClientEncryptionRequest {
    /// True for GSSENCRequest, false for SSLRequest.
    pub gss: bool,
}

/// CANCEL_REQUEST: find the session whose writer reported this BackendKeyData
/// (`polarsplit_session_backend_key`), send the cancel to the connection it reports as executing
/// (`polarsplit_session_executing_conn`), then close this client connection (CLOSE_CLIENT follows).
/// A session also emits it with its own key once the work a cancel met held
/// (`polarsplit_session_cancel_unplaced`, SPEC F-1) runs on a connection, after the bytes that
/// placed it: handle it the same way (no CLOSE_CLIENT follows then).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitCancelRequest {
    /// The backend process id the client quoted.
    pub pid: i32,
    /// The secret key the client quoted.
    pub secret: PolarsplitBytes,
}

/// CONNECT_WRITER: open a writer connection, send `startup` on it, then report
/// `POLARSPLIT_EVENT_WRITER_CONNECTED` (or `POLARSPLIT_EVENT_WRITER_CONNECT_FAILED`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitConnectWriter {
    /// A complete StartupMessage: the client's parameters without `_polar_*` keys, plus the
    /// writer role's keys (SPEC W-1).
    pub startup: PolarsplitBytes,
}

/// ACQUIRE_READER: a reader connection to `server` whose key equals `key` is needed. Report
/// `POLARSPLIT_EVENT_READER_ATTACHED` (a pooled connection, or a new one opened with `startup`)
/// or `POLARSPLIT_EVENT_READER_UNAVAILABLE`. Never block waiting for a handshake (SPEC P-4).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitAcquireReader {
    /// The reader server.
    pub server: u32,
    /// The key a pooled connection must have (`polarsplit_reader_key_compatible`, SPEC P-9).
    pub key: PolarsplitReaderKey,
    /// The StartupMessage for a new connection.
    pub startup: PolarsplitBytes,
}

/// FORWARD_CLIENT: send the next `n` client bytes (kept since they were fed) to `conn`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitForwardClient {
    /// The backend connection (the host's id).
    pub conn: u64,
    /// How many bytes.
    pub n: usize,
}

/// DISCARD_CLIENT: drop the next `n` client bytes (the engine consumed or replaced them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitDiscardClient {
    /// How many bytes.
    pub n: usize,
}

/// SEND_BACKEND: send `bytes` (built by the engine) to `conn`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitSendBackend {
    /// The backend connection.
    pub conn: u64,
    /// What to send.
    pub bytes: PolarsplitBytes,
}

/// FORWARD_BACKEND: send the next `n` bytes received from `conn` to the client. For facts input
/// (`polarsplit_session_recv_backend_fact`) `n` is 1: forward the message just reported.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitForwardBackend {
    /// The backend connection.
    pub conn: u64,
    /// How many bytes (messages, for facts input).
    pub n: usize,
}

/// DISCARD_BACKEND: drop the next `n` bytes received from `conn`. For facts input `n` is 1.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitDiscardBackend {
    /// The backend connection.
    pub conn: u64,
    /// How many bytes (messages, for facts input).
    pub n: usize,
}

/// SEND_CLIENT: send `bytes` (built by the engine) to the client.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitSendClient {
    /// What to send.
    pub bytes: PolarsplitBytes,
}

/// RELEASE_READER: the session no longer needs reader connection `conn`: return it to the pool.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitReleaseReader {
    /// The reader connection.
    pub conn: u64,
    /// It holds an XID import: whoever uses it next must clear it first (report it with
    /// `POLARSPLIT_EVENT_FLAG_NEEDS_RESET`, or send `SET polar_xact_split_xids = ''`).
    pub needs_reset: bool,
}

/// PIN_WRITER: SPEC S-4 session state lives on the writer connection (`pinned`), or no longer
/// does. Hosts that multiplex writer connections keep a pinned one bound to this client.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitPinWriter {
    /// Whether the writer connection must stay bound to this client.
    pub pinned: bool,
}

/// CLOSE_BACKEND: close backend connection `conn` and never reuse it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitCloseBackend {
    /// The backend connection.
    pub conn: u64,
}

/// One action. The host allocates it and passes `sizeof(polarsplit_action)` to
/// `polarsplit_session_poll_action`, which writes `kind` and the member named after the kind —
/// no other member (do not read them) and never past the size the host passed. Members are
/// frozen; a kind added later appends its own member at the end.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitAction {
    /// What to do (`POLARSPLIT_ACTION_*`); selects the valid member.
    pub kind: PolarsplitActionKind,
    /// CLIENT_ENCRYPTION_REQUEST.
    pub client_encryption_request: PolarsplitClientEncryptionRequest,
    /// CANCEL_REQUEST.
    pub cancel_request: PolarsplitCancelRequest,
    /// CONNECT_WRITER.
    pub connect_writer: PolarsplitConnectWriter,
    /// DECISION.
    pub decision: PolarsplitDecision,
    /// ACQUIRE_READER.
    pub acquire_reader: PolarsplitAcquireReader,
    /// FORWARD_CLIENT.
    pub forward_client: PolarsplitForwardClient,
    /// DISCARD_CLIENT.
    pub discard_client: PolarsplitDiscardClient,
    /// SEND_BACKEND.
    pub send_backend: PolarsplitSendBackend,
    /// FORWARD_BACKEND.
    pub forward_backend: PolarsplitForwardBackend,
    /// DISCARD_BACKEND.
    pub discard_backend: PolarsplitDiscardBackend,
    /// SEND_CLIENT.
    pub send_client: PolarsplitSendClient,
    /// RELEASE_READER.
    pub release_reader: PolarsplitReleaseReader,
    /// PIN_WRITER.
    pub pin_writer: PolarsplitPinWriter,
    /// CLOSE_BACKEND.
    pub close_backend: PolarsplitCloseBackend,
}

// SAFETY: repr(C) integers, bools and raw pointers: all-zero is valid.
unsafe impl Growable for PolarsplitAction {
    /// ABI 3.0: every kind up to CLOSE_CLIENT. When a member is appended, this stays: set it to
    /// `offset_of!(PolarsplitAction, <first appended member>)`.
    const BASE_SIZE: usize = size_of::<PolarsplitAction>();
}

/// Writes `kind` and its member at `offset` into the host's action of `size` bytes, or refuses
/// with `POLARSPLIT_ERR_ABI` (writing nothing) when the member lies beyond `size`.
///
/// # Safety
/// `out` must point to `size` writable bytes; `offset` must be the offset of a member of type `M`.
unsafe fn emit<M: Copy>(
    out: *mut PolarsplitAction,
    size: usize,
    kind: PolarsplitActionKind,
    offset: usize,
    member: M,
) -> Result<(), PolarsplitStatus> {
    if offset + size_of::<M>() > size || size_of::<PolarsplitActionKind>() > size {
        return Err(POLARSPLIT_ERR_ABI);
    }
    // SAFETY: both writes lie within the `size` writable bytes (checked above); `offset` is the
    // member's offset in the repr(C) struct, so the member write is aligned like the struct.
    unsafe {
        out.cast::<PolarsplitActionKind>().write(kind);
        out.cast::<u8>().add(offset).cast::<M>().write(member);
    }
    Ok(())
}

/// Writes `kind` alone (a kind without a member).
///
/// # Safety
/// `out` must point to `size >= BASE_SIZE` writable bytes.
unsafe fn emit_kind(out: *mut PolarsplitAction, kind: PolarsplitActionKind) {
    // SAFETY: `kind` is the first field, within any size the caller checked.
    unsafe { out.cast::<PolarsplitActionKind>().write(kind) };
}

macro_rules! put {
    ($out:expr, $size:expr, $kind:expr, $member:ident, $value:expr) => {
        // SAFETY: `$out` holds `$size` writable bytes (checked by the caller); the offset is
        // that of `$member`, whose type is the value's.
        unsafe {
            emit(
                $out,
                $size,
                $kind,
                offset_of!(PolarsplitAction, $member),
                $value,
            )
        }
    };
}

/// Writes one Rust action into the host's struct. Exhaustive over `Action`: a new action of the
/// Rust API fails to compile here until it has a kind and a member (appended at the end).
///
/// # Safety
/// `out` must point to `size >= PolarsplitAction::BASE_SIZE` writable bytes.
pub(crate) unsafe fn write_action(
    out: *mut PolarsplitAction,
    size: usize,
    action: Action<'_>,
) -> Result<(), PolarsplitStatus> {
    match action {
        Action::ClientEncryptionRequest { gss } => put!(
            out,
            size,
            POLARSPLIT_ACTION_CLIENT_ENCRYPTION_REQUEST,
            client_encryption_request,
            PolarsplitClientEncryptionRequest { gss }
        ),
        Action::CancelRequest { pid, secret } => put!(
            out,
            size,
            POLARSPLIT_ACTION_CANCEL_REQUEST,
            cancel_request,
            PolarsplitCancelRequest {
                pid,
                secret: secret.into()
            }
        ),
        Action::ConnectWriter { startup } => put!(
            out,
            size,
            POLARSPLIT_ACTION_CONNECT_WRITER,
            connect_writer,
            PolarsplitConnectWriter {
                startup: startup.into()
            }
        ),
        Action::Decision(d) => put!(
            out,
            size,
            POLARSPLIT_ACTION_DECISION,
            decision,
            PolarsplitDecision::from(d)
        ),
        Action::AcquireReader {
            server,
            key,
            startup,
        } => put!(
            out,
            size,
            POLARSPLIT_ACTION_ACQUIRE_READER,
            acquire_reader,
            PolarsplitAcquireReader {
                server,
                key: key.into(),
                startup: startup.into()
            }
        ),
        Action::ForwardClient { conn, n } => put!(
            out,
            size,
            POLARSPLIT_ACTION_FORWARD_CLIENT,
            forward_client,
            PolarsplitForwardClient { conn, n }
        ),
        Action::DiscardClient { n } => put!(
            out,
            size,
            POLARSPLIT_ACTION_DISCARD_CLIENT,
            discard_client,
            PolarsplitDiscardClient { n }
        ),
        Action::SendBackend { conn, bytes } => put!(
            out,
            size,
            POLARSPLIT_ACTION_SEND_BACKEND,
            send_backend,
            PolarsplitSendBackend {
                conn,
                bytes: bytes.into()
            }
        ),
        Action::ForwardBackend { conn, n } => put!(
            out,
            size,
            POLARSPLIT_ACTION_FORWARD_BACKEND,
            forward_backend,
            PolarsplitForwardBackend { conn, n }
        ),
        Action::DiscardBackend { conn, n } => put!(
            out,
            size,
            POLARSPLIT_ACTION_DISCARD_BACKEND,
            discard_backend,
            PolarsplitDiscardBackend { conn, n }
        ),
        Action::SendClient { bytes } => put!(
            out,
            size,
            POLARSPLIT_ACTION_SEND_CLIENT,
            send_client,
            PolarsplitSendClient {
                bytes: bytes.into()
            }
        ),
        Action::ReleaseReader { conn, needs_reset } => put!(
            out,
            size,
            POLARSPLIT_ACTION_RELEASE_READER,
            release_reader,
            PolarsplitReleaseReader { conn, needs_reset }
        ),
        Action::PinWriter { pinned } => put!(
            out,
            size,
            POLARSPLIT_ACTION_PIN_WRITER,
            pin_writer,
            PolarsplitPinWriter { pinned }
        ),
        Action::CloseBackend { conn } => put!(
            out,
            size,
            POLARSPLIT_ACTION_CLOSE_BACKEND,
            close_backend,
            PolarsplitCloseBackend { conn }
        ),
        Action::CloseClient => {
            // SAFETY: the caller checked `size >= BASE_SIZE`.
            unsafe { emit_kind(out, POLARSPLIT_ACTION_CLOSE_CLIENT) };
            Ok(())
        }
    }
}

/// Writes the "no action" kind of a poll that returns DONE.
///
/// # Safety
/// As [`write_action`].
pub(crate) unsafe fn write_none(out: *mut PolarsplitAction) {
    // SAFETY: as documented.
    unsafe { emit_kind(out, POLARSPLIT_ACTION_NONE) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::ReaderKey;

    /// Host memory for an action, aligned like one, with room to spare.
    #[repr(C, align(16))]
    struct HostMemory([u8; size_of::<PolarsplitAction>() + 64]);

    impl HostMemory {
        fn filled(b: u8) -> Box<HostMemory> {
            Box::new(HostMemory([b; size_of::<PolarsplitAction>() + 64]))
        }
        fn action(&mut self) -> *mut PolarsplitAction {
            self.0.as_mut_ptr().cast()
        }
    }

    #[test]
    fn abi_3_0_action_size_is_the_whole_struct() {
        // A member appended in a later 3.x must not raise the base: hosts built for 3.0 pass
        // this size. Set BASE_SIZE to the first appended member's offset when that happens.
        assert_eq!(PolarsplitAction::BASE_SIZE, size_of::<PolarsplitAction>());
        assert_eq!(offset_of!(PolarsplitAction, kind), 0);
    }

    #[test]
    fn each_kind_writes_only_its_member_and_the_kind() {
        let key = ReaderKey {
            profile_generation: 1,
            auth_hash: 2,
            startup_identity_hash: 3,
            startup_options_hash: 4,
        };
        let startup = [1u8, 2, 3];
        let actions = [
            Action::AcquireReader {
                server: 9,
                key,
                startup: &startup,
            },
            Action::ForwardClient { conn: 5, n: 6 },
            Action::CloseClient,
        ];
        for action in actions {
            let mut mem = HostMemory::filled(0xA5);
            let out = mem.action();
            unsafe { write_action(out, size_of::<PolarsplitAction>(), action) }.unwrap();
            let buf = &mem.0;
            let (range, kind) = match action {
                Action::AcquireReader { .. } => (
                    offset_of!(PolarsplitAction, acquire_reader)
                        ..offset_of!(PolarsplitAction, acquire_reader)
                            + size_of::<PolarsplitAcquireReader>(),
                    POLARSPLIT_ACTION_ACQUIRE_READER,
                ),
                Action::ForwardClient { .. } => (
                    offset_of!(PolarsplitAction, forward_client)
                        ..offset_of!(PolarsplitAction, forward_client)
                            + size_of::<PolarsplitForwardClient>(),
                    POLARSPLIT_ACTION_FORWARD_CLIENT,
                ),
                _ => (0..0, POLARSPLIT_ACTION_CLOSE_CLIENT),
            };
            assert_eq!(&buf[..4], &kind.to_ne_bytes());
            for (i, b) in buf.iter().enumerate().skip(4) {
                if !range.contains(&i) {
                    assert_eq!(
                        *b, 0xA5,
                        "{action:?}: byte {i} outside its member was written"
                    );
                }
            }
        }
        let mut mem = HostMemory::filled(0);
        let out = mem.action();
        unsafe {
            write_action(
                out,
                size_of::<PolarsplitAction>(),
                Action::AcquireReader {
                    server: 9,
                    key,
                    startup: &startup,
                },
            )
        }
        .unwrap();
        let got = unsafe { out.read() }.acquire_reader;
        assert_eq!(got.server, 9);
        assert_eq!(ReaderKey::from(got.key), key);
        assert_eq!((got.startup.ptr, got.startup.len), (startup.as_ptr(), 3));
    }

    #[test]
    fn a_member_beyond_the_hosts_size_is_refused_and_nothing_is_written() {
        // A kind appended after the host was built: its member lies past the host's size.
        let mut mem = HostMemory::filled(0x5A);
        let out = mem.action();
        let offset = 48;
        let r = unsafe { emit(out, offset + 8, 99, offset, [1u64, 2u64]) };
        assert_eq!(r, Err(POLARSPLIT_ERR_ABI));
        assert!(mem.0.iter().all(|b| *b == 0x5A));
        let r = unsafe { emit(out, offset + 16, 99, offset, [1u64, 2u64]) };
        assert_eq!(r, Ok(()));
        assert!(mem.0[4..offset].iter().all(|b| *b == 0x5A));
        assert!(mem.0[offset + 16..].iter().all(|b| *b == 0x5A));
    }
}
