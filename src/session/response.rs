//! Response tracking: which backend message answers which request, and whose it is.
//!
//! Every request the session sends on a backend connection — the client's own messages and the
//! engine's hidden ones — is pushed here in wire order. Each backend message is then matched
//! against the oldest unanswered request ([`Responses::on_message`]), which says whether it is
//! part of that request's answer, completes it, is an error (and, in the extended protocol, which
//! later requests the server will skip until its Sync), is the ReadyForQuery that ends a Query or
//! batch, or is asynchronous (notices, ParameterStatus, notifications may come at any time).
//!
//! This module knows the PostgreSQL v3 answer shapes and nothing of routing: the session decides
//! from the answer's owner and visibility what to forward, swallow or hold. Its table of shapes
//! is unit-tested below, message by message.

use std::collections::VecDeque;

use crate::protocol::tag;

/// Whose request it is: a client message (its answer is the client's) or one of the engine's
/// hidden ones (its answer never reaches the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Who {
    Client,
    /// The hidden statements in front of a reader statement: the LSN wait (W-4, E-3), the
    /// XID import of a split read (P-5), clearing an import left on a pooled reader (P-7).
    Wait,
    /// Bringing a reader's session state in line with the writer's (S-5).
    Settings,
    /// A statement prepared where a batch runs because it was parsed elsewhere (E-2).
    Prepare,
    /// The stock-dialect LSN probe (W-7).
    Probe,
    /// The capture of the writer's session state (S-5).
    Capture,
    /// The failing statement that aborts the writer's transaction (F-3).
    Abort,
    /// A Sync the engine adds to close a batch the client left open (E-1).
    Sync,
    /// A client statement prepared on the writer ahead of a command that names it (a
    /// `DEALLOCATE` of a statement that lived only on readers, E-2); its answer is swallowed.
    Mirror,
    /// The writer's transaction block touched while its reads run on readers (P-5); its answer
    /// is swallowed.
    Touch,
    /// The check of a statement's row shape on the writer before a batch that names it runs
    /// there (E-2): a hidden Parse under the client's name, Describe and Sync; swallowed.
    Check,
    /// A statement whose row shape changed is refused as the primary refuses it (E-2): a
    /// hidden Close of it and a Parse that fails, whose error the engine answers with 0A000.
    Refuse,
}

impl Who {
    pub(crate) fn is_client(self) -> bool {
        self == Who::Client
    }
}

/// How many kinds of `Who` there are (`Responses::count`).
const WHO_KINDS: usize = Who::Refuse as usize + 1;

/// A queue of requests this long counts them by `Who` ([`Responses::has_who`]) rather than
/// being scanned: a shorter scan costs about what the counts do, and an idle connection (no
/// request in flight) holds no box for them (issue 20).
const COUNT_FROM: usize = 32;

/// The shape of the answer a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Req {
    /// Startup and authentication: everything up to the first ReadyForQuery.
    Startup,
    /// A simple Query. Its first `hidden` statements are the engine's (the W-4 wait in front of
    /// the client's statement): their results, up to the `hidden`-th CommandComplete, are hidden.
    Query {
        hidden: u16,
    },
    Parse,
    Bind,
    /// Describe of a statement: ParameterDescription, then RowDescription or NoData.
    DescribeStatement,
    /// Describe of a portal: RowDescription or NoData.
    DescribePortal,
    Execute,
    Close,
    /// The engine's own Close, Parse and Bind messages in a row, this many (the probe's and the
    /// capture's, W-7, S-5): answered by as many CloseComplete, ParseComplete and BindComplete
    /// messages. One request in the queue rather than one per message, so a session's queue
    /// keeps the capacity its own requests need.
    Steps(u8),
    Sync,
    /// FunctionCall: FunctionCallResponse (or an error), then ReadyForQuery.
    FunctionCall,
    /// A message the engine answers itself, in its place in the stream: the ParseComplete of a
    /// statement already prepared on a reader, the CloseComplete of a Close the reader does
    /// not run (E-2). Taken with [`Responses::take_local`] when it reaches the front.
    Local(u8),
}

impl Req {
    /// Requests that end with their own ReadyForQuery.
    fn ends_with_rfq(self) -> bool {
        matches!(
            self,
            Req::Startup | Req::Query { .. } | Req::Sync | Req::FunctionCall
        )
    }

    /// What the server discards after an extended-protocol error until the next Sync: the
    /// extended requests, and a simple Query or FunctionCall sent before that Sync too
    /// (PostgreSQL reads every message up to the Sync and runs none; the primary alone answers
    /// nothing for them — an examiner's differential test, 2026-12-05).
    fn discarded_after_error(self) -> bool {
        self.skippable() || matches!(self, Req::Query { .. } | Req::FunctionCall)
    }

