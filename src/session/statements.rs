//! Prepared statements (SPEC E-2): what the client parsed, and what each backend connection has
//! prepared.
//!
//! On the writer — the client's own connection — a client statement lives under the client's
//! name. On readers every client statement, the unnamed one included, lives under an
//! engine-chosen name derived from its text and parameter types by a keyed hash
//! (`polarsplit_s_<hash>`, the key secret and per process), so two
//! sessions that share a pooled reader can never collide, and a statement one session prepared
//! there serves the next session that parses the same text. What a reader connection has
//! prepared travels with it in the pool (the engine keeps it by connection id, see
//! `Engine::take_conn_statements`); a connection opened afresh has nothing prepared.

use rustc_hash::FxHashMap;

use crate::classify::Classification;
pub(crate) use crate::cluster::conns::ConnStatements;
use crate::token::may_be_command;

/// Prefix of every statement name the engine creates on a backend connection. Documented and
/// reserved: the probe and the capture use it on the writer (W-7, S-5).
pub(crate) const ENGINE_PREFIX: &[u8] = b"polarsplit_";

/// The engine's name for a client statement on readers.
/// The start of every engine statement name; 16 hex digits of the hash follow.
pub(crate) const ENGINE_STATEMENT_PREFIX: &[u8] = b"polarsplit_s_";

/// How many leading bytes of a statement or portal name a server tells names apart by: it keys
/// both in hash tables of `NAMEDATALEN` (64) byte keys, so two names that share their first 63
/// bytes are one name there (checked on PostgreSQL 15: a Parse of the second gets 42P05, a Bind
/// of it runs the first). The engine keys and compares names the same way ([`name_key`]).
pub(crate) const NAME_SIGNIFICANT: usize = 63;

/// `name` as a server tells it apart from others: its first [`NAME_SIGNIFICANT`] bytes. Every
/// lookup and comparison of a client's statement or portal name goes through this or
/// [`same_name`] (a name the engine compared whole would be two statements where the server has
/// one, and a Parse the primary refuses could succeed on a reader).
pub(crate) fn name_key(name: &[u8]) -> &[u8] {
    &name[..name.len().min(NAME_SIGNIFICANT)]
}

/// Whether two statement or portal names are one name to a server ([`name_key`]).
pub(crate) fn same_name(a: &[u8], b: &[u8]) -> bool {
    name_key(a) == name_key(b)
}

pub(crate) fn engine_name(hash: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(ENGINE_STATEMENT_PREFIX);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..16).rev() {
        out.push(HEX[((hash >> (i * 4)) & 0xf) as usize]);
    }
}

/// The keyed hash (`KeyedHash`, a secret key per process) of the statement's text and parameter
/// types (the part of a Parse after the name): equal statements get equal engine names within a
/// process. A reader connection's knowledge of what it has prepared is these hashes, and a
/// session binds a statement already there without parsing it again — so the hash must not be one
/// a client can collide on purpose (with FNV it could: a crafted text under another client's
/// engine name would have run for that client on a shared reader connection).
pub(crate) fn statement_hash(rest: &[u8]) -> u64 {
    crate::pool::KeyedHash::new().bytes(rest).finish()
}

/// Whether the parse of a statement (the Parse body after the name: text, NUL, parameter
/// types) may depend on the settings that [`ClientStatements::rules`] counts changes of. Those
/// settings decide how a literal is read — a quoted or dollar-quoted string
/// (`standard_conforming_strings`, `DateStyle`, `TimeZone`, `IntervalStyle`, `array_nulls`, …),
/// bytes beyond ASCII (`client_encoding`) — and `= NULL` (`transform_null_equals`). A text with
/// none of a quote, a `$` not followed by a digit, a byte beyond ASCII or the word NULL parses
/// the same under any of them. Over-approximates (a quote in a comment, `$` in a name): such a
/// statement only runs where it already is.
pub(crate) fn rules_may_matter(rest: &[u8]) -> bool {
    let text = rest.split(|&b| b == 0).next().unwrap_or_default();
    text.iter().enumerate().any(|(i, &b)| match b {
        b'\'' => true,
        b'$' => !text.get(i + 1).is_some_and(u8::is_ascii_digit),
        b'n' | b'N' => text
            .get(i..i + 4)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"null")),
        _ => !b.is_ascii(),
    })
}

/// Whether a server may send a message while it parses the statement (the Parse body after
/// the name): `NOTICE 42622` for an identifier longer than [`NAME_SIGNIFICANT`] bytes, which it
/// truncates, and `WARNING 22P06` for a backslash in a string literal under
/// `standard_conforming_strings = off`. On the primary alone each Parse of such a text sends it;
/// a reader's statement kept from an earlier parse sends nothing, so a client's Parse of it is
/// parsed there again (an examiner's finding of 2026-12-07: the NOTICE on 1 of 4 reads, the
/// WARNING on 2 of 4). Over-approximates: any backslash, and any run of more than 63 bytes
/// that are not white space or punctuation outside double quotes (a quoted name counts whole,
/// `""` in it included; a `"` in a string or a comment only makes more count) — such a text
/// is only parsed once more.
pub(crate) fn parse_may_speak(rest: &[u8]) -> bool {
    let text = rest.split(|&b| b == 0).next().unwrap_or_default();
    let (mut run, mut quoted) = (0usize, false);
    for &b in text {
        if b == b'\\' {
            return true;
        }
        quoted ^= b == b'"';
        let part =
            quoted || b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'"') || !b.is_ascii();
        run = if part { run + 1 } else { 0 };
        if run > NAME_SIGNIFICANT {
            return true;
        }
    }
    false
}

