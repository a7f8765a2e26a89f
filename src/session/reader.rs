//! A reader's answers: the client's part is forwarded — or held until its result begins, so a
//! failure before then can still be retried (F-3) — everything hidden is swallowed, failures
//! are classified and recovered from (F-1…F-3), and each ReadyForQuery tells how far the reader
//! has replayed (P-6).

use super::backend::Disp;
use super::response::{Answer, Kind as AKind, Req, Unexpected, Who};
use super::*;
use crate::cluster::stats::Counter;
use crate::policy::ErrorFacts;
use crate::protocol::backend::{BackendMessage, ErrorFields};
use crate::protocol::frontend::FrontendMessage;
use crate::protocol::{tag, LsnField, Rfq};

/// The WARNING a backend sends just before its server closes the connection under it
/// (PostgreSQL's `quickdie`): an immediate shutdown (57P01) or a crash restart (57P02). No
/// ErrorResponse follows, only the closed connection. Told by its routine too: user code can
/// raise a WARNING with either code (`RAISE WARNING … USING ERRCODE = '57P01'`), and that one is
/// the statement's, for the client (an examiner's finding of 2026-12-07).
pub(super) fn is_shutdown_warning(f: &ErrorFields<'_>) -> bool {
    f.severity() == Some(b"WARNING")
        && matches!(f.code(), Some(b"57P01" | b"57P02"))
        && f.routine() == Some(b"quickdie")
}

impl Session {
    pub(super) fn reader_message(
        &mut self,
        conn: ConnId,
        t: u8,
        body: &[u8],
        msg: BackendMessage<'_>,
        answer: Result<Answer, Unexpected>,
    ) {
        let fatal = matches!(msg, BackendMessage::ErrorResponse(f) if f.is_fatal());
        let a = match answer {
            Ok(a) if a.unit == 0 || self.unit(a.unit).is_some() => a,
            _ => {
                // An idle (pinned) reader, or an answer to nothing: nothing it says reaches the
                // client. A FATAL error means the server closes it.
                self.apply_disp(conn, t, body, Disp::Discard);
                if fatal {
                    self.out.close_backend(conn);
                    self.engine.conns().forget(conn);
                    self.reader_lost(conn);
                } else if !matches!(
                    msg,
                    BackendMessage::NoticeResponse(_)
                        | BackendMessage::ParameterStatus { .. }
                        | BackendMessage::NotificationResponse { .. }
                ) {
                    let _ = self.backend_protocol_error(
                        conn,
                        ProtocolError::UnexpectedTag {
                            tag: t,
                            side: "server",
                        },
                    );
                }
                return;
            }
        };
        let id = a.unit;
        match msg {
            BackendMessage::ParameterStatus { .. }
            | BackendMessage::NotificationResponse { .. } => {
                // P-8: the client sees the writer's session, never a reader's.
                self.apply_disp(conn, t, body, Disp::Discard);
            }
            BackendMessage::ReadyForQuery(rfq) => {
                let done = !self
                    .backend_index(conn)
                    .is_some_and(|i| self.backend(i).resp.has_unit(id));
                // The client's RFQ is the reader's own when its bytes are the ones the engine
                // would send (P-8): relayed instead of discarded and built again.
                let relay = a.who == Who::Client && done && self.rfq_relayable(id, body);
                let d = if relay { Disp::Forward } else { Disp::Discard };
                self.apply_disp(conn, t, body, d);
                if a.who == Who::Settings {
                    self.replay_done(conn, id);
                } else if done {
                    // A batch closed by the engine's own Sync gets no RFQ for the client (it
                    // sent no Sync).
                    self.reader_unit_rfq(conn, id, rfq, a.who == Who::Client && !relay);
                }
            }
            BackendMessage::ErrorResponse(f) => {
                let extended = !matches!(
                    a.req,
                    Some(Req::Query { .. } | Req::Sync | Req::Startup | Req::FunctionCall) | None
                );
                if let (Some(i), AKind::Error { skipped, .. }, true) =
                    (self.backend_index(conn), a.kind, extended)
                {
                    if a.req == Some(Req::Parse) {
                        self.parse_failed(i, id, skipped);
                    } else {
                        self.parses_skipped(i, id);
                    }
                }
                self.reader_error(conn, id, a, t, body, f);
            }
            BackendMessage::NoticeResponse(f) => {
                let d = if !a.who.is_client() || self.unit_failed(id) || is_shutdown_warning(&f) {
                    // A shutdown warning is the reader's, not the statement's: the primary alone
                    // never sends it, and the lost connection it announces is recovered from as
                    // any other (F-2) — forwarded, it would count as a result that reached the
                    // client and forbid the retry (F-3, P-8).
                    Disp::Discard
                } else {
                    if policy::is_wait_timeout_marker(f.detail(), f.routine()) {
                        // W-5: a best-effort timeout; stale rows follow, the client is told once.
                        self.engine.stats().inc(Counter::BestEffortWarnings);
                    }
                    self.client_part_disp(id, body.len() + 5)
                };
                self.apply_disp(conn, t, body, d);
            }
            _ => {
                if a.req == Some(Req::Parse) && a.kind == AKind::Done {
                    if let Some(i) = self.backend_index(conn) {
                        super::statements::pop_parse(&mut self.backend_mut(i).parses);
                    }
                }
                if !a.who.is_client() || self.unit_failed(id) {
                    self.apply_disp(conn, t, body, Disp::Discard);
                    return;
                }
                if a.req == Some(Req::Execute)
                    && self.unit(id).is_some_and(|u| u.row_limit > 0)
                    && self.row_limited_answer(conn, id, t, body)
                {
                    return;
                }
                if a.result_begins {
                    self.result_begins(id);
                }
                let d = self.client_part_disp(id, body.len() + 5);
                self.apply_disp(conn, t, body, d);
            }
        }
    }