    /// Extended-protocol requests: after an error the server skips them until the next Sync.
    fn skippable(self) -> bool {
        matches!(
            self,
            Req::Parse
                | Req::Bind
                | Req::DescribeStatement
                | Req::DescribePortal
                | Req::Execute
                | Req::Close
                | Req::Steps(_)
                | Req::Local(_)
        )
    }
}

/// One request waiting for its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expected {
    pub req: Req,
    pub who: Who,
    /// The unit (client statement or batch) the request belongs to; 0 for engine work that
    /// belongs to no unit (probe, capture, abort).
    pub unit: u32,
    /// A Describe whose RowDescription or NoData is read for its row shape (E-2; the session's
    /// notes say what for).
    pub shape: bool,
    /// The client's CopyDone or CopyFail went to the server right after this request (before
    /// the next one): a COPY IN begun at or before it ends there, and a client Sync queued after
    /// it is one the server reads outside COPY IN mode, and answers (E-1).
    pub copy_end: bool,
}

/// How a backend message relates to the requests in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Asynchronous: NoticeResponse, ParameterStatus or NotificationResponse. It answers
    /// nothing (a notice belongs to whatever runs now: see [`Answer::who`]).
    Async,
    /// Part of the front request's answer (rows, descriptions, COPY traffic, …).
    Part,
    /// Completes the front request (ParseComplete, BindComplete, CommandComplete of an
    /// Execute, …). `first` marks the first message of an Execute's or Query's result
    /// (the first row, or the completion when there are none).
    Done,
    /// An ErrorResponse. In the extended protocol it completes the front request and the server
    /// skips every request after it up to the next Sync (`skipped` of them were removed,
    /// `named` of those the client's Binds and statement Describes: which message failed,
    /// counted from the end). In a Query or FunctionCall the request stays until its
    /// ReadyForQuery.
    Error { skipped: u16, named: u16 },
    /// The ReadyForQuery that ends the front request (a Query, Sync, FunctionCall or startup).
    Ready,
}

/// What [`Responses::on_message`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub kind: Kind,
    /// The request the message answers (for `Async`: the front request, if any).
    pub req: Option<Req>,
    /// Whose answer it is. For a Query with hidden statements in front, the hidden part's
    /// messages are `Who::Wait`-like: the request's own `who` applies only after them.
    pub who: Who,
    pub unit: u32,
    /// The message is the first of a result (RowDescription of a Query, or the first DataRow /
    /// completion of an Execute or of the client's part of a Query).
    pub result_begins: bool,
    /// It answers a Describe read for its row shape ([`Expected::shape`]).
    pub shape: bool,
}

/// A backend message that no request can explain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unexpected {
    pub tag: u8,
}

/// The requests in flight on one backend connection, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Responses {
    queue: VecDeque<Expected>,
    /// How many requests of each `Who` are in `queue` once it is long (made when it reaches
    /// [`COUNT_FROM`] requests, with one scan, and dropped when it runs empty):
    /// [`Self::has_who`] answers without a scan (a client pipelining thousands of statements
    /// has as many requests queued).
    count: Option<Box<[u32; WHO_KINDS]>>,
    /// Hidden statements of the front Query still to complete.
    hidden_left: u16,
    /// The front request's answer has begun (for `result_begins`).
    begun: bool,
    /// The front DescribeStatement got its ParameterDescription.
    described_params: bool,
    /// The server skips to a Sync not yet sent: an extended-protocol error was answered with no
    /// Sync in flight behind it (a Flush released the batch's answers). Requests pushed since
    /// are skipped by the server too — the ReadyForQuery answering the next Sync is theirs —
    /// and answers the engine gives itself among them are not given (E-1).
    skipping: bool,
    /// The front request (a client's Execute or Query) is in COPY IN and the client has not
    /// ended it yet: a Sync or Flush the client sends now is one the server ignores (E-1).
    copy_open: bool,
    /// Requests were dropped unanswered: sent after an extended-protocol error and before the
    /// next Sync, the server discarded them ([`Self::take_dropped`]).
    dropped: bool,
}

impl Responses {
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn front(&self) -> Option<&Expected> {
        self.queue.front()
    }

    /// Pops the requests the server discards after an extended-protocol error, up to the next
    /// Sync; returns how many extended ones there were, and how many of those were the client's
    /// Binds or statement Describes.
    fn drop_discarded(&mut self) -> (u16, u16) {
        let (mut skipped, mut named) = (0u16, 0u16);
        while let Some(n) = self.queue.front().copied() {
            if !n.req.discarded_after_error() {
                break;
            }
            if n.req.skippable() {
                skipped += 1;
            }
            if n.who == Who::Client && matches!(n.req, Req::Bind | Req::DescribeStatement) {
                named = named.saturating_add(1);
            }
            self.dropped = true;
            self.pop();
        }
        (skipped, named)
    }

