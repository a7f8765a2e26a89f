//! What a statement that ran on the writer does to the session's state: transaction state
//! (S-3), hazards (S-4), whether the writer's session state must be captured again (S-5), and
//! the client's prepared statements (E-2).

use super::state::{Hazards, HeldNames, TxnState, MAX_CUSTOM_NAMES};
use super::*;
use crate::classify::{DiscardWhat, Effects, Kind, StatementInfo, Var};

/// Whether the statements' text is needed after they ran (SET/RESET names and values,
/// DEALLOCATE targets).
pub(super) fn keeps_text(c: &Classification) -> bool {
    c.statements().iter().any(|s| {
        matches!(
            s.kind,
            Kind::Set { .. } | Kind::Reset { .. } | Kind::Deallocate { all: false } | Kind::Prepare
        ) || s.effects.contains(Effects::SETS_PLACEHOLDER_BY_NAME)
    })
}

/// Whether a statement runs code the engine cannot see into (DO, CALL, a user function not
/// known to be read-safe): it may change the session's state in ways no text shows (S-5).
pub(super) fn runs_unseen_code(s: &StatementInfo) -> bool {
    // Code a report, the configuration or a hint judged read-safe (a stable user function,
    // `citext`'s `replace`) is code the engine was told is safe, in a read, a write or a read
    // kept off readers for another reason alike: the statement's own verdict on its code, not
    // its routing reason, says which ([`Effects::UNSEEN_CODE`]).
    s.effects.contains(Effects::UNSEEN_CODE)
        || s.effects.contains(Effects::CALLS_SET_CONFIG) && !sets_config_by_name(s)
}

/// Code the catalogue's last report judged read-safe, run while DDL since may have replaced it
/// ([`Effects::CODE_JUDGED_BEFORE_DDL`]). The session's state may have changed with it, so a
/// capture follows and the parse rules count a change — both undone by what the capture finds —
/// but it is no hazard for the rest of the session. (Found running SQLAlchemy's suite through
/// the proxy, 2026-12-06: in a database with `citext` installed, whose functions share
/// built-ins' names, every session that read with one of those names while another session's
/// DDL was not yet reported kept all its reads on the primary for good, as code the engine
/// could not see into.)
pub(super) fn runs_code_of_a_changed_catalog(s: &StatementInfo) -> bool {
    s.effects.contains(Effects::RUNS_CODE)
        && s.effects.contains(Effects::CODE_JUDGED_BEFORE_DDL)
        && !s.effects.contains(Effects::UNSEEN_CODE)
}

/// Code that may have changed the session's state: unseen, or judged safe by a report that DDL
/// may have outdated.
fn runs_code_that_may_change_state(s: &StatementInfo) -> bool {
    runs_unseen_code(s) || runs_code_of_a_changed_catalog(s)
}

/// Whether a statement's `set_config` calls all name their settings in its text (an examiner's
/// finding of 2026-12-05: Django's `SELECT set_config('TimeZone', 'UTC', false)` at connect, as
/// unseen code, kept every read of the session on the primary): it changes the session's state
/// as a SET of those names would — a capture is due, and inside a block its reads stay on the
/// writer — and the placeholders among the names are noted before it is sent.
pub(super) fn sets_config_by_name(s: &StatementInfo) -> bool {
    s.effects.contains(Effects::SETS_CONFIG_BY_NAME)
}

/// The server-side large-object functions (built-in object IDs, the same in every PostgreSQL
/// release that has them): what libpq's `lo_*` and JDBC's `LargeObjectManager` call through
/// FunctionCall messages. They open, read, write, seek and close large objects and change no
/// session setting; every other function called so is code the engine cannot see into (S-5).
pub(super) fn is_large_object_function(oid: u32) -> bool {
    matches!(
        oid,
        715 // lo_create(oid)
            | 952 // lo_open(oid, integer)
            | 953 // lo_close(integer)
            | 954 // loread(integer, integer)
            | 955 // lowrite(integer, bytea)
            | 956 // lo_lseek(integer, integer, integer)
            | 957 // lo_creat(integer)
            | 958 // lo_tell(integer)
            | 964 // lo_unlink(oid)
            | 1004 // lo_truncate(integer, integer)
            | 3170 // lo_lseek64(integer, bigint, integer)
            | 3171 // lo_tell64(integer)
            | 3172 // lo_truncate64(integer, bigint)
    )
}

