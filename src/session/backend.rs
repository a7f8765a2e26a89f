//! Backend streams: framing, matching each message to the request it answers (`response`),
//! and what it means for the client — forward, swallow, hold (P-6, P-8). `writer` and `reader`
//! apply the answers to the session's state.

use super::response::{Answer, Kind as AKind, Req, Who};
use super::*;
use crate::cluster::stats::Counter;
use crate::protocol::backend::BackendMessage;
use crate::protocol::encode;
use crate::protocol::framer::{BodyMode, Step};
use crate::protocol::tag;

/// Which backend message bodies the engine reads; rows and descriptions pass by count (a
/// whole one in one step).
fn backend_body_mode(t: u8, len: usize, limits: &crate::protocol::Limits) -> BodyMode {
    // Authentication exchanges (SASL, GSS: longer than the 8 bytes of a code and an MD5 salt)
    // are no routing business: streamed, never copied, so no byte of them stays in a buffer.
    if t == tag::AUTHENTICATION && len > 8 {
        return BodyMode::Skip;
    }
    let small = len <= limits.max_inspected_len;
    if small
        && (BackendMessage::needs_body(t)
            || t == tag::PARAMETER_DESCRIPTION
            || t == tag::NOTIFICATION_RESPONSE)
    {
        BodyMode::Inspect
    } else {
        BodyMode::Skip
    }
}

/// What to do with one whole backend message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Disp {
    Forward,
    Discard,
    /// Discard from the stream, keep a copy to send later (a reader attempt's held answers).
    Hold,
    /// Discard, and keep a copy to send after the current reader unit (writer async).
    HoldWriter,
}

impl Session {
    pub(super) fn backend_index(&self, conn: ConnId) -> Option<usize> {
        if self.writer.as_ref().is_some_and(|w| w.conn == conn) {
            return Some(0);
        }
        self.readers
            .iter()
            .position(|r| r.conn == conn)
            .map(|i| i + 1)
    }

    pub(super) fn backend(&self, i: usize) -> &Backend {
        match i {
            0 => self.writer.as_ref().expect("index 0 is the writer"),
            _ => &self.readers[i - 1],
        }
    }

    pub(super) fn backend_mut(&mut self, i: usize) -> &mut Backend {
        match i {
            0 => self.writer.as_mut().expect("index 0 is the writer"),
            _ => &mut self.readers[i - 1],
        }
    }

    /// Feeds bytes received from backend connection `conn`.
    pub fn recv_backend(
        &mut self,
        conn: ConnId,
        bytes: &[u8],
        now_ms: u64,
    ) -> Result<(), SessionError> {
        self.check_input(now_ms)?;
        // An unknown connection is refused there, before any byte is read.
        self.recv_backend_bytes(conn, bytes)
    }

