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
//!   reached the client (one RowDescription per SELECT at most); what a client receives is what
//!   one server would send for its messages ([`super::shape`]);
//! - no XID import survives into another query on a reader connection; no wait reaches a
//!   `polardb` reader; every pinned reader is released when its transaction ends.
//!
//! With scenario families on ([`super::families`]), also: no notification sent to a client's
//! writer connection is lost; a read on a reader runs with exactly its client's writer session
//! state and leaves the reader's state as it found it; no read succeeds on a reader that the
//! primary would refuse; a causal token makes its write visible; no request waits longer than
//! the response deadline plus the wait timeout (R-1b); a reader's recovery conflict is retried,
//! not forwarded.
//!
//! Exempt, as the SPEC allows: reads answered with a best-effort timeout WARNING or the
//! missing-LSN warning; `eventual` mode (no promise); monotonic reads on stock servers (their
//! readers report no position); anything across a writer change (S-2) or of a lost commit.

use std::collections::BTreeMap;

use polarsplit::{Consistency, ServerDialect};

use super::families::Step;
use super::host::{OpRecord, Run};
use super::shape::{self, Front};
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

fn rfq_status(msgs: &[Msg]) -> Option<polarsplit::TxStatus> {
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

/// What one client's reads are held to (S-1a), as the checker walks its operations.
#[derive(Default)]
struct Reads {
    // Latest committed own write per key: (value, commit lsn).
    own_committed: BTreeMap<i64, (i64, Lsn)>,
    // Latest version seen per key.
    seen: BTreeMap<i64, Lsn>,
    // Positions other clients handed over (causal tokens): per key, (value, commit, from).
    tokens: BTreeMap<i64, (i64, Lsn, usize)>,
}

/// Scenario-wide facts every read is checked with.
struct Ctx<'a> {
    run: &'a Run,
    commits: BTreeMap<i64, Commit>,
    monotonic_checked: bool,
    global: bool,
}

impl Ctx<'_> {
    /// One read of `k` that returned `v` (committed data; `own_now`: the client's own write
    /// of `k` earlier in the same transaction or Query, which it must see).
    #[allow(clippy::too_many_arguments)]
    fn check_read(
        &self,
        out: &mut Vec<Violation>,
        st: &mut Reads,
        (c, i, sql): (usize, usize, &str),
        rec: &OpRecord,
        in_rr_txn: bool,
        global_at: Lsn,
        k: i64,
        v: i64,
        own_now: Option<i64>,
    ) {
        if let Some(own) = own_now {
            if v != own {
                out.push(format!(
                    "client {c} op {i} ({sql}): read-your-writes: read {v}, own write {own} of the same transaction"
                ));
            }
            return;
        }
        let Some(ver) = version(&self.commits, k, v) else {
            return;
        };
        if let Some(&(w, wl)) = st.own_committed.get(&k) {
            if ver < wl {
                out.push(format!(
                    "client {c} op {i} ({sql}): read-your-writes: read {v} (commit {ver}), own committed write {w} (commit {wl})"
                ));
            }
        }
        if let Some(&(w, wl, from)) = st.tokens.get(&k) {
            if ver < wl {
                out.push(format!(
                    "client {c} op {i} ({sql}): causal token: read {v} (commit {ver}), older than {w} (commit {wl}) whose position client {from} handed over"
                ));
            }
        }
        if self.monotonic_checked {
            if let Some(&prev) = st.seen.get(&k) {
                if ver < prev {
                    out.push(format!(
                        "client {c} op {i} ({sql}): monotonic reads: read {v} (commit {ver}) after a read of a version committed at {prev}"
                    ));
                }
            }
        }
        // A REPEATABLE READ transaction reads its first snapshot: later commits are rightly
        // invisible to it.
        if self.global && !in_rr_txn && rec.generation_at_send == self.run.cluster.generation() {
            let at = global_at;
            if let Some(expected) = self.run.cluster.committed_value(k, at) {
                if let Some(exp_ver) = version(&self.commits, k, expected) {
                    if ver < exp_ver {
                        out.push(format!(
                            "client {c} op {i} ({sql}): global: read {v} (commit {ver}) older than {expected} committed at {exp_ver} ≤ the writer position {at} known when sent"
                        ));
                    }
                }
            }
        }
        let e = st.seen.entry(k).or_insert(ver);
        *e = (*e).max(ver);
    }
}

