//! Engine-wide knowledge of backend connections the session hands back to the host's pool:
//! which engine statements each reader connection has prepared (SPEC E-2: it travels with the
//! connection). Keyed by the host's connection id; bounded. The host reports connections it
//! closes itself (`Engine::connection_closed`) so their ids can be reused.

use std::collections::VecDeque;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::ids::ConnId;

/// Most engine statements kept prepared on one reader connection; beyond it the least
/// recently used is closed.
pub(crate) const MAX_CONN_STATEMENTS: usize = 256;

/// The engine statements prepared on one backend connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConnStatements {
    /// `(hash, last use)`, in no particular order.
    names: Vec<(u64, u64)>,
    clock: u64,
    /// The list is complete. When it is not (a pooled connection whose history the engine
    /// lost), each hidden Parse is preceded by a Close of the same name, which is harmless if
    /// the statement does not exist.
    pub(crate) complete: bool,
    /// [`Conns::ddl_epoch`] when a session last took the connection: its statements were
    /// prepared no earlier than that (32 bits: it shares the padding after `complete`, the
    /// writer's connection holds one in every session; compared for equality only).
    epoch: u32,
}

impl ConnStatements {
    /// A connection with nothing prepared (opened afresh, or reset).
    pub(crate) fn fresh() -> ConnStatements {
        ConnStatements {
            complete: true,
            ..ConnStatements::default()
        }
    }

    pub(crate) fn has(&mut self, hash: u64) -> bool {
        self.clock += 1;
        let clock = self.clock;
        match self.names.iter_mut().find(|(h, _)| *h == hash) {
            Some(e) => {
                e.1 = clock;
                true
            }
            None => false,
        }
    }

    /// Records a statement prepared; returns the one to close first when the connection is
    /// full.
    pub(crate) fn add(&mut self, hash: u64) -> Option<u64> {
        self.clock += 1;
        if self.names.iter().any(|(h, _)| *h == hash) {
            return None;
        }
        let mut victim = None;
        if self.names.len() >= MAX_CONN_STATEMENTS {
            if let Some(i) = (0..self.names.len()).min_by_key(|&i| self.names[i].1) {
                victim = Some(self.names.swap_remove(i).0);
            }
        }
        self.names.push((hash, self.clock));
        victim
    }

