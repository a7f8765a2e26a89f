//! Deciding and routing a unit of client messages: collect (P-2), plan (P-3/P-5), execute (P-4),
//! retries (§6), REJECT, and the end of a unit.

use super::hidden::{self, Hidden, Wait};
use super::plan::{plan, PlanInput, Protocol, StatementView, TxnView};
use super::response::{Req, Who};
use super::state::Known;
use super::*;
use crate::classify::Kind;
use crate::cluster::readers::{ChoiceRequest, Waits};
use crate::cluster::stats::Counter;
use crate::cluster::WriterView;
use crate::config::{Consistency, OnWaitTimeout, ReadFallback};
use crate::protocol::{encode, Marker};

/// Where a reader-bound decision ended up after binding (P-4).
pub(super) enum Bound {
    Reader {
        decision: Decision,
        server: ServerId,
        pinned: Option<ConnId>,
    },
    Writer(Decision),
    Reject(Decision),
}

impl Session {
    /// P-2 collect: adopt a new configuration and writer generation (S-2), drop an invalid pin.
    pub(super) fn collect(&mut self) -> WriterView {
        self.refresh_config();
        let view = self.engine.writer_view(self.writer_hostgroup);
        self.dialect = view.dialect;
        if view.generation != self.lsn.generation {
            if self.lsn.adopt_generation(view.generation) {
                self.engine.stats().inc(Counter::GenerationResets);
            }
            // S-2: split state is dropped and a pinned reader released.
            self.txn.marker = None;
            self.txn.xids.clear();
            self.txn.lsn = Lsn::ZERO;
            self.txn.read_only_prefix = false;
            self.release_pin(false);
        }
        // A writer sample whose query was sent after the write was acknowledged bounds the
        // write from above: it positions the session's write (W-7).
        if let (true, Some(ack), Some((l, sent))) = (
            self.lsn.write_unknown,
            self.write_ack_ms,
            view.writer_sample,
        ) {
            if sent > ack && view.generation == self.lsn.generation && !self.txn.active {
                self.lsn.writer_positioned(l, true);
                self.write_ack_ms = None;
                self.engine.stats().inc(Counter::TargetsLearned);
            }
        }
        if let Some(pin) = self.pin {
            let still = view.reader_hostgroup == Some(pin.hostgroup)
                && self.engine.readers().is_valid(pin.server, pin.hostgroup);
            if !still {
                self.release_pin(false);
            }
        }
        view
    }

    fn target(&self, view: &WriterView) -> Lsn {
        let t = self.lsn.target();
        if self.config.consistency == Consistency::Global && view.generation == self.lsn.generation
        {
            t.max(view.writer_lsn)
        } else {
            t
        }
    }

    pub(super) fn plan_input(
        &self,
        view: &WriterView,
        statement: StatementView,
        protocol: Protocol,
    ) -> PlanInput {
        let target = self.target(view);
        let reader_past_txn_lsn = self.txn.marker == Some(Marker::WalPending)
            && view.reader_hostgroup.is_some_and(|hg| {
                self.engine.readers().any_caught_up(
                    hg,
                    view.generation,
                    self.txn.lsn,
                    self.now,
                    self.config.reader_lsn_max_age_ms,
                )
            });
        PlanInput {
            consistency: self.config.consistency,
            has_reader_hostgroup: view.reader_hostgroup.is_some(),
            read_fallback: self.config.read_fallback,
            on_missing_lsn: self.config.on_missing_lsn,
            txn_split: self.config.txn_split,
            dialect: view.dialect,
            statement,
            hazard: self.hazards.any(),
            state_unknown: self.settings.known != Known::Yes,
            protocol,
            lsn_unknown: self.lsn.unknown(),
            target,
            txn: TxnView {
                active: self.txn.active,
                failed: self.txn.failed,
                reader_failed: self.txn.reader_failed,
                isolation: self.txn.isolation,
                marker: self.txn.marker,
                xids_empty: self.txn.xids.is_empty(),
                xids_valid: self.txn.xids_valid,
                lsn: self.txn.lsn,
                set_ran: self.txn.set_ran,
                read_only_prefix: self.txn.read_only_prefix,
            },
            reader_past_txn_lsn,
        }
    }

    /// The full decision for a unit: replication connections are never routed, everything
    /// else is planned (P-3).
    pub(super) fn decide(
        &mut self,
        stmt: StatementView,
        protocol: Protocol,
    ) -> (Decision, WriterView) {
        let view = self.collect();
        let d = if self.startup.as_ref().is_some_and(|s| s.replication) {
            Decision::passthrough(Reason::ReplicationConnection)
        } else {
            plan(&self.plan_input(&view, stmt, protocol))
        };
        (d, view)
    }

    /// Hidden writer work that informs the next read is in flight or due (the probe of W-7, the
    /// capture of S-5): reads wait for it.
    pub(super) fn learning(&self) -> bool {
        let hidden_in_flight = self
            .writer
            .as_ref()
            .is_some_and(|w| w.resp.has_who(Who::Probe) || w.resp.has_who(Who::Capture));
        hidden_in_flight || (self.settings.known == Known::Due && !self.txn.active)
    }

    /// Whether a decided unit must wait for what is in flight before it (pipelining rule): a
    /// unit bound for the writer may follow other writer units there; everything else waits
    /// until nothing is in flight, and a read also waits for the probe and the capture.
    pub(super) fn must_wait(&self, d: &Decision, read: bool) -> bool {
        if self.held_rfq.is_some() {
            // The client's RFQ waits for the probe: nothing may overtake it.
            return true;
        }
        if read && self.learning() {
            return true;
        }
        if self.units.is_empty() {
            return false;
        }
        let writer_bound = matches!(d.outcome, Outcome::ForcePrimary | Outcome::Passthrough);
        !(writer_bound
            && self
                .units
                .iter()
                .all(|u| u.attempt == Attempt::Writer && !u.open))
    }