    /// Whether requests were discarded unanswered since the last call: the units they belonged
    /// to may be over (a simple Query's, with nothing for the client; a batch's whose last
    /// answered request came before them).
    pub(crate) fn take_dropped(&mut self) -> bool {
        std::mem::take(&mut self.dropped)
    }

    /// The server skips everything up to a Sync not yet sent (an extended-protocol error was
    /// answered with none in flight behind it): nothing hidden may go there, its Sync would end
    /// the skip early (E-1).
    pub(crate) fn skipping(&self) -> bool {
        self.skipping
    }

    /// Whether any request of `unit` is still unanswered.
    pub(crate) fn has_unit(&self, unit: u32) -> bool {
        self.queue.iter().any(|e| e.unit == unit)
    }

    /// Whether every request still unanswered is the engine's own Sync closing an open batch
    /// (E-1): the client's part of that batch has had all its answers.
    pub(crate) fn only_hidden_sync_left(&self) -> bool {
        !self.queue.is_empty() && self.queue.iter().all(|e| e.who == Who::Sync)
    }

    /// Whether the one request still unanswered is the client's Sync: everything before it
    /// completed, and its only answer is the ReadyForQuery.
    pub(crate) fn only_client_sync_left(&self) -> bool {
        self.queue.len() == 1
            && self
                .queue
                .front()
                .is_some_and(|e| e.req == Req::Sync && e.who == Who::Client)
    }

    /// Whether a Sync of `unit` still waits for its ReadyForQuery.
    pub(crate) fn has_sync_of(&self, unit: u32) -> bool {
        self.queue
            .iter()
            .any(|e| e.req == Req::Sync && e.unit == unit)
    }

    /// Whether the server is in COPY IN for the front request and the client has not ended it:
    /// the server ignores a Sync or Flush it reads now (E-1), so none is queued.
    pub(crate) fn in_client_copy(&self) -> bool {
        self.copy_open
    }

    /// The client's CopyDone or CopyFail goes to the server behind what is queued: a COPY IN in
    /// progress, or one the front request will enter, ends there (E-1). Client Syncs queued
    /// before this point are read in COPY IN mode (ignored); those queued after it are answered.
    pub(crate) fn client_copy_end(&mut self) {
        self.copy_open = false;
        if let Some(e) = self.queue.back_mut() {
            e.copy_end = true;
        }
    }

    /// Whether a request of this kind of hidden work is in flight.
    /// Whether answers of requests in front of an Execute of `unit` are still to come (F-1: a
    /// cancel waits for them before it is forwarded).
    pub(crate) fn answers_before_execute(&self, unit: u32) -> bool {
        self.queue
            .iter()
            .position(|e| e.unit == unit && e.req == Req::Execute && e.who == Who::Client)
            .is_some_and(|i| i > 0)
    }

    pub(crate) fn has_who(&self, who: Who) -> bool {
        match self.count.as_deref() {
            Some(count) => {
                #[cfg(debug_assertions)]
                if self.queue.len() <= 256 {
                    debug_assert_eq!(
                        count[who as usize] > 0,
                        self.queue.iter().any(|e| e.who == who)
                    );
                }
                count[who as usize] > 0
            }
            None => {
                debug_assert!(self.queue.len() < COUNT_FROM);
                self.queue.iter().any(|e| e.who == who)
            }
        }
    }

    pub(crate) fn push(&mut self, req: Req, who: Who, unit: u32) {
        if self.queue.is_empty() {
            self.start_front(req);
        }
        if let Some(count) = self.count.as_deref_mut() {
            count[who as usize] += 1;
        }
        self.queue.push_back(Expected {
            req,
            who,
            unit,
            shape: false,
            copy_end: false,
        });
        if self.count.is_none() && self.queue.len() >= COUNT_FROM {
            // Long now: counted from here on, starting with one scan.
            let mut count = [0; WHO_KINDS];
            for e in &self.queue {
                count[e.who as usize] += 1;
            }
            self.count = Some(Box::new(count));
        }
    }

    /// [`Self::push`] of a Describe whose answer is read for its row shape (E-2).
    pub(crate) fn push_shape(&mut self, req: Req, who: Who, unit: u32) {
        self.push(req, who, unit);
        if let Some(e) = self.queue.back_mut() {
            e.shape = true;
        }
    }

    /// Forgets everything (the connection is gone).
    pub(crate) fn clear(&mut self) {
        self.queue.clear();
        self.count = None;
        self.hidden_left = 0;
        self.begun = false;
        self.described_params = false;
        self.skipping = false;
        self.copy_open = false;
    }

    fn start_front(&mut self, req: Req) {
        self.hidden_left = match req {
            Req::Query { hidden } => hidden,
            _ => 0,
        };
        self.begun = false;
        self.described_params = false;
    }

    fn pop(&mut self) -> Option<Expected> {
        // A COPY IN is the front request's: it ended with it.
        self.copy_open = false;
        let e = self.queue.pop_front();
        self.uncount(e.as_ref());
        if let Some(next) = self.queue.front() {
            let r = next.req;
            self.start_front(r);
        }
        e
    }

