//! Row shapes of prepared statements (E-2): a server refuses to run a prepared statement whose
//! result type changed since it was parsed (0A000 "cached plan must not change result type"),
//! because its client decodes rows by the description it was given. Where the engine prepares a
//! client statement again on another connection (a hidden Parse), that connection's statement
//! is new and would answer in the new shape. So the engine remembers the shape the client was
//! shown for each named statement (`ClientStmt::shape`, from the answer to its Describe) and,
//! where it prepares the statement again, learns the new one before the client's statement
//! runs there:
//!
//! - on a reader, by a hidden Describe pipelined behind the hidden Parse: a different shape
//!   fails the attempt before anything of it reached the client (its answers are held, E-3), and
//!   the batch is retried on the writer (F-2), whose answer is the primary's;
//! - on the writer, by a check before the batch is sent there (a hidden Parse under the client's
//!   name, Describe and Sync, the batch waiting for the answer): a different shape leaves the
//!   statement refused, and the client's message naming it is answered as the primary answers
//!   it — 0A000, the rest of the batch skipped up to its Sync by the server itself (a hidden
//!   Parse that fails stands in its place, and its error is answered with the primary's).
//!
//! Nothing of it runs while the shapes are unknown or already on the connection: the cached
//! named-statement cycle pays nothing.

use super::backend::Disp;
use super::hidden;
use super::response::{Req, Who};
use super::statements::{row_shape, same_name, ParseNote, WriterCheck};
use super::*;
use crate::cluster::stats::Counter;
use crate::protocol::backend::BackendMessage;
use crate::protocol::encode;
use crate::protocol::frontend::FrontendMessage;
use crate::protocol::tag;

/// The statement name of the Parse that fails in the place of a refused statement's use.
const REFUSE_NAME: &[u8] = b"polarsplit_refused";
/// Its text: a syntax error (nothing is looked up or run; the server's log names the cause).
const REFUSE_STATEMENT: &[u8] = b"polarsplit: cached plan must not change result type";
/// The primary's message for a prepared statement whose result type changed (plancache.c).
pub(super) const CHANGED_MESSAGE: &[u8] = b"cached plan must not change result type";

/// A Describe in flight whose answer is read for its row shape, or a Bind whose portal's
/// Describe would be.
#[derive(Debug)]
pub(super) struct ShapeNote {
    conn: ConnId,
    /// The unit it belongs to (0: the writer check, which belongs to none).
    unit: u32,
    /// The client's statement name, and its hash when the note was made (a statement parsed
    /// again under that name since is another statement).
    name: Box<[u8]>,
    hash: u64,
    /// The shape the client was shown (a check), or 0 (learn what the client is shown now).
    expect: u64,
    /// A Bind of this portal, whose Describe has not been sent: not in flight.
    portal: Option<Box<[u8]>>,
}

impl Session {
    /// The client's Describe of statement `name` goes to `conn`: whether its answer is read to
    /// learn the shape the client is shown (named statements whose shape is unknown).
    pub(super) fn learn_on_describe(&mut self, conn: ConnId, id: u32, name: &[u8]) -> bool {
        if name.is_empty() {
            return false;
        }
        let Some(s) = self.statements.peek(name) else {
            return false;
        };
        if s.shape != 0 {
            return false;
        }
        let hash = s.hash;
        self.shape_notes.push(ShapeNote {
            conn,
            unit: id,
            name: name.into(),
            hash,
            expect: 0,
            portal: None,
        });
        true
    }

