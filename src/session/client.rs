//! The client stream: startup, framing, and the queue of undecided messages.

use super::*;

/// Which client message bodies the engine reads (everything else passes by count).
fn client_body_mode(t: u8, len: usize, limits: &crate::protocol::Limits) -> BodyMode {
    match t {
        tag::QUERY | tag::PARSE | tag::BIND if len <= limits.max_inspected_len => BodyMode::Inspect,
        tag::EXECUTE
        | tag::DESCRIBE
        | tag::CLOSE
        | tag::SYNC
        | tag::FLUSH
        | tag::TERMINATE
        | tag::COPY_DONE
            if len <= 4096 =>
        {
            BodyMode::Inspect
        }
        tag::COPY_FAIL if len <= limits.max_inspected_len => BodyMode::Inspect,
        _ => BodyMode::Stream,
    }
}

impl Session {
    /// Feeds bytes the client sent. Returns how many were consumed: all of them, unless the
    /// session already holds too many undecided pipelined messages — then keep the rest and feed
    /// it again after the next backend input.
    pub fn recv_client(&mut self, bytes: &[u8], now_ms: u64) -> Result<usize, SessionError> {
        self.check_input(now_ms)?;
        let mut pos = 0;
        while pos < bytes.len() && self.phase != Phase::Closed {
            if self.client_framer.at_boundary()
                && (self.queue.len() >= MAX_PENDING_MESSAGES
                    || self.queue_copied >= MAX_PENDING_COPY)
            {
                break;
            }
            let limits = self.config.limits;
            let mut framer = std::mem::replace(&mut self.client_framer, Framer::new(limits));
            let step = framer.step(&bytes[pos..], |t, len| client_body_mode(t, len, &limits));
            let (step, n) = match step {
                Ok(s) => s,
                Err(e) => {
                    self.client_framer = framer;
                    return Err(self.client_protocol_error(&e.to_string()));
                }
            };
            pos += n;
            let r = match step {
                Step::NeedMore => Ok(()),
                Step::Message { tag: 0, body } => match self.on_startup_packet(body) {
                    Ok(true) => {
                        framer.expect_untagged();
                        Ok(())
                    }
                    Ok(false) => Ok(()),
                    Err(e) => Err(e),
                },
                Step::Message { tag, body } => self.on_client_message(tag, body),
                Step::OpaqueStart { tag, body_len } => self.on_client_opaque_start(tag, body_len),
                Step::OpaqueBytes { n, .. } => {
                    self.on_client_opaque_bytes(n);
                    Ok(())
                }
            };
            self.client_framer = framer;
            r?;
        }
        Ok(pos)
    }

    pub(super) fn client_protocol_error(&mut self, what: &str) -> SessionError {
        self.engine.stats().inc(Counter::ProtocolErrors);
        let msg = format!("polarsplit: protocol violation by the client: {what}");
        self.fatal_to_client(b"08P01", msg.as_bytes());
        self.close_all();
        self.fail(SessionError::Protocol(format!("client: {what}")))
    }

    /// Stops everything: readers released or closed, the client closed.
    pub(super) fn close_all(&mut self) {
        for r in std::mem::take(&mut self.readers) {
            if !r.expect.is_empty() {
                if let Some(s) = r.server {
                    self.engine.readers().end_use(s);
                }
            }
            self.out.close_backend(r.conn);
        }
        self.pin = None;
        if let Some(w) = self.writer.take() {
            self.out.close_backend(w.conn);
        }
        self.out.close_client();
        self.phase = Phase::Closed;
        self.current = None;
    }

    /// Returns whether another untagged startup packet follows (after an encryption request).
    fn on_startup_packet(&mut self, body: &[u8]) -> Result<bool, SessionError> {
        let len = body.len() + 4;
        if self.phase != Phase::AwaitStartup {
            return Err(self.client_protocol_error("unexpected startup packet"));
        }
        let packet = match StartupPacket::parse(body) {
            Ok(p) => p,
            Err(e) => return Err(self.client_protocol_error(&e.to_string())),
        };
        self.out.discard_client(len);
        match packet {
            StartupPacket::SslRequest | StartupPacket::GssEncRequest => {
                self.out
                    .client_encryption_request(matches!(packet, StartupPacket::GssEncRequest));
                return Ok(true);
            }
            StartupPacket::Cancel { pid, secret } => {
                self.out.cancel_request(pid, secret);
                self.out.close_client();
                self.phase = Phase::Closed;
            }
            StartupPacket::Startup {
                major,
                minor,
                params,
            } => {
                let info = self.info.take().unwrap_or_default();
                let s = Startup::from_params(major, minor, &params, &self.config, &info);
                self.session_isolation = s.default_isolation;
                self.out
                    .connect_writer_with(|o| s.encode_for(Role::Writer, o));
                self.startup = Some(s);
                self.phase = Phase::AwaitWriter;
            }
        }
        Ok(false)
    }