/// A recovery conflict (ERROR 40001 of a reader) forwarded where the engine could still have
/// retried the statement on the primary: nothing of its batch or Query but ParseComplete and
/// BindComplete had reached the client before it (F-2, E-3: once anything beyond those was
/// forwarded there is no retry, and the error is forwarded as PostgreSQL would).
fn unretried_conflict(msgs: &[Msg]) -> bool {
    let mut answered_beyond = false;
    for m in msgs.iter().filter(|m| !m.is_async()) {
        match m {
            Msg::ReadyForQuery { .. } => answered_beyond = false,
            Msg::ParseComplete | Msg::BindComplete => {}
            Msg::Error(e)
                if e.severity() == Some("ERROR")
                    && e.message()
                        .is_some_and(|t| t.contains("conflict with recovery")) =>
            {
                if !answered_beyond {
                    return true;
                }
            }
            _ => answered_beyond = true,
        }
    }
    false
}

/// Where the first batch of a script ends (its first Sync or Query), if anywhere.
fn first_sync(script: &[Front]) -> Option<usize> {
    script
        .iter()
        .position(|m| matches!(m, Front::Sync | Front::Query(_)))
}

/// The frontend messages of an operation.
fn script_of(op: &super::workload::Op) -> Vec<Front> {
    if !op.script.is_empty() {
        return op.script.clone();
    }
    if op.extended {
        return vec![
            Front::Parse {
                name: String::new(),
                sql: op.sql.clone(),
            },
            Front::Bind {
                portal: String::new(),
                statement: String::new(),
                params: vec![],
            },
            Front::Describe {
                portal: true,
                name: String::new(),
            },
            Front::Execute {
                portal: String::new(),
                max_rows: 0,
            },
            Front::Sync,
        ];
    }
    vec![Front::Query(op.sql.clone())]
}

