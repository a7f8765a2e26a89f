//! Causal tokens in the session (SPEC §11): `SHOW polarsplit.causal_token` and `SET
//! polarsplit.causal_token = '…'` are answered by the engine itself, never forwarded — as a
//! simple Query or as an extended-protocol batch (drivers send them so) — the startup option
//! presents a token, and `polarsplit.report_token=on` reports it as a ParameterStatus whenever
//! it rises.
//!
//! A token answered is the session's target once everything before it has answered (on stock
//! PostgreSQL that includes the probe of its last write). A token presented only ever raises
//! the target (C-2): of the current writer history, to its position; of another history (a
//! failover since), to the writer's latest known position, with a NOTICE.

use super::statements::same_name;
use super::*;
use crate::cluster::stats::Counter;
use crate::cluster::WriterView;
use crate::protocol::frontend::FrontendMessage;
use crate::protocol::{encode, tag};
use crate::token::{may_be_command, Token, TokenCommand, SETTING};

/// The batch answered by the engine, message by message, until its Sync.
#[derive(Debug, Default)]
pub(super) struct LocalBatch {
    /// Portals bound in it and the command each runs.
    portals: Vec<(Box<[u8]>, TokenCommand)>,
}

/// The command a statement text is, if any.
fn text_command(sql: &[u8]) -> Option<TokenCommand> {
    if !may_be_command(sql) {
        return None;
    }
    std::str::from_utf8(sql)
        .ok()
        .and_then(crate::token::command)
}

impl Session {
    /// The session's token now: its target in the writer's history. `None` while the position
    /// of a write, or of what a read showed, is unknown: S-1a counts what the session observed
    /// in its target, and a token below it let another session read older data than this one
    /// had seen (an examiner's finding, 2026-12-07: a read the primary served, then a token
    /// that did not cover it, 10 of 10 rounds).
    fn current_token(&self, view: &WriterView) -> Option<Token> {
        if self.lsn.write_unknown || self.lsn.observed_unknown {
            return None;
        }
        let mut lsn = self.lsn.target();
        if self.config.consistency == crate::config::Consistency::Global
            && view.generation == self.lsn.generation
        {
            lsn = lsn.max(view.writer_lsn);
        }
        Some(Token {
            history: view.identity,
            lsn,
        })
    }

    /// C-1 with `lsn_probe = adaptive`: the session's last committed write, or a read the writer
    /// served, went unprobed, so a token could not cover it; the probe is sent now, on the idle
    /// writer outside a transaction block, and the token statement waits for its answer (returns
    /// true). Once per unprobed statement (`has_skipped`, cleared by the probe sent): a probe
    /// that fails leaves the position unknown, and SHOW answers 55000. Only a token asked for
    /// pays this round trip. Not where the writer takes no hidden work with a Sync of its own
    /// (`writer_takes_hidden_sync`: after extended messages the client has not synced, the
    /// probe's Sync would commit them early): no probe is waited for that cannot be sent — the
    /// token statement, which never reaches the writer, would wait for ever (a simulator
    /// scenario, seed 394 of the E-6 families, once the probe obeyed that guard).
    fn probe_for_token(&mut self) -> bool {
        let probe = (self.lsn.write_unknown || self.lsn.observed_unknown)
            && self.probe_credit.has_skipped()
            && self.probe_enabled()
            && !self.txn.active
            && self.writer_status == TxStatus::Idle
            && self.writer.as_ref().is_some_and(|w| w.resp.is_empty())
            && self.writer_takes_hidden_sync();
        if probe {
            self.send_learning(true, false);
        }
        probe
    }

