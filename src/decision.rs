//! Outcomes and reason codes (SPEC P-1): every decision says where a statement runs and why.
//! Numbers are part of the C ABI: never reuse one.

use crate::ids::ServerId;
use crate::protocol::Lsn;

/// SPEC P-1 outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Outcome {
    /// The engine does not decide (mode `off`): the host routes as it normally would.
    Passthrough = 0,
    /// The writer runs it: it is not a replica-safe read, or no reader may serve it now.
    ForcePrimary = 1,
    /// A reader; the wait statements are present only when needed (`Decision::wait`).
    ReplicaWithWait = 2,
    /// A reader inside an open transaction, with the transaction's XIDs imported.
    ReplicaTxnSplit = 3,
    /// The engine answers the client with an error; nothing runs.
    Reject = 4,
}

impl Outcome {
    /// Every outcome, in number order (the C ABI's `POLARSPLIT_OUTCOME_*` values).
    pub const ALL: [Outcome; 5] = [
        Outcome::Passthrough,
        Outcome::ForcePrimary,
        Outcome::ReplicaWithWait,
        Outcome::ReplicaTxnSplit,
        Outcome::Reject,
    ];

    /// The outcome's stable upper-case name, as logs and the C header spell it.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Passthrough => "PASSTHROUGH",
            Outcome::ForcePrimary => "FORCE_PRIMARY",
            Outcome::ReplicaWithWait => "REPLICA_WITH_WAIT",
            Outcome::ReplicaTxnSplit => "REPLICA_TXN_SPLIT",
            Outcome::Reject => "REJECT",
        }
    }

    /// The outcome numbered `v`, or `None` for a number that names none.
    pub fn from_u8(v: u8) -> Option<Outcome> {
        Outcome::ALL.get(v as usize).copied()
    }

    /// Whether the statement runs on a reader (`ReplicaWithWait` or `ReplicaTxnSplit`).
    pub fn is_reader(self) -> bool {
        matches!(self, Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit)
    }
}

macro_rules! reasons {
    ($($variant:ident = $num:literal, $name:literal, $doc:literal;)+) => {
        /// Why a decision was taken. Stable numbers (C ABI) and names (logs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        #[non_exhaustive]
        pub enum Reason {
            $(#[doc = $doc] $variant = $num,)+
        }

        impl Reason {
            /// Every reason, in declaration order (not number order: numbers are grouped by SPEC step).
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)+];

            /// The reason's stable upper-case name, as logs and the C header spell it.
            pub fn name(self) -> &'static str {
                match self { $(Reason::$variant => $name,)+ }
            }

            /// The name with a terminating NUL (for the C ABI).
            pub fn c_name(self) -> &'static str {
                match self { $(Reason::$variant => concat!($name, "\0"),)+ }
            }

            /// The reason numbered `v`, or `None` for a number that names none.
            pub fn from_u16(v: u16) -> Option<Reason> {
                match v { $($num => Some(Reason::$variant),)+ _ => None }
            }
        }
    };
}