    /// E-4: an answer to a reader attempt's held row-limited Execute, the first of a batch
    /// inside a transaction block (`Shape::row_limit`). On the primary that portal outlives the
    /// batch: a reader's does not, so the attempt stands only if nothing of the portal had to
    /// survive. Its rows are held (nothing has reached the client) until it ends:
    /// - CommandComplete (or EmptyQueryResponse): the portal ran to completion within its limit
    ///   and is exhausted, as one run without a limit is: the held answers and the completion
    ///   go to the client;
    /// - PortalSuspended with a limit of 1: forwarded as well. PostgreSQL suspends a portal
    ///   whose limit equals its rows even when no row remains (the executor stops at the
    ///   limit), so every point read of asyncpg's `fetchrow`/`fetchval` (and pgjdbc's
    ///   `setMaxRows(1)`) ends so. Such a client sends Bind/Execute/Sync and never runs the
    ///   unnamed portal again (the next Bind or simple Query of the session replaces it); one
    ///   that did, in a later batch, would not find it (README, E-4);
    /// - PortalSuspended with a larger limit (rows remain, as a fetch size asks), or rows past
    ///   what may be held (`MAX_HELD`): the attempt is abandoned, the rest of its answer
    ///   swallowed, and the batch runs again on the writer at the reader's RFQ, where the
    ///   portal survives — the client sees only the writer's answers (F-2's retry).
    ///
    /// Returns whether the message was dealt with here.
    fn row_limited_answer(&mut self, conn: ConnId, id: u32, t: u8, body: &[u8]) -> bool {
        let limit = self.unit(id).map_or(0, |u| u.row_limit);
        match t {
            tag::DATA_ROW if self.held.len() + body.len() + 5 <= MAX_HELD => {
                self.apply_disp(conn, t, body, Disp::Hold);
                true
            }
            tag::PORTAL_SUSPENDED if limit == 1 => {
                self.row_limited_ended(id);
                false
            }
            tag::DATA_ROW | tag::PORTAL_SUSPENDED => {
                self.row_limited_abandoned(id);
                self.apply_disp(conn, t, body, Disp::Discard);
                true
            }
            _ => {
                self.row_limited_ended(id);
                false
            }
        }
    }

    /// E-4: the held row-limited Execute ended on the reader: its result begins, the held
    /// answers go first.
    fn row_limited_ended(&mut self, id: u32) {
        if let Some(u) = self.unit_mut(id) {
            u.row_limit = 0;
        }
        self.result_begins(id);
    }

    /// E-4: the held row-limited Execute's portal would have to outlive the batch (or its
    /// rows outgrew what may be held): nothing more of this attempt reaches the client, and
    /// the batch runs on the writer once the reader's RFQ arrives.
    pub(super) fn row_limited_abandoned(&mut self, id: u32) {
        self.abandon_attempt(id, Reason::BatchRowLimitedInTxn);
    }

