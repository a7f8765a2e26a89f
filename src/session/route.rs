//! Deciding a unit of client messages: collect (P-2), plan (P-3/P-5), and starting it on the
//! writer with the hidden statements it needs (W-7 probe, S-5 capture, E-2 mirrors). Binding a
//! read to a reader is `bind.rs`; the end of a unit and recovery are `finish.rs`.

use super::hidden;
use super::plan::{plan, PlanInput, Protocol, StatementView, TxnView};
use super::response::{Req, Who};
use super::state::Known;
use super::statements::same_name;
use super::*;
use crate::classify::{prepared_mentions, Kind, Mention};
use crate::cluster::stats::Counter;
use crate::cluster::WriterView;
use crate::config::{Consistency, LsnProbe};
use crate::protocol::Marker;

/// How old the last writer sample may be for the host's samples to count as arriving
/// ([`Session::writer_samples_arrive`]): twice the slowest monitor period the README's hosts use
/// (the benchmarks' 1 s).
pub(super) const WRITER_SAMPLES_FRESH_MS: u64 = 2_000;

impl Session {
    /// P-2 collect: adopt a new configuration and writer generation (S-2), drop an invalid pin.
    pub(super) fn collect(&mut self) -> WriterView {
        self.refresh_config();
        let view = self.writer_view();
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
            self.reader_read_at = u64::MAX;
            self.release_pin(false);
        }
        self.settle_reader_read();
        // A writer sample whose query was sent after the write was acknowledged bounds the
        // write from above: it positions the session's write (W-7). One sent after a read the
        // writer answered without a position bounds what that read saw (S-1a's monotonic
        // reads): it positions what the session observed, inside a block too.
        if let Some((l, sent)) = view.writer_sample {
            let ack = self.write_ack_ms;
            if ack != u64::MAX && sent > ack && view.generation == self.lsn.generation {
                // A write is positioned by a sample sent after its acknowledgement unless it
                // belongs to the open block (its commit comes later): a block that has not
                // written is no reason to keep an earlier write unpositioned.
                if self.lsn.write_unknown && !(self.txn.active && self.txn.may_have_written) {
                    self.lsn.writer_positioned(l, true);
                    self.write_ack_ms = u64::MAX;
                    self.engine.stats().inc(Counter::TargetsLearned);
                } else if self.lsn.observed_unknown && !self.lsn.write_unknown {
                    self.lsn.observed_lsn = self.lsn.observed_lsn.max(l);
                    self.lsn.observed_unknown = false;
                    self.write_ack_ms = u64::MAX;
                }
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

    /// S-1a on a server that reports no positions: what a read a reader served showed is at
    /// most that reader's position at the read's end. At its RFQ the session only knows a lower
    /// bound (the reader's last fresh sample, taken before the read); the read may have shown
    /// more. Evidence of the reader taken after the read positions it; an outage of the reader
    /// since (a crash and restart, a replacement by an older copy: it may now be behind what
    /// the read showed, and the lower bound would let it serve the session older data than it
    /// read — an examiner's finding, 2026-12-07: 30 of 30 reads after the standby went back)
    /// leaves the session's position unknown until a writer sample sent from now on positions
    /// it — its reads stay on the writer until then, the safe side.
    pub(super) fn settle_reader_read(&mut self) {
        let (server, at) = (self.reader_read_server, self.reader_read_at);
        if at == u64::MAX {
            return;
        }
        match self.engine.readers().snapshot(server) {
            Some(r) if r.outage_at_ms.is_none_or(|o| o < at) => {
                // (Evidence of another writer generation positions nothing; the session's own
                // change of generation drops the read with everything else, S-2.)
                if r.known && r.generation == self.lsn.generation && r.sample_at_ms > at {
                    self.lsn.reader_positioned(r.replay_lsn);
                    self.reader_read_at = u64::MAX;
                }
            }
            _ => {
                self.lsn.observed_unknown = true;
                self.write_ack_ms = self.now;
                self.reader_read_at = u64::MAX;
            }
        }
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
            // A SERIALIZABLE session default: each statement outside a block is a serializable
            // transaction on the primary, which a standby cannot run (it refuses it), and whose
            // predicate locks a read elsewhere would not take — as a hazard, the writer's.
            // (Inside a block its isolation says it: P-5.)
            hazard: self.hazards.any()
                || !self.txn.active && self.session_isolation == Some(Isolation::Serializable),
            state_unknown: !self.settings.replayable(),
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
        let d = if self.never_routed() {
            Decision::passthrough(Reason::ReplicationConnection)
        } else {
            plan(&self.plan_input(&view, stmt, protocol))
        };
        (d, view)
    }

    /// S-5: the writer reloaded its configuration since the session's state was captured (the
    /// host's monitor read a later `pg_conf_load_time()`): settings the session
    /// has from the configuration may have changed on the writer without a word (only the
    /// settings the server reports come with a ParameterStatus). The state is captured again
    /// before the next read leaves the writer — inside a block, once it ends, its reads staying
    /// on the writer meanwhile, as after a SET there.
    pub(super) fn config_reloaded(&mut self) {
        if self.phase != Phase::Ready {
            return;
        }
        self.hold_writer_group();
        let Some(epoch) = self.writer_group.as_ref().map(|g| g.config_epoch()) else {
            return;
        };
        if epoch == self.settings.conf_epoch || self.settings.known != Known::Yes {
            return;
        }
        self.state_may_have_changed();
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
        // A writer-bound unit waits only if some unit in flight is not a writer unit, is open,
        // waits for a row-shape check or was cut off by a `BEGIN` (the rest is decided inside
        // its block): counted as the queue changes (`Units::any_blocking`), not looked for here.
        !writer_bound || self.units.any_blocking()
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
        let stmt = match (*why_not, class) {
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
        // Decided: the unit takes the classification (the message leaves the queue with it).
        let class = match self.queue.front_mut().map(|h| &mut h.info) {
            Some(MsgInfo::Query { class, .. }) => class.take(),
            _ => None,
        };
        // A simple Query destroys the unnamed prepared statement (NOTES), wherever it runs.
        self.statements.remove(b"");
        match d.outcome {
            Outcome::Passthrough | Outcome::ForcePrimary => {
                self.start_writer_query(d, class, fresh);
            }
            Outcome::Reject => self.reject_unit(UnitKind::Query, d, 1),
            Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit => {
                self.start_reader_unit(d, class, &view, fresh, 1, None);
            }
        }
        true
    }

    /// A FunctionCall: always the writer. It runs a function by object ID, code the engine
    /// cannot see into (S-5) unless it is one of the large-object functions libpq's and JDBC's
    /// large-object interfaces call this way: the session's state may change with it (a
    /// `set_config()` called so), as after a statement that calls such a function.
    pub(super) fn start_function_call(&mut self, function: Option<u32>) -> bool {
        let d = Decision::primary(Reason::NotAStatement);
        if self.must_wait(&d, false) {
            return false;
        }
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return false;
        };
        self.record(d);
        let unseen = !function.is_some_and(effects::is_large_object_function);
        if unseen {
            self.mirror_before_rules_change(w, true, false);
            self.ran_unseen_code(self.txn.active);
        }
        let id = self.push_unit(UnitKind::FunctionCall, d, None, Attempt::Writer);
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::FunctionCall, Who::Client, id);
        }
        self.advance_head(Some(w));
        self.after_writer_send(id, true, false);
        true
    }