    /// `e` left the queue: it counts no more (the counts go when the queue runs empty).
    fn uncount(&mut self, e: Option<&Expected>) {
        if self.queue.is_empty() {
            self.count = None;
        } else if let (Some(count), Some(e)) = (self.count.as_deref_mut(), e) {
            count[e.who as usize] -= 1;
        }
    }

    /// The `who` of the front request's current part.
    fn front_who(&self, e: &Expected) -> Who {
        if self.hidden_left > 0 {
            Who::Wait
        } else {
            e.who
        }
    }

    /// The engine's own answer at the front, if any: the caller sends it as the answer.
    pub(crate) fn take_local(&mut self) -> Option<(u8, Expected)> {
        if self.skipping {
            // The server skips the messages these stand for: no answer of ours either.
            while self
                .queue
                .front()
                .is_some_and(|e| matches!(e.req, Req::Local(_)))
            {
                self.pop();
            }
            return None;
        }
        match self.queue.front() {
            Some(e) => match e.req {
                Req::Local(t) => {
                    let e = *e;
                    self.pop();
                    Some((t, e))
                }
                _ => None,
            },
            None => None,
        }
    }

    /// Matches one whole backend message (by its type byte) against the requests in flight and
    /// advances past what it completes.
    pub(crate) fn on_message(&mut self, t: u8) -> Result<Answer, Unexpected> {
        let front = self.queue.front().copied();
        if matches!(
            t,
            tag::NOTICE_RESPONSE | tag::PARAMETER_STATUS | tag::NOTIFICATION_RESPONSE
        ) && !matches!(front.map(|e| e.req), Some(Req::Startup))
        {
            return Ok(match front {
                Some(e) => Answer {
                    kind: Kind::Async,
                    req: Some(e.req),
                    who: self.front_who(&e),
                    unit: e.unit,
                    result_begins: false,
                    shape: false,
                },
                None => Answer {
                    kind: Kind::Async,
                    req: None,
                    who: Who::Client,
                    unit: 0,
                    result_begins: false,
                    shape: false,
                },
            });
        }
        let Some(e) = front else {
            return Err(Unexpected { tag: t });
        };
        let who = self.front_who(&e);
        let answer = |kind, result_begins| Answer {
            kind,
            req: Some(e.req),
            who,
            unit: e.unit,
            result_begins,
            shape: e.shape,
        };
        if t == tag::READY_FOR_QUERY {
            if self.skipping && e.req.discarded_after_error() {
                // What was sent after the error and before the Sync was skipped by the server:
                // this ReadyForQuery answers that Sync.
                self.drop_discarded();
                self.skipping = false;
                return match self.queue.front().copied() {
                    Some(s) if s.req == Req::Sync => {
                        self.pop();
                        Ok(Answer {
                            kind: Kind::Ready,
                            req: Some(s.req),
                            who: s.who,
                            unit: s.unit,
                            result_begins: false,
                            shape: false,
                        })
                    }
                    _ => Err(Unexpected { tag: t }),
                };
            }
            if !e.req.ends_with_rfq() {
                return Err(Unexpected { tag: t });
            }
            if e.req == Req::Sync {
                self.skipping = false;
            }
            self.pop();
            return Ok(answer(Kind::Ready, false));
        }
        if t == tag::ERROR_RESPONSE {
            if e.req.skippable() {
                self.pop();
                let (skipped, named) = self.drop_discarded();
                // No Sync in flight behind it: the server skips what comes next, up to one.
                self.skipping = self.queue.is_empty();
                return Ok(answer(Kind::Error { skipped, named }, false));
            }
            // A Query, Sync (an error raised at commit), FunctionCall or startup: its
            // ReadyForQuery follows. An error in a hidden statement aborts the rest of the Query,
            // and an error in a COPY ends its COPY IN: the server answers a Sync read after it.
            self.hidden_left = 0;
            self.copy_open = false;
            return Ok(answer(
                Kind::Error {
                    skipped: 0,
                    named: 0,
                },
                false,
            ));
        }
        match e.req {
            Req::Startup => Ok(answer(Kind::Part, false)),
            Req::Query { .. } => match t {
                tag::COPY_IN_RESPONSE => {
                    // Syncs the client sent during the COPY IN are ignored, as behind an
                    // Execute (below).
                    self.enter_copy_in();
                    let begins = who.is_client() && !self.begun;
                    if begins {
                        self.begun = true;
                    }
                    Ok(answer(Kind::Part, begins))
                }
                tag::ROW_DESCRIPTION
                | tag::DATA_ROW
                | tag::EMPTY_QUERY_RESPONSE
                | tag::COPY_OUT_RESPONSE
                | tag::COPY_BOTH_RESPONSE
                | tag::COPY_DATA
                | tag::COPY_DONE => {
                    // A RowDescription comes before the statement runs: the result begins with
                    // its first row (or completion), which keeps errors raised while it runs
                    // retryable (F-3).
                    let begins = who.is_client() && !self.begun && t != tag::ROW_DESCRIPTION;
                    if begins {
                        self.begun = true;
                    }
                    Ok(answer(Kind::Part, begins))
                }
                tag::COMMAND_COMPLETE => {
                    let begins = who.is_client() && !self.begun;
                    if self.hidden_left > 0 {
                        self.hidden_left -= 1;
                    } else if who.is_client() {
                        self.begun = true;
                    }
                    Ok(answer(Kind::Part, begins))
                }
                _ => Err(Unexpected { tag: t }),
            },
            Req::Parse => self.complete_if(t == tag::PARSE_COMPLETE, t, answer(Kind::Done, false)),
            Req::Bind => self.complete_if(t == tag::BIND_COMPLETE, t, answer(Kind::Done, false)),
            Req::Close => self.complete_if(t == tag::CLOSE_COMPLETE, t, answer(Kind::Done, false)),
            Req::Steps(n) => match t {
                tag::CLOSE_COMPLETE | tag::PARSE_COMPLETE | tag::BIND_COMPLETE if n > 1 => {
                    if let Some(e) = self.queue.front_mut() {
                        e.req = Req::Steps(n - 1);
                    }
                    Ok(answer(Kind::Part, false))
                }
                tag::CLOSE_COMPLETE | tag::PARSE_COMPLETE | tag::BIND_COMPLETE => {
                    self.pop();
                    Ok(answer(Kind::Done, false))
                }
                _ => Err(Unexpected { tag: t }),
            },
            Req::DescribeStatement => match t {
                tag::PARAMETER_DESCRIPTION if !self.described_params => {
                    self.described_params = true;
                    Ok(answer(Kind::Part, false))
                }
                tag::ROW_DESCRIPTION | tag::NO_DATA if self.described_params => {
                    self.pop();
                    Ok(answer(Kind::Done, false))
                }
                _ => Err(Unexpected { tag: t }),
            },
            Req::DescribePortal => self.complete_if(
                matches!(t, tag::ROW_DESCRIPTION | tag::NO_DATA),
                t,
                answer(Kind::Done, false),
            ),
            Req::Execute => match t {
                tag::COPY_IN_RESPONSE => {
                    self.enter_copy_in();
                    let begins = !self.begun;
                    self.begun = true;
                    Ok(answer(Kind::Part, begins))
                }
                tag::DATA_ROW
                | tag::COPY_OUT_RESPONSE
                | tag::COPY_BOTH_RESPONSE
                | tag::COPY_DATA
                | tag::COPY_DONE => {
                    let begins = !self.begun;
                    self.begun = true;
                    Ok(answer(Kind::Part, begins))
                }
                tag::COMMAND_COMPLETE | tag::EMPTY_QUERY_RESPONSE | tag::PORTAL_SUSPENDED => {
                    let begins = !self.begun;
                    self.pop();
                    Ok(answer(Kind::Done, begins))
                }
                _ => Err(Unexpected { tag: t }),
            },
            Req::FunctionCall => match t {
                tag::FUNCTION_CALL_RESPONSE => Ok(answer(Kind::Part, true)),
                _ => Err(Unexpected { tag: t }),
            },
            Req::Sync | Req::Local(_) => Err(Unexpected { tag: t }),
        }
    }