/// A Parse in flight on a backend connection (the client's, or a hidden one), in wire order:
/// if the server refuses or skips it, what it was to create is undone.
#[derive(Clone, Debug)]
pub(crate) struct ParseNote {
    pub unit: u32,
    /// The client's name for the statement.
    pub name: Box<[u8]>,
    /// The engine name's hash (readers; 0 on the writer).
    pub hash: u64,
    pub who: super::response::Who,
    /// The connection had the statement already (the engine answered the ParseComplete): a
    /// Parse the server skipped leaves it prepared there.
    pub local: bool,
    /// The connection had the statement already and it is parsed again (the client's Parse of
    /// a text whose parse may send a message, [`parse_may_speak`]), behind a Close of it: if the
    /// server refuses the Parse the statement is gone; if it skips both, it stays.
    pub again: bool,
    /// The client's name was in use: the server refuses the Parse (42P05) or skips it, and the
    /// statement that has the name stays — nothing to undo.
    pub kept: bool,
    /// Not a Parse but a Close (answered by a CloseComplete in the same order).
    pub close: bool,
    /// A Close of the client's statement `name`, tracked no more from when it was sent: the
    /// statement, put back if the server skips the Close after an error in its batch (the
    /// statement then still exists) — E-2. A Parse of a name in use sent behind a statement
    /// that drops every statement (`DEALLOCATE ALL`): the statement it replaced, put back if
    /// the server skips the Parse. Emptied when the drop runs (the statement is gone then).
    pub closed: Option<Box<ClientStmt>>,
}

impl ParseNote {
    /// The note of a Parse of `name` by `who` for unit `unit`; the other fields as most
    /// notes have them (on the writer, not local, not kept, not a Close).
    pub(crate) fn parse(unit: u32, name: &[u8], who: super::response::Who) -> ParseNote {
        ParseNote {
            unit,
            name: name.into(),
            hash: 0,
            who,
            local: false,
            again: false,
            kept: false,
            close: false,
            closed: None,
        }
    }
}

/// The oldest note of a Parse in `notes` (answered in wire order, with Closes between them).
pub(crate) fn pop_parse(notes: &mut std::collections::VecDeque<ParseNote>) -> Option<ParseNote> {
    let i = notes.iter().position(|n| !n.close)?;
    notes.remove(i)
}

/// The oldest note of a Close in `notes`: its CloseComplete came, the statement is gone.
pub(crate) fn pop_close(notes: &mut std::collections::VecDeque<ParseNote>) -> Option<ParseNote> {
    let i = notes.iter().position(|n| n.close)?;
    notes.remove(i)
}

/// One statement the client parsed.
#[derive(Clone, Debug)]
pub(crate) struct ClientStmt {
    /// The Parse body after the name: query string, NUL, parameter types.
    pub rest: Box<[u8]>,
    pub hash: u64,
    pub class: Option<Classification>,
    /// It exists on the writer connection under the client's name.
    pub on_writer: bool,
    /// The session's parse rules when the client parsed it ([`ClientStatements::rules`]): a
    /// server keeps a prepared statement's parse, so its literals mean what they meant then, and
    /// a text they may change runs on a reader only while those rules still hold.
    pub rules: u16,
    /// The writer session's settings (a capture's [`state_hash`](super::state::SessionSettings::state_hash))
    /// under which `rules` held, once a capture told it; 0: not known. A later capture that
    /// finds the same settings again proves the statement parsed as it would be now, whatever
    /// changes came and went in between (E-2: asyncpg's pool turns `jit` off and `RESET ALL`
    /// back at each release).
    pub state: u64,
    /// The row shape the client was shown for it ([`row_shape`]): from the first RowDescription
    /// or NoData answering its Describe (of the statement, or of a portal bound from it in the
    /// same batch). 0: not known yet. A server refuses to run a prepared statement whose
    /// result type changed since it was parsed (0A000 "cached plan must not change result
    /// type"); where the engine prepares it again on another connection, it compares.
    pub shape: u64,
    /// The unit whose answer taught `shape` (a retry of that unit learns it again).
    pub shape_unit: u32,
    /// Where the writer check of its shape stands (E-2).
    pub check: WriterCheck,
    /// The epoch of names when the writer parsed it ([`ClientStatements::stamp`]): while
    /// `on_writer`, a reader parsing it in a later epoch could resolve its names otherwise than
    /// the writer did ([`ClientStatements::resolved_before_ddl`]).
    pub epoch: u32,
    used: u64,
}

/// The check of a statement's row shape on the writer, made before a batch that names it runs
/// there when it exists only on readers and the client was shown its shape (E-2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WriterCheck {
    /// None in flight, nothing pending.
    #[default]
    None,
    /// The hidden Parse and Describe are in flight.
    Pending,
    /// The hidden Parse failed: the statement is prepared before its use as before, whose
    /// error then answers in the place of the client's message (as the primary's would).
    Failed,
    /// It is prepared on the writer now, with another row shape than the client was shown:
    /// the client's next message naming it is answered as the primary answers, 0A000.
    Refused,
}

