//! The cluster's data: one WAL stream (insert and flushed positions, plus the history of flushes
//! that readers replay from), the status of every XID, and the table `kv` as row versions
//! (a simple MVCC: `xmin`/`xmax` with command ids and the LSN of the record that wrote each).
//!
//! Visibility is one rule for every server: a version is visible to a snapshot when its creator
//! committed with a commit record at or below the snapshot's LSN (or is one of the snapshot's
//! *own* transactions, whose record is at or below the snapshot's LSN and whose command id is
//! below the snapshot's), and its deleter is not. On the primary the snapshot LSN is the insert
//! position (everything committed so far); on a reader it is the replay position; an XID import
//! makes the imported XIDs *own*.

use std::collections::{BTreeMap, BTreeSet};

use polarsplit::Lsn;

use crate::rng::Rng;

pub type Xid = u64;

/// What became of a transaction (or subtransaction) id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XidStatus {
    InProgress,
    /// Committed; the LSN is the end of its commit record (subtransactions share their top's).
    Committed(Lsn),
    /// Rolled back (explicitly, by an error, or because its backend ended).
    Aborted,
    /// Committed on a timeline that a failover cut off: it never happened on the new one.
    Lost(Lsn),
}

/// A row version of `kv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub v: i64,
    pub xmin: Xid,
    pub cmin: u32,
    /// End of the WAL record that created the version.
    pub xmin_lsn: Lsn,
    /// Deleter (an UPDATE or DELETE): xid, command id, end of its record.
    pub xmax: Option<(Xid, u32, Lsn)>,
}

/// A snapshot: the LSN it sees up to, and optionally the transaction's own XIDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub lsn: Lsn,
    pub own: Option<OwnView>,
}

/// A transaction's own writes as a snapshot sees them: the XIDs and the command id (writes of
/// commands `< cid` are visible).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnView {
    pub xids: BTreeSet<Xid>,
    pub cid: u32,
    /// Only writes whose record ends at or below this are seen (a replica sees an imported
    /// transaction's writes once replayed); `None` on the primary.
    pub upto: Option<Lsn>,
}

/// Why a write could not proceed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteConflict {
    /// Another open transaction holds the row (the simulator does not block: it fails at once,
    /// as `NOWAIT` would).
    Locked,
    /// REPEATABLE READ: the row changed after the snapshot.
    Serialization,
    /// INSERT of a key that exists.
    Duplicate,
}

/// The WAL and the table.
#[derive(Debug)]
pub struct Store {
    pub insert: Lsn,
    pub flushed: Lsn,
    /// `(virtual time, flushed position)` after each flush of the current timeline, ascending
    /// in both; readers replay `flushed as of (now - lag)`.
    pub flush_log: Vec<(u64, Lsn)>,
    pub xids: BTreeMap<Xid, XidStatus>,
    /// For each subtransaction XID, its top-level XID.
    pub top_of: BTreeMap<Xid, Xid>,
    pub next_xid: Xid,
    pub rows: BTreeMap<i64, Vec<Version>>,
    /// Row locks (`SELECT … FOR UPDATE/SHARE`): key → (xid, exclusive).
    pub row_locks: BTreeMap<i64, Vec<(Xid, bool)>>,
    pub seq_s: i64,
    rng: Rng,
    rec_min: u64,
    rec_max: u64,
}

impl Store {
    pub fn new(
        initial_lsn: Lsn,
        first_xid: Xid,
        keys: u32,
        rng: Rng,
        rec_min: u64,
        rec_max: u64,
    ) -> Store {
        let mut s = Store {
            insert: initial_lsn,
            flushed: initial_lsn,
            flush_log: Vec::new(),
            xids: BTreeMap::new(),
            top_of: BTreeMap::new(),
            next_xid: first_xid,
            rows: BTreeMap::new(),
            row_locks: BTreeMap::new(),
            seq_s: 0,
            rng,
            rec_min: rec_min.max(8),
            rec_max: rec_max.max(rec_min.max(8)),
        };
        // The initial data: committed by a bootstrap transaction at the initial LSN, so every
        // snapshot sees it (XID 3 is PostgreSQL's first normal-range-adjacent bootstrap id; it
        // is below every XID the simulation hands out).
        let boot: Xid = 3;
        s.xids.insert(boot, XidStatus::Committed(initial_lsn));
        for k in 1..=i64::from(keys) {
            s.rows.insert(
                k,
                vec![Version {
                    v: k * 10,
                    xmin: boot,
                    cmin: 0,
                    xmin_lsn: initial_lsn,
                    xmax: None,
                }],
            );
        }
        s.flush_log.push((0, initial_lsn));
        s
    }

