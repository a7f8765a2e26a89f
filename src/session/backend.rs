//! Backend streams: what each message from the writer or a reader means for the client
//! (forward, swallow, hold, rewrite — P-6, P-8) and for the session's state.

use super::*;

/// Which backend message bodies the engine reads; rows and descriptions pass by count.
fn backend_body_mode(t: u8, len: usize, limits: &crate::protocol::Limits) -> BodyMode {
    // Authentication exchanges (SASL, GSS: longer than the 8 bytes of a code and an MD5 salt)
    // are no routing business: streamed, never copied, so no byte of them stays in a buffer.
    if t == tag::AUTHENTICATION && len > 8 {
        return BodyMode::Stream;
    }
    let small = len <= limits.max_inspected_len;
    if small
        && (BackendMessage::needs_body(t)
            || t == tag::PARAMETER_DESCRIPTION
            || t == tag::NOTIFICATION_RESPONSE)
    {
        BodyMode::Inspect
    } else {
        BodyMode::Stream
    }
}

/// Most SET/RESET statements, and most bytes of them, remembered inside one transaction.
const MAX_PENDING_SETTINGS: usize = 64;
const MAX_PENDING_SETTINGS_BYTES: usize = 64 << 10;

/// What to do with one whole backend message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disp {
    Forward,
    Discard,
    /// Discard from the stream, keep a copy to send later (held notices).
    Hold,
    /// Discard, and keep a copy to send after the current reader statement (writer async).
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
        if self.backend_index(conn).is_none() {
            return Err(self.fail(SessionError::UnknownConnection(conn)));
        }
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
        // The framer is taken out for the whole input (a message body may borrow it) and put
        // back at the end if the connection is still in use.
        let mut framer = std::mem::replace(&mut self.backend_mut(i0).framer, Framer::new(limits));
        let mut pos = 0;
        let mut result = Ok(());
        while pos < bytes.len() {
            let Some(i) = self.backend_index(conn) else {
                // The connection was dropped while processing (it broke): nothing more from it
                // is meaningful.
                self.out.discard_backend(conn, bytes.len() - pos);
                break;
            };
            // The probe's one row is read; every other row passes by count.
            let probe_rows = i == 0
                && self
                    .backend(i)
                    .expect
                    .front()
                    .is_some_and(|e| e.kind == ExpectKind::Probe);
            let step = framer.step(&bytes[pos..], |t, len| {
                if probe_rows && t == tag::DATA_ROW && len <= 1024 {
                    BodyMode::Inspect
                } else if i > 0 && t == tag::ROW_DESCRIPTION && len + 5 <= MAX_HELD {
                    // A reader's RowDescription is held until the first row or the command's
                    // end: PostgreSQL sends it before executing, so holding it keeps errors
                    // raised during execution retryable (F-3).
                    BodyMode::Inspect
                } else {
                    backend_body_mode(t, len, &limits)
                }
            });
            let (step, n) = match step {
                Ok(s) => s,
                Err(e) => {
                    result = self.backend_protocol_error(conn, &e.to_string());
                    break;
                }
            };
            pos += n;
            let r = match step {
                Step::NeedMore => Ok(()),
                Step::Message { tag, body } => self.on_backend_message(conn, tag, body),
                Step::OpaqueStart { tag, body_len } => {
                    self.on_backend_opaque_start(conn, tag, body_len);
                    Ok(())
                }
                Step::OpaqueBytes { n, done } => {
                    self.on_backend_opaque_bytes(conn, n, done);
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
        result
    }

    /// A backend broke the protocol: a writer ends the session, a reader is treated as lost.
    fn backend_protocol_error(&mut self, conn: ConnId, what: &str) -> Result<(), SessionError> {
        self.engine.stats().inc(Counter::ProtocolErrors);
        let is_writer = self.backend_index(conn) == Some(0);
        if is_writer {
            let msg = format!("polarsplit: protocol violation by the primary: {what}");
            self.fatal_to_client(b"08P01", msg.as_bytes());
            self.close_all();
            return Err(self.fail(SessionError::Protocol(format!("writer: {what}"))));
        }
        self.last_error = format!("reader connection {conn}: protocol violation: {what}");
        self.out.close_backend(conn);
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
                    let mut w = Backend {
                        conn,
                        server: None,
                        ext,
                        framer: Framer::new(self.config.limits),
                        // A statement, and at most a probe or an abort behind it.
                        expect: VecDeque::with_capacity(2),
                        streaming: None,
                        held_fwd: 0,
                        partial_out: false,
                        clean_on_success: false,
                        settings_pending: false,
                        dirty: false,
                    };
                    w.expect.push_back(Expect::new(ExpectKind::Auth));
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
            Event::ConnectionLost => match self.backend_index(conn) {
                None => Err(SessionError::UnknownConnection(conn)),
                Some(0) => {
                    self.fatal_to_client(
                        b"08006",
                        b"polarsplit: the connection to the primary was lost",
                    );
                    self.writer = None;
                    self.close_all();
                    Ok(())
                }
                Some(_) => {
                    self.reader_lost(conn);
                    Ok(())
                }
            },
        };
        r.map_err(|e| self.fail(e))
    }

    /// A reader connection is gone (host event, FATAL error, protocol violation).
    fn reader_lost(&mut self, conn: ConnId) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        if i == 0 {
            return;
        }
        if self.client_mid_message() {
            // Half of a large message (this reader's, or the writer's) reached the client: its
            // stream cannot be repaired.
            self.last_error = format!(
                "reader connection {conn} broke in the middle of a message forwarded to the client"
            );
            self.engine.stats().inc(Counter::FailuresDisconnected);
            self.close_all();
            return;
        }
        let b = self.readers.remove(i - 1);
        if self.pin.is_some_and(|p| p.conn == conn) {
            self.pin = None;
            self.engine.stats().inc(Counter::PinsReleased);
        }
        let Some(e) = b.expect.into_iter().next() else {
            return;
        };
        if let Some(s) = b.server {
            self.engine.readers().end_use(s);
        }
        // The current statement's attempt broke.
        let (class, rec, text) = match e.failure {
            Some((c, r)) if c == FailureClass::ConnectionLost => (c, r, e.failure_text),
            _ => {
                let progress = self.progress(e.result_started, false);
                let rec = policy::decide(FailureClass::ConnectionLost, &progress, &self.config);
                (
                    FailureClass::ConnectionLost,
                    rec,
                    Some(format!("reader connection {conn} broke")),
                )
            }
        };
        let rec = if rec == Recovery::ForwardOriginal {
            // Nothing of a broken connection can be forwarded.
            Recovery::EngineError
        } else {
            rec
        };
        self.recover(class, rec, text);
    }

    fn progress(&self, result_forwarded: bool, in_hidden: bool) -> Progress {
        let (generation_changed, reader_retries) = match &self.current {
            Some(c) => (
                self.engine.writer_view(self.writer_hostgroup).generation != c.generation,
                c.reader_retries,
            ),
            None => (false, 0),
        };
        Progress {
            result_forwarded,
            in_hidden,
            in_txn: self.txn.active,
            generation_changed,
            reader_retries,
        }
    }

    fn apply_disp(&mut self, conn: ConnId, t: u8, body: &[u8], disp: Disp) {
        let n = body.len() + 5;
        match disp {
            Disp::Forward => self.out.forward_backend(conn, n),
            Disp::Discard => self.out.discard_backend(conn, n),
            Disp::Hold => {
                self.out.discard_backend(conn, n);
                if self.held.len() + n <= MAX_HELD {
                    wire(t, body, &mut self.held);
                }
            }
            Disp::HoldWriter => {
                self.out.discard_backend(conn, n);
                if self.held_writer.len() + n <= MAX_HELD {
                    wire(t, body, &mut self.held_writer);
                }
            }
        }
    }

    fn on_backend_message(&mut self, conn: ConnId, t: u8, body: &[u8]) -> Result<(), SessionError> {
        let Some(i) = self.backend_index(conn) else {
            return Ok(());
        };
        let ext = self.backend(i).ext;
        let msg = match BackendMessage::parse(t, body, ext) {
            Ok(m) => m,
            Err(e) => return self.backend_protocol_error(conn, &e.to_string()),
        };
        if i == 0 {
            self.writer_message(conn, t, body, msg)
        } else {
            self.reader_message(conn, i, t, body, msg);
            Ok(())
        }
    }

    fn reader_in_flight(&self) -> bool {
        matches!(
            self.current.as_ref().map(|c| c.attempt),
            Some(Attempt::Reader { .. } | Attempt::AwaitReader { .. })
        )
    }

    fn writer_message(
        &mut self,
        conn: ConnId,
        t: u8,
        body: &[u8],
        msg: BackendMessage<'_>,
    ) -> Result<(), SessionError> {
        if matches!(msg, BackendMessage::ReadyForQuery(_))
            && self.client_streaming == Some(Some(conn))
        {
            // A server answers a request only once it has read it whole: engine-built bytes
            // sent now (a probe, a retry) would land inside the client's message.
            return self
                .backend_protocol_error(conn, "ReadyForQuery before the client's message ended");
        }
        let front = self
            .writer
            .as_ref()
            .and_then(|w| w.expect.front())
            .map(|e| e.kind);
        match front {
            Some(ExpectKind::Auth) => {
                match msg {
                    BackendMessage::ReadyForQuery(rfq) => {
                        self.writer_expect_done();
                        self.phase = Phase::Ready;
                        self.writer_status = rfq.status;
                        // The session has observed nothing yet: the writer's position only
                        // informs `global` mode.
                        if let LsnField::At(l) = rfq.lsn {
                            self.engine.observe_writer_lsn(
                                self.writer_hostgroup,
                                self.lsn.generation,
                                l,
                            );
                        }
                        self.writer_rfq_to_client(conn, body, rfq);
                        self.pump(None);
                    }
                    BackendMessage::BackendKeyData { pid, secret } => {
                        self.backend_key = Some((pid, secret.into()));
                        self.apply_disp(conn, t, body, Disp::Forward);
                    }
                    BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                        // Authentication failed: the client gets the server's own error.
                        self.apply_disp(conn, t, body, Disp::Forward);
                        self.close_all();
                    }
                    _ => self.apply_disp(conn, t, body, Disp::Forward),
                }
                Ok(())
            }
            Some(ExpectKind::Abort) => {
                match msg {
                    BackendMessage::ReadyForQuery(rfq) => {
                        self.writer_expect_done();
                        self.apply_disp(conn, t, body, Disp::Discard);
                        self.writer_status = rfq.status;
                        if rfq.status == TxStatus::Failed {
                            self.txn.failed = true;
                        }
                        self.update_txn_marker(&rfq);
                        self.client_rfq(rfq.status);
                        self.finish_unit();
                    }
                    BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                        self.apply_disp(conn, t, body, Disp::Forward);
                    }
                    _ => self.apply_disp(conn, t, body, Disp::Discard),
                }
                Ok(())
            }
            Some(ExpectKind::Probe) => {
                match msg {
                    BackendMessage::DataRow { .. } => {
                        self.probe_lsn = probe_value(body);
                        self.apply_disp(conn, t, body, Disp::Discard);
                    }
                    BackendMessage::ReadyForQuery(rfq) => {
                        self.writer_expect_done();
                        self.apply_disp(conn, t, body, Disp::Discard);
                        self.writer_status = rfq.status;
                        if let Some(l) = self.probe_lsn.take() {
                            // Taken after the commit was acknowledged: it bounds the commit
                            // from above, so it is the write's position (issue 11).
                            if self.write_ack_ms.is_some() {
                                self.lsn.writer_positioned(l, true);
                                self.write_ack_ms = None;
                                self.engine.stats().inc(Counter::TargetsLearned);
                            }
                            self.engine.observe_writer_lsn(
                                self.writer_hostgroup,
                                self.lsn.generation,
                                l,
                            );
                        }
                    }
                    BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                        self.apply_disp(conn, t, body, Disp::Forward);
                    }
                    _ => self.apply_disp(conn, t, body, Disp::Discard),
                }
                Ok(())
            }
            Some(ExpectKind::Statement) => {
                match msg {
                    BackendMessage::ReadyForQuery(rfq) => {
                        self.writer_expect_done();
                        self.writer_statement_done(conn, body, rfq);
                    }
                    BackendMessage::ErrorResponse(_) => {
                        if let Some(c) = self.current.as_mut() {
                            c.errored = true;
                        }
                        self.apply_disp(conn, t, body, Disp::Forward);
                    }
                    BackendMessage::CopyInResponse { .. }
                    | BackendMessage::CopyBothResponse { .. } => {
                        if let Some(c) = self.current.as_mut() {
                            c.copy_in = true;
                        }
                        self.apply_disp(conn, t, body, Disp::Forward);
                        self.pump(None);
                    }
                    _ => self.apply_disp(conn, t, body, Disp::Forward),
                }
                Ok(())
            }
            None => {
                // Not answering anything: asynchronous messages.
                match msg {
                    BackendMessage::NotificationResponse { .. }
                    | BackendMessage::NoticeResponse(_)
                    | BackendMessage::ParameterStatus { .. } => {
                        let d = if self.reader_in_flight() {
                            Disp::HoldWriter
                        } else {
                            Disp::Forward
                        };
                        self.apply_disp(conn, t, body, d);
                        Ok(())
                    }
                    BackendMessage::ErrorResponse(f) if f.is_fatal() => {
                        // e.g. administrator shutdown: the client hears it, the session ends.
                        self.apply_disp(conn, t, body, Disp::Forward);
                        self.close_all();
                        Ok(())
                    }
                    _ => self
                        .backend_protocol_error(conn, "unexpected message from an idle primary")
                        .map(|_| ()),
                }
            }
        }
    }

    /// The writer's RFQ to the client: forwarded when it already is what the client must see,
    /// otherwise rewritten (P-8: no extended RFQ ever reaches a client that did not ask).
    fn writer_rfq_to_client(&mut self, conn: ConnId, body: &[u8], rfq: Rfq<'_>) {
        let wants_lsn = self.startup.as_ref().is_some_and(|s| s.client_wants_lsn);
        if body.len() == 1 && !wants_lsn && self.held_writer.is_empty() {
            self.out.forward_backend(conn, body.len() + 5);
        } else {
            self.out.discard_backend(conn, body.len() + 5);
            self.client_rfq(rfq.status);
        }
    }

    fn update_txn_marker(&mut self, rfq: &Rfq<'_>) {
        if !self.txn.active {
            return;
        }
        self.txn.lsn = rfq.lsn.lsn().unwrap_or(Lsn::ZERO);
        match rfq.xact {
            Some(x) => {
                self.txn.marker = Some(x.marker);
                match XidList::parse(x.xids) {
                    Ok(list) => {
                        self.txn.xids.clear();
                        self.txn.xids.push_str(list.as_str());
                    }
                    Err(_) => {
                        // W-3: an invalid list makes the transaction unsplittable; never SQL.
                        self.txn.xids_valid = false;
                        self.txn.xids.clear();
                    }
                }
            }
            None => {
                self.txn.marker = None;
            }
        }
    }

    /// P-6 for the writer's RFQ after a client statement.
    fn writer_statement_done(&mut self, conn: ConnId, body: &[u8], rfq: Rfq<'_>) {
        let Some(cur) = self.current.take() else {
            // An RFQ answering nothing of ours: pass it on.
            self.writer_rfq_to_client(conn, body, rfq);
            return;
        };
        let prev_status = self.writer_status;
        self.writer_status = rfq.status;
        // LSN bookkeeping.
        match rfq.lsn {
            LsnField::At(l) => {
                self.lsn.writer_positioned(l, cur.may_write);
                self.engine
                    .observe_writer_lsn(self.writer_hostgroup, self.lsn.generation, l);
            }
            LsnField::Zero | LsnField::Missing => {
                if cur.may_write {
                    // A write whose position is unknown cannot be waited for (P-6).
                    self.lsn.write_unknown = true;
                    self.write_ack_ms = Some(self.now);
                    self.engine.stats().inc(Counter::MissingLsn);
                }
            }
        }
        let txn_wrote = self.txn.may_have_written;
        // Transaction state (S-3).
        let now_in_txn = rfq.status != TxStatus::Idle;
        let was_active = self.txn.active;
        if now_in_txn && !was_active {
            let isolation = match cur.begin {
                Some(Some(i)) => Some(i),
                Some(None) => Some(
                    self.session_isolation
                        .unwrap_or(self.config.server_default_isolation),
                ),
                None => None,
            };
            self.txn = TxnState::begin(isolation);
        }
        if let Some(class) = cur.class.as_ref() {
            self.apply_effects(class, cur.sql.as_deref(), !cur.errored, was_active);
        } else if cur.may_write && self.txn.active {
            self.txn.may_have_written = true;
            self.txn.read_only_prefix = false;
        }
        if now_in_txn {
            self.txn.failed = rfq.status == TxStatus::Failed;
            self.update_txn_marker(&rfq);
        } else if self.txn.active || was_active {
            let committed = prev_status == TxStatus::InTransaction
                && !cur.errored
                && cur.class.as_ref().is_some_and(|c| {
                    c.statements()
                        .iter()
                        .any(|s| matches!(s.kind, Kind::Commit { .. }))
                });
            self.end_txn(committed);
        }
        self.writer_rfq_to_client(conn, body, rfq);
        // Issue 11: a committed write whose position is unknown is probed right after the
        // client got its RFQ — no round trip is added to the client's statement.
        let committed_write =
            rfq.status == TxStatus::Idle && (cur.may_write || (was_active && txn_wrote));
        let no_rfq_lsn = !self.writer.as_ref().is_some_and(|w| w.ext.lsn);
        if committed_write && no_rfq_lsn && self.lsn.write_unknown && self.config.lsn_probe {
            self.send_probe(conn);
        }
        self.finish_unit();
    }

    fn send_probe(&mut self, conn: ConnId) {
        self.out.send_backend_with(conn, |o| {
            encode::query(o, &[super::wrapper::PROBE_STATEMENT]);
        });
        self.probe_lsn = None;
        if let Some(w) = self.writer.as_mut() {
            w.expect.push_back(Expect::new(ExpectKind::Probe));
        }
        self.engine.stats().inc(Counter::ProbesSent);
    }

    /// The transaction ended (writer RFQ `I`): settings SET inside it take effect on COMMIT,
    /// the pinned reader is released (P-7), split state cleared.
    fn end_txn(&mut self, committed: bool) {
        let txn = std::mem::take(&mut self.txn);
        if committed {
            if txn.settings_uncertain {
                self.hazards.set(Hazards::UNKNOWN_SET);
            }
            for (var, name, stmt) in txn.pending_settings {
                self.apply_setting(var, &name, stmt.as_deref());
            }
        }
        self.release_pin(false);
    }

    /// Remembers a session-level SET/RESET run inside the transaction, for COMMIT. Bounded: a
    /// client repeating SET in an open transaction must not grow the session; past the bounds
    /// the settings are uncertain at COMMIT (the session stays on the writer, S-4).
    fn pend_setting(&mut self, var: Var, name: String, stmt: Option<String>) {
        let size = |n: &String, s: &Option<String>| n.len() + s.as_ref().map_or(0, String::len);
        let used: usize = self
            .txn
            .pending_settings
            .iter()
            .map(|(_, n, s)| size(n, s))
            .sum();
        if self.txn.pending_settings.len() >= MAX_PENDING_SETTINGS
            || used + size(&name, &stmt) > MAX_PENDING_SETTINGS_BYTES
        {
            self.txn.settings_uncertain = true;
            return;
        }
        self.txn.pending_settings.push((var, name, stmt));
    }

    /// Applies one session-level SET/RESET outside a transaction.
    fn apply_setting(&mut self, var: Var, name: &str, stmt: Option<&str>) {
        match var {
            Var::Polar => {}
            Var::Other => {
                if stmt.is_some() {
                    self.hazards.set(Hazards::UNKNOWN_SET);
                }
            }
            Var::TransactionIsolation | Var::TransactionReadOnly => {}
            v => {
                // With pg_temp on the search_path a plain CREATE TABLE makes a temporary table:
                // the classifier cannot see that, so the session stays on the writer.
                if v == Var::SearchPath
                    && stmt.is_some_and(|st| st.to_ascii_lowercase().contains("pg_temp"))
                {
                    self.hazards.set(Hazards::TEMP);
                }
                if v == Var::DefaultTransactionIsolation {
                    self.session_isolation = match stmt {
                        Some(s) => {
                            let value = s.split_once(['=']).map(|(_, v)| v).or_else(|| {
                                let lower = s.to_ascii_lowercase();
                                lower.find(" to ").map(|p| &s[p + 4..])
                            });
                            value.and_then(Isolation::parse).or(self.session_isolation)
                        }
                        None => self.startup.as_ref().and_then(|s| s.default_isolation),
                    };
                }
                self.settings.put(name, stmt);
            }
        }
    }

    /// S-3/S-4 effects of a statement string that ran on the writer, statement by statement.
    fn apply_effects(
        &mut self,
        class: &Classification,
        sql: Option<&[u8]>,
        success: bool,
        was_active: bool,
    ) {
        use crate::classify::{DiscardWhat, Effects};
        let text = sql.and_then(|b| std::str::from_utf8(b).ok());
        let mut in_txn = was_active;
        for s in class.statements() {
            let e = s.effects;
            // Hazards are set even if the string failed (conservative); cleared only on success.
            if e.contains(Effects::CREATES_TEMP) {
                self.hazards.set(Hazards::TEMP);
            }
            if e.contains(Effects::ADVISORY_LOCK) {
                self.hazards.set(Hazards::ADVISORY_LOCK);
            }
            if e.contains(Effects::CALLS_SET_CONFIG) {
                if in_txn {
                    self.txn.set_ran = true;
                } else {
                    self.hazards.set(Hazards::UNKNOWN_SET);
                }
            }
            if success && e.contains(Effects::ADVISORY_UNLOCK_ALL) {
                self.hazards.clear(Hazards::ADVISORY_LOCK);
            }
            if in_txn {
                let keeps_prefix = s.is_replica_safe()
                    || matches!(
                        s.kind,
                        Kind::Begin(_)
                            | Kind::Savepoint
                            | Kind::ReleaseSavepoint
                            | Kind::SetTransaction(_)
                            | Kind::Show
                            | Kind::Empty
                    );
                if !keeps_prefix {
                    self.txn.read_only_prefix = false;
                }
                if s.may_write() && !matches!(s.kind, Kind::Commit { .. } | Kind::Rollback { .. }) {
                    self.txn.may_have_written = true;
                }
            }
            match s.kind {
                Kind::Begin(_) => in_txn = true,
                Kind::Commit { chain } | Kind::Rollback { chain } => in_txn = chain,
                Kind::SetTransaction(o) if in_txn => {
                    if let Some(i) = o.isolation {
                        self.txn.isolation = Some(i);
                    }
                }
                Kind::SetSessionCharacteristics(o) if success => {
                    if let Some(i) = o.isolation {
                        self.session_isolation = Some(i);
                    }
                }
                Kind::Set {
                    var, name, local, ..
                } => {
                    let name_text = text.map(|t| name.of(t).trim_matches('"').to_string());
                    let stmt_text = text.map(|t| s.span.of(t).to_string());
                    if in_txn {
                        // S-3: a SET in the transaction (session-level ones apply at COMMIT).
                        self.txn.set_ran = true;
                        if var == Var::TransactionIsolation {
                            if let Some(v) = text.map(|t| s.span.of(t)) {
                                let value = v.split_once('=').map(|(_, v)| v).unwrap_or("");
                                if let Some(i) = Isolation::parse(value) {
                                    self.txn.isolation = Some(i);
                                }
                            }
                        }
                        if !local {
                            match (name_text, stmt_text) {
                                (Some(n), Some(st)) => {
                                    let st = (!is_set_default(&st)).then_some(st);
                                    self.pend_setting(var, n, st);
                                }
                                _ => self.txn.settings_uncertain = true,
                            }
                        }
                    } else if success && !local {
                        match (name_text, stmt_text) {
                            (Some(n), Some(st)) => {
                                let st = (!is_set_default(&st)).then_some(st);
                                self.apply_setting(var, &n, st.as_deref());
                            }
                            _ if var != Var::Polar => self.hazards.set(Hazards::UNKNOWN_SET),
                            _ => {}
                        }
                    }
                }
                Kind::Reset { var, name } => {
                    let n = text.map(|t| name.of(t).trim_matches('"').to_string());
                    if in_txn {
                        self.txn.set_ran = true;
                        match n {
                            Some(n) => self.pend_setting(var, n, None),
                            None => self.txn.settings_uncertain = true,
                        }
                    } else if success {
                        if let Some(n) = n {
                            self.apply_setting(var, &n, None);
                        }
                    }
                }
                Kind::ResetAll if success => {
                    if in_txn {
                        self.txn.set_ran = true;
                        self.txn.settings_uncertain = true;
                    } else {
                        self.settings.clear();
                        self.hazards.clear(Hazards::UNKNOWN_SET);
                        self.session_isolation =
                            self.startup.as_ref().and_then(|s| s.default_isolation);
                    }
                }
                Kind::RollbackToSavepoint if in_txn && !self.txn.pending_settings.is_empty() => {
                    self.txn.settings_uncertain = true;
                }
                Kind::Discard(w) if success => match w {
                    DiscardWhat::All => {
                        self.hazards = Hazards::default();
                        self.protocol_statements = false;
                        self.settings.clear();
                        self.session_isolation =
                            self.startup.as_ref().and_then(|s| s.default_isolation);
                    }
                    DiscardWhat::Temp => self.hazards.clear(Hazards::TEMP),
                    _ => {}
                },
                Kind::Listen => self.hazards.set(Hazards::LISTEN),
                Kind::Unlisten { all: true } if success => self.hazards.clear(Hazards::LISTEN),
                Kind::DeclareCursor { with_hold: true } => self.hazards.set(Hazards::HOLD_CURSOR),
                Kind::Close { all: true } if success => self.hazards.clear(Hazards::HOLD_CURSOR),
                Kind::Prepare => self.hazards.set(Hazards::PREPARE),
                Kind::Deallocate { all: true } if success => {
                    self.hazards.clear(Hazards::PREPARE);
                    self.protocol_statements = false;
                }
                _ => {}
            }
        }
    }

    fn reader_message(
        &mut self,
        conn: ConnId,
        i: usize,
        t: u8,
        body: &[u8],
        msg: BackendMessage<'_>,
    ) {
        let has_expect = !self.backend(i).expect.is_empty();
        if !has_expect {
            // An idle (pinned) reader: nothing it says reaches the client.
            let fatal = matches!(msg, BackendMessage::ErrorResponse(f) if f.is_fatal());
            self.apply_disp(conn, t, body, Disp::Discard);
            if fatal {
                // The server closes it: tell the host the session no longer uses it.
                self.out.close_backend(conn);
                self.reader_lost(conn);
            }
            return;
        }
        match msg {
            BackendMessage::ParameterStatus { .. }
            | BackendMessage::NotificationResponse { .. } => {
                // P-8: the client sees the writer's session, never a reader's.
                self.apply_disp(conn, t, body, Disp::Discard);
            }
            BackendMessage::ReadyForQuery(rfq) => {
                let e = self.backend_mut(i).expect.front_mut().expect("checked");
                if e.hidden_rfq > 0 {
                    e.hidden_rfq -= 1;
                    self.apply_disp(conn, t, body, Disp::Discard);
                    return;
                }
                self.apply_disp(conn, t, body, Disp::Discard);
                self.reader_statement_done(conn, rfq);
            }
            BackendMessage::CommandComplete { .. } if self.backend(i).expect[0].hidden_cc > 0 => {
                self.backend_mut(i).expect[0].hidden_cc -= 1;
                self.apply_disp(conn, t, body, Disp::Discard);
            }
            BackendMessage::ErrorResponse(f) => self.reader_error(conn, i, t, body, f),
            BackendMessage::NoticeResponse(f) => {
                let e = &self.backend(i).expect[0];
                let hidden = e.hidden_cc > 0 || e.hidden_rfq > 0;
                let d = if hidden || e.discard {
                    Disp::Discard
                } else {
                    if policy::is_wait_timeout_marker(f.detail(), f.routine()) {
                        // W-5: a best-effort timeout; stale rows follow, the client is told once.
                        self.engine.stats().inc(Counter::BestEffortWarnings);
                    }
                    if e.hold && !e.result_started {
                        Disp::Hold
                    } else {
                        Disp::Forward
                    }
                };
                self.apply_disp(conn, t, body, d);
            }
            BackendMessage::RowDescription { .. } => {
                let e = &self.backend(i).expect[0];
                let d = if e.discard || e.hidden_cc > 0 || e.hidden_rfq > 0 {
                    Disp::Discard
                } else if e.hold && !e.result_started {
                    Disp::Hold
                } else {
                    Disp::Forward
                };
                self.apply_disp(conn, t, body, d);
            }
            BackendMessage::ParseComplete
            | BackendMessage::BindComplete
            | BackendMessage::CloseComplete
            | BackendMessage::ParameterDescription { .. }
            | BackendMessage::NoData => {
                let e = &self.backend(i).expect[0];
                let d = if e.discard || e.hidden_cc > 0 || e.hidden_rfq > 0 {
                    Disp::Discard
                } else if e.hold && !e.result_started {
                    Disp::Hold
                } else {
                    Disp::Forward
                };
                self.apply_disp(conn, t, body, d);
            }
            _ => {
                // The client's result: CommandComplete, EmptyQueryResponse, PortalSuspended, …
                let e = &self.backend(i).expect[0];
                if e.discard || e.hidden_cc > 0 || e.hidden_rfq > 0 {
                    self.apply_disp(conn, t, body, Disp::Discard);
                } else {
                    self.result_begins(i);
                    self.apply_disp(conn, t, body, Disp::Forward);
                }
            }
        }
    }

    fn result_begins(&mut self, i: usize) {
        if !self.backend(i).expect[0].result_started {
            self.backend_mut(i).expect[0].result_started = true;
            self.flush_held();
        }
    }

    fn reader_error(&mut self, conn: ConnId, i: usize, t: u8, body: &[u8], f: ErrorFields<'_>) {
        self.backend_mut(i).expect[0].saw_error = true;
        let e = &self.backend(i).expect[0];
        let in_hidden = e.hidden_cc > 0 || e.hidden_rfq > 0;
        if e.discard {
            // Already failed: the rest of this answer is swallowed.
            let fatal = f.is_fatal();
            self.apply_disp(conn, t, body, Disp::Discard);
            if fatal {
                self.out.close_backend(conn);
                self.reader_lost(conn);
            }
            return;
        }
        let facts = ErrorFacts {
            sqlstate: f.code().unwrap_or(b""),
            fatal: f.is_fatal(),
            detail: f.detail(),
            routine: f.routine(),
            in_hidden,
            hidden_wait_statement: self.current.as_ref().is_some_and(|c| c.wait_statement),
        };
        let class = policy::classify_error(&facts);
        let result_started = e.result_started;
        if class == FailureClass::WaitTimeout {
            self.engine.stats().inc(Counter::WaitTimeouts);
        }
        // A hidden statement the server refused: it does not support waits (W-7, F-1).
        let sent_wait = self.current.as_ref().is_some_and(|c| c.decision.wait);
        if in_hidden && class == FailureClass::ReusableError && sent_wait {
            if let Some(s) = self.backend(i).server {
                if self.engine.mark_waits_unsupported(s) {
                    self.engine.stats().inc(Counter::WaitsUnsupported);
                }
            }
        }
        let progress = self.progress(result_started, in_hidden);
        let rec = policy::decide(class, &progress, &self.config);
        let text = format!(
            "replica error {}: {}",
            lossy(facts.sqlstate),
            lossy(f.message().unwrap_or(b""))
        );
        let e = &mut self.backend_mut(i).expect[0];
        e.failure = Some((class, rec));
        e.failure_text = Some(text);
        if rec == Recovery::ForwardOriginal {
            self.flush_held();
            self.apply_disp(conn, t, body, Disp::Forward);
            if let Some(c) = self.current.as_mut() {
                c.errored = true;
            }
        } else {
            self.backend_mut(i).expect[0].discard = true;
            self.apply_disp(conn, t, body, Disp::Discard);
        }
        if facts.fatal {
            // No RFQ follows a FATAL error: the connection closes now.
            self.out.close_backend(conn);
            self.reader_lost(conn);
        }
    }

    /// The reader's RFQ ends its answer to the current statement.
    fn reader_statement_done(&mut self, conn: ConnId, rfq: Rfq<'_>) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        let Some(e) = self.backend_mut(i).expect.pop_front() else {
            return;
        };
        let server = self.backend(i).server;
        let ext = self.backend(i).ext;
        {
            let b = self.backend_mut(i);
            if !e.saw_error && std::mem::take(&mut b.clean_on_success) {
                b.dirty = false;
            }
            b.clean_on_success = false;
        }
        let settings_unknown =
            std::mem::take(&mut self.backend_mut(i).settings_pending) && e.saw_error;
        if let Some(s) = server {
            self.engine.readers().end_use(s);
        }
        let generation = self
            .current
            .as_ref()
            .map_or(self.lsn.generation, |c| c.generation);
        match rfq.lsn {
            LsnField::At(l) => {
                if let Some(s) = server {
                    self.engine.reader_rfq_lsn(s, generation, l, self.now);
                }
                if let Some(p) = self.pin.as_mut() {
                    if p.conn == conn {
                        p.replay = p.replay.max(l);
                    }
                }
                if e.failure.is_none() && generation == self.lsn.generation {
                    self.lsn.reader_positioned(l);
                }
            }
            LsnField::Missing if ext.lsn && e.failure.is_none() => {
                // P-6: the reader should have reported its position; monotonic reads can no
                // longer be promised across readers.
                self.lsn.observed_unknown = true;
                self.engine.stats().inc(Counter::MissingLsn);
            }
            _ => {}
        }
        let pinned = self.pin.is_some_and(|p| p.conn == conn);
        let give_back = |s: &mut Session| {
            if !pinned {
                s.hand_back(conn, settings_unknown);
            }
        };
        match e.failure {
            Some((class, rec)) if rec != Recovery::ForwardOriginal => {
                // The connection is still usable (not lost): return it, unpinned.
                if pinned {
                    self.pin = None;
                    self.engine.stats().inc(Counter::PinsReleased);
                }
                self.hand_back(conn, settings_unknown);
                self.recover(class, rec, e.failure_text);
            }
            Some((class, rec)) => {
                // The reader's own error was forwarded.
                give_back(self);
                if pinned {
                    self.release_pin(false);
                }
                self.recover(class, rec, None);
            }
            None => {
                self.flush_held();
                give_back(self);
                if self.txn.active {
                    self.engine.stats().inc(Counter::SplitServed);
                }
                let status = self.writer_status;
                self.client_rfq(status);
                self.finish_unit();
            }
        }
    }

    fn on_backend_opaque_start(&mut self, conn: ConnId, t: u8, body_len: usize) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        let forward = if i == 0 {
            match self.writer.as_ref().and_then(|w| w.expect.front()) {
                // The hidden abort's and the probe's answers never reach the client.
                Some(e) => !e.discard,
                // Large asynchronous messages from an idle writer: forward unless a reader is
                // answering the client right now (then they cannot be held: drop them).
                None => !self.reader_in_flight(),
            }
        } else {
            match self.backend(i).expect.front() {
                None => false,
                Some(e) if e.discard || e.hidden_cc > 0 || e.hidden_rfq > 0 => false,
                Some(_) => {
                    if matches!(
                        t,
                        tag::ROW_DESCRIPTION
                            | tag::DATA_ROW
                            | tag::COPY_OUT_RESPONSE
                            | tag::COPY_DATA
                    ) {
                        self.result_begins(i);
                    }
                    true
                }
            }
        };
        let n = 5;
        if !forward {
            self.out.discard_backend(conn, n);
        } else if body_len == 0 {
            self.out.forward_backend(conn, n);
        } else {
            self.backend_mut(i).held_fwd = n;
        }
        if body_len > 0 {
            self.backend_mut(i).streaming = Some(forward);
        }
        if i == 0 && matches!(t, tag::COPY_IN_RESPONSE | tag::COPY_BOTH_RESPONSE) {
            // The client's COPY data may flow to the writer now.
            if let Some(c) = self.current.as_mut() {
                c.copy_in = true;
            }
            self.pump(None);
        }
    }

    fn on_backend_opaque_bytes(&mut self, conn: ConnId, n: usize, done: bool) {
        let Some(i) = self.backend_index(conn) else {
            return;
        };
        if !self.backend(i).streaming.unwrap_or(false) {
            self.out.discard_backend(conn, n);
            return;
        }
        let b = self.backend_mut(i);
        b.held_fwd += n;
        if done || b.held_fwd >= STREAM_WHOLE_MAX {
            let k = std::mem::take(&mut b.held_fwd);
            b.partial_out = !done;
            self.out.forward_backend(conn, k);
        }
    }

    /// Returns a reader connection to the host: to its pool, or closed when it cannot be reused
    /// (its settings are unknown — a failed Query rolled back the SETs that were to bring it in
    /// line, W-6 — or it was lost).
    pub(super) fn hand_back(&mut self, conn: ConnId, close: bool) {
        if let Some(i) = self.backend_index(conn) {
            if i == 0 {
                return;
            }
            let b = self.readers.remove(i - 1);
            if close {
                self.out.close_backend(b.conn);
            } else {
                self.out.release_reader(b.conn, b.dirty);
            }
            self.retire_backend(b);
        }
    }

    /// The writer answered its oldest expected message (its ReadyForQuery arrived).
    fn writer_expect_done(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            w.expect.pop_front();
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
            .chain(self.readers.iter())
            .any(|b| b.partial_out)
    }
}

/// The LSN in the probe's single-column DataRow (`X/Y` text).
fn probe_value(body: &[u8]) -> Option<Lsn> {
    let ncols = u16::from_be_bytes([*body.first()?, *body.get(1)?]);
    if ncols != 1 {
        return None;
    }
    let len = i32::from_be_bytes(body.get(2..6)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let text = std::str::from_utf8(body.get(6..6 + len)?).ok()?;
    Lsn::parse_text(text).filter(|l| !l.is_zero())
}

fn is_set_default(stmt: &str) -> bool {
    let t = stmt
        .trim_end_matches([';', ' ', '\n', '\t', '\r'])
        .to_ascii_lowercase();
    t.ends_with(" default") || t.ends_with("=default")
}