    pub(super) fn recv_backend_bytes(
        &mut self,
        conn: ConnId,
        bytes: &[u8],
    ) -> Result<(), SessionError> {
        let limits = self.config.limits;
        let Some(i0) = self.backend_index(conn) else {
            return Err(self.fail(SessionError::UnknownConnection(conn)));
        };
        let now = self.now;
        self.backend_mut(i0).answered(now);
        // The framer is taken out for the whole input (a message body may borrow it) and put
        // back at the end if the connection is still in use.
        let mut framer = std::mem::replace(&mut self.backend_mut(i0).framer, Framer::new(limits));
        let mut pos = 0;
        let mut result = Ok(());
        // A run of rows: once a whole DataRow went through `on_backend_opaque_start`, the next
        // whole DataRows of this input mean what it meant (a row changes nothing a row's
        // meaning depends on: the backend, the front of its response queue, the unit, the
        // unit's failure; whether the result began is settled by the first), so they are
        // covered by count with its disposition. Any other message ends the run.
        let mut run: Option<(usize, bool, bool)> = None;
        while pos < bytes.len() {
            let (i, learning_rows, shape_front, holding) = match run {
                Some((i, learning, _)) => (i, learning, false, false),
                None => {
                    let Some(i) = self.backend_index(conn) else {
                        // The connection was dropped while processing (it broke): nothing more
                        // from it is meaningful.
                        self.out.discard_backend(conn, bytes.len() - pos);
                        break;
                    };
                    // The probe's and the capture's rows are read; every other row passes by
                    // count.
                    let front = self.backend(i).resp.front();
                    let learning =
                        i == 0 && front.is_some_and(|e| matches!(e.who, Who::Probe | Who::Capture));
                    // A writer's Describe read for its row shape (E-2).
                    let shape = i == 0 && front.is_some_and(|e| e.shape);
                    // A reader's held row-limited Execute (E-4): its answers are read, to be
                    // held until it ends.
                    let holding = i > 0
                        && front.is_some_and(|e| {
                            e.req == Req::Execute
                                && e.who == Who::Client
                                && self.unit(e.unit).is_some_and(|u| u.row_limit > 0)
                        });
                    (i, learning, shape, holding)
                }
            };
            let step = framer.step(&bytes[pos..], |t, len| {
                // Never more than the framer reads whole (`max_inspected_message_bytes` may be
                // set below these bounds): a longer one streams, as any message too large.
                let inspect = (learning_rows && t == tag::DATA_ROW && len <= 4096
                    || holding && len + 5 <= MAX_HELD
                    // A reader's RowDescription may be held until the first row or the
                    // command's end (F-3); one a shape is read from is read whole (E-2).
                    || (i > 0 || shape_front) && shapes::reads_shape(t, len))
                    && len <= limits.max_inspected_len;
                if inspect {
                    BodyMode::Inspect
                } else {
                    backend_body_mode(t, len, &limits)
                }
            });
            let (step, n) = match step {
                Ok(s) => s,
                Err(e) => {
                    result = self.backend_protocol_error(conn, e);
                    break;
                }
            };
            pos += n;
            let in_run = run.take();
            let r = match step {
                Step::Opaque {
                    tag: tag::DATA_ROW,
                    body_len,
                } if in_run.is_some() => {
                    if in_run.is_some_and(|(_, _, forward)| forward) {
                        self.out.forward_backend(conn, 5 + body_len);
                    } else {
                        self.out.discard_backend(conn, 5 + body_len);
                    }
                    run = in_run;
                    continue;
                }
                Step::NeedMore => Ok(()),
                Step::Message { tag, body } => self.on_backend_message(conn, i, tag, body),
                Step::OpaqueStart { tag, body_len } => self
                    .on_backend_opaque_start(conn, i, tag, body_len, false)
                    .map(|_| ()),
                // Not asked for (`backend_body_mode`); a start and its first bytes.
                Step::NamedStart {
                    tag,
                    body_len,
                    head,
                } => {
                    let n = head.len();
                    self.on_backend_opaque_start(conn, i, tag, body_len, false)
                        .map(|_| {
                            if n > 0 && self.phase != Phase::Closed {
                                self.on_backend_opaque_bytes(conn, i, n, n == body_len);
                            }
                        })
                }
                Step::Opaque { tag, body_len } => self
                    .on_backend_opaque_start(conn, i, tag, body_len, true)
                    .map(|d| {
                        if let Some(forward) = d.filter(|_| tag == tag::DATA_ROW) {
                            run = Some((i, learning_rows, forward));
                        }
                    }),
                Step::OpaqueBytes { n, done } => {
                    self.on_backend_opaque_bytes(conn, i, n, done);
                    Ok(())
                }
            };
            if let Err(e) = r {
                result = Err(e);
                break;
            }
            if self.phase == Phase::Closed {
                if pos < bytes.len() {
                    self.out.discard_backend(conn, bytes.len() - pos);
                }
                break;
            }
        }
        if let Some(i) = self.backend_index(conn) {
            self.backend_mut(i).framer = framer;
        }
        if result.is_ok() {
            self.settle();
        }
        // F-1: the answer may have let held work run (the probe's, a reader's RFQ).
        self.deliver_pending_cancel();
        result
    }

    /// A backend broke the protocol: a writer ends the session, a reader is treated as lost.
    pub(super) fn backend_protocol_error(
        &mut self,
        conn: ConnId,
        e: ProtocolError,
    ) -> Result<(), SessionError> {
        self.engine.stats().inc(Counter::ProtocolErrors);
        let is_writer = self.backend_index(conn) == Some(0);
        if is_writer {
            let msg = format!("polarsplit: protocol violation by the primary: {e}");
            self.fatal_to_client(b"08P01", msg.as_bytes());
            self.close_all();
            return Err(self.fail(SessionError::Protocol {
                peer: "primary",
                source: e,
            }));
        }
        self.last_error = format!("reader connection {conn}: protocol violation: {e}").into();
        self.out.close_backend(conn);
        self.engine.conns().forget(conn);
        self.reader_lost(conn);
        Ok(())
    }