reasons! {
    // P-3 step 1
    ModeOff = 1, "MODE_OFF", "Consistency mode `off`: the host routes.";
    NoReaderHostgroup = 2, "NO_READER_HOSTGROUP", "The session's writer hostgroup has no reader hostgroup.";
    // P-3 step 2
    NotARead = 3, "NOT_A_READ", "The statement is not a SELECT/VALUES/TABLE (DML, DDL, utility…).";
    LockingClause = 4, "LOCKING_CLAUSE", "FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE.";
    DataModifyingCte = 5, "DATA_MODIFYING_CTE", "INSERT/UPDATE/DELETE/MERGE inside WITH.";
    SelectInto = 6, "SELECT_INTO", "SELECT INTO creates a table.";
    WriteFunction = 7, "WRITE_FUNCTION", "Calls a function on the write list.";
    ExplainAnalyze = 8, "EXPLAIN_ANALYZE", "EXPLAIN ANALYZE executes the statement.";
    Unparseable = 9, "UNPARSEABLE", "The classifier could not understand the statement.";
    TooComplex = 10, "TOO_COMPLEX", "The statement exceeded a classifier limit.";
    MultiStatement = 11, "MULTI_STATEMENT", "More than one statement in one Query.";
    HintPrimary = 12, "HINT_PRIMARY", "Leading `/* route=primary */` hint.";
    SessionHazard = 13, "SESSION_HAZARD", "Session state lives only on the writer (S-4).";
    // P-3 step 3
    ReaderFailedInTxn = 14, "READER_FAILED_IN_TXN", "A reader failed earlier in this transaction.";
    // P-3 step 4
    EventualRead = 15, "EVENTUAL_READ", "Mode `eventual`: a reader, no wait.";
    EventualInTxn = 16, "EVENTUAL_IN_TXN", "Mode `eventual` inside a transaction: the primary.";
    // P-5 split checks, in order
    SplitDisabled = 17, "SPLIT_DISABLED", "`txn_split` is off.";
    SplitExtendedProtocol = 18, "SPLIT_EXTENDED_PROTOCOL", "A split read in a batch on a dialect whose import ends with its statement (polardb).";
    SplitLsnUnknown = 19, "SPLIT_LSN_UNKNOWN", "The session's LSN state is unknown.";
    SplitIsolation = 20, "SPLIT_ISOLATION", "Not READ COMMITTED (or the level is unknown).";
    SplitNoMarker = 21, "SPLIT_NO_MARKER", "No marker on the writer's RFQ and not a known read-only prefix.";
    SplitWalPending = 22, "SPLIT_WAL_PENDING", "Marker `w` and no reader known to have replayed the transaction's LSN.";
    SplitLsnZero = 23, "SPLIT_LSN_ZERO", "The transaction's reported LSN is zero.";
    SplitSetInTxn = 24, "SPLIT_SET_IN_TXN", "A SET ran in the transaction before its first write.";
    SplitInvalidXids = 25, "SPLIT_INVALID_XIDS", "The writer's XID list failed validation (W-3).";
    SplitNoImport = 26, "SPLIT_NO_IMPORT", "The server dialect cannot import XIDs.";
    SplitPreWrite = 27, "SPLIT_PRE_WRITE", "Read before the first write: a reader with an LSN wait, no import.";
    SplitRead = 28, "SPLIT_READ", "Read after a write: a reader with the XIDs imported.";
    TxnFailed = 29, "TXN_FAILED", "The transaction is in failed state: only the writer can answer.";
    // 30-32 (ABI 2: the self-contained-extended rule) are retired with E-1…E-5; never reused.
    // P-3 step 7
    MissingLsnPrimary = 33, "MISSING_LSN_PRIMARY", "The session's LSN is unknown: the primary.";
    MissingLsnWarning = 34, "MISSING_LSN_WARNING", "The session's LSN is unknown: a reader with a warning.";
    MissingLsnReject = 35, "MISSING_LSN_REJECT", "The session's LSN is unknown: rejected.";
    // P-3 step 8 and P-4
    ReadNoTarget = 36, "READ_NO_TARGET", "Nothing to wait for: a reader.";
    ReadWait = 37, "READ_WAIT", "A reader with an LSN wait.";
    ReadCaughtUp = 38, "READ_CAUGHT_UP", "A reader known to have replayed the target: no wait.";
    ReadNoBoundedWait = 39, "READ_NO_BOUNDED_WAIT", "No reader known caught up and the dialect has no bounded wait.";
    NoReaderAvailable = 40, "NO_READER_AVAILABLE", "No healthy reader in the hostgroup.";
    NoReaderConnection = 41, "NO_READER_CONNECTION", "The host had no reader connection now.";
    ReaderNoCredentials = 42, "READER_NO_CREDENTIALS", "The client's user cannot log in on the readers.";
    // Failures and retries (§6)
    RetryOtherReader = 43, "RETRY_OTHER_READER", "Retried on another reader after a failure.";
    RetryPrimaryAfterLoss = 44, "RETRY_PRIMARY_AFTER_LOSS", "Re-run on the primary after a reader was lost.";
    RetryPrimaryAfterTimeout = 45, "RETRY_PRIMARY_AFTER_TIMEOUT", "Re-run on the primary after a wait timeout.";
    RetryPrimaryAfterError = 46, "RETRY_PRIMARY_AFTER_ERROR", "Re-run on the primary after a reader error.";
    // Not statements / session-level
    NotAStatement = 47, "NOT_A_STATEMENT", "Not a routable statement (function call, COPY data, sync…).";
    ReplicationConnection = 48, "REPLICATION_CONNECTION", "A replication connection is never routed.";
    ClientTerminated = 49, "CLIENT_TERMINATED", "The client sent Terminate.";
    ExtendedInProgress = 50, "EXTENDED_IN_PROGRESS", "Continuation of an extended-protocol exchange on the writer.";
    ReaderPinned = 51, "READER_PINNED", "The transaction's pinned reader, reused.";
    TxnOnPrimary = 52, "TXN_ON_PRIMARY", "Transaction control or a statement that stays with the transaction.";
    CopyInProgress = 53, "COPY_IN_PROGRESS", "COPY data for the writer.";
    RejectNoReader = 54, "REJECT_NO_READER", "No reader could serve and `read_fallback = error`.";
    ReplicaLossError = 55, "REPLICA_LOSS_ERROR", "A reader failure answered with an error by policy.";
    SplitNoCaughtUpReader = 56, "SPLIT_NO_CAUGHT_UP_READER", "Dialect without a bounded wait and no reader known past the transaction's LSN.";
    QueryTooLarge = 57, "QUERY_TOO_LARGE", "The query exceeded the inspection limit: streamed to the primary.";
    InvalidUtf8 = 58, "INVALID_UTF8", "The query text is not valid UTF-8.";
    EmptyQuery = 59, "EMPTY_QUERY", "Only whitespace or comments.";
    IsolationUnknown = 60, "ISOLATION_UNKNOWN", "The transaction began in a way the engine could not see.";
    WriterStatement = 61, "WRITER_STATEMENT", "Transaction control and session commands stay on the writer.";
    // P-3 step 2, F-policy and S-7 (SPEC §7)
    ServerDependent = 62, "SERVER_DEPENDENT", "Calls a function or names a relation whose answer depends on the server (S-7).";
    VolatileFunction = 63, "VOLATILE_FUNCTION", "Calls a volatile built-in that is not on the reviewed read-safe list.";
    UnknownFunction = 64, "UNKNOWN_FUNCTION", "Calls a function that is not built-in, reported or configured (`unknown_functions = primary`).";
    UserFunction = 65, "USER_FUNCTION", "Calls a name under which the database has a user function that is not read-safe.";
    CatalogChanged = 66, "CATALOG_CHANGED", "A session ran DDL in the database since the host last reported its catalogue: reads stay on the writer until the next report.";
    // 62-69: classification (F-policy, S-7).
    // Extended protocol (E-1…E-5), session state (S-5), deadlines (R-1b)
    BatchUnknownStatement = 70, "BATCH_UNKNOWN_STATEMENT", "A Bind, Describe or Close of a statement the engine does not track: the writer (E-2).";
    BatchPortalElsewhere = 71, "BATCH_PORTAL_ELSEWHERE", "An Execute or Describe of a portal bound outside the batch (E-1).";
    BatchRowLimitedInTxn = 72, "BATCH_ROW_LIMITED_IN_TXN", "A row-limited Execute inside a transaction whose portal must survive the batch: a named portal, one not bound in the batch or not its first Execute, a limit above 1000, a batch a Flush routes, or one that suspended on a reader and runs again on the writer (E-4).";
    BatchTooLarge = 73, "BATCH_TOO_LARGE", "The batch exceeded max_batch_bytes or holds a message too large to inspect (E-1).";
    SessionStateUnknown = 74, "SESSION_STATE_UNKNOWN", "The writer's session state is not known yet or could not be captured (S-5).";
    BatchStatementOnWriter = 75, "BATCH_STATEMENT_ON_WRITER", "The batch parses a name in use or closes a statement that exists on the writer (E-2).";
    PreparedLimit = 76, "PREPARED_LIMIT", "The session tracks max_prepared_statements that exist only on readers (E-2).";
    BatchNoStatement = 77, "BATCH_NO_STATEMENT", "A batch with nothing to route (a lone Sync, Close of portals): the writer.";
    ReaderUnresponsive = 78, "READER_UNRESPONSIVE", "A reader answered nothing within reader_response_timeout_ms (R-1b).";
    CausalToken = 79, "CAUSAL_TOKEN", "SHOW/SET polarsplit.causal_token, answered by the engine (C-1, C-2).";
    StatementLexedOtherwise = 80, "STATEMENT_LEXED_OTHERWISE", "A prepared statement with a literal, parsed under other parse-time settings than now (standard_conforming_strings, TimeZone, DateStyle, IntervalStyle, client_encoding, any setting the engine does not know): only the writer holds its parse (E-2).";
    SplitTxnValue = 81, "SPLIT_TXN_VALUE", "The read uses a value of the client's transaction (its start time, isolation or deferrability) that only the writer's transaction has (P-5, S-7).";
    BatchPortalOutlivesPart = 82, "BATCH_PORTAL_OUTLIVES_PART", "Outside a transaction block, a batch part a Flush routes binds a named portal or runs a row-limited Execute: the portal lives on in the implicit transaction, past a later part the reader cannot take (E-4).";
    ReaderSaidTooMuch = 83, "READER_SAID_TOO_MUCH", "What a reader answered before its result began (notices) outgrew what the engine holds so that a failure can be retried (64 KiB): the statement runs again on the writer, whose answer the client sees (F-3).";
    StatementResolvedBeforeDdl = 84, "STATEMENT_RESOLVED_BEFORE_DDL", "A prepared statement the writer parsed before DDL ran (seen by the engine, or shown by a catalogue report that differs): the writer keeps the names it resolved then, where a reader would resolve them afresh — a table created since earlier on the search_path, a closer overload (E-2).";
    PreparedClockLiteral = 85, "PREPARED_CLOCK_LITERAL", "A prepared statement with a literal the server reads as the clock when it parses it ('now'::timestamptz, 'today'): the statement holds the time of the client's own Parse, which only the writer's parse has; a reader's would be of another time, or another client's (E-2).";
}

