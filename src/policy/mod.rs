//! Failures on readers (SPEC §6): classify what went wrong (F-1), then decide what to do about it
//! given the configured policies and how far the statement got (F-2, F-3). Pure functions,
//! table-tested; the session carries the decision out.

use crate::config::{Config, OnReplicaError, OnReplicaLoss, OnWaitTimeout};

/// The W-5 timeout marker in an ErrorResponse/NoticeResponse DETAIL.
pub const WAIT_TIMEOUT_DETAIL: &[u8] = b"polar_proxy_lsn_wait_timeout";
/// The W-5 routine field some servers send with it.
pub const WAIT_TIMEOUT_ROUTINE: &[u8] = b"polar_proxy_wait_for_lsn";

/// F-1 failure classes, plus the cancel that is not a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// A strict wait timed out (W-5).
    WaitTimeout,
    /// The reader connection broke (host event, or a FATAL/PANIC ErrorResponse).
    ConnectionLost,
    /// Any other reader ErrorResponse; the connection is still usable.
    ReusableError,
    /// 57014 answering the client's own statement, or any 57014 on a connection the client's
    /// cancel was forwarded to: a cancel, answered as such, never retried.
    Cancel,
}

/// What an ErrorResponse from a reader looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorFacts<'a> {
    pub sqlstate: &'a [u8],
    pub fatal: bool,
    pub detail: Option<&'a [u8]>,
    pub routine: Option<&'a [u8]>,
    /// The error answered a hidden statement (before the client's statement began).
    pub in_hidden: bool,
    /// The dialect waits with a statement of its own whose timeout is 57014 (PostgreSQL 19's
    /// `WAIT FOR LSN`); such a timeout is recognised by position: it answers the hidden wait.
    pub hidden_wait_statement: bool,
    /// The host forwarded the client's CancelRequest to this connection while the session held
    /// it: a 57014 there is the client's cancel, wherever in the unit's answer it lands.
    pub cancel_forwarded: bool,
}

/// Whether a DETAIL/routine pair carries the W-5 timeout marker. Message text is never used.
pub fn is_wait_timeout_marker(detail: Option<&[u8]>, routine: Option<&[u8]>) -> bool {
    detail == Some(WAIT_TIMEOUT_DETAIL) && routine.is_none_or(|r| r == WAIT_TIMEOUT_ROUTINE)
}

/// F-1.
pub fn classify_error(e: &ErrorFacts<'_>) -> FailureClass {
    if e.fatal {
        return FailureClass::ConnectionLost;
    }
    if e.sqlstate == b"72000" && is_wait_timeout_marker(e.detail, e.routine) {
        return FailureClass::WaitTimeout;
    }
    if e.sqlstate == b"57014" {
        if e.cancel_forwarded {
            // The client asked to cancel its statement, and the engine's statements in front of
            // it are part of it for the client: cancelled, never run again elsewhere.
            return FailureClass::Cancel;
        }
        if e.in_hidden && e.hidden_wait_statement {
            return FailureClass::WaitTimeout;
        }
        if !e.in_hidden {
            return FailureClass::Cancel;
        }
    }
    FailureClass::ReusableError
}

/// How far the failed attempt got, and its context (F-3's gates).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// A RowDescription or row of the statement already reached the client.
    pub result_forwarded: bool,
    /// The failure answered a hidden statement (its error may not be forwarded as such).
    pub in_hidden: bool,
    /// The attempt was a transaction split or pre-write read.
    pub in_txn: bool,
    /// The writer generation changed since the decision.
    pub generation_changed: bool,
    /// Reader retries already made for this statement.
    pub reader_retries: u32,
}

/// What to do (F-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// Retry on another compatible reader (the host may have none: then the writer).
    RetryReader,
    /// Re-run the client's original statement on the writer.
    RetryWriter,
    /// Forward the reader's own error to the client.
    ForwardOriginal,
    /// Answer the client with an engine-built 55000 error naming the cause.
    EngineError,
    /// Close the client session.
    Disconnect,
}