    pub(super) fn record(&mut self, d: Decision) {
        if matches!(
            d.outcome,
            Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit
        ) {
            self.probe_credit.read_on_reader();
        }
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
            result_started: false,
            row_limit: 0,
            saw_error: false,
            probe_after: false,
            may_open_txn,
            after_replay: None,
            hidden_sync: false,
            reader_refused: false,
            cancel_forwarded: false,
            check_then: None,
            execs_sent: 0,
            clears_sent: false,
            extra: None,
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
        self.head_query_text(fresh).map(<[u8]>::to_vec)
    }

    /// A simple Query to the writer, forwarded by count.
    pub(super) fn start_writer_query(
        &mut self,
        d: Decision,
        class: Option<Classification>,
        fresh: Option<(u8, &[u8])>,
    ) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        self.record(d);
        if class.as_ref().is_some_and(effects::changes_catalog) {
            self.catalog_changing();
        }
        let sql = self.keep_sql_if_needed(&class, fresh);
        let known = class.is_some();
        let no_copy_in = class
            .as_ref()
            .is_some_and(|c| !c.statements().iter().any(|s| s.kind == Kind::Copy));
        let may_write = class.as_ref().is_none_or(|c| self.unit_may_write(c));
        let changes_state = class.as_ref().is_some_and(|c| self.changes_state(c));
        // A text not at hand (too large to inspect, or queued without a copy) may name any
        // statement: all that exist only on readers go to the writer first — unless the Query
        // joins the implicit transaction of extended messages sent without a Sync, which the
        // mirror's own Sync would end early.
        let head = self.head_query_text(fresh);
        let reserved = class
            .as_ref()
            .zip(head)
            .is_some_and(|(c, t)| prepares_a_reserved_name(c, t));
        let named = match head {
            Some(t) => self.reader_only_named_in(t),
            None if !self.writer_mid_batch() => self.reader_only_named(),
            None => Vec::new(),
        };
        self.mirror_named(w, &named);
        // A `PREPARE` of a reserved name: ours first, with a Sync of their own — not while the
        // server skips to a Sync or the Query joins extended messages sent without one (the
        // Sync would end them early).
        if reserved && !self.writer_skipping() && !self.writer_mid_batch() {
            self.reserve_names(w, true);
        }
        let rules = self.changes_parse_rules(class.as_ref());
        let ends = rules && class.as_ref().and_then(effects::txn_block_edge) == Some(true);
        self.mirror_before_rules_change(w, rules, ends);
        if let (Some(c), Some(t)) = (
            class.as_ref(),
            sql.as_deref().and_then(|b| std::str::from_utf8(b).ok()),
        ) {
            self.note_custom_names(c, t);
        }
        let id = self.push_unit(UnitKind::Query, d, class, Attempt::Writer);
        if let Some(u) = self.unit_mut(id) {
            u.sql = sql.map(Vec::into_boxed_slice);
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

    /// E-2: whether a unit of `class` (`None`: statements the engine could not read) may change
    /// the settings a server parses a statement under ([`effects::may_change_parse_rules`]),
    /// or end or roll back a transaction block in which such a change ran.
    pub(super) fn changes_parse_rules(&self, class: Option<&Classification>) -> bool {
        class.is_none_or(|c| {
            effects::may_change_parse_rules(c)
                || (self.statements.rules_in_txn && effects::may_revert_settings(c))
        })
    }

    /// E-2: a server keeps a prepared statement's parse: its literals mean what they meant
    /// under the settings of the client's Parse (`standard_conforming_strings`, `DateStyle`,
    /// `TimeZone`, …). Before a unit that may change those settings runs on the writer
    /// ([`Self::changes_parse_rules`]), every statement that exists only on readers and whose
    /// parse they may change is prepared on the writer too, under the rules it was parsed with
    /// — so its parse lives somewhere for good (hidden, answers swallowed) — and the parse rules
    /// count a change: those statements run on the writer from then on. Inside a transaction
    /// block the change may be reverted at its end, which counts as one too (`ends`: the unit
    /// ends the block, [`effects::txn_block_edge`]).
    pub(super) fn mirror_before_rules_change(&mut self, w: ConnId, changes: bool, ends: bool) {
        if !changes {
            return;
        }
        let todo = self.statements.reader_only_rule_bound();
        self.mirror_statements(w, &todo, false);
        self.statements.rules_changed();
        self.statements.rules_in_txn =
            !ends && (self.txn.active || self.writer_status != TxStatus::Idle);
    }

    /// E-2: the statements that live only on readers and that `sql`, about to run on the
    /// writer, may name — `EXECUTE s` (also inside `EXPLAIN` or `CREATE TABLE … AS`),
    /// `DEALLOCATE s`, `PREPARE s` (which must fail there with 42P05, as on one server), or all
    /// of them through `pg_prepared_statements`. The writer must have them first, so the text
    /// runs as on one server. Nothing is looked at while the client has no statement.
    pub(super) fn reader_only_named_in(&self, sql: &[u8]) -> Vec<Box<[u8]>> {
        let mut out: Vec<Box<[u8]>> = Vec::new();
        if self.statements.is_empty() {
            return out;
        }
        let Ok(text) = std::str::from_utf8(sql) else {
            return out;
        };
        prepared_mentions(text, |m| match m {
            Mention::Name(n) => {
                let only_readers = self.statements.peek(&n).is_some_and(|s| !s.on_writer);
                if only_readers && !n.is_empty() && !out.iter().any(|o| same_name(o, &n)) {
                    out.push(n.into());
                }
            }
            Mention::All => {
                for n in self.reader_only_named() {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
        });
        out
    }

    /// W-7, S-5: ahead of a client's Parse of a name reserved for the engine's probe or capture,
    /// or a simple Query's `PREPARE polarsplit_capture AS …`, the engine's own are parsed on the
    /// writer under those names (`hidden::reserve`; with a Sync of their own ahead of a Query,
    /// `sync`; answers swallowed), so the server refuses the client's with 42P05 and the
    /// engine's next probe or capture closes its own, never a statement of the client's. Not in
    /// a failed block, where the server refuses any Parse (25P02) and ours would fail in the
    /// client's place.
    pub(super) fn reserve_names(&mut self, w: ConnId, sync: bool) {
        if self.writer_status == TxStatus::Failed || (sync && !self.writer_takes_hidden_sync()) {
            return;
        }
        self.out.send_backend_with(w, |o| {
            hidden::reserve(o);
            if sync {
                hidden::sync(o);
            }
        });
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::Steps(2), Who::Mirror, 0);
            if sync {
                wb.resp.push(Req::Sync, Who::Mirror, 0);
            }
        }
    }

    /// Every statement that exists only on readers and that a text can name (not the unnamed
    /// one, which no text names and `pg_prepared_statements` does not list).
    pub(super) fn reader_only_named(&self) -> Vec<Box<[u8]>> {
        let mut v = self.statements.reader_only();
        v.retain(|(n, _)| !n.is_empty());
        v.into_iter().map(|(n, _)| n).collect()
    }

    /// The SQL of the simple Query at the head of the queue (or arriving as `fresh`).
    fn head_query_text<'a>(&'a self, fresh: Option<(u8, &'a [u8])>) -> Option<&'a [u8]> {
        let head = self.queue.front()?;
        match (self.msg_bytes(head), fresh) {
            (Some(c), _) => c.get(5..c.len().saturating_sub(1)),
            (None, Some((_, body))) => body.get(..body.len().saturating_sub(1)),
            _ => None,
        }
    }

    /// Prepares statements `names` (tracked, reader-only) on the writer under the client's
    /// names ahead of a simple Query: hidden, answers swallowed.
    pub(super) fn mirror_named(&mut self, w: ConnId, names: &[Box<[u8]>]) {
        let todo: Vec<_> = names
            .iter()
            .filter_map(|n| Some((n.clone(), self.statements.peek(n)?.rest.clone())))
            .collect();
        self.mirror_statements(w, &todo, true);
    }

    /// Sends hidden Parses of `todo` (name, Parse body after the name) to the writer, their
    /// answers swallowed, and marks them prepared there — a mark undone when the server refuses
    /// or skips a Parse (`writer_mirror_message`, `undo_skipped`), so a statement the writer
    /// never had is not sent there (an examiner's finding of 2026-12-07: a mirror refused in a
    /// failed block, then 26000 for every later use).
    ///
    /// Where the writer takes hidden work with a Sync of its own
    /// (`writer_takes_hidden_sync`), with one. Inside extended messages the client has not
    /// synced (`writer_continuation`), without: the Sync would commit them ahead of the Query
    /// behind them, which the primary alone rolls back with them when it fails (an examiner's
    /// finding of 2026-12-07). There the Parses join the client's batch as the hidden Parse of
    /// a statement a batch names does (`ensure_on_writer`), counted with the batch's unit: an
    /// error of theirs is the batch's (the server skips to the client's Sync, as after an error
    /// of the client's own), and skipped after an earlier error they are undone with the batch's
    /// skipped Parses. Not at all in a failed block (refused there), nor in an open one ahead
    /// of a change of the parse rules (its locks and its failure would be the client's), or
    /// while the server skips to a
    /// Sync or may be in COPY IN: the statement stays where it is known, on readers, and is
    /// parsed on the writer when a message names it there — under the settings of that time,
    /// where the primary alone keeps the first parse (a setting that changes how a literal
    /// parses, set inside a block, then a statement prepared on readers before it: README).
    fn mirror_statements(&mut self, w: ConnId, todo: &[super::state::Setting], named: bool) {
        // Nor inside the client's transaction block ahead of a change of the parse rules: a
        // Parse there takes its relations' locks until the block ends (another session's ALTER
        // TABLE then waits for a block that never touched the table), and one the server
        // refuses (a column a migration dropped) aborts a block the client did nothing to fail
        // (examiners' findings of 2026-12-07, red10-d). Statements the client's own text names
        // (`named`: `EXECUTE s`) are still prepared there: that text runs them, with their
        // locks and their failure, on one server too.
        let in_block = self.txn.active || self.writer_status != TxStatus::Idle;
        if todo.is_empty() || in_block && !named {
            return;
        }
        let synced = self.writer_takes_hidden_sync();
        let in_batch = !synced
            && self.writer_continuation
            && !self.writer_skipping()
            && self.writer_status != TxStatus::Failed
            && !self.writer_may_copy_in();
        if !synced && !in_batch {
            return;
        }
        // The unit of the client's unsynced batch (none left: its answers all came, so the
        // server skips nothing of it).
        let (who, unit) = if synced {
            (Who::Mirror, 0)
        } else {
            let batch = self
                .units
                .iter()
                .rev()
                .find(|u| u.kind == UnitKind::Batch && u.attempt == Attempt::Writer);
            (Who::Prepare, batch.map_or(0, |u| u.id))
        };
        for (name, _) in todo {
            self.statements.set_on_writer(name);
            let epoch = self.ddl_epoch();
            self.statements.stamp(name, epoch);
        }
        self.out.send_backend_with(w, |o| {
            for (name, rest) in todo {
                hidden::parse_as(o, name, rest);
            }
            if synced {
                hidden::sync(o);
            }
        });
        if let Some(wb) = self.writer.as_mut() {
            for (name, _) in todo {
                wb.resp.push(Req::Parse, who, unit);
                wb.parses
                    .push_back(super::statements::ParseNote::parse(unit, name, who));
            }
            if synced {
                wb.resp.push(Req::Sync, Who::Mirror, 0);
            }
        }
    }

    /// After a unit's last message went to the writer: pipeline the probe (W-7) and the
    /// capture (S-5) right behind it when the unit runs outside a transaction block and cannot
    /// enter COPY IN (same write, no extra round trip); otherwise they follow its RFQ.
    pub(super) fn after_writer_send(&mut self, id: u32, may_write: bool, pipelinable: bool) {
        let no_edge = !self.units.any_may_open_txn();
        let outside = !self.txn.active && self.writer_status == TxStatus::Idle && no_edge;
        // Nor behind a unit that drops every prepared statement, or follows one still in flight
        // that does: they follow its RFQ. (When the probe and the capture stayed prepared on the
        // writer, they would have been bound by names the writer no longer had — measured:
        // `DISCARD ALL` and a statement pipelined behind it, both failed. They are parsed in
        // their own batch now, so this is only the conservative order kept.)
        // Nor behind a Query that follows extended messages sent without a Sync: after an error
        // among them the server discards everything up to the client's Sync, and the hidden
        // work's own Sync would end that early — the Query, and what the client sends before
        // its Sync, would run where the primary alone runs nothing (E-1).
        // Nor while an earlier unit on the writer may be in (or about to enter) COPY IN, not
        // only this one (`pipelinable`): the hidden batch would be read as COPY data
        // (`writer_takes_hidden_sync`).
        if !pipelinable
            || self.writer_continuation
            || self.unit_drops_statements(id)
            || self.statements_cleared_ahead(id)
            || !self.writer_takes_hidden_sync()
        {
            return;
        }
        if !outside {
            // No probe inside a transaction block (S-5): it calls a function, which can fail —
            // EXECUTE on `pg_current_wal_insert_lsn()` revoked from PUBLIC, a cancel, a
            // statement timeout — and its error would abort the client's block (an examiner's
            // finding, 2026-12-07: the block's UPDATE lost, 25P02 then ROLLBACK, where the
            // primary alone commits it). A read the writer serves inside a block so leaves the
            // session's position unknown until the block's end, whose RFQ gets the probe
            // (`writer_unit_rfq`), or a writer sample sent after the read: the block's later
            // reads stay on the writer meanwhile — the safe side.
            return;
        }
        let capture = self.settings.known == Known::Due;
        // A read the writer serves, on a server that reports no positions (S-1a, W-7): a probe
        // behind it positions what it saw, so the session's next reads may go to a reader that
        // replayed that far — while such probes pay (`lsn_probe = adaptive`), and always when
        // one can ride in a capture's batch (a SET, then a read). Unprobed, a writer sample sent
        // after the read positions it. Behind an unprobed write too: the probe, taken after the
        // write was acknowledged, positions the write as well. Before, only the session's next
        // write could be probed, and a session reading one statement behind the other after a
        // rare write kept every read on the writer until it wrote again.
        let observes = !may_write && self.unit_observes(id);
        if observes {
            // A read the writer serves: the last probe's position, if unused, did not pay.
            self.probe_credit.new_write();
        }
        let read_probe = observes && self.wants_read_probe(capture);
        let probe = may_write && self.wants_probe() || read_probe;
        if probe || capture {
            self.send_learning(probe, capture);
            if let Some(u) = self.unit_mut(id) {
                u.probe_after = true;
            }
        }
    }

    /// Whether unit `id` reads data (a SELECT, however routed): on the writer of a server that
    /// reports no positions, what it sees must be positioned before the session reads on a
    /// reader again (S-1a, W-7).
    pub(super) fn unit_observes(&self, id: u32) -> bool {
        self.unit(id)
            .is_some_and(|u| reads_data(u.class.as_ref(), &u.execs))
    }

    /// Whether a read the writer served gets a probe behind it: always when one can ride in a
    /// capture's batch, else while probes pay (S-1a, W-7).
    pub(super) fn wants_read_probe(&self, capture: bool) -> bool {
        capture && self.probe_enabled() || self.wants_probe()
    }

    /// Whether unit `id` runs `DEALLOCATE ALL` or `DISCARD ALL`: it drops the probe and the
    /// capture statements on the writer too, so hidden work behind it would name statements
    /// that no longer exist (and a Parse of them ahead of it would be dropped with the rest).
    /// Such work follows the unit's RFQ instead, parsed again.
    fn unit_drops_statements(&self, id: u32) -> bool {
        let Some(u) = self.unit(id) else {
            return false;
        };
        u.class
            .iter()
            .chain(u.execs.iter().flatten())
            .any(super::units::drops_statements)
    }

    /// P-5: a read split off a transaction block runs on a reader, so the writer's block would
    /// see no statement for it. Ahead of the block's first split read, and of any that comes
    /// [`TOUCH_INTERVAL_MS`] or more after the last touch, a hidden `SELECT 1` runs in the writer's
    /// block ([`hidden::touch`]: nothing of the client's is touched), its answer swallowed:
    /// the block has taken its first snapshot as on one server (a later `SET TRANSACTION
    /// ISOLATION LEVEL`, `READ WRITE` or `DEFERRABLE` fails with 25001 as the primary's
    /// would), and the writer is not idle in transaction while the client reads
    /// (`idle_in_transaction_session_timeout`). Splits run only under READ COMMITTED, where the
    /// statement holds no snapshot after it ends.
    pub(super) fn touch_writer(&mut self) {
        let now = self.now;
        if self
            .txn
            .touched_at
            .is_some_and(|t| now.saturating_sub(t) < TOUCH_INTERVAL_MS)
        {
            return;
        }
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        if !self.writer_takes_hidden_sync() {
            return;
        }
        self.txn.touched_at = Some(now);
        self.out.send_backend_with(w, hidden::touch);
        if let Some(wb) = self.writer.as_mut() {
            for req in [
                Req::Parse,
                Req::Bind,
                Req::Execute,
                Req::Close,
                Req::Close,
                Req::Sync,
            ] {
                wb.resp.push(req, Who::Touch, 0);
            }
        }
    }

    /// Whether committed writes may be positioned by the probe (W-7: the writer's RFQs carry no
    /// LSN, and `lsn_probe` is not `off`).
    pub(super) fn probe_enabled(&self) -> bool {
        self.config.lsn_probe != LsnProbe::Off
            && self.writer.as_ref().is_some_and(|w| !w.ext.lsn)
            && !self.never_routed()
    }

    /// A replication connection (`replication=` in its startup): passed through, never routed,
    /// and no hidden statement of the engine's runs on it.
    pub(super) fn never_routed(&self) -> bool {
        self.startup.as_ref().is_some_and(|s| s.replication)
    }

    /// Whether the next committed write gets the probe: always with `lsn_probe = on` and for
    /// a client that has tokens reported with its RFQs (C-1); with `adaptive`, while the
    /// probes pay ([`ProbeCredit`](super::state::ProbeCredit)).
    pub(super) fn wants_probe(&self) -> bool {
        self.probe_enabled()
            && (self.config.lsn_probe == LsnProbe::On
                || self.startup.as_ref().is_some_and(|s| s.report_token)
                || self.probe_credit.due()
                || !self.writer_samples_arrive())
    }

    /// Whether the host's writer samples arrive (the last one was sent at most
    /// [`WRITER_SAMPLES_FRESH_MS`] ago): the adaptive rule may leave a write unprobed only then,
    /// for a writer sample is what positions it later. A host that feeds none (the Pgpool-II
    /// patch samples only its standbys) would otherwise keep such a session's reads on the
    /// primary for good — an examiner's finding, 2026-12-05; without samples `adaptive` probes
    /// every write, as `on` does.
    pub(super) fn writer_samples_arrive(&self) -> bool {
        self.engine
            .view_of(self.writer_group.as_deref())
            .writer_sample
            .is_some_and(|(_, sent)| self.now.saturating_sub(sent) <= WRITER_SAMPLES_FRESH_MS)
    }

    /// Sends the hidden probe and/or capture as one batch on the writer (W-7, S-5).
    pub(super) fn send_learning(&mut self, probe: bool, capture: bool) {
        if self.never_routed() || !self.writer_takes_hidden_sync() {
            return;
        }
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let conn = w.conn;
        // S-5: no hidden statement that can fail runs inside the client's transaction block —
        // nor while the engine is unsure whether one is open: its error would abort the
        // client's block. The probe calls a function (which can fail: EXECUTE revoked, a
        // cancel); the capture runs only outside blocks by its callers.
        let in_block = self.txn.active || self.writer_status != TxStatus::Idle;
        let probe = probe && !in_block;
        if !probe && !capture {
            return;
        }
        if probe {
            w.resp.push(Req::Steps(4), Who::Probe, 0);
            w.resp.push(Req::Execute, Who::Probe, 0);
        }
        if capture {
            w.resp.push(Req::Steps(4), Who::Capture, 0);
            w.resp.push(Req::Execute, Who::Capture, 0);
        }
        let sync_who = if capture { Who::Capture } else { Who::Probe };
        w.resp.push(Req::Sync, sync_who, 0);
        let names = &self.settings.custom_names;
        // S-4: while the session may hold an advisory lock, the capture asks the writer.
        let advisory = capture && self.hazards.has(Hazards::ADVISORY_LOCK);
        // The capture behind the writer's startup RFQ, with nothing of the client's run or in
        // flight, on a server where nothing runs SQL at login: no hazard kind to ask for.
        let login = capture && self.login_capture && self.units.is_empty();
        self.out.send_backend_with(conn, |o| {
            if probe {
                hidden::probe(o);
            }
            if capture {
                hidden::capture(o, names, advisory, login);
            }
            hidden::sync(o);
        });
        if probe {
            self.probe_lsn = Lsn::ZERO;
            self.probe_credit.sent();
            self.engine.stats().inc(Counter::ProbesSent);
        }
        if capture {
            self.hold_writer_group();
            // What this capture sees is the configuration of at least this epoch (S-5).
            self.settings.conf_epoch = self.writer_group.as_ref().map_or(0, |g| g.config_epoch());
            self.settings.known = Known::Capturing;
            self.settings.rules_at_capture = self.statements.rules();
            self.capture_rows.clear();
            self.capture_failed = false;
            self.capture_asked_advisory = advisory;
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
            && !self.writer_mid_batch()
        {
            self.send_learning(false, true);
        }
    }

    /// Copies the client bytes of the first `count` messages into `orig` and discards them from
    /// the client stream.
    pub(super) fn take_unit_bytes(&mut self, count: usize, fresh: Option<(u8, &[u8])>) {
        self.orig.clear();
        self.orig_msgs.clear();
        match fresh {
            None if count == self.queue.len() && self.copies_are_pending() => {
                self.take_whole_queue();
                return;
            }
            // A Query decided as it arrived (a plain read): its bytes are only in this input.
            Some((t, body)) if count == 1 && self.queue.len() == 1 => {
                if let Some((len, names)) = self
                    .queue
                    .front()
                    .filter(|m| m.copy.is_none())
                    .map(|m| (m.len, m.names))
                {
                    wire(t, body, &mut self.orig);
                    self.orig_msgs.push((0..self.orig.len(), names));
                    self.out.discard_client(len);
                    self.queue.clear();
                    self.pending.clear();
                    return;
                }
            }
            _ => {}
        }
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
                // Its bytes were in an earlier input only and nothing kept them: the unit would
                // go out without this message (`keep_if_waiting` keeps a waiting one's).
                _ => debug_assert!(false, "a unit's message with no bytes kept"),
            }
            let end = self.orig.len();
            self.orig_msgs.push((start..end, m.names));
            let len = m.len;
            self.out.discard_client(len);
            self.pop_head();
        }
    }

    /// [`Self::take_unit_bytes`] when the unit takes the whole queue and `pending` holds exactly
    /// its copies, in order: the buffers trade places instead of the bytes being copied
    /// (`pending` is emptied with the queue in any case). The same bytes and offsets as the
    /// copy, and the same client bytes discarded.
    #[inline(never)]
    fn take_whole_queue(&mut self) {
        std::mem::swap(&mut self.orig, &mut self.pending);
        let mut total = 0;
        for m in &self.queue {
            if let Some(r) = m.copy.clone() {
                self.orig_msgs.push((r, m.names));
            }
            total += m.len;
        }
        self.out.discard_client(total);
        self.queue.clear();
        self.pending.clear();
    }

    /// Whether `pending` is exactly the copies of the queued messages, one after the other
    /// from its start (every queued message has one, and nothing of a message already gone
    /// is left before them).
    fn copies_are_pending(&self) -> bool {
        if self.queue.front().is_none_or(|m| m.copy.is_none()) {
            // A Query decided as it arrived has no copy (its bytes are the input's).
            return false;
        }
        let mut at = 0;
        for m in &self.queue {
            match &m.copy {
                Some(r) if r.start == at => at = r.end,
                _ => return false,
            }
        }
        at == self.pending.len() && at > 0
    }
}

/// Whether a unit of `class` (a simple Query) or of these Executes (a batch) reads data: a
/// statement of kind `Read`, however it was routed (S-1a).
pub(super) fn reads_data(class: Option<&Classification>, execs: &[Option<Classification>]) -> bool {
    class
        .into_iter()
        .chain(execs.iter().flatten())
        .flat_map(|c| c.statements())
        .any(|s| s.kind == Kind::Read)
}

/// Whether `sql`, classified as `class`, prepares a statement (SQL `PREPARE`) and names one of
/// the engine's reserved statement names (W-7, S-5), read as the server reads a name. Only texts
/// with a `PREPARE` are read again.
fn prepares_a_reserved_name(class: &Classification, sql: &[u8]) -> bool {
    if !class.statements().iter().any(|s| s.kind == Kind::Prepare) {
        return false;
    }
    let Ok(text) = std::str::from_utf8(sql) else {
        return false;
    };
    let mut found = false;
    prepared_mentions(text, |m| {
        if let Mention::Name(n) = m {
            found |= same_name(&n, hidden::PROBE_NAME) || same_name(&n, hidden::CAPTURE_NAME);
        }
    });
    found
}
