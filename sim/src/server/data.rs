//! Reading and writing `kv`: row results, writes and locks, and the functions the simulator
//! knows.

use super::prelude::*;
use crate::session::Suspended;

pub(super) fn columns_of(stmt: &Stmt) -> Option<Vec<Column>> {
    Some(match stmt {
        Stmt::SelectConst(_) => vec![Column::new("?column?", oid::INT4)],
        Stmt::SelectV { .. } => vec![Column::new("v", oid::INT4)],
        Stmt::SelectAll => vec![Column::new("k", oid::INT4), Column::new("v", oid::INT4)],
        Stmt::SelectFunc(f) => {
            let t = match f {
                Func::Nextval(_) | Func::TxidCurrent => oid::INT8,
                Func::SetConfig { .. } => oid::TEXT,
                Func::AdvisoryLock(_) | Func::AdvisoryUnlockAll => oid::VOID,
                Func::CurrentWalInsertLsn | Func::CurrentWalLsn | Func::LastWalReplayLsn => {
                    oid::PG_LSN
                }
                Func::IsInRecovery => oid::BOOL,
                Func::CurrentUser | Func::SessionUser => oid::TEXT,
                Func::CurrentSetting { .. } => oid::TEXT,
                Func::SetTenant(_) | Func::PgNotify { .. } => oid::VOID,
            };
            vec![Column::new(f.column(), t)]
        }
        Stmt::Show(name) => vec![Column::new(&display_name(name), oid::TEXT)],
        Stmt::LoginCheck(_) => vec![Column::new("int4", oid::INT4)],
        Stmt::Capture(_) | Stmt::CaptureLogin(_) => vec![
            Column::new("k", oid::INT4),
            Column::new("encode", oid::TEXT),
            Column::new("encode", oid::TEXT),
        ],
        _ => return None,
    })
}

impl Cluster {
    pub(super) fn warn(
        c: &mut Conn,
        info: &mut StmtInfo,
        code: &str,
        msg: &str,
        detail: Option<&str>,
        routine: Option<&str>,
    ) {
        let mut f: Vec<(u8, &str)> = vec![
            (b'S', "WARNING"),
            (b'V', "WARNING"),
            (b'C', code),
            (b'M', msg),
        ];
        if let Some(d) = detail {
            f.push((b'D', d));
        }
        if let Some(r) = routine {
            f.push((b'R', r));
        }
        c.out.extend(wire::fields_message(true, &f));
        info.warnings
            .push((code.to_string(), detail.map(str::to_string)));
    }

    /// A statement's rows: a simple Query describes them itself (an Execute's were described
    /// by a Describe message, or not at all); a row-limited Execute sends its limit and keeps
    /// the rest in its portal (PortalSuspended follows instead of CommandComplete).
    pub(super) fn emit_rows(
        c: &mut Conn,
        r: &Running,
        stmt: &Stmt,
        mut rows: Vec<Vec<Option<String>>>,
        info: &mut StmtInfo,
    ) -> String {
        if !r.extended {
            if let Some(cols) = columns_of(stmt) {
                c.out.extend(be::row_description(&cols));
            }
        }
        let n = rows.len();
        info.rows = n;
        if let Some((portal, limit)) = r.limit.as_ref().filter(|(_, l)| n > *l) {
            let rest = rows.split_off(*limit);
            for row in &rows {
                c.out.extend(be::data_row(row));
            }
            if let Some(p) = c.portals.get_mut(portal) {
                p.suspended = Some(Suspended {
                    rows: rest.into(),
                    sent: *limit,
                });
            }
            info.suspended = true;
            return format!("SELECT {n}");
        }
        for row in rows {
            c.out.extend(be::data_row(&row));
        }
        format!("SELECT {n}")
    }

    /// The current user's privileges on `kv` (the catalogue, the same on every server).
    pub(super) fn check_kv_access(c: &Conn) -> Result<(), SqlError> {
        if may_use_kv(&c.current_user()) {
            Ok(())
        } else {
            Err(SqlError::new("42501", "permission denied for table kv"))
        }
    }

    pub(super) fn check_writable(&self, c: &mut Conn, verb: &str) -> Result<(), SqlError> {
        Self::check_kv_access(c)?;
        if self.server(c.server).role == Role::Reader {
            return Err(read_only_tx(verb).refused());
        }
        if tx(c).read_only {
            return Err(read_only_tx(verb));
        }
        Ok(())
    }

