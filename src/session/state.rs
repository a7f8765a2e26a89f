//! Session state (SPEC §3): LSN bookkeeping (S-1, S-2), transaction state (S-3), session hazards
//! (S-4) and the writer's session state as captured from the writer (S-5). Plain data with
//! small, explicit transitions.

use crate::classify::{Isolation, NameKey};
use crate::protocol::{Lsn, Marker};

/// S-1: what the session has written and observed, bound to a writer generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LsnState {
    /// Highest position of the session's own writes.
    pub write_lsn: Lsn,
    /// Highest position the session has observed (writer RFQs, reader replay positions).
    pub observed_lsn: Lsn,
    /// A write happened whose position is unknown.
    pub write_unknown: bool,
    /// A reader answered without reporting its position (monotonic reads are not promised).
    pub observed_unknown: bool,
    /// A writer unit that may have written ended without its own RFQ (a batch closed by a
    /// Query, or whose Sync the server ignored in COPY IN): its implicit transaction commits
    /// at the writer's next RFQ, which counts as a write's (P-6). Not a position: kept across
    /// a generation change.
    pub write_pending: bool,
    /// The session ran `PREPARE TRANSACTION`: its writes commit when some session runs `COMMIT
    /// PREPARED`, which it cannot observe; its position stays unknown for good (S-1a). Kept
    /// across a generation change.
    pub prepared_txn: bool,
    /// The writer generation these were learned in.
    pub generation: u64,
}

impl LsnState {
    /// The target of a read: max(write, observed).
    pub fn target(&self) -> Lsn {
        self.write_lsn.max(self.observed_lsn)
    }

    /// Whether either position is unknown.
    pub fn unknown(&self) -> bool {
        self.write_unknown || self.observed_unknown || self.prepared_txn
    }

    /// S-2: forget everything learned under another generation. Returns whether anything was
    /// cleared (for the counter).
    pub fn adopt_generation(&mut self, generation: u64) -> bool {
        if self.generation == generation {
            return false;
        }
        let (pending, prepared) = (self.write_pending, self.prepared_txn);
        self.write_pending = false;
        self.prepared_txn = false;
        let had = *self != LsnState::default_with(self.generation);
        *self = LsnState::default_with(generation);
        self.write_pending = pending;
        self.prepared_txn = prepared;
        had
    }

    fn default_with(generation: u64) -> LsnState {
        LsnState {
            generation,
            ..LsnState::default()
        }
    }

    /// P-6: a positioned writer LSN.
    pub fn writer_positioned(&mut self, lsn: Lsn, may_have_written: bool) {
        self.observed_lsn = self.observed_lsn.max(lsn);
        if may_have_written {
            self.write_lsn = self.write_lsn.max(lsn);
        }
        self.write_unknown = false;
        self.observed_unknown = false;
    }

    /// P-6: a reader's replay position was observed by the session.
    pub fn reader_positioned(&mut self, lsn: Lsn) {
        self.observed_lsn = self.observed_lsn.max(lsn);
    }
}

/// W-7 with `lsn_probe = adaptive`: whether the probes of a session's writes pay. A probe pays
/// when a read goes to a reader at the write position it learned, before the session's next
/// write; without it, that read would have gone to the writer (or waited for a writer sample).
/// After [`ProbeCredit::TRUST`] probes in a row that did not pay, the engine probes every 2nd,
/// then 4th, … up to every 64th statement that could have had one — a committed write, or a
/// read the writer served (S-1a) — so a change of the workload is seen within 64 of them, in a
/// session that only reads too; the first probe that pays puts it back to every one. A
/// statement left unprobed keeps the session's position unknown: its reads go to the writer
/// until a probe or a writer sample positions it — the safe side, never a stale read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProbeCredit {
    /// The last probe positioned a write and no read on a reader has used it yet.
    fresh: bool,
    /// Probes in a row whose position no read on a reader used.
    unpaid: u8,
    /// Statements that could have had a probe left unprobed since the last probe.
    skipped: u8,
}

impl ProbeCredit {
    /// Probes that may go unpaid in a row before the engine probes less often.
    pub(crate) const TRUST: u8 = 4;
    /// At most every 2^6 = 64th write is probed.
    const MAX_SHIFT: u8 = 6;