/// Whether the statements may change the settings a server parses a statement under (E-2: a
/// server keeps a prepared statement's parse, so its literals mean what they meant when the
/// client prepared it): SET or RESET of a setting not known to leave the parse alone, RESET
/// ALL, code the engine cannot see into.
pub(super) fn may_change_parse_rules(c: &Classification) -> bool {
    c.statements().iter().any(|s| {
        let sets = match s.kind {
            Kind::Set { var, .. } | Kind::Reset { var, .. } => !var.leaves_parse_alone(),
            Kind::ResetAll => true,
            _ => false,
        };
        // set_config: code the engine cannot see into, or a setting its text names that may.
        sets || runs_code_that_may_change_state(s)
            || s.effects.contains(Effects::SETS_PARSE_SETTING_BY_NAME)
    })
}

/// S-3: what a statement does to a transaction block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Edge {
    /// `BEGIN` / `START TRANSACTION` (inside a block: a warning, and its options apply).
    Begin,
    /// `COMMIT` or `ROLLBACK`; `chain`: `AND CHAIN`, which begins the next block at once.
    End { chain: bool },
}

/// The [`Edge`] statement `s` is, if any: the one match of the statements that begin or end a
/// block, which every rule about which statements a block holds reads.
pub(super) fn edge(s: &StatementInfo) -> Option<Edge> {
    match s.kind {
        Kind::Begin(_) => Some(Edge::Begin),
        Kind::Commit { chain } | Kind::Rollback { chain } => Some(Edge::End { chain }),
        _ => None,
    }
}

/// What the last statement of `c` that begins or ends a transaction block does: `Some(true)`
/// it ends one (COMMIT, ROLLBACK, with or without AND CHAIN: the settings of a SET LOCAL made
/// inside are reverted from then on), `Some(false)` it begins one, `None` there is none.
pub(super) fn txn_block_edge(c: &Classification) -> Option<bool> {
    c.statements()
        .iter()
        .rev()
        .find_map(edge)
        .map(|e| matches!(e, Edge::End { .. }))
}

/// Whether the statements end a transaction block or roll part of one back: the settings a
/// SET inside it made may revert there.
pub(super) fn may_revert_settings(c: &Classification) -> bool {
    c.statements().iter().any(|s| {
        matches!(
            s.kind,
            Kind::Commit { .. } | Kind::Rollback { .. } | Kind::RollbackToSavepoint
        )
    })
}

/// The statement a `DEALLOCATE [PREPARE] name` deallocates, read as the server reads a name —
/// comments skipped, `U&"…"` decoded, `""` undoubled, only ASCII folded, cut to 63 bytes — by
/// the same reading that finds the statements SQL names ([`prepared_mentions`]): the last name
/// after the keyword (`DEALLOCATE PREPARE prepare` deallocates `prepare`). `None` for any other
/// text. (A hand-made reading took `DEALLOCATE /* c */ s1`, `U&"…"`, `"a""b"`, `Ä1` and long
/// names for other names than the server: an examiner's probe, 2026-12-05, 14 of 14 spellings.)
pub(super) fn deallocate_target(stmt: &str) -> Option<Vec<u8>> {
    let mut last = None;
    crate::classify::prepared_mentions(stmt, |m| {
        if let crate::classify::Mention::Name(n) = m {
            last = Some(n);
        }
    });
    last
}

impl Session {
    /// Remembers the placeholder settings (`app.tenant`) a statement string sets or resets,
    /// before it is sent: the capture pipelined behind it asks for them by name (S-5).
    pub(super) fn note_custom_names(&mut self, class: &Classification, text: &str) {
        for s in class.statements() {
            if s.effects.contains(Effects::SETS_PLACEHOLDER_BY_NAME) {
                match crate::classify::set_config_names(s.span.of(text)) {
                    Some(names) if names.iter().any(|n| n.contains('.')) => {
                        for n in &names {
                            self.note_placeholder_name(n);
                        }
                    }
                    // The classifier saw a placeholder the text's names do not show: not followed.
                    _ => self.hazards.set(Hazards::UNSEEN_CODE),
                }
            }
            let name = match s.kind {
                Kind::Set {
                    var: Var::Other | Var::Placeholder,
                    name,
                    ..
                }
                | Kind::Reset {
                    var: Var::Other | Var::Placeholder,
                    name,
                } => name.of(text),
                _ => continue,
            };
            self.note_placeholder_name(name);
        }
    }