    /// Host events.
    pub fn on_backend_event(
        &mut self,
        conn: ConnId,
        event: Event,
        now_ms: u64,
    ) -> Result<(), SessionError> {
        self.check_input(now_ms)?;
        let r = match event {
            Event::WriterConnected => {
                if self.phase != Phase::AwaitWriter {
                    Err(SessionError::UnexpectedEvent(
                        "WriterConnected without ConnectWriter",
                    ))
                } else {
                    let ext = self
                        .startup
                        .as_ref()
                        .map(|s| s.extensions(Role::Writer))
                        .unwrap_or_default();
                    let mut w = Backend::new(conn, None, ext, &self.config);
                    w.resp.push(Req::Startup, Who::Client, 0);
                    self.writer = Some(w);
                    self.phase = Phase::Auth;
                    self.pump(None);
                    Ok(())
                }
            }
            Event::WriterConnectFailed => {
                if self.phase != Phase::AwaitWriter {
                    Err(SessionError::UnexpectedEvent(
                        "WriterConnectFailed without ConnectWriter",
                    ))
                } else {
                    self.fatal_to_client(b"08006", b"polarsplit: could not connect to the primary");
                    self.close_all();
                    Ok(())
                }
            }
            Event::ReaderAttached {
                server,
                fresh,
                needs_reset,
            } => self.reader_attached(conn, server, fresh, needs_reset),
            Event::ReaderUnavailable { no_credentials } => self.reader_unavailable(no_credentials),
            Event::ReaderConnectFailed { starting_up } => self.reader_connect_failed(starting_up),
            Event::ConnectionLost => match self.backend_index(conn) {
                None => Err(SessionError::UnknownConnection(conn)),
                Some(0) => {
                    // After the client's Terminate the writer ends its connection as
                    // PostgreSQL does (work the client left without a Sync unanswered): the
                    // client hears nothing more.
                    // What the writer said before it went (held behind a reader's answer)
                    // reaches the client first. After the server's own shutdown warning the
                    // client hears nothing more, as from the primary alone (an examiner's
                    // finding of 2026-12-07: a FATAL 08006 of the engine's followed the
                    // server's 57P02); a connection lost without a word gets the engine's
                    // error, clearer than the bare end of the connection.
                    if !self.client_mid_message() {
                        self.flush_held_writer();
                    }
                    if !self.client_ended && !self.writer_farewell {
                        self.fatal_to_client(
                            b"08006",
                            b"polarsplit: the connection to the primary was lost",
                        );
                    }
                    self.writer = None;
                    self.close_all();
                    Ok(())
                }
                Some(_) => {
                    self.engine.conns().forget(conn);
                    self.reader_lost(conn);
                    Ok(())
                }
            },
        };
        if r.is_ok() {
            // E-1: messages of an open batch (after a Flush, or past max_batch_bytes) that
            // arrived while a reader was being acquired follow it now, or go elsewhere after
            // its loss.
            self.settle();
        }
        // F-1: a reader attached, or the writer took the batch for want of one.
        self.deliver_pending_cancel();
        r.map_err(|e| self.fail(e))
    }

    /// R-1b: the host reports that time passed. A reader that has answered nothing for
    /// `reader_response_timeout_ms` since its unit was sent, while its monitor did not answer
    /// in that time either, is treated as lost (the host closes it: `CloseBackend`), and the
    /// unit is retried per F-2/F-3. Statements on the writer are never timed out.
    pub fn on_timeout(&mut self, now_ms: u64) -> Result<(), SessionError> {
        self.check_input(now_ms)?;
        self.keep_writer_alive();
        self.release_rfq_held_for_a_sample();
        let timeout = self.config.reader_response_timeout_ms;
        if timeout == 0 {
            self.settle();
            return Ok(());
        }
        let due: Vec<ConnId> = self
            .units
            .iter()
            .filter_map(|u| match u.attempt {
                Attempt::Reader { conn, server }
                    if self.now >= self.reader_deadline(u.sent_at, conn, server, timeout) =>
                {
                    Some(conn)
                }
                _ => None,
            })
            .collect();
        for conn in due {
            self.engine.stats().inc(Counter::ReaderDeadlines);
            self.last_error = format!(
                "reader connection {conn} answered nothing for {timeout} ms and its monitor \
                 neither: treated as lost"
            )
            .into();
            self.out.close_backend(conn);
            self.engine.conns().forget(conn);
            // An outage and a failure of the reader (R-1a, R-1b), then F-2/F-3.
            self.reader_lost(conn);
        }
        self.settle();
        Ok(())
    }

