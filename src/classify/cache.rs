//! A bounded, thread-safe cache of classifications keyed by the exact statement text.
//!
//! Applications send the same few hundred statement texts over and over; a hit costs one hash and
//! a short lock, and allocates nothing (lookup by `&str`; a [`Classification`] clones without
//! allocating). Memory is bounded by entry count and total key bytes per shard; a full shard is
//! simply cleared — crude, but O(1), deterministic and good enough for a working set that fits.
//!
//! A text is admitted on its second sighting only. Texts with inline literals (`… WHERE aid =
//! 48213`) are mostly seen once; admitting them would cost an allocation each and, by filling
//! shards, clear the statements that do repeat. Each shard remembers the hashes of recent misses
//! in a small table of fingerprints (a "doorkeeper", as in TinyLFU; newer misses overwrite older
//! ones) and admits a text whose fingerprint it holds. A repeating text is classified cold twice
//! instead of once; a text seen once is admitted only by a 32-bit fingerprint collision.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use super::functions::{FunctionCatalogs, FunctionPolicy};
use super::{statement, Classification, Limits, WriteFunctions};

/// Texts longer than this are classified every time: they are rare and would crowd out the rest.
pub const MAX_CACHED_LEN: usize = 16 * 1024;

/// Average key bytes budgeted per entry when sizing the byte bound.
const BYTES_PER_ENTRY: usize = 512;

const SHARDS: usize = 16;

/// The text's hash for the shard choice and the doorkeeper: FxHash (`rustc-hash`, fast on short
/// keys; not DoS-resistant — the byte and entry bounds keep a hostile client from growing
/// anything, only from evicting), finished by MurmurHash3's fmix64 so that every bit depends on
/// every input byte (the shard index, the doorkeeper positions and its fingerprint take
/// different bit ranges).
fn text_hash(sql: &str) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write(sql.as_bytes());
    let mut x = h.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

struct Shard {
    map: HashMap<Box<str>, Classification, FxBuildHasher>,
    bytes: usize,
    /// The doorkeeper: 32-bit fingerprints (never 0; 0 is an empty slot) of texts missed once,
    /// each at one of two positions derived from its hash.
    seen: Box<[u32]>,
}

/// Doorkeeper slots per shard: four per entry the shard holds, 256 to 16 Ki (1 to 64 KiB).
fn doorkeeper_slots(shard_entries: usize) -> usize {
    shard_entries
        .saturating_mul(4)
        .clamp(256, 16384)
        .next_power_of_two()
}

impl Shard {
    /// A text's fingerprint and its two doorkeeper positions, from its [`text_hash`].
    fn seen_slots(&self, hash: u64) -> (u32, [usize; 2]) {
        // Positions from bits 0.. and 42.. (bits 22..26 are the same for a whole shard); the
        // fingerprint from a further multiply, so it is not the positions' bits again.
        let mask = (self.seen.len() - 1) as u64;
        let fp = (hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 | 1;
        (fp, [(hash & mask) as usize, ((hash >> 42) & mask) as usize])
    }

    /// Whether the text was seen; if it was, forgets it (it is about to be admitted), otherwise
    /// remembers it in an empty position or, with both taken, over the older-looking one.
    fn seen_before(&mut self, hash: u64) -> bool {
        let (fp, pos) = self.seen_slots(hash);
        for i in pos {
            if let Some(e) = self.seen.get_mut(i).filter(|e| **e == fp) {
                *e = 0;
                return true;
            }
        }
        let free = pos.into_iter().find(|&i| self.seen.get(i) == Some(&0));
        // Neither free: evict by a bit of the hash, so a pair of texts sharing one position
        // does not keep evicting each other through the other.
        let victim = free.unwrap_or(pos[(hash & 1) as usize]);
        if let Some(e) = self.seen.get_mut(victim) {
            *e = fp;
        }
        false
    }
}

/// The classifier the engine shares between all sessions: the [`FunctionPolicy`], the
/// [`Limits`], the decision cache (by text), and the per-database catalogues the host reports
/// (shared with the engine, so a replaced catalogue takes effect at once, cache and all).
pub struct Classifier {
    policy: FunctionPolicy,
    limits: Limits,
    catalogs: Arc<FunctionCatalogs>,
    shards: Box<[Mutex<Shard>]>,
    shard_entries: usize,
    shard_bytes: usize,
}

// Shared by every host thread.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Classifier>();
};