    /// A SET or RESET of `name` as written: a placeholder setting (`app.tenant`) is followed by
    /// the capture, by name. Quotes only keep a part's case, which a setting's name ignores. A
    /// name the engine cannot spell as the server reads it (a `U&"…"` escape, a letter outside
    /// ASCII, which PostgreSQL may or may not fold) cannot be asked for: the session's state is
    /// then not known whole (an examiner's finding of 2026-12-05: `SET app.ténant`,
    /// `SET U&"app.\007Aone"` read NULL on the standby).
    fn note_placeholder_name(&mut self, written: &str) {
        if !written.contains('.') {
            return;
        }
        let name = written.replace('"', "");
        let plain = name.bytes().all(super::hidden::plain_name_byte);
        if !plain || !self.settings.note_custom_name(name.as_bytes()) {
            // Or more placeholder names than the capture follows.
            self.hazards.set(Hazards::UNSEEN_CODE);
        }
    }

    /// Whether the statements may change the writer's session state (S-5): a capture is due
    /// once they ran. A statement the classifier could not make out (`Unknown`: a syntax it does
    /// not know, such as `SET search_path FROM CURRENT`) may be one that does.
    pub(super) fn changes_state(&self, c: &Classification) -> bool {
        c.statements().iter().any(|s| {
            matches!(
                s.kind,
                // A SET LOCAL too: outside a block it only warns, but a placeholder it names
                // comes into being (as '', where a fresh reader has none: measured).
                Kind::Set { .. }
                    | Kind::Reset { .. }
                    | Kind::ResetAll
                    | Kind::Discard(DiscardWhat::All)
                    | Kind::SetSessionCharacteristics(_)
                    | Kind::Unknown
            ) || runs_code_that_may_change_state(s)
                || s.effects.contains(Effects::CALLS_SET_CONFIG)
                || (self.config.capture_after_dml && s.may_write())
        })
    }

    /// S-5: code the engine cannot see into ran on the writer (`in_txn`: inside a transaction
    /// block): the session's state may have changed, so a capture is due (after the block; its
    /// reads stay on the writer until then).
    /// The writer session's state may have changed (S-3, S-5): outside a block a capture is due;
    /// inside one, as after a SET there, its reads stay on the writer and the capture follows
    /// its end.
    pub(super) fn state_may_have_changed(&mut self) {
        if self.txn.active {
            self.txn.set_ran = true;
        } else {
            self.settings.mark_due();
        }
    }

    /// A statement changed settings it names (a RESET, `set_config('TimeZone', …)`): inside a
    /// block its reads stay on the writer and the capture follows its end (S-3); outside one a
    /// capture is due.
    fn state_may_have_changed_in(&mut self, in_txn: bool) {
        if in_txn {
            self.txn.set_ran = true;
        } else {
            self.settings.mark_due();
        }
    }

    pub(super) fn ran_unseen_code(&mut self, in_txn: bool) {
        if in_txn {
            self.txn.set_ran = true;
        }
        // Placeholder settings it may have set under names the engine never saw are invisible
        // to the capture, unless the operator listed the application's names (S-5).
        if self.config.custom_settings.is_empty() {
            self.hazards.set(Hazards::UNSEEN_CODE);
        }
        self.settings.mark_due();
    }

    /// S-4/S-5: a statement string the engine cannot read (not UTF-8, or streamed past
    /// `max_inspected_message_bytes`) is on its way to the writer. Marked when it arrives, before anything
    /// behind it is decided: whatever it does there, no read of the session runs elsewhere again
    /// ([`Hazards::UNREAD`]), and catalogue-derived verdicts are re-learned (it may be DDL).
    pub(super) fn unread_statement(&mut self) {
        self.hazards.set(Hazards::UNREAD);
        self.catalog_changed();
        // Not counted as DDL of names (E-2, `names_epoch`): a client whose every statement is
        // unreadable (a LATIN1 client's text, bulk statements past the inspection limit) would
        // otherwise keep every session's writer-parsed statements off readers for good.
    }

    /// The S-4 names, made room for.
    fn held_mut(&mut self) -> &mut HeldNames {
        self.held_names.get_or_insert_with(Box::default)
    }

    /// The `WITH HOLD` cursor and `LISTEN` hazards as their names say, and the names given back
    /// once none is left.
    fn sync_held(&mut self) {
        let (cursor, channel) = self
            .held_names
            .as_ref()
            .map_or((false, false), |h| (h.has_cursor(), h.has_channel()));
        for (h, on) in [(Hazards::HOLD_CURSOR, cursor), (Hazards::LISTEN, channel)] {
            if on {
                self.hazards.set(h);
            } else {
                self.hazards.clear(h);
            }
        }
        if self.held_names.as_ref().is_some_and(|h| h.is_empty()) {
            self.held_names = None;
        }
    }

    /// S-4: the capture found the writer listening on a channel. Only added to: a channel
    /// the engine saw stays until its `UNLISTEN`, as a `LISTEN` inside the open block counts
    /// already though the server takes it only at COMMIT.
    pub(super) fn listening_found(&mut self) {
        if !self.hazards.has(Hazards::LISTEN) {
            self.held_mut().listening_unseen();
            self.sync_held();
        }
    }

