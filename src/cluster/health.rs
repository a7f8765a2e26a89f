//! What the engine knows of one reader's position and responsiveness (SPEC R-1a, R-1b), as a
//! small value with pure update rules, and the sequence lock that shares it between threads.
//!
//! **Position (R-1a).** A reader's known position is its latest *evidence*, never a running
//! maximum: a monitor sample replaces it (it may lower it: a standby restarted after a crash
//! redoes WAL from far behind where it was); a position reported on one of its own RFQs may raise
//! it only when that evidence is newer than the latest sample; an *outage* (the reader reported
//! unhealthy or back, its monitor failed, a connection to it was lost or refused, the host saw it
//! restart, be re-cloned or change timeline) clears the position, and evidence taken at or before the
//! outage never counts again. (A restart, re-clone or timeline change the host did not notice
//! shows in the next monitor sample, which replaces the position.) Every piece of evidence carries the host time it was *taken*: for a
//! monitor sample the time its query was sent, for an RFQ the time the statement it ends was sent
//! — both lower bounds of the moment the server reported the position, so a position reported by
//! a server that then crashed can never be dated after the crash.
//!
//! **Responsiveness (R-1b).** Consecutive failures (connect failures and timeouts, lost
//! connections, response deadlines, failed monitor queries) are counted; at the threshold the
//! reader is *held out* of reader choice, and only a monitor sample taken after the latest failure
//! lets it back in. An answered statement resets the count. While failures are not followed by
//! such a sample, [`State::retry_after`] paces the host's reconnect attempts with a back-off that
//! doubles per consecutive failure from [`BACKOFF_BASE_MS`] up to [`BACKOFF_CAP_MS`]. A sample
//! shows the server answering, on the monitor's connection, which may be older than the
//! failures: once a connect attempt that *began after* such a sample still failed, samples no
//! longer lift the back-off until a statement is answered — a frozen postmaster or a firewall
//! dropping new connections leaves old connections answering while new ones hang (an examiner's
//! finding, 2026-12-07: with samples lifting it, 6 of 7 new sessions waited 2 s each for a
//! connect that hung).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crossbeam_utils::Backoff;

/// The back-off after the first consecutive failure; it doubles with each further one.
pub const BACKOFF_BASE_MS: u64 = 200;
/// The longest back-off (reached at the 5th consecutive failure).
pub const BACKOFF_CAP_MS: u64 = 3_200;

/// Host time, or none (stored as `u64::MAX`).
const NONE: u64 = u64::MAX;

/// The back-off after `failures` consecutive failures (≥ 1).
pub fn backoff_ms(failures: u32) -> u64 {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_BASE_MS << doublings).min(BACKOFF_CAP_MS)
}

/// One reader's evidence and failure bookkeeping. Pure data: the rules below are deterministic
/// functions of it and of their inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// Writer generation of the newest evidence; evidence of an older one is ignored.
    pub generation: u64,
    /// The known replay position (meaningful only when `known`).
    pub lsn: u64,
    /// When the evidence for `lsn` was taken.
    pub at_ms: u64,
    pub known: bool,
    /// When the latest monitor sample's query was sent.
    pub last_sample: Option<u64>,
    /// The latest outage: evidence taken at or before it never counts.
    pub outage: Option<u64>,
    /// Consecutive failures, and when the latest was reported.
    pub failures: u32,
    pub last_failure: u64,
    pub held_out: bool,
    /// R-1b: when the first monitor sample taken after the latest failure was taken.
    pub sample_after_failure: Option<u64>,
    /// R-1b: a connect attempt that began after such a sample failed too — the monitor's
    /// answers say nothing of new connections; samples no longer lift the back-off.
    pub samples_unproven: bool,
}

/// What a monitor sample did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sampled {
    /// It is the reader's known position now; `back_in`: it ended a hold-out.
    Accepted { back_in: bool },
    /// Taken at or before the latest outage: the position stays unknown.
    BeforeOutage,
    /// Older than the latest sample, or of an older writer generation: ignored.
    Ignored,
}

fn max_opt(a: Option<u64>, b: u64) -> u64 {
    a.map_or(b, |a| a.max(b))
}