impl Classifier {
    /// A classifier caching up to `capacity` statement texts (0 disables the cache), with the
    /// default F-policy for these write functions and no catalogues. Key bytes are bounded too:
    /// about 512 per entry, at least 16 KiB per shard.
    pub fn new(write_functions: WriteFunctions, capacity: usize) -> Classifier {
        Classifier::with_limits(write_functions, capacity, Limits::DEFAULT)
    }

    /// As [`Classifier::new`], with explicit classification limits.
    pub fn with_limits(
        write_functions: WriteFunctions,
        capacity: usize,
        limits: Limits,
    ) -> Classifier {
        Classifier::with_policy(
            FunctionPolicy::new(write_functions),
            capacity,
            limits,
            Arc::new(FunctionCatalogs::new()),
        )
    }

    /// The full constructor: an F-policy and the catalogues to finish classifications against.
    pub fn with_policy(
        policy: FunctionPolicy,
        capacity: usize,
        limits: Limits,
        catalogs: Arc<FunctionCatalogs>,
    ) -> Classifier {
        policy.builtins().prepare();
        // Enough shards to keep host threads off each other's locks, each worth clearing.
        let nshards = (capacity / 64).clamp(1, SHARDS);
        let shard_entries = capacity.div_ceil(nshards);
        // Each shard can hold at least one maximal key.
        let shard_bytes = (shard_entries.saturating_mul(BYTES_PER_ENTRY)).max(MAX_CACHED_LEN);
        let shards = (0..nshards)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::default(),
                    bytes: 0,
                    seen: vec![0; doorkeeper_slots(shard_entries)].into_boxed_slice(),
                })
            })
            .collect();
        Classifier {
            policy,
            limits,
            catalogs,
            shards,
            shard_entries,
            shard_bytes,
        }
    }

    pub fn write_functions(&self) -> &WriteFunctions {
        &self.policy.write_functions
    }

    pub fn policy(&self) -> &FunctionPolicy {
        &self.policy
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The per-database catalogues classifications are finished against.
    pub fn catalogs(&self) -> &Arc<FunctionCatalogs> {
        &self.catalogs
    }

    /// Classifies `sql` for a database whose catalogue is not known (see [`super::classify`]).
    pub fn classify(&self, sql: &str) -> Classification {
        self.policy.finish(self.classify_text(sql), None)
    }

    /// Classifies `sql` for a session connected to `database` (the startup packet's `database`):
    /// the text's classification, from the cache when it was seen before, finished against that
    /// database's reported catalogue (SPEC §7). Statements that call no function, or only
    /// built-ins of a database whose catalogue shadows none, pay nothing for the finish.
    pub fn classify_in(&self, database: &[u8], sql: &str) -> Classification {
        let c = self.classify_text(sql);
        if !self.catalogs.needed_for(&c) {
            return self.policy.finish(c, None);
        }
        let catalog = self.catalogs.get(database);
        self.policy.finish(c, catalog.as_deref())
    }

    /// The text-only classification (cached).
    fn classify_text(&self, sql: &str) -> Classification {
        if self.shard_entries == 0 || sql.len() > MAX_CACHED_LEN {
            return self.classify_uncached(sql);
        }
        // Bits 22.. choose the shard: away from the doorkeeper's positions (low bits, 42..).
        let hash = text_hash(sql);
        let idx = (hash >> 22) as usize % self.shards.len();
        let Some(shard) = self.shards.get(idx) else {
            return self.classify_uncached(sql);
        };
        if let Some(c) = shard.lock().map.get(sql) {
            return c.clone();
        }
        // Classify outside the lock; a racing thread may insert the same (equal) result first.
        let c = self.classify_uncached(sql);
        let mut s = shard.lock();
        // Admitted on its second sighting only (see the module documentation).
        if !s.map.contains_key(sql) && s.seen_before(hash) {
            if s.map.len() >= self.shard_entries || s.bytes + sql.len() > self.shard_bytes {
                s.map.clear();
                s.bytes = 0;
            }
            s.map.insert(Box::from(sql), c.clone());
            s.bytes += sql.len();
        }
        c
    }

    fn classify_uncached(&self, sql: &str) -> Classification {
        statement::classify_str(sql, self.policy.rules(), &self.limits)
    }

    /// Entries currently cached.
    pub fn cached_len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Key bytes currently cached.
    pub fn cached_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }

    /// Drops every cached entry.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock();
            s.map.clear();
            s.bytes = 0;
            s.seen.fill(0);
        }
    }
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("policy", &self.policy)
            .field("catalogs", &self.catalogs.len())
            .field("limits", &self.limits)
            .field("shards", &self.shards.len())
            .field("shard_entries", &self.shard_entries)
            .field("shard_bytes", &self.shard_bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{classify, Kind};

    #[test]
    fn hit_equals_miss_and_bounds_hold() {
        let c = Classifier::new(WriteFunctions::defaults(), 100);
        let a = c.classify("SELECT 1");
        let b = c.classify("SELECT 1");
        assert_eq!(a, b);
        assert_eq!(a, classify("SELECT 1", &WriteFunctions::defaults()));
        assert_eq!(c.cached_len(), 1);
        for i in 0..1000 {
            let sql = format!("SELECT {i}; UPDATE t SET x = {i}");
            for _ in 0..3 {
                let got = c.classify(&sql);
                assert_eq!(got.count(), 2);
                assert_eq!(got.statements()[1].kind, Kind::Write);
                assert!(c.cached_len() <= 100);
            }
        }
        assert!(c.cached_len() > 0);
        c.clear();
        assert_eq!(c.cached_len(), 0);
        assert_eq!(c.cached_bytes(), 0);
    }

    #[test]
    fn byte_bound_holds_and_long_texts_are_not_cached() {
        let c = Classifier::new(WriteFunctions::defaults(), 4);
        let long = format!("SELECT '{}'", "x".repeat(MAX_CACHED_LEN));
        assert!(c.classify(&long).is_replica_safe());
        assert_eq!(c.cached_len(), 0);
        for i in 0..50 {
            let sql = format!("SELECT '{}' /* {i} */", "y".repeat(10_000));
            c.classify(&sql);
            c.classify(&sql);
            assert!(c.cached_bytes() <= MAX_CACHED_LEN);
            assert!(c.cached_bytes() >= 10_000, "a repeated text is cached");
        }
    }

    #[test]
    fn zero_capacity_disables_the_cache() {
        let c = Classifier::new(WriteFunctions::defaults(), 0);
        assert!(c.classify("SELECT 1").is_replica_safe());
        assert_eq!(c.cached_len(), 0);
    }

    #[test]
    fn many_shards_spread_keys() {
        let c = Classifier::new(WriteFunctions::defaults(), 64 * SHARDS);
        // Admitted on a second sighting; a third pass catches the few whose first mark the
        // doorkeeper lost to a later text.
        for _ in 0..3 {
            for i in 0..500 {
                c.classify(&format!(
                    "SELECT abalance FROM pgbench_accounts WHERE aid = {i}"
                ));
            }
        }
        assert_eq!(c.cached_len(), 500);
        let used = c.shards.iter().filter(|s| !s.lock().map.is_empty()).count();
        assert!(used >= SHARDS / 2, "only {used} shards used");
    }

    #[test]
    fn texts_seen_once_are_not_admitted_and_do_not_evict_the_repeating_ones() {
        let c = Classifier::new(WriteFunctions::defaults(), 64);
        let hot: Vec<String> = (0..20).map(|i| format!("SELECT * FROM t{i}")).collect();
        for _ in 0..2 {
            for sql in &hot {
                c.classify(sql);
            }
        }
        assert_eq!(c.cached_len(), hot.len());
        // pgbench-like texts, each with its own literal: classified right, never cached, and
        // the hot set survives them.
        for aid in 0..10_000 {
            let sql = format!("SELECT abalance FROM pgbench_accounts WHERE aid = {aid}");
            assert!(c.classify(&sql).is_replica_safe());
        }
        assert_eq!(c.cached_len(), hot.len());
        for sql in &hot {
            let shard = c
                .shards
                .iter()
                .find(|s| s.lock().map.contains_key(sql.as_str()));
            assert!(shard.is_some(), "{sql} was evicted");
        }
    }
}