    /// Whether the next committed write is worth a probe.
    pub(crate) fn due(&self) -> bool {
        // A probe whose position is still unused when the next write is sent did not pay.
        let unpaid = self.unpaid.saturating_add(u8::from(self.fresh));
        if unpaid < Self::TRUST {
            return true;
        }
        let every = 1u16 << (unpaid - Self::TRUST + 1).min(Self::MAX_SHIFT);
        u16::from(self.skipped) + 1 >= every
    }

    /// A probe was sent.
    pub(crate) fn sent(&mut self) {
        self.skipped = 0;
    }

    /// A probe positioned a write.
    pub(crate) fn learned(&mut self) {
        self.fresh = true;
    }

    /// A read went to a reader: a probe whose position was still unused paid.
    pub(crate) fn read_on_reader(&mut self) {
        if self.fresh {
            self.fresh = false;
            self.unpaid = 0;
        }
    }

    /// A new write's position is unknown (the writer reported none), or a read went to the
    /// writer (its position would need a probe of its own): the last probe's position
    /// is superseded, and it paid or it did not.
    pub(crate) fn new_write(&mut self) {
        if self.fresh {
            self.fresh = false;
            self.unpaid = self.unpaid.saturating_add(1);
        }
    }

    /// A statement that could have had a probe (a committed write, a read the writer served)
    /// went without one.
    pub(crate) fn skipped(&mut self) {
        self.skipped = self.skipped.saturating_add(1);
    }

    /// Whether the last committed write went unprobed.
    pub(crate) fn has_skipped(&self) -> bool {
        self.skipped > 0
    }
}

/// S-3: the explicit transaction, as confirmed by the writer's RFQs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxnState {
    /// Inside an explicit transaction block (writer RFQ `T` or `E`).
    pub active: bool,
    /// Writer RFQ `E`.
    pub failed: bool,
    /// Effective isolation; `None` when the transaction began in a way the engine did not see.
    pub isolation: Option<Isolation>,
    /// A SET / SET LOCAL / set_config or code the engine cannot see into ran inside it: its
    /// reads stay on the writer and the state is captured after it ends (S-5).
    pub set_ran: bool,
    /// Every statement so far was a replica-safe read (or effect-free transaction control).
    pub read_only_prefix: bool,
    /// A statement that may have written ran in it (P-6's COMMIT rule).
    pub may_have_written: bool,
    /// A reader failed in it: the rest stays on the writer (P-3 step 3).
    pub reader_failed: bool,
    /// The writer's last RFQ marker, validated XID list and LSN.
    pub marker: Option<Marker>,
    pub xids: String,
    pub xids_valid: bool,
    pub lsn: Lsn,
    /// When the writer's block was last touched for a read split off it (P-5, host time).
    pub touched_at: Option<u64>,
}

impl TxnState {
    pub(crate) fn begin(isolation: Option<Isolation>) -> TxnState {
        TxnState {
            active: true,
            isolation,
            read_only_prefix: true,
            xids_valid: true,
            ..TxnState::default()
        }
    }
}

/// S-4 hazards: state that lives only on the writer connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hazards(u8);

impl Hazards {
    pub(crate) const TEMP: Hazards = Hazards(1 << 0);
    pub(crate) const ADVISORY_LOCK: Hazards = Hazards(1 << 1);
    pub(crate) const HOLD_CURSOR: Hazards = Hazards(1 << 2);
    pub(crate) const LISTEN: Hazards = Hazards(1 << 3);
    pub(crate) const PREPARE: Hazards = Hazards(1 << 4);
    /// Code the engine cannot see into ran while placeholder settings are not covered by
    /// `custom_settings` (S-5): the writer's state cannot be captured whole.
    pub(crate) const UNSEEN_CODE: Hazards = Hazards(1 << 5);
    /// `setseed()` ran, or a `LOAD`: state of the writer's backend that no capture sees and
    /// `DISCARD ALL` does not undo (the session's random sequence, a loaded library's hooks),
    /// for the rest of the session.
    pub(crate) const BACKEND_LOCAL: Hazards = Hazards(1 << 6);
    /// A statement the engine could not read ran on the writer (text not UTF-8, or longer than
    /// `max_inspected_message_bytes`, sent as a Query or a Parse): it may have done anything a statement
    /// can — set a role or a placeholder, LISTEN, PREPARE, `setseed()` — and no capture sees all
    /// of that, so the session's reads stay on the writer for the rest of the session (S-4, S-5).
    pub(crate) const UNREAD: Hazards = Hazards(1 << 7);
    /// The hazards a capture can tell ended: it asks the writer whether temporary objects,
    /// SQL-prepared statements and advisory locks are left.
    pub(crate) const ENDS_BY_CAPTURE: Hazards =
        Hazards(Self::TEMP.0 | Self::PREPARE.0 | Self::ADVISORY_LOCK.0);

