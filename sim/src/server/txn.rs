//! Transactions: commit, abort, XID assignment, transaction modes.

use super::prelude::*;

impl Cluster {
    pub(super) fn commit_tx(&mut self, c: &mut Conn) {
        let Some(mut t) = c.tx.take() else {
            return;
        };
        c.gucs.local.clear();
        if t.explicit {
            c.portals.clear();
        }
        let notifies = std::mem::take(&mut t.notifies);
        if !notifies.is_empty() {
            self.deliver_notifies(c, notifies);
        }
        let xids = t.all_xids();
        if xids.is_empty() {
            return;
        }
        let lsn = self.store.append();
        if self.store.flush(self.now) {
            let f = self.store.flushed;
            self.log(Event::Flush { lsn: f });
        }
        let mut fin: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for w in &t.writes {
            if self.store.status(w.xid) != XidStatus::Aborted {
                fin.insert(w.k, w.v);
            }
        }
        self.store.finish(&xids, XidStatus::Committed(lsn));
        self.log(Event::Commit(CommitRecord {
            server: c.server,
            conn: c.id,
            generation: self.generation,
            xid: xids[0],
            subxids: xids[1..].to_vec(),
            commit_lsn: lsn,
            writes: fin.into_iter().collect(),
        }));
    }

    pub(super) fn abort_tx(&mut self, c: &mut Conn) {
        let Some(t) = c.tx.take() else {
            return;
        };
        c.gucs = t.gucs_at_start.clone();
        if t.explicit {
            c.portals.clear();
        }
        let xids = t.all_xids();
        if xids.is_empty() {
            return;
        }
        if self.server(c.server).role == Role::Primary && self.server(c.server).up {
            self.store.append(); // the abort record (not flushed)
        }
        self.store.finish(&xids, XidStatus::Aborted);
        self.log(Event::Abort {
            server: c.server,
            conn: c.id,
            xid: xids[0],
            xids,
        });
    }

    /// The XID of the current (sub)transaction level, assigning it (and its parents') on the
    /// first write.
    pub(super) fn ensure_xid(&mut self, c: &mut Conn) -> Xid {
        let store = &mut self.store;
        let t = tx(c);
        let top = *t.top.xid.get_or_insert_with(|| store.assign_xid(None));
        let mut cur = top;
        for l in t.subs.iter_mut() {
            cur = *l.xid.get_or_insert_with(|| store.assign_xid(Some(top)));
        }
        cur
    }

    pub(super) fn ensure_top_xid(&mut self, c: &mut Conn) -> Xid {
        let store = &mut self.store;
        *tx(c).top.xid.get_or_insert_with(|| store.assign_xid(None))
    }

    pub(super) fn apply_modes(&self, c: &mut Conn, modes: TxModes) -> Result<(), SqlError> {
        let role = self.server(c.server).role;
        let t = tx(c);
        if let Some(iso) = modes.isolation {
            if t.snapshot_taken && iso != t.isolation {
                return Err(SqlError::new(
                    "25001",
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                ));
            }
            t.isolation = iso;
        }
        match modes.read_only {
            Some(false) if role == Role::Reader => {
                return Err(SqlError::new(
                    "0A000",
                    "cannot set transaction read-write mode during recovery",
                )
                .refused())
            }
            Some(false) if t.read_only && t.snapshot_taken => {
                return Err(SqlError::new(
                    "25001",
                    "transaction read-write mode must be set before any query",
                ))
            }
            Some(ro) => t.read_only = ro,
            None => {}
        }
        Ok(())
    }
}

/// Transaction control statements.
impl Cluster {
    pub(super) fn begin(
        &mut self,
        c: &mut Conn,
        info: &mut StmtInfo,
        start: bool,
        modes: TxModes,
    ) -> ExecResult {
        if tx(c).explicit {
            Self::warn(
                c,
                info,
                "25001",
                "there is already a transaction in progress",
                None,
                None,
            );
        } else {
            self.apply_modes(c, modes)?;
            tx(c).explicit = true;
        }
        Ok(if start { "START TRANSACTION" } else { "BEGIN" }.into())
    }

    pub(super) fn commit(&mut self, c: &mut Conn, info: &mut StmtInfo) -> ExecResult {
        let t = tx(c);
        if !t.explicit {
            Self::warn(
                c,
                info,
                "25P01",
                "there is no transaction in progress",
                None,
                None,
            );
            self.commit_tx(c);
            return Ok("COMMIT".into());
        }
        if t.failed {
            self.abort_tx(c);
            return Ok("ROLLBACK".into());
        }
        self.commit_tx(c);
        Ok("COMMIT".into())
    }

    pub(super) fn rollback(&mut self, c: &mut Conn, info: &mut StmtInfo) -> ExecResult {
        if !tx(c).explicit {
            Self::warn(
                c,
                info,
                "25P01",
                "there is no transaction in progress",
                None,
                None,
            );
        }
        self.abort_tx(c);
        Ok("ROLLBACK".into())
    }

    pub(super) fn savepoint(&mut self, c: &mut Conn, name: &str) -> ExecResult {
        if !tx(c).explicit {
            return Err(no_tx_block("SAVEPOINT").into());
        }
        let gucs = c.gucs.clone();
        tx(c).subs.push(Level {
            name: name.to_string(),
            xid: None,
            children: Vec::new(),
            gucs,
        });
        Ok("SAVEPOINT".into())
    }

    pub(super) fn release(&mut self, c: &mut Conn, name: &str) -> ExecResult {
        let t = tx(c);
        if !t.explicit {
            return Err(no_tx_block("RELEASE SAVEPOINT").into());
        }
        let idx = savepoint_index(t, name)?;
        let removed: Vec<Level> = t.subs.drain(idx..).collect();
        let parent = if idx == 0 {
            &mut t.top
        } else {
            &mut t.subs[idx - 1]
        };
        for l in removed {
            parent.children.extend(l.xid);
            parent.children.extend(l.children);
        }
        Ok("RELEASE".into())
    }

    pub(super) fn rollback_to(&mut self, c: &mut Conn, name: &str) -> ExecResult {
        let t = tx(c);
        if !t.explicit {
            return Err(no_tx_block("ROLLBACK TO SAVEPOINT").into());
        }
        let idx = savepoint_index(t, name)?;
        let removed: Vec<Level> = t.subs.drain(idx..).collect();
        let gucs = removed[0].gucs.clone();
        let aborted: Vec<Xid> = removed
            .iter()
            .flat_map(|l| l.xid.into_iter().chain(l.children.iter().copied()))
            .collect();
        t.subs.push(Level {
            name: name.to_string(),
            xid: None,
            children: Vec::new(),
            gucs: gucs.clone(),
        });
        t.failed = false;
        if !aborted.is_empty() {
            let lsn = self.store.append();
            tx(c).last_wal = Some(lsn);
            self.store.finish(&aborted, XidStatus::Aborted);
        }
        c.gucs = gucs;
        Ok("ROLLBACK".into())
    }
}

/// The level of the innermost savepoint of that name (3B001 if there is none).
fn savepoint_index(t: &Tx, name: &str) -> Result<usize, SqlError> {
    t.subs
        .iter()
        .rposition(|l| l.name == name)
        .ok_or_else(|| no_savepoint(name))
}
