//! The connection loop: queued messages, waits, closing, the end of a Query or Sync, and
//! ReadyForQuery with the PolarDB extensions (W-2).

use super::prelude::*;

impl Cluster {
    /// Works through the connection's queued messages until it must wait or has nothing left.
    pub(crate) fn run(&mut self, c: &mut Conn) {
        self.refresh_replays();
        loop {
            if c.phase != Phase::Ready {
                return;
            }
            if c.running.is_some() {
                if !self.step(c) {
                    return;
                }
                continue;
            }
            let Some(m) = c.inbox.pop_front() else {
                return;
            };
            self.handle(c, m);
        }
    }

    /// Ends a wait with `outcome` and lets the connection continue.
    pub(crate) fn end_wait(&mut self, id: crate::config::ConnId, outcome: WaitOutcome) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.take_wait(&mut c, outcome);
        self.run(&mut c);
        self.conns.insert(id, c);
    }

    pub(super) fn take_wait(&mut self, c: &mut Conn, outcome: WaitOutcome) {
        let Some(r) = c.running.as_mut() else {
            return;
        };
        let Some(w) = r.wait.take() else {
            return;
        };
        let replay = self.server(c.server).replay;
        r.outcome = Some((
            outcome,
            WaitRecord {
                target: w.target,
                started: w.started,
                ended: self.now,
                outcome,
            },
        ));
        self.log(Event::WaitEnded {
            server: c.server,
            conn: c.id,
            target: w.target,
            replay,
            outcome,
        });
    }

    /// Closes the server side: a wait is abandoned, an open transaction rolls back.
    pub(crate) fn close_conn(&mut self, c: &mut Conn, reason: CloseReason) {
        if c.phase == Phase::Closed {
            return;
        }
        if c.running.as_ref().is_some_and(|r| r.wait.is_some()) {
            self.take_wait(c, WaitOutcome::Aborted);
        }
        c.running = None;
        if c.tx.is_some() {
            self.abort_tx(c);
        }
        c.phase = Phase::Closed;
        // What the server had produced goes out before the end of the stream.
        c.hold_from = None;
        c.inbox.clear();
        c.inbuf.clear();
        self.log(Event::Closed {
            conn: c.id,
            server: c.server,
            reason,
        });
    }

    /// After an error: an explicit transaction is failed, an implicit one rolls back.
    pub(super) fn fail_tx(&mut self, c: &mut Conn) {
        match c.tx.as_mut() {
            Some(t) if t.explicit => {
                t.failed = true;
                t.unsplittable = true;
            }
            Some(_) => self.abort_tx(c),
            None => {}
        }
    }

    /// The end of a simple Query (or a Sync): the implicit transaction commits, per-query
    /// server state is cleared, ReadyForQuery is sent.
    pub(super) fn finish_query(&mut self, c: &mut Conn) {
        if c.tx.as_ref().is_some_and(|t| !t.explicit) {
            self.commit_tx(c);
        }
        match self.cfg.dialect {
            // PolarDB clears the import when the query ends (NOTES.md).
            Dialect::Polardb => c.gucs.remove("polar_xact_split_xids"),
            // The awide wait target is one-shot.
            Dialect::Awide => c.gucs.remove("polar_xact_split_wait_lsn"),
            Dialect::Stock => {}
        }
        self.send_rfq(c);
        if c.tx.is_none() {
            self.send_notifies(c);
        }
    }

    /// ParameterStatus for changed reported settings, then ReadyForQuery (W-2).
    pub(super) fn send_rfq(&mut self, c: &mut Conn) {
        let ps = self.reported_params(c);
        for (k, v) in &ps {
            if c.reported.get(k) != Some(v) {
                c.out.extend(be::param_status(k, v));
            }
        }
        c.reported = ps.into_iter().collect();
        let status = match &c.tx {
            None => TxStatus::Idle,
            Some(t) if t.failed => TxStatus::Failed,
            Some(_) => TxStatus::InTransaction,
        };
        let role = self.server(c.server).role;
        let mut body = RfqBody {
            status,
            lsn: None,
            xact: None,
        };
        if self.cfg.dialect != Dialect::Stock {
            let missing = c.ext.lsn
                && self
                    .rng_missing
                    .chance_per_million(self.cfg.missing_lsn_per_million);
            if !missing {
                if c.ext.lsn {
                    body.lsn = Some(match role {
                        Role::Primary => self.store.insert,
                        Role::Reader => self.server(c.server).replay,
                    });
                }
                if c.ext.xact && role == Role::Primary {
                    body.xact = self.marker(c);
                }
            }
        }
        c.out.extend(wire::ready_for_query(&body));
    }

    /// W-2 / W-7: the marker and XID list of the writer's transaction.
    pub(super) fn marker(&self, c: &Conn) -> Option<(Marker, String)> {
        let t = c.tx.as_ref()?;
        if !t.explicit || t.failed || t.unsplittable || t.isolation != Isolation::ReadCommitted {
            return None;
        }
        let list = t.xid_list();
        match self.cfg.dialect {
            Dialect::Awide => {
                let pending = t.last_wal.is_some_and(|l| l > self.store.flushed);
                Some(if !list.is_empty() && pending {
                    (Marker::WalPending, list)
                } else {
                    (Marker::Splittable, list)
                })
            }
            Dialect::Polardb => (!list.is_empty()).then_some((Marker::Splittable, list)),
            Dialect::Stock => None,
        }
    }
}