    /// C-1: whether a token statement waits for a writer sample: the session's position is
    /// unknown, no probe can bound it now (inside a block — psycopg wraps the SHOW after a
    /// `commit()` in its own BEGIN —, or the adaptive probe's credit spent), and what is unknown
    /// was committed before the block began (a block's own write has no position to give until
    /// its COMMIT). A writer sample sent after the statement's acknowledgement positions it (an
    /// examiner's probe, 2026-12-07: 55000 in 6–8 of 10 rounds). At most
    /// [`HELD_RFQ_SAMPLE_WAIT_MS`] after it, while the host feeds writer samples; then the
    /// statement is answered as before (55000).
    fn token_waits_for_sample(&mut self) -> bool {
        if !(self.lsn.write_unknown || self.lsn.observed_unknown) {
            return false;
        }
        self.collect();
        (self.lsn.write_unknown || self.lsn.observed_unknown)
            && !(self.txn.active && self.txn.may_have_written)
            && self.sample_may_still_come()
            && self.writer_samples_arrive()
    }

    /// Whether the engine may answer a token statement now: everything before it has answered
    /// and nothing the target depends on is in flight.
    pub(super) fn token_idle(&self) -> bool {
        self.units.is_empty() && !self.learning() && self.held_rfq.is_none()
    }

    /// A token statement as a simple Query. Returns false when it must wait.
    pub(super) fn start_token_query(&mut self, cmd: TokenCommand) -> bool {
        if !self.token_idle() || self.probe_for_token() || self.token_waits_for_sample() {
            return false;
        }
        if let Some(m) = self.queue.front() {
            let n = m.len;
            self.out.discard_client(n);
            self.pop_head();
        }
        self.statements.remove(b"");
        let d = Decision::primary(Reason::CausalToken);
        self.record(d);
        let tag_text: &[u8] = match cmd {
            TokenCommand::Show => b"SHOW",
            TokenCommand::Set(_) => b"SET",
        };
        match self.run_token(&cmd, true) {
            Ok(()) => {
                self.out.send_client_with(|o| {
                    encode::message(o, tag::COMMAND_COMPLETE, |o| {
                        o.extend_from_slice(tag_text);
                        o.push(0);
                    });
                });
                let status = self.writer_status;
                self.client_rfq(status);
            }
            Err(()) => {
                let id = self.push_unit(UnitKind::Query, d, None, Attempt::Local);
                if let Some(u) = self.unit_mut(id) {
                    u.errored = true;
                }
                self.end_with_error(id);
            }
        }
        true
    }

    /// Runs a token command: SHOW sends its row (and its description when `describe`), SET
    /// applies the token. `Err` after an ErrorResponse was sent.
    fn run_token(&mut self, cmd: &TokenCommand, describe: bool) -> Result<(), ()> {
        if self.txn.failed {
            self.out.send_client_with(|o| {
                encode::error_response(
                    o,
                    b"25P02",
                    b"current transaction is aborted, commands ignored until end of transaction block",
                    None,
                );
            });
            return Err(());
        }
        let view = self.collect();
        match cmd {
            TokenCommand::Show => {
                let Some(t) = self.current_token(&view) else {
                    let msg: &[u8] = if self.lsn.write_unknown {
                        b"polarsplit: the session's last write position is unknown: no causal token covers it"
                    } else {
                        b"polarsplit: the position of what the session last read is unknown: no causal token covers it"
                    };
                    self.out.send_client_with(|o| {
                        encode::error_response(o, b"55000", msg, None);
                    });
                    return Err(());
                };
                let text = t.to_string();
                self.out.send_client_with(|o| {
                    if describe {
                        row_description(o);
                    }
                    encode::message(o, tag::DATA_ROW, |o| {
                        o.extend_from_slice(&1u16.to_be_bytes());
                        o.extend_from_slice(&(text.len() as i32).to_be_bytes());
                        o.extend_from_slice(text.as_bytes());
                    });
                });
                self.reported_token = Some(t.lsn);
                self.engine.stats().inc(Counter::TokensIssued);
                Ok(())
            }
            TokenCommand::Set(value) => match value.as_deref().and_then(Token::parse) {
                Some(t) => {
                    self.present_token(t, &view);
                    Ok(())
                }
                None => {
                    self.engine.stats().inc(Counter::TokensRejected);
                    let msg = format!(
                        "invalid value for parameter \"{SETTING}\": \"{}\"",
                        value.as_deref().unwrap_or("")
                    );
                    self.out.send_client_with(|o| {
                            encode::error_response(
                                o,
                                b"22023",
                                msg.as_bytes(),
                                Some(b"A causal token looks like ps1:<system identifier>.<timeline>:<X>/<Y>."),
                            );
                        });
                    Err(())
                }
            },
        }
    }

