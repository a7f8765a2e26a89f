//! Deciding and routing a unit of client messages: collect (P-2), plan (P-3/P-5), execute (P-4),
//! retries (§6), REJECT, and the end of a statement.

use super::wrapper::{self, Hidden, Wait};
use super::*;

/// Where a reader-bound decision ended up after binding (P-4).
enum Bound {
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
        // Issue 11: a writer sample whose query was sent after the write was acknowledged bounds
        // the write from above: it positions the session's write.
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

    fn plan_input(
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

    /// P-6's "may have written" for a whole Query: COMMIT/ROLLBACK count only if the
    /// transaction may have written.
    fn unit_may_write(&self, class: &Classification) -> bool {
        class.statements().iter().any(|s| match s.kind {
            Kind::Commit { .. } | Kind::Rollback { .. } => self.txn.may_have_written,
            _ => s.may_write(),
        })
    }

    fn begin_options(class: &Classification) -> Option<Option<Isolation>> {
        class.statements().iter().rev().find_map(|s| match s.kind {
            Kind::Begin(o) => Some(o.isolation),
            _ => None,
        })
    }

    pub(super) fn start_query(&mut self, fresh: Option<(u8, &[u8])>) {
        let Some(head) = self.queue.front() else {
            return;
        };
        let MsgInfo::Query { class, why_not } = &head.info else {
            return;
        };
        let (class, why_not) = (class.clone(), *why_not);
        let view = self.collect();
        let stmt = match (why_not, &class) {
            (Some(r), _) => StatementView::not_safe(r),
            (None, Some(c)) => StatementView::of(c),
            (None, None) => StatementView::not_safe(Reason::Unparseable),
        };
        let may_write = class.as_ref().is_none_or(|c| self.unit_may_write(c));
        let d = if self.startup.as_ref().is_some_and(|s| s.replication) {
            Decision::passthrough(Reason::ReplicationConnection)
        } else {
            plan(&self.plan_input(&view, stmt, Protocol::Simple))
        };
        match d.outcome {
            Outcome::Passthrough | Outcome::ForcePrimary => {
                self.start_writer_unit_with(UnitKind::Query, d, class, may_write, fresh)
            }
            Outcome::Reject => self.reject_unit(UnitKind::Query, d, 1),
            Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit => {
                self.start_reader_unit(UnitKind::Query, d, class, &view, fresh, 1)
            }
        }
    }

    /// An extended-protocol batch: up to its Sync (maybe a reader) or Flush (the writer).
    /// Returns false when the batch is not complete yet.
    pub(super) fn start_extended(&mut self) -> bool {
        let mut end = None;
        let mut stopped_at_other = false;
        for (i, m) in self.queue.iter().enumerate() {
            if !m.info.is_extended() {
                stopped_at_other = true;
                break;
            }
            if matches!(m.info, MsgInfo::Sync | MsgInfo::Flush) {
                end = Some(i);
                break;
            }
        }
        let count = match end {
            Some(e) => e + 1,
            None if stopped_at_other => 0,
            None => return false,
        };
        let view = self.collect();
        // Self-contained: unnamed Parse of one replica-safe statement, unnamed Bind, Describe(s),
        // one unnamed Execute, Sync — all kept whole.
        let batch: Vec<&ClientMsg> = self.queue.iter().take(count).collect();
        let mut parse_class: Option<Classification> = None;
        let mut shape_ok = count > 0 && batch.iter().all(|m| m.copy.is_some());
        let (mut parses, mut binds, mut executes) = (0, 0, 0);
        let mut may_write = false;
        for m in &batch {
            match &m.info {
                MsgInfo::Parse { unnamed, class } => {
                    parses += 1;
                    shape_ok &= *unnamed;
                    match class {
                        Some(c) => {
                            may_write |= self.unit_may_write(c);
                            parse_class = Some(c.clone());
                        }
                        None => {
                            shape_ok = false;
                            may_write = true;
                        }
                    }
                }
                MsgInfo::Bind { unnamed } => {
                    binds += 1;
                    shape_ok &= *unnamed && parses == 1;
                }
                MsgInfo::Execute { unnamed } => {
                    executes += 1;
                    shape_ok &= *unnamed && binds == 1;
                }
                MsgInfo::Describe => {}
                MsgInfo::Sync => {}
                _ => shape_ok = false,
            }
        }
        if executes > 0 && parses == 0 {
            // Executing something prepared earlier: it may write.
            may_write = true;
        }
        let ends_with_sync = end.is_some_and(|e| matches!(self.queue[e].info, MsgInfo::Sync));
        let self_contained =
            shape_ok && ends_with_sync && parses == 1 && binds == 1 && executes == 1;
        let stmt = match (&parse_class, self_contained) {
            (Some(c), true) => StatementView::of(c),
            (Some(c), false) if !c.is_replica_safe() => StatementView::of(c),
            _ => StatementView::not_safe(Reason::ExtendedNotSelfContained),
        };
        let protocol = Protocol::Extended { self_contained };
        let mut d = plan(&self.plan_input(&view, stmt, protocol));
        if self.startup.as_ref().is_some_and(|s| s.replication) {
            d = Decision::passthrough(Reason::ReplicationConnection);
        }
        if count == 0 {
            // Extended messages followed by something else without Sync/Flush: the writer.
            d = Decision::primary(Reason::ExtendedNotSelfContained);
        }
        match d.outcome {
            Outcome::ReplicaWithWait | Outcome::ReplicaTxnSplit if self_contained => {
                self.start_reader_unit(UnitKind::Extended, d, parse_class, &view, None, count);
            }
            Outcome::Reject => self.reject_unit(UnitKind::Extended, d, count),
            _ => {
                if !d.outcome.is_reader() {
                    self.start_writer_unit(
                        UnitKind::Extended,
                        d,
                        parse_class,
                        may_write || !self_contained,
                    );
                } else {
                    self.start_writer_unit(
                        UnitKind::Extended,
                        Decision::primary(Reason::ExtendedNotSelfContained),
                        parse_class,
                        true,
                    );
                }
            }
        }
        true
    }

    fn record(&mut self, d: Decision) {
        self.engine.stats().record_decision(d.outcome, d.reason);
        self.out.decision(d);
    }

    fn new_current(
        &self,
        kind: UnitKind,
        d: Decision,
        class: Option<Classification>,
        may_write: bool,
        attempt: Attempt,
    ) -> Current {
        let begin = class.as_ref().and_then(Session::begin_options);
        Current {
            kind,
            decision: d,
            class,
            may_write,
            attempt,
            reader_retries: 0,
            excluded: Vec::new(),
            copy_in: false,
            extended_open: false,
            errored: false,
            generation: self.lsn.generation,
            sql: None,
            hidden: 0,
            begin,
            wait_statement: false,
        }
    }

    /// The text of Set/Reset statements must outlive the host's buffer: keep the unit's SQL.
    fn keep_sql_if_needed(
        &self,
        class: &Option<Classification>,
        fresh: Option<(u8, &[u8])>,
    ) -> Option<Vec<u8>> {
        let c = class.as_ref()?;
        let needed = c
            .statements()
            .iter()
            .any(|s| matches!(s.kind, Kind::Set { .. } | Kind::Reset { .. }));
        if !needed {
            return None;
        }
        let head = self.queue.front()?;
        let bytes: &[u8] = match (&head.copy, fresh) {
            (Some(c), _) => c.get(5..c.len().saturating_sub(1))?,
            (None, Some((_, body))) => body.get(..body.len().saturating_sub(1))?,
            _ => return None,
        };
        Some(bytes.to_vec())
    }

    pub(super) fn start_writer_unit(
        &mut self,
        kind: UnitKind,
        d: Decision,
        class: Option<Classification>,
        may_write: bool,
    ) {
        self.start_writer_unit_with(kind, d, class, may_write, None)
    }

    fn start_writer_unit_with(
        &mut self,
        kind: UnitKind,
        d: Decision,
        class: Option<Classification>,
        may_write: bool,
        fresh: Option<(u8, &[u8])>,
    ) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        self.record(d);
        let sql = if kind == UnitKind::Query {
            self.keep_sql_if_needed(&class, fresh)
        } else {
            None
        };
        let mut cur = self.new_current(kind, d, class, may_write, Attempt::Writer);
        cur.sql = sql;
        cur.extended_open = kind == UnitKind::Extended;
        self.current = Some(cur);
        if let Some(wb) = self.writer.as_mut() {
            wb.expect.push_back(Expect::new(ExpectKind::Statement));
        }
        if kind == UnitKind::Extended {
            self.note_protocol_statements();
        }
        match kind {
            // The pump forwards the batch's messages while `extended_open`.
            UnitKind::Extended => {}
            UnitKind::Query | UnitKind::FunctionCall => self.advance_head(Some(w)),
        }
    }