    fn may_process_now(&self) -> bool {
        self.queue.is_empty() && self.current.is_none() && self.phase == Phase::Ready
    }

    fn on_client_message(&mut self, t: u8, body: &[u8]) -> Result<(), SessionError> {
        let msg = match FrontendMessage::parse(t, body) {
            Ok(m) => m,
            Err(e) => return Err(self.client_protocol_error(&e.to_string())),
        };
        let len = body.len() + 5;
        self.refresh_config();
        let info = match msg {
            FrontendMessage::Query { sql } => {
                match std::str::from_utf8(sql) {
                    Ok(s) => MsgInfo::Query {
                        class: Some(self.classifier.classify_in(
                            self.startup.as_ref().map_or(&[][..], |st| &st.database),
                            s,
                        )),
                        why_not: None,
                    },
                    Err(_) => MsgInfo::Query {
                        class: None,
                        why_not: Some(Reason::InvalidUtf8),
                    },
                }
            }
            FrontendMessage::Parse { statement, sql, .. } => MsgInfo::Parse {
                unnamed: statement.is_empty(),
                class: std::str::from_utf8(sql).ok().map(|s| {
                    self.classifier
                        .classify_in(self.startup.as_ref().map_or(&[][..], |st| &st.database), s)
                }),
            },
            FrontendMessage::Bind { portal, statement } => MsgInfo::Bind {
                unnamed: portal.is_empty() && statement.is_empty(),
            },
            FrontendMessage::Execute { portal, .. } => MsgInfo::Execute {
                unnamed: portal.is_empty(),
            },
            FrontendMessage::Describe { .. } => MsgInfo::Describe,
            FrontendMessage::Close { .. } => MsgInfo::Close,
            FrontendMessage::Sync => MsgInfo::Sync,
            FrontendMessage::Flush => MsgInfo::Flush,
            FrontendMessage::Terminate => MsgInfo::Terminate,
            FrontendMessage::CopyDone => MsgInfo::CopyDone,
            FrontendMessage::CopyFail { .. } => MsgInfo::CopyFail,
            FrontendMessage::CopyData { .. } => MsgInfo::CopyData,
            FrontendMessage::FunctionCall { .. } => MsgInfo::FunctionCall,
            FrontendMessage::Password { .. } => MsgInfo::Password,
            #[allow(unreachable_patterns)]
            _ => return Err(self.client_protocol_error("unsupported message")),
        };
        // Extended messages are kept until their batch is decided (a self-contained read may go
        // to a reader, which needs the bytes after the host's buffer moved on); a Query only when
        // it cannot be decided right now and may need its text later.
        let needs_copy = info.is_extended()
            || match &info {
                MsgInfo::Query { class: Some(c), .. } => {
                    c.is_replica_safe()
                        || c.statements()
                            .iter()
                            .any(|s| matches!(s.kind, Kind::Set { .. } | Kind::Reset { .. }))
                }
                _ => false,
            } && !self.may_process_now();
        let copy = if needs_copy {
            let mut v = Vec::with_capacity(len);
            wire(t, body, &mut v);
            self.queue_copied += len;
            Some(v)
        } else {
            None
        };
        self.queue.push_back(ClientMsg {
            len,
            arrived: len,
            acted: 0,
            info,
            copy,
        });
        self.pump(Some((t, body)));
        Ok(())
    }