    /// C-2: a presented token raises the session's target, never lowers it.
    fn present_token(&mut self, t: Token, view: &WriterView) {
        if t.history == view.identity {
            self.lsn.reader_positioned(t.lsn);
            self.engine.stats().inc(Counter::TokensAccepted);
        } else {
            // Another writer history (a failover since): the writer's latest known position,
            // as `global` mode would.
            self.lsn.reader_positioned(view.writer_lsn);
            self.engine.stats().inc(Counter::TokensIgnored);
            self.out.send_client_with(|o| {
                encode::error_or_notice(
                    o,
                    true,
                    encode::Severity::Notice,
                    b"01000",
                    b"polarsplit: the causal token belongs to another writer history; the writer's latest known position is used instead",
                    None,
                );
            });
        }
    }

    /// The startup option presented a token (C-2): applied once the session is ready. A
    /// malformed one ends the session like an invalid startup setting would.
    pub(super) fn apply_startup_token(&mut self) -> bool {
        let Some(text) = self.startup.as_mut().and_then(|s| s.causal_token.take()) else {
            return true;
        };
        let view = self.collect();
        match Token::parse(&text) {
            Some(t) => {
                self.present_token(t, &view);
                true
            }
            None => {
                self.engine.stats().inc(Counter::TokensRejected);
                let msg = format!("invalid value for parameter \"{SETTING}\": \"{text}\"");
                self.fatal_to_client(b"22023", msg.as_bytes());
                self.close_all();
                false
            }
        }
    }

    /// C-1: for a client that asked, a ParameterStatus with the token before an RFQ whenever it
    /// rose. Returns whether one was sent.
    pub(super) fn report_token(&mut self) -> bool {
        if !self.startup.as_ref().is_some_and(|s| s.report_token) {
            return false;
        }
        let view = self.writer_view();
        let Some(t) = self.current_token(&view) else {
            return false;
        };
        if self.reported_token == Some(t.lsn) {
            return false;
        }
        self.reported_token = Some(t.lsn);
        self.engine.stats().inc(Counter::TokensIssued);
        let text = t.to_string();
        self.out.send_client_with(|o| {
            encode::message(o, tag::PARAMETER_STATUS, |o| {
                o.extend_from_slice(SETTING.as_bytes());
                o.push(0);
                o.extend_from_slice(text.as_bytes());
                o.push(0);
            });
        });
        true
    }

    /// Whether the token reported to the client is behind what it would be now.
    pub(super) fn token_report_due(&self) -> bool {
        if !self.startup.as_ref().is_some_and(|s| s.report_token) {
            return false;
        }
        let view = self.engine.writer_view(self.writer_hostgroup);
        self.current_token(&view)
            .is_some_and(|t| self.reported_token != Some(t.lsn))
    }

    /// Whether the extended message at the head starts a batch of token statements.
    pub(super) fn head_is_token_batch(&self) -> bool {
        let Some(head) = self.queue.front() else {
            return false;
        };
        if head.tag == tag::BIND && !self.statements.may_hold_command() {
            // No statement tracked is a token statement: this Bind binds none.
            return false;
        }
        if head.tag == tag::PARSE && !head.may_be_token {
            // Its text's first bytes, read when it arrived, are no token statement's: most texts
            // are told apart by them, before the message is parsed again.
            debug_assert!(self.msg_bytes(head).is_none_or(|b| {
                let body = &b[5..];
                let i = body
                    .iter()
                    .position(|&c| c == 0)
                    .map_or(body.len(), |i| i + 1);
                !may_be_command(&body[i..])
            }));
            return false;
        }
        let Some(bytes) = self.msg_bytes(head) else {
            return false;
        };
        let (t, body) = (bytes[0], &bytes[5..]);
        let Ok(msg) = FrontendMessage::parse(t, body) else {
            return false;
        };
        match msg {
            FrontendMessage::Parse { sql, .. } => text_command(sql).is_some(),
            FrontendMessage::Bind { statement, .. } => self.token_statement(statement).is_some(),
            _ => false,
        }
    }

