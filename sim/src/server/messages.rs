//! Frontend messages: simple Query and the extended protocol (Parse, Bind, Describe,
//! Execute, Close, Sync, Flush), an error skipping to Sync.

use super::prelude::*;

impl Cluster {
    pub(super) fn batch(&mut self, c: &mut Conn) {
        if !c.batch_open {
            c.batch_open = true;
            c.query_seq += 1;
        }
    }

    pub(super) fn handle(&mut self, c: &mut Conn, m: Inbound) {
        // After an error in an extended-protocol batch, everything up to Sync is ignored (as
        // PostgreSQL does, a simple Query included).
        if c.skip_until_sync && !matches!(m, Inbound::Sync | Inbound::Terminate) {
            return;
        }
        if matches!(
            m,
            Inbound::Parse { .. }
                | Inbound::Bind { .. }
                | Inbound::Describe { .. }
                | Inbound::Execute { .. }
                | Inbound::Close { .. }
        ) {
            self.batch(c);
        }
        match m {
            Inbound::Query(sql) => {
                c.query_seq += 1;
                c.batch_open = false;
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
                    Ok(stmts) => {
                        c.running = Some(Running {
                            stmts,
                            idx: 0,
                            extended: false,
                            started: self.now,
                            wait: None,
                            outcome: None,
                        })
                    }
                }
            }
            Inbound::Parse { name, sql } => {
                let parsed = match parse_query(&sql) {
                    Err(e) => Err(SqlError::new("42601", e.message)),
                    Ok(v) if v.len() > 1 => Err(SqlError::new(
                        "42601",
                        "cannot insert multiple commands into a prepared statement",
                    )),
                    Ok(v) => Ok(v.into_iter().next()),
                };
                match parsed {
                    Err(e) => self.ext_error(c, e),
                    Ok(_) if !name.is_empty() && c.prepared.contains_key(&name) => self.ext_error(
                        c,
                        SqlError::new(
                            "42P05",
                            format!("prepared statement \"{name}\" already exists"),
                        ),
                    ),
                    Ok(p) => {
                        c.prepared.insert(name, p);
                        c.out.extend(be::parse_complete());
                    }
                }
            }
            Inbound::Bind { portal, statement } => match c.prepared.get(&statement).cloned() {
                None => self.ext_error(c, no_prepared(&statement)),
                Some(p) => {
                    c.portals.insert(portal, p);
                    c.out.extend(be::bind_complete());
                }
            },
            Inbound::Describe { portal, name } => {
                let found = if portal {
                    c.portals.get(&name).cloned()
                } else {
                    c.prepared.get(&name).cloned()
                };
                match found {
                    None => {
                        let e = if portal {
                            no_portal(&name)
                        } else {
                            no_prepared(&name)
                        };
                        self.ext_error(c, e);
                    }
                    Some(p) => {
                        if !portal {
                            c.out.extend(be::parameter_description(&[]));
                        }
                        match p.as_ref().and_then(|p| columns_of(&p.stmt)) {
                            Some(cols) => c.out.extend(be::row_description(&cols)),
                            None => c.out.extend(be::no_data()),
                        }
                    }
                }
            }
            Inbound::Execute { portal } => match c.portals.get(&portal).cloned() {
                None => self.ext_error(c, no_portal(&portal)),
                Some(None) => c.out.extend(be::empty_query()),
                Some(Some(p)) => {
                    c.running = Some(Running {
                        stmts: vec![p],
                        idx: 0,
                        extended: true,
                        started: self.now,
                        wait: None,
                        outcome: None,
                    })
                }
            },
            Inbound::Close { portal, name } => {
                if portal {
                    c.portals.remove(&name);
                } else {
                    c.prepared.remove(&name);
                }
                c.out.extend(be::close_complete());
            }
            Inbound::Sync => {
                self.batch(c);
                c.skip_until_sync = false;
                c.portals.remove("");
                self.finish_query(c);
                c.batch_open = false;
            }
            Inbound::Flush => {}
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

    /// An error in an extended-protocol batch: skip to Sync.
    pub(super) fn ext_error(&mut self, c: &mut Conn, e: SqlError) {
        emit_error(&mut c.out, &e);
        self.fail_tx(c);
        c.skip_until_sync = true;
    }
}