    /// S-4: a transaction block ended at this RFQ: what of it the statements did not settle
    /// (an end the engine did not see) is settled on the safe side.
    pub(super) fn held_block_over(&mut self) {
        if let Some(h) = self.held_names.as_mut().filter(|h| h.in_block()) {
            h.block_ended_unseen();
            self.sync_held();
        }
    }

    /// S-4: what one statement does to the open `WITH HOLD` cursors and the channels listened
    /// on. `in_txn`: it ran in a transaction block; `ran`: it may have run (it succeeded, or
    /// something else of its unit failed); `sure`: it and its whole unit succeeded and their
    /// implicit transaction committed; `failed_block`: the block it ran in had failed (a COMMIT
    /// there rolls back).
    fn held_effects(
        &mut self,
        s: &StatementInfo,
        in_txn: bool,
        (success, ran, sure): (bool, bool, bool),
        failed_block: &mut bool,
    ) {
        match s.kind {
            // Counted also when it may have failed: the safe side.
            Kind::DeclareCursor {
                with_hold: true,
                cursor,
            } if ran => self.held_mut().declare(cursor, in_txn),
            Kind::Listen { channel } if ran => self.held_mut().listen(channel, in_txn),
            // Immediate, whatever block it ran in: no ROLLBACK brings a cursor back.
            Kind::Close { all, cursor } if success && self.held_names.is_some() => {
                let h = self.held_mut();
                if all {
                    h.close_all();
                } else {
                    h.close(cursor);
                }
            }
            Kind::Unlisten { all, channel } if sure && self.held_names.is_some() => {
                self.held_mut().unlisten((!all).then_some(channel), in_txn);
            }
            Kind::Begin(_) => *failed_block = false,
            Kind::RollbackToSavepoint => {
                if let Some(h) = self.held_names.as_mut() {
                    h.rollback_to_savepoint();
                }
                *failed_block = !success;
            }
            Kind::Commit { .. } | Kind::Rollback { .. } => {
                if let Some(h) = self.held_names.as_mut() {
                    match s.kind {
                        _ if !sure => h.block_ended_unseen(),
                        Kind::Commit { .. } if !*failed_block => h.commit(),
                        _ => h.rollback(),
                    }
                }
                *failed_block = false;
            }
            Kind::Discard(DiscardWhat::All) if success => self.held_names = None,
            _ => return,
        }
        self.sync_held();
    }