    /// Unit `id`'s reader attempt is abandoned, not failed: nothing more of it reaches the
    /// client, what was held is dropped, and the batch runs on the writer once the reader's
    /// RFQ arrives (`row_limited_on_writer`), for `why` — E-4's portal that must outlive its
    /// batch, or an answer that outgrew what may be held before its result began (F-3: held so
    /// that a failure could still be retried; forwarded instead, a standby fault after 64 KiB
    /// of notices became an error the primary alone never gives — an examiner's finding of
    /// 2026-12-07).
    pub(super) fn abandon_attempt(&mut self, id: u32, why: Reason) {
        if let Some(u) = self.unit_mut(id) {
            // Negative: abandoned (-1 for E-4's portal, -2 for an answer held too long).
            u.row_limit = if why == Reason::BatchRowLimitedInTxn {
                -1
            } else {
                -2
            };
            u.failure = Some((FailureClass::ReusableError, Recovery::RetryWriter));
            u.set_failure_text(Some(
                if why == Reason::BatchRowLimitedInTxn {
                    "a row-limited Execute's portal must outlive its batch"
                } else {
                    "the reader's answer outgrew what is held before its result"
                }
                .into(),
            ));
        }
    }

    /// E-4: the batch of an abandoned row-limited attempt runs again on the writer. Not a
    /// failure of the reader (F-2/P-3 step 3 do not apply): the transaction's later reads may
    /// still split, and the reader stays pinned.
    fn row_limited_on_writer(&mut self, id: u32) {
        self.statements.forget_shapes_of(id);
        self.held.clear();
        self.held_tail = None;
        let mut why = Reason::BatchRowLimitedInTxn;
        if let Some(u) = self.unit_mut(id) {
            u.decision.attempt += 1;
            if u.row_limit == -2 {
                why = Reason::ReaderSaidTooMuch;
            }
            u.row_limit = 0;
        }
        self.send_orig_to_writer(id, why);
    }

    /// Whether a reader's RFQ ending unit `id` is, byte for byte, the RFQ `client_rfq` would
    /// send in its place, with nothing to go before it: a standard RFQ with the writer's status,
    /// the unit not failed (it ends as a success), nothing held, and a client that asked for
    /// neither LSNs nor token reports on its RFQs.
    fn rfq_relayable(&self, id: u32, body: &[u8]) -> bool {
        body == [self.writer_status.byte()]
            && self.unit(id).is_some_and(|u| u.failure.is_none())
            && self.held.is_empty()
            && self.held_writer.is_empty()
            && !self
                .startup
                .as_ref()
                .is_some_and(|s| s.client_wants_lsn || s.report_token)
    }

    fn unit_failed(&self, id: u32) -> bool {
        self.unit(id).is_some_and(|u| u.failure.is_some())
    }

    /// A client-visible part of a reader unit's answer, `n` bytes: held until the result
    /// begins (unless a Flush released the batch, E-3), then forwarded.
    ///
    /// What would take the held bytes past `MAX_HELD` is never dropped: the result begins with
    /// it — what was held goes to the client, then it — and the attempt can no longer be tried
    /// again elsewhere (F-3), as once a row reached the client. (An examiner's finding of
    /// 2026-12-07: a standby read raising 100 notices of 1 kB before its row; the client got
    /// 57, with no error.) A held row-limited Execute (E-4) is abandoned instead and runs again
    /// on the writer.
    fn client_part_disp(&mut self, id: u32, n: usize) -> Disp {
        let over = self.held.len() + n > MAX_HELD;
        let Some(u) = self.unit_mut(id) else {
            return Disp::Discard;
        };
        if u.released || u.result_started {
            u.forwarded = true;
            return Disp::Forward;
        }
        if !over {
            return Disp::Hold;
        }
        let why = if u.row_limit > 0 {
            Reason::BatchRowLimitedInTxn
        } else {
            Reason::ReaderSaidTooMuch
        };
        self.abandon_attempt(id, why);
        Disp::Discard
    }

    /// An answer the engine gives itself in its place in a reader's stream (E-2).
    pub(super) fn reader_local_answer(&mut self, id: u32, bytes: &[u8]) {
        if self.unit_failed(id) {
            return;
        }
        match self.client_part_disp(id, bytes.len()) {
            Disp::Hold => {
                self.held.extend_from_slice(bytes);
                // Bytes of the engine's own, in no backend's stream.
                self.held_tail = None;
            }
            Disp::Discard => {}
            _ => self.out.send_client(bytes),
        }
    }