    /// R-1b: when a reader unit sent at `sent_at` on `conn` is treated as lost: `timeout` after
    /// it was sent, *and* after the connection last answered, *and* after the reader's monitor
    /// last answered (a sample's query sent then) — a long report on a replica whose monitor
    /// keeps answering is never killed, nor one still streaming its rows while the monitor
    /// cannot (an examiner's finding of 2026-12-07: a 40 MB report cut after 30,000 of 40,000
    /// rows, the deadline counted from when it was sent).
    pub(super) fn reader_deadline(
        &self,
        sent_at: u64,
        conn: ConnId,
        server: ServerId,
        timeout: u64,
    ) -> u64 {
        let monitor = self.engine.readers().last_sample_at(server).unwrap_or(0);
        let answered = self
            .backend_index(conn)
            .map_or(0, |i| self.backend(i).answered_at(self.now));
        sent_at.max(answered).max(monitor).saturating_add(timeout)
    }

    /// A reader connection is gone (host event, FATAL error, protocol violation, deadline).
    pub(super) fn reader_lost(&mut self, conn: ConnId) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        if i == 0 {
            return;
        }
        if let Some(s) = self.backend(i).server {
            // R-1a: evidence from before the loss says nothing of where it is now; R-1b: a
            // failure toward the hold-out.
            self.engine.reader_lost(s, self.now);
        }
        if self.client_mid_message() {
            // Half of a large message (this reader's, or the writer's) reached the client: its
            // stream cannot be repaired.
            self.last_error = format!(
                "reader connection {conn} broke in the middle of a message forwarded to the client"
            )
            .into();
            self.engine.stats().inc(Counter::FailuresDisconnected);
            self.close_all();
            return;
        }
        self.drop_shape_notes(conn, None);
        let mut b = self.readers.remove(i - 1);
        if self.pin.is_some_and(|p| p.conn == conn) {
            self.pin = None;
            self.engine.stats().inc(Counter::PinsReleased);
        }
        // The unit whose attempt ran there: the one still expecting answers from it, or an open
        // batch (routed at a Flush) that has had all its answers so far.
        let attempt_unit = self.units.iter().find_map(|u| match u.attempt {
            Attempt::Reader { conn: c, .. } if c == conn => Some(u.id),
            _ => None,
        });
        let Some(id) = b.resp.front().map(|e| e.unit).or(attempt_unit) else {
            return;
        };
        b.end_use(&self.engine);
        let Some(u) = self.unit(id) else {
            return;
        };
        if u.failure.is_none() && (b.resp.is_empty() || b.resp.only_hidden_sync_left()) {
            // An open batch that had every answer it asked for (a Parse/Describe/Flush), perhaps
            // with only the engine's own Sync closing it still out: nothing the client waits for
            // is lost — its statements are tracked and can be prepared anywhere — so the rest of
            // the batch, or the client's next message, is simply routed anew. Not so an open
            // batch whose requests a FATAL error emptied (a standby's fast shutdown, 57P01,
            // answering the Parse it held): none of its answers came; it is recovered from below
            // (F-2, E-3).
            self.finish_unit(id);
            return;
        }
        if let Some((class, Recovery::ForwardOriginal)) = u.failure {
            if b.resp.only_hidden_sync_left() || b.resp.only_client_sync_left() {
                // The reader's own error reached the client, and only the Sync's ReadyForQuery
                // was still out (the engine's Sync closing a batch a Flush released, or the
                // client's): the client has had every answer one server would send before it.
                // A second error for the loss is not one of them (F-3): the batch ends as after
                // that error — its messages up to the client's Sync skipped, that Sync answered.
                self.recover(id, class, Recovery::ForwardOriginal, None);
                return;
            }
        }
        if u.kind == UnitKind::Batch
            && u.failure.is_none()
            && !u.saw_error
            && b.resp.only_client_sync_left()
        {
            // A read batch whose every answer but the ReadyForQuery reached the client: what
            // one server would have sent next is that RFQ, so the engine sends it (no error for
            // a result that is complete). Where the reader replayed to is unknown now: the rows
            // seen may be newer than any position the session knows, so monotonic reads are no
            // longer promised by position (P-6).
            if b.ext.lsn {
                self.lsn.observed_unknown = true;
            }
            self.flush_held();
            let status = self.writer_status;
            self.client_rfq(status);
            self.finish_unit(id);
            return;
        }
        if u.cancel_forwarded && !u.forwarded && !u.result_started {
            // F-1: the client cancelled it while it ran there; what the primary alone answers
            // is 57014, not the rows a retry would find.
            self.engine.stats().inc(Counter::FailuresForwarded);
            self.answer_cancelled(id);
            return;
        }
        // The unit's attempt broke.
        let (class, rec, text) = match u.failure {
            Some((c, r)) if c == FailureClass::ConnectionLost => {
                (c, r, u.failure_text().map(Box::from))
            }
            _ => {
                let progress = self.progress(id, false);
                let rec = policy::decide(FailureClass::ConnectionLost, &progress, &self.config);
                (
                    FailureClass::ConnectionLost,
                    rec,
                    Some(format!("reader connection {conn} broke").into_boxed_str()),
                )
            }
        };
        let rec = if rec == Recovery::ForwardOriginal {
            // Nothing of a broken connection can be forwarded.
            Recovery::EngineError
        } else {
            rec
        };
        self.recover(id, class, rec, text);
    }

    /// F-3's inputs for unit `id`.
    pub(super) fn progress(&self, id: u32, in_hidden: bool) -> policy::Progress {
        let (generation_changed, reader_retries, forwarded) = match self.unit(id) {
            Some(u) => (
                self.engine.writer_view(self.writer_hostgroup).generation != u.generation,
                u32::from(u.reader_retries),
                u.forwarded || u.result_started,
            ),
            None => (false, 0, false),
        };
        policy::Progress {
            result_forwarded: forwarded,
            in_hidden,
            in_txn: self.txn.active,
            generation_changed,
            reader_retries,
        }
    }

    pub(super) fn apply_disp(&mut self, conn: ConnId, t: u8, body: &[u8], disp: Disp) {
        let n = body.len() + 5;
        match disp {
            Disp::Forward => self.out.forward_backend(conn, n),
            Disp::Discard => self.out.discard_backend(conn, n),
            Disp::Hold => {
                // Still the end of the last action: nothing held yet, or all of it at the end
                // of the DiscardBackend this message's bytes join.
                let before = self.held.len();
                let extends = before == 0
                    || self.held_tail.is_some_and(|(c, mark)| {
                        c == conn && self.out.discard_tail(conn) == Some(mark)
                    });
                self.out.discard_backend(conn, n);
                // Callers hold only within `MAX_HELD` (`Session::client_part_disp`); kept as a
                // bound on memory.
                debug_assert!(self.held.len() + n <= MAX_HELD, "held past MAX_HELD");
                if self.held.len() + n <= MAX_HELD {
                    wire(t, body, &mut self.held);
                    self.held_tail = if extends {
                        self.out.discard_tail(conn).map(|mark| (conn, mark))
                    } else {
                        None
                    };
                } else {
                    self.held_tail = None;
                }
            }
            Disp::HoldWriter => {
                if self.held_writer.len() + n > MAX_HELD && !self.client_mid_message() {
                    // Never dropped (P-8: every notification the primary would deliver): past
                    // `MAX_HELD` what the writer said goes to the client now, between two whole
                    // messages of the reader's answer, where the protocol allows asynchronous
                    // messages. (An examiner's finding of 2026-12-07: 37 of 100 notifications
                    // of 1 kB sent during one standby read were lost.)
                    self.flush_held_writer();
                    self.out.forward_backend(conn, n);
                } else {
                    // Held past `MAX_HELD` only while another message is partly with the
                    // client: the next one, or the unit's end, sends it all.
                    self.out.discard_backend(conn, n);
                    wire(t, body, &mut self.held_writer);
                }
            }
        }
    }

    /// One whole message from `conn`, backend `i` (its index as of this message).
    fn on_backend_message(
        &mut self,
        conn: ConnId,
        i: usize,
        t: u8,
        body: &[u8],
    ) -> Result<(), SessionError> {
        let ext = self.backend(i).ext;
        let msg = match BackendMessage::parse(t, body, ext) {
            Ok(m) => m,
            Err(e) => return self.backend_protocol_error(conn, e),
        };
        let answer = self.backend_mut(i).resp.on_message(t);
        match answer {
            Ok(a) if a.shape && a.kind == AKind::Done => {
                let described = (t == tag::ROW_DESCRIPTION).then_some(body);
                self.shape_answered(conn, i, a.unit, Some(described));
            }
            // The unit's batch ended, or the server skips the rest of it: its Describes sent so
            // far are not answered (the writer check's notes, unit 0, are its own business).
            // Before the answer is acted on, which may send more of the unit (the settings
            // replay's RFQ lets the batch follow, a failure its retry).
            Ok(a) if a.unit != 0 && matches!(a.kind, AKind::Error { .. } | AKind::Ready) => {
                self.drop_shape_notes(conn, Some(a.unit));
            }
            _ => {}
        }
        if i == 0 {
            self.writer_message(conn, t, body, msg, answer)?;
        } else {
            self.reader_message(conn, t, body, msg, answer);
        }
        self.drain_locals(conn);
        Ok(())
    }

    /// Whether a reader unit is answering the client now (writer async messages wait for it).
    pub(super) fn reader_in_flight(&self) -> bool {
        self.units.any_on_reader()
    }

    /// A streamed (large) message begins on `conn`, backend `i`: it answers a request like any
    /// other.
    /// `whole`: its body was consumed with the header ([`Step::Opaque`]). Returns, for a whole
    /// message, whether it was forwarded.
    fn on_backend_opaque_start(
        &mut self,
        conn: ConnId,
        i: usize,
        t: u8,
        body_len: usize,
        whole: bool,
    ) -> Result<Option<bool>, SessionError> {
        let answer = self.backend_mut(i).resp.on_message(t);
        if let Ok(a) = answer {
            if a.shape && a.kind == AKind::Done {
                // Too large to read: not the shape the client was shown, which was read.
                self.shape_answered(conn, i, a.unit, None);
            }
            if i == 0 && t == tag::DATA_ROW && a.who == Who::Capture {
                // A row of the capture too large to read (a setting's value of kilobytes):
                // the state cannot be known whole, so the capture failed (S-5) — never a
                // capture that silently lacks the setting (an examiner's finding of
                // 2026-12-05: a 2.8 KB placeholder was missing on readers).
                self.capture_failed = true;
            }
            if i == 0 && t == tag::DATA_ROW && a.who == Who::Probe {
                self.probe_lsn = Lsn::ZERO;
            }
        }
        let forward = match answer {
            Err(_) if i == 0 && t == tag::NOTIFICATION_RESPONSE => !self.reader_in_flight(),
            Err(u) => {
                return self
                    .backend_protocol_error(
                        conn,
                        ProtocolError::UnexpectedTag {
                            tag: u.tag,
                            side: "server",
                        },
                    )
                    .map(|()| None)
            }
            Ok(a) => self.streamed_forward(i, t, &a),
        };
        // The header, and the body when it is whole; a streamed body follows as bytes.
        let whole = whole || body_len == 0;
        let n = if whole { 5 + body_len } else { 5 };
        if !forward {
            self.out.discard_backend(conn, n);
        } else if whole {
            self.out.forward_backend(conn, n);
        } else {
            // The header alone (5 bytes).
            self.backend_mut(i).held_fwd = u16::try_from(n).unwrap_or(u16::MAX);
        }
        if !whole {
            self.backend_mut(i).streaming = Some(forward);
        }
        if i == 0 && matches!(t, tag::COPY_IN_RESPONSE | tag::COPY_BOTH_RESPONSE) {
            if let Ok(a) = answer {
                self.writer_copy_in(a.unit);
            }
            self.pump(None);
        }
        Ok(whole.then_some(forward))
    }

    /// Whether a streamed message is forwarded to the client.
    fn streamed_forward(&mut self, i: usize, t: u8, a: &Answer) -> bool {
        if a.kind == AKind::Async && i == 0 {
            // Large asynchronous messages of the writer: a notice when it belongs to the
            // client's statement, a notification or parameter status unless a reader is
            // answering the client right now (then it cannot be held: dropped — a notification
            // is inspected, and so held, up to `max_inspected_message_bytes`; PostgreSQL's
            // payloads are under 8000 bytes).
            return if t == tag::NOTICE_RESPONSE {
                a.who.is_client()
            } else {
                !self.reader_in_flight()
            };
        }
        if !a.who.is_client() || (a.kind == AKind::Async && t != tag::NOTICE_RESPONSE) {
            return false;
        }
        if i == 0 {
            return true;
        }
        let Some(u) = self.unit_mut(a.unit) else {
            return false;
        };
        if u.failure.is_some() {
            return false;
        }
        if u.row_limit > 0 {
            // E-4: too large to hold while the row-limited Execute has not ended.
            self.row_limited_abandoned(a.unit);
            return false;
        }
        let started = u.result_started;
        if t == tag::NOTICE_RESPONSE && !started && !u.released {
            // Too large to hold before the result: the attempt gives way to the writer
            // (`Session::client_part_disp`).
            self.abandon_attempt(a.unit, crate::decision::Reason::ReaderSaidTooMuch);
            return false;
        }
        u.forwarded = true;
        // Rows and COPY data of a reader: the result has begun, and what was held goes first.
        if !started
            && matches!(
                t,
                tag::ROW_DESCRIPTION | tag::DATA_ROW | tag::COPY_OUT_RESPONSE | tag::COPY_DATA
            )
        {
            self.result_begins(a.unit);
        }
        true
    }

    fn on_backend_opaque_bytes(&mut self, conn: ConnId, i: usize, n: usize, done: bool) {
        if !self.backend(i).streaming.unwrap_or(false) {
            self.out.discard_backend(conn, n);
            return;
        }
        let b = self.backend_mut(i);
        let held = b.held_fwd as usize + n;
        if done || held >= STREAM_WHOLE_MAX {
            b.held_fwd = 0;
            b.partial_out = !done;
            self.out.forward_backend(conn, held);
        } else {
            // Fewer than STREAM_WHOLE_MAX (64 KiB): a u16 holds it.
            b.held_fwd = u16::try_from(held).unwrap_or(u16::MAX);
        }
    }

    /// A reader unit's result began: its held answers go to the client first.
    pub(super) fn result_begins(&mut self, id: u32) {
        if let Some(u) = self.unit_mut(id) {
            if !u.result_started {
                u.result_started = true;
                self.flush_held();
            }
        }
    }

    /// Returns a reader connection to the host: to its pool, or closed when it cannot be reused
    /// (its settings are unknown — the replay that was to bring it in line failed — a cancel
    /// may still land on it, or code the engine cannot see into ran on it, S-6).
    pub(super) fn hand_back(&mut self, conn: ConnId, close: bool) {
        if let Some(i) = self.backend_index(conn) {
            if i == 0 {
                return;
            }
            self.drop_shape_notes(conn, None);
            let mut b = self.readers.remove(i - 1);
            if close || b.cancelled || b.ran_code || b.stale_plans {
                if b.cancelled {
                    self.engine.stats().inc(Counter::CancelledReadersClosed);
                }
                self.engine.conns().forget(b.conn);
                self.out.close_backend(b.conn);
            } else {
                let prepared = std::mem::take(&mut b.prepared);
                self.engine.conns().put(b.conn, prepared);
                self.out.release_reader(b.conn, b.dirty);
            }
            self.retire_backend(b);
        }
    }

    /// Sends the client a FATAL ErrorResponse before the session closes — unless a backend's
    /// message is partly with the client (any backend's, not only the failing one): bytes sent
    /// now would land inside that message, so the client only sees its connection close.
    pub(super) fn fatal_to_client(&mut self, sqlstate: &[u8; 5], msg: &[u8]) {
        if self.client_mid_message() {
            return;
        }
        self.out.send_client_with(|o| {
            encode::error_or_notice(o, false, encode::Severity::Fatal, sqlstate, msg, None);
        });
    }

    /// Whether any backend's message is partly with the client: until it completes, no other
    /// byte may reach the client (an error sent now would land inside that message).
    pub(super) fn client_mid_message(&self) -> bool {
        self.writer
            .iter()
            .chain(self.readers.iter().map(|b| &**b))
            .any(|b| b.partial_out)
    }
}
