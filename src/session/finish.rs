//! The end of a unit: REJECT, engine errors, the client's ReadyForQuery, retiring backends and
//! pins, and recovery from a reader's failure (§6, F-3).

use super::bind::Bound;
use super::hidden;
use super::response::{Req, Who};
use super::*;
use crate::cluster::stats::Counter;
use crate::protocol::encode;

impl Session {
    /// REJECT: the engine answers with a 55000 error; nothing runs (inside a transaction the
    /// writer's transaction is failed too, F-3).
    pub(super) fn reject_unit(&mut self, kind: UnitKind, d: Decision, count: usize) {
        self.record(d);
        self.engine.stats().inc(Counter::Rejects);
        // A batch routed at a Flush before its Sync (E-1): like a server after an error, the
        // engine answers the Sync when it comes, not now.
        let open = kind == UnitKind::Batch && self.batch_ends_open(count);
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
            u.open = open;
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
        self.out.send_backend_with(w, hidden::abort);
        if let Some(wb) = self.writer.as_mut() {
            for req in [Req::Parse, Req::Bind, Req::Close, Req::Execute, Req::Sync] {
                wb.resp.push(req, Who::Abort, id);
            }
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
        if let Some(pos) = self.units.position(id) {
            if let Some(u) = self.units.remove(pos) {
                self.keep_spare_execs(u.execs);
            }
        }
        self.update_writer_pin();
        self.pump(None);
    }

    /// Tells the host whether the session's writer connection holds state a reader cannot have
    /// (S-4), when that changed.
    pub(super) fn update_writer_pin(&mut self) {
        let pinned = self.hazards.any() || self.statements.any_on_writer();
        if pinned != self.pinned_writer {
            self.pinned_writer = pinned;
            self.out.pin_writer(pinned);
        }
    }

    /// Keeps a finished batch's Execute list (emptied; a small one only) for the next batch.
    pub(super) fn keep_spare_execs(&mut self, mut execs: Vec<Option<Classification>>) {
        if execs.capacity() > 0 && execs.capacity() <= 16 && self.spare_execs.capacity() == 0 {
            execs.clear();
            self.spare_execs = execs;
        }
    }

    /// The spare Execute list (empty), to fill for a new batch.
    pub(super) fn take_spare_execs(&mut self) -> Vec<Option<Classification>> {
        let mut v = std::mem::take(&mut self.spare_execs);
        v.clear();
        v
    }

    /// Keeps a released reader backend's buffers for the next attach.
    pub(super) fn retire_backend(&mut self, b: Box<Backend>) {
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
        failure_text: Option<Box<str>>,
    ) {
        // F-2: what the writer runs again after a reader's error may be a write (P-6).
        if class == FailureClass::ReusableError {
            if let Some(u) = self.unit_mut(id) {
                u.reader_refused = true;
            }
        }
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
            // What the failed attempt's answers taught of its statements' shapes was never
            // shown: the retry's answers teach it (E-2).
            self.statements.forget_shapes_of(id);
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
                        u.reader_retries = u.reader_retries.saturating_add(1);
                        if let Attempt::Reader { server, .. }
                        | Attempt::AwaitReader { server, .. } = u.attempt
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
                        let now = self.now;
                        if let Some(u) = self.unit_mut(id) {
                            u.attempt = Attempt::AwaitReader { server, since: now };
                            u.hidden_sync = false;
                            u.decision = Decision {
                                reason: Reason::RetryOtherReader,
                                ..decision
                            };
                            u.result_started = false;
                            u.saw_error = false;
                            u.failure = None;
                            u.set_failure_text(None);
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
                let detail = failure_text.as_deref().unwrap_or_default();
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
            // Held bytes the host was just told to discard are relayed instead of copied.
            let relayed = match self.held_tail.take() {
                Some((conn, mark)) => self.out.forward_discarded_tail(conn, mark, self.held.len()),
                None => false,
            };
            if !relayed {
                let held = std::mem::take(&mut self.held);
                self.out.send_client(&held);
                self.held = held;
            }
            self.held.clear();
        }
    }
}