    fn token_statement(&self, name: &[u8]) -> Option<TokenCommand> {
        let s = self.statements.peek(name)?;
        text_command(s.rest.split(|&b| b == 0).next().unwrap_or_default())
    }

    /// The batch of token statements at the head: answered message by message until its Sync
    /// (its Flushes need nothing: every answer is sent at once). Returns whether the pump may
    /// go on.
    pub(super) fn continue_local_batch(&mut self) -> bool {
        if !self.token_idle() || self.probe_for_token() || self.token_waits_for_sample() {
            return false;
        }
        let Some(head) = self.queue.front() else {
            return false;
        };
        let Some(bytes) = self.msg_bytes(head).map(<[u8]>::to_vec) else {
            // Too large to be a token statement: not ours.
            self.local_batch = None;
            return self.local_batch_refuse();
        };
        let n = head.len;
        self.out.discard_client(n);
        self.pop_head();
        let Ok(msg) = FrontendMessage::parse(bytes[0], &bytes[5..]) else {
            return true;
        };
        let mut refuse = false;
        match msg {
            FrontendMessage::Parse { statement, sql, .. } => {
                if text_command(sql).is_some() {
                    let rest = &bytes[5 + statement.len() + 1..];
                    let limit = self.config.max_prepared_statements;
                    self.statements.insert(statement, rest, None, false, limit);
                    self.out.send_client(&[tag::PARSE_COMPLETE, 0, 0, 0, 4]);
                } else {
                    refuse = true;
                }
            }
            FrontendMessage::Bind { portal, statement } => match self.token_statement(statement) {
                Some(cmd) => {
                    let lb = self.local_batch.get_or_insert_with(LocalBatch::default);
                    lb.portals.retain(|(p, _)| p[..] != *portal);
                    lb.portals.push((portal.into(), cmd));
                    self.out.send_client(&[tag::BIND_COMPLETE, 0, 0, 0, 4]);
                }
                None => refuse = true,
            },
            FrontendMessage::Describe { kind, name } => {
                let cmd = if kind == b'S' {
                    self.token_statement(name)
                } else {
                    self.local_portal(name)
                };
                match cmd {
                    Some(cmd) => self.out.send_client_with(|o| {
                        if kind == b'S' {
                            encode::message(o, tag::PARAMETER_DESCRIPTION, |o| {
                                o.extend_from_slice(&0u16.to_be_bytes())
                            });
                        }
                        match cmd {
                            TokenCommand::Show => row_description(o),
                            TokenCommand::Set(_) => {
                                encode::message(o, tag::NO_DATA, |_| {});
                            }
                        }
                    }),
                    None => refuse = true,
                }
            }
            FrontendMessage::Execute { portal, .. } => match self.local_portal(portal) {
                Some(cmd) => {
                    let d = Decision::primary(Reason::CausalToken);
                    self.record(d);
                    match self.run_token(&cmd, false) {
                        Ok(()) => {
                            let t: &[u8] = match cmd {
                                TokenCommand::Show => b"SHOW",
                                TokenCommand::Set(_) => b"SET",
                            };
                            self.out.send_client_with(|o| {
                                encode::message(o, tag::COMMAND_COMPLETE, |o| {
                                    o.extend_from_slice(t);
                                    o.push(0);
                                });
                            });
                        }
                        Err(()) => {
                            // Like a server after an error: the rest of the batch is skipped
                            // up to its Sync, which then answers.
                            self.local_batch = None;
                            self.skip_to_sync = true;
                            return true;
                        }
                    }
                }
                None => refuse = true,
            },
            FrontendMessage::Close { kind, name } => {
                if kind == b'S' {
                    self.statements.remove(name);
                }
                self.out.send_client(&[tag::CLOSE_COMPLETE, 0, 0, 0, 4]);
            }
            FrontendMessage::Sync => {
                self.local_batch = None;
                let status = self.writer_status;
                self.client_rfq(status);
                return true;
            }
            _ => {}
        }
        if refuse {
            self.local_batch = None;
            return self.local_batch_refuse();
        }
        true
    }

