//! Frontend messages: simple Query and the extended protocol (Parse, Bind, Describe,
//! Execute with row limits and PortalSuspended, Close, Sync, Flush), an error skipping to Sync.
//!
//! As in PostgreSQL: a simple Query destroys the unnamed statement and portal; portals end with
//! their transaction (a Sync outside a transaction block ends it); a Bind substitutes its text
//! parameters into the statement's `$n` placeholders.

use super::prelude::*;
use crate::session::{Portal, Prepared};

impl Cluster {
    pub(super) fn batch(&mut self, c: &mut Conn) {
        if !c.batch_open {
            c.batch_open = true;
            c.query_seq += 1;
        }
        if self.cfg.hold_until_flush && c.hold_from.is_none() {
            c.hold_from = Some(c.out.len());
        }
    }

    pub(super) fn handle(&mut self, c: &mut Conn, m: Inbound) {
        // After an error in an extended-protocol batch, everything up to Sync is ignored (as
        // PostgreSQL does, a simple Query included).
        if c.skip_until_sync && !matches!(m, Inbound::Msg(Front::Sync) | Inbound::Terminate) {
            return;
        }
        if matches!(
            m,
            Inbound::Msg(Front::Parse { .. })
                | Inbound::Msg(Front::Bind { .. })
                | Inbound::Msg(Front::Describe { .. })
                | Inbound::Msg(Front::Execute { .. })
                | Inbound::Msg(Front::Close { .. })
        ) {
            self.batch(c);
        }
        match m {
            Inbound::Msg(Front::Query(sql)) => self.simple_query(c, sql),
            Inbound::Msg(Front::Parse { name, sql }) => self.parse_msg(c, name, sql),
            Inbound::Msg(Front::Bind {
                portal,
                statement,
                params,
            }) => self.bind_msg(c, portal, statement, params),
            Inbound::Msg(Front::Describe { portal, name }) => self.describe_msg(c, portal, &name),
            Inbound::Msg(Front::Execute { portal, max_rows }) => {
                self.execute_msg(c, portal, max_rows)
            }
            Inbound::Msg(Front::Close { portal, name }) => {
                if portal {
                    c.portals.remove(&name);
                } else {
                    c.prepared.remove(&name);
                }
                c.out.extend(be::close_complete());
            }
            Inbound::Msg(Front::Sync) => {
                self.batch(c);
                c.skip_until_sync = false;
                if !c.tx.as_ref().is_some_and(|t| t.explicit) {
                    // The implicit transaction ends here, and its portals with it.
                    c.portals.clear();
                }
                self.finish_query(c);
                c.batch_open = false;
                c.hold_from = None;
            }
            // Everything produced so far goes out; no ReadyForQuery.
            Inbound::Msg(Front::Flush) => c.hold_from = None,
            Inbound::Terminate => self.close_conn(c, CloseReason::Terminate),
            Inbound::Unsupported(t) => {
                let e = SqlError::new(
                    "0A000",
                    format!(
                        "message type '{}' is not supported by the simulator",
                        char::from(t)
                    ),
                );
                if c.batch_open {
                    self.ext_error(c, e);
                } else {
                    emit_error(&mut c.out, &e);
                    self.send_rfq(c);
                }
            }
        }
    }

    fn simple_query(&mut self, c: &mut Conn, sql: String) {
        c.query_seq += 1;
        c.batch_open = false;
        c.prepared.remove("");
        c.portals.remove("");
        match parse_query(&sql) {
            Err(e) => {
                let e = SqlError::new("42601", e.message);
                emit_error(&mut c.out, &e);
                self.record_parse_error(c, &sql, &e);
                self.fail_tx(c);
                self.finish_query(c);
            }
            Ok(stmts) if stmts.is_empty() => {
                c.out.extend(be::empty_query());
                self.finish_query(c);
            }
            Ok(stmts) => c.running = Some(Running::new(stmts, false, self.now, None)),
        }
    }

    fn parse_msg(&mut self, c: &mut Conn, name: String, sql: String) {
        let (described, params) = placeholders(&sql, |_| "0".to_string());
        let parsed = match parse_query(&described) {
            Err(e) => Err(SqlError::new("42601", e.message)),
            Ok(v) if v.len() > 1 => Err(SqlError::new(
                "42601",
                "cannot insert multiple commands into a prepared statement",
            )),
            Ok(v) => Ok(v.into_iter().next()),
        };
        match parsed {
            Err(e) => {
                self.record_parse_error(c, &sql, &e);
                self.ext_error(c, e)
            }
            Ok(_) if !name.is_empty() && c.prepared.contains_key(&name) => self.ext_error(
                c,
                SqlError::new(
                    "42P05",
                    format!("prepared statement \"{name}\" already exists"),
                ),
            ),
            Ok(stmt) => {
                c.prepared.insert(
                    name,
                    Prepared {
                        text: sql,
                        stmt,
                        params,
                    },
                );
                c.out.extend(be::parse_complete());
            }
        }
    }