    /// Appends one WAL record; returns its end position.
    pub fn append(&mut self) -> Lsn {
        let size = self.rng.range(self.rec_min, self.rec_max);
        let size = (size + 7) & !7;
        self.insert = Lsn(self.insert.0 + size);
        self.insert
    }

    /// Flushes everything inserted so far (a commit, the WAL writer, a shutdown).
    pub fn flush(&mut self, now: u64) -> bool {
        if self.flushed >= self.insert {
            return false;
        }
        self.flushed = self.insert;
        match self.flush_log.last_mut() {
            Some((t, l)) if *t == now => *l = self.flushed,
            _ => self.flush_log.push((now, self.flushed)),
        }
        true
    }

    /// The flushed position as of virtual time `t` (the initial position before any flush).
    pub fn flushed_at(&self, t: u64) -> Lsn {
        let i = self.flush_log.partition_point(|(ft, _)| *ft <= t);
        if i == 0 {
            self.flush_log.first().map(|(_, l)| *l).unwrap_or(Lsn::ZERO)
        } else {
            self.flush_log[i - 1].1
        }
    }

    /// The earliest time at which the flushed position reached `target`, if it has.
    pub fn flushed_reach_time(&self, target: Lsn) -> Option<u64> {
        let i = self.flush_log.partition_point(|(_, l)| *l < target);
        self.flush_log.get(i).map(|(t, _)| *t)
    }

    pub fn assign_xid(&mut self, top: Option<Xid>) -> Xid {
        let x = self.next_xid;
        self.next_xid += 1;
        self.xids.insert(x, XidStatus::InProgress);
        if let Some(t) = top {
            self.top_of.insert(x, t);
        }
        x
    }

    pub fn status(&self, x: Xid) -> XidStatus {
        self.xids.get(&x).copied().unwrap_or(XidStatus::Aborted)
    }

    fn committed_by(&self, x: Xid, lsn: Lsn) -> bool {
        matches!(self.status(x), XidStatus::Committed(c) if c <= lsn)
    }

    fn is_aborted(&self, x: Xid) -> bool {
        matches!(self.status(x), XidStatus::Aborted | XidStatus::Lost(_))
    }

    fn own_sees(&self, snap: &Snapshot, x: Xid, cid: u32, lsn: Lsn) -> bool {
        match &snap.own {
            Some(o) => {
                o.xids.contains(&x)
                    && o.upto.is_none_or(|u| lsn <= u)
                    && cid < o.cid
                    && !self.is_aborted(x)
            }
            None => false,
        }
    }

    pub fn visible(&self, ver: &Version, snap: &Snapshot) -> bool {
        let created = self.committed_by(ver.xmin, snap.lsn)
            || self.own_sees(snap, ver.xmin, ver.cmin, ver.xmin_lsn);
        if !created {
            return false;
        }
        match ver.xmax {
            None => true,
            Some((x, c, l)) => !(self.committed_by(x, snap.lsn) || self.own_sees(snap, x, c, l)),
        }
    }

    /// The value of `k` a snapshot sees.
    pub fn read(&self, k: i64, snap: &Snapshot) -> Option<i64> {
        self.rows
            .get(&k)?
            .iter()
            .rev()
            .find(|v| self.visible(v, snap))
            .map(|v| v.v)
    }

    /// Every `(k, v)` a snapshot sees, ordered by `k`.
    pub fn scan(&self, snap: &Snapshot) -> Vec<(i64, i64)> {
        self.rows
            .iter()
            .filter_map(|(k, vs)| {
                vs.iter()
                    .rev()
                    .find(|v| self.visible(v, snap))
                    .map(|v| (*k, v.v))
            })
            .collect()
    }

    fn in_progress_other(&self, x: Xid, own: &BTreeSet<Xid>) -> bool {
        !own.contains(&x) && self.status(x) == XidStatus::InProgress
    }

