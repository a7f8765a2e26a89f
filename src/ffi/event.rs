//! Events the host reports about backend connections (`polarsplit_session_on_backend_event`).

use super::status::{PolarsplitStatus, POLARSPLIT_ERR_INVALID_ARGUMENT};
use crate::session::Event;

/// Event kinds for `polarsplit_session_on_backend_event`: one of `POLARSPLIT_EVENT_*`.
pub type PolarsplitEventKind = u32;
/// The writer connection of CONNECT_WRITER is open and its startup packet sent (`conn`: its id).
pub const POLARSPLIT_EVENT_WRITER_CONNECTED: PolarsplitEventKind = 1;
/// The writer connection of CONNECT_WRITER could not be opened.
pub const POLARSPLIT_EVENT_WRITER_CONNECT_FAILED: PolarsplitEventKind = 2;
/// A reader connection `conn` to `server` for ACQUIRE_READER (flags FRESH, NEEDS_RESET).
pub const POLARSPLIT_EVENT_READER_ATTACHED: PolarsplitEventKind = 3;
/// No reader connection can be had now for ACQUIRE_READER (flag NO_CREDENTIALS).
pub const POLARSPLIT_EVENT_READER_UNAVAILABLE: PolarsplitEventKind = 4;
/// Connection `conn` broke.
pub const POLARSPLIT_EVENT_CONNECTION_LOST: PolarsplitEventKind = 5;
/// The reader connection ACQUIRE_READER asked for could not be opened: refused, failed, timed
/// out, or refused with SQLSTATE 57P03 (flag STARTING_UP). The writer answers the read; the
/// reader has an outage (R-1a) and a failure toward its hold-out (R-1b). An authentication
/// failure is READER_UNAVAILABLE with NO_CREDENTIALS instead.
pub const POLARSPLIT_EVENT_READER_CONNECT_FAILED: PolarsplitEventKind = 6;

/// READER_ATTACHED: opened for this request (startup-default settings).
pub const POLARSPLIT_EVENT_FLAG_FRESH: u32 = 1;
/// READER_ATTACHED: the connection still holds an XID import.
pub const POLARSPLIT_EVENT_FLAG_NEEDS_RESET: u32 = 2;
/// READER_UNAVAILABLE: this user cannot log in on the readers at all.
pub const POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS: u32 = 4;
/// READER_CONNECT_FAILED: the standby refused with 57P03 (it is starting up).
pub const POLARSPLIT_EVENT_FLAG_STARTING_UP: u32 = 8;

const ALL_FLAGS: u32 = POLARSPLIT_EVENT_FLAG_FRESH
    | POLARSPLIT_EVENT_FLAG_NEEDS_RESET
    | POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS
    | POLARSPLIT_EVENT_FLAG_STARTING_UP;

/// The Rust event for a C kind, server and flags. An unknown kind or flag bit is
/// `POLARSPLIT_ERR_INVALID_ARGUMENT`.
pub(crate) fn event_from_c(
    kind: PolarsplitEventKind,
    server: u32,
    flags: u32,
) -> Result<Event, PolarsplitStatus> {
    if flags & !ALL_FLAGS != 0 {
        return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    let flag = |f: u32| flags & f != 0;
    Ok(match kind {
        POLARSPLIT_EVENT_WRITER_CONNECTED => Event::WriterConnected,
        POLARSPLIT_EVENT_WRITER_CONNECT_FAILED => Event::WriterConnectFailed,
        POLARSPLIT_EVENT_READER_ATTACHED => Event::ReaderAttached {
            server,
            fresh: flag(POLARSPLIT_EVENT_FLAG_FRESH),
            needs_reset: flag(POLARSPLIT_EVENT_FLAG_NEEDS_RESET),
        },
        POLARSPLIT_EVENT_READER_UNAVAILABLE => Event::ReaderUnavailable {
            no_credentials: flag(POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS),
        },
        POLARSPLIT_EVENT_CONNECTION_LOST => Event::ConnectionLost,
        POLARSPLIT_EVENT_READER_CONNECT_FAILED => Event::ReaderConnectFailed {
            starting_up: flag(POLARSPLIT_EVENT_FLAG_STARTING_UP),
        },
        _ => return Err(POLARSPLIT_ERR_INVALID_ARGUMENT),
    })
}

/// The C kind of a Rust event. Exhaustive: a new event of the Rust API fails to compile here
/// until it has a kind (and `event_from_c` builds it; the test below checks the round trip).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn event_kind(e: &Event) -> PolarsplitEventKind {
    match e {
        Event::WriterConnected => POLARSPLIT_EVENT_WRITER_CONNECTED,
        Event::WriterConnectFailed => POLARSPLIT_EVENT_WRITER_CONNECT_FAILED,
        Event::ReaderAttached { .. } => POLARSPLIT_EVENT_READER_ATTACHED,
        Event::ReaderUnavailable { .. } => POLARSPLIT_EVENT_READER_UNAVAILABLE,
        Event::ConnectionLost => POLARSPLIT_EVENT_CONNECTION_LOST,
        Event::ReaderConnectFailed { .. } => POLARSPLIT_EVENT_READER_CONNECT_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_round_trips_through_its_c_kind_and_flags() {
        let all = [
            Event::WriterConnected,
            Event::WriterConnectFailed,
            Event::ReaderAttached {
                server: 7,
                fresh: true,
                needs_reset: false,
            },
            Event::ReaderAttached {
                server: 7,
                fresh: false,
                needs_reset: true,
            },
            Event::ReaderUnavailable {
                no_credentials: true,
            },
            Event::ReaderUnavailable {
                no_credentials: false,
            },
            Event::ConnectionLost,
            Event::ReaderConnectFailed { starting_up: true },
            Event::ReaderConnectFailed { starting_up: false },
        ];
        for e in all {
            let (server, flags) = match e {
                Event::ReaderAttached {
                    server,
                    fresh,
                    needs_reset,
                } => (
                    server,
                    (u32::from(fresh) * POLARSPLIT_EVENT_FLAG_FRESH)
                        | (u32::from(needs_reset) * POLARSPLIT_EVENT_FLAG_NEEDS_RESET),
                ),
                Event::ReaderUnavailable { no_credentials } => (
                    0,
                    u32::from(no_credentials) * POLARSPLIT_EVENT_FLAG_NO_CREDENTIALS,
                ),
                Event::ReaderConnectFailed { starting_up } => (
                    0,
                    u32::from(starting_up) * POLARSPLIT_EVENT_FLAG_STARTING_UP,
                ),
                _ => (0, 0),
            };
            assert_eq!(event_from_c(event_kind(&e), server, flags), Ok(e));
        }
        assert_eq!(event_from_c(0, 0, 0), Err(POLARSPLIT_ERR_INVALID_ARGUMENT));
        assert_eq!(event_from_c(1, 0, 16), Err(POLARSPLIT_ERR_INVALID_ARGUMENT));
    }
}