    /// A reader's error `body` with the engine's statement names replaced by the client's
    /// (E-2), preferring the names the unit's own messages use — first the one of the message
    /// that failed, when that is a Bind or a statement Describe (one text under two names of
    /// the batch is one statement on the reader: the name is the failing message's, as on the
    /// primary); `None`: it names none.
    fn client_names_in_error(&self, a: Answer, body: &[u8]) -> Option<Vec<u8>> {
        let prefix = super::statements::ENGINE_STATEMENT_PREFIX;
        if !body.windows(prefix.len()).any(|w| w == prefix) {
            return None;
        }
        let mut used: Vec<&[u8]> = Vec::new();
        for (r, names) in &self.orig_msgs {
            let Some(b) = self.orig.get(r.clone()).filter(|b| b.len() >= 5) else {
                continue;
            };
            match FrontendMessage::reread(b[0], &b[5..], *names) {
                Ok(FrontendMessage::Bind { statement, .. }) => used.push(statement),
                Ok(FrontendMessage::Describe { kind: b'S', name }) => used.push(name),
                _ => {}
            }
        }
        if let (Some(Req::Bind | Req::DescribeStatement), AKind::Error { named, .. }) =
            (a.req, a.kind)
        {
            // The failing message is followed by those the server skipped.
            if let Some(k) = used.len().checked_sub(usize::from(named) + 1) {
                let failed = used.remove(k);
                used.insert(0, failed);
            }
        }
        self.statements.client_names_in(body, &used)
    }

    fn reader_error(
        &mut self,
        conn: ConnId,
        id: u32,
        a: Answer,
        t: u8,
        body: &[u8],
        f: ErrorFields<'_>,
    ) {
        let in_hidden = !a.who.is_client();
        let Some(u) = self.unit_mut(id) else {
            self.apply_disp(conn, t, body, Disp::Discard);
            return;
        };
        u.saw_error = true;
        if a.who == Who::Sync && u.failure.is_none() {
            // The engine's own Sync closing a batch that had all its answers (E-1) failed — a
            // FATAL (the server is shutting down, 57P01): nothing of the client's is lost. The
            // connection is gone; the client's next message is routed anew.
            self.apply_disp(conn, t, body, Disp::Discard);
            if f.is_fatal() {
                self.out.close_backend(conn);
                self.engine.conns().forget(conn);
                self.reader_lost(conn);
            }
            return;
        }
        if u.failure.is_some() {
            // Already failed: the rest of this answer is swallowed.
            self.apply_disp(conn, t, body, Disp::Discard);
            if f.is_fatal() {
                self.out.close_backend(conn);
                self.engine.conns().forget(conn);
                self.reader_lost(conn);
            }
            return;
        }
        let wait_statement = u.wait_statement;
        let sent_wait = u.decision.wait;
        let cancel_forwarded = self
            .backend_index(conn)
            .is_some_and(|i| i > 0 && self.backend(i).cancelled);
        let facts = ErrorFacts {
            sqlstate: f.code().unwrap_or(b""),
            fatal: f.is_fatal(),
            detail: f.detail(),
            routine: f.routine(),
            in_hidden,
            hidden_wait_statement: wait_statement,
            cancel_forwarded,
        };
        let class = policy::classify_error(&facts);
        if facts.sqlstate == b"0A000" {
            // E-2: most likely "cached plan must not change result type" of a statement the
            // engine prepared on this pooled connection before a DDL; closing the connection
            // is what forgets it.
            if let Some(i) = self.backend_index(conn).filter(|&i| i > 0) {
                self.backend_mut(i).stale_plans = true;
            }
        }
        if class == FailureClass::WaitTimeout {
            self.engine.stats().inc(Counter::WaitTimeouts);
        }
        // A hidden wait statement the server refused: it does not support waits (W-7, F-1).
        if a.who == Who::Wait && class == FailureClass::ReusableError && sent_wait {
            if let Some(s) = self
                .backend_index(conn)
                .and_then(|i| self.backend(i).server)
            {
                if self.engine.mark_waits_unsupported(s) {
                    self.engine.stats().inc(Counter::WaitsUnsupported);
                }
            }
        }
        let progress = self.progress(id, in_hidden);
        let rec = policy::decide(class, &progress, &self.config);
        let text = format!(
            "replica error {}: {}",
            lossy(facts.sqlstate),
            lossy(f.message().unwrap_or(b""))
        );
        let open = self.unit(id).is_some_and(|u| u.open);
        if let Some(u) = self.unit_mut(id) {
            u.failure = Some((class, rec));
            u.set_failure_text(Some(text.into_boxed_str()));
        }
        if rec == Recovery::ForwardOriginal {
            self.flush_held();
            if in_hidden {
                // F-1: the client's cancel landed in the engine's statement in front of its
                // own; the client gets the server's error for a cancelled statement, never one
                // that names the engine's statement.
                self.apply_disp(conn, t, body, Disp::Discard);
                self.send_cancelled_error();
            } else if let Some(named) = self.client_names_in_error(a, body) {
                // E-2: an error about a statement the engine prepared on the reader (a Bind
                // with the wrong number of parameters, a statement gone) names it by the
                // client's name, as the primary's would.
                self.apply_disp(conn, t, body, Disp::Discard);
                self.out.send_client_with(|o| {
                    crate::protocol::encode::message(o, t, |o| o.extend_from_slice(&named));
                });
            } else {
                self.apply_disp(conn, t, body, Disp::Forward);
            }
            if let Some(u) = self.unit_mut(id) {
                u.errored = true;
                u.forwarded = true;
            }
            if open && !facts.fatal {
                // The server now skips to a Sync the client has not sent (a Flush released the
                // batch's answers, this error among them): close the batch with the engine's
                // own Sync. The client's messages up to its Sync are then skipped by the
                // engine, as the server would skip them, and its Sync answered (E-1, F-3).
                self.close_reader_batch(id, conn);
            }
        } else {
            self.apply_disp(conn, t, body, Disp::Discard);
            if open && !facts.fatal {
                // The server now skips to a Sync the client has not sent: close the batch to
                // get its RFQ, then recover.
                self.close_reader_batch(id, conn);
            }
        }
        if facts.fatal {
            // No RFQ follows a FATAL error: the connection closes now.
            self.out.close_backend(conn);
            self.engine.conns().forget(conn);
            self.reader_lost(conn);
        }
    }