impl State {
    /// A fresh reader (added, or added again after removal): nothing is known, and evidence
    /// taken at or before `since` (the latest host time the engine saw) never counts.
    pub(super) fn new(since: Option<u64>) -> State {
        State {
            outage: since,
            ..State::default()
        }
    }

    /// R-1a: a monitor sample of `lsn`, its query sent at `at`, under writer `generation`.
    pub(super) fn sample(&mut self, generation: u64, lsn: u64, at: u64) -> Sampled {
        if generation < self.generation {
            return Sampled::Ignored;
        }
        let newer_generation = generation > self.generation;
        if !newer_generation && self.last_sample.is_some_and(|t| at < t) {
            return Sampled::Ignored;
        }
        self.last_sample = Some(max_opt(self.last_sample, at));
        if newer_generation {
            // Positions of different generations are never compared.
            self.generation = generation;
            self.known = false;
        }
        if self.outage.is_some_and(|o| at <= o) {
            return Sampled::BeforeOutage;
        }
        self.lsn = lsn;
        self.at_ms = at;
        self.known = true;
        if self.failures > 0 && at > self.last_failure && self.sample_after_failure.is_none() {
            self.sample_after_failure = Some(at);
        }
        // R-1b: the monitor answered a query sent after the latest failure.
        let back_in = self.held_out && at > self.last_failure;
        if back_in {
            self.held_out = false;
        }
        Sampled::Accepted { back_in }
    }

    /// R-1a: a replay position the reader reported on an RFQ ending a statement sent at `at`.
    /// Returns whether it changed what is known.
    pub(super) fn rfq(&mut self, generation: u64, lsn: u64, at: u64) -> bool {
        if generation < self.generation || self.outage.is_some_and(|o| at <= o) {
            return false;
        }
        if generation > self.generation {
            self.generation = generation;
            (self.lsn, self.at_ms, self.known) = (lsn, at, true);
            return true;
        }
        if self.last_sample.is_some_and(|t| at <= t) {
            // Not newer than the latest sample: the sample says more.
            return false;
        }
        if !self.known || lsn > self.lsn {
            (self.lsn, self.at_ms, self.known) = (lsn, at, true);
            return true;
        }
        if lsn == self.lsn && at > self.at_ms {
            // The same position, seen later (a reader with no new WAL stays fresh).
            self.at_ms = at;
            return true;
        }
        false
    }

    /// R-1a: the reader was out at host time `at`: nothing known of it before then counts.
    pub(super) fn outage(&mut self, at: u64) {
        self.known = false;
        self.outage = Some(max_opt(self.outage, at));
    }

    /// R-1b: a failure reported at `now` — of a connect attempt that began at `began`, when
    /// known. Returns whether it held the reader out just now (`threshold` 0: never).
    pub(super) fn failure(&mut self, now: u64, threshold: u32, began: Option<u64>) -> bool {
        if let (Some(a), Some(s)) = (began, self.sample_after_failure) {
            // Begun after a sample had shown the server answering, and failed all the same.
            self.samples_unproven |= s < a;
        }
        self.sample_after_failure = None;
        self.failures = self.failures.saturating_add(1);
        self.last_failure = self.last_failure.max(now);
        if threshold != 0 && self.failures >= threshold && !self.held_out {
            self.held_out = true;
            return true;
        }
        false
    }

    /// R-1b: the reader answered a statement: the consecutive count restarts. (Only a monitor
    /// sample ends a hold-out.) Returns whether anything changed.
    pub(super) fn answered(&mut self) -> bool {
        self.samples_unproven = false;
        self.sample_after_failure = None;
        std::mem::replace(&mut self.failures, 0) != 0
    }

    /// R-1b: the earliest host time at which the host should open a new connection to the
    /// reader; `None`: any time. A monitor sample taken after the latest failure shows the
    /// server answering, and lifts the back-off — unless a connect attempt begun after such a
    /// sample failed since the reader last answered (`samples_unproven`).
    pub(super) fn retry_after(&self) -> Option<u64> {
        if self.failures == 0
            || !self.samples_unproven && self.last_sample.is_some_and(|t| t > self.last_failure)
        {
            return None;
        }
        Some(self.last_failure.saturating_add(backoff_ms(self.failures)))
    }