    pub(crate) fn forget(&mut self, hash: u64) {
        self.names.retain(|(h, _)| *h != hash);
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// Most connections remembered; beyond it the oldest entry is forgotten (the session then
/// treats that connection's list as incomplete, which costs a Close before each Parse).
const MAX_CONNS: usize = 16384;

/// Independent parts of [`Conns`], by connection id: sessions on different threads attaching
/// and releasing different connections rarely wait for each other.
const SHARDS: usize = 16;

/// What the engine remembers of pooled connections between sessions. Every reader attach
/// takes an entry and every release puts one back, so both are O(1): the eviction order is
/// kept lazily (an entry taken leaves its place in `order` behind, recognised later by its
/// sequence number) instead of being searched and removed on every take.
#[derive(Debug)]
pub(crate) struct Conns {
    shards: [Mutex<ConnsInner>; SHARDS],
    /// DDL sessions of this engine ran, and DDL the host reported from elsewhere, counted: a
    /// statement prepared before it may describe rows of another shape now (E-2).
    ddl_epoch: std::sync::atomic::AtomicU64,
    /// DDL sessions of this engine ran, counted (what a host shares with other engines serving
    /// the same writer; DDL reported from elsewhere is not counted again).
    sessions_ddl: std::sync::atomic::AtomicU64,
}

impl Default for Conns {
    fn default() -> Self {
        Conns {
            shards: std::array::from_fn(|_| Mutex::new(ConnsInner::default())),
            ddl_epoch: std::sync::atomic::AtomicU64::new(0),
            sessions_ddl: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

#[derive(Debug, Default)]
struct ConnsInner {
    /// Each remembered connection's statements and the sequence number of its `put`.
    map: FxHashMap<ConnId, (ConnStatements, u64)>,
    /// `(connection, sequence number)` in `put` order, oldest first; an entry whose number is
    /// no longer the map's is stale (taken since) and skipped.
    order: VecDeque<(ConnId, u64)>,
    seq: u64,
}

impl ConnsInner {
    const CAP: usize = MAX_CONNS / SHARDS;

    fn put(&mut self, conn: ConnId, s: ConnStatements) {
        self.seq += 1;
        let seq = self.seq;
        self.map.insert(conn, (s, seq));
        self.order.push_back((conn, seq));
        while self.map.len() > Self::CAP {
            match self.order.pop_front() {
                Some((old, n)) => {
                    if self.map.get(&old).is_some_and(|e| e.1 == n) {
                        self.map.remove(&old);
                    }
                }
                None => break,
            }
        }
        // Stale places accumulate while connections go round the pool: drop them once they
        // outnumber the live ones (amortised O(1) per put; `order` stays within twice the live
        // entries plus a little, so its capacity stops growing and a put allocates nothing).
        if self.order.len() > 2 * self.map.len() + 16 {
            let map = &self.map;
            self.order
                .retain(|(c, n)| map.get(c).is_some_and(|e| e.1 == *n));
        }
    }

    fn take(&mut self, conn: ConnId) -> Option<ConnStatements> {
        self.map.remove(&conn).map(|(s, _)| s)
    }
}

impl Conns {
    fn shard(&self, conn: ConnId) -> &Mutex<ConnsInner> {
        // Host ids are often sequential: mix them before picking a shard.
        let h = conn.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60;
        &self.shards[h as usize % SHARDS]
    }

    /// A session returns a connection to the pool: remember what it has prepared.
    pub(crate) fn put(&self, conn: ConnId, s: ConnStatements) {
        self.shard(conn).lock().put(conn, s);
    }

    /// A session takes a pooled connection: what it has prepared, if known. Statements
    /// prepared before DDL a session ran since are forgotten, and the list is incomplete, so
    /// each is closed and prepared again where it is used: the engine's statement on a pooled
    /// connection was otherwise reused for any session sending the same text, and answered
    /// 0A000 after an `ALTER TABLE` where a new session on the primary prepares afresh (an
    /// examiner's finding, 2026-12-05).
    pub(crate) fn take(&self, conn: ConnId) -> Option<ConnStatements> {
        self.take_at(conn, 0)
    }

    /// [`Self::take`] where the statements are also forgotten once the classifier's catalogue
    /// generation moved (`catalog_generation`: a report that differs from the last shows DDL
    /// run on the primary without passing through any engine, a new relation among it). A
    /// server keeps a prepared statement's resolution of the names it read: a relation created
    /// since in a schema earlier on the `search_path` does not make it look again, where a new
    /// session on the primary prepares afresh (an examiner's probe, 2026-12-05: another
    /// session's statement on a pooled reader read `public.t` for a new session whose
    /// `search_path` resolved `t` to a table created directly on the primary, for good).
    pub(crate) fn take_at(&self, conn: ConnId, catalog_generation: u64) -> Option<ConnStatements> {
        let epoch = self.epoch(catalog_generation);
        let mut s = self.shard(conn).lock().take(conn)?;
        if s.epoch != epoch {
            if !s.names.is_empty() {
                s.names.clear();
                s.complete = false;
            }
            s.epoch = epoch;
        }
        Some(s)
    }

    /// The DDL epoch with the classifier's catalogue generation `catalog_generation`: it moves
    /// at every DDL a session of this engine ran or the host reported, and at every catalogue
    /// report that differs (32 bits, compared for equality only). A statement a server parsed
    /// in another epoch may resolve its names otherwise than one parsed now (E-2).
    pub(crate) fn epoch(&self, catalog_generation: u64) -> u32 {
        self.ddl_epoch
            .load(std::sync::atomic::Ordering::Acquire)
            .wrapping_add(catalog_generation) as u32
    }

    /// A session ran DDL (E-2).
    pub(crate) fn ddl_ran(&self) {
        self.sessions_ddl
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.ddl_elsewhere();
    }

    /// DDL ran on the writer through another engine (the host says so): pooled connections'
    /// statements are prepared again, as after a session's own (E-2).
    pub(crate) fn ddl_elsewhere(&self) {
        self.ddl_epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// DDL statements this engine's sessions ran (not counting DDL reported from elsewhere).
    pub(crate) fn sessions_ddl(&self) -> u64 {
        self.sessions_ddl.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The connection is gone (closed by the host or the engine).
    pub(crate) fn forget(&self, conn: ConnId) {
        self.take(conn);
    }

    /// How many connections are remembered (tests).
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2_connection_statements_evict_least_recently_used() {
        let mut c = ConnStatements::fresh();
        for h in 0..MAX_CONN_STATEMENTS as u64 {
            assert_eq!(c.add(h), None);
        }
        assert!(c.has(0));
        assert_eq!(c.add(9999), Some(1));
        assert!(!c.has(1));
        assert_eq!(c.len(), MAX_CONN_STATEMENTS);
    }

    #[test]
    fn e2_statements_prepared_before_ddl_are_prepared_again() {
        let r = Conns::default();
        let mut s = r.take(1).unwrap_or_else(ConnStatements::fresh);
        s.add(7);
        r.put(1, s.clone());
        // No DDL: the statement is still there, known complete.
        let mut again = r.take(1).unwrap();
        assert!(again.has(7) && again.complete);
        r.put(1, again);
        r.ddl_ran();
        let mut after = r.take(1).unwrap();
        assert!(!after.has(7), "prepared before the DDL: prepared again");
        assert!(!after.complete, "closed before it is prepared again");
        after.add(7);
        r.put(1, after);
        let mut later = r.take(1).unwrap();
        assert!(later.has(7), "prepared after the DDL: kept");
    }

    #[test]
    fn e2_statements_prepared_before_a_catalogue_report_that_differs_are_prepared_again() {
        let r = Conns::default();
        r.put(1, ConnStatements::fresh());
        let mut s = r.take_at(1, 5).unwrap();
        s.add(7);
        r.put(1, s);
        let mut same = r.take_at(1, 5).unwrap();
        assert!(same.has(7), "the same catalogue: kept");
        r.put(1, same);
        let mut moved = r.take_at(1, 6).unwrap();
        assert!(
            !moved.has(7) && !moved.complete,
            "a report that differs: prepared again"
        );
    }

    #[test]
    fn e2_registry_takes_what_was_put() {
        let r = Conns::default();
        let mut s = ConnStatements::fresh();
        s.add(7);
        r.put(42, s.clone());
        assert_eq!(r.take(42), Some(s));
        assert_eq!(r.take(42), None);
        r.put(43, ConnStatements::fresh());
        r.forget(43);
        assert_eq!(r.take(43), None);
    }

    /// E-2's registry is bounded, forgets the oldest first, and a connection that goes round
    /// the pool (taken, put back) counts as new — its stale place in the order neither evicts
    /// it early nor lets the order grow without bound.
    #[test]
    fn e2_registry_is_bounded_and_evicts_the_oldest_put() {
        let cap = ConnsInner::CAP as u64;
        let mut r = ConnsInner::default();
        for c in 0..cap {
            r.put(c, ConnStatements::fresh());
        }
        // Connection 0 goes round the pool many times while the others stay.
        for _ in 0..10 * cap {
            assert!(r.take(0).is_some());
            r.put(0, ConnStatements::fresh());
            assert!(r.order.len() <= 2 * r.map.len() + 17);
        }
        assert_eq!(r.map.len(), ConnsInner::CAP);
        // One more: the oldest put (1) goes, not 0 (put most recently).
        r.put(cap, ConnStatements::fresh());
        assert_eq!(r.map.len(), ConnsInner::CAP);
        assert!(r.take(1).is_none());
        assert!(r.take(0).is_some());
        assert!(r.take(cap).is_some());
    }

    #[test]
    fn e2_registry_bound_holds_over_all_shards() {
        let r = Conns::default();
        for c in 0..3 * MAX_CONNS as u64 {
            r.put(c, ConnStatements::fresh());
        }
        assert!(r.remembered() <= MAX_CONNS);
        assert!(r.take(3 * MAX_CONNS as u64 - 1).is_some());
        assert!(r.take(0).is_none());
    }
}