    /// The client's Bind of named statement `stmt` (whose shape is unknown) into `portal` goes
    /// to `conn`: a Describe of the portal that follows in the batch teaches the shape.
    pub(super) fn note_bind_shape(&mut self, conn: ConnId, id: u32, portal: &[u8], stmt: &[u8]) {
        let Some(hash) = self
            .statements
            .peek(stmt)
            .filter(|s| s.shape == 0)
            .map(|s| s.hash)
        else {
            return;
        };
        // Only a Describe of unit `id` looks for it: it is kept with the unit.
        let Some(u) = self.unit_mut(id) else {
            return;
        };
        let notes = &mut u.extra_mut().portal_notes;
        notes.retain(|n| {
            !(n.conn == conn && n.portal.as_deref().is_some_and(|p| same_name(p, portal)))
        });
        notes.push(ShapeNote {
            conn,
            unit: id,
            name: stmt.into(),
            hash,
            expect: 0,
            portal: Some(portal.into()),
        });
    }

    /// The client's Describe of `portal` goes to `conn`: whether its answer teaches the shape of
    /// the statement the portal was bound to earlier in the batch.
    pub(super) fn learn_on_portal_describe(
        &mut self,
        conn: ConnId,
        id: u32,
        portal: &[u8],
    ) -> bool {
        let Some(notes) = self
            .unit_mut(id)
            .and_then(|u| u.extra.as_deref_mut())
            .map(|x| &mut x.portal_notes)
        else {
            return false;
        };
        let Some(at) = notes.iter().rposition(|n| {
            n.conn == conn && n.portal.as_deref().is_some_and(|p| same_name(p, portal))
        }) else {
            return false;
        };
        // In flight now: it joins the notes in wire order.
        let mut n = notes.remove(at);
        n.portal = None;
        self.shape_notes.push(n);
        true
    }

    /// A hidden Describe of the engine's statement `engine` (client statement `name`, shown
    /// `shape`) behind its hidden Parse on reader `i` (E-2).
    pub(super) fn check_on_reader(
        &mut self,
        i: usize,
        conn: ConnId,
        id: u32,
        name: &[u8],
        engine: &[u8],
    ) {
        let Some((hash, shape)) = self.statements.peek(name).map(|s| (s.hash, s.shape)) else {
            return;
        };
        if shape == 0 {
            return;
        }
        self.out
            .send_backend_with(conn, |o| hidden::describe_statement(o, engine));
        self.backend_mut(i)
            .resp
            .push_shape(Req::DescribeStatement, Who::Prepare, id);
        self.shape_notes.push(ShapeNote {
            conn,
            unit: id,
            name: name.into(),
            hash,
            expect: shape,
            portal: None,
        });
    }

    /// The answer to a Describe read for its shape arrived on `conn` (backend `i`): a
    /// RowDescription body (`Some(Some(..))`), NoData (`Some(None)`), or a RowDescription too
    /// large to read (`None`: never one the client was shown, whose shape was read).
    pub(super) fn shape_answered(
        &mut self,
        conn: ConnId,
        i: usize,
        unit: u32,
        answer: Option<Option<&[u8]>>,
    ) {
        let Some(at) = self
            .shape_notes
            .iter()
            .position(|n| n.conn == conn && n.unit == unit && n.portal.is_none())
        else {
            return;
        };
        let note = self.shape_notes.remove(at);
        let shape = answer.and_then(row_shape);
        let Some(s) = self
            .statements
            .peek_mut(&note.name)
            .filter(|s| s.hash == note.hash)
        else {
            return;
        };
        if note.expect == 0 {
            // What the client is shown (a later Describe answers the same, or fails).
            if let (0, Some(shape)) = (s.shape, shape) {
                s.shape = shape;
                s.shape_unit = unit;
                if !s.on_writer {
                    self.statements.may_check = true;
                }
            }
            return;
        }
        let same = shape == Some(note.expect);
        if i == 0 {
            if s.check == WriterCheck::Pending {
                s.check = if same {
                    WriterCheck::None
                } else {
                    WriterCheck::Refused
                };
            }
        } else if !same {
            // The reader now holds the engine's statement prepared in the new shape: a later
            // execution there would need no Parse, so no check, and would answer rows in a
            // shape the client was not shown (an examiner's finding, 2026-12-05). The
            // connection is closed when the session is done with it, never reused.
            self.backend_mut(i).stale_plans = true;
            self.reader_shape_changed(unit);
        }
    }

