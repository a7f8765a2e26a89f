//! `plan` (SPEC P-3, P-5): a pure function from the collected inputs to a decision. The reader is
//! bound later (`execute`, P-4); this only says which outcome and why.

use crate::classify::{Classification, Effects, Isolation, Kind, NotSafe};
use crate::config::{Consistency, OnMissingLsn, ReadFallback, ServerDialect};
use crate::protocol::{Lsn, Marker};

use crate::decision::{Decision, Outcome, Reason};

/// The statement, as planning sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatementView {
    pub replica_safe: bool,
    /// Why not (meaningful when `!replica_safe`).
    pub not_safe: Reason,
    pub multi: bool,
    pub hint_primary: bool,
    /// It reads a value of the client's transaction (`Effects::TXN_VALUE`): never split (P-5).
    pub txn_value: bool,
}

impl StatementView {
    pub fn of(c: &Classification) -> StatementView {
        let first = c.first();
        let not_safe = match first.kind {
            Kind::Empty => Reason::EmptyQuery,
            Kind::Read if first.not_safe == NotSafe::None => Reason::NotARead,
            _ => Reason::from_not_safe(first.not_safe),
        };
        StatementView {
            replica_safe: c.is_replica_safe(),
            not_safe,
            multi: c.count() > 1,
            hint_primary: c.hint_primary,
            txn_value: c.effects().contains(Effects::TXN_VALUE),
        }
    }

    /// A statement that is not a replica-safe read, for the given reason.
    pub fn not_safe(reason: Reason) -> StatementView {
        StatementView {
            replica_safe: false,
            not_safe: reason,
            multi: false,
            hint_primary: false,
            txn_value: false,
        }
    }
}

/// The transaction, as planning sees it (S-3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnView {
    pub active: bool,
    pub failed: bool,
    pub reader_failed: bool,
    pub isolation: Option<Isolation>,
    pub marker: Option<Marker>,
    pub xids_empty: bool,
    pub xids_valid: bool,
    pub lsn: Lsn,
    pub set_ran: bool,
    pub read_only_prefix: bool,
}

/// The protocol of the unit planned: a simple Query, or an extended-protocol batch (E-1) whose
/// shape `batch` already checked (E-1…E-5: a batch that is not all reads arrives here as a
/// statement that is not replica-safe, with the reason why).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Simple,
    Extended,
}

/// Everything `plan` looks at (P-2 collect).
#[derive(Clone, Copy, Debug)]
pub struct PlanInput {
    pub consistency: Consistency,
    pub has_reader_hostgroup: bool,
    pub read_fallback: ReadFallback,
    pub on_missing_lsn: OnMissingLsn,
    pub txn_split: bool,
    pub dialect: ServerDialect,
    pub statement: StatementView,
    pub hazard: bool,
    /// The writer's session state is not known (a capture is due, in flight or failed, S-5):
    /// reads stay on the writer.
    pub state_unknown: bool,
    pub protocol: Protocol,
    pub lsn_unknown: bool,
    /// max(write, observed), and in `global` mode the writer's latest known LSN.
    pub target: Lsn,
    pub txn: TxnView,
    /// Whether some healthy reader of the group is known to have replayed `txn.lsn` (P-5's `'w'`
    /// exception).
    pub reader_past_txn_lsn: bool,
}