/// A fingerprint of a RowDescription body (`Some(body)`) or of NoData (`None`): what
/// PostgreSQL compares when it revalidates a prepared statement (`RevalidateCachedQuery`: the
/// count of columns and each column's name, type and typmod — also collation, which the wire
/// does not show), not the table, column number, type length or format the message also
/// carries. Keyed (SipHash, a secret key per process), never 0. `None` for a malformed body.
pub(crate) fn row_shape(row_description: Option<&[u8]>) -> Option<u64> {
    let mut h = crate::pool::KeyedHash::new();
    let Some(body) = row_description else {
        return Some(h.bytes(b"n").finish() | 1);
    };
    let n = u16::from_be_bytes([*body.first()?, *body.get(1)?]);
    h.bytes(b"T").bytes(&n.to_be_bytes());
    let mut pos = 2;
    for _ in 0..n {
        let end = pos + body.get(pos..)?.iter().position(|&b| b == 0)?;
        // Name and its NUL, table oid (4), column number (2), then type oid (4), type length
        // (2), typmod (4), format (2).
        let ty = body.get(end + 7..end + 11)?;
        let typmod = body.get(end + 13..end + 17)?;
        h.bytes(&body[pos..=end]).bytes(ty).bytes(typmod);
        pos = end + 19;
    }
    (pos == body.len()).then(|| h.finish() | 1)
}

/// The client's statements by name (`""` is the unnamed one), bounded (E-2).
///
/// The unnamed statement, parsed anew by most drivers for every statement they send, lives
/// outside the map: its lookups take no hashing, and no comparison of an empty key — an empty
/// `Box<[u8]>` has a dangling address, and glibc's AVX-512 `memcmp` reads it with a masked
/// load that costs a fault-suppression assist on this hardware (18% of an extended-protocol
/// cycle, issue 20's profile).
///
/// The map hashes with FxHash, not a keyed hash: its names are the client's own, the map is the
/// session's own and bounded (`max_prepared_statements`), so names crafted to collide only slow
/// down that client's own lookups, boundedly. Found by the named-statement cycle's profile:
/// SipHash was 6% of it.
#[derive(Debug, Default)]
pub(crate) struct ClientStatements {
    map: FxHashMap<Box<[u8]>, ClientStmt>,
    /// Boxed: a session that never parses the unnamed statement pays 8 bytes for it.
    unnamed: Option<Box<ClientStmt>>,
    clock: u64,
    /// How many of the statements tracked have a text that may be a token statement
    /// (`token::may_be_command`): while none has, no Bind starts a batch the engine answers
    /// itself, which the pump then knows without parsing the Bind and looking its name up (it
    /// asks for every message of a batch that arrives; issue 20's profile).
    /// (`u32`: it shares a word with `rules` and the flags, so the session does not grow.)
    commands: u32,
    /// The parse rules in force: a count of the points where the settings a server parses a
    /// statement under may have changed (SET or RESET of one of them, RESET ALL, unseen code,
    /// the end of a transaction block that changed one, a ParameterStatus of one). A statement
    /// parsed under other rules than now is parsed again nowhere: it runs where it already is.
    /// Saturates: after `u16::MAX` changes every statement counts as parsed under other rules
    /// (a wrapped count could make an old parse look current).
    rules: u16,
    /// A change of the parse rules ran inside a transaction block: its end may revert it.
    pub rules_in_txn: bool,
    /// A statement that may exist only on readers has a known row shape: a batch for the writer
    /// may need the check of that shape there first (E-2). Until then no writer batch is
    /// looked through for one. Sticky: set by what may make it so, cleared with the map.
    pub may_check: bool,
}

impl ClientStatements {
    fn slot(&self, name: &[u8]) -> Option<&ClientStmt> {
        if name.is_empty() {
            self.unnamed.as_deref()
        } else {
            self.map.get(name_key(name))
        }
    }

    fn slot_mut(&mut self, name: &[u8]) -> Option<&mut ClientStmt> {
        if name.is_empty() {
            self.unnamed.as_deref_mut()
        } else {
            self.map.get_mut(name_key(name))
        }
    }

    /// Every statement tracked, the unnamed one first.
    fn entries(&self) -> impl Iterator<Item = (&[u8], &ClientStmt)> {
        self.unnamed
            .iter()
            .map(|s| (&[][..], &**s))
            .chain(self.map.iter().map(|(n, s)| (&n[..], s)))
    }

    /// Every statement tracked, to change what the engine knows of each.
    fn stmts_mut(&mut self) -> impl Iterator<Item = &mut ClientStmt> {
        self.unnamed
            .as_deref_mut()
            .into_iter()
            .chain(self.map.values_mut())
    }

    /// The client's name of the statement a reader knows by engine name `hash`. Equal texts
    /// under several names share one engine name: the first of `used` (the names the failing
    /// unit's messages use) that has it, else the first tracked.
    pub(super) fn client_name_of<'a>(&'a self, hash: u64, used: &[&'a [u8]]) -> Option<&'a [u8]> {
        let has = |n: &[u8]| self.slot(n).is_some_and(|s| s.hash == hash);
        used.iter()
            .copied()
            .find(|n| has(n))
            .or_else(|| self.entries().find(|(_, s)| s.hash == hash).map(|(n, _)| n))
    }

    /// `text` (a server's message about statements) with every engine statement name in it
    /// replaced by the client's name for that statement (E-2: the client never sees the
    /// engine's names; `used`: as for [`Self::client_name_of`]). `None`: it names none.
    pub(super) fn client_names_in(&self, text: &[u8], used: &[&[u8]]) -> Option<Vec<u8>> {
        const NAME: &[u8] = ENGINE_STATEMENT_PREFIX;
        let mut out: Option<Vec<u8>> = None;
        let mut from = 0;
        let mut i = 0;
        while let Some(at) = text
            .get(i..)
            .and_then(|t| t.windows(NAME.len()).position(|w| w == NAME))
        {
            let start = i + at;
            let hex = text.get(start + NAME.len()..start + NAME.len() + 16);
            let hash = hex
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u64::from_str_radix(h, 16).ok());
            i = start + NAME.len();
            let Some(name) = hash.and_then(|h| self.client_name_of(h, used)) else {
                continue;
            };
            let o = out.get_or_insert_with(Vec::new);
            o.extend_from_slice(&text[from..start]);
            o.extend_from_slice(name);
            from = start + NAME.len() + 16;
            i = from;
        }
        let mut o = out?;
        o.extend_from_slice(&text[from..]);
        Some(o)
    }

