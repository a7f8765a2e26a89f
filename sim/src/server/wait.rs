//! W-4 / W-5: the replica wait a SELECT runs into when it takes its snapshot, and the snapshot
//! itself (replay position plus an XID import on readers).

use super::prelude::*;

/// `polardb` reads the wait LSN like `strtoull`: leading digits, junk is 0, `-N` wraps.
pub(super) fn lenient_lsn(v: &str) -> u64 {
    let t = v.trim();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n = digits
        .parse::<u64>()
        .unwrap_or(if digits.is_empty() { 0 } else { u64::MAX });
    if neg {
        n.wrapping_neg()
    } else {
        n
    }
}

impl Cluster {
    /// W-4: on a reader, the wait for `polar_xact_split_wait_lsn` happens when a SELECT takes
    /// its snapshot; then the snapshot.
    pub(super) fn select_prelude(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        info: &mut StmtInfo,
    ) -> Result<Snapshot, Flow> {
        let dialect = self.cfg.dialect;
        let role = self.server(c.server).role;
        if role == Role::Reader
            && tx(c).isolation == Isolation::Serializable
            && !tx(c).snapshot_taken
        {
            return Err(
                SqlError::new("0A000", "cannot use serializable mode in a hot standby")
                    .hint("You can use REPEATABLE READ instead.")
                    .into(),
            );
        }
        if dialect != Dialect::Stock {
            let outcome = match r.outcome.take() {
                Some((o, rec)) => {
                    info.wait = Some(rec);
                    Some(o)
                }
                None => {
                    let raw = c.guc("polar_xact_split_wait_lsn").map(str::to_string);
                    if dialect == Dialect::Awide {
                        c.gucs.remove("polar_xact_split_wait_lsn");
                    }
                    let target = raw.as_deref().map(|v| match dialect {
                        Dialect::Awide => v.trim().parse::<u64>().unwrap_or(0),
                        _ => lenient_lsn(v),
                    });
                    let target = Lsn(target.unwrap_or(0));
                    if role == Role::Reader && !target.is_zero() {
                        let replay = self.server(c.server).replay;
                        if replay < target {
                            let wait_deadline = if dialect == Dialect::Awide {
                                let t = c
                                    .guc("polar_proxy_wait_timeout_ms")
                                    .and_then(|v| v.parse::<u64>().ok())
                                    .unwrap_or(self.cfg.default_wait_timeout_ms);
                                (t > 0).then(|| self.now + t)
                            } else {
                                None
                            };
                            // PolarDB's wait cannot be interrupted (W-7).
                            let stmt_deadline = if dialect == Dialect::Polardb {
                                None
                            } else {
                                c.guc("statement_timeout")
                                    .and_then(parse_ms)
                                    .filter(|t| *t > 0)
                                    .map(|t| self.now + t)
                            };
                            return Err(Flow::Wait(ActiveWait {
                                target,
                                started: self.now,
                                wait_deadline,
                                stmt_deadline,
                            }));
                        }
                        info.wait = Some(WaitRecord {
                            target,
                            started: self.now,
                            ended: self.now,
                            outcome: WaitOutcome::Reached,
                        });
                    }
                    None
                }
            };
            match outcome {
                Some(WaitOutcome::TimedOut) => {
                    let target = info.wait.as_ref().map(|w| w.target).unwrap_or_default();
                    let replay = self.server(c.server).replay;
                    let msg = format!(
                        "timed out waiting for replay to reach {target} (replayed up to {replay})"
                    );
                    let mode = c
                        .guc("polar_consistency_mode")
                        .unwrap_or("strict")
                        .to_string();
                    if mode == "best_effort" {
                        Self::warn(
                            c,
                            info,
                            "01000",
                            &msg,
                            Some("polar_proxy_lsn_wait_timeout"),
                            Some("polar_proxy_wait_for_lsn"),
                        );
                    } else {
                        return Err(SqlError::new("72000", msg)
                            .detail("polar_proxy_lsn_wait_timeout")
                            .routine("polar_proxy_wait_for_lsn")
                            .into());
                    }
                }
                Some(WaitOutcome::StatementTimeout) => {
                    return Err(SqlError::new(
                        "57014",
                        "canceling statement due to statement timeout",
                    )
                    .into())
                }
                Some(WaitOutcome::Cancelled) => {
                    return Err(
                        SqlError::new("57014", "canceling statement due to user request").into(),
                    )
                }
                _ => {}
            }
        }
        Ok(self.snapshot(c, info))
    }

    /// The statement's snapshot: the primary sees everything committed so far plus its own
    /// writes; a reader sees its replay position plus an XID import.
    pub(super) fn snapshot(&mut self, c: &mut Conn, info: &mut StmtInfo) -> Snapshot {
        let role = self.server(c.server).role;
        let base = match role {
            Role::Primary => self.store.insert,
            Role::Reader => self.server(c.server).replay,
        };
        let import = if role == Role::Reader && self.cfg.dialect != Dialect::Stock {
            c.gucs
                .get_val("polar_xact_split_xids")
                .filter(|g| !g.value.is_empty())
                .map(|g| {
                    let fields: Vec<u64> = g
                        .value
                        .split(',')
                        .map(|f| f.parse::<u64>().unwrap_or(0))
                        .collect();
                    ImportRecord {
                        cid: fields[0] as u32,
                        xids: fields[1..].to_vec(),
                        from_earlier_query: g.query_seq != c.query_seq,
                    }
                })
        } else {
            None
        };
        let t = tx(c);
        let (lsn, reused) = if t.isolation == Isolation::ReadCommitted {
            (base, false)
        } else {
            match t.rr_lsn {
                Some(l) => (l, true),
                None => {
                    t.rr_lsn = Some(base);
                    (base, false)
                }
            }
        };
        t.snapshot_taken = true;
        let own = match role {
            Role::Primary => Some(OwnView {
                xids: t.own_set(),
                cid: t.cid,
                upto: None,
            }),
            Role::Reader => import.as_ref().map(|i| OwnView {
                xids: i.xids.iter().copied().collect(),
                cid: i.cid,
                upto: Some(base),
            }),
        };
        info.snapshot = Some(SnapshotRecord {
            lsn,
            import,
            reused,
        });
        Snapshot { lsn, own }
    }
}