    /// A statement prepared again on a reader describes another shape than the client was
    /// shown: the attempt fails (nothing of it reached the client yet, or the failure is the
    /// engine's error) and is recovered from as after a reader's error (F-2): the writer's
    /// answer is the primary's — its own statement, or the refusal the primary gives.
    fn reader_shape_changed(&mut self, id: u32) {
        if self.unit(id).is_none_or(|u| u.failure.is_some()) {
            return;
        }
        let class = FailureClass::ReusableError;
        let progress = self.progress(id, true);
        let rec = policy::decide(class, &progress, &self.config);
        if let Some(u) = self.unit_mut(id) {
            u.failure = Some((class, rec));
            u.set_failure_text(Some(
                format!(
                    "a prepared statement prepared again on the replica has another result type \
                     than the client was shown ({})",
                    String::from_utf8_lossy(CHANGED_MESSAGE)
                )
                .into_boxed_str(),
            ));
        }
    }

    /// Forgets the shape notes of unit `unit` on `conn` (its batch ended or the server skips
    /// the rest of it), or of every unit on `conn` (`None`: it was handed back or lost).
    /// (Called at every RFQ and every hand-back: the common case, no notes, stays inline.)
    #[inline]
    pub(super) fn drop_shape_notes(&mut self, conn: ConnId, unit: Option<u32>) {
        if !self.shape_notes.is_empty() {
            self.drop_shape_notes_of(conn, unit);
        }
        // The notes of Binds kept with the units (`UnitExtra::portal_notes`).
        match unit {
            Some(id) => {
                if self
                    .unit(id)
                    .is_some_and(|u| u.extra.as_ref().is_some_and(|x| !x.portal_notes.is_empty()))
                {
                    if let Some(x) = self.unit_mut(id).and_then(|u| u.extra.as_deref_mut()) {
                        x.portal_notes.retain(|n| n.conn != conn);
                    }
                }
            }
            None => {
                for x in self.units.extras_mut() {
                    x.portal_notes.retain(|n| n.conn != conn);
                }
            }
        }
    }

    #[inline(never)]
    fn drop_shape_notes_of(&mut self, conn: ConnId, unit: Option<u32>) {
        self.shape_notes
            .retain(|n| n.conn != conn || unit.is_some_and(|u| n.unit != u));
    }

    /// Before a batch runs on the writer: a statement it names (not parsed in it) that exists
    /// only on readers and whose shape the client was shown is checked there first (E-2).
    /// `queued`: the batch is the first `count` queued messages; otherwise the kept messages of
    /// a reader attempt. Returns whether the batch must wait for a check's answer.
    pub(super) fn writer_check_first(&mut self, queued: Option<usize>) -> bool {
        if !self.statements.may_check || self.writer_skipping() {
            return false;
        }
        let mut parsed: Vec<&[u8]> = Vec::new();
        let mut pending = false;
        let mut due: Vec<Box<[u8]>> = Vec::new();
        match queued {
            Some(count) => {
                for m in self.queue.iter().take(count) {
                    let msg = match (&m.info, self.msg_bytes(m)) {
                        // One too large to inspect: the names the framer read.
                        (MsgInfo::LargeExtended(Some(names)), _) if m.tag == tag::BIND => {
                            FrontendMessage::parse(m.tag, names).ok()
                        }
                        (_, Some(b)) if b.len() >= 5 => {
                            FrontendMessage::reread(b[0], &b[5..], m.names).ok()
                        }
                        _ => None,
                    };
                    if let Some(msg) = msg {
                        self.look_for_check(msg, &mut parsed, &mut pending, &mut due);
                    }
                }
            }
            None => {
                for (r, names) in &self.orig_msgs {
                    let b = self.orig.get(r.clone()).filter(|b| b.len() >= 5);
                    if let Some(msg) =
                        b.and_then(|b| FrontendMessage::reread(b[0], &b[5..], *names).ok())
                    {
                        self.look_for_check(msg, &mut parsed, &mut pending, &mut due);
                    }
                }
            }
        }
        for name in &due {
            self.send_writer_check(name);
        }
        pending || !due.is_empty()
    }