    pub(crate) fn any(self) -> bool {
        self.0 != 0
    }

    pub(crate) fn set(&mut self, h: Hazards) {
        self.0 |= h.0;
    }

    pub(crate) fn clear(&mut self, h: Hazards) {
        self.0 &= !h.0;
    }

    /// Whether any of `h` is set.
    pub(crate) fn has(self, h: Hazards) -> bool {
        self.0 & h.0 != 0
    }

    /// Clears every hazard but those of `keep`.
    pub(crate) fn retain(&mut self, keep: &[Hazards]) {
        self.0 &= keep.iter().fold(0, |m, h| m | h.0);
    }
}

/// Most names of each kind (cursors, channels, a block's LISTEN/UNLISTEN) [`HeldNames`] follows:
/// beyond it the hazard stays until it is cleared whole (`CLOSE ALL`, `UNLISTEN *`,
/// `DISCARD ALL`).
pub(crate) const MAX_HELD_NAMES: usize = 64;

/// S-4: what the two hazards that end by name are made of — the `WITH HOLD` cursors open on the
/// writer and the channels it listens on — so each clears once nothing of it is left (a psycopg
/// `cursor(name, withhold=True)` closed with `CLOSE "name"`; `LISTEN x; UNLISTEN x`). Names are
/// [`NameKey`](crate::classify::NameKey)s (the name as the server reads it). Held by the session
/// boxed, only while there is something to hold: an idle session without either hazard pays 8
/// bytes for the empty box pointer.
///
/// What the server does, measured on PostgreSQL 15: a `DECLARE … WITH HOLD` takes effect at once
/// and is undone by a ROLLBACK of the block it ran in (and of its savepoint); a `CLOSE` takes
/// effect at once and no ROLLBACK brings the cursor back; `LISTEN`/`UNLISTEN` take effect at the
/// COMMIT of their block, in order, and a ROLLBACK (also to a savepoint) drops them; `DISCARD
/// ALL` ends both, `DISCARD TEMP/PLANS/SEQUENCES` neither. Whatever the engine cannot tell for
/// sure counts for the hazard: a name it cannot follow makes the kind *unknown* until cleared
/// whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeldNames {
    /// Open `WITH HOLD` cursors: key, and whether the open block declared it (then its
    /// ROLLBACK closes it).
    cursors: Vec<(u64, bool)>,
    /// Channels listened on.
    channels: Vec<u64>,
    /// The open block's `LISTEN` (key, true) and `UNLISTEN` (key, false; key 0: `UNLISTEN *`),
    /// in order: they take effect at its COMMIT.
    pending: Vec<(u64, bool)>,
    /// A `WITH HOLD` cursor the engine cannot name may be open.
    cursors_unknown: bool,
    /// A channel the engine cannot name may be listened on.
    channels_unknown: bool,
}

impl HeldNames {
    /// The session has a `WITH HOLD` cursor open, as far as the engine can tell.
    pub(crate) fn has_cursor(&self) -> bool {
        self.cursors_unknown || !self.cursors.is_empty()
    }

    /// The session listens on a channel, or will once its block commits.
    pub(crate) fn has_channel(&self) -> bool {
        self.channels_unknown || !self.channels.is_empty() || self.pending.iter().any(|p| p.1)
    }

    /// Nothing held: the box can go.
    pub(crate) fn is_empty(&self) -> bool {
        *self == HeldNames::default()
    }

    /// `DECLARE … WITH HOLD` ran (`in_block`: inside a transaction block, which takes it back
    /// if it rolls back).
    pub(crate) fn declare(&mut self, key: NameKey, in_block: bool) {
        let k = key.get();
        if !key.is_readable() || self.cursors.len() >= MAX_HELD_NAMES {
            self.cursors_unknown = true;
        } else if let Some(c) = self.cursors.iter_mut().find(|c| c.0 == k) {
            // A name the engine holds already (a DECLARE it counted although it failed).
            c.1 &= in_block;
        } else {
            self.cursors.push((k, in_block));
        }
    }