    /// S-3/S-4/S-5/E-2 effects of a statement string that ran on the writer, statement by
    /// statement. `settled`: its ReadyForQuery came (false for a batch the client closed
    /// without a Sync: its implicit transaction may still roll back); `alone`: `class` is all
    /// its unit ran (a failure is then its own).
    pub(super) fn apply_effects(
        &mut self,
        class: &Classification,
        sql: Option<&[u8]>,
        success: bool,
        was_active: bool,
        (settled, alone): (bool, bool),
    ) {
        let text = sql.and_then(|b| std::str::from_utf8(b).ok());
        let statements = class.statements();
        let mut in_txn = was_active || opens_block_ahead(statements);
        let mut failed_block = was_active && self.txn.failed;
        let ran = success || !(alone && class.count() == 1);
        for (i, s) in statements.iter().enumerate() {
            let outcome = (success, ran, success && settled);
            self.held_effects(s, in_txn, outcome, &mut failed_block);
            let e = s.effects;
            // Hazards are set even if the string failed (conservative); cleared only on success.
            if e.contains(Effects::CREATES_TEMP) {
                self.hazards.set(Hazards::TEMP);
            }
            if e.contains(Effects::ADVISORY_LOCK) {
                self.hazards.set(Hazards::ADVISORY_LOCK);
            }
            if e.contains(Effects::SEEDS_RANDOM) || e.contains(Effects::LOADS_LIBRARY) {
                self.hazards.set(Hazards::BACKEND_LOCAL);
            }
            if e.contains(Effects::CHANGES_CATALOG) {
                // Now, and again once the block is over: a load that ran before its COMMIT
                // did not see it.
                self.catalog_changed();
                // E-2: a name may resolve otherwise from now on — unless the DDL only made
                // temporary objects or an index.
                if !e.contains(Effects::CREATES_TEMP) && !e.contains(Effects::KEEPS_NAMES) {
                    self.classifier.catalogs().names_moved();
                }
                self.ddl_in_block |= in_txn;
            }
            if runs_unseen_code(s) {
                self.ran_unseen_code(in_txn);
            } else if runs_code_of_a_changed_catalog(s)
                || e.contains(Effects::CALLS_SET_CONFIG) && sets_config_by_name(s)
            {
                self.state_may_have_changed_in(in_txn);
            }
            if e.contains(Effects::PREPARES_TXN) {
                self.lsn.prepared_txn = true;
            }
            if success && e.contains(Effects::ADVISORY_UNLOCK_ALL) {
                self.hazards.clear(Hazards::ADVISORY_LOCK);
            }
            if in_txn {
                // Statements that leave the block's transaction as a reader would see it (no
                // XID, no lock, no setting) keep its read-only prefix: `DEALLOCATE` among them,
                // which PHP PDO sends inside a block whenever a prepared statement is dropped.
                let keeps_prefix = s.is_replica_safe()
                    || matches!(
                        s.kind,
                        Kind::Begin(_)
                            | Kind::Savepoint
                            | Kind::ReleaseSavepoint
                            | Kind::SetTransaction(_)
                            | Kind::Show
                            | Kind::Empty
                            | Kind::Deallocate { .. }
                            | Kind::Discard(DiscardWhat::Plans)
                    );
                if !keeps_prefix {
                    self.txn.read_only_prefix = false;
                }
                if s.may_write() && !matches!(s.kind, Kind::Commit { .. } | Kind::Rollback { .. }) {
                    self.txn.may_have_written = true;
                }
            }
            match s.kind {
                Kind::Begin(o) => {
                    // A BEGIN inside the block is answered with a warning, and its options
                    // still apply (PostgreSQL sets them after the warning): psycopg's own BEGIN
                    // followed by the application's `BEGIN ISOLATION LEVEL …` (red10-c).
                    if in_txn && success {
                        if let Some(i) = o.isolation {
                            self.txn.isolation = Some(i);
                        }
                    }
                    in_txn = true;
                }
                Kind::Commit { chain } | Kind::Rollback { chain } => {
                    let next = chain || opens_block_ahead(&statements[i + 1..]);
                    if next && in_txn && success && self.txn.active {
                        // The block ends and the next begins in the same unit (the writer's
                        // RFQ stays `T`): `… AND CHAIN`, with the block's characteristics, or
                        // `COMMIT; BEGIN`, with its BEGIN's (below) or the session's. What the
                        // block wrote is committed or gone, so the new one has not written, and
                        // a writer sample may position the commit (red10-c, red11-r: a token
                        // reported after it did not cover the write).
                        let isolation = if chain {
                            self.txn.isolation
                        } else {
                            Some(
                                self.session_isolation
                                    .unwrap_or(self.config.server_default_isolation),
                            )
                        };
                        self.end_txn(matches!(s.kind, Kind::Commit { .. }));
                        self.txn = TxnState::begin(isolation);
                    }
                    in_txn = next;
                }
                Kind::SetTransaction(o) if in_txn => {
                    if let Some(i) = o.isolation {
                        self.txn.isolation = Some(i);
                    }
                }
                Kind::SetSessionCharacteristics(_) if success && in_txn => {
                    // A session default set inside a block: as a SET there (S-3), its reads
                    // stay on the writer and the state — the default isolation with it — is
                    // captured once the block ends (a ROLLBACK undoes it on the server).
                    self.txn.set_ran = true;
                }
                Kind::SetSessionCharacteristics(o) if success => {
                    if let Some(i) = o.isolation {
                        self.session_isolation = Some(i);
                    }
                    self.settings.mark_due();
                }
                Kind::Set {
                    var, name, local, ..
                } => {
                    if matches!(var, Var::Other | Var::Placeholder) {
                        if let Some(n) = text.map(|t| name.of(t)) {
                            self.note_placeholder_name(n);
                        }
                    }
                    if in_txn {
                        // S-3: a SET in the transaction; its reads stay on the writer, and the
                        // state is captured once it ends.
                        self.txn.set_ran = true;
                        if var == Var::TransactionIsolation {
                            if let Some(v) = text.map(|t| s.span.of(t)) {
                                let value = v.split_once('=').map(|(_, v)| v).or_else(|| {
                                    let lower = v.to_ascii_lowercase();
                                    lower.find(" to ").map(|p| &v[p + 4..])
                                });
                                if let Some(i) = value.and_then(Isolation::parse) {
                                    self.txn.isolation = Some(i);
                                }
                            }
                        }
                    } else if var != Var::Polar {
                        if !local
                            && var == Var::SearchPath
                            && text.is_some_and(|t| {
                                s.span.of(t).to_ascii_lowercase().contains("pg_temp")
                            })
                        {
                            // With pg_temp on the search_path a plain CREATE TABLE makes a
                            // temporary table: the classifier cannot see that.
                            self.hazards.set(Hazards::TEMP);
                        }
                        self.settings.mark_due();
                    }
                }
                Kind::Reset { .. } | Kind::ResetAll => self.state_may_have_changed_in(in_txn),
                // A statement the classifier could not make out may be a SET in a syntax it
                // does not know: inside a block, as a SET there (S-3; outside one a capture
                // is due, `changes_state`).
                Kind::Unknown if in_txn => self.txn.set_ran = true,
                Kind::RollbackToSavepoint if in_txn => {}
                Kind::Discard(w) if success => match w {
                    DiscardWhat::All => {
                        // Not UNSEEN_CODE: a placeholder that code set under a name the engine
                        // never saw survives DISCARD ALL as '' (a fresh reader has none at
                        // all: NULL from current_setting(name, true) — measured), so it still
                        // cannot be replayed. (SPEC S-4 lists DISCARD ALL as clearing it; this
                        // is the safe side of that.)
                        // Nor BACKEND_LOCAL: DISCARD ALL does not reset the random seed (measured), nor
                        // unload a library.
                        // Nor UNREAD: what the unread statement did is not known.
                        self.hazards.retain(&[
                            Hazards::UNSEEN_CODE,
                            Hazards::BACKEND_LOCAL,
                            Hazards::UNREAD,
                        ]);
                        // The client's statements were dropped when its CommandComplete
                        // came (`writer_dropped_statements`).
                        self.settings.reset();
                        self.settings.mark_due();
                        self.session_isolation =
                            self.startup.as_ref().and_then(|s| s.default_isolation);
                    }
                    DiscardWhat::Temp => self.hazards.clear(Hazards::TEMP),
                    _ => {}
                },
                Kind::Prepare => self.hazards.set(Hazards::PREPARE),
                Kind::Deallocate { all: true } if success => {
                    self.hazards.clear(Hazards::PREPARE);
                }
                Kind::Deallocate { all: false } if success => {
                    match text.and_then(|t| deallocate_target(s.span.of(t))) {
                        Some(name) => {
                            self.statements.remove(&name);
                        }
                        // Its text is not at hand (a DEALLOCATE sent as an extended-protocol
                        // statement: PQexecParams, pgjdbc, psycopg's pipeline) or names nothing
                        // readable. It succeeded on the writer, so it deallocated a statement
                        // there: the engine stops answering for any of those names, and the
                        // writer answers them — a dropped statement kept would run on a reader
                        // (an examiner's probe: `SELECT 'old'` answered for the client's new
                        // `s1`, 5 of 5).
                        None => {
                            self.statements.forget_named_on_writer();
                            self.update_writer_pin();
                        }
                    }
                }
                _ => {}
            }
        }
        if self.ddl_in_block && !in_txn {
            self.ddl_in_block = false;
            self.catalog_changed();
        }
        debug_assert!(self.settings.custom_names.len() <= MAX_CUSTOM_NAMES);
    }

