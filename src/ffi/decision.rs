//! Outcomes and reasons (SPEC P-1) as the host sees them: in the DECISION action, the counters
//! and logs. The `POLARSPLIT_REASON_*` constants are generated into the header from the reasons
//! table (`src/decision.rs`) by `build/header.rs`: a reason added there needs nothing here.

use std::ffi::c_char;

use crate::decision::{Decision, Outcome, Reason};

/// Where a decision sends a statement (SPEC P-1): one of `POLARSPLIT_OUTCOME_*`.
pub type PolarsplitOutcome = u32;
/// The engine does not decide (mode `off`): route as the host normally would.
pub const POLARSPLIT_OUTCOME_PASSTHROUGH: PolarsplitOutcome = 0;
/// The writer.
pub const POLARSPLIT_OUTCOME_FORCE_PRIMARY: PolarsplitOutcome = 1;
/// A reader; LSN-wait statements are sent only when `wait` is set.
pub const POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT: PolarsplitOutcome = 2;
/// A reader inside an open transaction, with the transaction's XIDs imported.
pub const POLARSPLIT_OUTCOME_REPLICA_TXN_SPLIT: PolarsplitOutcome = 3;
/// The engine answers the client with an error itself; nothing runs.
pub const POLARSPLIT_OUTCOME_REJECT: PolarsplitOutcome = 4;

/// Why a decision was taken: one of `POLARSPLIT_REASON_*` (stable numbers, never reused; a newer
/// library may report numbers this header does not name: `polarsplit_reason_name` names them).
pub type PolarsplitReason = u32;

/// The C value of an outcome. Exhaustive: a new outcome needs its constant here.
pub(crate) fn outcome_to_c(o: Outcome) -> PolarsplitOutcome {
    match o {
        Outcome::Passthrough => POLARSPLIT_OUTCOME_PASSTHROUGH,
        Outcome::ForcePrimary => POLARSPLIT_OUTCOME_FORCE_PRIMARY,
        Outcome::ReplicaWithWait => POLARSPLIT_OUTCOME_REPLICA_WITH_WAIT,
        Outcome::ReplicaTxnSplit => POLARSPLIT_OUTCOME_REPLICA_TXN_SPLIT,
        Outcome::Reject => POLARSPLIT_OUTCOME_REJECT,
    }
}

pub(crate) fn outcome_from_c(o: PolarsplitOutcome) -> Option<Outcome> {
    Outcome::ALL.into_iter().find(|x| outcome_to_c(*x) == o)
}

pub(crate) fn reason_from_c(r: PolarsplitReason) -> Option<Reason> {
    u16::try_from(r).ok().and_then(Reason::from_u16)
}

/// The DECISION action's member: a routing decision, for logs and stats.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PolarsplitDecision {
    /// Where the statement goes (`POLARSPLIT_OUTCOME_*`).
    pub outcome: PolarsplitOutcome,
    /// Why (`POLARSPLIT_REASON_*`).
    pub reason: PolarsplitReason,
    /// The LSN the read needs; 0 when none.
    pub target_lsn: u64,
    /// The reader chosen; valid when `has_server`.
    pub server: u32,
    /// Whether a reader was chosen (reader outcomes).
    pub has_server: bool,
    /// Whether LSN-wait statements are sent ahead of the statement.
    pub wait: bool,
    /// Whether the transaction's XIDs are imported (REPLICA_TXN_SPLIT).
    pub import_xids: bool,
    /// 0 for the first attempt; each retry counts up.
    pub attempt: u32,
}

impl From<Decision> for PolarsplitDecision {
    fn from(d: Decision) -> Self {
        PolarsplitDecision {
            outcome: outcome_to_c(d.outcome),
            reason: PolarsplitReason::from(d.reason as u16),
            target_lsn: d.target.0,
            server: d.server.unwrap_or(0),
            has_server: d.server.is_some(),
            wait: d.wait,
            import_xids: d.import,
            attempt: u32::from(d.attempt),
        }
    }
}

/// The stable name of an outcome (`"FORCE_PRIMARY"`, …), or NULL for an unknown value.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_outcome_name(outcome: PolarsplitOutcome) -> *const c_char {
    let s: &'static str = match outcome_from_c(outcome) {
        Some(Outcome::Passthrough) => "PASSTHROUGH\0",
        Some(Outcome::ForcePrimary) => "FORCE_PRIMARY\0",
        Some(Outcome::ReplicaWithWait) => "REPLICA_WITH_WAIT\0",
        Some(Outcome::ReplicaTxnSplit) => "REPLICA_TXN_SPLIT\0",
        Some(Outcome::Reject) => "REJECT\0",
        None => return std::ptr::null(),
    };
    s.as_ptr().cast()
}

/// The stable name of a reason (`"READ_WAIT"`, …: the `POLARSPLIT_REASON_*` constant without its
/// prefix), or NULL for an unknown value. Reason numbers are below 1024.
///
/// # Safety
/// Always safe; the string is static.
#[no_mangle]
pub extern "C" fn polarsplit_reason_name(reason: PolarsplitReason) -> *const c_char {
    match reason_from_c(reason) {
        Some(r) => r.c_name().as_ptr().cast(),
        None => std::ptr::null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `#define NAME VALUE` lines of the committed header whose name starts with `prefix`.
    fn header_defines(prefix: &str) -> BTreeMap<String, u64> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/polarsplit.h");
        let header = std::fs::read_to_string(path).expect("read include/polarsplit.h");
        header
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.split_once(' '))
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(n, v)| (n.to_string(), v.trim().parse().expect("a numeric define")))
            .collect()
    }

    #[test]
    fn p1_every_reason_has_its_generated_constant_in_the_committed_header() {
        let defines = header_defines("POLARSPLIT_REASON_");
        for r in Reason::ALL {
            let name = format!("POLARSPLIT_REASON_{}", r.name());
            assert_eq!(
                defines.get(&name).copied(),
                Some(u64::from(*r as u16)),
                "{name}: regenerate the header (cargo build --features generate-header)"
            );
        }
        assert_eq!(defines.len(), Reason::ALL.len(), "{defines:?}");
        assert!(Reason::ALL.iter().all(|r| (*r as u16) < 1024));
    }

    #[test]
    fn p1_every_outcome_has_its_constant_in_the_committed_header() {
        let defines = header_defines("POLARSPLIT_OUTCOME_");
        for o in Outcome::ALL {
            let name = format!("POLARSPLIT_OUTCOME_{}", o.name());
            assert_eq!(
                defines.get(&name).copied(),
                Some(u64::from(o as u8)),
                "{name}"
            );
            assert_eq!(outcome_to_c(o), u32::from(o as u8));
            assert_eq!(outcome_from_c(outcome_to_c(o)), Some(o));
        }
        assert_eq!(defines.len(), Outcome::ALL.len(), "{defines:?}");
    }
}