    /// Known (evidence of `generation`, not older than `max_age_ms` at `now`) to have replayed
    /// `target`. Never true on evidence older than the latest outage: an outage clears `known`
    /// and only later evidence sets it again.
    pub(super) fn caught_up(
        &self,
        generation: u64,
        target: u64,
        now: u64,
        max_age_ms: u64,
    ) -> bool {
        if target == 0 {
            return true;
        }
        // Non-short-circuit: cheap compares beat unpredictable branches.
        self.known
            & (self.generation == generation)
            & (self.lsn >= target)
            & (now.saturating_sub(self.at_ms) <= max_age_ms)
    }

    /// The known position, if any.
    pub(super) fn position(&self) -> Option<u64> {
        self.known.then_some(self.lsn)
    }

    fn to_words(self) -> [u64; WORDS] {
        let flags = u64::from(self.failures)
            | (u64::from(self.known) << 32)
            | (u64::from(self.held_out) << 33)
            | (u64::from(self.samples_unproven) << 34);
        [
            self.generation,
            self.lsn,
            self.at_ms,
            self.last_sample.unwrap_or(NONE),
            self.outage.unwrap_or(NONE),
            self.last_failure,
            flags,
            self.sample_after_failure.unwrap_or(NONE),
        ]
    }

    fn from_words(w: [u64; WORDS]) -> State {
        let some = |x: u64| (x != NONE).then_some(x);
        State {
            generation: w[0],
            lsn: w[1],
            at_ms: w[2],
            last_sample: some(w[3]),
            outage: some(w[4]),
            last_failure: w[5],
            failures: w[6] as u32,
            known: w[6] & (1 << 32) != 0,
            held_out: w[6] & (1 << 33) != 0,
            samples_unproven: w[6] & (1 << 34) != 0,
            sample_after_failure: some(w[7]),
        }
    }
}

const WORDS: usize = 8;

/// A [`State`] shared by threads under a sequence lock: readers never block and always see one
/// consistent state (an LSN of one generation is never paired with another generation, a
/// position never with the wrong outage); writers are serialized by the sequence word itself.
#[derive(Debug)]
pub(crate) struct SeqState {
    /// Even: stable; odd: a writer is between its stores.
    seq: AtomicU64,
    words: [AtomicU64; WORDS],
}

impl SeqState {
    pub(super) fn new(s: State) -> SeqState {
        SeqState {
            seq: AtomicU64::new(0),
            words: s.to_words().map(AtomicU64::new),
        }
    }

