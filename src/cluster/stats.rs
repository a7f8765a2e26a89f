//! Engine-wide counters (SPEC §9): lock-free, relaxed atomics, read as a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

use std::fmt::Write as _;

use crate::decision::{Outcome, Reason};
use crate::ids::Hostgroup;
use crate::protocol::Lsn;

use super::readers::ReaderSnapshot;

macro_rules! counters {
    ($($variant:ident = $name:literal, $doc:literal;)+) => {
        /// Named counters. The order is the C ABI's counter index: only append.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Counter { $(#[doc = $doc] $variant,)+ }

        impl Counter {
            /// Every counter, in C ABI index order.
            pub const ALL: &'static [Counter] = &[$(Counter::$variant,)+];
            /// The counter's stable snake_case name (the Prometheus metric's suffix and the C ABI's name).
            pub fn name(self) -> &'static str { match self { $(Counter::$variant => $name,)+ } }
            /// What the counter counts.
            pub fn doc(self) -> &'static str { match self { $(Counter::$variant => $doc,)+ } }
            /// The name with a terminating NUL (for the C ABI).
            pub fn c_name(self) -> &'static str { match self { $(Counter::$variant => concat!($name, "\0"),)+ } }
        }
    };
}

counters! {
    Statements = "statements", "Statements decided.";
    WaitsSent = "waits_sent", "Reads sent with LSN-wait statements.";
    WaitsSkipped = "waits_skipped", "Reads that needed a target but went to a reader known caught up (no wait).";
    WaitTimeouts = "wait_timeouts", "Strict wait timeouts (W-5).";
    BestEffortWarnings = "best_effort_warnings", "Best-effort timeout warnings forwarded (W-5).";
    SplitPlanned = "split_planned", "Reads inside transactions planned for a reader (pre-write or split).";
    SplitServed = "split_served", "Reads inside transactions answered by a reader.";
    SplitFellBack = "split_fell_back", "Reads inside transactions that fell back to the writer.";
    SplitRetried = "split_retried", "Reads inside transactions retried after a reader failure.";
    SplitImports = "split_imports", "Reads sent with an XID import.";
    RetriesConnectionLost = "retries_connection_lost", "Retries after CONNECTION_LOST.";
    RetriesWaitTimeout = "retries_wait_timeout", "Retries after WAIT_TIMEOUT.";
    RetriesReusableError = "retries_reusable_error", "Retries after REUSABLE_ERROR.";
    FailuresConnectionLost = "failures_connection_lost", "Reader CONNECTION_LOST failures.";
    FailuresWaitTimeout = "failures_wait_timeout", "Reader WAIT_TIMEOUT failures.";
    FailuresReusableError = "failures_reusable_error", "Reader REUSABLE_ERROR failures.";
    FailuresForwarded = "failures_forwarded", "Reader failures answered with an error to the client.";
    FailuresDisconnected = "failures_disconnected", "Reader failures that closed the client session.";
    Cancels = "cancels", "Statements cancelled (57014 answering the client's own statement).";
    GenerationResets = "generation_resets", "Sessions whose LSN state was cleared by a writer change (S-2).";
    MissingLsn = "missing_lsn", "RFQs without an LSN where one was needed (P-6).";
    PoolHits = "pool_hits", "Reader connections reused.";
    PoolMisses = "pool_misses", "Reader connections the host had to open or could not provide.";
    Warmups = "warmups", "Warmup connections requested.";
    PinsReleased = "pins_released", "Pinned readers released (transaction end, invalidation, loss).";
    XidResets = "xid_resets", "XID-import resets sent before a dirty reader served again.";
    ProtocolErrors = "protocol_errors", "Sessions stopped by a peer's protocol violation.";
    Rejects = "rejects", "Statements answered by an engine-built error.";
    ReaderRfqLsns = "reader_rfq_lsns", "Replay positions learned from readers' RFQs.";
    MonitorSamples = "monitor_samples", "Replay positions reported by the host's monitor.";
    WaitsUnsupported = "waits_unsupported", "Readers found not to support the wait statements.";
    ProbesSent = "probes_sent", "Post-commit LSN probes sent to writers (stock PostgreSQL).";
    TargetsLearned = "targets_learned", "Write positions learned by a probe or a post-commit writer sample.";
    ReadsToCaughtUpReader = "reads_to_caught_up_reader", "Reads with a target served by a reader known to have replayed it, no wait.";
    ReadsKeptOnWriter = "reads_kept_on_writer", "Reads with a target kept on the writer: no reader caught up and no bounded wait.";
    Batches = "batches", "Extended-protocol batches decided (E-1).";
    StatementsPrepared = "statements_prepared", "Hidden Parses of client statements where a batch runs (E-2).";
    CapturesSent = "captures_sent", "Captures of the writer's session state sent (S-5).";
    CapturesFailed = "captures_failed", "Captures that failed or answered too much: reads stay on the writer (S-5).";
    SettingsReplayed = "settings_replayed", "Settings replays on fresh reader connections (S-5).";
    HiddenFailures = "hidden_failures", "Hidden writer statements (probe, capture) that failed.";
    ReaderDeadlines = "reader_deadlines", "Reader statements treated as lost after reader_response_timeout_ms (R-1b).";
    CancelledReadersClosed = "cancelled_readers_closed", "Reader connections closed because a cancel may still land on them (F-1).";
    TokensIssued = "tokens_issued", "Causal tokens given to clients (SHOW, ParameterStatus, C-1).";
    TokensAccepted = "tokens_accepted", "Causal tokens presented and applied (C-2).";
    TokensIgnored = "tokens_ignored", "Causal tokens of another writer history: the writer's latest position used (C-2).";
    TokensRejected = "tokens_rejected", "Malformed causal tokens refused with 22023 (C-2).";
    ReadersHeldOut = "readers_held_out", "Readers held out of reader choice after reader_failure_threshold consecutive failures (R-1b).";
    ReadersBackIn = "readers_back_in", "Held-out readers let back in by a monitor sample taken after their latest failure (R-1b).";
    ReaderFailures = "reader_failures", "Reader failures counted toward a hold-out: lost connections, response deadlines, connect and monitor failures (R-1b).";
    ReaderOutages = "reader_outages", "Reader outages: what was known of the reader's position was cleared (R-1a).";
    ReaderConnectFailures = "reader_connect_failures", "Reader connections that could not be opened, 57P03 refusals included (R-1a, R-1b).";
    ReaderStartingUp = "reader_starting_up", "Reader connections refused with 57P03: the standby is starting up (R-1a).";
    MonitorFailures = "monitor_failures", "Monitor queries that failed or timed out (R-1a, R-1b).";
    SamplesBeforeOutage = "samples_before_outage", "Monitor samples not used: taken at or before the reader's latest outage (R-1a).";
    WriterKeepalives = "writer_keepalives", "Hidden SELECT 1 on an idle writer while the session read on a reader, before the writer session's idle timeout.";
    BeginsSplitOff = "begins_split_off", "Batches that open a transaction block (or a savepoint in one) and then read, cut after the BEGIN or SAVEPOINT (E-1): it on the writer, the reads decided inside the block.";
}

