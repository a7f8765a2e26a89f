//! Session state (SPEC §3): LSN bookkeeping (S-1, S-2), transaction state (S-3), session hazards
//! and tracked settings (S-4). Plain data with small, explicit transitions.

use crate::classify::{Isolation, Var};
use crate::protocol::{Lsn, Marker};

/// S-1: what the session has written and observed, bound to a writer generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LsnState {
    pub write_lsn: Lsn,
    pub observed_lsn: Lsn,
    pub write_unknown: bool,
    pub observed_unknown: bool,
    pub generation: u64,
}

impl LsnState {
    /// The target of a read: max(write, observed).
    pub fn target(&self) -> Lsn {
        self.write_lsn.max(self.observed_lsn)
    }

    pub fn unknown(&self) -> bool {
        self.write_unknown || self.observed_unknown
    }

    /// S-2: forget everything learned under another generation. Returns whether anything was
    /// cleared (for the counter).
    pub fn adopt_generation(&mut self, generation: u64) -> bool {
        if self.generation == generation {
            return false;
        }
        let had = *self != LsnState::default_with(self.generation);
        *self = LsnState::default_with(generation);
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

/// S-3: the explicit transaction, as confirmed by the writer's RFQs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnState {
    /// Inside an explicit transaction block (writer RFQ `T` or `E`).
    pub active: bool,
    /// Writer RFQ `E`.
    pub failed: bool,
    /// Effective isolation; `None` when the transaction began in a way the engine did not see.
    pub isolation: Option<Isolation>,
    /// A SET / SET LOCAL / set_config ran inside it.
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
    /// Session-level SETs run inside the transaction: they take effect at COMMIT.
    pub pending_settings: Vec<(Var, String, Option<String>)>,
    /// A savepoint was rolled back after such a SET: which survive is unknown.
    pub settings_uncertain: bool,
}

impl TxnState {
    pub fn begin(isolation: Option<Isolation>) -> TxnState {
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
pub struct Hazards(pub u8);

impl Hazards {
    pub const TEMP: Hazards = Hazards(1 << 0);
    pub const ADVISORY_LOCK: Hazards = Hazards(1 << 1);
    pub const HOLD_CURSOR: Hazards = Hazards(1 << 2);
    pub const LISTEN: Hazards = Hazards(1 << 3);
    pub const PREPARE: Hazards = Hazards(1 << 4);
    pub const UNKNOWN_SET: Hazards = Hazards(1 << 5);

    pub fn any(self) -> bool {
        self.0 != 0
    }

    pub fn set(&mut self, h: Hazards) {
        self.0 |= h.0;
    }

    pub fn clear(&mut self, h: Hazards) {
        self.0 &= !h.0;
    }

    pub fn has(self, h: Hazards) -> bool {
        self.0 & h.0 != 0
    }
}

/// Tracked session settings (S-4): name → the client's own SET statement, replayed in front of
/// a statement on a reader connection opened for this session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Sorted by name (deterministic replay order and key hash).
    entries: Vec<(String, String)>,
    /// Bumped on every change (caches derived from the settings compare it).
    version: u64,
}

impl Settings {
    /// Records `SET name …` (its statement text), or forgets it when `statement` is `None`
    /// (RESET name, SET name TO DEFAULT).
    pub fn put(&mut self, name: &str, statement: Option<&str>) {
        self.version += 1;
        let name = name.to_ascii_lowercase();
        match self
            .entries
            .binary_search_by(|(n, _)| n.as_str().cmp(&name))
        {
            Ok(i) => match statement {
                Some(s) => self.entries[i].1 = s.to_string(),
                None => {
                    self.entries.remove(i);
                }
            },
            Err(i) => {
                if let Some(s) = statement {
                    self.entries.insert(i, (name, s.to_string()));
                }
            }
        }
    }

    pub fn clear(&mut self) {
        self.version += 1;
        self.entries.clear();
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(n, s)| (n.as_str(), s.as_str()))
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

    #[test]
    fn settings_are_sorted_and_reset() {
        let mut s = Settings::default();
        s.put("TimeZone", Some("SET TimeZone = 'UTC'"));
        s.put("search_path", Some("SET search_path = a"));
        assert_eq!(
            s.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            vec!["search_path", "timezone"]
        );
        s.put("timezone", None);
        assert_eq!(s.iter().count(), 1);
    }
}
