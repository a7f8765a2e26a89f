//! A bounded, thread-safe cache of classifications keyed by the exact statement text.
//!
//! Applications send the same few hundred statement texts over and over; a hit costs one hash and
//! a short lock, and allocates nothing (lookup by `&str`; a [`Classification`] clones without
//! allocating). Memory is bounded by entry count and total key bytes per shard; a full shard is
//! simply cleared — crude, but O(1), deterministic and good enough for a working set that fits.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::Mutex;

use super::{statement, Classification, Limits, WriteFunctions};

/// Texts longer than this are classified every time: they are rare and would crowd out the rest.
pub const MAX_CACHED_LEN: usize = 16 * 1024;

/// Average key bytes budgeted per entry when sizing the byte bound.
const BYTES_PER_ENTRY: usize = 512;

const SHARDS: usize = 16;

/// FxHash (as in rustc): a multiply-rotate hash, fast on short keys. Not DoS-resistant; the
/// byte and entry bounds keep a hostile client from growing anything, only from evicting.
#[derive(Clone, Copy, Default)]
struct FxHasher {
    hash: u64,
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash ^ w).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // Spread the well-mixed high bits into the low bits the table indexes with.
        self.hash.rotate_left(26)
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

struct Shard {
    map: HashMap<Box<str>, Classification, FxBuild>,
    bytes: usize,
}

/// The classifier the engine shares between all sessions: a [`WriteFunctions`] list, the
/// [`Limits`], and the decision cache.
pub struct Classifier {
    write_functions: WriteFunctions,
    limits: Limits,
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
    /// A classifier caching up to `capacity` statement texts (0 disables the cache). Key bytes
    /// are bounded too: about 512 per entry, at least 16 KiB per shard.
    pub fn new(write_functions: WriteFunctions, capacity: usize) -> Classifier {
        Classifier::with_limits(write_functions, capacity, Limits::DEFAULT)
    }

    /// As [`Classifier::new`], with explicit classification limits.
    pub fn with_limits(
        write_functions: WriteFunctions,
        capacity: usize,
        limits: Limits,
    ) -> Classifier {
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
                })
            })
            .collect();
        Classifier {
            write_functions,
            limits,
            shards,
            shard_entries,
            shard_bytes,
        }
    }

    pub fn write_functions(&self) -> &WriteFunctions {
        &self.write_functions
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Classifies `sql` (see [`super::classify`]), from the cache when it was seen before.
    pub fn classify(&self, sql: &str) -> Classification {
        if self.shard_entries == 0 || sql.len() > MAX_CACHED_LEN {
            return self.classify_uncached(sql);
        }
        let mut h = FxHasher::default();
        h.write(sql.as_bytes());
        // The top bits of the product are the best mixed; after `finish`'s rotation they sit at
        // bits 22..26, away from both the bits the table indexes with and its 7-bit tags.
        let idx = (h.finish() >> 22) as usize % self.shards.len();
        let Some(shard) = self.shards.get(idx) else {
            return self.classify_uncached(sql);
        };
        if let Some(c) = shard.lock().map.get(sql) {
            return c.clone();
        }
        // Classify outside the lock; a racing thread may insert the same (equal) result first.
        let c = self.classify_uncached(sql);
        let mut s = shard.lock();
        if !s.map.contains_key(sql) {
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
        statement::classify_str(sql, &self.write_functions, &self.limits)
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
        }
    }
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("write_functions", &self.write_functions)
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
            let got = c.classify(&sql);
            assert_eq!(got.count(), 2);
            assert_eq!(got.statements()[1].kind, Kind::Write);
            assert!(c.cached_len() <= 100);
        }
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
            assert!(c.cached_bytes() <= MAX_CACHED_LEN);
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
        for i in 0..500 {
            c.classify(&format!(
                "SELECT abalance FROM pgbench_accounts WHERE aid = {i}"
            ));
        }
        assert_eq!(c.cached_len(), 500);
        let used = c.shards.iter().filter(|s| !s.lock().map.is_empty()).count();
        assert!(used >= SHARDS / 2, "only {used} shards used");
    }
}