    /// DDL is about to run in this session's database: marked now as well as at its answer
    /// ([`Self::catalog_changed`]), since a standby may replay it before the answer reaches the
    /// engine, and another session's read decided meanwhile ran the new definition there (an
    /// examiner's probe, 2026-12-05: 7 of 5,757 reads of a view switched back and forth). A
    /// catalogue load begun in between does not see it: the mark at the answer renews it.
    pub(super) fn catalog_changing(&self) {
        let db = self.startup.as_ref().map_or(&[][..], |s| &s.database[..]);
        self.classifier.catalogs().mark_changed(db);
    }

    /// DDL ran in this session's database (S-6, S-7, F-policy): until the host reports the
    /// database's catalogue again, its reads stay on the writer.
    fn catalog_changed(&self) {
        self.catalog_changing();
        self.engine.conns().ddl_ran();
    }
}

/// S-3: whether the statements from here to the end of their transaction include a `BEGIN`.
/// The statements of one Query, and the Executes of one batch before its Sync, run in one
/// implicit transaction; a `BEGIN` among them makes it the block, with what ran before it
/// (`INSERT …; BEGIN` leaves the INSERT uncommitted in the block; a driver's `BEGIN` batched
/// with the block's first statement puts that statement in the block: red10-c, pgjdbc with
/// autocommit off read its own uncommitted INSERT from a standby as missing).
pub(super) fn opens_block_ahead<'a>(
    statements: impl IntoIterator<Item = &'a StatementInfo>,
) -> bool {
    statements.into_iter().find_map(edge) == Some(Edge::Begin)
}