    /// One message of a batch for the writer: the statement it names, if that needs a check
    /// (`due`) or has one in flight (`pending`); `parsed`: the names the batch parsed so far.
    fn look_for_check<'a>(
        &self,
        msg: FrontendMessage<'a>,
        parsed: &mut Vec<&'a [u8]>,
        pending: &mut bool,
        due: &mut Vec<Box<[u8]>>,
    ) {
        let name = match msg {
            FrontendMessage::Parse { statement, .. } => {
                if !statement.is_empty() {
                    parsed.push(statement);
                }
                return;
            }
            FrontendMessage::Bind { statement, .. } => statement,
            FrontendMessage::Describe { kind: b'S', name } => name,
            _ => return,
        };
        if name.is_empty() || parsed.iter().any(|p| same_name(p, name)) {
            return;
        }
        if let Some(s) = self.statements.peek(name) {
            // A check in flight counts whatever else is known: sending it marks the statement
            // prepared on the writer, and a batch routed again before its answer (any input
            // pumps the queue) went on without it — the statement ran in its new shape where
            // the primary refuses it (`test_red1_findings.py`'s result-type case).
            if s.check == WriterCheck::Pending {
                *pending = true;
            } else if !s.on_writer
                && s.shape != 0
                && s.check == WriterCheck::None
                && !due.iter().any(|d| same_name(d, name))
            {
                due.push(name.into());
            }
        }
    }

    /// The check of statement `name`'s shape on the writer: a hidden Parse under the client's
    /// name (so, as any statement prepared on the writer, it stays there), Describe and Sync.
    fn send_writer_check(&mut self, name: &[u8]) {
        let Some(w) = self.writer.as_ref().map(|w| w.conn) else {
            return;
        };
        let epoch = self.ddl_epoch();
        let Some(s) = self.statements.peek_mut(name) else {
            return;
        };
        s.on_writer = true;
        s.check = WriterCheck::Pending;
        s.epoch = epoch;
        let (rest, hash, shape) = (s.rest.clone(), s.hash, s.shape);
        self.out.send_backend_with(w, |o| {
            hidden::parse_as(o, name, &rest);
            hidden::describe_statement(o, name);
            hidden::sync(o);
        });
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::Parse, Who::Check, 0);
            wb.resp.push_shape(Req::DescribeStatement, Who::Check, 0);
            wb.resp.push(Req::Sync, Who::Check, 0);
            wb.parses.push_back(ParseNote::parse(0, name, Who::Check));
        }
        self.shape_notes.push(ShapeNote {
            conn: w,
            unit: 0,
            name: name.into(),
            hash,
            expect: shape,
            portal: None,
        });
        self.engine.stats().inc(Counter::StatementsPrepared);
    }

    /// The writer's answers to a shape check: swallowed. A failed Parse leaves the statement
    /// to be prepared before its use as before (its error then answers the client's message,
    /// as the primary's would); the check's ReadyForQuery lets the batch that waited for it go.
    pub(super) fn writer_check_message(
        &mut self,
        conn: ConnId,
        t: u8,
        body: &[u8],
        msg: BackendMessage<'_>,
        req: Option<Req>,
    ) {
        match msg {
            BackendMessage::ParseComplete => {
                if let Some(w) = self.writer.as_mut() {
                    super::statements::pop_parse(&mut w.parses);
                }
            }
            BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                self.apply_disp(conn, t, body, Disp::Forward);
                self.close_all();
                return;
            }
            BackendMessage::ErrorResponse(_) => {
                if req == Some(Req::Parse) {
                    if let Some(n) = self
                        .writer
                        .as_mut()
                        .and_then(|w| super::statements::pop_parse(&mut w.parses))
                    {
                        self.statements.clear_on_writer(&n.name);
                    }
                }
                // Its Describe (skipped, or the one that failed) is not answered.
                if let Some(at) = self
                    .shape_notes
                    .iter()
                    .position(|n| n.conn == conn && n.unit == 0)
                {
                    let n = self.shape_notes.remove(at);
                    if let Some(s) = self.statements.peek_mut(&n.name) {
                        if s.check == WriterCheck::Pending {
                            s.check = WriterCheck::Failed;
                        }
                    }
                }
                self.engine.stats().inc(Counter::HiddenFailures);
            }
            BackendMessage::ReadyForQuery(rfq) => {
                self.apply_disp(conn, t, body, Disp::Discard);
                self.writer_status = rfq.status;
                let checking = self
                    .writer
                    .as_ref()
                    .is_some_and(|w| w.resp.has_who(Who::Check));
                if !checking {
                    // A reader attempt's batch that waited for the check goes to the writer.
                    let waiting = self
                        .units
                        .iter()
                        .find_map(|u| u.check_then.map(|r| (u.id, r)));
                    if let Some((id, reason)) = waiting {
                        if let Some(u) = self.unit_mut(id) {
                            u.check_then = None;
                        }
                        self.send_orig_to_writer(id, reason);
                    }
                }
                self.pump(None);
                return;
            }
            _ => {}
        }
        self.apply_disp(conn, t, body, Disp::Discard);
    }

    /// Statement `name`, refused on the writer (its shape there is not the one the client was
    /// shown), is named by the client's message about to reach the writer: a hidden Close of it
    /// (so a later use checks again: the primary accepts it again once the shapes agree) and a
    /// Parse that fails go first; the server skips the rest of the batch up to its Sync, and
    /// the failure is answered with the primary's error.
    pub(super) fn refuse_on_writer(&mut self, id: u32, w: ConnId, name: &[u8]) {
        if let Some(s) = self.statements.peek_mut(name) {
            s.check = WriterCheck::None;
        }
        self.statements.clear_on_writer(name);
        self.out.send_backend_with(w, |o| {
            hidden::close_statement(o, name);
            hidden::parse_fixed(o, REFUSE_NAME, REFUSE_STATEMENT, &[]);
        });
        if let Some(wb) = self.writer.as_mut() {
            wb.resp.push(Req::Close, Who::Refuse, id);
            wb.resp.push(Req::Parse, Who::Refuse, id);
        }
    }

    /// The writer's answers to a refusal: the failing Parse's error is answered with the
    /// primary's (0A000); the rest is swallowed.
    pub(super) fn writer_refuse_message(
        &mut self,
        conn: ConnId,
        t: u8,
        body: &[u8],
        msg: BackendMessage<'_>,
        id: u32,
    ) {
        match msg {
            BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                self.apply_disp(conn, t, body, Disp::Forward);
                self.close_all();
            }
            BackendMessage::ErrorResponse(_) => {
                self.apply_disp(conn, t, body, Disp::Discard);
                self.out.send_client_with(|o| {
                    encode::server_error(
                        o,
                        b"0A000",
                        CHANGED_MESSAGE,
                        b"plancache.c",
                        b"RevalidateCachedQuery",
                    );
                });
                if let Some(u) = self.unit_mut(id) {
                    u.errored = true;
                    u.saw_error = true;
                }
                self.parses_skipped(0, id);
                self.writer_unit_maybe_done(id);
            }
            _ => self.apply_disp(conn, t, body, Disp::Discard),
        }
    }
}

/// The RowDescription answering a Describe read for its shape is read whole (a writer's rows
/// and descriptions otherwise pass by count).
pub(super) fn reads_shape(t: u8, len: usize) -> bool {
    t == tag::ROW_DESCRIPTION && len + 5 <= MAX_HELD
}