    /// Conflicts of writing (or exclusively locking) the visible version of `k`.
    fn check_row(
        &self,
        k: i64,
        idx: usize,
        own: &BTreeSet<Xid>,
        exclusive: bool,
    ) -> Result<(), WriteConflict> {
        let ver = &self.rows[&k][idx];
        if let Some((x, _, _)) = ver.xmax {
            if self.in_progress_other(x, own) {
                return Err(WriteConflict::Locked);
            }
            if !own.contains(&x) && !self.is_aborted(x) {
                // Deleted by a transaction that committed after our snapshot (RR only: an RC
                // snapshot is taken at statement start, after every commit so far).
                return Err(WriteConflict::Serialization);
            }
        }
        // A newer version created by someone else after our snapshot (RR).
        for later in &self.rows[&k][idx + 1..] {
            if !self.is_aborted(later.xmin) && !own.contains(&later.xmin) {
                return Err(if self.in_progress_other(later.xmin, own) {
                    WriteConflict::Locked
                } else {
                    WriteConflict::Serialization
                });
            }
        }
        if let Some(locks) = self.row_locks.get(&k) {
            for &(x, ex) in locks {
                if self.in_progress_other(x, own) && (ex || exclusive) {
                    return Err(WriteConflict::Locked);
                }
            }
        }
        Ok(())
    }

    fn visible_index(&self, k: i64, snap: &Snapshot) -> Option<usize> {
        let vs = self.rows.get(&k)?;
        (0..vs.len()).rev().find(|&i| self.visible(&vs[i], snap))
    }

    /// Finds the version of `k` an UPDATE/DELETE would change and checks it may: `Ok(None)`
    /// when no row is visible.
    pub fn prepare_modify(
        &self,
        k: i64,
        snap: &Snapshot,
        own: &BTreeSet<Xid>,
    ) -> Result<Option<usize>, WriteConflict> {
        let Some(idx) = self.visible_index(k, snap) else {
            return Ok(None);
        };
        self.check_row(k, idx, own, true)?;
        Ok(Some(idx))
    }

    /// UPDATE (`Some(v)`) or DELETE (`None`) of version `idx` of `k` by `xid` at command `cid`,
    /// with `lsn` the end of the record the caller appended.
    pub fn apply_modify(
        &mut self,
        k: i64,
        idx: usize,
        new_v: Option<i64>,
        xid: Xid,
        cid: u32,
        lsn: Lsn,
    ) {
        let vs = self.rows.get_mut(&k).expect("prepared row exists");
        vs[idx].xmax = Some((xid, cid, lsn));
        if let Some(v) = new_v {
            vs.push(Version {
                v,
                xmin: xid,
                cmin: cid,
                xmin_lsn: lsn,
                xmax: None,
            });
        }
    }

    /// Whether `k` may be inserted (unique check).
    pub fn check_insert(&self, k: i64, own: &BTreeSet<Xid>) -> Result<(), WriteConflict> {
        let Some(vs) = self.rows.get(&k) else {
            return Ok(());
        };
        for ver in vs {
            if self.is_aborted(ver.xmin) {
                continue;
            }
            let deleted = match ver.xmax {
                Some((x, _, _)) if !self.is_aborted(x) => {
                    if self.in_progress_other(x, own) {
                        return Err(WriteConflict::Locked);
                    }
                    true
                }
                _ => false,
            };
            if !deleted {
                return Err(if self.in_progress_other(ver.xmin, own) {
                    WriteConflict::Locked
                } else {
                    WriteConflict::Duplicate
                });
            }
        }
        Ok(())
    }

    pub fn insert_row(&mut self, k: i64, v: i64, xid: Xid, cid: u32, lsn: Lsn) {
        self.rows.entry(k).or_default().push(Version {
            v,
            xmin: xid,
            cmin: cid,
            xmin_lsn: lsn,
            xmax: None,
        });
    }

    /// Whether `k` is visible to `snap` and may be locked; `Ok(None)` when there is no row.
    pub fn check_lock(
        &self,
        k: i64,
        snap: &Snapshot,
        own: &BTreeSet<Xid>,
        exclusive: bool,
    ) -> Result<Option<i64>, WriteConflict> {
        let Some(idx) = self.visible_index(k, snap) else {
            return Ok(None);
        };
        self.check_row(k, idx, own, exclusive)?;
        Ok(Some(self.rows[&k][idx].v))
    }

    pub fn add_row_lock(&mut self, k: i64, xid: Xid, exclusive: bool) {
        let locks = self.row_locks.entry(k).or_default();
        locks.retain(|(x, _)| *x != xid);
        locks.push((xid, exclusive));
    }

