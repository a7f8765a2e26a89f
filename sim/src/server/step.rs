//! Running a Query's statements one after another (a wait suspends it), and their history
//! records.

use super::prelude::*;

impl Cluster {
    /// Runs the current Query's statements; false when it must wait.
    pub(super) fn step(&mut self, c: &mut Conn) -> bool {
        let Some(mut r) = c.running.take() else {
            return true;
        };
        if r.wait.is_some() {
            c.running = Some(r);
            return false;
        }
        while r.idx < r.stmts.len() {
            let p = r.stmts[r.idx].clone();
            if c.tx.is_none() {
                let multi = !r.extended && r.stmts.len() > 1;
                c.tx = Some(Tx::new(
                    c.default_isolation(),
                    c.default_read_only(),
                    multi,
                    c.gucs.clone(),
                ));
            }
            if r.outcome.is_none() {
                r.started = self.now;
            }
            let before = self.tx_record(c);
            let mut info = StmtInfo {
                state: self.state_record(c),
                ..StmtInfo::default()
            };
            let failed = c.tx.as_ref().is_some_and(|t| t.failed);
            let res = if failed
                && !matches!(p.stmt, Stmt::Rollback | Stmt::Commit | Stmt::RollbackTo(_))
            {
                Err(Flow::Fail(SqlError::new(
                    "25P02",
                    "current transaction is aborted, commands ignored until end of transaction block",
                )))
            } else if let Some(e) = self.take_injection(c, &p) {
                Err(Flow::Fail(e))
            } else {
                self.exec(c, &mut r, &p, &mut info)
            };
            match res {
                Err(Flow::Wait(w)) => {
                    let replay = self.server(c.server).replay;
                    self.log(Event::WaitStarted {
                        server: c.server,
                        conn: c.id,
                        target: w.target,
                        replay,
                        deadline: w.deadline(),
                    });
                    r.wait = Some(w);
                    c.running = Some(r);
                    return false;
                }
                Ok(tag) => {
                    if let Some(t) = c.tx.as_mut() {
                        if t.cid_used {
                            t.cid += 1;
                            t.cid_used = false;
                        }
                    }
                    if info.suspended {
                        c.out.extend(be::portal_suspended());
                    } else {
                        c.out.extend(be::command_complete(&tag));
                    }
                    let txr = self
                        .tx_record(c)
                        .unwrap_or(before.clone().expect("tx existed"));
                    self.record(c, &r, &p, info, txr, StmtResult::Ok { tag }, false);
                    r.idx += 1;
                    r.outcome = None;
                }
                Err(Flow::Fail(e)) => {
                    emit_error(&mut c.out, &e);
                    let txr = self
                        .tx_record(c)
                        .unwrap_or(before.clone().expect("tx existed"));
                    let result = StmtResult::Error {
                        sqlstate: e.code.clone(),
                        message: e.message.clone(),
                        injected: e.injected,
                    };
                    self.record(c, &r, &p, info, txr, result, e.refused_write);
                    if e.refused_write {
                        self.log(Event::RefusedWrite {
                            server: c.server,
                            conn: c.id,
                            text: p.text.clone(),
                            sqlstate: e.code.clone(),
                        });
                    }
                    if e.fatal {
                        self.close_conn(c, CloseReason::Fatal);
                        return true;
                    }
                    self.fail_tx(c);
                    if r.extended {
                        c.skip_until_sync = true;
                    }
                    r.idx = r.stmts.len();
                    r.outcome = None;
                }
            }
        }
        if !r.extended {
            self.finish_query(c);
        }
        true
    }

    pub(super) fn take_injection(&mut self, c: &mut Conn, p: &Parsed) -> Option<SqlError> {
        let inj = if let Some(i) = c.injections.iter().position(|j| j.matcher.matches(p)) {
            c.injections.remove(i)
        } else {
            let s = self.server_mut(c.server);
            let i = s.injections.iter().position(|j| j.matcher.matches(p))?;
            s.injections.remove(i)
        }?;
        let mut e = SqlError::new(&inj.sqlstate, inj.message);
        e.fatal = inj.fatal;
        e.injected = true;
        Some(e)
    }

    pub(super) fn tx_record(&self, c: &Conn) -> Option<TxRecord> {
        c.tx.as_ref().map(|t| TxRecord {
            explicit: t.explicit,
            isolation: t.isolation,
            xid: t.top.xid,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        c: &Conn,
        r: &Running,
        p: &Parsed,
        info: StmtInfo,
        tx: TxRecord,
        result: StmtResult,
        refused_write: bool,
    ) {
        let role = self.server(c.server).role;
        let rec = StatementRecord {
            server: c.server,
            conn: c.id,
            role,
            generation: self.generation,
            query_seq: c.query_seq,
            index: r.idx,
            of: r.stmts.len(),
            text: p.text.clone(),
            polar_set: p.stmt.is_polar_set(),
            extended: r.extended,
            started: r.started,
            tx,
            snapshot: info.snapshot,
            reads: info.reads,
            rows: info.rows,
            result,
            warnings: info.warnings,
            wait: info.wait,
            refused_write,
            state: info.state.map(|mut s| {
                s.after = c.state();
                s
            }),
        };
        self.log(Event::Statement(Box::new(rec)));
    }

    pub(super) fn record_parse_error(&mut self, c: &Conn, sql: &str, e: &SqlError) {
        let role = self.server(c.server).role;
        let tx = self.tx_record(c).unwrap_or(TxRecord {
            explicit: false,
            isolation: c.default_isolation(),
            xid: None,
        });
        let rec = StatementRecord {
            server: c.server,
            conn: c.id,
            role,
            generation: self.generation,
            query_seq: c.query_seq,
            index: 0,
            of: 0,
            text: sql.to_string(),
            polar_set: false,
            extended: false,
            started: self.now,
            tx,
            snapshot: None,
            reads: Vec::new(),
            rows: 0,
            result: StmtResult::Error {
                sqlstate: e.code.clone(),
                message: e.message.clone(),
                injected: false,
            },
            warnings: Vec::new(),
            wait: None,
            refused_write: false,
            state: self.state_record(c),
        };
        self.log(Event::Statement(Box::new(rec)));
    }

    /// The session-state ground truth of a statement on `c` (when recorded).
    fn state_record(&self, c: &Conn) -> Option<Box<StateRecord>> {
        if !self.cfg.record_session_state {
            return None;
        }
        let primary = self.primary();
        let writer = c.owner.and_then(|o| {
            self.conns
                .values()
                .find(|w| {
                    w.owner == Some(o) && w.server == primary && !w.is_closed() && w.id != c.id
                })
                .map(|w| (w.state(), w.running.is_none() && w.inbox.is_empty()))
        });
        let own = c.state();
        Some(Box::new(StateRecord {
            owner: c.owner,
            after: own.clone(),
            own,
            writer,
        }))
    }
}
