//! One statement: dispatched by kind to the transaction, settings and data parts of the server.

use super::prelude::*;

impl Cluster {
    pub(super) fn exec(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        p: &Parsed,
        info: &mut StmtInfo,
    ) -> ExecResult {
        match &p.stmt {
            Stmt::Begin { start, modes } => self.begin(c, info, *start, *modes),
            Stmt::Commit => self.commit(c, info),
            Stmt::Rollback => self.rollback(c, info),
            Stmt::Savepoint(name) => self.savepoint(c, name),
            Stmt::Release(name) => self.release(c, name),
            Stmt::RollbackTo(name) => self.rollback_to(c, name),
            Stmt::Set { local, name, value } => self.set_stmt(c, info, *local, name, value),
            Stmt::SetTransaction(modes) => self.set_transaction(c, info, *modes),
            Stmt::SetSessionCharacteristics(modes) => self.set_session_characteristics(c, *modes),
            Stmt::Reset(name) => self.reset(c, name.as_deref()),
            Stmt::Show(name) => {
                let value = self.show(c, name)?;
                Self::emit_rows(c, r, &p.stmt, vec![vec![Some(value)]], info);
                Ok("SHOW".into())
            }
            Stmt::DiscardAll => self.discard_all(c),
            Stmt::Lock(mode) => self.lock_table(c, *mode),
            Stmt::CreateTemp => self.create_temp(c),
            Stmt::Insert { k, v } => self.insert(c, info, *k, *v),
            Stmt::Update { k, v } => {
                self.check_writable(c, "UPDATE")?;
                let (k, v) = (int4(*k)?, int4(*v)?);
                let n = self.modify(c, k, Some(v), info)?;
                Ok(format!("UPDATE {n}"))
            }
            Stmt::Delete { k } => {
                self.check_writable(c, "DELETE")?;
                let k = int4(*k)?;
                let n = self.modify(c, k, None, info)?;
                Ok(format!("DELETE {n}"))
            }
            Stmt::SelectConst(n) => {
                self.select_prelude(c, r, info)?;
                let rows = vec![vec![Some(n.to_string())]];
                Ok(Self::emit_rows(c, r, &p.stmt, rows, info))
            }
            Stmt::SelectAll => self.select_all(c, r, p, info),
            Stmt::SelectV { k, lock } => self.select_v(c, r, p, info, *k, *lock),
            Stmt::Listen(channel) => self.listen(c, channel),
            Stmt::Unlisten(channel) => {
                match channel {
                    Some(ch) => c.listening.remove(ch),
                    None => {
                        c.listening.clear();
                        true
                    }
                };
                Ok("UNLISTEN".into())
            }
            Stmt::Notify { channel, payload } => {
                self.notify(c, channel, payload)?;
                Ok("NOTIFY".into())
            }
            Stmt::Deallocate(name) => self.deallocate(c, name.as_deref()),
            Stmt::SetRole(role) => {
                self.set_role(c, role.as_deref())?;
                Ok("SET".into())
            }
            Stmt::SetSessionAuthorization(user) => {
                self.set_session_authorization(c, user.as_deref())?;
                Ok("SET".into())
            }
            Stmt::DoRaise(message) => Err(SqlError::new("P0001", message.clone()).into()),
            Stmt::LoginCheck(_) => {
                self.select_prelude(c, r, info)?;
                Ok(Self::emit_rows(c, r, &p.stmt, Vec::new(), info))
            }
            Stmt::Capture(arg) => {
                self.select_prelude(c, r, info)?;
                let rows = self.capture(c, arg)?;
                Ok(Self::emit_rows(c, r, &p.stmt, rows, info))
            }
            Stmt::CaptureLogin(arg) => {
                self.select_prelude(c, r, info)?;
                // Its text has no row of a hazard kind (4, 6, 7, 8, 9).
                let mut rows = self.capture(c, arg)?;
                rows.retain(|row| matches!(row[0].as_deref(), Some("1" | "2" | "3" | "5")));
                Ok(Self::emit_rows(c, r, &p.stmt, rows, info))
            }
            Stmt::SelectFunc(f) => {
                self.select_prelude(c, r, info)?;
                let value = self.func(c, f)?;
                Ok(Self::emit_rows(c, r, &p.stmt, vec![vec![value]], info))
            }
        }
    }
}
