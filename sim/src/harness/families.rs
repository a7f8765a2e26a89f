//! Scenario families beyond the CI set: workloads for protocol paths the engine is gaining
//! (SPEC §10, S-4…S-7, R-1a/R-1b, §11), each behind a switch that is off in the CI scenarios,
//! so that a family can be turned on as the engine gains its capability.
//!
//! Everything here draws from its own random streams: a scenario with every family off is
//! exactly the CI scenario of its seed.

use super::shape::Front;
use super::workload::{Op, OpKind};
use crate::Rng;

/// Which families a scenario runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Families {
    /// Prepared statements as drivers use them (E-2): psycopg's unnamed-then-`_pg3_N` after
    /// five executions, asyncpg's `__asyncpg_stmt_N__` prepared by Parse/Describe/Flush,
    /// parameters, Describe-only batches, row-limited Executes in a transaction (JDBC
    /// fetchSize), Close, DEALLOCATE, DISCARD ALL.
    pub extended: bool,
    /// Pipelines of mixed reads and writes (E-1), a batch failing after an earlier Execute's
    /// rows.
    pub pipeline: bool,
    /// A lone Flush (E-1, issue 17 point 1): asyncpg prepares with Parse/Describe/Flush and
    /// waits for the answer; psycopg ends pipelines with Sync then Flush. (Without it, the
    /// extended family prepares asyncpg-style with a Sync, as libpq's PQprepare does.)
    pub flush: bool,
    /// LISTEN/NOTIFY: notifications arriving during other statements and hidden ones.
    pub notify: bool,
    /// Session state changed by SET ROLE, SET SESSION AUTHORIZATION, RESET ALL, set_config in
    /// a user function, DISCARD ALL (S-5, S-6); the checker compares the reader's state with
    /// the writer's at every read.
    pub session_state: bool,
    /// Readers that crash and restart behind their replay position, freeze (SIGSTOP), or
    /// cancel reads for recovery conflicts (R-1a, R-1b, F-1).
    pub reader_faults: bool,
    /// Clients that hand their session's position to another client (causal tokens, §11),
    /// through `SET polarsplit.causal_token` (C-2).
    pub causal: bool,
}

impl Families {
    pub const NONE: Families = Families {
        extended: false,
        pipeline: false,
        flush: false,
        notify: false,
        session_state: false,
        reader_faults: false,
        causal: false,
    };

    pub fn any(&self) -> bool {
        *self != Families::NONE
    }

    /// The families named in a comma-separated list (`extended,pipeline,…`, or `all`).
    pub fn parse(list: &str) -> Result<Families, String> {
        let mut f = Families::NONE;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => {
                    f = Families {
                        extended: true,
                        pipeline: true,
                        flush: true,
                        notify: true,
                        session_state: true,
                        reader_faults: true,
                        causal: true,
                    }
                }
                "extended" => f.extended = true,
                "pipeline" => f.pipeline = true,
                "flush" => f.flush = true,
                "notify" => f.notify = true,
                "session_state" => f.session_state = true,
                "reader_faults" => f.reader_faults = true,
                "causal" => f.causal = true,
                other => return Err(format!("unknown scenario family {other:?}")),
            }
        }
        Ok(f)
    }
}

/// What an Execute (or a statement of a Query) of a family script does, for the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `SELECT v FROM kv WHERE k = $1`.
    Read {
        k: i64,
    },
    /// `UPDATE kv SET v = $1 WHERE k = $2`.
    Write {
        k: i64,
        v: i64,
    },
    /// A statement meant to fail (duplicate key): the rest of its batch is skipped and the
    /// batch's writes roll back.
    Fail,
    /// `SELECT current_user` / `session_user` / `current_setting('app.tenant', true)`.
    StateRead,
    Other,
}

/// A family operation, as the checker needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyOp {
    pub what: &'static str,
    /// Per script message index: what that Execute or Query does.
    pub steps: Vec<(usize, Step)>,
    /// NOTIFY payload sent by this operation.
    pub notify: Option<String>,
    /// The script ends with a Flush after its last Sync, or is Parse/Describe/Flush only.
    pub flush_tail: bool,
    /// A causal token presented: the write it must make visible (client, key, value).
    pub token_for: Option<(usize, i64, i64)>,
}

const READ: &str = "SELECT v FROM kv WHERE k = $1";
const WRITE: &str = "UPDATE kv SET v = $1 WHERE k = $2";
const INSERT: &str = "INSERT INTO kv VALUES ($1, $2)";
const SCAN: &str = "SELECT k, v FROM kv ORDER BY k";