/// P-3: the checks in their fixed order; the first match wins.
pub fn plan(i: &PlanInput) -> Decision {
    // 1.
    if i.consistency == Consistency::Off {
        return Decision::passthrough(Reason::ModeOff);
    }
    if !i.has_reader_hostgroup {
        if i.statement.replica_safe && i.read_fallback == ReadFallback::Error {
            return Decision::reject(Reason::RejectNoReader);
        }
        return Decision::primary(Reason::NoReaderHostgroup);
    }
    // 2.
    if i.statement.multi {
        return Decision::primary(Reason::MultiStatement);
    }
    if i.statement.hint_primary {
        return Decision::primary(Reason::HintPrimary);
    }
    if !i.statement.replica_safe {
        return Decision::primary(i.statement.not_safe);
    }
    if i.hazard {
        return Decision::primary(Reason::SessionHazard);
    }
    if i.state_unknown {
        return Decision::primary(Reason::SessionStateUnknown);
    }
    if i.txn.active && i.txn.failed {
        return Decision::primary(Reason::TxnFailed);
    }
    // 3.
    if i.txn.active && i.txn.reader_failed {
        return Decision::primary(Reason::ReaderFailedInTxn);
    }
    // 4.
    if i.consistency == Consistency::Eventual {
        return if i.txn.active {
            Decision::primary(Reason::EventualInTxn)
        } else {
            Decision::reader(Outcome::ReplicaWithWait, Reason::EventualRead, Lsn::ZERO)
        };
    }
    // 5.
    if i.txn.active {
        return plan_split(i);
    }
    // 6. Extended batches: their shape was checked when the batch was assembled (E-1…E-5);
    // a batch of reads is planned from here on exactly as a simple Query (E-3 puts its waits
    // inside the batch).
    // 7.
    if i.lsn_unknown {
        return match i.on_missing_lsn {
            OnMissingLsn::Primary => Decision::primary(Reason::MissingLsnPrimary),
            OnMissingLsn::Warning => Decision::reader(
                Outcome::ReplicaWithWait,
                Reason::MissingLsnWarning,
                Lsn::ZERO,
            ),
            OnMissingLsn::Error => Decision::reject(Reason::MissingLsnReject),
        };
    }
    // 8.
    if i.target.is_zero() {
        Decision::reader(Outcome::ReplicaWithWait, Reason::ReadNoTarget, Lsn::ZERO)
    } else {
        Decision::reader(Outcome::ReplicaWithWait, Reason::ReadWait, i.target)
    }
}