    /// Named prepared statements or portals live on the writer connection only.
    fn note_protocol_statements(&mut self) {
        let named = self
            .queue
            .iter()
            .take_while(|m| m.info.is_extended())
            .any(|m| match &m.info {
                MsgInfo::Parse { unnamed, .. }
                | MsgInfo::Bind { unnamed }
                | MsgInfo::Execute { unnamed } => !unnamed,
                _ => false,
            });
        if named {
            self.protocol_statements = true;
        }
    }

    /// Copies the client bytes of the first `count` messages into `orig` and discards them from
    /// the client stream.
    fn take_unit_bytes(&mut self, count: usize, fresh: Option<(u8, &[u8])>) {
        self.orig.clear();
        for i in 0..count {
            let Some(m) = self.queue.front() else { break };
            match (&m.copy, fresh) {
                (Some(c), _) => self.orig.extend_from_slice(c),
                (None, Some((t, body))) if i == 0 && self.queue.len() == 1 => {
                    wire(t, body, &mut self.orig)
                }
                _ => {}
            }
            let len = m.len;
            self.out.discard_client(len);
            self.pop_head();
        }
    }

    fn start_reader_unit(
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
        let may_write = false;
        match self.bind_reader(d, view, &[]) {
            Bound::Writer(fallback) => {
                if in_txn {
                    self.engine.stats().inc(Counter::SplitFellBack);
                }
                match kind {
                    UnitKind::Extended => self.start_writer_unit(kind, fallback, class, may_write),
                    _ => self.start_writer_unit_with(kind, fallback, class, may_write, fresh),
                }
            }
            Bound::Reject(r) => self.reject_unit(kind, r, count),
            Bound::Reader {
                decision: d,
                server,
                pinned,
            } => {
                self.take_unit_bytes(count, fresh);
                let attempt = match pinned {
                    Some(conn) => Attempt::Reader { conn, server },
                    None => Attempt::AwaitReader { server },
                };
                let mut cur = self.new_current(kind, d, class, may_write, attempt);
                cur.generation = view.generation;
                self.current = Some(cur);
                match pinned {
                    Some(conn) => self.send_to_reader(conn, server, false, false),
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
    fn bind_reader(&mut self, mut d: Decision, view: &WriterView, exclude: &[ServerId]) -> Bound {
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
                    let caught_up = target.is_zero()
                        || (pin.replay >= target
                            && pin.generation == view.generation
                            && pin.profile_generation == self.engine.profile_generation()
                            && pin.config_generation == self.config_generation);
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

    /// Whether a read may wait for its target on `server` (W-7): awide's bounded wait, or stock
    /// PostgreSQL 19's `WAIT FOR LSN`; never polardb's unbounded one; never a server that refused.
    fn can_wait_on(&self, dialect: ServerDialect, server: ServerId) -> bool {
        if self.engine.waits_unsupported(server) {
            return false;
        }
        match dialect {
            ServerDialect::Awide => true,
            ServerDialect::Stock => self
                .engine
                .server_version(server)
                .is_some_and(|v| v >= 190_000),
            ServerDialect::PolarDb => false,
        }
    }

    fn acquire_reader(&mut self, server: ServerId) {
        if self.startup.is_none() {
            return;
        }
        // The key and the startup message change only with the profile or the settings:
        // computed once, then reused (no allocation per statement).
        let profile_generation = self.engine.profile_generation();
        let stamp = (profile_generation, self.settings.version());
        if self.reader_startup.as_ref().is_none_or(|c| c.0 != stamp) {
            let s = self.startup.as_ref().expect("checked");
            let key = s.reader_key(profile_generation, &self.settings);
            let mut bytes = Vec::new();
            s.encode_for(Role::Reader, &mut bytes);
            self.reader_startup = Some((stamp, key, bytes));
        }
        let (_, key, _) = self.reader_startup.as_ref().expect("just set");
        self.out.acquire_reader(server, *key);
    }

    /// The host attached a reader connection for the current statement.
    pub(super) fn reader_attached(
        &mut self,
        conn: ConnId,
        server: ServerId,
        fresh: bool,
        needs_reset: bool,
    ) -> Result<(), SessionError> {
        match self.current.as_ref().map(|c| c.attempt) {
            Some(Attempt::AwaitReader { server: s }) if s == server => {}
            _ => {
                return Err(SessionError::UnexpectedEvent(
                    "ReaderAttached without a matching AcquireReader",
                ))
            }
        }
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
        let mut b = self.spare_backends.pop().unwrap_or_else(|| Backend {
            conn,
            server: None,
            ext,
            framer: Framer::new(self.config.limits),
            expect: VecDeque::new(),
            streaming: None,
            held_fwd: 0,
            partial_out: false,
            clean_on_success: false,
            settings_pending: false,
            dirty: false,
        });
        b.conn = conn;
        b.server = Some(server);
        b.ext = ext;
        b.expect.clear();
        b.streaming = None;
        b.held_fwd = 0;
        b.partial_out = false;
        b.clean_on_success = false;
        b.settings_pending = false;
        b.dirty = needs_reset;
        if !b.framer.at_boundary() {
            b.framer = Framer::new(self.config.limits);
        }
        self.readers.push(b);
        self.engine.stats().inc(if fresh {
            Counter::PoolMisses
        } else {
            Counter::PoolHits
        });
        self.send_to_reader(conn, server, fresh, needs_reset);
        Ok(())
    }

    /// The host has no reader connection: the writer answers (P-4 never blocks).
    pub(super) fn reader_unavailable(&mut self, no_credentials: bool) -> Result<(), SessionError> {
        let Some(Attempt::AwaitReader { .. }) = self.current.as_ref().map(|c| c.attempt) else {
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
        self.send_orig_to_writer(reason);
        Ok(())
    }

    /// Sends the client's original message(s) to the writer (a fallback or a retry).
    fn send_orig_to_writer(&mut self, reason: Reason) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        let attempt = self.current.as_ref().map_or(0, |c| c.decision.attempt);
        let d = Decision {
            attempt,
            ..Decision::primary(reason)
        };
        self.record(d);
        self.out.send_backend(w, &self.orig);
        if let Some(c) = self.current.as_mut() {
            c.decision = d;
            c.attempt = Attempt::Writer;
            c.hidden = 0;
        }
        if let Some(wb) = self.writer.as_mut() {
            wb.expect.push_back(Expect::new(ExpectKind::Statement));
        }
    }

    /// Builds the statement for the reader (hidden statements + the client's bytes) and sends it.
    pub(super) fn send_to_reader(
        &mut self,
        conn: ConnId,
        server: ServerId,
        fresh: bool,
        needs_reset: bool,
    ) {
        let Some(cur) = self.current.as_ref() else {
            return;
        };
        let d = cur.decision;
        let kind = cur.kind;
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
        let hidden_settings = fresh && !self.settings.is_empty();
        if reset {
            self.engine.stats().inc(Counter::XidResets);
        }
        let stats = self.engine.stats();
        if d.wait {
            stats.inc(Counter::WaitsSent);
        }
        if d.import {
            stats.inc(Counter::SplitImports);
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
        // Built straight into the action's bytes: the client's statement is copied once (into
        // `orig`, kept for a retry) and once here.
        let hidden = Hidden {
            reset,
            settings: hidden_settings.then_some(&self.settings),
            import: d.import.then_some(self.txn.xids.as_str()),
            wait,
        };
        let orig = &self.orig;
        let mut count = 0;
        self.out.send_backend_with(conn, |o| {
            count = match kind {
                UnitKind::Query => wrapper::build_query(o, &hidden, orig),
                _ => {
                    let n = wrapper::build_hidden_query(o, &hidden);
                    o.extend_from_slice(orig);
                    n
                }
            };
        });
        let import_persists = d.import && dialect == ServerDialect::Awide;
        if let Some(i) = self.backend_index(conn) {
            let b = self.backend_mut(i);
            let mut e = Expect::new(ExpectKind::Statement);
            e.hidden_cc = count;
            e.hidden_rfq = u8::from(kind == UnitKind::Extended && count > 0);
            e.hold = true;
            b.expect.push_back(e);
            // W-6: an error anywhere in the Query rolls back its SETs, so a reset or a settings
            // replay only counts once the Query succeeded; an import counts at once.
            if import_persists {
                b.dirty = true;
            }
            b.clean_on_success = reset && !import_persists;
            b.settings_pending = hidden_settings;
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
        if let Some(c) = self.current.as_mut() {
            c.attempt = Attempt::Reader { conn, server };
            c.hidden = count;
            c.wait_statement = wait_statement;
        }
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
        let mut cur = self.new_current(kind, d, None, false, Attempt::Local);
        cur.errored = true;
        self.current = Some(cur);
        self.end_with_error();
    }

    /// After an error reached the client: inside a transaction, fail the writer's transaction
    /// (F-3) and let its RFQ answer; outside, answer with the writer's status now.
    pub(super) fn end_with_error(&mut self) {
        if self.txn.active && !self.txn.failed {
            self.abort_writer();
        } else {
            let status = self.writer_status;
            self.client_rfq(status);
            self.finish_unit();
        }
    }

    /// F-3: a hidden statement that fails, so the writer's transaction is aborted as PostgreSQL
    /// would abort it after an error. Its error is swallowed; its RFQ (`E`) reaches the client.
    pub(super) fn abort_writer(&mut self) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            self.finish_unit();
            return;
        };
        self.out.send_backend_with(w, |o| {
            encode::query(o, &[wrapper::ABORT_STATEMENT]);
        });
        if let Some(wb) = self.writer.as_mut() {
            wb.expect.push_back(Expect::new(ExpectKind::Abort));
        }
        if let Some(c) = self.current.as_mut() {
            c.attempt = Attempt::Local;
        }
    }

    /// A standard RFQ for the client with the writer's status (P-8), carrying the session's
    /// target when the client asked for LSNs.
    pub(super) fn client_rfq(&mut self, status: TxStatus) {
        if !self.held_writer.is_empty() {
            let held = std::mem::take(&mut self.held_writer);
            self.out.send_client(&held);
        }
        if self.startup.as_ref().is_some_and(|s| s.client_wants_lsn) {
            let m = encode::ready_for_query_with_lsn(status, self.lsn.target());
            self.out.send_client(&m);
        } else {
            self.out.send_client(&encode::ready_for_query(status));
        }
    }

    /// The statement is over: next one.
    pub(super) fn finish_unit(&mut self) {
        self.current = None;
        let pinned = self.hazards.any() || self.protocol_statements;
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
        // A pinned reader still answering the current statement is released when it is done.
        let busy = matches!(self.current.as_ref().map(|c| c.attempt), Some(Attempt::Reader { conn, .. }) if conn == pin.conn);
        if busy {
            return;
        }
        self.hand_back(pin.conn, lost);
    }

    /// Carries out a failure recovery decided when the reader's answer ended (RFQ) or broke.
    pub(super) fn recover(
        &mut self,
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
                let (d, excluded) = match self.current.as_mut() {
                    Some(c) => {
                        c.reader_retries += 1;
                        if let Attempt::Reader { server, .. } | Attempt::AwaitReader { server } =
                            c.attempt
                        {
                            c.excluded.push(server);
                        }
                        let mut d = c.decision;
                        d.attempt += 1;
                        d.reason = Reason::RetryOtherReader;
                        d.wait = false;
                        (d, c.excluded.clone())
                    }
                    None => return,
                };
                // The pin (if any) is gone with the failure; choose afresh.
                self.pin = None;
                match self.bind_reader(d, &view, &excluded) {
                    Bound::Reader {
                        decision, server, ..
                    } => {
                        if let Some(c) = self.current.as_mut() {
                            c.attempt = Attempt::AwaitReader { server };
                            c.decision = Decision {
                                reason: Reason::RetryOtherReader,
                                ..decision
                            };
                        }
                        self.acquire_reader(server);
                    }
                    Bound::Writer(_) | Bound::Reject(_) => {
                        self.send_orig_to_writer(Reason::RetryPrimaryAfterLoss);
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
                if let Some(c) = self.current.as_mut() {
                    c.decision.attempt += 1;
                }
                self.send_orig_to_writer(reason);
            }
            Recovery::ForwardOriginal => {
                // The error already went to the client.
                stats.inc(Counter::FailuresForwarded);
                self.flush_held();
                if let Some(c) = self.current.as_mut() {
                    c.errored = true;
                }
                self.end_with_error();
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
                if let Some(c) = self.current.as_mut() {
                    c.errored = true;
                }
                self.end_with_error();
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