/// F-2 and F-3: the configured action for the class, within the retry gates.
pub fn decide(class: FailureClass, p: &Progress, c: &Config) -> Recovery {
    // The error the client would see: its own statement's error can be forwarded as is; a
    // hidden statement's error or a lost connection needs an engine-built one.
    let error = if p.in_hidden || class == FailureClass::ConnectionLost {
        Recovery::EngineError
    } else {
        Recovery::ForwardOriginal
    };
    if class == FailureClass::Cancel {
        return Recovery::ForwardOriginal;
    }
    // F-3: never retry once a row or RowDescription reached the client.
    if p.result_forwarded {
        return error;
    }
    let retry_allowed = !(p.in_txn && p.generation_changed);
    match class {
        FailureClass::ConnectionLost => match c.on_replica_loss {
            OnReplicaLoss::ReplicaThenPrimary if !retry_allowed => error,
            OnReplicaLoss::ReplicaThenPrimary => {
                if p.reader_retries < c.reader_retry_limit {
                    Recovery::RetryReader
                } else {
                    Recovery::RetryWriter
                }
            }
            OnReplicaLoss::ReplicaThenError => {
                if retry_allowed && p.reader_retries < c.reader_retry_limit {
                    Recovery::RetryReader
                } else {
                    error
                }
            }
            OnReplicaLoss::Primary if retry_allowed => Recovery::RetryWriter,
            OnReplicaLoss::Primary | OnReplicaLoss::Error => error,
            OnReplicaLoss::Disconnect => Recovery::Disconnect,
        },
        FailureClass::WaitTimeout => match c.on_wait_timeout {
            // `warning` means best_effort was sent: a strict timeout can only come from a split
            // read (always strict), which falls back to the writer.
            OnWaitTimeout::Primary | OnWaitTimeout::Warning if retry_allowed => {
                Recovery::RetryWriter
            }
            OnWaitTimeout::Primary | OnWaitTimeout::Warning | OnWaitTimeout::Error => {
                Recovery::EngineError
            }
            OnWaitTimeout::Disconnect => Recovery::Disconnect,
        },
        FailureClass::ReusableError => match c.on_replica_error {
            OnReplicaError::Primary if retry_allowed => Recovery::RetryWriter,
            OnReplicaError::Primary | OnReplicaError::Error => error,
            OnReplicaError::Disconnect => Recovery::Disconnect,
        },
        FailureClass::Cancel => Recovery::ForwardOriginal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(sqlstate: &'static [u8]) -> ErrorFacts<'static> {
        ErrorFacts {
            sqlstate,
            fatal: false,
            detail: None,
            routine: None,
            in_hidden: false,
            hidden_wait_statement: false,
            cancel_forwarded: false,
        }
    }

    #[test]
    fn f1_classes() {
        let mut t = facts(b"72000");
        assert_eq!(
            classify_error(&t),
            FailureClass::ReusableError,
            "no marker, no timeout"
        );
        t.detail = Some(WAIT_TIMEOUT_DETAIL);
        assert_eq!(classify_error(&t), FailureClass::WaitTimeout);
        t.routine = Some(WAIT_TIMEOUT_ROUTINE);
        assert_eq!(classify_error(&t), FailureClass::WaitTimeout);
        t.routine = Some(b"user_function");
        assert_eq!(classify_error(&t), FailureClass::ReusableError);
        let mut f = facts(b"57P01");
        f.fatal = true;
        assert_eq!(classify_error(&f), FailureClass::ConnectionLost);
        assert_eq!(classify_error(&facts(b"57014")), FailureClass::Cancel);
        let mut h = facts(b"57014");
        h.in_hidden = true;
        h.hidden_wait_statement = true;
        assert_eq!(
            classify_error(&h),
            FailureClass::WaitTimeout,
            "W-5: timeout by position"
        );
        h.hidden_wait_statement = false;
        assert_eq!(classify_error(&h), FailureClass::ReusableError);
        let mut s = facts(b"42704");
        s.in_hidden = true;
        assert_eq!(classify_error(&s), FailureClass::ReusableError);
        // The client's cancel was forwarded to the connection: a 57014 in the engine's
        // statements in front of the client's is that cancel (the settings replay, the wait).
        h.cancel_forwarded = true;
        assert_eq!(classify_error(&h), FailureClass::Cancel);
        h.hidden_wait_statement = true;
        assert_eq!(classify_error(&h), FailureClass::Cancel);
        s.cancel_forwarded = true;
        assert_eq!(
            classify_error(&s),
            FailureClass::ReusableError,
            "57014 only"
        );
    }
}