    /// The settings replay on a fresh reader answered (S-5): on success the unit's own messages
    /// follow; on failure the connection's state is unknown — it is closed, and the unit is
    /// retried elsewhere.
    fn replay_done(&mut self, conn: ConnId, id: u32) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        let failed = self.unit(id).is_some_and(|u| u.failure.is_some());
        self.backend_mut(i).settings_pending = false;
        if !failed {
            let needs_reset = self.unit(id).and_then(|u| u.after_replay).unwrap_or(false);
            self.send_reader_part(id, conn, needs_reset);
            // Messages of the open batch that arrived during the replay follow (E-1).
            self.pump(None);
            return;
        }
        let (class, rec, text) = match self.unit(id) {
            Some(u) => match u.failure {
                Some((c, r)) => (c, r, u.failure_text().map(Box::from)),
                None => return,
            },
            None => return,
        };
        self.with_reader_ref(i, |e, r, s| e.readers().end_use_via(r, s));
        if self.pin.is_some_and(|p| p.conn == conn) {
            self.pin = None;
            self.engine.stats().inc(Counter::PinsReleased);
        }
        self.hand_back(conn, true);
        if class == FailureClass::ReusableError {
            // S-5: the reader refused the writer's state, or its login check found defaults
            // the writer's session does not have. A capture learns what the writer has now
            // (the names of `pg_db_role_setting` among it); refused again, the session reads
            // on the writer, until its backoff tries a reader again.
            self.settings.refusals = self.settings.refusals.saturating_add(1);
            if self.settings.refusals == 2 {
                self.replay_retry.failed();
            }
            self.settings.mark_due();
        }
        // A replay's own error is never the client's; a cancel's 57014 was answered already.
        let rec = if rec == Recovery::ForwardOriginal && class != FailureClass::Cancel {
            Recovery::EngineError
        } else {
            rec
        };
        self.recover(id, class, rec, text);
    }

    /// The reader's RFQ ends unit `id`'s attempt on it.
    fn reader_unit_rfq(&mut self, conn: ConnId, id: u32, rfq: Rfq<'_>, client_rfq: bool) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        let Some(u) = self.unit(id) else {
            return;
        };
        let (failure, failure_text, saw_error, generation, sent_at) = (
            u.failure,
            u.failure_text().map(Box::from),
            u.saw_error,
            u.generation,
            u.sent_at,
        );
        let ext = self.backend(i).ext;
        {
            let b = self.backend_mut(i);
            if !saw_error && std::mem::take(&mut b.clean_on_success) {
                b.dirty = false;
            }
            b.clean_on_success = false;
        }
        let settings_unknown =
            std::mem::take(&mut self.backend_mut(i).settings_pending) && saw_error;
        self.reader_answered_since_writer = true;
        self.with_reader_ref(i, |e, r, s| e.readers().end_use_via(r, s));
        match rfq.lsn {
            LsnField::At(l) => {
                // R-1a: dated by when the statement was sent, a lower bound of when the reader
                // reported it (a server that crashed since cannot be dated later).
                self.with_reader_ref(i, |e, r, s| e.reader_rfq_lsn(r, s, generation, l, sent_at));
                if let Some(p) = self.pin.as_mut() {
                    if p.conn == conn {
                        p.replay = p.replay.max(l);
                    }
                }
                if failure.is_none() && generation == self.lsn.generation {
                    self.lsn.reader_positioned(l);
                }
            }
            LsnField::Missing if ext.lsn && failure.is_none() => {
                // P-6: the reader should have reported its position; monotonic reads can no
                // longer be promised across readers.
                self.lsn.observed_unknown = true;
                self.engine.stats().inc(Counter::MissingLsn);
            }
            _ if !ext.lsn && failure.is_none() && generation == self.lsn.generation => {
                // S-1a on a server that reports no positions: what the read showed is at least
                // what its reader is known to have replayed, which becomes part of what the
                // session has observed. Without it, a reader that went back (restarted behind
                // its old position, or replaced by an older copy) served the session older data
                // than it had just read there, until replay caught up (an examiner's finding,
                // 2026-12-05). A sample taken after the read may be newer than what it showed:
                // the session then waits for a little more than it must, never for less. Only
                // fresh evidence counts (as for a target, `reader_lsn_max_age_ms`): a host that
                // samples its standbys only for sessions that wrote (the Pgpool-II patch) would
                // otherwise give every reading session a target no evidence can meet.
                let (now, max_age) = (self.now, self.config.reader_lsn_max_age_ms);
                let mut seen = None;
                self.with_reader_ref(i, |e, _, s| {
                    seen = e
                        .readers()
                        .snapshot(s)
                        .filter(|r| {
                            r.known
                                && r.generation == generation
                                && now.saturating_sub(r.sample_at_ms) <= max_age
                        })
                        .map(|r| r.replay_lsn);
                });
                if let Some(l) = seen {
                    self.lsn.reader_positioned(l);
                }
                // The read may have shown more than that sample: evidence taken after it, or
                // an outage of its reader, settles it (`settle_reader_read`). One read at a time
                // is followed: a read on another reader before the last one is settled keeps
                // only the lower bound for that one (README, "Known limits").
                if let Some(server) = self.backend(i).server {
                    self.settle_reader_read();
                    (self.reader_read_server, self.reader_read_at) = (server, self.now);
                }
            }
            _ => {}
        }
        self.with_reader_ref(i, |e, r, s| e.reader_answered(r, s));
        let pinned = self.pin.is_some_and(|p| p.conn == conn);
        if self.unit(id).is_some_and(|u| u.row_limit < 0) {
            // E-4: abandoned, not failed: the reader answered as asked.
            if !pinned {
                self.hand_back(conn, settings_unknown);
            }
            self.row_limited_on_writer(id);
            return;
        }
        match failure {
            Some((class, rec)) if rec != Recovery::ForwardOriginal => {
                // The connection is still usable (not lost): return it, unpinned.
                if pinned {
                    self.pin = None;
                    self.engine.stats().inc(Counter::PinsReleased);
                }
                self.hand_back(conn, settings_unknown);
                self.recover(id, class, rec, failure_text);
            }
            Some((class, rec)) => {
                // The reader's own error was forwarded.
                if !pinned {
                    self.hand_back(conn, settings_unknown);
                } else {
                    self.release_pin(false);
                }
                self.recover(id, class, rec, None);
            }
            None => {
                self.flush_held();
                if !pinned {
                    self.hand_back(conn, settings_unknown);
                }
                if self.txn.active {
                    self.engine.stats().inc(Counter::SplitServed);
                }
                if client_rfq {
                    let status = self.writer_status;
                    self.client_rfq(status);
                }
                self.finish_unit(id);
            }
        }
    }
}