    fn on_client_opaque_start(&mut self, t: u8, body_len: usize) -> Result<(), SessionError> {
        let info = match t {
            tag::QUERY => MsgInfo::Query {
                class: None,
                why_not: Some(Reason::QueryTooLarge),
            },
            tag::PARSE => MsgInfo::Parse {
                unnamed: false,
                class: None,
            },
            tag::BIND => MsgInfo::Bind { unnamed: false },
            tag::COPY_DATA => MsgInfo::CopyData,
            tag::COPY_FAIL => MsgInfo::CopyFail,
            tag::FUNCTION_CALL => MsgInfo::FunctionCall,
            tag::PASSWORD => MsgInfo::Password,
            _ if FrontendMessage::is_known_tag(t) => {
                return Err(self.client_protocol_error("control message too large"))
            }
            _ => return Err(self.client_protocol_error(&format!("unknown message type 0x{t:02x}"))),
        };
        self.queue.push_back(ClientMsg {
            len: body_len + 5,
            arrived: 5,
            acted: 0,
            info,
            copy: None,
        });
        self.pump(None);
        Ok(())
    }

    fn on_client_opaque_bytes(&mut self, n: usize) {
        let Some(last) = self.queue.back_mut() else {
            return;
        };
        last.arrived += n;
        // The head message may be streaming to its destination already.
        if self.queue.len() == 1 {
            if let Some(dest) = self.client_streaming {
                self.advance_head(dest);
                return;
            }
        }
        self.pump(None);
    }

    /// Acts on everything of the head message that arrived: forward to `dest`, or discard.
    /// Pops it once whole.
    pub(super) fn advance_head(&mut self, dest: Option<ConnId>) {
        let Some(head) = self.queue.front_mut() else {
            return;
        };
        let n = head.arrived - head.acted;
        head.acted = head.arrived;
        match dest {
            Some(conn) => self.out.forward_client(conn, n),
            None => self.out.discard_client(n),
        }
        if head.acted == head.len {
            self.client_streaming = None;
            self.pop_head();
        } else {
            self.client_streaming = Some(dest);
        }
    }

    pub(super) fn pop_head(&mut self) -> Option<ClientMsg> {
        let m = self.queue.pop_front()?;
        if let Some(c) = &m.copy {
            self.queue_copied -= c.len();
        }
        Some(m)
    }

    /// Decides and routes whatever can be decided now, in order.
    pub(super) fn pump(&mut self, fresh: Option<(u8, &[u8])>) {
        loop {
            if self.phase == Phase::Closed || self.client_streaming.is_some() {
                return;
            }
            let Some(head) = self.queue.front() else {
                return;
            };
            let fresh_here = if self.queue.len() == 1 { fresh } else { None };
            let writer = self.writer.as_ref().map(|w| w.conn);
            match (&head.info, self.phase) {
                (MsgInfo::Password, Phase::Auth) => {
                    let Some(w) = writer else { return };
                    self.advance_head(Some(w));
                    continue;
                }
                (_, Phase::Ready) => {}
                _ => return,
            }
            let Some(w) = writer else { return };
            if let Some(cur) = &self.current {
                // Only messages that belong to the statement in flight may pass it.
                let on_writer = cur.attempt == Attempt::Writer;
                match &head.info {
                    MsgInfo::CopyData | MsgInfo::CopyDone | MsgInfo::CopyFail
                        if on_writer && cur.copy_in =>
                    {
                        self.advance_head(Some(w));
                        continue;
                    }
                    i if i.is_extended() && on_writer && cur.extended_open => {
                        let is_sync = matches!(i, MsgInfo::Sync);
                        self.advance_head(Some(w));
                        if is_sync {
                            if let Some(c) = self.current.as_mut() {
                                c.extended_open = false;
                            }
                        }
                        continue;
                    }
                    _ => return,
                }
            }
            match &head.info {
                MsgInfo::CopyData | MsgInfo::CopyDone | MsgInfo::CopyFail | MsgInfo::Password => {
                    // Outside COPY the server ignores them; keep the stream in order.
                    self.advance_head(Some(w));
                }
                MsgInfo::Terminate => {
                    self.advance_head(Some(w));
                    self.release_pin(false);
                    self.out.close_client();
                    self.phase = Phase::Closed;
                    return;
                }
                MsgInfo::Query { .. } => self.start_query(fresh_here),
                MsgInfo::FunctionCall => {
                    self.start_writer_unit(
                        UnitKind::FunctionCall,
                        Decision::primary(Reason::NotAStatement),
                        None,
                        true,
                    );
                }
                _ => {
                    if !self.start_extended() {
                        return;
                    }
                }
            }
        }
    }
}