    /// `CLOSE name` succeeded: at once, whatever block it ran in.
    pub(crate) fn close(&mut self, key: NameKey) {
        self.cursors.retain(|c| c.0 != key.get());
    }

    /// `CLOSE ALL` succeeded.
    pub(crate) fn close_all(&mut self) {
        self.cursors.clear();
        self.cursors_unknown = false;
    }

    /// `LISTEN` ran: at once outside a block (its implicit transaction committed), at the
    /// block's COMMIT inside one.
    pub(crate) fn listen(&mut self, key: NameKey, in_block: bool) {
        if !key.is_readable() {
            self.channels_unknown = true;
        } else if in_block {
            if self.pending.len() >= MAX_HELD_NAMES {
                self.channels_unknown = true;
            } else {
                self.pending.push((key.get(), true));
            }
        } else {
            self.add_channel(key.get());
        }
    }

    /// `UNLISTEN name` (`None`: `UNLISTEN *`) succeeded: at once outside a block, at the
    /// block's COMMIT inside one. A removal the engine cannot follow is dropped (the hazard
    /// stays).
    pub(crate) fn unlisten(&mut self, key: Option<NameKey>, in_block: bool) {
        let k = key.map_or(0, NameKey::get);
        if key.is_some_and(|k| !k.is_readable()) {
            return;
        }
        if in_block {
            if self.pending.len() < MAX_HELD_NAMES {
                self.pending.push((k, false));
            }
        } else {
            self.remove_channel(k);
        }
    }

    /// The writer listens on a channel the engine did not see named (the capture found one,
    /// listened on by code: a trigger's or a `DO` block's `LISTEN`).
    pub(crate) fn listening_unseen(&mut self) {
        self.channels_unknown = true;
    }

    fn add_channel(&mut self, k: u64) {
        if self.channels.contains(&k) {
            return;
        }
        if self.channels.len() >= MAX_HELD_NAMES {
            self.channels_unknown = true;
        } else {
            self.channels.push(k);
        }
    }

    fn remove_channel(&mut self, k: u64) {
        if k == 0 {
            self.channels.clear();
            self.channels_unknown = false;
        } else {
            self.channels.retain(|&c| c != k);
        }
    }

    /// The block committed: its cursors stay open, its LISTEN/UNLISTEN take effect in order.
    pub(crate) fn commit(&mut self) {
        for c in &mut self.cursors {
            c.1 = false;
        }
        for (k, listen) in std::mem::take(&mut self.pending) {
            if listen {
                self.add_channel(k);
            } else {
                self.remove_channel(k);
            }
        }
    }

    /// The block rolled back: the cursors it declared are gone (those it closed stay closed),
    /// its LISTEN/UNLISTEN never happened.
    pub(crate) fn rollback(&mut self) {
        self.cursors.retain(|c| !c.1);
        self.pending.clear();
    }

    /// `ROLLBACK TO SAVEPOINT`: the engine does not follow where savepoints are, so it keeps
    /// the block's cursors (the server may have closed some) and its LISTENs (the server may
    /// have dropped some), and drops its UNLISTENs (the server may have dropped them).
    pub(crate) fn rollback_to_savepoint(&mut self) {
        self.pending.retain(|p| p.1);
    }

    /// The block ended and the engine cannot tell how (a COMMIT in a string that failed, an end
    /// it did not see): what it may have added stays, what it may have removed does not count.
    pub(crate) fn block_ended_unseen(&mut self) {
        self.rollback_to_savepoint();
        self.commit();
    }

    /// Whether a block's outcome still decides something.
    pub(crate) fn in_block(&self) -> bool {
        !self.pending.is_empty() || self.cursors.iter().any(|c| c.1)
    }
}

/// Whether the session's state is known, and how it was learned (S-5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Known {
    /// Known: nothing changed since the last capture (or since startup).
    #[default]
    Yes,
    /// Something may have changed it: a capture is due (at the next point outside a
    /// transaction block).
    Due,
    /// The capture is in flight.
    Capturing,
    /// The capture failed or answered something unusable: reads stay on the writer until a
    /// capture succeeds.
    Failed,
    /// Never captured: a session the engine does not route (a replication connection, whose
    /// walsender takes no extended-protocol statement), where nothing waits for a capture.
    Never,
}