/// P-5: split eligibility, checked in order; the first failing check is the reason.
fn plan_split(i: &PlanInput) -> Decision {
    let t = &i.txn;
    if !i.txn_split {
        return Decision::primary(Reason::SplitDisabled);
    }
    if i.lsn_unknown {
        return Decision::primary(Reason::SplitLsnUnknown);
    }
    match t.isolation.map(Isolation::effective) {
        Some(Isolation::ReadCommitted) => {}
        None => return Decision::primary(Reason::IsolationUnknown),
        Some(_) => return Decision::primary(Reason::SplitIsolation),
    }
    // A marker, or — before the first write — the engine's own proof that every statement so far
    // was a replica-safe read (servers that send no marker in the read-only prefix, W-7).
    let prefix_by_classification = t.marker.is_none() && t.read_only_prefix;
    if t.marker.is_none() && !prefix_by_classification {
        return Decision::primary(Reason::SplitNoMarker);
    }
    if t.marker == Some(Marker::WalPending) && !i.reader_past_txn_lsn {
        return Decision::primary(Reason::SplitWalPending);
    }
    let prefix = prefix_by_classification || t.xids_empty;
    if !prefix && t.lsn.is_zero() {
        return Decision::primary(Reason::SplitLsnZero);
    }
    if !t.xids_valid {
        return Decision::primary(Reason::SplitInvalidXids);
    }
    // Either branch: a state change inside the transaction (SET, SET LOCAL, set_config, unseen
    // code) is not on any reader, before the first write or after it (S-5).
    if t.set_ran {
        return Decision::primary(Reason::SplitSetInTxn);
    }
    // Either branch: the read runs in the reader's own transaction, whose start time and
    // characteristics are not the client's block's (S-7).
    if i.statement.txn_value {
        return Decision::primary(Reason::SplitTxnValue);
    }
    if prefix {
        return Decision::reader(Outcome::ReplicaWithWait, Reason::SplitPreWrite, i.target);
    }
    if !i.dialect.can_import_xids() {
        return Decision::primary(Reason::SplitNoImport);
    }
    if i.protocol == Protocol::Extended && i.dialect == ServerDialect::PolarDb {
        // polardb clears an import when the query that set it ends: in a batch the import and
        // the client's statement are separate statements, so the import would not apply.
        return Decision::primary(Reason::SplitExtendedProtocol);
    }
    let mut d = Decision::reader(
        Outcome::ReplicaTxnSplit,
        Reason::SplitRead,
        t.lsn.max(i.target),
    );
    d.import = true;
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> PlanInput {
        PlanInput {
            consistency: Consistency::Session,
            has_reader_hostgroup: true,
            read_fallback: ReadFallback::Primary,
            on_missing_lsn: OnMissingLsn::Primary,
            txn_split: true,
            dialect: ServerDialect::Awide,
            statement: StatementView {
                replica_safe: true,
                not_safe: Reason::NotARead,
                multi: false,
                hint_primary: false,
                txn_value: false,
            },
            hazard: false,
            state_unknown: false,
            protocol: Protocol::Simple,
            lsn_unknown: false,
            target: Lsn::ZERO,
            txn: TxnView::default(),
            reader_past_txn_lsn: false,
        }
    }

    fn in_txn(mut i: PlanInput) -> PlanInput {
        i.txn = TxnView {
            active: true,
            isolation: Some(Isolation::ReadCommitted),
            marker: Some(Marker::Splittable),
            xids_empty: false,
            xids_valid: true,
            lsn: Lsn(500),
            read_only_prefix: false,
            ..TxnView::default()
        };
        i
    }

    fn reason(i: &PlanInput) -> (Outcome, Reason) {
        let d = plan(i);
        (d.outcome, d.reason)
    }

    #[test]
    fn p3_order_step_by_step() {
        let mut i = base();
        i.consistency = Consistency::Off;
        assert_eq!(reason(&i), (Outcome::Passthrough, Reason::ModeOff));
        let mut i = base();
        i.has_reader_hostgroup = false;
        assert_eq!(
            reason(&i),
            (Outcome::ForcePrimary, Reason::NoReaderHostgroup)
        );
        i.read_fallback = ReadFallback::Error;
        assert_eq!(reason(&i), (Outcome::Reject, Reason::RejectNoReader));
        let mut i = base();
        i.statement.multi = true;
        i.statement.hint_primary = true;
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::MultiStatement));
        i.statement.multi = false;
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::HintPrimary));
        let mut i = base();
        i.statement = StatementView::not_safe(Reason::LockingClause);
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::LockingClause));
        let mut i = base();
        i.hazard = true;
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::SessionHazard));
        let mut i = in_txn(base());
        i.txn.reader_failed = true;
        assert_eq!(
            reason(&i),
            (Outcome::ForcePrimary, Reason::ReaderFailedInTxn)
        );
        let mut i = base();
        i.consistency = Consistency::Eventual;
        i.target = Lsn(9);
        assert_eq!(reason(&i), (Outcome::ReplicaWithWait, Reason::EventualRead));
        assert_eq!(plan(&i).target, Lsn::ZERO);
        let mut i = in_txn(base());
        i.consistency = Consistency::Eventual;
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::EventualInTxn));
        // E-3: a batch of reads is planned as a simple Query, its wait inside the batch.
        let mut i = base();
        i.protocol = Protocol::Extended;
        assert_eq!(reason(&i), (Outcome::ReplicaWithWait, Reason::ReadNoTarget));
        i.target = Lsn(1);
        assert_eq!(reason(&i), (Outcome::ReplicaWithWait, Reason::ReadWait));
        // S-5: while the writer's state is unknown, reads stay on the writer.
        let mut i = base();
        i.state_unknown = true;
        assert_eq!(
            reason(&i),
            (Outcome::ForcePrimary, Reason::SessionStateUnknown)
        );
        let mut i = base();
        i.lsn_unknown = true;
        assert_eq!(
            reason(&i),
            (Outcome::ForcePrimary, Reason::MissingLsnPrimary)
        );
        i.on_missing_lsn = OnMissingLsn::Warning;
        assert_eq!(
            reason(&i),
            (Outcome::ReplicaWithWait, Reason::MissingLsnWarning)
        );
        i.on_missing_lsn = OnMissingLsn::Error;
        assert_eq!(reason(&i), (Outcome::Reject, Reason::MissingLsnReject));
        let mut i = base();
        assert_eq!(reason(&i), (Outcome::ReplicaWithWait, Reason::ReadNoTarget));
        i.target = Lsn(77);
        let d = plan(&i);
        assert_eq!(
            (d.outcome, d.reason, d.target),
            (Outcome::ReplicaWithWait, Reason::ReadWait, Lsn(77))
        );
    }

    #[test]
    fn p5_checks_fail_one_at_a_time_in_order() {
        let ok = in_txn(base());
        let d = plan(&ok);
        assert_eq!(
            (d.outcome, d.reason, d.import),
            (Outcome::ReplicaTxnSplit, Reason::SplitRead, true)
        );
        let mut i = ok;
        i.txn_split = false;
        assert_eq!(reason(&i).1, Reason::SplitDisabled);
        // E-4: batches split like simple Queries, except where the import cannot apply.
        let mut i = ok;
        i.protocol = Protocol::Extended;
        assert_eq!(reason(&i).1, Reason::SplitRead);
        i.dialect = ServerDialect::PolarDb;
        assert_eq!(reason(&i).1, Reason::SplitExtendedProtocol);
        let mut i = ok;
        i.lsn_unknown = true;
        assert_eq!(reason(&i).1, Reason::SplitLsnUnknown);
        let mut i = ok;
        i.txn.isolation = Some(Isolation::RepeatableRead);
        assert_eq!(reason(&i).1, Reason::SplitIsolation);
        i.txn.isolation = Some(Isolation::Serializable);
        assert_eq!(reason(&i).1, Reason::SplitIsolation);
        i.txn.isolation = Some(Isolation::ReadUncommitted);
        assert_eq!(reason(&i).1, Reason::SplitRead);
        let mut i = ok;
        i.txn.marker = None;
        assert_eq!(reason(&i).1, Reason::SplitNoMarker);
        let mut i = ok;
        i.txn.marker = Some(Marker::WalPending);
        assert_eq!(reason(&i).1, Reason::SplitWalPending);
        i.reader_past_txn_lsn = true;
        assert_eq!(reason(&i).1, Reason::SplitRead);
        let mut i = ok;
        i.txn.lsn = Lsn::ZERO;
        assert_eq!(reason(&i).1, Reason::SplitLsnZero);
        let mut i = ok;
        i.txn.xids_valid = false;
        assert_eq!(reason(&i).1, Reason::SplitInvalidXids);
        let mut i = ok;
        i.dialect = ServerDialect::Stock;
        assert_eq!(reason(&i).1, Reason::SplitNoImport);
    }

    #[test]
    fn p5_split_target_is_max_of_txn_and_session() {
        let mut i = in_txn(base());
        i.target = Lsn(900);
        assert_eq!(plan(&i).target, Lsn(900));
        i.target = Lsn(100);
        assert_eq!(plan(&i).target, Lsn(500));
    }

    #[test]
    fn p5_pre_write_prefix() {
        let mut i = in_txn(base());
        i.txn.xids_empty = true;
        i.txn.lsn = Lsn::ZERO;
        i.target = Lsn(40);
        let d = plan(&i);
        assert_eq!(
            (d.outcome, d.reason, d.target, d.import),
            (
                Outcome::ReplicaWithWait,
                Reason::SplitPreWrite,
                Lsn(40),
                false
            )
        );
        i.txn.set_ran = true;
        assert_eq!(reason(&i).1, Reason::SplitSetInTxn);
        // No marker (polardb) but the engine saw only reads: still the prefix.
        let mut i = in_txn(base());
        i.txn.marker = None;
        i.txn.read_only_prefix = true;
        i.txn.xids_empty = true;
        assert_eq!(reason(&i).1, Reason::SplitPreWrite);
    }

    #[test]
    fn p5_a_state_change_keeps_post_write_reads_on_the_writer_too() {
        // After the first write (marker, XIDs): a SET LOCAL since BEGIN is not on any reader.
        let mut i = in_txn(base());
        assert_eq!(reason(&i), (Outcome::ReplicaTxnSplit, Reason::SplitRead));
        i.txn.set_ran = true;
        assert_eq!(reason(&i), (Outcome::ForcePrimary, Reason::SplitSetInTxn));
    }
}