/// A client's family operations.
#[derive(Debug)]
pub struct FamilyWork {
    f: Families,
    rng: Rng,
    client: u64,
    keys: i64,
    left: u32,
    counter: i64,
    /// psycopg: executions per text, and the name it prepared the text under.
    psycopg: Vec<(&'static str, u32, Option<String>)>,
    asyncpg: Vec<(&'static str, String)>,
    names: u32,
    listener: bool,
    listened: bool,
    notifies: u32,
    /// Operations already decided (a write and the reads that re-read it).
    queued: std::collections::VecDeque<Op>,
}

impl FamilyWork {
    pub fn new(f: Families, seed: u64, client: u64, ops: u32, keys: i64) -> FamilyWork {
        let mut rng = Rng::derive(seed, "family-workload", client);
        let listener = f.notify && rng.range(0, 1) == 0;
        FamilyWork {
            f,
            rng,
            client,
            keys: keys.max(1),
            left: ops,
            counter: 500_000,
            psycopg: Vec::new(),
            asyncpg: Vec::new(),
            names: 0,
            listener,
            listened: false,
            notifies: 0,
            queued: Default::default(),
        }
    }

    pub fn has_more(&self) -> bool {
        self.left > 0 || !self.queued.is_empty()
    }

    /// Values unique in the scenario (client × 1,000,000 + 500,000 + counter).
    fn value(&mut self) -> i64 {
        self.counter += 1;
        (self.client as i64 + 1) * 1_000_000 + self.counter
    }

    fn key(&mut self) -> i64 {
        1 + self.rng.range(0, (self.keys - 1) as u64) as i64
    }

    fn op(what: &'static str, sql: &str, script: Vec<Front>, steps: Vec<(usize, Step)>) -> Op {
        Op {
            kind: OpKind::Family(FamilyOp {
                what,
                steps,
                notify: None,
                flush_tail: matches!(script.last(), Some(Front::Flush)),
                token_for: None,
            }),
            sql: sql.to_string(),
            extended: true,
            script,
        }
    }

    /// The next family operation, or `None` to let the client's ordinary workload go on.
    pub fn next_op(&mut self) -> Option<Op> {
        if let Some(op) = self.queued.pop_front() {
            return Some(op);
        }
        if self.left == 0 {
            return None;
        }
        if self.listener && !self.listened {
            self.listened = true;
            self.left -= 1;
            return Some(Self::op(
                "listen",
                "LISTEN ch",
                vec![Front::Query("LISTEN ch".into())],
                vec![(0, Step::Other)],
            ));
        }
        if self.rng.range(0, 99) >= 45 {
            return None;
        }
        let mut menu: Vec<fn(&mut FamilyWork) -> Op> = Vec::new();
        if self.f.extended {
            menu.extend([
                FamilyWork::psycopg as fn(&mut FamilyWork) -> Op,
                FamilyWork::psycopg,
                FamilyWork::asyncpg,
                FamilyWork::asyncpg,
                FamilyWork::describe_only,
                FamilyWork::fetch_in_transaction,
                FamilyWork::jdbc_transaction,
                FamilyWork::forget_statements,
            ]);
        }
        if self.f.pipeline || self.f.flush {
            menu.extend([
                FamilyWork::pipeline as fn(&mut FamilyWork) -> Op,
                FamilyWork::pipeline,
                FamilyWork::batch_failure,
            ]);
        }
        if self.f.flush && !self.f.extended {
            menu.push(FamilyWork::asyncpg);
        }
        if self.f.notify && self.notifies < 6 {
            menu.push(FamilyWork::notify);
        }
        if self.f.session_state {
            menu.extend([
                FamilyWork::state_change as fn(&mut FamilyWork) -> Op,
                FamilyWork::state_change,
                FamilyWork::state_read,
            ]);
        }
        if self.f.reader_faults {
            menu.push(FamilyWork::write_then_reread);
        }
        if menu.is_empty() {
            // Nothing of this family is left to do (the notifications are all sent).
            self.left = 0;
            return None;
        }
        self.left -= 1;
        let pick = menu[self.rng.range(0, menu.len() as u64 - 1) as usize];
        Some(pick(self))
    }

    /// A read or a write as bind parameters.
    fn read_or_write(&mut self) -> (&'static str, Vec<Option<String>>, Step) {
        let k = self.key();
        if self.rng.range(0, 2) == 0 {
            let v = self.value();
            (
                WRITE,
                vec![Some(v.to_string()), Some(k.to_string())],
                Step::Write { k, v },
            )
        } else {
            (READ, vec![Some(k.to_string())], Step::Read { k })
        }
    }

    /// psycopg 3: unnamed Parse/Bind/Describe/Execute/Sync until a text ran five times, then
    /// prepared once as `_pg3_N` and bound by name.
    fn psycopg(&mut self) -> Op {
        let (text, params, step) = self.read_or_write();
        let idx = match self.psycopg.iter().position(|(t, _, _)| *t == text) {
            Some(i) => i,
            None => {
                self.psycopg.push((text, 0, None));
                self.psycopg.len() - 1
            }
        };
        self.psycopg[idx].1 += 1;
        let mut script = Vec::new();
        let name = match self.psycopg[idx].2.clone() {
            Some(n) => n,
            None if self.psycopg[idx].1 > 5 => {
                let n = format!("_pg3_{}", self.names);
                self.names += 1;
                self.psycopg[idx].2 = Some(n.clone());
                script.push(Front::Parse {
                    name: n.clone(),
                    sql: text.into(),
                });
                n
            }
            None => {
                script.push(Front::Parse {
                    name: String::new(),
                    sql: text.into(),
                });
                String::new()
            }
        };
        script.push(Front::Bind {
            portal: String::new(),
            statement: name,
            params,
        });
        script.push(Front::Describe {
            portal: true,
            name: String::new(),
        });
        let e = script.len();
        script.push(Front::Execute {
            portal: String::new(),
            max_rows: 0,
        });
        script.push(Front::Sync);
        Self::op("psycopg", text, script, vec![(e, step)])
    }

    /// asyncpg: a statement is prepared first (Parse/Describe/Flush, waiting for the
    /// answer), then bound by name with Bind/Execute/Sync.
    fn asyncpg(&mut self) -> Op {
        let (text, params, step) = self.read_or_write();
        if let Some((_, name)) = self.asyncpg.iter().find(|(t, _)| *t == text) {
            let script = vec![
                Front::Bind {
                    portal: String::new(),
                    statement: name.clone(),
                    params,
                },
                Front::Execute {
                    portal: String::new(),
                    max_rows: 0,
                },
                Front::Sync,
            ];
            return Self::op("asyncpg", text, script, vec![(1, step)]);
        }
        self.names += 1;
        let name = format!("__asyncpg_stmt_{}__", self.names);
        self.asyncpg.push((text, name.clone()));
        let script = vec![
            Front::Parse {
                name: name.clone(),
                sql: text.into(),
            },
            Front::Describe {
                portal: false,
                name,
            },
            if self.f.flush {
                Front::Flush
            } else {
                Front::Sync
            },
        ];
        Self::op("asyncpg-prepare", text, script, Vec::new())
    }

    /// A Describe-only batch (a driver asking for types before executing).
    fn describe_only(&mut self) -> Op {
        let script = vec![
            Front::Parse {
                name: String::new(),
                sql: READ.into(),
            },
            Front::Describe {
                portal: false,
                name: String::new(),
            },
            Front::Sync,
        ];
        Self::op("describe-only", READ, script, Vec::new())
    }

    /// JDBC with fetchSize inside a transaction: a named portal read a few rows at a time
    /// across Syncs (E-4: it must run on the writer).
    fn fetch_in_transaction(&mut self) -> Op {
        let mut script = vec![
            Front::Query("BEGIN".into()),
            Front::Parse {
                name: String::new(),
                sql: SCAN.into(),
            },
            Front::Bind {
                portal: "C_1".into(),
                statement: String::new(),
                params: vec![],
            },
        ];
        let mut steps = vec![(0, Step::Other)];
        for max_rows in [3, 3, 0] {
            steps.push((script.len(), Step::Other));
            script.push(Front::Execute {
                portal: "C_1".into(),
                max_rows,
            });
            script.push(Front::Sync);
        }
        steps.push((script.len(), Step::Other));
        script.push(Front::Query("COMMIT".into()));
        Self::op("fetch-in-transaction", SCAN, script, steps)
    }

    /// JDBC with autocommit off: Parse/Bind/Execute of `BEGIN` in the batch of the
    /// transaction's first read (E-1 cuts it off there), a second read in its own batch, then
    /// COMMIT the same way.
    fn jdbc_transaction(&mut self) -> Op {
        let unnamed = |sql: &str| {
            [
                Front::Parse {
                    name: String::new(),
                    sql: sql.into(),
                },
                Front::Bind {
                    portal: String::new(),
                    statement: String::new(),
                    params: vec![],
                },
            ]
        };
        let read = |k: i64| {
            [
                Front::Parse {
                    name: String::new(),
                    sql: READ.into(),
                },
                Front::Bind {
                    portal: String::new(),
                    statement: String::new(),
                    params: vec![Some(k.to_string())],
                },
                Front::Describe {
                    portal: true,
                    name: String::new(),
                },
            ]
        };
        let execute = Front::Execute {
            portal: String::new(),
            max_rows: 0,
        };
        let (k1, k2) = (self.key(), self.key());
        let mut script = Vec::from(unnamed("BEGIN"));
        let mut steps = vec![(script.len(), Step::Other)];
        script.push(execute.clone());
        script.extend(read(k1));
        steps.push((script.len(), Step::Read { k: k1 }));
        script.push(execute.clone());
        script.push(Front::Sync);
        script.extend(read(k2));
        steps.push((script.len(), Step::Read { k: k2 }));
        script.push(execute.clone());
        script.push(Front::Sync);
        script.extend(unnamed("COMMIT"));
        steps.push((script.len(), Step::Other));
        script.push(execute);
        script.push(Front::Sync);
        Self::op("jdbc-autocommit-off", READ, script, steps)
    }

    /// Close of a prepared statement, DEALLOCATE, DISCARD ALL: the client forgets them.
    fn forget_statements(&mut self) -> Op {
        let named: Vec<String> = self
            .psycopg
            .iter()
            .filter_map(|(_, _, n)| n.clone())
            .chain(self.asyncpg.iter().map(|(_, n)| n.clone()))
            .collect();
        let choice = self.rng.range(0, 3);
        let (what, script) = match (choice, named.first()) {
            (0, Some(n)) => (
                "close",
                vec![
                    Front::Close {
                        portal: false,
                        name: n.clone(),
                    },
                    Front::Sync,
                ],
            ),
            (1, Some(n)) => ("deallocate", vec![Front::Query(format!("DEALLOCATE {n}"))]),
            (2, _) => (
                "deallocate-all",
                vec![Front::Query("DEALLOCATE ALL".into())],
            ),
            _ => ("discard-all", vec![Front::Query("DISCARD ALL".into())]),
        };
        match (what, named.first()) {
            ("close" | "deallocate", Some(n)) => {
                let n = n.clone();
                self.asyncpg.retain(|(_, x)| *x != n);
                for p in self.psycopg.iter_mut() {
                    if p.2.as_deref() == Some(n.as_str()) {
                        *p = (p.0, 0, None);
                    }
                }
            }
            _ => {
                self.asyncpg.clear();
                self.psycopg.clear();
            }
        }
        let sql = match &script[0] {
            Front::Query(q) => q.clone(),
            _ => "CLOSE".into(),
        };
        Self::op(what, &sql, script, vec![(0, Step::Other)])
    }

    /// Several batches at once (psycopg pipeline mode), maybe ended by Sync then Flush.
    fn pipeline(&mut self) -> Op {
        let n = self.rng.range(2, 4);
        let mut script = Vec::new();
        let mut steps = Vec::new();
        for _ in 0..n {
            let (text, params, step) = self.read_or_write();
            script.push(Front::Parse {
                name: String::new(),
                sql: text.into(),
            });
            script.push(Front::Bind {
                portal: String::new(),
                statement: String::new(),
                params,
            });
            script.push(Front::Describe {
                portal: true,
                name: String::new(),
            });
            steps.push((script.len(), step));
            script.push(Front::Execute {
                portal: String::new(),
                max_rows: 0,
            });
            script.push(Front::Sync);
        }
        if self.f.flush && self.rng.range(0, 1) == 0 {
            script.push(Front::Flush);
        }
        Self::op("pipeline", READ, script, steps)
    }

    /// One batch of several Executes whose second fails (a duplicate key) after the first
    /// one's rows were sent: the rest is skipped and the batch rolls back.
    fn batch_failure(&mut self) -> Op {
        let k = self.key();
        let v = self.value();
        let k2 = self.key();
        let mut script = Vec::new();
        let mut steps = Vec::new();
        for (text, params, step) in [
            (READ, vec![Some(k.to_string())], Step::Read { k }),
            (
                WRITE,
                vec![Some(v.to_string()), Some(k2.to_string())],
                Step::Write { k: k2, v },
            ),
            (
                INSERT,
                vec![Some(k.to_string()), Some("1".into())],
                Step::Fail,
            ),
            (READ, vec![Some(k2.to_string())], Step::Read { k: k2 }),
        ] {
            script.push(Front::Parse {
                name: String::new(),
                sql: text.into(),
            });
            script.push(Front::Bind {
                portal: String::new(),
                statement: String::new(),
                params,
            });
            steps.push((script.len(), step));
            script.push(Front::Execute {
                portal: String::new(),
                max_rows: 0,
            });
        }
        script.push(Front::Sync);
        Self::op("batch-failure", READ, script, steps)
    }

    /// A write, then the same key read back again and again (as the end-to-end R-1a test
    /// does): the session's target stays at its write, so a reader believed past it is used
    /// without a wait — also after it restarted behind.
    fn write_then_reread(&mut self) -> Op {
        let k = self.key();
        let v = self.value();
        for _ in 0..12 {
            let read = format!("SELECT v FROM kv WHERE k = {k}");
            self.queued
                .push_back(query_op("reread", read, Step::Read { k }, None));
        }
        let write = format!("UPDATE kv SET v = {v} WHERE k = {k}");
        query_op("write", write, Step::Write { k, v }, None)
    }

    fn notify(&mut self) -> Op {
        self.notifies += 1;
        let payload = format!("c{}-{}", self.client, self.notifies);
        let sql = if self.rng.range(0, 1) == 0 {
            format!("NOTIFY ch, '{payload}'")
        } else {
            format!("SELECT pg_notify('ch', '{payload}')")
        };
        let mut op = query_op("notify", sql, Step::Other, None);
        if let OpKind::Family(f) = &mut op.kind {
            f.notify = Some(payload);
        }
        op
    }

    fn state_change(&mut self) -> Op {
        const CHANGES: &[&str] = &[
            "SET ROLE rr",
            "SET ROLE NONE",
            "RESET ROLE",
            "SET SESSION AUTHORIZATION ru",
            "SET SESSION AUTHORIZATION ru; SET ROLE rr",
            "RESET SESSION AUTHORIZATION",
            "RESET ALL",
            "SET app.tenant = 'acme'",
            "SELECT set_tenant('globex')",
            "SELECT set_config('app.tenant', 'initech', false)",
            "SELECT set_config('role', 'rr', false)",
            "SET TIME ZONE 'Europe/Lisbon'",
            "SET search_path = app, public",
            "SET datestyle TO iso; SET datestyle TO ymd",
            "BEGIN; SET ROLE rr; ROLLBACK",
            "DISCARD ALL",
        ];
        let sql = CHANGES[self.rng.range(0, CHANGES.len() as u64 - 1) as usize];
        if sql == "DISCARD ALL" {
            self.asyncpg.clear();
            self.psycopg.clear();
            self.listened = !self.listener;
        }
        query_op("state-change", sql.into(), Step::Other, None)
    }

    fn state_read(&mut self) -> Op {
        const READS: &[&str] = &[
            "SELECT current_user",
            "SELECT session_user",
            "SELECT current_setting('app.tenant', true)",
        ];
        let k = self.key();
        let sql = match self.rng.range(0, 3) {
            3 => format!("SELECT v FROM kv WHERE k = {k}"),
            i => READS[i as usize].to_string(),
        };
        let step = if sql.contains("kv") {
            Step::Read { k }
        } else {
            Step::StateRead
        };
        query_op("state-read", sql, step, None)
    }
}

/// A family operation of one simple Query.
fn query_op(
    what: &'static str,
    sql: String,
    step: Step,
    token_for: Option<(usize, i64, i64)>,
) -> Op {
    let mut op = FamilyWork::op(what, &sql, vec![Front::Query(sql.clone())], vec![(0, step)]);
    if let OpKind::Family(f) = &mut op.kind {
        f.token_for = token_for;
    }
    op
}

/// What a driver sends after an error answered a batch it left open at a Flush (asyncpg's
/// Parse/Describe/Flush prepare): a Sync, so that the server's skipping ends and it answers
/// ReadyForQuery (PostgreSQL discards everything else until then).
pub fn resync() -> Op {
    FamilyWork::op("resync", "", vec![Front::Sync], Vec::new())
}

/// A client whose write just committed reads its session's causal token, as an application
/// does to hand it on (§11 C-1); the engine answers it.
pub fn take_token() -> Op {
    query_op(
        "take-token",
        "SHOW polarsplit.causal_token".into(),
        Step::Other,
        None,
    )
}

/// A causal token presented by a client (§11 C-2): the text another session's
/// `SHOW polarsplit.causal_token` returned after its write of `k` = `v`.
pub fn present_token(token: &str, from: usize, k: i64, v: i64) -> Op {
    let sql = format!("SET polarsplit.causal_token = '{token}'");
    query_op("present-token", sql, Step::Other, Some((from, k, v)))
}

/// The read a causal token is presented for: the key whose write it covers.
pub fn token_read(k: i64) -> Op {
    query_op(
        "token-read",
        format!("SELECT v FROM kv WHERE k = {k}"),
        Step::Read { k },
        None,
    )
}