/// S-5: when something that failed is tried again — a capture ([`Backoff::CAPTURE`]) or a
/// reader's replay after two refusals ([`Backoff::REPLAY`]). Both can fail for a while only (a
/// lock the capture waited for past the session's `lock_timeout`, a cancel or a statement
/// timeout that hit it; a standby configured apart from the primary until its configuration is
/// put back): kept failed, the session's reads stayed on the writer until the session's state
/// changed again, or for good. Each is tried again after `first` of the session's units
/// answered on the writer outside a transaction block, failures in a row doubling the wait up
/// to `most`, so one that does not pass costs little. Two bytes each, in the session itself: an
/// idle session's settings have no room left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Failures in a row.
    failed: u8,
    /// Units answered since the last of them.
    since: u8,
}

impl Backoff {
    /// A failed capture: again after 1, 2, 4, … 64 units.
    pub(crate) const CAPTURE: (u8, u8) = (1, 64);
    /// A replay refused twice: again after 16, 32, 64, 128 units (each attempt costs a reader
    /// connection's replay, and a refused read runs again on the writer).
    pub(crate) const REPLAY: (u8, u8) = (16, 128);
    /// While temporary objects, SQL-prepared statements or advisory locks may be left (S-4): a capture after
    /// 1, 2, 4, … 64 units asks the writer whether they still are.
    pub(crate) const HAZARD: (u8, u8) = (1, 64);

    /// It failed.
    pub(crate) fn failed(&mut self) {
        self.failed = self.failed.saturating_add(1);
        self.since = 0;
    }

    /// It succeeded.
    pub(crate) fn succeeded(&mut self) {
        *self = Backoff::default();
    }

    /// A unit answered outside a transaction block while it is failed: whether to try again
    /// now, by `(first, most)`.
    pub(crate) fn due(&mut self, (first, most): (u8, u8)) -> bool {
        self.since = self.since.saturating_add(1);
        let doublings = self.failed.saturating_sub(1).min(8);
        let wait = (u16::from(first) << doublings).min(u16::from(most));
        u16::from(self.since) >= wait
    }
}

/// Most captured settings kept (names + values); beyond it the state counts as unknown.
const MAX_CAPTURED_BYTES: usize = 64 << 10;
/// Most custom (placeholder) setting names the session asks the capture for.
pub(crate) const MAX_CUSTOM_NAMES: usize = 64;

/// The name the settings digest is kept under among the entries (a space: no setting's name).
const DIGEST_ENTRY: &[u8] = crate::pool::SETTINGS_DIGEST_KEY;

/// One captured setting: name and value, as the server's text.
pub(crate) type Setting = (Box<[u8]>, Box<[u8]>);

/// S-5: the writer session's resulting state — session-level settings, session authorization
/// and role — as the writer itself reported it (the capture), so a reader runs with exactly the
/// same state. Values are the server's text of each setting; replay quotes them in hex.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SessionSettings {
    /// Session-level settings `(name, value)`, sorted by name; placeholder settings included.
    /// Among them, under [`DIGEST_ENTRY`] (no setting's name), the digest of every setting a
    /// statement can see on the writer session (the capture's kind 5, 64 hex digits): the replay
    /// asserts a reader connection's equals it, and it is part of the reader key, so a pooled
    /// connection checked against one digest never serves a session with another. Kept here,
    /// not in a field of its own: an idle session stays within its memory budget.
    entries: Vec<Setting>,
    /// `session_authorization` when it differs from the one the session logged in with.
    pub authorization: Option<Box<[u8]>>,
    /// `role` when set (not `none`).
    pub role: Option<Box<[u8]>>,
    /// The session authorization the writer reported at startup.
    pub login_authorization: Option<Box<[u8]>>,
    /// Placeholder setting names seen in the session's statements, asked for by the capture.
    pub custom_names: Vec<Box<[u8]>>,
    pub known: Known,
    /// Settings replays fresh reader connections refused (the login check among them): the
    /// first makes a capture due, the second keeps the session's reads on the writer
    /// ([`SessionSettings::replayable`]) until the session's [`Backoff::REPLAY`] tries a reader
    /// again: a reader logs in with something the writer's state cannot be replayed over — a
    /// placeholder an `ALTER ROLE … SET` made after the session logged in, a role it may no
    /// longer take, a standby configured apart from the primary (until it is put back).
    pub refusals: u8,
    /// The shorter of the writer session's `idle_session_timeout` and
    /// `idle_in_transaction_session_timeout` (0: neither), from the capture: the writer is
    /// touched before it is idle that long while the session reads on a reader.
    pub idle_timeout_ms: u32,
    /// The writer's configuration epoch when the last capture was sent (`WriterGroup::
    /// config_epoch`, its low 16 bits: room an idle session has): another one is a reload that
    /// capture may not have seen.
    pub conf_epoch: u16,
    /// E-2: the parse-rules count ([`ClientStatements::rules`](super::statements::ClientStatements))
    /// plus one under which a capture found the state held now (0: none known; any change of
    /// the state drops it). A later capture that finds the same state proves the rules
    /// unchanged since, whatever the engine feared in between (code it could not see into):
    /// the statements parsed then are parsed as now.
    pub rules_captured: u16,
    /// The parse-rules count when the capture in flight was sent.
    pub rules_at_capture: u16,
    /// Bumped on every change of what a reader must replay (caches derived from it compare).
    /// (`u32`, not wider: the two counts above share its word; 2^32 changes of a session's
    /// settings would take a capture round trip each.)
    version: u32,
}