    pub(super) fn note_write(&mut self, c: &mut Conn, xid: Xid, k: i64, v: Option<i64>, lsn: Lsn) {
        let t = tx(c);
        t.writes.push(TxWrite { xid, k, v });
        t.last_wal = Some(lsn);
        t.cid_used = true;
        let (cid, top) = (t.cid, t.top.xid.unwrap_or(xid));
        self.log(Event::Write(WriteRecord {
            server: c.server,
            conn: c.id,
            xid,
            top_xid: top,
            cid,
            k,
            v,
            lsn,
        }));
    }

    pub(super) fn modify(
        &mut self,
        c: &mut Conn,
        k: i64,
        v: Option<i64>,
        info: &mut StmtInfo,
    ) -> Result<u32, SqlError> {
        let snap = self.snapshot(c, info);
        let own = tx(c).own_set();
        let Some(idx) = self
            .store
            .prepare_modify(k, &snap, &own)
            .map_err(|e| conflict_error(e, k))?
        else {
            return Ok(0);
        };
        let xid = self.ensure_xid(c);
        let lsn = self.store.append();
        let cid = tx(c).cid;
        self.store.apply_modify(k, idx, v, xid, cid, lsn);
        self.note_write(c, xid, k, v, lsn);
        Ok(1)
    }

    pub(super) fn lock_row(
        &mut self,
        c: &mut Conn,
        k: i64,
        l: RowLock,
        snap: &Snapshot,
    ) -> Result<Option<i64>, SqlError> {
        let verb = format!("SELECT {}", l.sql());
        if self.server(c.server).role == Role::Reader {
            return Err(read_only_tx(&verb).refused());
        }
        if tx(c).read_only {
            return Err(read_only_tx(&verb));
        }
        let exclusive = matches!(l, RowLock::Update | RowLock::NoKeyUpdate);
        let own = tx(c).own_set();
        let v = self
            .store
            .check_lock(k, snap, &own, exclusive)
            .map_err(|e| conflict_error(e, k))?;
        if v.is_some() {
            let xid = self.ensure_xid(c);
            let lsn = self.store.append();
            self.store.add_row_lock(k, xid, exclusive);
            let t = tx(c);
            t.last_wal = Some(lsn);
            t.cid_used = true;
        }
        Ok(v)
    }

    pub(super) fn func(&mut self, c: &mut Conn, f: &Func) -> Result<Option<String>, SqlError> {
        let role = self.server(c.server).role;
        let is_reader = role == Role::Reader;
        Ok(match f {
            Func::Nextval(name) => {
                if name != "s" {
                    return Err(SqlError::new(
                        "42P01",
                        format!("relation \"{name}\" does not exist"),
                    ));
                }
                if is_reader {
                    return Err(read_only_tx("nextval()").refused());
                }
                if tx(c).read_only {
                    return Err(read_only_tx("nextval()"));
                }
                self.ensure_top_xid(c);
                let lsn = self.store.append();
                tx(c).last_wal = Some(lsn);
                self.store.seq_s += 1;
                Some(self.store.seq_s.to_string())
            }
            Func::SetConfig {
                name,
                value,
                is_local,
            } => {
                let eval = |e: &StrExpr| e.eval().map_err(|(code, m)| SqlError::new(code, m));
                let (name, value) = (eval(name)?, eval(value)?);
                self.set(c, &name, SetValue::Text(value.clone()), *is_local)?;
                Some(self.show(c, &name).unwrap_or(value))
            }
            Func::AdvisoryLock(n) => {
                c.advisory.insert(*n);
                Some(String::new())
            }
            Func::AdvisoryUnlockAll => {
                c.advisory.clear();
                Some(String::new())
            }
            Func::CurrentWalInsertLsn | Func::CurrentWalLsn => {
                if is_reader {
                    return Err(SqlError::new("55000", "recovery is in progress")
                        .hint("WAL control functions cannot be executed during recovery.")
                        .refused());
                }
                let l = if matches!(f, Func::CurrentWalInsertLsn) {
                    self.store.insert
                } else {
                    self.store.flushed
                };
                Some(l.to_string())
            }
            Func::LastWalReplayLsn => is_reader.then(|| self.server(c.server).replay.to_string()),
            Func::IsInRecovery => Some(if is_reader { "t" } else { "f" }.to_string()),
            Func::CurrentUser => Some(c.current_user()),
            Func::SessionUser => Some(c.session_user()),
            Func::CurrentSetting { name, missing_ok } => match self.show(c, name) {
                Ok(v) => Some(v),
                Err(_) if *missing_ok => None,
                Err(e) => return Err(e),
            },
            Func::SetTenant(tenant) => {
                // A user function: whatever server runs it, its set_config runs there.
                self.set(c, "app.tenant", SetValue::Text(tenant.clone()), false)?;
                Some(String::new())
            }
            Func::PgNotify { channel, payload } => {
                self.notify(c, channel, payload)?;
                Some(String::new())
            }
            Func::TxidCurrent => {
                if is_reader {
                    return Err(SqlError::new(
                        "25006",
                        "cannot assign TransactionIds during recovery",
                    )
                    .refused());
                }
                Some(self.ensure_top_xid(c).to_string())
            }
        })
    }
}