    fn words(&self) -> [u64; WORDS] {
        std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed))
    }

    /// A consistent copy; retries while a writer is mid-update (a handful of stores).
    pub(super) fn load(&self) -> State {
        let backoff = Backoff::new();
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let w = self.words();
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return State::from_words(w);
                }
            }
            backoff.snooze();
        }
    }

    /// Applies `f` atomically with respect to [`SeqState::load`] and other updates. Only what
    /// `f` changed is stored.
    pub(super) fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let backoff = Backoff::new();
        let mut s = self.seq.load(Ordering::Relaxed);
        loop {
            if s & 1 == 0 {
                match self
                    .seq
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            } else {
                backoff.snooze();
                s = self.seq.load(Ordering::Relaxed);
            }
        }
        fence(Ordering::Release);
        // Writers are serialized: these loads see the latest stores.
        let before = self.words();
        let mut state = State::from_words(before);
        let r = f(&mut state);
        for (i, w) in state.to_words().into_iter().enumerate() {
            if w != before[i] {
                self.words[i].store(w, Ordering::Relaxed);
            }
        }
        self.seq.store(s + 2, Ordering::Release);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1;

    fn known(lsn: u64, at: u64) -> State {
        let mut s = State {
            generation: G,
            ..State::default()
        };
        assert_eq!(s.sample(G, lsn, at), Sampled::Accepted { back_in: false });
        s
    }

    #[test]
    fn r1a_a_sample_replaces_the_position_and_may_lower_it() {
        let mut s = known(500, 10);
        assert_eq!(s.sample(G, 120, 20), Sampled::Accepted { back_in: false });
        assert_eq!((s.position(), s.at_ms), (Some(120), 20));
        assert!(!s.caught_up(G, 500, 20, 1000));
        assert!(s.caught_up(G, 120, 20, 1000));
        // Samples of the same moment replace too; older ones are ignored.
        assert_eq!(s.sample(G, 130, 20), Sampled::Accepted { back_in: false });
        assert_eq!(s.sample(G, 900, 19), Sampled::Ignored);
        assert_eq!(s.position(), Some(130));
    }

    #[test]
    fn r1a_an_rfq_raises_only_when_newer_than_the_latest_sample() {
        let mut s = known(500, 10);
        // Taken at or before the sample: the sample says more.
        assert!(!s.rfq(G, 900, 10));
        assert!(!s.rfq(G, 900, 5));
        assert_eq!(s.position(), Some(500));
        // Newer: raises.
        assert!(s.rfq(G, 600, 11));
        assert_eq!((s.position(), s.at_ms), (Some(600), 11));
        // Newer but lower: never lowers.
        assert!(!s.rfq(G, 550, 12));
        assert_eq!(s.position(), Some(600));
        // The same position seen later keeps it fresh.
        assert!(s.rfq(G, 600, 14));
        assert_eq!(s.at_ms, 14);
        // A later sample replaces what RFQs raised.
        assert_eq!(s.sample(G, 580, 15), Sampled::Accepted { back_in: false });
        assert_eq!(s.position(), Some(580));
    }

    #[test]
    fn r1a_an_outage_clears_and_older_evidence_never_counts_again() {
        let mut s = known(500, 10);
        assert!(s.rfq(G, 700, 12));
        s.outage(20);
        assert_eq!(s.position(), None);
        assert!(!s.caught_up(G, 1, 25, 1000));
        // Evidence taken before (or at) the outage, reported after it: ignored.
        assert_eq!(s.sample(G, 700, 18), Sampled::BeforeOutage);
        assert_eq!(s.sample(G, 700, 20), Sampled::BeforeOutage);
        assert!(!s.rfq(G, 700, 19));
        assert!(!s.rfq(G, 700, 20));
        assert_eq!(s.position(), None);
        // A sample taken after it: the new (lower) position.
        assert_eq!(s.sample(G, 300, 21), Sampled::Accepted { back_in: false });
        assert_eq!(s.position(), Some(300));
        assert!(!s.caught_up(G, 500, 21, 1000));
        // A second outage: an RFQ of a statement sent after it is evidence again.
        s.outage(30);
        assert!(s.rfq(G, 320, 31));
        assert_eq!(s.position(), Some(320));
    }

    #[test]
    fn r1a_generations_are_never_compared() {
        let mut s = known(500, 10);
        assert_eq!(s.sample(G + 1, 5, 9), Sampled::Accepted { back_in: false });
        assert_eq!((s.generation, s.position()), (G + 1, Some(5)));
        assert_eq!(s.sample(G, 900, 50), Sampled::Ignored);
        assert!(!s.rfq(G, 900, 50));
        assert!(!s.caught_up(G, 5, 50, 1000));
        assert!(s.caught_up(G + 1, 5, 50, 1000));
    }

    #[test]
    fn r1b_held_out_at_the_threshold_back_in_only_on_a_later_sample() {
        let mut s = known(500, 10);
        assert!(!s.failure(100, 3, None));
        assert!(!s.failure(110, 3, None));
        assert!(
            s.failure(120, 3, None),
            "the third consecutive failure holds it out"
        );
        assert!(s.held_out);
        assert!(!s.failure(130, 3, None), "already out");
        // An answer resets the count but does not let it back in.
        assert!(s.answered());
        assert!(s.held_out);
        // A sample taken before the latest failure does not either.
        assert_eq!(s.sample(G, 510, 125), Sampled::Accepted { back_in: false });
        assert!(s.held_out);
        assert_eq!(s.sample(G, 520, 131), Sampled::Accepted { back_in: true });
        assert!(!s.held_out);
        // Failures that are not consecutive never reach the threshold.
        let mut s = known(500, 10);
        for t in 0..10 {
            assert!(!s.failure(100 + t * 10, 3, None));
            assert!(!s.failure(105 + t * 10, 3, None));
            s.answered();
        }
        assert!(!s.held_out);
    }

    #[test]
    fn r1b_back_off_grows_per_failure_and_is_capped() {
        let mut s = known(500, 10);
        assert_eq!(s.retry_after(), None);
        let mut last = 0;
        for n in 1..=12u32 {
            let now = 1000 * u64::from(n);
            s.failure(now, 3, None);
            let wait = s.retry_after().expect("backing off") - now;
            assert!(
                wait >= last,
                "the back-off never shrinks while it keeps failing"
            );
            assert!(wait <= BACKOFF_CAP_MS);
            last = wait;
        }
        assert_eq!(last, BACKOFF_CAP_MS);
        assert_eq!(
            (1..=6).map(backoff_ms).collect::<Vec<_>>(),
            [200, 400, 800, 1600, 3200, 3200]
        );
        // A sample taken after the latest failure lifts it (the server answers); the count
        // stays, so the next failure backs off longer than the first did.
        s.sample(G, 500, 12_001);
        assert_eq!(s.retry_after(), None);
        s.failure(13_000, 3, None);
        assert_eq!(s.retry_after(), Some(13_000 + BACKOFF_CAP_MS));
        s.answered();
        assert_eq!(s.retry_after(), None);
    }

    /// R-1b: a monitor answering on a connection older than the failures (a frozen postmaster,
    /// a firewall dropping new connections: old connections answer, new ones hang) lifts the
    /// back-off at its first sample after a failure, as for a server that was down and is back;
    /// but once a connect attempt begun after such a sample failed too, samples no longer lift
    /// it — only the back-off's own time, or an answered statement, does. An attempt begun
    /// before the sample (one in flight while the server came back) does not count.
    #[test]
    fn r1b_a_connect_begun_after_a_sample_that_fails_stops_samples_lifting_the_back_off() {
        let mut s = known(500, 10);
        // The first failure, and the first sample after it: lifted.
        s.failure(3_000, 3, Some(1_000));
        assert_eq!(s.retry_after(), Some(3_000 + BACKOFF_BASE_MS));
        s.sample(G, 500, 3_010);
        assert_eq!(s.retry_after(), None);
        // An attempt begun at 3_020, after that sample, hangs to its timeout: not lifted again.
        s.failure(5_020, 3, Some(3_020));
        assert!(s.samples_unproven);
        s.sample(G, 500, 5_030);
        assert_eq!(s.retry_after(), Some(5_020 + 2 * BACKOFF_BASE_MS));
        s.failure(7_500, 3, Some(5_500));
        assert!(s.held_out);
        assert_eq!(s.sample(G, 500, 7_510), Sampled::Accepted { back_in: true });
        assert_eq!(s.retry_after(), Some(7_500 + 4 * BACKOFF_BASE_MS));
        // An answered statement ends it; new failures start afresh.
        s.answered();
        assert_eq!(s.retry_after(), None);
        assert!(!s.samples_unproven);
        // A server that was down: failures and no sample between them; an attempt begun before
        // the first sample back fails after it — the next sample lifts the back-off again.
        let mut d = known(500, 10);
        for t in [1_000, 1_200, 1_600, 2_400] {
            d.failure(t, 3, Some(t - 5));
        }
        d.sample(G, 500, 2_500);
        assert_eq!(d.retry_after(), None);
        d.failure(2_510, 3, Some(2_490));
        assert!(!d.samples_unproven);
        d.sample(G, 500, 2_520);
        assert_eq!(d.retry_after(), None);
        // Failures whose attempts' start is not known (the monitor's, a lost connection) never
        // stop samples from lifting it.
        d.failure(2_600, 3, None);
        d.sample(G, 500, 2_610);
        assert_eq!(d.retry_after(), None);
    }

    #[test]
    fn r1_words_round_trip() {
        let s = State {
            generation: 3,
            lsn: 0xdead_beef,
            at_ms: 17,
            known: true,
            last_sample: Some(16),
            outage: None,
            failures: 4,
            last_failure: 9,
            held_out: true,
            sample_after_failure: Some(12),
            samples_unproven: true,
        };
        assert_eq!(State::from_words(s.to_words()), s);
        assert_eq!(
            State::from_words(State::default().to_words()),
            State::default()
        );
        let cell = SeqState::new(s);
        assert_eq!(cell.load(), s);
        cell.update(|x| x.outage(20));
        assert_eq!(cell.load().outage, Some(20));
        assert!(!cell.load().known);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    const G: u64 = 1;

    #[derive(Clone, Copy, Debug)]
    enum Ev {
        Sample { lsn: u64, dt: u64, back: u64 },
        Rfq { lsn: u64, dt: u64, back: u64 },
        Outage { dt: u64 },
        Failure { dt: u64 },
        Answered,
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            (0..1000u64, 0..20u64, 0..40u64).prop_map(|(lsn, dt, back)| Ev::Sample {
                lsn,
                dt,
                back
            }),
            (0..1000u64, 0..20u64, 0..40u64).prop_map(|(lsn, dt, back)| Ev::Rfq { lsn, dt, back }),
            (0..20u64).prop_map(|dt| Ev::Outage { dt }),
            (0..20u64).prop_map(|dt| Ev::Failure { dt }),
            Just(Ev::Answered),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// R-1a / R-1b over any history: (1) a position is never known from evidence taken at or
        /// before the latest outage; (2) an accepted sample is the position; (3) an RFQ never
        /// lowers it; (4) held out exactly when the consecutive failures reached the threshold
        /// and no sample taken after the latest failure came since; (5) the back-off is bounded.
        #[test]
        fn r1_rules_hold_over_any_history(events in proptest::collection::vec(ev(), 1..60)) {
            let threshold = 3;
            let mut s = State::default();
            let mut now = 100u64;
            let mut outage: Option<u64> = None;
            // (failures, held out) as the model sees them.
            let (mut failures, mut held) = (0u32, false);
            let mut last_failure = 0u64;
            // Evidence behind the current position: its time.
            let mut evidence_at: Option<u64> = None;
            for e in events {
                let before = s;
                match e {
                    Ev::Sample { lsn, dt, back } => {
                        now += dt;
                        let at = now.saturating_sub(back);
                        match s.sample(G, lsn, at) {
                            Sampled::Accepted { back_in } => {
                                prop_assert_eq!(s.position(), Some(lsn));
                                prop_assert!(outage.is_none_or(|o| at > o));
                                evidence_at = Some(at);
                                if held && at > last_failure {
                                    held = false;
                                    prop_assert!(back_in);
                                }
                            }
                            Sampled::BeforeOutage => {
                                prop_assert!(outage.is_some_and(|o| at <= o));
                                // Evidence taken after the outage (an RFQ) still stands.
                                prop_assert_eq!(s.position(), before.position());
                            }
                            Sampled::Ignored => prop_assert_eq!(s.position(), before.position()),
                        }
                    }
                    Ev::Rfq { lsn, dt, back } => {
                        now += dt;
                        let at = now.saturating_sub(back);
                        if s.rfq(G, lsn, at) {
                            prop_assert!(outage.is_none_or(|o| at > o));
                            prop_assert!(before.last_sample.is_none_or(|t| at > t));
                            if before.position() != s.position() {
                                evidence_at = Some(at);
                            }
                        }
                        if let (Some(a), Some(b)) = (before.position(), s.position()) {
                            prop_assert!(b >= a, "an RFQ lowered the position");
                        }
                    }
                    Ev::Outage { dt } => {
                        now += dt;
                        s.outage(now);
                        outage = Some(outage.map_or(now, |o| o.max(now)));
                        evidence_at = None;
                    }
                    Ev::Failure { dt } => {
                        now += dt;
                        let out = s.failure(now, threshold, None);
                        failures += 1;
                        last_failure = last_failure.max(now);
                        prop_assert_eq!(out, failures >= threshold && !held);
                        held |= failures >= threshold;
                        let r = s.retry_after().expect("failing");
                        prop_assert!(r > last_failure && r <= last_failure + BACKOFF_CAP_MS);
                    }
                    Ev::Answered => {
                        s.answered();
                        failures = 0;
                    }
                }
                prop_assert_eq!(s.held_out, held);
                prop_assert_eq!(s.failures, failures);
                // (1): whatever is known was taken after the latest outage.
                if s.known {
                    let at = evidence_at.expect("a known position has evidence");
                    prop_assert!(outage.is_none_or(|o| at > o));
                    if s.lsn > 0 {
                        prop_assert!(s.caught_up(G, s.lsn, now, u64::MAX));
                    }
                } else {
                    prop_assert!(!s.caught_up(G, 1, now, u64::MAX));
                }
            }
        }
    }
}