impl Reason {
    /// The reason a classification gives for not being replica-safe.
    pub fn from_not_safe(n: crate::classify::NotSafe) -> Reason {
        use crate::classify::NotSafe as N;
        match n {
            N::None | N::NotARead => Reason::NotARead,
            N::LockingClause => Reason::LockingClause,
            N::DataModifyingCte => Reason::DataModifyingCte,
            N::SelectInto => Reason::SelectInto,
            // A session-only call is a call on the write list (it runs on the writer); only
            // P-6 tells them apart.
            N::WriteFunction | N::SessionFunction => Reason::WriteFunction,
            N::ExplainAnalyze => Reason::ExplainAnalyze,
            N::Unparseable => Reason::Unparseable,
            N::TooComplex => Reason::TooComplex,
            N::ServerDependent => Reason::ServerDependent,
            N::VolatileFunction => Reason::VolatileFunction,
            N::UnknownFunction => Reason::UnknownFunction,
            N::UserFunction => Reason::UserFunction,
            N::CatalogChanged => Reason::CatalogChanged,
            N::ClockLiteral => Reason::PreparedClockLiteral,
            #[allow(unreachable_patterns)]
            _ => Reason::NotARead,
        }
    }
}

/// A routing decision (the `Decision` action and the engine's counters carry it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Where the statement runs.
    pub outcome: Outcome,
    /// Why it runs there.
    pub reason: Reason,
    /// The LSN the read needs (0 when none).
    pub target: Lsn,
    /// The reader chosen (reader outcomes only).
    pub server: Option<ServerId>,
    /// Whether LSN-wait statements are sent.
    pub wait: bool,
    /// Whether XIDs are imported (REPLICA_TXN_SPLIT).
    pub import: bool,
    /// 0 for the first attempt; retries count up.
    pub attempt: u8,
}

impl Decision {
    pub(crate) fn primary(reason: Reason) -> Decision {
        Decision {
            outcome: Outcome::ForcePrimary,
            reason,
            target: Lsn::ZERO,
            server: None,
            wait: false,
            import: false,
            attempt: 0,
        }
    }

    pub(crate) fn passthrough(reason: Reason) -> Decision {
        Decision {
            outcome: Outcome::Passthrough,
            ..Decision::primary(reason)
        }
    }

    pub(crate) fn reject(reason: Reason) -> Decision {
        Decision {
            outcome: Outcome::Reject,
            ..Decision::primary(reason)
        }
    }

    pub(crate) fn reader(outcome: Outcome, reason: Reason, target: Lsn) -> Decision {
        Decision {
            outcome,
            reason,
            target,
            ..Decision::primary(reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_numbers_and_names_are_unique() {
        let mut nums: Vec<u16> = Reason::ALL.iter().map(|r| *r as u16).collect();
        nums.sort_unstable();
        let before = nums.len();
        nums.dedup();
        assert_eq!(before, nums.len());
        for r in Reason::ALL {
            assert_eq!(Reason::from_u16(*r as u16), Some(*r));
            assert!(r
                .name()
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::from_u8(o as u8), Some(o));
        }
    }
}
