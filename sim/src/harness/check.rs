//! The checker: exactly what SPEC S-1a promises, over the clients' observations and the
//! simulator's history and ground truth.
//!
//! - read-your-writes: a read sees at least the client's own latest committed write of the key,
//!   and inside a transaction its own uncommitted one;
//! - monotonic reads per session (per key: a read never returns an older version than an earlier
//!   read of the same session did);
//! - `global` mode: a read sees everything committed before the engine's latest writer position
//!   at the time it was sent;
//! - REPEATABLE READ reads never leave the primary; no write ever executes on a reader;
//! - no hidden statement's result and no extended RFQ ever reach a client; no retry after a row
//!   reached the client (one RowDescription per SELECT at most);
//! - no XID import survives into another query on a reader connection; no wait reaches a
//!   `polardb` reader; every pinned reader is released when its transaction ends.
//!
//! Exempt, as the SPEC allows: reads answered with a best-effort timeout WARNING or the
//! missing-LSN warning; `eventual` mode (no promise); monotonic reads on stock servers (their
//! readers report no position); anything across a writer change (S-2) or of a lost commit.

use std::collections::BTreeMap;

use polarsplit::config::{Consistency, ServerDialect};

use super::host::{OpRecord, Run};
use super::workload::OpKind;
use crate::client::Msg;
use crate::history::Event;
use crate::{Lsn, Role};

/// One violation, readable.
pub type Violation = String;

#[derive(Clone, Copy, Debug, Default)]
struct Commit {
    lsn: Lsn,
    lost: bool,
}

/// Everything each written value's commit tells.
fn commits(run: &Run) -> BTreeMap<i64, Commit> {
    let mut by_value = BTreeMap::new();
    let mut xid_of: BTreeMap<i64, u64> = BTreeMap::new();
    let mut lost = std::collections::BTreeSet::new();
    for e in run.cluster.history() {
        match &e.event {
            Event::Commit(c) => {
                for (_, v) in &c.writes {
                    if let Some(v) = v {
                        by_value.insert(
                            *v,
                            Commit {
                                lsn: c.commit_lsn,
                                lost: false,
                            },
                        );
                        xid_of.insert(*v, c.xid);
                    }
                }
            }
            Event::Failover { lost_xids, .. } => {
                lost.extend(lost_xids.iter().copied());
            }
            _ => {}
        }
    }
    for (v, c) in by_value.iter_mut() {
        if xid_of.get(v).is_some_and(|x| lost.contains(x)) {
            c.lost = true;
        }
    }
    by_value
}

/// The commit position of a value read: initial values (10 × k) are older than anything.
fn version(commits: &BTreeMap<i64, Commit>, k: i64, v: i64) -> Option<Lsn> {
    if v == 10 * k {
        return Some(Lsn::ZERO);
    }
    commits.get(&v).map(|c| c.lsn)
}

fn first_value(msgs: &[Msg]) -> Option<i64> {
    msgs.iter().find_map(|m| match m {
        Msg::DataRow(cols) => cols
            .first()
            .and_then(|c| c.as_ref())
            .and_then(|s| s.parse().ok()),
        _ => None,
    })
}

fn has_error(msgs: &[Msg]) -> bool {
    msgs.iter().any(|m| matches!(m, Msg::Error(_)))
}

fn rfq_status(msgs: &[Msg]) -> Option<polarsplit::protocol::TxStatus> {
    msgs.iter().rev().find_map(|m| match m {
        Msg::ReadyForQuery { status, .. } => Some(*status),
        _ => None,
    })
}

/// A read answered under a relaxed promise the client was told about (W-5, P-3 step 7).
fn warned(msgs: &[Msg]) -> bool {
    msgs.iter().any(|m| match m {
        Msg::Notice(f) => {
            f.detail() == Some("polar_proxy_lsn_wait_timeout")
                || f.message()
                    .is_some_and(|t| t.contains("without read-your-writes"))
        }
        _ => false,
    })
}