    /// The client has no statement tracked.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> usize {
        self.map.len() + usize::from(self.unnamed.is_some())
    }

    pub(super) fn get(&mut self, name: &[u8]) -> Option<&ClientStmt> {
        self.clock += 1;
        let clock = self.clock;
        let s = self.slot_mut(name)?;
        s.used = clock;
        Some(s)
    }

    pub(super) fn peek(&self, name: &[u8]) -> Option<&ClientStmt> {
        self.slot(name)
    }

    /// A statement whose text a reader would parse differently now than the server did when
    /// the client prepared it (a server keeps a prepared statement's parse): the parse rules
    /// changed since, and its text has what they may change.
    pub(super) fn lexed_otherwise(&self, name: &[u8]) -> bool {
        self.slot(name)
            .is_some_and(|s| self.lexed_otherwise_stmt(s))
    }

    /// [`Self::lexed_otherwise`] for a statement already looked up.
    pub(super) fn lexed_otherwise_stmt(&self, s: &ClientStmt) -> bool {
        (s.rules != self.rules || self.rules == u16::MAX) && rules_may_matter(&s.rest)
    }

    /// A statement the writer holds as it parsed it before DDL ran since (in an earlier DDL
    /// epoch): a server keeps a prepared statement's resolution of the names it read — a table
    /// created since in a schema earlier on the `search_path`, or a closer overload of a
    /// function it calls, does not make it look again (dropping or altering what it read does)
    /// — where a reader would parse it afresh and find the new object. It runs where its parse
    /// is, on the writer (an examiner's finding, 2026-12-07: 6 of 6 reads answered from a
    /// shadowing table on the standby, the primary alone from the one it first resolved). A
    /// statement on readers only has no such parse anywhere (README, "Two windows stay").
    /// `now`: the epoch of names ([`crate::classify::FunctionCatalogs::names_epoch`]), read
    /// afresh. (A statement tracked before the writer parsed it carries the epoch of its
    /// tracking until [`Self::stamp`].)
    pub(super) fn resolved_before_ddl(s: &ClientStmt, now: u32) -> bool {
        s.on_writer && s.epoch != now
    }

    /// The writer parsed statement `name` (again) in epoch of names `epoch`.
    pub(super) fn stamp(&mut self, name: &[u8], epoch: u32) {
        if let Some(s) = self.slot_mut(name) {
            s.epoch = epoch;
        }
    }

    /// The parse rules in force ([`Self::rules`]).
    pub(super) fn rules(&self) -> u16 {
        self.rules
    }

    /// A capture proved that the rules `at` were those of the writer's settings `state`
    /// (S-5, E-2): the statements parsed under them are marked with it.
    pub(super) fn rules_were(&mut self, at: u16, state: u64) {
        for s in self.stmts_mut().filter(|s| s.rules == at) {
            s.state = state;
        }
    }

    /// A capture proved the rules in force now (`now`) to be those of the writer's settings
    /// `state`: the statements parsed now are marked with it, and those parsed under the same
    /// settings at another time are parsed as they would be now.
    pub(super) fn rules_now(&mut self, now: u16, state: u64) {
        for s in self.stmts_mut() {
            if s.rules == now {
                s.state = state;
            } else if s.state == state {
                s.rules = now;
            }
        }
    }

    /// The parse rules may have changed from here on ([`Self::rules`]).
    pub(super) fn rules_changed(&mut self) {
        self.rules = self.rules.saturating_add(1);
    }

    pub(super) fn contains(&self, name: &[u8]) -> bool {
        self.slot(name).is_some()
    }

    /// Whether a new statement can be tracked without forgetting one that exists only on
    /// readers (those are kept: forgetting one would lose it for the client).
    pub(super) fn has_room(&self, limit: usize) -> bool {
        self.len() < limit || self.entries().any(|(_, s)| s.on_writer)
    }

    /// Tracks a statement the client parsed (replacing one of the same name). Beyond `limit`
    /// the least recently used statement that also exists on the writer is forgotten.
    pub(super) fn insert(
        &mut self,
        name: &[u8],
        rest: &[u8],
        class: Option<Classification>,
        on_writer: bool,
        limit: usize,
    ) {
        let hash = self.hash_of(name, rest);
        self.insert_hashed(name, rest, hash, class, on_writer, limit);
    }

    /// `statement_hash(rest)` for a Parse of `name`: the tracked statement's hash when it was
    /// parsed with the same text and types before (drivers parse the unnamed statement anew for
    /// every statement they send, most often the same one), without hashing the text again.
    pub(super) fn hash_of(&self, name: &[u8], rest: &[u8]) -> u64 {
        match self.slot(name) {
            Some(s) if *s.rest == *rest => s.hash,
            _ => statement_hash(rest),
        }
    }

    /// [`Self::insert`] with `statement_hash(rest)` already computed by the caller.
    pub(super) fn insert_hashed(
        &mut self,
        name: &[u8],
        rest: &[u8],
        hash: u64,
        class: Option<Classification>,
        on_writer: bool,
        limit: usize,
    ) {
        debug_assert_eq!(hash, statement_hash(rest));
        self.clock += 1;
        let (clock, rules, epoch) = (self.clock, self.rules, 0);
        let command = may_be_command(rest);
        if let Some(s) = self.slot_mut(name) {
            let was = may_be_command(&s.rest);
            // Parsed again under the same name (the unnamed statement, every batch): the text
            // is replaced in place, without a new allocation when its length did not change.
            if s.rest.len() == rest.len() {
                s.rest.copy_from_slice(rest);
            } else {
                s.rest = rest.into();
            }
            s.hash = hash;
            s.class = class;
            s.on_writer = on_writer;
            s.rules = rules;
            s.epoch = epoch;
            s.shape = 0;
            s.check = WriterCheck::None;
            s.used = clock;
            self.commands = self.commands + u32::from(command) - u32::from(was);
            return;
        }
        if self.len() >= limit {
            let victim = self
                .entries()
                .filter(|(_, s)| s.on_writer)
                .min_by_key(|(_, s)| s.used)
                .map(|(n, _)| Box::<[u8]>::from(n));
            if let Some(v) = victim {
                self.remove(&v);
            }
        }
        let stmt = ClientStmt {
            rest: rest.into(),
            hash,
            class,
            on_writer,
            rules,
            state: 0,
            shape: 0,
            shape_unit: 0,
            check: WriterCheck::None,
            epoch,
            used: clock,
        };
        self.commands += u32::from(command);
        if name.is_empty() {
            self.unnamed = Some(Box::new(stmt));
        } else {
            self.map.insert(name_key(name).into(), stmt);
        }
    }

    /// Finishes every tracked statement's classification again (`judge`: its text's), after
    /// what classifications are finished against changed since it was parsed (the database's
    /// catalogue: DDL, a report). A server plans a prepared statement again after DDL on what
    /// it names; a verdict kept from its Parse would send it where the primary alone would
    /// run it otherwise (an examiner's probe, 2026-12-05: a view made to read
    /// `pg_is_in_recovery()`, a function made to call `set_config`).
    /// `judge`: a statement's text, and whether its parameter types name a user type.
    pub(super) fn judge_again(&mut self, mut judge: impl FnMut(&str, bool) -> Classification) {
        let all = self
            .unnamed
            .iter_mut()
            .map(|s| &mut **s)
            .chain(self.map.values_mut());
        for s in all {
            let mut parts = s.rest.splitn(2, |&b| b == 0);
            let text = parts.next().unwrap_or_default();
            let user_types =
                crate::protocol::frontend::names_user_type(parts.next().unwrap_or_default());
            if let Ok(t) = std::str::from_utf8(text) {
                s.class = Some(judge(t, user_types));
            }
        }
    }

    /// Whether any statement tracked may be a token statement (`token::may_be_command`).
    pub(super) fn may_hold_command(&self) -> bool {
        self.commands > 0
    }

    pub(super) fn set_on_writer(&mut self, name: &[u8]) {
        if let Some(s) = self.slot_mut(name) {
            s.on_writer = true;
        }
    }

    /// The statement tracked under `name`, to change what the engine knows of it.
    pub(super) fn peek_mut(&mut self, name: &[u8]) -> Option<&mut ClientStmt> {
        self.slot_mut(name)
    }

    /// Unit `unit` is attempted again: the shapes its answers taught were never shown.
    pub(super) fn forget_shapes_of(&mut self, unit: u32) {
        for s in self.stmts_mut().filter(|s| s.shape_unit == unit) {
            s.shape = 0;
        }
    }

    pub(super) fn clear_on_writer(&mut self, name: &[u8]) {
        if let Some(s) = self.slot_mut(name) {
            s.on_writer = false;
            if s.shape != 0 {
                self.may_check = true;
            }
        }
    }

    /// The statements that exist only on readers: `(name, rest)` (the same pair of byte
    /// strings as a captured setting).
    pub(super) fn reader_only(&self) -> Vec<super::state::Setting> {
        self.reader_only_where(|_| true)
    }

    /// The statements that exist only on readers and whose parse a change of the parse rules
    /// may change ([`rules_may_matter`]).
    pub(super) fn reader_only_rule_bound(&self) -> Vec<super::state::Setting> {
        self.reader_only_where(|s| rules_may_matter(&s.rest))
    }

    fn reader_only_where(&self, keep: impl Fn(&ClientStmt) -> bool) -> Vec<super::state::Setting> {
        let mut v: Vec<_> = self
            .entries()
            .filter(|(_, s)| !s.on_writer && keep(s))
            .map(|(n, s)| (Box::<[u8]>::from(n), s.rest.clone()))
            .collect();
        v.sort();
        v
    }

    /// A statement removed by a Close the server then skipped: tracked again as it was,
    /// unless the name was taken since.
    pub(super) fn put_back(&mut self, name: &[u8], stmt: ClientStmt) {
        if self.contains(name) {
            return;
        }
        if may_be_command(&stmt.rest) {
            self.commands += 1;
        }
        if name.is_empty() {
            self.unnamed = Some(Box::new(stmt));
        } else {
            self.map.insert(name_key(name).into(), stmt);
        }
    }

    pub(super) fn remove(&mut self, name: &[u8]) -> Option<ClientStmt> {
        let s = if name.is_empty() {
            self.unnamed.take().map(|s| *s)
        } else {
            self.map.remove(name_key(name))
        };
        if s.as_ref().is_some_and(|s| may_be_command(&s.rest)) {
            self.commands -= 1;
        }
        s
    }

    /// Whether any client statement lives on the writer connection (it must stay bound to the
    /// client, S-4).
    pub(super) fn any_on_writer(&self) -> bool {
        self.entries().any(|(_, s)| s.on_writer)
    }

    /// Forgets every named statement that exists on the writer: one of them was deallocated
    /// there, the engine could not tell which. Their names are the writer's to answer from now
    /// on (a statement the engine does not track runs on the writer).
    pub(super) fn forget_named_on_writer(&mut self) {
        let gone: Vec<Box<[u8]>> = self
            .map
            .iter()
            .filter(|(_, s)| s.on_writer)
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.remove(&n);
        }
    }

    /// `DISCARD ALL` / `DEALLOCATE ALL` ran, with Parses of `after` sent behind it still in
    /// flight: the statements those make survive it, every other is gone.
    pub(super) fn clear_except(&mut self, after: &[&[u8]]) {
        if after.is_empty() {
            self.clear();
            return;
        }
        let mut kept: Vec<(&[u8], ClientStmt)> = Vec::new();
        for n in after {
            if let Some(s) = self.remove(n) {
                kept.push((n, s));
            }
        }
        self.clear();
        // Sticky, as everywhere: a look through them costs little.
        self.may_check = true;
        for (n, s) in kept {
            self.put_back(n, s);
        }
    }

    /// `DISCARD ALL` / `DEALLOCATE ALL`.
    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.unnamed = None;
        self.commands = 0;
        self.may_check = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// E-2, P-8: a text whose parse may send a NOTICE or WARNING is parsed again at each
    /// client Parse on a reader (an examiner's finding, 2026-12-07).
    #[test]
    fn e2_a_text_whose_parse_may_speak_is_parsed_again() {
        let long = format!("SELECT 1 AS {}\0", "a".repeat(64));
        let quoted = format!("SELECT 1 AS \"{}\"\0", "a b".repeat(22));
        let doubled = format!("SELECT 1 AS \"{}\"\"{}\"\0", "a".repeat(40), "b".repeat(40));
        for t in [
            long.as_bytes(),
            quoted.as_bytes(),
            doubled.as_bytes(),
            b"SELECT 'a\\b'\0",
            b"SELECT E'\\n'\0",
        ] {
            assert!(parse_may_speak(t), "{}", String::from_utf8_lossy(t));
        }
        let fits = format!("SELECT 1 AS {}\0", "a".repeat(63));
        for t in [fits.as_bytes(), b"SELECT $1::int, 'x'\0\0\x01\\\\"] {
            assert!(!parse_may_speak(t), "{}", String::from_utf8_lossy(t));
        }
    }

    proptest! {
        /// C-1, C-2, E-2: the count of tracked statements that may be token statements follows
        /// every change of the map (parsed again, replaced, forgotten at the limit, closed,
        /// discarded), so a Bind is never taken for an ordinary one while a token statement is
        /// tracked.
        #[test]
        fn c1_e2_the_count_of_token_statements_tracked_follows_the_map(
            ops in prop::collection::vec((0u8..5, 0usize..4, 0usize..4, any::<bool>()), 0..40),
        ) {
            let names: [&[u8]; 4] = [b"", b"a", b"b", b"c"];
            let texts: [&[u8]; 4] = [
                b"SELECT 1\0\0\0",
                b"SHOW polarsplit.causal_token\0\0\0",
                b" set polarsplit.causal_token = 'x'\0\0\0",
                b"SELECT 2\0\0\0",
            ];
            let mut s = ClientStatements::default();
            for (op, n, t, on_writer) in ops {
                match op {
                    0 | 1 => s.insert(names[n], texts[t], None, on_writer, 3),
                    2 => {
                        s.remove(names[n]);
                    }
                    3 => s.set_on_writer(names[n]),
                    _ if n == 0 && t == 0 => s.clear(),
                    _ => s.clear_on_writer(names[n]),
                }
                let tracked = s.entries().filter(|(_, st)| may_be_command(&st.rest)).count();
                prop_assert_eq!(s.commands as usize, tracked);
                prop_assert_eq!(s.may_hold_command(), tracked > 0);
            }
        }
    }

    /// A RowDescription body: per column (name, table oid, column number, type oid, type
    /// length, typmod, format).
    fn described(cols: &[(&str, u32, i16, u32, i16, i32, i16)]) -> Vec<u8> {
        let mut b = (cols.len() as u16).to_be_bytes().to_vec();
        for (name, table, attnum, ty, len, typmod, format) in cols {
            b.extend_from_slice(name.as_bytes());
            b.push(0);
            b.extend_from_slice(&table.to_be_bytes());
            b.extend_from_slice(&attnum.to_be_bytes());
            b.extend_from_slice(&ty.to_be_bytes());
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&typmod.to_be_bytes());
            b.extend_from_slice(&format.to_be_bytes());
        }
        b
    }

    #[test]
    fn e2_a_row_shape_is_what_postgresql_compares_when_it_revalidates_a_statement() {
        let shape = |cols: &[(&str, u32, i16, u32, i16, i32, i16)]| {
            row_shape(Some(&described(cols))).expect("well formed")
        };
        let a = shape(&[
            ("a", 16384, 1, 20, 8, -1, 0),
            ("b", 16384, 2, 25, -1, -1, 0),
        ]);
        assert_ne!(a, 0);
        // Not compared: the table and column a value came from, the type's length, the
        // format (a portal's Describe shows the formats its Bind asked for).
        assert_eq!(
            a,
            shape(&[("a", 16390, 3, 20, -1, -1, 1), ("b", 0, 0, 25, 4, -1, 1)])
        );
        // Compared: the count of columns, each one's name, type and typmod.
        for other in [
            shape(&[("a", 16384, 1, 20, 8, -1, 0)]),
            shape(&[
                ("a", 16384, 1, 701, 8, -1, 0),
                ("b", 16384, 2, 25, -1, -1, 0),
            ]),
            shape(&[
                ("x", 16384, 1, 20, 8, -1, 0),
                ("b", 16384, 2, 25, -1, -1, 0),
            ]),
            shape(&[
                ("a", 16384, 1, 20, 8, -1, 0),
                ("b", 16384, 2, 25, -1, 14, 0),
            ]),
            row_shape(None).expect("NoData"),
        ] {
            assert_ne!(a, other);
        }
        // A body that is not a RowDescription has no shape.
        let mut bad = described(&[("a", 0, 0, 20, 8, -1, 0)]);
        bad.pop();
        assert_eq!(row_shape(Some(&bad)), None);
        bad.extend_from_slice(&[0, 0]);
        assert_eq!(row_shape(Some(&bad)), None);
        assert_eq!(row_shape(Some(&[0])), None);
    }

    #[test]
    fn e2_engine_names_depend_on_text_and_types_only() {
        let a = statement_hash(b"SELECT $1\0\0\x01\0\0\0\x17");
        let b = statement_hash(b"SELECT $1\0\0\x01\0\0\0\x19");
        assert_ne!(a, b);
        let mut n = Vec::new();
        engine_name(a, &mut n);
        assert!(n.starts_with(ENGINE_PREFIX));
        assert_eq!(n.len(), 13 + 16);
        let mut m = Vec::new();
        engine_name(statement_hash(b"SELECT $1\0\0\x01\0\0\0\x17"), &mut m);
        assert_eq!(n, m);
    }

    #[test]
    fn e2_tracking_is_bounded_and_keeps_reader_only_statements() {
        let mut s = ClientStatements::default();
        s.insert(b"a", b"SELECT 1\0\0\0", None, false, 2);
        s.insert(b"b", b"SELECT 2\0\0\0", None, true, 2);
        assert!(s.has_room(2));
        s.insert(b"c", b"SELECT 3\0\0\0", None, true, 2);
        // `b` (on the writer, least recently used) was forgotten; `a` exists only on readers.
        assert!(s.contains(b"a") && !s.contains(b"b") && s.contains(b"c"));
        s.get(b"c");
        s.set_on_writer(b"a");
        s.insert(b"d", b"SELECT 4\0\0\0", None, false, 2);
        assert!(!s.contains(b"a") && s.contains(b"c") && s.contains(b"d"));
        s.remove(b"c");
        s.insert(b"e", b"SELECT 5\0\0\0", None, false, 2);
        assert!(!s.has_room(2), "full of reader-only statements");
    }

    proptest! {
        /// E-2: names are one statement exactly when their first 63 bytes are equal, as on a
        /// server (its hash tables' keys are `NAMEDATALEN` bytes): tracked under one spelling,
        /// found, replaced and closed under any other, and never found under a name that differs
        /// within the first 63 bytes.
        #[test]
        fn e2_names_are_one_statement_when_their_first_63_bytes_are_equal(
            stem in prop::collection::vec(b'a'..=b'c', 55..70),
            tails in prop::collection::vec(prop::collection::vec(b'x'..=b'z', 0..4), 3),
        ) {
            let spell = |t: &[u8]| [&stem[..], t].concat();
            let (a, b, c) = (spell(&tails[0]), spell(&tails[1]), spell(&tails[2]));
            let one = |x: &[u8], y: &[u8]| x[..x.len().min(63)] == y[..y.len().min(63)];
            let mut s = ClientStatements::default();
            s.insert(&a, b"SELECT 1\0\0\0", None, false, 8);
            prop_assert_eq!(s.contains(&b), one(&a, &b));
            s.insert(&b, b"SELECT 2\0\0\0", None, false, 8);
            prop_assert_eq!(s.len(), if one(&a, &b) { 1 } else { 2 });
            let got = s.peek(&a).map(|st| st.rest.clone());
            let want: &[u8] = if one(&a, &b) { b"SELECT 2\0\0\0" } else { b"SELECT 1\0\0\0" };
            prop_assert_eq!(got.as_deref(), Some(want));
            let closed = s.remove(&c).is_some();
            prop_assert_eq!(closed, one(&a, &c) || one(&b, &c));
            prop_assert_eq!(s.contains(&a), !one(&a, &c));
            prop_assert!(same_name(&a, &b) == one(&a, &b) && same_name(&b, &c) == one(&b, &c));
        }
    }

    #[test]
    fn e2_the_unnamed_statement_is_tracked_and_bounded_like_a_named_one() {
        // Forgotten when it is on the writer and least recently used.
        let mut s = ClientStatements::default();
        s.insert(b"a", b"SELECT 1\0\0\0", None, false, 2);
        s.insert(b"", b"SELECT 2\0\0\0", None, true, 2);
        assert!(s.has_room(2));
        s.insert(b"c", b"SELECT 3\0\0\0", None, true, 2);
        assert!(s.contains(b"a") && !s.contains(b"") && s.contains(b"c"));
        // Kept when it exists only on readers.
        let mut s = ClientStatements::default();
        s.insert(b"", b"SELECT 1\0\0\0", None, false, 2);
        s.insert(b"b", b"SELECT 2\0\0\0", None, true, 2);
        s.insert(b"c", b"SELECT 3\0\0\0", None, true, 2);
        assert!(s.contains(b"") && !s.contains(b"b") && s.contains(b"c"));
        let only: Vec<super::super::state::Setting> =
            vec![(b"".as_slice().into(), b"SELECT 1\0\0\0".as_slice().into())];
        assert_eq!(s.reader_only(), only);
        s.get(b"c");
        s.set_on_writer(b"");
        assert!(s.any_on_writer() && s.reader_only().is_empty());
        s.insert(b"d", b"SELECT 4\0\0\0", None, false, 2);
        assert!(!s.contains(b"") && s.contains(b"c") && s.contains(b"d"));
        // Parsed again: replaced in place, at the same length or not.
        for (text, on_writer) in [
            (&b"SELECT 10\0\0\0"[..], false),
            (b"SELECT 11\0\0\0", true),
            (b"SELECT 100\0\0\0", false),
        ] {
            s.insert(b"", text, None, on_writer, 8);
            let u = s.peek(b"").expect("tracked");
            assert_eq!(
                (&*u.rest, u.hash, u.on_writer),
                (text, statement_hash(text), on_writer)
            );
        }
        s.insert(b"c", b"SELECT '3'\0\0\0", None, true, 8);
        s.rules_changed();
        assert!(
            s.lexed_otherwise(b"c") && !s.lexed_otherwise(b""),
            "a literal is read under the rules of its Parse; a text without one is not"
        );
        s.insert(b"", b"SELECT '5'\0\0\0", None, false, 8);
        assert!(
            !s.lexed_otherwise(b""),
            "parsed under the rules now in force: parsed as the server did"
        );
        // The count saturates: from then on nothing counts as parsed under the rules in force.
        for _ in 0..u16::MAX {
            s.rules_changed();
        }
        s.insert(b"", b"SELECT '5'\0\0\0", None, false, 8);
        assert!(s.lexed_otherwise(b""));
        assert!(s.remove(b"").is_some() && !s.contains(b"") && s.remove(b"").is_none());
        s.insert(b"", b"SELECT 6\0\0\0", None, true, 8);
        // Parsed again with the same text: the same hash, taken from the tracked statement.
        for name in [&b""[..], b"c"] {
            for text in [
                &b"SELECT 6\0\0\0"[..],
                b"SELECT 7\0\0\0",
                b"SELECT 7\0\0\x01\0\0\0\x17",
            ] {
                assert_eq!(s.hash_of(name, text), statement_hash(text));
                s.insert(name, text, None, true, 8);
                assert_eq!(s.hash_of(name, text), statement_hash(text));
                assert_eq!(s.peek(name).expect("tracked").hash, statement_hash(text));
            }
        }
        s.clear_on_writer(b"");
        assert!(!s.peek(b"").expect("tracked").on_writer);
        s.clear();
        assert!(!s.contains(b"") && !s.contains(b"c") && s.has_room(1));
    }

    #[test]
    fn e2_rules_proven_unchanged_make_statements_parsed_under_them_current() {
        let mut s = ClientStatements::default();
        s.insert(b"before", b"SELECT 'a'\0\0\0", None, true, 8);
        let first = s.rules();
        s.rules_changed(); // code the engine could not see into
        s.insert(b"between", b"SELECT 'b'\0\0\0", None, true, 8);
        s.rules_changed(); // the end of its block
        let now = s.rules();
        assert!(s.lexed_otherwise(b"before") && s.lexed_otherwise(b"between"));
        // A capture at `first` found the settings A; one now finds A again: what was parsed
        // then is parsed as now; what was parsed in between (under rules no capture saw) still
        // is not.
        s.rules_were(first, 0xA);
        s.rules_now(now, 0xA);
        assert_eq!(s.rules(), now, "the count never goes back");
        assert!(!s.lexed_otherwise(b"before"));
        assert!(s.lexed_otherwise(b"between"));
        s.rules_changed();
        assert!(s.lexed_otherwise(b"before"), "a later change counts again");
        // Settings B now, with `between` parsed under them; then A again, then B again (a pool
        // that sets and resets): each statement is current whenever its own settings are.
        let b_at = s.rules();
        s.rules_now(b_at, 0xB);
        assert!(s.lexed_otherwise(b"before") && s.lexed_otherwise(b"between"));
        // Parsed after that capture, under the same rules; the next capture's answer first
        // marks what the last one proved, then settles.
        s.insert(b"under_b", b"SELECT 'c'\0\0\0", None, true, 8);
        s.rules_changed();
        let a_again = s.rules();
        s.rules_were(b_at, 0xB);
        s.rules_now(a_again, 0xA);
        assert!(!s.lexed_otherwise(b"before") && s.lexed_otherwise(b"under_b"));
        s.rules_changed();
        let b_again = s.rules();
        s.rules_now(b_again, 0xB);
        assert!(s.lexed_otherwise(b"before") && !s.lexed_otherwise(b"under_b"));
    }

    #[test]
    fn e2_what_the_parse_rules_may_change_in_a_statement_text() {
        for (rest, matters) in [
            (
                &b"SELECT v FROM t WHERE k = $1\0\0\x01\0\0\0\x17"[..],
                false,
            ),
            (b"SELECT 1.5e3, x FROM t\0\0\0", false),
            (b"SELECT '2020-01-01'::date\0\0\0", true),
            (b"SELECT date '2020-01-01'\0\0\0", true),
            (b"SELECT $$a$$\0\0\0", true),
            (b"SELECT $q$a$q$\0\0\0", true),
            (b"SELECT x FROM t WHERE y = NULL\0\0\0", true),
            (b"SELECT x FROM t WHERE y = null\0\0\0", true),
            (b"SELECT \xc3\xa9t\xc3\xa9 FROM t\0\0\0", true),
            (b"SELECT $\0\0\0", true),
            // Only the text counts, not the parameter types after it.
            (b"SELECT $1\0\0\x01\0\0\x27\x00", false),
        ] {
            assert_eq!(
                rules_may_matter(rest),
                matters,
                "{}",
                String::from_utf8_lossy(rest)
            );
        }
    }
}