    fn local_portal(&self, name: &[u8]) -> Option<TokenCommand> {
        self.local_batch
            .as_ref()?
            .portals
            .iter()
            .rev()
            .find(|(p, _)| same_name(p, name))
            .map(|(_, c)| c.clone())
    }

    /// A batch that mixes token statements with others: refused (the engine cannot answer
    /// half of it, and a server must not see the token statements).
    fn local_batch_refuse(&mut self) -> bool {
        self.out.send_client_with(|o| {
            encode::error_response(
                o,
                b"0A000",
                b"polarsplit: polarsplit.causal_token statements must be alone in their batch",
                None,
            );
        });
        self.skip_to_sync = true;
        true
    }
}

/// The RowDescription of `SHOW polarsplit.causal_token`: one text column.
fn row_description(o: &mut Vec<u8>) {
    encode::message(o, tag::ROW_DESCRIPTION, |o| {
        o.extend_from_slice(&1u16.to_be_bytes());
        o.extend_from_slice(SETTING.as_bytes());
        o.push(0);
        o.extend_from_slice(&0u32.to_be_bytes()); // table
        o.extend_from_slice(&0u16.to_be_bytes()); // column
        o.extend_from_slice(&25u32.to_be_bytes()); // text
        o.extend_from_slice(&(-1i16).to_be_bytes());
        o.extend_from_slice(&(-1i32).to_be_bytes());
        o.extend_from_slice(&0u16.to_be_bytes()); // text format
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Texts around the token statements: their spellings, near misses, and the common reads.
    fn text() -> impl Strategy<Value = String> {
        let known = prop::sample::select(vec![
            "SHOW",
            "show",
            "sHoW",
            "SET",
            "set",
            "SeT",
            "SELECT",
            "SESSION",
            SETTING,
            "POLARSPLIT.CAUSAL_TOKEN",
            "=",
            "TO",
            "'ps1:1.1:0/1'",
            ";",
            "é",
        ]);
        let word = prop_oneof![
            15 => known.prop_map(String::from),
            1 => "[ \t\r\n]{0,3}",
            1 => "[a-zA-Z_.]{1,6}",
            1 => any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(word, 0..6).prop_map(|w| {
            let mut s = String::new();
            for (i, x) in w.iter().enumerate() {
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(x);
            }
            s
        })
    }

    proptest! {
        /// C-1, C-2: the quick look at a text's first bytes never turns away a token statement
        /// (the texts it turns away are the ones `token::command` does not recognise), also when
        /// the text runs on past its end as in a Parse body.
        #[test]
        fn c1_c2_the_quick_look_never_misses_a_token_statement(sql in text(), tail in "[\0a-z]{0,3}") {
            let full = crate::token::command(&sql);
            if !may_be_command(sql.as_bytes()) {
                prop_assert_eq!(&full, &None);
            }
            prop_assert_eq!(text_command(sql.as_bytes()), full.clone());
            let mut rest = sql.clone().into_bytes();
            rest.push(0);
            rest.extend_from_slice(tail.as_bytes());
            if full.is_some() {
                prop_assert!(may_be_command(&rest));
            }
        }
    }

    #[test]
    fn c1_c2_the_quick_look_lets_the_token_statements_through() {
        for sql in [
            "SHOW polarsplit.causal_token",
            " \t\r\nshow polarsplit.causal_token;",
            "set polarsplit.causal_token = 'x'",
            "SET SESSION polarsplit.causal_token TO 'x'",
            "set",
        ] {
            assert!(may_be_command(sql.as_bytes()), "{sql:?}");
        }
        assert_eq!(
            text_command(b"SHOW polarsplit.causal_token"),
            Some(TokenCommand::Show)
        );
        for sql in [
            "SELECT 1",
            "",
            "se",
            " sh",
            "SEL",
            "\u{a0}SHOW polarsplit.causal_token",
        ] {
            assert!(!may_be_command(sql.as_bytes()), "{sql:?}");
        }
    }
}