/// S-3: whether the batch's Execute `j` runs in a block, given whether the one before it ended
/// in one (`in_txn`): the session's block, or the one a `BEGIN` further on in the batch makes of
/// the implicit transaction it runs in ([`opens_block_ahead`]). `clear`: Executes before it are
/// known to have no `BEGIN` ahead in their transaction (the walk stays linear in the batch).
pub(super) fn exec_in_block(
    execs: &[Option<Classification>],
    j: usize,
    in_txn: bool,
    clear: &mut usize,
) -> bool {
    if in_txn {
        return true;
    }
    if j < *clear {
        return false;
    }
    for (k, c) in execs.iter().enumerate().skip(j) {
        match c.iter().flat_map(|c| c.statements()).find_map(edge) {
            Some(Edge::Begin) => return true,
            Some(Edge::End { .. }) => {
                *clear = k + 1;
                return false;
            }
            None => {}
        }
    }
    *clear = execs.len();
    false
}

/// S-3: whether a block is open after `c` ran, given whether one was before it.
pub(super) fn block_after(c: &Classification, in_txn: bool) -> bool {
    match c.statements().iter().filter_map(edge).next_back() {
        Some(Edge::Begin) => true,
        Some(Edge::End { chain }) => chain,
        None => in_txn,
    }
}