/// Statements that read or write `kv`.
impl Cluster {
    pub(super) fn lock_table(&mut self, c: &mut Conn, mode: LockMode) -> ExecResult {
        let is_reader = self.server(c.server).role == Role::Reader;
        let t = tx(c);
        if !(t.explicit || t.multi) {
            return Err(no_tx_block("LOCK TABLE").into());
        }
        let strong = mode > LockMode::RowExclusive;
        if is_reader {
            if strong {
                return Err(
                    SqlError::new("25006", "cannot execute LOCK TABLE during recovery")
                        .refused()
                        .into(),
                );
            }
            return Ok("LOCK TABLE".into());
        }
        if strong && t.read_only {
            return Err(read_only_tx("LOCK TABLE").into());
        }
        t.unsplittable = true;
        if mode == LockMode::AccessExclusive {
            // Logged for hot standbys: needs an XID and a WAL record.
            self.ensure_xid(c);
            let lsn = self.store.append();
            tx(c).last_wal = Some(lsn);
        }
        Ok("LOCK TABLE".into())
    }

    pub(super) fn create_temp(&mut self, c: &mut Conn) -> ExecResult {
        if self.server(c.server).role == Role::Reader {
            return Err(read_only_tx("CREATE TABLE").refused().into());
        }
        if tx(c).read_only {
            return Err(read_only_tx("CREATE TABLE").into());
        }
        self.ensure_xid(c);
        let lsn = self.store.append();
        let t = tx(c);
        t.last_wal = Some(lsn);
        t.cid_used = true;
        c.temp = true;
        Ok("CREATE TABLE".into())
    }

    pub(super) fn insert(
        &mut self,
        c: &mut Conn,
        info: &mut StmtInfo,
        k: i64,
        v: i64,
    ) -> ExecResult {
        self.check_writable(c, "INSERT")?;
        let k = int4(k)?;
        let v = int4(v)?;
        self.snapshot(c, info);
        let own = tx(c).own_set();
        self.store
            .check_insert(k, &own)
            .map_err(|e| conflict_error(e, k))?;
        let xid = self.ensure_xid(c);
        let lsn = self.store.append();
        let cid = tx(c).cid;
        self.store.insert_row(k, v, xid, cid, lsn);
        self.note_write(c, xid, k, Some(v), lsn);
        Ok("INSERT 0 1".into())
    }

    pub(super) fn select_all(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        p: &Parsed,
        info: &mut StmtInfo,
    ) -> ExecResult {
        Self::check_kv_access(c)?;
        let snap = self.select_prelude(c, r, info)?;
        let rows = self.store.scan(&snap);
        info.reads = rows.iter().map(|(k, v)| (*k, Some(*v))).collect();
        let rows = rows
            .into_iter()
            .map(|(k, v)| vec![Some(k.to_string()), Some(v.to_string())])
            .collect();
        Ok(Self::emit_rows(c, r, &p.stmt, rows, info))
    }

    pub(super) fn select_v(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        p: &Parsed,
        info: &mut StmtInfo,
        k: i64,
        lock: Option<RowLock>,
    ) -> ExecResult {
        let k = int4(k)?;
        Self::check_kv_access(c)?;
        let snap = self.select_prelude(c, r, info)?;
        let value = match lock {
            None => self.store.read(k, &snap),
            Some(l) => self.lock_row(c, k, l, &snap)?,
        };
        info.reads = vec![(k, value)];
        let rows = value
            .map(|v| vec![Some(v.to_string())])
            .into_iter()
            .collect();
        Ok(Self::emit_rows(c, r, &p.stmt, rows, info))
    }
}
