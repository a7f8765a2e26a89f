//! Binding a read to a reader (P-4, R-2, P-7): choosing one or reusing the pin, deciding the
//! wait, acquiring the connection, and sending the unit's attempt to it — or to the writer when
//! no reader can take it.

use super::batch::Shape;
use super::hidden::{self, Hidden, Wait};
use super::response::{Req, Who};
use super::*;
use crate::classify::Kind;
use crate::cluster::readers::{ChoiceRequest, Waits};
use crate::cluster::stats::Counter;
use crate::cluster::WriterView;
use crate::config::{OnWaitTimeout, ReadFallback};
use crate::protocol::encode;

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
    /// Returns false when the unit waits (a batch that falls back to the writer waits for the
    /// check of a statement's row shape there, E-2).
    pub(super) fn start_reader_unit(
        &mut self,
        d: Decision,
        class: Option<Classification>,
        view: &WriterView,
        fresh: Option<(u8, &[u8])>,
        count: usize,
        batch: Option<Shape>,
    ) -> bool {
        // A batch (E-1) comes with the shape it was decided on; a simple Query without one.
        let kind = if batch.is_some() {
            UnitKind::Batch
        } else {
            UnitKind::Query
        };
        let in_txn = self.txn.active;
        if in_txn {
            self.engine.stats().inc(Counter::SplitPlanned);
        }
        match self.bind_reader(d, view, &[]) {
            Bound::Writer(fallback) => {
                if in_txn {
                    self.engine.stats().inc(Counter::SplitFellBack);
                }
                match batch {
                    Some(shape) => return self.start_writer_batch(fallback, count, shape),
                    None => self.start_writer_query(fallback, class, fresh),
                }
            }
            Bound::Reject(r) => {
                if let Some(shape) = batch {
                    self.keep_spare_execs(shape.execs);
                }
                self.reject_unit(kind, r, count);
            }
            Bound::Reader {
                decision: d,
                server,
                pinned,
            } => {
                if in_txn {
                    self.touch_writer();
                }
                let row_limit = batch.as_ref().map_or(0, |s| s.row_limit);
                let batch = batch.map(|s| s.execs);
                let ends_open = kind == UnitKind::Batch && self.batch_ends_open(count);
                self.take_unit_bytes(count, fresh);
                let attempt = match pinned {
                    Some(conn) => Attempt::Reader { conn, server },
                    None => Attempt::AwaitReader {
                        server,
                        since: self.now,
                    },
                };
                let id = self.push_unit(kind, d, class, attempt);
                self.keep_writer_alive();
                if let Some(u) = self.unit_mut(id) {
                    u.generation = view.generation;
                    if let Some(execs) = batch {
                        u.execs = execs;
                    }
                    u.open = ends_open;
                    // E-3: a Flush asked for the answers: they are not held, and the batch
                    // gives up its retry once one reached the client.
                    u.released = ends_open;
                    u.row_limit = if ends_open { 0 } else { row_limit };
                }
                match pinned {
                    Some(conn) => self.send_to_reader(id, conn, server, false, false),
                    None => self.acquire_reader(server),
                }
            }
        }
        true
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
        let reader_conf = self.engine.reader_config_epoch();
        let stamp = (profile_generation, self.settings.version(), reader_conf);
        if self
            .reader_startup
            .as_ref()
            .is_none_or(|c| c.stamp != stamp)
        {
            let s = self.startup.as_ref().expect("checked");
            let key = s.reader_key(profile_generation, reader_conf, &self.settings);
            let mut bytes = Vec::new();
            s.encode_for(Role::Reader, &mut bytes);
            let fresh = ReaderStartup { stamp, key, bytes };
            match &mut self.reader_startup {
                // A settings change reuses the box.
                Some(r) => **r = fresh,
                None => self.reader_startup = Some(Box::new(fresh)),
            }
        }
        self.out.acquire_reader(server);
    }

    /// The unit waiting for a reader connection.
    fn awaiting_reader(&self) -> Option<(u32, ServerId)> {
        self.awaiting_reader_since()
            .map(|(id, server, _)| (id, server))
    }

    /// [`Self::awaiting_reader`], with when the connection was asked for.
    fn awaiting_reader_since(&self) -> Option<(u32, ServerId, u64)> {
        self.units.iter().find_map(|u| match u.attempt {
            Attempt::AwaitReader { server, since } => Some((u.id, server, since)),
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
        if self.abandoned_acquire == Some(server) && self.awaiting_reader().is_none() {
            // F-1: asked for a statement the client cancelled; never used by this session.
            self.abandoned_acquire = None;
            self.engine.conns().forget(conn);
            self.out.close_backend(conn);
            return Ok(());
        }
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
            .unwrap_or_else(|| Box::new(Backend::new(conn, Some(server), ext, &self.config)));
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
        b.stale_plans = false;
        b.answered(self.now);
        // E-2: what the connection has prepared travels with it; a fresh one has nothing.
        let known = if fresh {
            self.engine.conns().forget(conn);
            None
        } else {
            let generation = self.classifier.catalogs().generation();
            self.engine.conns().take_at(conn, generation)
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
        let Some((_, server, since)) = self.awaiting_reader_since() else {
            if let Some(server) = self.abandoned_acquire {
                // F-1: the connection was asked for a statement the client cancelled (the
                // engine answered 57014): its failure is the reader's all the same, and the
                // session, which queued nothing behind the request, goes on. Refused, the
                // event left the request standing and the session answered nothing again
                // (an examiner's finding of 2026-12-07: a cancel while the standby's
                // postmaster was frozen, then `SELECT 1` unanswered for good). When it was
                // asked is not kept: the failure counts as one seen now.
                self.engine
                    .reader_connect_failed_since(server, None, self.now, starting_up);
                return self.reader_unavailable(false);
            }
            return Err(SessionError::UnexpectedEvent(
                "ReaderConnectFailed without AcquireReader",
            ));
        };
        self.engine
            .reader_connect_failed_since(server, Some(since), self.now, starting_up);
        self.reader_unavailable(false)
    }

    /// The host has no reader connection: the writer answers (P-4 never blocks).
    pub(super) fn reader_unavailable(&mut self, no_credentials: bool) -> Result<(), SessionError> {
        if self.abandoned_acquire.is_some() && self.awaiting_reader().is_none() {
            // F-1: the connection asked for a cancelled statement: nothing waits for it.
            self.abandoned_acquire = None;
            if no_credentials {
                self.readers_forbidden = true;
            }
            self.pump(None);
            return Ok(());
        }
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

    /// F-1: a unit the client cancelled before any server had it ends with the error a server
    /// sends for a cancelled statement, then its RFQ (or the failed block's, via the writer).
    pub(super) fn answer_cancelled(&mut self, id: u32) {
        let d = Decision {
            attempt: self.unit(id).map_or(0, |u| u.decision.attempt),
            ..Decision::primary(Reason::NoReaderConnection)
        };
        self.send_cancelled_error();
        if let Some(u) = self.unit_mut(id) {
            u.decision = d;
            u.attempt = Attempt::Local;
            u.errored = true;
        }
        self.end_with_error(id);
    }

    /// The ErrorResponse a server answers a cancelled statement with (57014), for the client.
    pub(super) fn send_cancelled_error(&mut self) {
        self.out.send_client_with(|o| {
            encode::server_error(
                o,
                b"57014",
                b"canceling statement due to user request",
                b"postgres.c",
                b"ProcessInterrupts",
            );
        });
    }

    /// Sends the unit's original client messages to the writer (a fallback or a retry).
    pub(super) fn send_orig_to_writer(&mut self, id: u32, reason: Reason) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        let Some(u) = self.unit(id) else {
            return;
        };
        let (kind, open, attempt) = (u.kind, u.open, u.decision.attempt);
        if kind == UnitKind::Batch && self.writer_check_first(None) {
            // E-2: the check of a statement's row shape on the writer goes first; the batch
            // follows its answer (`writer_check_message`).
            if let Some(u) = self.unit_mut(id) {
                u.attempt = Attempt::Writer;
                u.check_then = Some(reason);
            }
            return;
        }
        let d = Decision {
            attempt,
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
            u.set_failure_text(None);
        }
        match kind {
            UnitKind::Batch => {
                let orig = std::mem::take(&mut self.orig);
                let msgs = std::mem::take(&mut self.orig_msgs);
                for (r, names) in &msgs {
                    let execute = orig.get(r.start) == Some(&b'E');
                    self.flush_before_cancelled_execute(w, execute);
                    self.batch_msg_to_writer(id, w, &orig[r.clone()], *names);
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
                let reader_refused = self.unit(id).is_some_and(|u| u.reader_refused);
                let (may_write, pipelinable) = match self.unit(id).and_then(|u| u.class.as_ref()) {
                    Some(c) => (
                        reader_refused || self.unit_may_write(c),
                        !c.statements().iter().any(|s| s.kind == Kind::Copy),
                    ),
                    None => (true, false),
                };
                self.after_writer_send(id, may_write, pipelinable);
            }
        }
    }

    /// Sends the unit to the reader: the settings replay first when the connection is fresh
    /// (S-5: its own message, ending with the login check; the unit's messages follow only once
    /// it succeeded), then the unit behind its hidden statements.
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
        match self.backend_index(conn) {
            Some(i) if i > 0 => self
                .engine
                .readers()
                .begin_use_via(&mut self.readers[i - 1].reader_ref, server),
            _ => self.engine.readers().begin_use(server),
        }
        if self.txn.active && self.pin.is_none() {
            let view = self.writer_view();
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
        if fresh {
            // Every fresh connection: its login may differ from the writer's (S-5's login
            // check), whatever the session set since.
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
        let runs_code = self.unit(id).is_some_and(|u| {
            u.class
                .iter()
                .chain(u.execs.iter().flatten())
                .any(|c| c.effects().contains(crate::classify::Effects::RUNS_CODE))
        });
        // S-6: what the connection has prepared for other sessions is dropped before code the
        // engine cannot see into runs there (the connection is closed after the unit anyway).
        let deallocate = runs_code
            && self.backend_index(conn).is_some_and(|i| {
                let p = &mut self.backend_mut(i).prepared;
                let any = !p.complete || p.len() > 0;
                *p = crate::cluster::conns::ConnStatements::fresh();
                any
            });
        let h = Hidden {
            deallocate,
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
                for (r, names) in &msgs {
                    let execute = orig.get(r.start) == Some(&b'E');
                    self.flush_before_cancelled_execute(conn, execute);
                    self.batch_msg_to_reader(id, conn, &orig[r.clone()], *names);
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
}
