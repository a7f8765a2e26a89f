//! Engine-wide knowledge of backend connections the session hands back to the host's pool:
//! which engine statements each reader connection has prepared (SPEC E-2: it travels with the
//! connection). Keyed by the host's connection id; bounded. The host reports connections it
//! closes itself (`Engine::connection_closed`) so their ids can be reused.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

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

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// Most connections remembered; beyond it the oldest entry is forgotten (the session then
/// treats that connection's list as incomplete, which costs a Close before each Parse).
const MAX_CONNS: usize = 16384;

/// What the engine remembers of pooled connections between sessions.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    inner: Mutex<ConnsInner>,
}

#[derive(Debug, Default)]
struct ConnsInner {
    map: HashMap<ConnId, ConnStatements>,
    order: VecDeque<ConnId>,
}

impl Conns {
    /// A session returns a connection to the pool: remember what it has prepared.
    pub(crate) fn put(&self, conn: ConnId, s: ConnStatements) {
        let mut g = self.inner.lock();
        if g.map.insert(conn, s).is_none() {
            g.order.push_back(conn);
            while g.map.len() > MAX_CONNS {
                match g.order.pop_front() {
                    Some(old) => {
                        g.map.remove(&old);
                    }
                    None => break,
                }
            }
        }
    }

    /// A session takes a pooled connection: what it has prepared, if known.
    pub(crate) fn take(&self, conn: ConnId) -> Option<ConnStatements> {
        let mut g = self.inner.lock();
        let s = g.map.remove(&conn)?;
        g.order.retain(|c| *c != conn);
        Some(s)
    }

    /// The connection is gone (closed by the host or the engine).
    pub(crate) fn forget(&self, conn: ConnId) {
        self.take(conn);
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
}