/// Checks one run. Returns every violation found.
pub fn check(run: &Run) -> Vec<Violation> {
    let mut out: Vec<Violation> = run.host_errors.clone();
    out.extend(run.pin_leaks.iter().cloned());
    let sc = &run.scenario;
    let relaxed = sc.config.consistency() == Consistency::Eventual;
    let ctx = Ctx {
        run,
        commits: commits(run),
        monotonic_checked: sc.config.server_dialect() != ServerDialect::Stock && !relaxed,
        global: sc.config.consistency() == Consistency::Global,
    };
    let commits = &ctx.commits;
    // Which operations ran inside a REPEATABLE READ transaction.
    let mut rr_ops: BTreeMap<(usize, usize), bool> = BTreeMap::new();

    for (c, log) in run.clients.iter().enumerate() {
        let mut in_txn = false;
        let mut rr = false;
        let mut failed = false;
        let mut own_txn: BTreeMap<i64, i64> = BTreeMap::new();
        let mut reads = Reads::default();
        let mut pending_txn_writes: Vec<(i64, i64)> = Vec::new();
        let mut generation = None;
        // E-1: a batch left open at a Flush is decided there; the messages that continue it
        // (up to their first Sync) run on the connection and with the target chosen then. In
        // `global` mode their reads are held to the writer position known when it was decided.
        let mut open_batch_at: Option<u64> = None;
        for (i, rec) in log.iter().enumerate() {
            let OpRecord { op, msgs, .. } = rec;
            let script = script_of(op);
            let carried = open_batch_at.filter(|_| op.extended);
            let first = first_sync(&script);
            open_batch_at = if shape::leaves_batch_open(&script) && op.extended {
                Some(match first {
                    None => carried.unwrap_or(rec.writer_lsn_at_send),
                    Some(_) => rec.writer_lsn_at_send,
                })
            } else {
                None
            };
            // The writer position a read at script message `idx` is held to (global mode).
            let global_at = |idx: usize| {
                Lsn(match carried {
                    Some(at) if first.is_none_or(|f| idx < f) => at,
                    _ => rec.writer_lsn_at_send,
                })
            };
            if generation != Some(rec.generation_at_send) {
                // S-2: nothing is compared across writer generations.
                generation = Some(rec.generation_at_send);
                reads = Reads::default();
            }
            rr_ops.insert((c, i), in_txn && rr);
            // The client-visible stream.
            for m in msgs {
                match m {
                    Msg::ReadyForQuery { len, .. } if *len != 5 => out.push(format!(
                        "client {c} op {i} ({}): extended RFQ reached the client (length {len})",
                        op.sql
                    )),
                    // (A family operation may SET itself: the shape check covers it.)
                    Msg::CommandComplete(t)
                        if t == "SET"
                            && op.kind != OpKind::Set
                            && !matches!(op.kind, OpKind::Family(_)) =>
                    {
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
            if rds > selects(&op.kind) && !matches!(op.kind, OpKind::Family(_)) {
                out.push(format!("client {c} op {i} ({}): {rds} RowDescriptions: a retry after rows reached the client", op.sql));
            }
            // What one server would send (E-2, P-8): every answer, nothing hidden, nothing
            // lost.
            if let Some(v) = shape::progress(&script_of(op), msgs).violation {
                out.push(format!(
                    "client {c} op {i} ({}): not what one server sends: {v}",
                    op.sql
                ));
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
                    ctx.check_read(
                        &mut out,
                        &mut reads,
                        (c, i, &op.sql),
                        rec,
                        in_txn && rr,
                        global_at(0),
                        k,
                        v,
                        own_now,
                    );
                }
            }
            // Family operations: each Execute's outcome.
            if let OpKind::Family(f) = &op.kind {
                let p = shape::progress(&script_of(op), msgs);
                let script = script_of(op);
                // The batch (up to a Sync or a Query) each message belongs to.
                let batch_of = |idx: usize| {
                    script[..idx]
                        .iter()
                        .filter(|m| matches!(m, Front::Sync | Front::Query(_)))
                        .count()
                };
                let failed_batches: Vec<usize> = p
                    .outcomes
                    .iter()
                    .filter(|o| o.error.is_some())
                    .map(|o| batch_of(o.front))
                    .collect();
                for (idx, step) in &f.steps {
                    let Some(o) = p.outcomes.iter().find(|o| o.front == *idx) else {
                        continue;
                    };
                    match step {
                        Step::Read { k } if o.error.is_none() && !relaxed && !warned(msgs) => {
                            let v = o.rows.first().and_then(|r| r.first().cloned().flatten());
                            if let Some(v) = v.and_then(|v| v.parse::<i64>().ok()) {
                                ctx.check_read(&mut out, &mut reads, (c, i, f.what), rec, false, global_at(*idx), *k, v, None);
                            }
                        }
                        Step::Write { k, v }
                            if o.tag.as_deref() == Some("UPDATE 1")
                                && !failed_batches.contains(&batch_of(*idx)) =>
                        {
                            if let Some(cm) = commits.get(v).filter(|cm| !cm.lost) {
                                reads.own_committed.insert(*k, (*v, cm.lsn));
                            }
                        }
                        Step::Fail if o.error.is_none() => out.push(format!(
                            "client {c} op {i} ({}): a statement that must fail (duplicate key) succeeded",
                            f.what
                        )),
                        _ => {}
                    }
                }
                if let (Some((from, k, v)), false) = (f.token_for, err) {
                    if let Some(cm) = commits.get(&v).filter(|cm| !cm.lost) {
                        reads.tokens.insert(k, (v, cm.lsn, from));
                    }
                }
                if unretried_conflict(msgs) {
                    out.push(format!(
                        "client {c} op {i} ({}): a reader's recovery conflict reached the client instead of a retry on the primary",
                        f.what
                    ));
                }
            }
            if sc.families.reader_faults {
                // R-1b: no request waits longer than the response deadline plus the wait.
                let bound = 11_000
                    + u64::from(
                        sc.config
                            .wait_timeout_ms()
                            .max(sc.config.split_wait_timeout_ms()),
                    );
                let took = rec.done_at.saturating_sub(rec.sent_at);
                if took > bound {
                    out.push(format!(
                        "client {c} op {i} ({}): waited {took} ms (t={}..{}), more than the response deadline plus the wait timeout ({bound} ms)",
                        op.sql, rec.sent_at, rec.done_at
                    ));
                }
                if !matches!(op.kind, OpKind::Family(_)) && unretried_conflict(msgs) {
                    out.push(format!(
                        "client {c} op {i} ({}): a reader's recovery conflict reached the client instead of a retry on the primary",
                        op.sql
                    ));
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
                        reads.own_committed.insert(k, (v, cm.lsn));
                    }
                }
                OpKind::Commit | OpKind::Rollback => {
                    if op.kind == OpKind::Commit && !err && !failed {
                        for (k, v) in pending_txn_writes.drain(..) {
                            if let Some(cm) = commits.get(&v).filter(|cm| !cm.lost) {
                                reads.own_committed.insert(k, (v, cm.lsn));
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
            if in_txn && (err || status == Some(polarsplit::TxStatus::Failed)) {
                failed = true;
            }
            if status == Some(polarsplit::TxStatus::Idle) && in_txn {
                // The transaction ended (an error outside, or the server ended it).
                in_txn = false;
                own_txn.clear();
                pending_txn_writes.clear();
            }
        }
    }

    if sc.families.notify {
        out.extend(lost_notifications(run));
    }
    if sc.families.session_state {
        out.extend(state_mismatches(run));
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
                // Everything the workloads and the engine send is in the simulator's SQL
                // subset: a syntax error means a server did not understand a statement (an
                // engine text the simulator does not know yet, or a workload bug).
                if s.result.sqlstate() == Some("42601") {
                    out.push(format!(
                        "t={}: {} did not understand {:?} (42601): outside the simulator's SQL subset",
                        e.time, s.server, s.text
                    ));
                }
                if let Some(imp) = s.snapshot.as_ref().and_then(|sn| sn.import.as_ref()) {
                    if imp.from_earlier_query {
                        out.push(format!(
                            "t={}: an XID import from an earlier query leaked into \"{}\" on {}",
                            e.time, s.text, s.conn
                        ));
                    }
                }
                if s.role == Role::Reader && !s.polar_set && !s.engine {
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

/// Every notification a client's writer connection was sent reached the client (issue 17:
/// none lost to a hidden statement's answer). Clients that ended early, and scenarios with a
/// failover, are left out.
fn lost_notifications(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    if run.failovers > 0 {
        return out;
    }
    let mut received: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (c, log) in run.clients.iter().enumerate() {
        let got = received.entry(c).or_default();
        let all = log
            .iter()
            .flat_map(|r| r.msgs.iter())
            .chain(run.async_msgs[c].iter().map(|(_, m)| m));
        for m in all {
            if let Msg::Notification { payload, .. } = m {
                got.push(payload.clone());
            }
        }
    }
    for e in run.cluster.history() {
        if let Event::NotificationSent { conn, payload, .. } = &e.event {
            let Some(c) = run.cluster.owner_of(*conn).map(|o| o as usize) else {
                continue;
            };
            if run.closed_clients.contains(&c) || c >= run.clients.len() {
                continue;
            }
            let got = received.entry(c).or_default();
            match got.iter().position(|p| p == payload) {
                Some(pos) => {
                    got.remove(pos);
                }
                None => out.push(format!(
                    "t={}: client {c}: notification {payload:?} sent on its writer connection {conn} never reached it",
                    e.time
                )),
            }
        }
    }
    out
}

/// S-5 / S-6: a client's read on a reader runs with exactly the state its writer connection
/// has at that moment (settings, current_user, session_user) — so nothing of another client
/// and nothing stale; and no read succeeds on a reader that the primary would refuse.
fn state_mismatches(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    for e in run.cluster.history() {
        let Event::Statement(s) = &e.event else {
            continue;
        };
        if s.role != Role::Reader
            || s.polar_set
            || s.engine
            || !s
                .text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("select")
        {
            continue;
        }
        let lower = s.text.to_ascii_lowercase();
        if lower.contains("pg_last_wal") || lower.contains("pg_current_wal") {
            continue;
        }
        let Some(st) = s.state.as_ref() else { continue };
        let (Some(owner), Some((writer, true))) = (st.owner, st.writer.as_ref()) else {
            continue;
        };
        if st.after != st.own {
            out.push(format!(
                "t={}: client {owner}: \"{}\" changed the session state of reader {} (a pooled connection) from {:?} to {:?}",
                e.time, s.text, s.server, st.own, st.after
            ));
        }
        if st.own != *writer {
            out.push(format!(
                "t={}: client {owner}: \"{}\" ran on reader {} with session state {:?}, the writer's is {:?}",
                e.time, s.text, s.server, st.own, writer
            ));
        }
        let ok = matches!(s.result, crate::history::StmtResult::Ok { .. });
        if ok && lower.contains(" kv") && !crate::session::may_use_kv(&writer.current_user) {
            out.push(format!(
                "t={}: client {owner}: \"{}\" succeeded on reader {} as {}, where the primary refuses {} (42501)",
                e.time, s.text, s.server, st.own.current_user, writer.current_user
            ));
        }
    }
    out
}
