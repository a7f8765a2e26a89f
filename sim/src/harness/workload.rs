//! Random client workloads: autocommit reads and writes, read-mostly and mixed transactions at
//! both isolation levels, SET inside transactions, locking reads, multi-statement strings.
//!
//! Every written value is unique in the scenario (client id × 1,000,000 + counter), so a value
//! read names the write that produced it.

use crate::Rng;

/// What an operation is, for the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `SELECT v FROM kv WHERE k = …` (maybe with a locking clause).
    Read {
        k: i64,
        locking: bool,
    },
    /// `UPDATE kv SET v = … WHERE k = …`.
    Write {
        k: i64,
        v: i64,
    },
    /// `UPDATE …; SELECT …` in one Query.
    WriteThenRead {
        k: i64,
        v: i64,
    },
    Begin {
        repeatable_read: bool,
    },
    Commit,
    Rollback,
    /// A SET LOCAL or session SET (no effect on `kv`).
    Set,
    /// `SELECT k, v FROM kv ORDER BY k` (many rows: cut mid-result by faults).
    Scan,
    /// An operation of a scenario family ([`super::families`]): a script of frontend messages
    /// whose answers the protocol oracle splits into per-Execute outcomes.
    Family(super::families::FamilyOp),
}

/// One operation: one Query message, or one extended-protocol batch (Parse, Bind, Describe,
/// Execute, Sync of an unnamed statement) when `extended`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub sql: String,
    pub extended: bool,
    /// The frontend messages of a family operation (empty: `sql` as a Query, or as one
    /// extended batch when `extended`).
    pub script: Vec<super::shape::Front>,
}

impl Op {
    /// The client's bytes for this operation.
    pub fn bytes(&self) -> Vec<u8> {
        use crate::client;
        if !self.script.is_empty() {
            return self.script.iter().flat_map(|f| f.bytes()).collect();
        }
        if self.extended {
            let mut b = client::parse("", &self.sql);
            b.extend(client::bind("", ""));
            b.extend(client::describe(true, ""));
            b.extend(client::execute(""));
            b.extend(client::sync());
            b
        } else {
            client::query(&self.sql)
        }
    }
}

/// Generates a client's operations, keeping its transaction structure valid.
#[derive(Debug)]
pub struct Workload {
    rng: Rng,
    client: u64,
    counter: i64,
    keys: i64,
    in_txn: bool,
    txn_left: u32,
    left: u32,
}

impl Workload {
    pub fn new(seed: u64, client: u64, ops: u32, keys: i64) -> Workload {
        Workload {
            rng: Rng::derive(seed, "workload", client),
            client,
            counter: 0,
            keys: keys.max(1),
            in_txn: false,
            txn_left: 0,
            left: ops,
        }
    }

    fn value(&mut self) -> i64 {
        self.counter += 1;
        (self.client as i64 + 1) * 1_000_000 + self.counter
    }

    fn key(&mut self) -> i64 {
        1 + self.rng.range(0, (self.keys - 1) as u64) as i64
    }

    fn read(&mut self, locking: bool) -> Op {
        let k = self.key();
        let sql = if locking {
            format!("SELECT v FROM kv WHERE k = {k} FOR UPDATE")
        } else {
            format!("SELECT v FROM kv WHERE k = {k}")
        };
        Op {
            kind: OpKind::Read { k, locking },
            sql,
            extended: false,
            script: Vec::new(),
        }
    }

    fn write(&mut self) -> Op {
        let k = self.key();
        let v = self.value();
        Op {
            kind: OpKind::Write { k, v },
            sql: format!("UPDATE kv SET v = {v} WHERE k = {k}"),
            extended: false,
            script: Vec::new(),
        }
    }

    /// Whether operations remain (an open transaction counts).
    pub fn has_more(&self) -> bool {
        self.left > 0 || self.in_txn
    }

    /// Whether the client is inside one of its transactions.
    pub fn in_transaction(&self) -> bool {
        self.in_txn
    }

    /// The next operation, or `None` when the client is done (an open transaction is always
    /// ended first).
    pub fn next_op(&mut self) -> Option<Op> {
        if self.in_txn {
            if self.txn_left == 0 {
                self.in_txn = false;
                return Some(if self.rng.range(0, 9) < 8 {
                    Op {
                        kind: OpKind::Commit,
                        sql: "COMMIT".into(),
                        extended: false,
                        script: Vec::new(),
                    }
                } else {
                    Op {
                        kind: OpKind::Rollback,
                        sql: "ROLLBACK".into(),
                        extended: false,
                        script: Vec::new(),
                    }
                });
            }
            self.txn_left -= 1;
            let r = self.rng.range(0, 99);
            return Some(match r {
                0..=54 => self.read(false),
                55..=79 => self.write(),
                80..=84 => self.read(true),
                85..=89 => Op {
                    kind: OpKind::Set,
                    sql: "SET LOCAL application_name = 'in_txn'".into(),
                    extended: false,
                    script: Vec::new(),
                },
                _ => {
                    let Op { kind, sql, .. } = self.write();
                    let OpKind::Write { k, v } = kind else {
                        unreachable!()
                    };
                    Op {
                        kind: OpKind::WriteThenRead { k, v },
                        sql: format!("{sql}; SELECT v FROM kv WHERE k = {k}"),
                        extended: false,
                        script: Vec::new(),
                    }
                }
            });
        }
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let r = self.rng.range(0, 99);
        Some(match r {
            0..=7 => {
                // The extended protocol, as psycopg sends a query: a self-contained batch.
                let mut op = self.read(false);
                op.extended = true;
                op
            }
            8..=39 => self.read(false),
            40..=64 => self.write(),
            65..=69 => {
                let Op { kind, sql, .. } = self.write();
                let OpKind::Write { k, v } = kind else {
                    unreachable!()
                };
                Op {
                    kind: OpKind::WriteThenRead { k, v },
                    sql: format!("{sql}; SELECT v FROM kv WHERE k = {k}"),
                    extended: false,
                    script: Vec::new(),
                }
            }
            70..=73 => Op {
                kind: OpKind::Scan,
                sql: "SELECT k, v FROM kv ORDER BY k".into(),
                extended: false,
                script: Vec::new(),
            },
            74..=75 => Op {
                kind: OpKind::Set,
                sql: format!("SET application_name = 'client{}'", self.client),
                extended: false,
                script: Vec::new(),
            },
            76..=77 => self.read(true),
            _ => {
                let rr = self.rng.range(0, 4) == 0;
                self.in_txn = true;
                self.txn_left = self.rng.range(1, 6) as u32;
                Op {
                    kind: OpKind::Begin {
                        repeatable_read: rr,
                    },
                    sql: if rr {
                        "BEGIN ISOLATION LEVEL REPEATABLE READ".into()
                    } else if self.rng.range(0, 1) == 0 {
                        "BEGIN".into()
                    } else {
                        "START TRANSACTION ISOLATION LEVEL READ COMMITTED".into()
                    },
                    extended: false,
                    script: Vec::new(),
                }
            }
        })
    }
}