    fn bind_msg(
        &mut self,
        c: &mut Conn,
        portal: String,
        statement: String,
        params: Vec<Option<String>>,
    ) {
        let Some(p) = c.prepared.get(&statement).cloned() else {
            return self.ext_error(c, no_prepared(&statement));
        };
        if !portal.is_empty() && c.portals.contains_key(&portal) {
            let e = SqlError::new("42P03", format!("cursor \"{portal}\" already exists"));
            return self.ext_error(c, e);
        }
        if params.len() != p.params {
            let e = SqlError::new(
                "08P01",
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{statement}\" requires {}",
                    params.len(),
                    p.params
                ),
            );
            return self.ext_error(c, e);
        }
        let stmt = if p.params == 0 {
            p.stmt
        } else {
            let (text, _) = placeholders(&p.text, |i| literal(params[i - 1].as_deref()));
            match parse_query(&text) {
                Ok(v) => v.into_iter().next(),
                Err(e) => return self.ext_error(c, SqlError::new("22P02", e.message)),
            }
        };
        c.portals.insert(
            portal,
            Portal {
                stmt,
                suspended: None,
            },
        );
        c.out.extend(be::bind_complete());
    }

    fn describe_msg(&mut self, c: &mut Conn, portal: bool, name: &str) {
        let found = if portal {
            c.portals.get(name).map(|p| (p.stmt.clone(), 0))
        } else {
            c.prepared.get(name).map(|p| (p.stmt.clone(), p.params))
        };
        let Some((stmt, params)) = found else {
            let e = if portal {
                no_portal(name)
            } else {
                no_prepared(name)
            };
            return self.ext_error(c, e);
        };
        if !portal {
            // Parameters are text (OID 25) in the simulator.
            c.out
                .extend(be::parameter_description(&vec![oid::TEXT; params]));
        }
        match stmt.as_ref().and_then(|p| columns_of(&p.stmt)) {
            Some(cols) => c.out.extend(be::row_description(&cols)),
            None => c.out.extend(be::no_data()),
        }
    }

    fn execute_msg(&mut self, c: &mut Conn, portal: String, max_rows: i32) {
        let Some(p) = c.portals.get_mut(&portal) else {
            return self.ext_error(c, no_portal(&portal));
        };
        let limit = usize::try_from(max_rows).ok().filter(|n| *n > 0);
        if let Some(s) = p.suspended.as_mut() {
            // The rest of a suspended portal: no new snapshot, no new history record.
            let n = limit.unwrap_or(usize::MAX).min(s.rows.len());
            for row in s.rows.drain(..n) {
                c.out.extend(be::data_row(&row));
            }
            s.sent += n;
            if s.rows.is_empty() {
                let tag = format!("SELECT {}", s.sent);
                p.suspended = None;
                // A finished portal cannot run again (PostgreSQL answers an empty result).
                p.stmt = None;
                c.out.extend(be::command_complete(&tag));
            } else {
                c.out.extend(be::portal_suspended());
            }
            return;
        }
        match p.stmt.clone() {
            None => c.out.extend(be::empty_query()),
            Some(stmt) => {
                let limit = limit.map(|n| (portal, n));
                c.running = Some(Running::new(vec![stmt], true, self.now, limit));
            }
        }
    }

    /// An error in an extended-protocol batch: skip to Sync.
    pub(super) fn ext_error(&mut self, c: &mut Conn, e: SqlError) {
        emit_error(&mut c.out, &e);
        self.fail_tx(c);
        c.skip_until_sync = true;
    }
}

/// `DEALLOCATE` (the SQL statement): protocol-level and SQL-level prepared statements share
/// one namespace.
impl Cluster {
    pub(super) fn deallocate(&mut self, c: &mut Conn, name: Option<&str>) -> ExecResult {
        match name {
            None => {
                c.prepared.clear();
                Ok("DEALLOCATE ALL".into())
            }
            Some(n) => match c.prepared.remove(n) {
                Some(_) => Ok("DEALLOCATE".into()),
                None => Err(no_prepared(n).into()),
            },
        }
    }
}

impl Running {
    pub(crate) fn new(
        stmts: Vec<Parsed>,
        extended: bool,
        now: u64,
        limit: Option<(String, usize)>,
    ) -> Running {
        Running {
            stmts,
            idx: 0,
            extended,
            started: now,
            wait: None,
            outcome: None,
            limit,
        }
    }
}

/// Replaces `$n` placeholders outside quotes by `value(n)`; returns the text and the highest
/// `n` (the number of parameters).
fn placeholders(sql: &str, value: impl Fn(usize) -> String) -> (String, usize) {
    let b = sql.as_bytes();
    let (mut out, mut max, mut i) = (String::with_capacity(sql.len()), 0, 0);
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let ch = b[i];
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => {}
            None if ch == b'\'' || ch == b'"' => quote = Some(ch),
            None if ch == b'$' && b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let end = i + 1 + b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
                let n: usize = sql[i + 1..end].parse().unwrap_or(0);
                max = max.max(n);
                out.push_str(&value(n.max(1)));
                i = end;
                continue;
            }
            None => {}
        }
        let len = sql[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&sql[i..i + len]);
        i += len;
    }
    (out, max)
}

/// A parameter as SQL: an integer as is, anything else as a string literal, NULL as `NULL`.
fn literal(v: Option<&str>) -> String {
    match v {
        None => "NULL".into(),
        Some(s)
            if !s.is_empty()
                && s.trim_start_matches('-')
                    .bytes()
                    .all(|b| b.is_ascii_digit()) =>
        {
            s.to_string()
        }
        Some(s) => format!("'{}'", s.replace('\'', "''")),
    }
}