    /// P-6's "may have written" for a whole Query: COMMIT/ROLLBACK count only if the
    /// transaction may have written.
    pub(super) fn unit_may_write(&self, class: &Classification) -> bool {
        class.statements().iter().any(|s| match s.kind {
            Kind::Commit { .. } | Kind::Rollback { .. } => self.txn.may_have_written,
            _ => s.may_write(),
        })
    }

    pub(super) fn begin_options(class: &Classification) -> Option<Option<Isolation>> {
        class.statements().iter().rev().find_map(|s| match s.kind {
            Kind::Begin(o) => Some(o.isolation),
            _ => None,
        })
    }

    /// A simple Query at the head of the queue. Returns false when it must wait.
    pub(super) fn start_query(&mut self, fresh: Option<(u8, &[u8])>) -> bool {
        let Some(head) = self.queue.front() else {
            return false;
        };
        let MsgInfo::Query { class, why_not, .. } = &head.info else {
            return false;
        };
        let (class, why_not) = (class.clone(), *why_not);
        let stmt = match (why_not, &class) {
            (Some(r), _) => StatementView::not_safe(r),
            (None, Some(c)) => StatementView::of(c),
            (None, None) => StatementView::not_safe(Reason::Unparseable),
        };
        let (mut d, view) = self.decide(stmt, Protocol::Simple);
        if self.writer_continuation && d.outcome != Outcome::Passthrough {
            // It runs in the implicit transaction of extended messages sent without a Sync.
            d = Decision::primary(Reason::ExtendedInProgress);
        }
        if self.must_wait(&d, stmt.replica_safe && !self.writer_continuation) {
            return false;
        }
        // A simple Query destroys the unnamed prepared statement (NOTES), wherever it runs.
        self.statements.remove(b"");
        match d.outcome {
            Outcome::Passthrough | Outcome::ForcePrimary => {
                self.start_writer_query(d, class, fresh);
            }
            Outcome::Reject => self.reject_unit(UnitKind::Query, d, 1),
            Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit => {
                self.start_reader_unit(UnitKind::Query, d, class, &view, fresh, 1);
            }
        }
        true
    }