fn selects(kind: &OpKind) -> usize {
    match kind {
        OpKind::Read { .. } | OpKind::WriteThenRead { .. } | OpKind::Scan => 1,
        _ => 0,
    }
}

/// Checks one run. Returns every violation found.
pub fn check(run: &Run) -> Vec<Violation> {
    let mut out: Vec<Violation> = run.host_errors.clone();
    out.extend(run.pin_leaks.iter().cloned());
    let sc = &run.scenario;
    let commits = commits(run);
    let relaxed = sc.config.consistency == Consistency::Eventual;
    let monotonic_checked = sc.config.server_dialect != ServerDialect::Stock && !relaxed;
    let global = sc.config.consistency == Consistency::Global;
    // Which operations ran inside a REPEATABLE READ transaction.
    let mut rr_ops: BTreeMap<(usize, usize), bool> = BTreeMap::new();

    for (c, log) in run.clients.iter().enumerate() {
        let mut in_txn = false;
        let mut rr = false;
        let mut failed = false;
        let mut own_txn: BTreeMap<i64, i64> = BTreeMap::new();
        // Latest committed own write per key: (value, commit lsn).
        let mut own_committed: BTreeMap<i64, (i64, Lsn)> = BTreeMap::new();
        let mut pending_txn_writes: Vec<(i64, i64)> = Vec::new();
        // Latest version seen per key.
        let mut seen: BTreeMap<i64, Lsn> = BTreeMap::new();
        let mut generation = None;
        for (i, rec) in log.iter().enumerate() {
            let OpRecord { op, msgs, .. } = rec;
            if generation != Some(rec.generation_at_send) {
                // S-2: nothing is compared across writer generations.
                generation = Some(rec.generation_at_send);
                seen.clear();
                own_committed.clear();
            }
            rr_ops.insert((c, i), in_txn && rr);
            // The client-visible stream.
            for m in msgs {
                match m {
                    Msg::ReadyForQuery { len, .. } if *len != 5 => out.push(format!(
                        "client {c} op {i} ({}): extended RFQ reached the client (length {len})",
                        op.sql
                    )),
                    Msg::CommandComplete(t) if t == "SET" && op.kind != OpKind::Set => {
                        out.push(format!(
                            "client {c} op {i} ({}): a hidden SET's result reached the client",
                            op.sql
                        ))
                    }
                    _ => {}
                }
            }
            let rds = msgs
                .iter()
                .filter(|m| matches!(m, Msg::RowDescription(_)))
                .count();
            if rds > selects(&op.kind) {
                out.push(format!("client {c} op {i} ({}): {rds} RowDescriptions: a retry after rows reached the client", op.sql));
            }
            let err = has_error(msgs);
            let status = rfq_status(msgs);
            // Read checks.
            let read_k = match op.kind {
                OpKind::Read { k, .. } | OpKind::WriteThenRead { k, .. } => Some(k),
                _ => None,
            };
            if let (Some(k), false, Some(v)) = (read_k, err || failed, first_value(msgs)) {
                let exempt = relaxed || warned(msgs);
                if !exempt {
                    let own_now = match op.kind {
                        // The op's own write precedes its read in the same Query.
                        OpKind::WriteThenRead { v: w, .. } => Some(w),
                        _ => own_txn.get(&k).copied().filter(|_| in_txn),
                    };
                    if let Some(own) = own_now {
                        if v != own {
                            out.push(format!(
                                "client {c} op {i} ({}): read-your-writes: read {v}, own write {own} of the same transaction",
                                op.sql
                            ));
                        }
                    } else if let Some(ver) = version(&commits, k, v) {
                        if let Some(&(w, wl)) = own_committed.get(&k) {
                            if ver < wl {
                                out.push(format!(
                                    "client {c} op {i} ({}): read-your-writes: read {v} (commit {ver}), own committed write {w} (commit {wl})",
                                    op.sql
                                ));
                            }
                        }
                        if monotonic_checked {
                            if let Some(&prev) = seen.get(&k) {
                                if ver < prev {
                                    out.push(format!(
                                        "client {c} op {i} ({}): monotonic reads: read {v} (commit {ver}) after a read of a version committed at {prev}",
                                        op.sql
                                    ));
                                }
                            }
                        }
                        // A REPEATABLE READ transaction reads its first snapshot: later commits are
                        // rightly invisible to it.
                        if global
                            && !(in_txn && rr)
                            && rec.generation_at_send == run.cluster.generation()
                        {
                            let at = Lsn(rec.writer_lsn_at_send);
                            if let Some(expected) = run.cluster.committed_value(k, at) {
                                if let Some(exp_ver) = version(&commits, k, expected) {
                                    if ver < exp_ver {
                                        out.push(format!(
                                            "client {c} op {i} ({}): global: read {v} (commit {ver}) older than {expected} committed at {exp_ver} ≤ the writer position {at} known when sent",
                                            op.sql
                                        ));
                                    }
                                }
                            }
                        }
                        let e = seen.entry(k).or_insert(ver);
                        *e = (*e).max(ver);
                    }
                }
            }
            // The client's model of its own writes and transaction.
            match op.kind {
                OpKind::Begin { repeatable_read } if !err => {
                    in_txn = true;
                    rr = repeatable_read;
                    failed = false;
                    own_txn.clear();
                    pending_txn_writes.clear();
                }
                OpKind::Write { k, v } | OpKind::WriteThenRead { k, v } if !err => {
                    if in_txn {
                        own_txn.insert(k, v);
                        pending_txn_writes.push((k, v));
                    } else if let Some(cm) = commits.get(&v).filter(|cm| !cm.lost) {
                        own_committed.insert(k, (v, cm.lsn));
                    }
                }
                OpKind::Commit | OpKind::Rollback => {
                    if op.kind == OpKind::Commit && !err && !failed {
                        for (k, v) in pending_txn_writes.drain(..) {
                            if let Some(cm) = commits.get(&v).filter(|cm| !cm.lost) {
                                own_committed.insert(k, (v, cm.lsn));
                            }
                        }
                    }
                    in_txn = false;
                    rr = false;
                    failed = false;
                    own_txn.clear();
                    pending_txn_writes.clear();
                }
                _ => {}
            }
            if in_txn && (err || status == Some(polarsplit::protocol::TxStatus::Failed)) {
                failed = true;
            }
            if status == Some(polarsplit::protocol::TxStatus::Idle) && in_txn {
                // The transaction ended (an error outside, or the server ended it).
                in_txn = false;
                own_txn.clear();
                pending_txn_writes.clear();
            }
        }
    }

    // Server-side checks.
    for e in run.cluster.history() {
        match &e.event {
            Event::RefusedWrite {
                server,
                text,
                sqlstate,
                ..
            } => out.push(format!(
                "t={}: a write reached reader {server}: {text} ({sqlstate})",
                e.time
            )),
            Event::PolardbWaitSent { server, target, .. } => out.push(format!(
                "t={}: a wait (target {target}) reached polardb reader {server}",
                e.time
            )),
            Event::Statement(s) => {
                if let Some(imp) = s.snapshot.as_ref().and_then(|sn| sn.import.as_ref()) {
                    if imp.from_earlier_query {
                        out.push(format!(
                            "t={}: an XID import from an earlier query leaked into \"{}\" on {}",
                            e.time, s.text, s.conn
                        ));
                    }
                }
                if s.role == Role::Reader && !s.polar_set {
                    let who = run
                        .attribution
                        .get(&s.conn.0)
                        .and_then(|v| v.get(s.query_seq as usize - 1));
                    if let Some(&(c, op)) = who {
                        if rr_ops.get(&(c, op)).copied().unwrap_or(false) {
                            out.push(format!(
                                "t={}: client {c} op {op}: a REPEATABLE READ read ran on reader {}: {}",
                                e.time, s.server, s.text
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}