    /// Ends transactions: `Committed(lsn)` or `Aborted` for every XID given.
    pub fn finish(&mut self, xids: &[Xid], status: XidStatus) {
        for x in xids {
            self.xids.insert(*x, status);
        }
        // Row locks of finished transactions are gone.
        self.row_locks.retain(|_, locks| {
            locks.retain(|(x, _)| !xids.contains(x));
            !locks.is_empty()
        });
    }

    /// A failover cut the timeline at `at`: every commit after it is lost, every open
    /// transaction aborted, and the flush history forgets what was never replayed there.
    /// Returns the lost XIDs (top-level and sub) in order.
    pub fn truncate(&mut self, at: Lsn) -> Vec<Xid> {
        let mut lost = Vec::new();
        for (x, st) in self.xids.iter_mut() {
            match *st {
                XidStatus::Committed(l) if l > at => {
                    *st = XidStatus::Lost(l);
                    lost.push(*x);
                }
                XidStatus::InProgress => *st = XidStatus::Aborted,
                _ => {}
            }
        }
        self.row_locks.clear();
        self.flush_log.retain(|(_, l)| *l <= at);
        self.insert = at;
        self.flushed = at;
        lost
    }

    /// The committed value of `k` as of `lsn` (ground truth for a checker).
    pub fn committed_value(&self, k: i64, lsn: Lsn) -> Option<i64> {
        self.read(k, &Snapshot { lsn, own: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Store::new(Lsn(1000), 732, 3, Rng::new(1), 64, 64)
    }

    #[test]
    fn visibility_by_commit_lsn_and_own_view() {
        let mut s = store();
        let snap0 = Snapshot {
            lsn: s.insert,
            own: None,
        };
        assert_eq!(s.read(1, &snap0), Some(10));
        let x = s.assign_xid(None);
        let own: BTreeSet<Xid> = [x].into();
        let l = s.append();
        let idx = s.prepare_modify(1, &snap0, &own).unwrap().unwrap();
        s.apply_modify(1, idx, Some(11), x, 0, l);
        // Others do not see it; the own view does from the next command on.
        assert_eq!(s.read(1, &snap0), Some(10));
        let mine = |cid| Snapshot {
            lsn: l,
            own: Some(OwnView {
                xids: own.clone(),
                cid,
                upto: Some(l),
            }),
        };
        assert_eq!(s.read(1, &mine(0)), Some(10));
        assert_eq!(s.read(1, &mine(1)), Some(11));
        // An own view whose LSN has not reached the record does not see it (replica import).
        let early = Snapshot {
            lsn: Lsn(l.0 - 1),
            own: Some(OwnView {
                xids: own.clone(),
                cid: 1,
                upto: Some(Lsn(l.0 - 1)),
            }),
        };
        assert_eq!(s.read(1, &early), Some(10));
        // A concurrent writer conflicts.
        let y = s.assign_xid(None);
        let l2 = s.append();
        let _ = l2;
        assert_eq!(
            s.prepare_modify(1, &snap0, &[y].into()),
            Err(WriteConflict::Locked)
        );
        let c = s.append();
        s.finish(&[x], XidStatus::Committed(c));
        assert_eq!(s.committed_value(1, c), Some(11));
        assert_eq!(s.committed_value(1, Lsn(c.0 - 1)), Some(10));
        assert_eq!(
            s.check_insert(1, &BTreeSet::new()),
            Err(WriteConflict::Duplicate)
        );
        assert_eq!(s.check_insert(9, &BTreeSet::new()), Ok(()));
    }

    #[test]
    fn truncation_loses_later_commits() {
        let mut s = store();
        let x = s.assign_xid(None);
        let snap = Snapshot {
            lsn: s.insert,
            own: None,
        };
        let l = s.append();
        let idx = s.prepare_modify(2, &snap, &[x].into()).unwrap().unwrap();
        s.apply_modify(2, idx, None, x, 0, l);
        let c = s.append();
        s.finish(&[x], XidStatus::Committed(c));
        assert_eq!(s.committed_value(2, c), None);
        let lost = s.truncate(Lsn(c.0 - 1));
        assert_eq!(lost, vec![x]);
        assert_eq!(s.committed_value(2, Lsn(u64::MAX)), Some(20));
    }
}