    /// The front request (a client's Execute or Query) entered COPY IN. The server ignores a
    /// Sync (or Flush) it reads in COPY IN mode, that is before the client's CopyDone or
    /// CopyFail: the client's Syncs queued right behind the request and before that end get no
    /// answer; a Sync the client sent after it is answered (E-1) — also when all of it was
    /// sent before this CopyInResponse arrived. With no end sent yet, the COPY IN stays open
    /// for the client's next messages ([`Self::in_client_copy`]).
    fn enter_copy_in(&mut self) {
        let mut ended = self.queue.front().is_some_and(|e| e.copy_end);
        while !ended
            && self
                .queue
                .get(1)
                .is_some_and(|n| n.req == Req::Sync && n.who == Who::Client)
        {
            let removed = self.queue.remove(1);
            self.uncount(removed.as_ref());
            ended = removed.is_some_and(|n| n.copy_end);
        }
        self.copy_open = !ended && !self.queue.iter().any(|e| e.copy_end);
    }

    fn complete_if(&mut self, ok: bool, t: u8, a: Answer) -> Result<Answer, Unexpected> {
        if ok {
            self.pop();
            Ok(a)
        } else {
            Err(Unexpected { tag: t })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An extended-protocol error's answer kind: `skipped` requests removed, `named` of them
    /// the client's Binds and statement Describes.
    fn err(skipped: u16, named: u16) -> Kind {
        Error { skipped, named }
    }

    fn with(reqs: &[(Req, Who, u32)]) -> Responses {
        let mut r = Responses::default();
        for &(q, w, u) in reqs {
            r.push(q, w, u);
        }
        r
    }

    /// Feeds tags; returns (kind, who, unit, begins) per message, or the unexpected tag.
    fn feed(r: &mut Responses, tags: &str) -> Vec<Result<(Kind, Who, u32, bool), u8>> {
        tags.bytes()
            .map(|t| {
                r.on_message(t)
                    .map(|a| (a.kind, a.who, a.unit, a.result_begins))
                    .map_err(|u| u.tag)
            })
            .collect()
    }

    use Kind::*;
    use Who::*;

    #[test]
    fn startup_takes_everything_until_rfq() {
        let mut r = with(&[(Req::Startup, Client, 0)]);
        let got = feed(&mut r, "RSSKNZ");
        assert!(got[..5]
            .iter()
            .all(|g| matches!(g, Ok((Part, Client, 0, _)))));
        assert_eq!(got[5], Ok((Ready, Client, 0, false)));
        assert!(r.is_empty());
    }

    #[test]
    fn simple_query_with_hidden_prefix() {
        // Three hidden SETs (W-4), then the client's SELECT.
        let mut r = with(&[(Req::Query { hidden: 3 }, Client, 7)]);
        let got = feed(&mut r, "CCCNTDDCZ");
        assert_eq!(got[0], Ok((Part, Wait, 7, false)));
        assert_eq!(got[2], Ok((Part, Wait, 7, false)));
        // A notice after the hidden part belongs to the client.
        assert_eq!(got[3], Ok((Async, Client, 7, false)));
        // The RowDescription does not begin the result: the first row does.
        assert_eq!(got[4], Ok((Part, Client, 7, false)));
        assert_eq!(got[5], Ok((Part, Client, 7, true)));
        assert_eq!(got[7], Ok((Part, Client, 7, false)));
        assert_eq!(got[8], Ok((Ready, Client, 7, false)));
    }

    #[test]
    fn notice_inside_hidden_part_is_hidden() {
        let mut r = with(&[(Req::Query { hidden: 1 }, Client, 1)]);
        assert_eq!(feed(&mut r, "N")[0], Ok((Async, Wait, 1, false)));
    }

    #[test]
    fn error_in_hidden_prefix_aborts_the_query() {
        let mut r = with(&[(Req::Query { hidden: 3 }, Client, 1)]);
        let got = feed(&mut r, "CEZ");
        assert_eq!(got[1], Ok((err(0, 0), Wait, 1, false)));
        assert_eq!(got[2], Ok((Ready, Client, 1, false)));
    }

    #[test]
    fn extended_batch_shapes() {
        let mut r = with(&[
            (Req::Parse, Client, 1),
            (Req::Bind, Client, 1),
            (Req::DescribePortal, Client, 1),
            (Req::Execute, Client, 1),
            (Req::Sync, Client, 1),
        ]);
        let got = feed(&mut r, "12TDDCZ");
        assert_eq!(got[0], Ok((Done, Client, 1, false)));
        assert_eq!(got[1], Ok((Done, Client, 1, false)));
        assert_eq!(got[2], Ok((Done, Client, 1, false)));
        assert_eq!(got[3], Ok((Part, Client, 1, true)));
        assert_eq!(got[4], Ok((Part, Client, 1, false)));
        assert_eq!(got[5], Ok((Done, Client, 1, false)));
        assert_eq!(got[6], Ok((Ready, Client, 1, false)));
        assert!(r.is_empty());
    }

    #[test]
    fn w7_s5_steps_are_one_request_answered_by_as_many_completions() {
        // The probe's Close, Parse, Bind, Close (one request), its Execute, the Sync.
        let mut r = with(&[
            (Req::Steps(4), Probe, 0),
            (Req::Execute, Probe, 0),
            (Req::Sync, Probe, 0),
        ]);
        assert_eq!(r.len(), 3);
        let got = feed(&mut r, "3123DCZ");
        assert!(got[..3].iter().all(|g| *g == Ok((Part, Probe, 0, false))));
        assert_eq!(got[3], Ok((Done, Probe, 0, false)));
        assert_eq!(got[5], Ok((Done, Probe, 0, false)));
        assert_eq!(got[6], Ok((Ready, Probe, 0, false)));
        assert!(r.is_empty());
        // Anything but a completion among them is unexplained.
        let mut r = with(&[(Req::Steps(2), Capture, 0), (Req::Sync, Capture, 0)]);
        assert_eq!(
            feed(&mut r, "3D"),
            vec![Ok((Part, Capture, 0, false)), Err(b'D')]
        );
        // An error among them ends them, and the server skips the rest to the Sync.
        let mut r = with(&[
            (Req::Steps(4), Capture, 0),
            (Req::Execute, Capture, 0),
            (Req::Sync, Capture, 0),
        ]);
        let got = feed(&mut r, "31EZ");
        assert!(
            matches!(got[2], Ok((Error { .. }, Capture, 0, false))),
            "{got:?}"
        );
        assert_eq!(got[3], Ok((Ready, Capture, 0, false)));
        assert!(r.is_empty());
    }

    #[test]
    fn describe_statement_needs_parameters_first() {
        let mut r = with(&[(Req::DescribeStatement, Client, 1), (Req::Sync, Client, 1)]);
        assert_eq!(
            feed(&mut r, "tn"),
            vec![Ok((Part, Client, 1, false)), Ok((Done, Client, 1, false))]
        );
        let mut r = with(&[(Req::DescribeStatement, Client, 1)]);
        assert_eq!(feed(&mut r, "T"), vec![Err(b'T')]);
    }

    #[test]
    fn execute_without_rows_begins_at_its_completion() {
        let mut r = with(&[(Req::Execute, Client, 1), (Req::Execute, Client, 1)]);
        let got = feed(&mut r, "CsDC");
        assert_eq!(got[0], Ok((Done, Client, 1, true)));
        // PortalSuspended ends a row-limited Execute.
        let mut r = with(&[(Req::Execute, Client, 1)]);
        assert_eq!(feed(&mut r, "Ds")[1], Ok((Done, Client, 1, false)));
        assert_eq!(got[1], Ok((Done, Client, 1, true)));
    }

    #[test]
    fn error_skips_to_sync_and_only_that_batch() {
        let mut r = with(&[
            (Req::Parse, Wait, 1),
            (Req::Bind, Wait, 1),
            (Req::Execute, Wait, 1),
            (Req::Parse, Client, 1),
            (Req::Bind, Client, 1),
            (Req::Execute, Client, 1),
            (Req::Sync, Client, 1),
            (Req::Parse, Client, 2),
            (Req::Sync, Client, 2),
        ]);
        let got = feed(&mut r, "12E");
        assert_eq!(got[2], Ok((err(3, 1), Wait, 1, false)));
        assert_eq!(r.front().map(|e| e.req), Some(Req::Sync));
        let got = feed(&mut r, "Z1Z");
        assert_eq!(got[0], Ok((Ready, Client, 1, false)));
        assert_eq!(got[1], Ok((Done, Client, 2, false)));
        assert_eq!(got[2], Ok((Ready, Client, 2, false)));
    }

    #[test]
    fn async_messages_answer_nothing() {
        let mut r = with(&[(Req::Execute, Client, 3)]);
        assert_eq!(feed(&mut r, "A")[0], Ok((Async, Client, 3, false)));
        assert_eq!(r.len(), 1);
        let mut idle = Responses::default();
        assert_eq!(feed(&mut idle, "AS")[1], Ok((Async, Client, 0, false)));
        assert_eq!(feed(&mut idle, "C"), vec![Err(b'C')]);
    }

    #[test]
    fn function_call_and_copy() {
        let mut r = with(&[(Req::FunctionCall, Client, 1)]);
        assert_eq!(feed(&mut r, "VZ")[1], Ok((Ready, Client, 1, false)));
        let mut r = with(&[(Req::Query { hidden: 0 }, Client, 1)]);
        let got = feed(&mut r, "GCZ");
        assert_eq!(got[0], Ok((Part, Client, 1, true)));
        let mut r = with(&[(Req::Query { hidden: 0 }, Client, 1)]);
        assert_eq!(
            feed(&mut r, "Hdd"),
            vec![
                Ok((Part, Client, 1, true)),
                Ok((Part, Client, 1, false)),
                Ok((Part, Client, 1, false))
            ]
        );
    }

    #[test]
    fn wrong_answers_are_unexpected() {
        let mut r = with(&[(Req::Parse, Client, 1)]);
        assert_eq!(feed(&mut r, "2"), vec![Err(b'2')]);
        let mut r = with(&[(Req::Sync, Client, 1)]);
        assert_eq!(feed(&mut r, "C"), vec![Err(b'C')]);
        let mut r = with(&[(Req::Execute, Client, 1)]);
        assert_eq!(feed(&mut r, "Z"), vec![Err(b'Z')]);
    }

    #[test]
    fn e1_after_an_error_with_no_sync_in_flight_what_follows_is_skipped_to_the_next_sync() {
        // Parse/Bind/Execute/Flush, the error; then more of the batch and its Sync: the server
        // skips them and answers the Sync alone.
        let mut r = with(&[
            (Req::Parse, Client, 1),
            (Req::Bind, Client, 1),
            (Req::Execute, Client, 1),
        ]);
        assert_eq!(
            feed(&mut r, "12E"),
            vec![
                Ok((Done, Client, 1, false)),
                Ok((Done, Client, 1, false)),
                Ok((err(0, 0), Client, 1, false)),
            ]
        );
        for (q, w) in [
            (Req::Parse, Prepare),
            (Req::Parse, Client),
            (Req::Local(b'1'), Client),
            (Req::Bind, Client),
            (Req::Execute, Client),
            (Req::Sync, Client),
        ] {
            r.push(q, w, 1);
        }
        assert_eq!(
            r.take_local(),
            None,
            "no answer of ours for a skipped message"
        );
        assert_eq!(feed(&mut r, "Z"), vec![Ok((Ready, Client, 1, false))]);
        assert!(r.is_empty());
        // Skipping ends at that Sync: the next batch is answered as usual.
        r.push(Req::Parse, Client, 2);
        r.push(Req::Sync, Client, 2);
        assert_eq!(
            feed(&mut r, "1Z"),
            vec![Ok((Done, Client, 2, false)), Ok((Ready, Client, 2, false))]
        );
        // With the Sync in flight behind the error, nothing changes: the RFQ is the Sync's.
        let mut r = with(&[(Req::Execute, Client, 1), (Req::Sync, Who::Sync, 1)]);
        assert_eq!(
            feed(&mut r, "EZ"),
            vec![
                Ok((err(0, 0), Client, 1, false)),
                Ok((Ready, Who::Sync, 1, false))
            ]
        );
        // An RFQ where no Sync was sent is still a violation.
        let mut r = with(&[(Req::Execute, Client, 1)]);
        feed(&mut r, "E");
        r.push(Req::Bind, Client, 1);
        assert_eq!(feed(&mut r, "Z"), vec![Err(b'Z')]);
    }

    #[test]
    fn e1_copy_in_ignores_only_the_syncs_sent_before_the_copy_ends() {
        // Parse/Bind/Execute, Sync, CopyData, CopyDone, Sync, all sent before CopyInResponse:
        // the first Sync is read in COPY IN mode, the second is answered.
        let mut r = with(&[
            (Req::Parse, Client, 1),
            (Req::Bind, Client, 1),
            (Req::Execute, Client, 1),
            (Req::Sync, Client, 1),
        ]);
        r.client_copy_end();
        r.push(Req::Sync, Client, 2);
        assert_eq!(
            feed(&mut r, "12GCZ"),
            vec![
                Ok((Done, Client, 1, false)),
                Ok((Done, Client, 1, false)),
                Ok((Part, Client, 1, true)),
                Ok((Done, Client, 1, false)),
                Ok((Ready, Client, 2, false)),
            ]
        );
        assert!(r.is_empty() && !r.in_client_copy());
        // The data and its Sync with no Sync before: that Sync is answered.
        let mut r = with(&[(Req::Execute, Client, 1)]);
        r.client_copy_end();
        r.push(Req::Sync, Client, 1);
        assert_eq!(feed(&mut r, "GCZ")[2], Ok((Ready, Client, 1, false)));
        // No end sent yet: the COPY IN stays open for the client until its CopyDone, or until
        // the server leaves it on an error.
        let mut r = with(&[(Req::Execute, Client, 1), (Req::Sync, Client, 1)]);
        feed(&mut r, "G");
        assert!(r.in_client_copy() && !r.has_sync_of(1));
        r.client_copy_end();
        assert!(!r.in_client_copy());
        let mut r = with(&[
            (Req::Query { hidden: 0 }, Client, 1),
            (Req::Sync, Client, 2),
        ]);
        feed(&mut r, "G");
        assert!(
            r.in_client_copy() && !r.has_sync_of(2),
            "whatever started it"
        );
        feed(&mut r, "E");
        assert!(!r.in_client_copy());
    }

    #[test]
    fn local_answers_wait_their_turn_and_are_skipped_after_errors() {
        let mut r = with(&[
            (Req::Bind, Client, 1),
            (Req::Local(b'1'), Client, 1),
            (Req::Execute, Client, 1),
            (Req::Sync, Client, 1),
        ]);
        assert_eq!(r.take_local(), None);
        feed(&mut r, "2");
        assert_eq!(r.take_local().map(|(t, _)| t), Some(b'1'));
        let mut r = with(&[
            (Req::Bind, Client, 1),
            (Req::Local(b'3'), Client, 1),
            (Req::Sync, Client, 1),
        ]);
        assert_eq!(feed(&mut r, "E")[0], Ok((err(1, 0), Client, 1, false)));
        assert_eq!(r.take_local(), None);
    }

    #[test]
    fn hidden_requests_keep_their_owner() {
        let mut r = with(&[
            (Req::Parse, Probe, 0),
            (Req::Bind, Probe, 0),
            (Req::Execute, Probe, 0),
            (Req::Sync, Probe, 0),
        ]);
        let got = feed(&mut r, "12DCZ");
        assert!(got.iter().all(|g| matches!(g, Ok((_, Probe, 0, _)))));
        assert!(r.is_empty());
    }
}