impl SessionSettings {
    /// Nothing to replay: a fresh reader connection already has this state.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.authorization.is_none() && self.role.is_none()
    }

    /// Whether the state is known and a reader can be brought to it (S-5).
    pub(crate) fn replayable(&self) -> bool {
        self.known == Known::Yes && self.refusals < 2
    }

    pub(crate) fn version(&self) -> u64 {
        u64::from(self.version)
    }

    /// The captured settings as one number (never 0): equal settings, equal numbers (E-2's
    /// parse rules, [`ClientStatements::rules_now`](super::statements::ClientStatements)). The
    /// digest of every setting a statement can see when the capture gave one: the entries
    /// list settings by where their values came from, and a `RESET ALL` can leave the values
    /// the same and the sources not (asyncpg's pool: `jit` turned off, then reset, is listed
    /// from then on).
    pub(crate) fn state_hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        match self.digest() {
            Some(d) => d.hash(&mut h),
            None => {
                self.entries.hash(&mut h);
                self.authorization.hash(&mut h);
                self.role.hash(&mut h);
            }
        }
        h.finish() | 1
    }

    /// Settings in name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries
            .iter()
            .filter(|(n, _)| &n[..] != DIGEST_ENTRY)
            .map(|(n, v)| (&n[..], &v[..]))
    }

    /// The digest of the writer session's settings, from the last capture (64 hex digits).
    pub(crate) fn digest(&self) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(n, _)| &n[..] == DIGEST_ENTRY)
            .map(|(_, v)| &v[..])
    }

    /// Something may have changed the writer's state.
    pub(crate) fn mark_due(&mut self) {
        if !matches!(self.known, Known::Capturing | Known::Never) {
            self.known = Known::Due;
        }
    }

    /// Replaces the state with a capture's answer. Returns false (and marks the state failed)
    /// when the answer is too large to keep.
    pub(crate) fn replace(
        &mut self,
        mut entries: Vec<Setting>,
        authorization: Option<Box<[u8]>>,
        role: Option<Box<[u8]>>,
        digest: Option<Box<[u8]>>,
    ) -> bool {
        // Anything but 64 hex digits is no digest (and never reaches a statement's text).
        entries.retain(|(n, _)| &n[..] != DIGEST_ENTRY);
        if let Some(d) = digest.filter(|d| d.len() == 64 && d.iter().all(u8::is_ascii_hexdigit)) {
            entries.push((DIGEST_ENTRY.into(), d));
        }
        let size: usize = entries.iter().map(|(n, v)| n.len() + v.len()).sum();
        if size > MAX_CAPTURED_BYTES {
            self.known = Known::Failed;
            return false;
        }
        entries.sort();
        entries.dedup_by(|a, b| a.0 == b.0);
        self.idle_timeout_ms = entries
            .iter()
            .filter(|(n, _)| {
                n[..].eq_ignore_ascii_case(b"idle_session_timeout")
                    || n[..].eq_ignore_ascii_case(b"idle_in_transaction_session_timeout")
            })
            .filter_map(|(_, v)| std::str::from_utf8(v).ok()?.parse::<u32>().ok())
            .filter(|&ms| ms > 0)
            .min()
            .unwrap_or(0);
        let authorization = authorization.filter(|a| Some(a) != self.login_authorization.as_ref());
        // `current_setting('role')` says `none` for no role; a role may be named `NONE` or
        // `None` (only the lower-case name is reserved): byte for byte.
        let role = role.filter(|r| &r[..] != b"none");
        if entries != self.entries || authorization != self.authorization || role != self.role {
            self.entries = entries;
            self.authorization = authorization;
            self.role = role;
            self.version = self.version.wrapping_add(1);
        }
        self.known = Known::Yes;
        true
    }

    /// `DISCARD ALL` / a fresh start: the startup state.
    pub(crate) fn reset(&mut self) {
        if !self.is_empty() {
            self.version = self.version.wrapping_add(1);
        }
        self.rules_captured = 0;
        self.entries.clear();
        self.authorization = None;
        self.role = None;
    }

    /// Remembers a placeholder setting name (`app.tenant`) for the capture. Returns false when
    /// the name cannot be followed: the bound is reached, or it has a byte the capture's list of
    /// names does not carry ([`super::hidden::plain_name_byte`]).
    pub(crate) fn note_custom_name(&mut self, name: &[u8]) -> bool {
        if !name.iter().all(|&b| super::hidden::plain_name_byte(b)) {
            return false;
        }
        if self
            .custom_names
            .iter()
            .any(|n| n[..].eq_ignore_ascii_case(name))
        {
            return true;
        }
        if self.custom_names.len() >= MAX_CUSTOM_NAMES || name.len() > 63 {
            return false;
        }
        self.custom_names.push(name.to_ascii_lowercase().into());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s1_lsns_only_rise_and_target_is_max() {
        let mut l = LsnState::default();
        l.writer_positioned(Lsn(100), true);
        l.writer_positioned(Lsn(50), true);
        assert_eq!(l.write_lsn, Lsn(100));
        l.reader_positioned(Lsn(120));
        assert_eq!(l.target(), Lsn(120));
        l.writer_positioned(Lsn(130), false);
        assert_eq!((l.write_lsn, l.observed_lsn), (Lsn(100), Lsn(130)));
    }

    /// Drives `c` through `n` writes that each get a probe when due and whose probes never pay;
    /// returns which writes were probed.
    fn unpaid_writes(c: &mut ProbeCredit, n: usize) -> Vec<bool> {
        (0..n)
            .map(|_| {
                c.new_write();
                let due = c.due();
                if due {
                    c.sent();
                    c.learned();
                } else {
                    c.skipped();
                }
                due
            })
            .collect()
    }

    #[test]
    fn w7_adaptive_probe_backs_off_after_unpaid_probes_and_comes_back_when_one_pays() {
        let mut c = ProbeCredit::default();
        let probed = unpaid_writes(&mut c, 200);
        // The first writes are all probed; then fewer and fewer, never rarer than every 64th.
        assert!(probed[..4].iter().all(|&p| p), "{probed:?}");
        assert!(
            !probed[4],
            "four unpaid probes in a row: the fifth write is not probed"
        );
        let at: Vec<usize> = (0..200).filter(|&i| probed[i]).collect();
        let gaps: Vec<usize> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "gaps grow: {gaps:?}");
        assert_eq!(*gaps.last().unwrap(), 64, "{gaps:?}");
        assert!(gaps.iter().all(|&g| g <= 64));
        // A read on a reader while the last probe's position is unused: probing every write again.
        while !c.due() {
            c.new_write();
            c.skipped();
        }
        c.new_write();
        c.sent();
        c.learned();
        c.read_on_reader();
        assert!(unpaid_writes(&mut c, 4).iter().all(|&p| p));
        // A read on a reader after the position was superseded by an unprobed write pays nothing.
        let mut c = ProbeCredit::default();
        unpaid_writes(&mut c, 100);
        c.new_write();
        c.skipped();
        c.read_on_reader();
        assert!(!c.due());
        assert!(c.has_skipped());
    }

    #[test]
    fn s2_generation_change_clears() {
        let mut l = LsnState {
            generation: 1,
            ..LsnState::default()
        };
        l.writer_positioned(Lsn(100), true);
        l.write_unknown = true;
        assert!(!l.adopt_generation(1));
        assert!(l.adopt_generation(2));
        assert_eq!(l.target(), Lsn::ZERO);
        assert!(!l.unknown());
        assert_eq!(l.generation, 2);
    }

    fn e(n: &str, v: &str) -> (Box<[u8]>, Box<[u8]>) {
        (n.as_bytes().into(), v.as_bytes().into())
    }

    #[test]
    fn s5_a_role_named_none_in_another_case_is_a_role_not_the_absence_of_one() {
        for name in ["NONE", "None", "nOne"] {
            let mut s = SessionSettings::default();
            s.replace(
                Vec::new(),
                None,
                Some(name.as_bytes().to_vec().into()),
                None,
            );
            assert_eq!(s.role.as_deref(), Some(name.as_bytes()), "{name}");
        }
        let mut s = SessionSettings::default();
        s.replace(Vec::new(), None, Some(b"none".to_vec().into()), None);
        assert_eq!(s.role, None);
    }

    #[test]
    fn s5_capture_replaces_state_and_versions_only_on_change() {
        let mut s = SessionSettings {
            login_authorization: Some(b"app".to_vec().into()),
            ..SessionSettings::default()
        };
        assert!(s.is_empty());
        s.mark_due();
        assert_eq!(s.known, Known::Due);
        assert!(s.replace(
            vec![e("timezone", "UTC"), e("datestyle", "ISO, YMD")],
            Some(b"app".to_vec().into()),
            Some(b"none".to_vec().into()),
            None,
        ));
        assert_eq!(s.known, Known::Yes);
        // Sorted; the login authorization and role `none` replay nothing.
        let names: Vec<&[u8]> = s.iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec![&b"datestyle"[..], b"timezone"]);
        assert!(s.authorization.is_none() && s.role.is_none());
        let v = s.version();
        s.replace(
            vec![e("datestyle", "ISO, YMD"), e("timezone", "UTC")],
            None,
            None,
            None,
        );
        assert_eq!(s.version(), v, "the same state is not a change");
        s.replace(vec![], None, Some(b"reader_role".to_vec().into()), None);
        assert!(s.version() > v);
        assert_eq!(s.role.as_deref(), Some(&b"reader_role"[..]));
        s.reset();
        assert!(s.is_empty());
    }

    #[test]
    fn s4_held_names_follow_the_servers_rules_and_go_when_empty() {
        // Allocated only while a hazard exists: keep it small.
        assert!(std::mem::size_of::<HeldNames>() <= 80);
        let k = |n: &str| NameKey::of(n.as_bytes());
        let mut h = HeldNames::default();
        h.declare(k("h"), true);
        assert!(h.has_cursor() && h.in_block());
        h.rollback();
        assert!(h.is_empty(), "declared in a block that rolled back");
        h.declare(k("h"), true);
        h.commit();
        assert!(h.has_cursor() && !h.in_block());
        h.close(k("H"));
        assert!(h.has_cursor(), "another name");
        h.close(k("h"));
        assert!(h.is_empty());
        h.listen(k("x"), false);
        h.unlisten(Some(k("x")), true);
        h.rollback();
        assert!(h.has_channel(), "the UNLISTEN was rolled back");
        h.unlisten(None, true);
        h.listen(k("d"), true);
        h.commit();
        assert_eq!(h.channels, vec![k("d").get()], "in order at COMMIT");
        h.unlisten(Some(k("d")), true);
        h.block_ended_unseen();
        assert!(h.has_channel(), "an unseen end keeps what may have been");
        h.unlisten(Some(NameKey::UNREADABLE), false);
        assert!(h.has_channel());
        h.unlisten(None, false);
        assert!(h.is_empty());
        for i in 0..=MAX_HELD_NAMES {
            h.listen(k(&format!("c{i}")), false);
        }
        for i in 0..=MAX_HELD_NAMES {
            h.unlisten(Some(k(&format!("c{i}"))), false);
        }
        assert!(
            h.has_channel() && h.channels.is_empty(),
            "one name was not followed"
        );
        h.unlisten(None, false);
        assert!(h.is_empty());
    }

    #[test]
    fn s5_custom_names_are_bounded_and_case_folded() {
        let mut s = SessionSettings::default();
        assert!(s.note_custom_name(b"App.Tenant"));
        assert!(s.note_custom_name(b"app.tenant"));
        assert_eq!(s.custom_names.len(), 1);
        for i in 0..MAX_CUSTOM_NAMES - 1 {
            assert!(s.note_custom_name(format!("app.x{i}").as_bytes()));
        }
        assert!(!s.note_custom_name(b"app.one_too_many"));
    }
}