const N_OUTCOMES: usize = 5;
const N_REASONS: usize = 128;

/// The counters.
#[derive(Debug)]
pub struct Stats {
    counters: Box<[AtomicU64]>,
    outcomes: [AtomicU64; N_OUTCOMES],
    reasons: Box<[AtomicU64]>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            counters: (0..Counter::ALL.len()).map(|_| AtomicU64::new(0)).collect(),
            outcomes: Default::default(),
            reasons: (0..N_REASONS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Stats {
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.counters[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// The current value of counter `c` (relaxed: it may lag increments on other threads).
    pub fn get(&self, c: Counter) -> u64 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn record_decision(&self, outcome: Outcome, reason: Reason) {
        self.outcomes[outcome as usize].fetch_add(1, Ordering::Relaxed);
        if let Some(r) = self.reasons.get(reason as usize) {
            r.fetch_add(1, Ordering::Relaxed);
        }
        self.inc(Counter::Statements);
    }

    /// How many statements were decided with outcome `o`.
    pub fn outcome(&self, o: Outcome) -> u64 {
        self.outcomes[o as usize].load(Ordering::Relaxed)
    }

    /// How many statements were decided for reason `r`.
    pub fn reason(&self, r: Reason) -> u64 {
        self.reasons
            .get(r as usize)
            .map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// A consistent-enough copy for reports: every named counter, outcome and reason.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            counters: Counter::ALL.iter().map(|&c| (c, self.get(c))).collect(),
            outcomes: Outcome::ALL.iter().map(|&o| (o, self.outcome(o))).collect(),
            reasons: Reason::ALL.iter().map(|&r| (r, self.reason(r))).collect(),
        }
    }
}

impl Stats {
    /// Every counter (`polarsplit_<name>_total`), decisions by outcome and by reason, in the
    /// Prometheus text exposition format.
    pub fn write_prometheus(&self, out: &mut String) {
        for &c in Counter::ALL {
            let name = c.name();
            let _ = writeln!(out, "# HELP polarsplit_{name}_total {}", c.doc());
            let _ = writeln!(out, "# TYPE polarsplit_{name}_total counter");
            let _ = writeln!(out, "polarsplit_{name}_total {}", self.get(c));
        }
        out.push_str("# HELP polarsplit_decisions_total Decisions by outcome.\n");
        out.push_str("# TYPE polarsplit_decisions_total counter\n");
        for o in Outcome::ALL {
            let _ = writeln!(
                out,
                "polarsplit_decisions_total{{outcome=\"{}\"}} {}",
                o.name(),
                self.outcome(o)
            );
        }
        out.push_str("# HELP polarsplit_decision_reasons_total Decisions by reason.\n");
        out.push_str("# TYPE polarsplit_decision_reasons_total counter\n");
        for &r in Reason::ALL {
            let _ = writeln!(
                out,
                "polarsplit_decision_reasons_total{{reason=\"{}\"}} {}",
                r.name(),
                self.reason(r)
            );
        }
    }
}

/// Per-reader gauges (SPEC §9) in the Prometheus text format: the known replay position and the
/// lag behind the writer's latest known LSN (both only while a position is known, in the
/// writer's generation), health, hold-out, consecutive failures, active statements.
/// `writer_of(hostgroup)` gives the generation and latest LSN of the writer whose reader
/// hostgroup that is.
pub(crate) fn write_reader_gauges(
    out: &mut String,
    readers: &[ReaderSnapshot],
    writer_of: impl Fn(Hostgroup) -> Option<(u64, Lsn)>,
) {
    type Gauge = (
        &'static str,
        &'static str,
        fn(&ReaderSnapshot) -> Option<u64>,
    );
    let gauges: [Gauge; 6] = [
        (
            "reader_position_known",
            "Whether the reader's replay position is known (R-1a).",
            |r| Some(u64::from(r.known)),
        ),
        (
            "reader_replay_lsn",
            "The reader's known replay position (R-1a).",
            |r| r.known.then_some(r.replay_lsn.0),
        ),
        (
            "reader_healthy",
            "Whether the host reports the reader healthy.",
            |r| Some(u64::from(r.healthy)),
        ),
        (
            "reader_held_out",
            "Whether the reader is held out of reader choice (R-1b).",
            |r| Some(u64::from(r.held_out)),
        ),
        (
            "reader_consecutive_failures",
            "The reader's consecutive failures (R-1b).",
            |r| Some(u64::from(r.failures)),
        ),
        (
            "reader_active",
            "Statements the reader is serving now.",
            |r| Some(u64::from(r.active)),
        ),
    ];
    for (name, help, f) in gauges {
        let _ = writeln!(out, "# HELP polarsplit_{name} {help}");
        let _ = writeln!(out, "# TYPE polarsplit_{name} gauge");
        for r in readers {
            if let Some(v) = f(r) {
                let _ = writeln!(
                    out,
                    "polarsplit_{name}{{server=\"{}\",hostgroup=\"{}\"}} {v}",
                    r.server, r.hostgroup
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP polarsplit_reader_lag_bytes The writer's latest known LSN minus the reader's known position."
    );
    let _ = writeln!(out, "# TYPE polarsplit_reader_lag_bytes gauge");
    for r in readers {
        let Some((generation, writer)) = writer_of(r.hostgroup) else {
            continue;
        };
        if r.known && r.generation == generation && !writer.is_zero() {
            let _ = writeln!(
                out,
                "polarsplit_reader_lag_bytes{{server=\"{}\",hostgroup=\"{}\"}} {}",
                r.server,
                r.hostgroup,
                writer.0.saturating_sub(r.replay_lsn.0)
            );
        }
    }
}

/// A copy of the counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Every counter with its value, in [`Counter::ALL`] order.
    pub counters: Vec<(Counter, u64)>,
    /// Statements decided per outcome, in [`Outcome::ALL`] order.
    pub outcomes: Vec<(Outcome, u64)>,
    /// Statements decided per reason, in [`Reason::ALL`] order.
    pub reasons: Vec<(Reason, u64)>,
}

impl StatsSnapshot {
    /// The value of counter `c` when the snapshot was taken.
    pub fn counter(&self, c: Counter) -> u64 {
        self.counters
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(0, |(_, v)| *v)
    }

    /// How many statements had outcome `o` when the snapshot was taken.
    pub fn outcome(&self, o: Outcome) -> u64 {
        self.outcomes
            .iter()
            .find(|(k, _)| *k == o)
            .map_or(0, |(_, v)| *v)
    }

    /// How many statements had reason `r` when the snapshot was taken.
    pub fn reason(&self, r: Reason) -> u64 {
        self.reasons
            .iter()
            .find(|(k, _)| *k == r)
            .map_or(0, |(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_fit_the_table() {
        assert!(Reason::ALL.iter().all(|r| (*r as usize) < N_REASONS));
    }
}