/// Whether `c` runs DDL that may change what the host's catalogue reports (S-6, S-7).
pub(super) fn changes_catalog(c: &Classification) -> bool {
    c.effects().contains(Effects::CHANGES_CATALOG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{
        Classifier, FunctionCatalogs, FunctionPolicy, Limits, NotSafe, UserFunction, Volatility,
    };

    fn citext_like(catalogs: &FunctionCatalogs, volatility: Volatility) {
        // `citext` installs a `replace` of its own beside the built-in one.
        let f = UserFunction {
            schema: "public".into(),
            name: "replace".into(),
            volatility,
        };
        catalogs.load_started(b"db");
        catalogs.set(b"db", [f]).expect("a catalogue");
    }

    #[test]
    fn s5_code_a_report_judged_read_safe_is_no_unseen_code_while_ddl_is_unreported() {
        let catalogs = Arc::new(FunctionCatalogs::new());
        citext_like(&catalogs, Volatility::Immutable);
        let c = Classifier::with_policy(
            FunctionPolicy::default(),
            64,
            Limits::default(),
            catalogs.clone(),
        );
        let sql = "SELECT replace($1::text, 'a', 'b')";
        let safe = c.classify_in(b"db", sql);
        let s = safe.first();
        assert!(s.effects.contains(Effects::RUNS_CODE) && safe.is_replica_safe());
        assert!(!runs_unseen_code(s) && !runs_code_of_a_changed_catalog(s));
        assert!(!may_change_parse_rules(&safe));
        // Another session's DDL, not yet reported: the read stays on the writer, its code may
        // have been replaced — the state may have changed (a capture, the parse rules), but it
        // is not code the engine cannot see into for the rest of the session (S-4 hazard).
        catalogs.mark_changed(b"db");
        let during = c.classify_in(b"db", sql);
        let s = during.first();
        assert_eq!(s.not_safe, NotSafe::CatalogChanged);
        assert!(!runs_unseen_code(s) && runs_code_of_a_changed_catalog(s));
        assert!(may_change_parse_rules(&during));
        // A report that the function is volatile: code the engine cannot see into.
        citext_like(&catalogs, Volatility::Volatile);
        let volatile = c.classify_in(b"db", sql);
        let s = volatile.first();
        assert_eq!(s.not_safe, NotSafe::UserFunction);
        assert!(runs_unseen_code(s) && !runs_code_of_a_changed_catalog(s));
        // And while DDL is unreported after that, the volatile verdict holds (the engine marks
        // only reads that were otherwise safe).
        catalogs.mark_changed(b"db");
        let s = c.classify_in(b"db", sql);
        assert!(runs_unseen_code(s.first()));
    }

    #[test]
    fn s5_code_a_report_judged_read_safe_is_no_unseen_code_in_writes_and_reads_kept_off_readers() {
        let catalogs = Arc::new(FunctionCatalogs::new());
        let report = |replace: Volatility| {
            let f = |name: &str, volatility| UserFunction {
                schema: "public".into(),
                name: name.into(),
                volatility,
            };
            catalogs.load_started(b"db");
            let fns = [
                f("replace", replace),
                f("stable_fn", Volatility::Stable),
                f("listed_fn", Volatility::Stable),
            ];
            catalogs.set(b"db", fns).expect("a catalogue");
        };
        report(Volatility::Immutable);
        let mut policy = FunctionPolicy::default();
        assert!(policy.write_functions.add("listed_fn"));
        let c = Classifier::with_policy(policy, 64, Limits::default(), catalogs.clone());
        let unseen = |sql: &str| {
            let k = c.classify_in(b"db", sql);
            assert!(!k.is_replica_safe(), "{sql}");
            k.statements().iter().any(runs_unseen_code)
        };
        // The routing reason of these is recorded before their calls are judged (a write, a
        // server-dependent answer, a lock): their code's own verdict decides.
        let judged_safe = [
            "UPDATE t SET x = replace(x, 'a', 'b')",
            "INSERT INTO t SELECT stable_fn(1)",
            "SELECT replace(x, 'a', 'b'), pg_last_wal_replay_lsn() FROM t",
            "SELECT stable_fn(x) FROM t FOR UPDATE",
            "DELETE FROM t WHERE x = replace($1, 'a', 'b') RETURNING stable_fn(x)",
        ];
        for sql in judged_safe {
            assert!(!unseen(sql), "{sql}");
            let k = c.classify_in(b"db", sql);
            assert!(!may_change_parse_rules(&k), "{sql}");
        }
        let not_judged = [
            "UPDATE t SET x = unknown_fn(x)",
            "INSERT INTO t SELECT listed_fn(1)",
            "SELECT listed_fn(1)",
            "SELECT unknown_fn(x), pg_last_wal_replay_lsn() FROM t",
            "DO $$ BEGIN PERFORM 1; END $$",
            "CALL stable_fn(1)",
            "UPDATE t SET x = (SELECT query_to_xml('select 1', true, true, ''))::text",
        ];
        for sql in not_judged {
            assert!(unseen(sql), "{sql}");
        }
        // A report that `replace` is volatile: the same write runs code nothing judged safe.
        report(Volatility::Volatile);
        assert!(unseen(judged_safe[0]));
        assert!(unseen(judged_safe[2]));
        assert!(!unseen(judged_safe[1]));
        // DDL not reported yet: the code a report judged safe may have been replaced since — a
        // capture and a parse-rules change, no hazard — in a write as in a read.
        report(Volatility::Immutable);
        catalogs.mark_changed(b"db");
        for sql in judged_safe.iter().chain(["SELECT stable_fn(1)"].iter()) {
            let k = c.classify_in(b"db", sql);
            assert!(!k.statements().iter().any(runs_unseen_code), "{sql}");
            assert!(
                k.statements().iter().any(runs_code_of_a_changed_catalog),
                "{sql}"
            );
            assert!(may_change_parse_rules(&k), "{sql}");
        }
        for sql in not_judged {
            let k = c.classify_in(b"db", sql);
            assert!(k.statements().iter().any(runs_unseen_code), "{sql}");
        }
        // Statements that run no user code are untouched by the DDL's mark.
        let plain = c.classify_in(b"db", "UPDATE t SET x = 1");
        assert!(!plain
            .statements()
            .iter()
            .any(runs_code_of_a_changed_catalog));
    }

    #[test]
    fn deallocate_targets() {
        assert_eq!(
            deallocate_target("DEALLOCATE _pg3_0"),
            Some(b"_pg3_0".to_vec())
        );
        assert_eq!(
            deallocate_target("deallocate prepare S1;"),
            Some(b"s1".to_vec())
        );
        assert_eq!(
            deallocate_target("DEALLOCATE \"Mixed\""),
            Some(b"Mixed".to_vec())
        );
        assert_eq!(deallocate_target("DEALLOCATE"), None);
        // As the server reads names (an examiner's probe, 2026-12-05).
        assert_eq!(
            deallocate_target("DEALLOCATE /* c */ s1"),
            Some(b"s1".to_vec())
        );
        assert_eq!(
            deallocate_target(r#"DEALLOCATE U&"\0073\0031""#),
            Some(b"s1".to_vec())
        );
        assert_eq!(
            deallocate_target(r#"DEALLOCATE "a""b""#),
            Some(b"a\"b".to_vec())
        );
        assert_eq!(
            deallocate_target("DEALLOCATE Ä1"),
            Some("Ä1".as_bytes().to_vec()),
            "only ASCII folds"
        );
        let long = "s".repeat(70);
        assert_eq!(
            deallocate_target(&format!("DEALLOCATE {long}")),
            Some(long.as_bytes()[..63].to_vec()),
            "cut to 63 bytes"
        );
        assert_eq!(
            deallocate_target("DEALLOCATE PREPARE prepare"),
            Some(b"prepare".to_vec())
        );
    }
}