    /// A FunctionCall: always the writer.
    pub(super) fn start_function_call(&mut self) -> bool {
        let d = Decision::primary(Reason::NotAStatement);
        if self.must_wait(&d, false) {
            return false;
        }
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return false;
        };
        self.record(d);
        let id = self.push_unit(UnitKind::FunctionCall, d, None, Attempt::Writer);
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::FunctionCall, Who::Client, id);
        }
        self.advance_head(Some(w));
        self.after_writer_send(id, true, false);
        true
    }

    pub(super) fn record(&mut self, d: Decision) {
        self.engine.stats().record_decision(d.outcome, d.reason);
        self.out.decision(d);
    }

    /// A new unit in flight; returns its id.
    pub(super) fn push_unit(
        &mut self,
        kind: UnitKind,
        d: Decision,
        class: Option<Classification>,
        attempt: Attempt,
    ) -> u32 {
        let id = self.new_unit_id();
        let begin = class.as_ref().and_then(Session::begin_options);
        let may_open_txn = match kind {
            UnitKind::FunctionCall => false,
            _ => class.is_none() || begin.is_some(),
        };
        self.units.push_back(Unit {
            id,
            kind,
            decision: d,
            class,
            execs: Vec::new(),
            attempt,
            reader_retries: 0,
            excluded: Vec::new(),
            open: false,
            copy_in: false,
            errored: false,
            forwarded: false,
            released: false,
            generation: self.lsn.generation,
            sql: None,
            begin,
            wait_statement: false,
            sent_at: self.now,
            failure: None,
            failure_text: None,
            result_started: false,
            saw_error: false,
            probe_after: false,
            may_open_txn,
            after_replay: None,
            hidden_sync: false,
        });
        id
    }

    /// The text of SET/RESET statements must outlive the host's buffer: keep the unit's SQL.
    fn keep_sql_if_needed(
        &self,
        class: &Option<Classification>,
        fresh: Option<(u8, &[u8])>,
    ) -> Option<Vec<u8>> {
        let c = class.as_ref()?;
        if !effects::keeps_text(c) {
            return None;
        }
        let head = self.queue.front()?;
        let bytes: &[u8] = match (self.msg_bytes(head), fresh) {
            (Some(c), _) => c.get(5..c.len().saturating_sub(1))?,
            (None, Some((_, body))) => body.get(..body.len().saturating_sub(1))?,
            _ => return None,
        };
        Some(bytes.to_vec())
    }

    /// A simple Query to the writer, forwarded by count.
    fn start_writer_query(
        &mut self,
        d: Decision,
        class: Option<Classification>,
        fresh: Option<(u8, &[u8])>,
    ) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        self.record(d);
        let sql = self.keep_sql_if_needed(&class, fresh);
        let known = class.is_some();
        let no_copy_in = class
            .as_ref()
            .is_some_and(|c| !c.statements().iter().any(|s| s.kind == Kind::Copy));
        let may_write = class.as_ref().is_none_or(|c| self.unit_may_write(c));
        let changes_state = class.as_ref().is_some_and(|c| self.changes_state(c));
        self.mirror_deallocated(w, class.as_ref(), sql.as_deref());
        let lexing = class.as_ref().is_some_and(effects::may_change_lexing);
        self.mirror_before_lexing_change(w, lexing);
        if let (Some(c), Some(t)) = (
            class.as_ref(),
            sql.as_deref().and_then(|b| std::str::from_utf8(b).ok()),
        ) {
            self.note_custom_names(c, t);
        }
        let id = self.push_unit(UnitKind::Query, d, class, Attempt::Writer);
        if let Some(u) = self.unit_mut(id) {
            u.sql = sql;
        }
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::Query { hidden: 0 }, Who::Client, id);
        }
        self.advance_head(Some(w));
        if changes_state && !self.txn.active {
            self.settings.mark_due();
        }
        self.after_writer_send(id, may_write, known && no_copy_in);
    }

    /// E-2: a server keeps a prepared statement's parse, and `standard_conforming_strings`
    /// decides how its string literals were lexed. Before a unit that may change it (SET or
    /// RESET of it, RESET ALL, code the engine cannot see into) runs on the writer, every
    /// statement that exists only on readers is prepared on the writer too, under the rules it
    /// was parsed with — so its parse lives somewhere for good (hidden, answers swallowed).
    pub(super) fn mirror_before_lexing_change(&mut self, w: ConnId, changes: bool) {
        if !changes {
            return;
        }
        let todo = self.statements.reader_only();
        if todo.is_empty() {
            return;
        }
        for (name, _) in &todo {
            self.statements.set_on_writer(name);
        }
        self.out.send_backend_with(w, |o| {
            for (name, rest) in &todo {
                hidden::parse_as(o, name, rest);
            }
            hidden::sync(o);
        });
        if let Some(wb) = self.writer.as_mut() {
            for _ in &todo {
                wb.resp.push(Req::Parse, Who::Mirror, 0);
            }
            wb.resp.push(Req::Sync, Who::Mirror, 0);
        }
    }

    /// E-2: a `DEALLOCATE` of a statement the client prepared only on readers would fail on
    /// the writer: the statement is prepared there first (hidden, its answer swallowed), so the
    /// command answers as on one server.
    fn mirror_deallocated(
        &mut self,
        w: ConnId,
        class: Option<&Classification>,
        sql: Option<&[u8]>,
    ) {
        let (Some(c), Some(text)) = (class, sql.and_then(|b| std::str::from_utf8(b).ok())) else {
            return;
        };
        for s in c.statements() {
            if !matches!(s.kind, Kind::Deallocate { all: false }) {
                continue;
            }
            let Some(name) = effects::deallocate_target(s.span.of(text)) else {
                continue;
            };
            let Some(st) = self.statements.peek(&name) else {
                continue;
            };
            if st.on_writer {
                continue;
            }
            let rest = st.rest.clone();
            self.statements.set_on_writer(&name);
            self.out.send_backend_with(w, |o| {
                hidden::parse_as(o, &name, &rest);
                hidden::sync(o);
            });
            if let Some(wb) = self.writer.as_mut() {
                wb.resp.push(Req::Parse, Who::Mirror, 0);
                wb.resp.push(Req::Sync, Who::Mirror, 0);
            }
        }
    }

    /// After a unit's last message went to the writer: pipeline the probe (W-7) and the
    /// capture (S-5) right behind it when the unit runs outside a transaction block and cannot
    /// enter COPY IN (same write, no extra round trip); otherwise they follow its RFQ.
    pub(super) fn after_writer_send(&mut self, id: u32, may_write: bool, pipelinable: bool) {
        let outside = !self.txn.active
            && self.writer_status == TxStatus::Idle
            && self.units.iter().all(|u| !u.may_open_txn);
        if !(pipelinable && outside) {
            return;
        }
        let probe = may_write && self.wants_probe();
        let capture = self.settings.known == Known::Due;
        if probe || capture {
            self.send_learning(probe, capture);
            if let Some(u) = self.unit_mut(id) {
                u.probe_after = true;
            }
        }
    }

    /// Whether committed writes are positioned by the probe (W-7: the writer's RFQs carry no
    /// LSN).
    pub(super) fn wants_probe(&self) -> bool {
        self.config.lsn_probe && self.writer.as_ref().is_some_and(|w| !w.ext.lsn)
    }

    /// Sends the hidden probe and/or capture as one batch on the writer (W-7, S-5).
    pub(super) fn send_learning(&mut self, probe: bool, capture: bool) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let conn = w.conn;
        let parse_probe = probe && !w.probe_parsed;
        let parse_capture = capture && !w.capture_parsed;
        if probe {
            w.probe_parsed = true;
            if parse_probe {
                w.resp.push(Req::Parse, Who::Probe, 0);
            }
            w.resp.push(Req::Bind, Who::Probe, 0);
            w.resp.push(Req::Execute, Who::Probe, 0);
        }
        if capture {
            w.capture_parsed = true;
            if parse_capture {
                w.resp.push(Req::Parse, Who::Capture, 0);
            }
            w.resp.push(Req::Bind, Who::Capture, 0);
            w.resp.push(Req::Execute, Who::Capture, 0);
        }
        let sync_who = if capture { Who::Capture } else { Who::Probe };
        w.resp.push(Req::Sync, sync_who, 0);
        let names = &self.settings.custom_names;
        self.out.send_backend_with(conn, |o| {
            if probe {
                if parse_probe {
                    hidden::probe_parse(o);
                }
                hidden::probe_run(o);
            }
            if capture {
                if parse_capture {
                    hidden::capture_parse(o);
                }
                hidden::capture_run(o, names);
            }
            hidden::sync(o);
        });
        if probe {
            self.probe_lsn = None;
            self.engine.stats().inc(Counter::ProbesSent);
        }
        if capture {
            self.settings.known = Known::Capturing;
            self.capture_rows.clear();
            self.capture_failed = false;
            self.engine.stats().inc(Counter::CapturesSent);
        }
    }

    /// A capture is due and the writer is free outside a transaction block: send it now
    /// (reads wait for it).
    pub(super) fn maybe_capture(&mut self) {
        if self.settings.known == Known::Due
            && self.phase == Phase::Ready
            && !self.txn.active
            && self.writer_status == TxStatus::Idle
            && self.units.is_empty()
            && self.writer.as_ref().is_some_and(|w| w.resp.is_empty())
        {
            self.send_learning(false, true);
        }
    }

    /// Copies the client bytes of the first `count` messages into `orig` and discards them from
    /// the client stream.
    pub(super) fn take_unit_bytes(&mut self, count: usize, fresh: Option<(u8, &[u8])>) {
        self.orig.clear();
        self.orig_msgs.clear();
        for i in 0..count {
            let Some(m) = self.queue.front() else { break };
            let start = self.orig.len();
            match (m.copy.clone(), fresh) {
                (Some(r), _) => {
                    let (a, b) = (r.start, r.end);
                    self.orig.extend_from_slice(&self.pending[a..b]);
                }
                (None, Some((t, body))) if i == 0 && self.queue.len() == 1 => {
                    wire(t, body, &mut self.orig)
                }
                _ => {}
            }
            let end = self.orig.len();
            self.orig_msgs.push(start..end);
            let len = m.len;
            self.out.discard_client(len);
            self.pop_head();
        }
    }

    pub(super) fn start_reader_unit(
        &mut self,
        kind: UnitKind,
        d: Decision,
        class: Option<Classification>,
        view: &WriterView,
        fresh: Option<(u8, &[u8])>,
        count: usize,
    ) {
        let in_txn = self.txn.active;
        if in_txn {
            self.engine.stats().inc(Counter::SplitPlanned);
        }
        match self.bind_reader(d, view, &[]) {
            Bound::Writer(fallback) => {
                if in_txn {
                    self.engine.stats().inc(Counter::SplitFellBack);
                }
                match kind {
                    UnitKind::Batch => self.start_writer_batch(fallback, count),
                    _ => self.start_writer_query(fallback, class, fresh),
                }
            }
            Bound::Reject(r) => self.reject_unit(kind, r, count),
            Bound::Reader {
                decision: d,
                server,
                pinned,
            } => {
                let batch = if kind == UnitKind::Batch {
                    Some(self.batch_execs(count))
                } else {
                    None
                };
                let ends_open = kind == UnitKind::Batch && self.batch_ends_open(count);
                self.take_unit_bytes(count, fresh);
                let attempt = match pinned {
                    Some(conn) => Attempt::Reader { conn, server },
                    None => Attempt::AwaitReader { server },
                };
                let id = self.push_unit(kind, d, class, attempt);
                if let Some(u) = self.unit_mut(id) {
                    u.generation = view.generation;
                    if let Some(execs) = batch {
                        u.execs = execs;
                    }
                    u.open = ends_open;
                    // E-3: a Flush asked for the answers: they are not held, and the batch
                    // gives up its retry once one reached the client.
                    u.released = ends_open;
                }
                match pinned {
                    Some(conn) => self.send_to_reader(id, conn, server, false, false),
                    None => self.acquire_reader(server),
                }
            }
        }
    }

    fn next_salt(&mut self) -> u64 {
        self.salt = self
            .salt
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.salt
    }

    /// P-4 execute: bind the decision to a reader, or fall back.
    pub(super) fn bind_reader(
        &mut self,
        mut d: Decision,
        view: &WriterView,
        exclude: &[ServerId],
    ) -> Bound {
        let Some(hg) = view.reader_hostgroup else {
            return self.no_reader(d);
        };
        if self.readers_forbidden {
            return Bound::Writer(Decision {
                attempt: d.attempt,
                ..Decision::primary(Reason::ReaderNoCredentials)
            });
        }
        let target = d.target;
        let max_age = self.config.reader_lsn_max_age_ms;
        if self.txn.active {
            if let Some(pin) = self.pin {
                if !exclude.contains(&pin.server) {
                    // P-7: the pinned reader's own RFQs, or the engine's fresh evidence of it
                    // (a monitor sample not older than reader_lsn_max_age_ms, taken after its
                    // latest outage, R-1a) show it has replayed the target.
                    let same = pin.generation == view.generation
                        && pin.profile_generation == self.engine.profile_generation()
                        && pin.config_generation == self.config_generation;
                    let caught_up = target.is_zero()
                        || (same
                            && (pin.replay >= target
                                || self.engine.readers().is_caught_up(
                                    pin.server,
                                    pin.hostgroup,
                                    view.generation,
                                    target,
                                    self.now,
                                    max_age,
                                )));
                    return self.decide_wait(d, view, pin.server, caught_up, Some(pin.conn));
                }
            }
        }
        let salt = self.next_salt();
        let choice = self.engine.readers().choose(&ChoiceRequest {
            hostgroup: hg,
            generation: view.generation,
            target,
            now_ms: self.now,
            max_age_ms: max_age,
            waits: Self::waits(view.dialect),
            exclude,
            salt,
        });
        match choice {
            None => {
                d.target = target;
                self.no_reader(d)
            }
            Some(c) => self.decide_wait(d, view, c.server, c.caught_up, None),
        }
    }

    fn no_reader(&self, d: Decision) -> Bound {
        match self.config.read_fallback {
            ReadFallback::Primary => Bound::Writer(Decision {
                attempt: d.attempt,
                ..Decision::primary(Reason::NoReaderAvailable)
            }),
            ReadFallback::Error => Bound::Reject(Decision {
                attempt: d.attempt,
                ..Decision::reject(Reason::RejectNoReader)
            }),
        }
    }

    fn decide_wait(
        &mut self,
        mut d: Decision,
        view: &WriterView,
        server: ServerId,
        caught_up: bool,
        pinned: Option<ConnId>,
    ) -> Bound {
        let needs_wait = !d.target.is_zero() && !caught_up;
        if needs_wait {
            if !self.can_wait_on(view.dialect, server) {
                let reason = if d.outcome == Outcome::ReplicaTxnSplit {
                    Reason::SplitNoCaughtUpReader
                } else {
                    Reason::ReadNoBoundedWait
                };
                self.engine.stats().inc(Counter::ReadsKeptOnWriter);
                return Bound::Writer(Decision {
                    attempt: d.attempt,
                    target: d.target,
                    ..Decision::primary(reason)
                });
            }
            d.wait = true;
        } else if !d.target.is_zero() {
            self.engine.stats().inc(Counter::WaitsSkipped);
            self.engine.stats().inc(Counter::ReadsToCaughtUpReader);
            if d.reason == Reason::ReadWait {
                d.reason = Reason::ReadCaughtUp;
            }
        }
        if pinned.is_some() && d.reason != Reason::SplitRead && d.reason != Reason::SplitPreWrite {
            d.reason = Reason::ReaderPinned;
        }
        d.server = Some(server);
        Bound::Reader {
            decision: d,
            server,
            pinned,
        }
    }

    /// Which readers may wait for a target under `dialect` (W-7): awide's bounded wait, or stock
    /// PostgreSQL 19's `WAIT FOR LSN`; never polardb's unbounded one.
    fn waits(dialect: ServerDialect) -> Waits {
        match dialect {
            ServerDialect::Awide => Waits::Bounded,
            ServerDialect::Stock => Waits::FromVersion(190_000),
            ServerDialect::PolarDb => Waits::Never,
        }
    }

    /// Whether a read may wait for its target on `server` (W-7); never on a server that refused
    /// the wait statements.
    fn can_wait_on(&self, dialect: ServerDialect, server: ServerId) -> bool {
        self.engine.readers().can_wait(server, Self::waits(dialect))
    }

    pub(super) fn acquire_reader(&mut self, server: ServerId) {
        if self.startup.is_none() {
            return;
        }
        // The key and the startup message change only with the profile or the settings:
        // computed once, then reused (no allocation per statement).
        let profile_generation = self.engine.profile_generation();
        let stamp = (profile_generation, self.settings.version());
        if self
            .reader_startup
            .as_ref()
            .is_none_or(|c| c.stamp != stamp)
        {
            let s = self.startup.as_ref().expect("checked");
            let key = s.reader_key(profile_generation, &self.settings);
            let mut bytes = Vec::new();
            s.encode_for(Role::Reader, &mut bytes);
            self.reader_startup = Some(ReaderStartup { stamp, key, bytes });
        }
        let key = self.reader_startup.as_ref().expect("just set").key;
        self.out.acquire_reader(server, key);
    }

    /// The unit waiting for a reader connection.
    fn awaiting_reader(&self) -> Option<(u32, ServerId)> {
        self.units.iter().find_map(|u| match u.attempt {
            Attempt::AwaitReader { server } => Some((u.id, server)),
            _ => None,
        })
    }

    /// The host attached a reader connection for the unit waiting for one.
    pub(super) fn reader_attached(
        &mut self,
        conn: ConnId,
        server: ServerId,
        fresh: bool,
        needs_reset: bool,
    ) -> Result<(), SessionError> {
        let id = match self.awaiting_reader() {
            Some((id, s)) if s == server => id,
            _ => {
                return Err(SessionError::UnexpectedEvent(
                    "ReaderAttached without a matching AcquireReader",
                ))
            }
        };
        if self.backend_index(conn).is_some() {
            return Err(SessionError::UnexpectedEvent(
                "ReaderAttached for a connection already in use",
            ));
        }
        let ext = self
            .startup
            .as_ref()
            .map(|s| s.extensions(Role::Reader))
            .unwrap_or_default();
        // Reuse a released backend's buffers (no allocation per statement).
        let mut b = self
            .spare_backends
            .pop()
            .unwrap_or_else(|| Backend::new(conn, Some(server), ext, &self.config));
        b.conn = conn;
        b.server = Some(server);
        b.ext = ext;
        b.resp.clear();
        b.streaming = None;
        b.held_fwd = 0;
        b.partial_out = false;
        b.clean_on_success = false;
        b.settings_pending = false;
        b.dirty = needs_reset;
        b.cancelled = false;
        b.ran_code = false;
        b.probe_parsed = false;
        b.capture_parsed = false;
        // E-2: what the connection has prepared travels with it; a fresh one has nothing.
        let known = if fresh {
            self.engine.conns().forget(conn);
            None
        } else {
            self.engine.conns().take(conn)
        };
        b.prepared = match known {
            Some(k) => k,
            None if fresh => ConnStatements::fresh(),
            None => ConnStatements::default(),
        };
        if !b.framer.at_boundary() {
            b.framer = Framer::new(self.config.limits);
        }
        self.readers.push(b);
        self.engine.stats().inc(if fresh {
            Counter::PoolMisses
        } else {
            Counter::PoolHits
        });
        self.send_to_reader(id, conn, server, fresh, needs_reset);
        Ok(())
    }

    /// The connection `AcquireReader` asked for could not be opened: an outage and a failure of
    /// the reader (R-1a, R-1b); the writer answers, as when no connection can be had.
    pub(super) fn reader_connect_failed(&mut self, starting_up: bool) -> Result<(), SessionError> {
        let Some((_, server)) = self.awaiting_reader() else {
            return Err(SessionError::UnexpectedEvent(
                "ReaderConnectFailed without AcquireReader",
            ));
        };
        self.engine
            .reader_connect_failed(server, self.now, starting_up);
        self.reader_unavailable(false)
    }

    /// The host has no reader connection: the writer answers (P-4 never blocks).
    pub(super) fn reader_unavailable(&mut self, no_credentials: bool) -> Result<(), SessionError> {
        let Some((id, _)) = self.awaiting_reader() else {
            return Err(SessionError::UnexpectedEvent(
                "ReaderUnavailable without AcquireReader",
            ));
        };
        if no_credentials {
            self.readers_forbidden = true;
        }
        self.engine.stats().inc(Counter::PoolMisses);
        if self.txn.active {
            self.engine.stats().inc(Counter::SplitFellBack);
        }
        let reason = if no_credentials {
            Reason::ReaderNoCredentials
        } else {
            Reason::NoReaderConnection
        };
        self.send_orig_to_writer(id, reason);
        Ok(())
    }

    /// Sends the unit's original client messages to the writer (a fallback or a retry).
    pub(super) fn send_orig_to_writer(&mut self, id: u32, reason: Reason) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        let Some(u) = self.unit(id) else {
            return;
        };
        let (kind, open) = (u.kind, u.open);
        let d = Decision {
            attempt: u.decision.attempt,
            ..Decision::primary(reason)
        };
        self.record(d);
        let now = self.now;
        if let Some(u) = self.unit_mut(id) {
            u.decision = d;
            u.attempt = Attempt::Writer;
            u.hidden_sync = false;
            u.sent_at = now;
            u.result_started = false;
            u.saw_error = false;
            u.failure = None;
            u.failure_text = None;
        }
        match kind {
            UnitKind::Batch => {
                let orig = std::mem::take(&mut self.orig);
                let msgs = std::mem::take(&mut self.orig_msgs);
                for r in &msgs {
                    self.batch_msg_to_writer(id, w, &orig[r.clone()]);
                }
                self.orig = orig;
                self.orig_msgs = msgs;
                if !open {
                    self.after_writer_send(id, true, true);
                }
            }
            _ => {
                if let Some(wb) = self.writer.as_mut() {
                    wb.resp.push(Req::Query { hidden: 0 }, Who::Client, id);
                }
                self.out.send_backend(w, &self.orig);
                let (may_write, pipelinable) = match self.unit(id).and_then(|u| u.class.as_ref()) {
                    Some(c) => (
                        self.unit_may_write(c),
                        !c.statements().iter().any(|s| s.kind == Kind::Copy),
                    ),
                    None => (true, false),
                };
                self.after_writer_send(id, may_write, pipelinable);
            }
        }
    }

    /// Sends the unit to the reader: the settings replay first when the connection is fresh
    /// and the session's state differs from the startup one (S-5: its own message, and the
    /// unit's messages follow only once it succeeded), then the unit behind its hidden
    /// statements.
    pub(super) fn send_to_reader(
        &mut self,
        id: u32,
        conn: ConnId,
        server: ServerId,
        fresh: bool,
        needs_reset: bool,
    ) {
        let Some(u) = self.unit(id) else {
            return;
        };
        let d = u.decision;
        if d.wait {
            self.engine.stats().inc(Counter::WaitsSent);
        }
        if d.import {
            self.engine.stats().inc(Counter::SplitImports);
        }
        self.record(d);
        if d.reason == Reason::MissingLsnWarning {
            self.out.send_client_with(|o| {
                encode::warning(
                    o,
                    b"01000",
                    b"polarsplit: read served by a replica without read-your-writes: the session's last write position is unknown",
                    None,
                );
            });
        }
        self.engine.readers().begin_use(server);
        if self.txn.active && self.pin.is_none() {
            let view = self.engine.writer_view(self.writer_hostgroup);
            if let Some(hg) = view.reader_hostgroup {
                self.pin = Some(Pin {
                    conn,
                    server,
                    hostgroup: hg,
                    generation: view.generation,
                    profile_generation: self.engine.profile_generation(),
                    config_generation: self.config_generation,
                    replay: Lsn::ZERO,
                });
            }
        }
        let now = self.now;
        if let Some(u) = self.unit_mut(id) {
            u.attempt = Attempt::Reader { conn, server };
            u.sent_at = now;
        }
        self.reader_portals.clear();
        if fresh && !self.settings.is_empty() {
            let settings = &self.settings;
            self.out.send_backend_with(conn, |o| {
                hidden::settings_query(o, settings);
            });
            if let Some(i) = self.backend_index(conn) {
                let b = self.backend_mut(i);
                b.resp.push(Req::Query { hidden: 0 }, Who::Settings, id);
                b.settings_pending = true;
            }
            self.engine.stats().inc(Counter::SettingsReplayed);
            if let Some(u) = self.unit_mut(id) {
                u.after_replay = Some(needs_reset);
            }
            return;
        }
        self.send_reader_part(id, conn, needs_reset);
    }

    /// The unit's own messages on the reader, behind its hidden statements (W-4, E-3).
    pub(super) fn send_reader_part(&mut self, id: u32, conn: ConnId, needs_reset: bool) {
        let Some(u) = self.unit(id) else {
            return;
        };
        let d = u.decision;
        let kind = u.kind;
        let dialect = self.dialect;
        let split = d.outcome == Outcome::ReplicaTxnSplit;
        let wait_statement = d.wait && dialect == ServerDialect::Stock;
        let wait = d.wait.then(|| Wait {
            mode: if split || self.config.on_wait_timeout != OnWaitTimeout::Warning {
                "strict"
            } else {
                "best_effort"
            },
            timeout_ms: if split {
                self.config.split_wait_timeout_ms
            } else {
                self.config.wait_timeout_ms
            },
            lsn: d.target.0,
            wait_for_statement: wait_statement,
        });
        let backend_dirty = self
            .backend_index(conn)
            .is_some_and(|i| self.backend(i).dirty);
        let reset = (needs_reset || backend_dirty) && !d.import;
        if reset {
            self.engine.stats().inc(Counter::XidResets);
        }
        let h = Hidden {
            reset,
            import: d.import.then_some(self.txn.xids.as_str()),
            wait,
        };
        match kind {
            UnitKind::Query => {
                // Built straight into the action's bytes: the client's statement is copied once
                // (into `orig`, kept for a retry) and once here.
                let orig = &self.orig;
                let mut count = 0;
                self.out.send_backend_with(conn, |o| {
                    count = hidden::build_query(o, &h, orig);
                });
                if let Some(i) = self.backend_index(conn) {
                    self.backend_mut(i)
                        .resp
                        .push(Req::Query { hidden: count }, Who::Client, id);
                }
            }
            _ => {
                let mut count = 0;
                self.out.send_backend_with(conn, |o| {
                    count = hidden::build_hidden_pbe(o, &h);
                });
                if let Some(i) = self.backend_index(conn) {
                    let b = self.backend_mut(i);
                    for _ in 0..count {
                        b.resp.push(Req::Parse, Who::Wait, id);
                        b.resp.push(Req::Bind, Who::Wait, id);
                        b.resp.push(Req::Execute, Who::Wait, id);
                    }
                }
                let orig = std::mem::take(&mut self.orig);
                let msgs = std::mem::take(&mut self.orig_msgs);
                for r in &msgs {
                    self.batch_msg_to_reader(id, conn, &orig[r.clone()]);
                }
                self.orig = orig;
                self.orig_msgs = msgs;
            }
        }
        let import_persists = d.import && dialect == ServerDialect::Awide;
        if let Some(i) = self.backend_index(conn) {
            let b = self.backend_mut(i);
            // W-6: an error anywhere in the Query rolls back its SETs, so a reset only counts
            // once the Query succeeded; an import counts at once.
            if import_persists {
                b.dirty = true;
            }
            b.clean_on_success = reset && !import_persists;
        }
        let runs_code = self.unit(id).is_some_and(|u| {
            u.class
                .iter()
                .chain(u.execs.iter().flatten())
                .any(|c| c.effects().contains(crate::classify::Effects::RUNS_CODE))
        });
        if let Some(i) = self.backend_index(conn) {
            // S-6: code the engine cannot see into may leave state on the connection; it is
            // closed after this unit, never handed to another session.
            self.backend_mut(i).ran_code |= runs_code;
        }
        if let Some(u) = self.unit_mut(id) {
            u.wait_statement = wait_statement;
            u.after_replay = None;
        }
        self.drain_locals(conn);
    }

    /// REJECT: the engine answers with a 55000 error; nothing runs (inside a transaction the
    /// writer's transaction is failed too, F-3).
    pub(super) fn reject_unit(&mut self, kind: UnitKind, d: Decision, count: usize) {
        self.record(d);
        self.engine.stats().inc(Counter::Rejects);
        for _ in 0..count {
            if let Some(m) = self.queue.front() {
                let n = m.len;
                self.out.discard_client(n);
                self.pop_head();
            }
        }
        let why = match d.reason {
            Reason::MissingLsnReject => {
                "the session's last write position is unknown and on_missing_lsn = error"
            }
            Reason::RejectNoReader => "no replica can serve this read and read_fallback = error",
            _ => "the read cannot be served consistently",
        };
        let msg = format!("polarsplit: {why}");
        let detail = format!("reason {}", d.reason.name());
        self.out.send_client_with(|o| {
            encode::error_response(o, b"55000", msg.as_bytes(), Some(detail.as_bytes()));
        });
        let id = self.push_unit(kind, d, None, Attempt::Local);
        if let Some(u) = self.unit_mut(id) {
            u.errored = true;
        }
        self.end_with_error(id);
    }

    /// After an error reached the client: inside a transaction, fail the writer's transaction
    /// (F-3) and let its RFQ answer; outside, answer with the writer's status now.
    pub(super) fn end_with_error(&mut self, id: u32) {
        if self.unit(id).is_some_and(|u| u.open) {
            // The client has not sent the batch's Sync yet: like a server after an error, the
            // engine skips its messages up to that Sync and answers it then.
            self.skip_to_sync = true;
            self.finish_unit(id);
            return;
        }
        if self.txn.active && !self.txn.failed {
            self.abort_writer(id);
        } else {
            let status = self.writer_status;
            self.client_rfq(status);
            self.finish_unit(id);
        }
    }

    /// F-3: a hidden statement that fails, so the writer's transaction is aborted as PostgreSQL
    /// would abort it after an error. Its error is swallowed; its RFQ (`E`) reaches the client.
    pub(super) fn abort_writer(&mut self, id: u32) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            self.finish_unit(id);
            return;
        };
        self.out.send_backend_with(w, |o| {
            encode::query(o, &[hidden::ABORT_STATEMENT]);
        });
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::Query { hidden: 0 }, Who::Abort, id);
        }
        if let Some(u) = self.unit_mut(id) {
            u.attempt = Attempt::Local;
        }
    }

    /// A standard RFQ for the client with the writer's status (P-8), carrying the session's
    /// target when the client asked for LSNs.
    pub(super) fn client_rfq(&mut self, status: TxStatus) {
        self.flush_held_writer();
        self.report_token();
        if self.startup.as_ref().is_some_and(|s| s.client_wants_lsn) {
            let m = encode::ready_for_query_with_lsn(status, self.lsn.target());
            self.out.send_client(&m);
        } else {
            self.out.send_client(&encode::ready_for_query(status));
        }
    }

    pub(super) fn flush_held_writer(&mut self) {
        if !self.held_writer.is_empty() {
            let held = std::mem::take(&mut self.held_writer);
            self.out.send_client(&held);
            self.held_writer = held;
            self.held_writer.clear();
        }
    }

    /// The unit is over: next one.
    pub(super) fn finish_unit(&mut self, id: u32) {
        self.units.retain(|u| u.id != id);
        let pinned = self.hazards.any() || self.statements.any_on_writer();
        if pinned != self.pinned_writer {
            self.pinned_writer = pinned;
            self.out.pin_writer(pinned);
        }
        self.pump(None);
    }

    /// Keeps a released reader backend's buffers for the next attach.
    pub(super) fn retire_backend(&mut self, b: Backend) {
        if self.spare_backends.len() < 4 {
            self.spare_backends.push(b);
        }
    }

    /// Releases the transaction's pinned reader (P-7). `lost`: the connection is gone.
    pub(super) fn release_pin(&mut self, lost: bool) {
        let Some(pin) = self.pin.take() else {
            return;
        };
        self.engine.stats().inc(Counter::PinsReleased);
        // A pinned reader still answering a unit is released when it is done.
        let busy = self
            .backend_index(pin.conn)
            .is_some_and(|i| !self.backend(i).resp.is_empty());
        if busy {
            return;
        }
        self.hand_back(pin.conn, lost);
    }

    /// Carries out a failure recovery decided when the reader's answer ended (RFQ) or broke.
    pub(super) fn recover(
        &mut self,
        id: u32,
        class: FailureClass,
        rec: Recovery,
        failure_text: Option<String>,
    ) {
        let stats = self.engine.stats();
        match class {
            FailureClass::ConnectionLost => stats.inc(Counter::FailuresConnectionLost),
            FailureClass::WaitTimeout => stats.inc(Counter::FailuresWaitTimeout),
            FailureClass::ReusableError => stats.inc(Counter::FailuresReusableError),
            FailureClass::Cancel => stats.inc(Counter::Cancels),
        }
        let in_txn = self.txn.active;
        if in_txn && class != FailureClass::Cancel {
            // P-3 step 3: the rest of the transaction stays on the writer.
            self.txn.reader_failed = true;
        }
        let retry_counter = match class {
            FailureClass::ConnectionLost => Counter::RetriesConnectionLost,
            FailureClass::WaitTimeout => Counter::RetriesWaitTimeout,
            _ => Counter::RetriesReusableError,
        };
        if matches!(rec, Recovery::RetryReader | Recovery::RetryWriter) {
            // The failed attempt's held messages (notices, parse/bind completions, its
            // RowDescription) never reach the client: the retry answers in full (P-8).
            self.held.clear();
        }
        match rec {
            Recovery::RetryReader => {
                stats.inc(retry_counter);
                if in_txn {
                    stats.inc(Counter::SplitRetried);
                }
                let view = self.collect();
                let (d, excluded) = match self.unit_mut(id) {
                    Some(u) => {
                        u.reader_retries += 1;
                        if let Attempt::Reader { server, .. } | Attempt::AwaitReader { server } =
                            u.attempt
                        {
                            u.excluded.push(server);
                        }
                        let mut d = u.decision;
                        d.attempt += 1;
                        d.reason = Reason::RetryOtherReader;
                        d.wait = false;
                        (d, u.excluded.clone())
                    }
                    None => return,
                };
                // The pin (if any) is gone with the failure; choose afresh.
                self.pin = None;
                match self.bind_reader(d, &view, &excluded) {
                    Bound::Reader {
                        decision, server, ..
                    } => {
                        if let Some(u) = self.unit_mut(id) {
                            u.attempt = Attempt::AwaitReader { server };
                            u.hidden_sync = false;
                            u.decision = Decision {
                                reason: Reason::RetryOtherReader,
                                ..decision
                            };
                            u.result_started = false;
                            u.saw_error = false;
                            u.failure = None;
                            u.failure_text = None;
                        }
                        self.acquire_reader(server);
                    }
                    Bound::Writer(_) | Bound::Reject(_) => {
                        self.send_orig_to_writer(id, Reason::RetryPrimaryAfterLoss);
                    }
                }
            }
            Recovery::RetryWriter => {
                stats.inc(retry_counter);
                if in_txn {
                    stats.inc(Counter::SplitRetried);
                }
                let reason = match class {
                    FailureClass::ConnectionLost => Reason::RetryPrimaryAfterLoss,
                    FailureClass::WaitTimeout => Reason::RetryPrimaryAfterTimeout,
                    _ => Reason::RetryPrimaryAfterError,
                };
                if let Some(u) = self.unit_mut(id) {
                    u.decision.attempt += 1;
                }
                self.send_orig_to_writer(id, reason);
            }
            Recovery::ForwardOriginal => {
                // The error already went to the client.
                stats.inc(Counter::FailuresForwarded);
                self.flush_held();
                if let Some(u) = self.unit_mut(id) {
                    u.errored = true;
                }
                self.end_with_error(id);
            }
            Recovery::EngineError => {
                stats.inc(Counter::FailuresForwarded);
                self.flush_held();
                let what = match class {
                    FailureClass::ConnectionLost => "the replica connection was lost",
                    FailureClass::WaitTimeout => {
                        "the replica did not reach the session's position in time"
                    }
                    _ => "the replica refused the statement",
                };
                let msg = format!("polarsplit: {what}");
                let detail = failure_text.unwrap_or_default();
                self.out.send_client_with(|o| {
                    encode::error_response(o, b"55000", msg.as_bytes(), Some(detail.as_bytes()));
                });
                if let Some(u) = self.unit_mut(id) {
                    u.errored = true;
                }
                self.end_with_error(id);
            }
            Recovery::Disconnect => {
                stats.inc(Counter::FailuresDisconnected);
                let msg =
                    b"polarsplit: closing the session after a replica failure (policy disconnect)";
                self.fatal_to_client(b"55000", msg);
                self.close_all();
            }
        }
    }

    /// Sends a reader attempt's held messages to the client (its result began, or its error is
    /// forwarded).
    pub(super) fn flush_held(&mut self) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.out.send_client(&held);
            self.held = held;
            self.held.clear();
        }
    }
}
