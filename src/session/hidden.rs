//! Hidden statements: built only from fixed text, validated numbers, a validated XID list,
//! hex-encoded captured values and the client's own bytes.
//!
//! - W-4: the wait in front of a reader's simple Query — each `SET <name> = <value>;` followed
//!   by one space, then the client's statement byte for byte: one Query message, one NUL.
//! - E-3: the same statements as hidden unnamed Parse/Bind/Execute in front of a batch.
//! - S-5: the settings replay (its own Query) and the capture of the writer's state.
//! - W-7: the stock-dialect LSN probe, an engine-named extended statement.
//! - F-3: the statement that aborts the writer's transaction.

use std::io::Write;

use super::state::SessionSettings;
use crate::protocol::{encode, tag, Lsn};

/// The LSN wait (W-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Wait {
    /// `strict` or `best_effort`.
    pub mode: &'static str,
    pub timeout_ms: u32,
    pub lsn: u64,
    /// Stock PostgreSQL 19+: one `WAIT FOR LSN` statement instead of the PolarDB SETs.
    pub wait_for_statement: bool,
}

/// What goes in front of the client's statement.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Hidden<'a> {
    /// Drop every statement prepared on the connection before the unit runs code the engine
    /// cannot see into (S-6): on a pooled reader they are other sessions' statements, texts
    /// and literals that code reading `pg_prepared_statements` would show this session.
    pub deallocate: bool,
    /// Clear an XID import left on the connection (P-7).
    pub reset: bool,
    /// A validated XID list to import (P-5). Callers pass only `XidList`-validated text.
    pub import: Option<&'a str>,
    pub wait: Option<Wait>,
}

/// P-5: the statement that gives the writer's transaction block its first snapshot, and keeps it
/// from being idle, while the block's reads run on readers (`Session::touch_writer`).
pub(super) const TOUCH_STATEMENT: &[u8] = b"SELECT 1";
/// The touch's statement and portal name on the writer, both closed in the same batch.
pub(super) const TOUCH_NAME: &[u8] = b"polarsplit_touch";

/// A statement that always fails without side effects: it aborts the writer's transaction
/// after an error reached the client (F-3). Its result is swallowed.
/// The abort's statement and portal name on the writer (closed, and destroyed by its error).
pub(super) const ABORT_NAME: &[u8] = b"polarsplit_abort";
pub(super) const ABORT_STATEMENT: &[u8] =
    b"DO $polarsplit$ BEGIN RAISE EXCEPTION 'polarsplit: transaction aborted after a failed replica read'; END $polarsplit$";

/// The post-commit position probe for writers whose RFQs carry no LSN (W-7). The insert
/// position, not `pg_current_wal_lsn()`: with `synchronous_commit = off` the latter can lag the
/// commit (verified here, NOTES).
pub(super) const PROBE_STATEMENT: &[u8] = b"SELECT pg_catalog.pg_current_wal_insert_lsn()";
/// The probe's reserved statement name on the writer (documented; prepared only for the length of
/// the probe's own batch).
pub(super) const PROBE_NAME: &[u8] = b"polarsplit_probe";

/// The digest of every setting a statement can see (S-5): name and value of each `user`- and
/// `superuser`-context setting `pg_settings` shows the session (those of a loaded library's
/// `ext.name` aside: a writer session that ran plpgsql has them, a fresh reader not yet; the
/// transaction's own, the session authorization and role, replayed and checked apart; and the
/// LSN wait's settings, which the engine sets on readers; and the `log_*` settings while the
/// session's `client_min_messages` is above `log`, when they decide only what the server writes
/// to its own log — a primary that logs slow statements and a standby that does not still serve
/// the same answers; at `log` or below the client gets those LOG lines too, and a standby that
/// logs what the primary does not would send it lines the primary never sends — an examiner's
/// finding of 2026-12-05), sorted by name bytewise, one `name=value`
/// a line, then `identity=` and the OIDs of the session user and the current user — the
/// replay sets them by name, and a role renamed with another created under its old name is
/// another role to a reader's login or `SET ROLE` (an examiner's finding of 2026-12-07: reads
/// ran as the new role, on a table the session's own was refused) — SHA-256, hex. Each OID is
/// looked up by `to_regrole` of the quoted name, not read from `pg_roles` (a view that joins
/// `pg_authid` with `pg_db_role_setting`): the same OID or none, for a third of the time on a
/// fresh backend. The capture takes the writer session's; the replay's last statement
/// compares the reader connection's with it. Measured on PostgreSQL 15: a primary and its standby
/// differ only in `transaction_read_only`. `$settings` is where the settings come from: the
/// capture's one read of them (`g`), or `pg_show_all_settings()` (what `pg_settings` shows).
macro_rules! settings_digest {
    ($settings:literal) => {
        concat!("(SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.string_agg(name || '=' || COALESCE(setting, ''), pg_catalog.chr(10) ORDER BY name COLLATE pg_catalog.\"C\") || (SELECT pg_catalog.chr(10) || 'identity=' || pg_catalog.string_agg(i.oid::pg_catalog.text, ',' ORDER BY i.k) FROM (VALUES (1, pg_catalog.to_regrole(pg_catalog.quote_ident(SESSION_USER))::pg_catalog.oid), (2, pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid)) AS i (k, oid)), 'UTF8')), 'hex') FROM ", $settings, " WHERE context IN ('user', 'superuser') AND pg_catalog.strpos(name, '.') = 0 AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable', 'session_authorization', 'role', 'polar_consistency_mode', 'polar_proxy_wait_timeout_ms') AND pg_catalog.strpos(name, 'polar_xact_split_') <> 1 AND (pg_catalog.strpos(name, 'log_') <> 1 OR pg_catalog.current_setting('client_min_messages') IN ('log', 'debug1', 'debug2', 'debug3', 'debug4', 'debug5')))")
    };
}

/// The capture's text up to its hazard kinds (see [`CAPTURE_STATEMENT`]).
macro_rules! capture_head {
    () => {
        "WITH g AS (SELECT name, setting, source, context, vartype FROM pg_catalog.pg_show_all_settings()), l (n) AS (SELECT pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_db_role_setting AS d, pg_catalog.unnest(d.setconfig) AS c WHERE d.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))) SELECT k, pg_catalog.encode(pg_catalog.convert_to(n, 'UTF8'), 'hex'), pg_catalog.encode(pg_catalog.convert_to(v, 'UTF8'), 'hex') FROM (SELECT 1 AS k, name AS n, setting AS v FROM g WHERE (source = 'session' OR source IN ('global', 'user', 'database', 'database user') AND (context = 'user' OR pg_catalog.current_setting('is_superuser') = 'on') OR source IN ('configuration file', 'command line') AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') OR pg_catalog.lower(name) IN (SELECT n FROM l) AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') OR name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout') AND setting <> '0') AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable', 'session_authorization', 'role') AND NOT (vartype = 'real' AND source IN ('global', 'user', 'database', 'database user')) UNION ALL SELECT 1, x, pg_catalog.current_setting(x, true) FROM (SELECT pg_catalog.unnest($1::pg_catalog.text[]) UNION SELECT n FROM l WHERE pg_catalog.strpos(n, '.') > 0) AS p (x) WHERE pg_catalog.current_setting(x, true) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM g AS r WHERE r.name = x AND r.vartype = 'real' AND r.source <> 'session') UNION ALL SELECT 2, 'session_authorization', pg_catalog.current_setting('session_authorization') UNION ALL SELECT 3, 'role', pg_catalog.current_setting('role')"
    };
}

/// The capture's rows of the hazard kinds (4, 6, 7, 8, 9; see [`CAPTURE_STATEMENT`]).
macro_rules! capture_hazards {
    () => {
        " UNION ALL SELECT 4, 'temp', '' WHERE CASE WHEN pg_catalog.pg_my_temp_schema() = 0 THEN false ELSE (EXISTS (SELECT 1 FROM pg_catalog.pg_class AS t WHERE t.relnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_type AS t WHERE t.typnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_collation AS t WHERE t.collnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config AS t WHERE t.cfgnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_ts_dict AS t WHERE t.dictnamespace = pg_catalog.pg_my_temp_schema())) END UNION ALL SELECT 6, 'prepared', '' WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS p WHERE p.from_sql) UNION ALL SELECT 7, 'advisory', '' WHERE '' = ANY ($1::pg_catalog.text[]) AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks AS l WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()) UNION ALL SELECT 8, 'listen', '' WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_listening_channels()) UNION ALL SELECT 9, 'inexact', '' WHERE EXISTS (SELECT 1 FROM g WHERE vartype = 'real' AND source = 'session')"
    };
}

/// The capture of the writer's session state (S-5): every session-level setting, every
/// setting the session got at login from `ALTER ROLE/DATABASE … SET` (pg_settings sources
/// `global` — `ALTER ROLE ALL` —, `user`, `database`, `database user`; of context `user`
/// unless the session is a superuser's, as only those can be replayed), every `user`-context
/// setting (and `superuser`-context, for a superuser) the primary has from its own
/// configuration (sources `configuration file` — `postgresql.conf` and `ALTER SYSTEM`'s
/// `postgresql.auto.conf`, neither of them replicated — and `command line`): a standby's may
/// differ, and a read shows the primary's; and every setting the session could set that any
/// role's or the database's `pg_db_role_setting` names, whatever its source here: a reader
/// connection opened later logs in with those defaults as they are then (an `ALTER ROLE … SET`
/// after this session logged in), so the replay sets the writer's value over them, and the
/// replay's login check ([`LOGIN_CHECK_HEAD`]) finds what it could not; and the idle timeouts
/// when set, from any source (a startup option too): the engine keeps the writer from being
/// idle that long while the session reads on a reader. Then the session
/// authorization and role, and the placeholder
/// settings named in `$1` or in the session database's `pg_db_role_setting` (placeholders are
/// not in pg_settings, measured on 15; any role's names: a name the session does not have
/// answers NULL and no row) — names and values hex-encoded from UTF-8, so nothing of them is
/// ever parsed as SQL by the engine or the reader. `kind` orders the replay: settings (1), then
/// session authorization (2), then role (3); placeholder settings are settings too. A row of
/// kind 4 says the session has temporary objects (S-4): code the engine could not see may
/// have created one, which shadows a permanent one of the same name for this session only, so
/// its reads stay on the writer — a relation, and the kinds a name is looked up among in
/// `pg_temp` as well: types (a domain, an enum — an examiner's finding of 2026-12-05: a
/// `CREATE DOMAIN pg_temp.d` run by a function made `5::d` answer from the standby's permanent
/// `d`), collations and text search configurations and dictionaries (functions and operators
/// are never looked up in `pg_temp` unless named with it); none, and the session's temporary
/// objects are gone (dropped, rolled back, `ON COMMIT DROP`): the hazard ends. A row of kind 6
/// says the session has statements prepared by SQL `PREPARE` (S-4); none, and that hazard ends
/// too. A row of kind 7 says it holds a session-level advisory lock — asked only when `$1`
/// holds the empty name (the engine asks while the session may hold one: `pg_locks` is a scan
/// of the server's shared lock table, and an empty name matches no setting), so a lock released
/// by `pg_advisory_unlock(key)` ends that hazard too. A row of kind 8 says it listens on a
/// channel (S-4), perhaps by code the engine could not see into (a trigger's or a `DO` block's
/// `LISTEN`): the `LISTEN` hazard, until `UNLISTEN *` or `DISCARD ALL`. A row of kind 9 says the
/// session set a setting of type `real`: PostgreSQL shows those with 6 significant digits
/// (`0.2500001` as `0.25`), so no replay can give a reader the session's value — the capture
/// fails, and the session's reads stay on the writer until it is reset (an examiner's finding
/// of 2026-12-07: `pg_trgm.similarity_threshold` and `cpu_tuple_cost` answered otherwise on the
/// standby). For the same reason a `real` setting a login default gave (`ALTER ROLE/DATABASE …
/// SET`) is not captured, and the login check ([`LOGIN_CHECK_HEAD`]) lets it be: a reader
/// connection logs in with the same default, exact, where the replay would set it rounded; the
/// digest still compares what both show. A row of kind 5 is the digest of every setting a statement can see ([`settings_digest!`]): the replay ends by asserting the reader connection's equals
/// it ([`DIGEST_CHECK_HEAD`]), which covers what the replay cannot set or does not know of — a
/// standby's own configuration, `superuser`-context login defaults of a non-superuser. It runs
/// right behind the writer's startup RFQ (the login-time state) and whenever the state may have
/// changed since.
///
/// Every new session's first read waits for that first capture, which runs on a backend whose
/// catalogue caches are cold, so its cost is the session's. The settings are read once (`g`,
/// over `pg_show_all_settings()`, which `pg_settings` is a view of) for the four branches that
/// need them, the names `pg_db_role_setting` gives once (`l`), and the temporary-object scans
/// run only when the session has a temporary schema (a `CASE`: the planner evaluated the scans
/// first). Measured on PostgreSQL 15 here (2026-12-07, parse + bind + execute, medians of 15):
/// 15.5 ms on a fresh backend and 8.8 ms on a warm one before, 10.8 ms and 5.2 ms after, with
/// the same rows in 18 sessions (users that need quoting, `SET ROLE`, `SET SESSION
/// AUTHORIZATION`, placeholders from `ALTER ROLE/DATABASE … SET`, every hazard kind).
pub(super) const CAPTURE_STATEMENT: &[u8] = concat!(
    capture_head!(),
    capture_hazards!(),
    " UNION ALL SELECT 5, 'settings', ",
    settings_digest!("g"),
    ") AS s ORDER BY 1, 2"
)
.as_bytes();

/// The capture right behind the writer's startup RFQ on a server older than PostgreSQL 17
/// ([`CAPTURE_STATEMENT`] without the hazard kinds): a session that has just logged in there
/// has no temporary object, no SQL-prepared statement, no advisory lock, no channel it
/// listens on and no setting of source `session` — nothing runs SQL at login before 17,
/// whose login event triggers can. A fifth less on a fresh backend (8.1 ms against 10.2,
/// measured here on PostgreSQL 15), and every new session's first read waits for it.
pub(super) const CAPTURE_LOGIN_STATEMENT: &[u8] = concat!(
    capture_head!(),
    " UNION ALL SELECT 5, 'settings', ",
    settings_digest!("g"),
    ") AS s ORDER BY 1, 2"
)
.as_bytes();
/// The capture's reserved statement name on the writer.
pub(super) const CAPTURE_NAME: &[u8] = b"polarsplit_capture";
/// `text[]`, the capture's parameter type.
const TEXT_ARRAY_OID: u32 = 1009;

/// A statement's text built on the stack (the longest hidden statement is well under 128
/// bytes: fixed text, two numbers and a validated XID list go through `Vec` only when long).
struct Text {
    buf: [u8; 128],
    len: usize,
    spill: Vec<u8>,
}

impl Text {
    fn new() -> Text {
        Text {
            buf: [0; 128],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    fn as_bytes(&self) -> &[u8] {
        if self.spill.is_empty() {
            &self.buf[..self.len]
        } else {
            &self.spill
        }
    }
}

impl Write for Text {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.spill.is_empty() && self.len + b.len() <= self.buf.len() {
            self.buf[self.len..self.len + b.len()].copy_from_slice(b);
            self.len += b.len();
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.buf[..self.len]);
            }
            self.spill.extend_from_slice(b);
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Calls `f` with each hidden statement's text, in W-4's fixed order. Returns the count.
fn each_statement(h: &Hidden<'_>, mut f: impl FnMut(&[u8])) -> u16 {
    let mut n = 0u16;
    if h.deallocate {
        f(b"DEALLOCATE ALL");
        n += 1;
    }
    if h.reset {
        f(b"SET polar_xact_split_xids = ''");
        n += 1;
    }
    let mut t = Text::new();
    if let Some(x) = h.import {
        debug_assert!(x.bytes().all(|b| b.is_ascii_digit() || b == b','));
        let _ = write!(t, "SET polar_xact_split_xids = '{x}'");
        f(t.as_bytes());
        n += 1;
    }
    if let Some(w) = h.wait.filter(|w| w.wait_for_statement) {
        // PostgreSQL 19: its timeout is 57014 answering this statement (W-5, by position).
        let lsn = crate::protocol::Lsn(w.lsn);
        t.clear();
        if w.timeout_ms == 0 {
            let _ = write!(t, "WAIT FOR LSN '{lsn}'");
        } else {
            let _ = write!(
                t,
                "WAIT FOR LSN '{lsn}' WITH (TIMEOUT '{}ms')",
                w.timeout_ms
            );
        }
        f(t.as_bytes());
        return n + 1;
    }
    if let Some(w) = h.wait {
        t.clear();
        let _ = write!(t, "SET polar_consistency_mode = '{}'", w.mode);
        f(t.as_bytes());
        t.clear();
        let _ = write!(t, "SET polar_proxy_wait_timeout_ms = {}", w.timeout_ms);
        f(t.as_bytes());
        t.clear();
        let _ = write!(t, "SET polar_xact_split_wait_lsn = '{}'", w.lsn);
        f(t.as_bytes());
        n += 3;
    }
    n
}

fn hidden_text(out: &mut Vec<u8>, h: &Hidden<'_>) -> u16 {
    each_statement(h, |stmt| {
        out.extend_from_slice(stmt);
        out.extend_from_slice(b"; ");
    })
}

fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - 1) as u32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
}

/// The wrapped Query: hidden statements, then the client's Query string. `client_query` is the
/// client's whole Query message (tag, length, string, NUL). Returns the hidden statement count.
pub(super) fn build_query(out: &mut Vec<u8>, h: &Hidden<'_>, client_query: &[u8]) -> u16 {
    let start = out.len();
    out.push(tag::QUERY);
    out.extend_from_slice(&[0; 4]);
    let n = hidden_text(out, h);
    // The client's string with its NUL.
    out.extend_from_slice(client_query.get(5..).unwrap_or(b"\0"));
    patch_len(out, start);
    n
}

/// The hidden statements as unnamed Parse/Bind/Execute messages, for the front of an
/// extended-protocol batch (E-3). Returns the count (each answers ParseComplete, BindComplete
/// and CommandComplete).
pub(super) fn build_hidden_pbe(out: &mut Vec<u8>, h: &Hidden<'_>) -> u16 {
    each_statement(h, |stmt| pbe(out, stmt))
}

/// Hidden unnamed Parse/Bind/Execute of `sql` (E-3).
pub(super) fn pbe(out: &mut Vec<u8>, sql: &[u8]) {
    encode::message(out, tag::PARSE, |o| {
        o.push(0);
        o.extend_from_slice(sql);
        o.push(0);
        o.extend_from_slice(&0u16.to_be_bytes());
    });
    bind(out, b"", b"", &[]);
    execute(out);
}

/// A Bind of `statement` to `portal` with text parameters (`None`: NULL).
pub(super) fn bind(out: &mut Vec<u8>, portal: &[u8], statement: &[u8], params: &[Option<&[u8]>]) {
    encode::message(out, tag::BIND, |o| {
        o.extend_from_slice(portal);
        o.push(0);
        o.extend_from_slice(statement);
        o.push(0);
        o.extend_from_slice(&0u16.to_be_bytes());
        o.extend_from_slice(&(params.len() as u16).to_be_bytes());
        for p in params {
            match p {
                Some(v) => {
                    o.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    o.extend_from_slice(v);
                }
                None => o.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        o.extend_from_slice(&0u16.to_be_bytes());
    });
}

/// Execute of the unnamed portal, all rows.
pub(super) fn execute(out: &mut Vec<u8>) {
    encode::message(out, tag::EXECUTE, |o| {
        o.push(0);
        o.extend_from_slice(&0i32.to_be_bytes());
    });
}

pub(super) fn sync(out: &mut Vec<u8>) {
    encode::message(out, tag::SYNC, |_| {});
}

/// A Parse of a statement under `name`; `rest` is a client Parse body after its name (query,
/// NUL, parameter types).
pub(super) fn parse_as(out: &mut Vec<u8>, name: &[u8], rest: &[u8]) {
    encode::message(out, tag::PARSE, |o| {
        o.extend_from_slice(name);
        o.push(0);
        o.extend_from_slice(rest);
    });
}

/// A Parse of fixed engine text under `name` with parameter types `types`.
pub(super) fn parse_fixed(out: &mut Vec<u8>, name: &[u8], sql: &[u8], types: &[u32]) {
    encode::message(out, tag::PARSE, |o| {
        o.extend_from_slice(name);
        o.push(0);
        o.extend_from_slice(sql);
        o.push(0);
        o.extend_from_slice(&(types.len() as u16).to_be_bytes());
        for t in types {
            o.extend_from_slice(&t.to_be_bytes());
        }
    });
}

/// A Close of statement `name`.
pub(super) fn close_statement(out: &mut Vec<u8>, name: &[u8]) {
    close(out, b'S', name);
}

/// A Close of `kind` (`S` statement, `P` portal) `name`.
fn close(out: &mut Vec<u8>, kind: u8, name: &[u8]) {
    encode::message(out, tag::CLOSE, |o| {
        o.push(kind);
        o.extend_from_slice(name);
        o.push(0);
    });
}

/// A Describe of statement `name`.
pub(super) fn describe_statement(out: &mut Vec<u8>, name: &[u8]) {
    encode::message(out, tag::DESCRIBE, |o| {
        o.push(b'S');
        o.extend_from_slice(name);
        o.push(0);
    });
}

/// The touch of the writer's transaction block (P-5): [`TOUCH_STATEMENT`] parsed, bound, run
/// and closed under a name of its own, then a Sync. Not a simple Query, which drops the client's
/// unnamed statement, nor the unnamed portal, which may be the client's open one (pg8000's own
/// tests through the example proxy, 2026-12-06: its unnamed statement, parsed on the writer
/// inside a block, was gone when it bound it after a read the engine sent to the standby).
/// Answers: ParseComplete, BindComplete, a row, CommandComplete, two CloseCompletes, RFQ.
pub(super) fn touch(out: &mut Vec<u8>) {
    parse_fixed(out, TOUCH_NAME, TOUCH_STATEMENT, &[]);
    bind(out, TOUCH_NAME, TOUCH_NAME, &[]);
    execute_portal(out, TOUCH_NAME);
    close(out, b'P', TOUCH_NAME);
    close_statement(out, TOUCH_NAME);
    sync(out);
}

/// The F-3 abort of the writer's block: [`ABORT_STATEMENT`] parsed and bound under a name of
/// its own, the statement closed (the portal keeps its plan), the portal run — it fails, which
/// aborts the block and destroys the portal — and a Sync. Not a simple Query, which drops the
/// client's unnamed statement (the one server keeps it after the client's failed statement).
/// Answers: ParseComplete, BindComplete, CloseComplete, the error, RFQ (or an error sooner).
pub(super) fn abort(out: &mut Vec<u8>) {
    parse_fixed(out, ABORT_NAME, ABORT_STATEMENT, &[]);
    bind(out, ABORT_NAME, ABORT_NAME, &[]);
    close_statement(out, ABORT_NAME);
    execute_portal(out, ABORT_NAME);
    sync(out);
}

/// Execute of portal `name`, all rows.
fn execute_portal(out: &mut Vec<u8>, name: &[u8]) {
    encode::message(out, tag::EXECUTE, |o| {
        o.extend_from_slice(name);
        o.push(0);
        o.extend_from_slice(&0i32.to_be_bytes());
    });
}

/// The probe (W-7): [`PROBE_STATEMENT`] parsed under its name, bound, the statement closed (the
/// portal keeps its plan) and the portal run, behind a Close of the name: nothing of the engine's
/// stays prepared on the writer, where the client's `pg_prepared_statements` would list it (pg8000's
/// own tests through the example proxy, 2026-12-06), and a statement of the name left by a batch
/// that failed before its Close, or by the engine's answer to a client's Parse of the name
/// ([`reserve`]), is gone before the Parse. Only outside a transaction block (S-5: it calls a
/// function, which can fail, and would abort the client's block), where the unnamed portal is
/// free: the client's ended with its Sync's implicit transaction. Answers: CloseComplete,
/// ParseComplete, BindComplete, CloseComplete, the row, CommandComplete.
pub(super) fn probe(out: &mut Vec<u8>) {
    close_statement(out, PROBE_NAME);
    parse_fixed(out, PROBE_NAME, PROBE_STATEMENT, &[]);
    bind(out, b"", PROBE_NAME, &[]);
    close_statement(out, PROBE_NAME);
    execute(out);
}

/// The capture (S-5), as the probe: closed, parsed, bound (the placeholder names as a text
/// array), closed and run in the unnamed portal — a capture runs only outside a transaction
/// block. `login`: the one right behind the writer's startup RFQ on a server before 17
/// ([`CAPTURE_LOGIN_STATEMENT`]). Names are validated placeholder names (letters, digits, `_`, `.`), so they need no
/// quoting beyond the array literal's double quotes. Answers: CloseComplete, ParseComplete,
/// BindComplete, CloseComplete, the rows, CommandComplete.
pub(super) fn capture(out: &mut Vec<u8>, names: &[Box<[u8]>], advisory: bool, login: bool) {
    let mut arr = Vec::with_capacity(4 + names.len() * 16);
    // The empty name asks for the advisory-lock row (kind 7).
    let empty: &[u8] = b"";
    let ask = advisory.then_some(empty);
    name_array(&mut arr, names.iter().map(|n| &n[..]).chain(ask), false);
    close_statement(out, CAPTURE_NAME);
    let text = if login {
        CAPTURE_LOGIN_STATEMENT
    } else {
        CAPTURE_STATEMENT
    };
    parse_fixed(out, CAPTURE_NAME, text, &[TEXT_ARRAY_OID]);
    bind(out, b"", CAPTURE_NAME, &[Some(&arr)]);
    close_statement(out, CAPTURE_NAME);
    execute(out);
}

/// The engine's answer to a client's Parse of a reserved name (W-7, S-5): the probe's and the
/// capture's statements parsed under their names, so that the server refuses the client's with
/// 42P05. They stay until the next probe or capture closes them. Answers: two ParseCompletes.
pub(super) fn reserve(out: &mut Vec<u8>) {
    parse_fixed(out, PROBE_NAME, PROBE_STATEMENT, &[]);
    parse_fixed(out, CAPTURE_NAME, CAPTURE_STATEMENT, &[TEXT_ARRAY_OID]);
}

/// A `text[]` literal (`{"a.b","c"}`) of setting names, keeping only the characters a validated
/// placeholder name has (letters, digits, `_`, `.`: nothing to quote beyond the array's double
/// quotes; a name with others matches nothing), lower-cased when `lower`.
/// A byte of a setting name the engine follows by name (S-5): what PostgreSQL's identifiers
/// are made of unquoted (letters, digits, `_`, `$`) and the `.` of a placeholder. Names with
/// others are never noted ([`Session::note_placeholder_name`](super::Session)), so nothing is
/// left out of a name the capture asks for. (Until 2026-12-07 the capture left `$` out, and
/// `app.red6$x` was asked for as `app.red6x`: readers ran without it.)
pub(super) fn plain_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

fn name_array<'a>(out: &mut Vec<u8>, names: impl Iterator<Item = &'a [u8]>, lower: bool) {
    out.push(b'{');
    for (i, n) in names.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend(n.iter().filter(|b| plain_name_byte(**b)).map(|b| {
            if lower {
                b.to_ascii_lowercase()
            } else {
                *b
            }
        }));
        out.push(b'"');
    }
    out.push(b'}');
}

fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
}

fn from_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(b"pg_catalog.convert_from(pg_catalog.decode('");
    hex(out, bytes);
    out.extend_from_slice(b"', 'hex'), 'UTF8')");
}

/// The replay's login check (S-5), its last statement: it fails (22P02, naming the setting)
/// when the reader connection still has something from its login that the replay did not set
/// — a setting of source `global`, `database`, `user` or `database user` the session could set
/// (the replay's own are of source `session` by then), or a placeholder of the database's
/// `pg_db_role_setting` the replay did not name (placeholders are not in `pg_settings`). Such a
/// connection logged in under defaults the writer's session does not have: an `ALTER ROLE …
/// SET` or `ALTER DATABASE … SET` made after the session logged in. The engine then closes it
/// and runs the unit elsewhere. The message is built from the row, never folded from a
/// constant, so the cast fails only for a row that is there. Between the head and the tail
/// stands a `text[]` literal of the replayed placeholder names.
pub(super) const LOGIN_CHECK_HEAD: &[u8] = b"SELECT ('polarsplit: the reader connection has ' || x || ' from its login, which the session on the primary does not have')::pg_catalog.int4 FROM (SELECT name FROM pg_catalog.pg_settings WHERE source IN ('global', 'database', 'user', 'database user') AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') AND vartype <> 'real' UNION ALL SELECT n FROM (SELECT pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_db_role_setting AS d, pg_catalog.unnest(d.setconfig) AS c WHERE d.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))) AS p (n) WHERE pg_catalog.strpos(n, '.') > 0 AND pg_catalog.current_setting(n, true) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_settings AS r WHERE r.name = n AND r.vartype = 'real') AND n <> ALL (";
/// See [`LOGIN_CHECK_HEAD`].
pub(super) const LOGIN_CHECK_TAIL: &[u8] = b"::pg_catalog.text[])) AS v (x)";

/// The replay's settings check (S-5), after the login check when the capture gave a digest: it
/// fails (22P02, with the reader's digest) when the reader connection's settings, the replay's
/// done, differ from the writer session's ([`settings_digest!`]) — a setting the standby's
/// configuration gives (`postgresql.conf`, `ALTER SYSTEM`, not replicated) where the primary has
/// its default, or a `superuser`-context login default (`ALTER ROLE … SET temp_file_limit`) that
/// a non-superuser's replay cannot set, as it was when this connection logged in. Such a
/// connection is closed and the unit runs elsewhere, as after the login check. The writer's
/// digest (64 validated hex digits) stands between the head and [`DIGEST_CHECK_TAIL`].
pub(super) const DIGEST_CHECK_HEAD: &[u8] = concat!(
    "SELECT ('polarsplit: the reader connection''s settings differ from the session''s on the primary (its server''s configuration or its login), digest ' || x)::pg_catalog.int4 FROM ",
    settings_digest!("pg_catalog.pg_show_all_settings()"),
    " AS g (x) WHERE x IS DISTINCT FROM '"
)
.as_bytes();
/// See [`DIGEST_CHECK_HEAD`].
pub(super) const DIGEST_CHECK_TAIL: &[u8] = b"'";

/// The settings replay (S-5): one Query that brings a reader connection opened with the
/// session's startup parameters to the writer's state — settings, then session
/// authorization, then role (each `set_config` call its own statement, in that order; the
/// role always, `none` included: the login may have set one, by a startup option or a
/// `pg_db_role_setting`), then the login check ([`LOGIN_CHECK_HEAD`]), then, when the capture
/// gave one, the settings check against the writer's digest ([`DIGEST_CHECK_HEAD`]). Names and
/// values travel hex-encoded. Returns the number of statements.
pub(super) fn settings_query(out: &mut Vec<u8>, s: &SessionSettings) -> u16 {
    let mut n = 0u16;
    encode::message(out, tag::QUERY, |o| {
        let mut one = |o: &mut Vec<u8>, name: &[u8], value: &[u8]| {
            o.extend_from_slice(b"SELECT pg_catalog.set_config(");
            from_hex(o, name);
            o.extend_from_slice(b", ");
            from_hex(o, value);
            o.extend_from_slice(b", false); ");
            n += 1;
        };
        for (name, value) in s.iter() {
            one(o, name, value);
        }
        if let Some(a) = &s.authorization {
            one(o, b"session_authorization", a);
        }
        one(o, b"role", s.role.as_deref().unwrap_or(b"none"));
        o.extend_from_slice(LOGIN_CHECK_HEAD);
        // The replayed placeholder names (lower-cased, as the check compares them).
        o.push(b'\'');
        name_array(
            o,
            s.iter()
                .map(|(name, _)| name)
                .filter(|name| name.contains(&b'.')),
            true,
        );
        o.push(b'\'');
        o.extend_from_slice(LOGIN_CHECK_TAIL);
        n += 1;
        if let Some(d) = s.digest() {
            debug_assert!(d.iter().all(u8::is_ascii_hexdigit));
            o.extend_from_slice(b"; ");
            o.extend_from_slice(DIGEST_CHECK_HEAD);
            o.extend_from_slice(d);
            o.extend_from_slice(DIGEST_CHECK_TAIL);
            n += 1;
        }
        o.push(0);
    });
    n
}

/// W-7's page-boundary rule: an insert position just past a page header (offset 24 in a WAL
/// page, 40 at the start of a segment) is that page's start — the last record ended exactly at
/// the boundary, and a standby's replay position stays there until more WAL arrives.
pub(super) fn probe_position(lsn: Lsn, block: u64, segment: u64) -> Lsn {
    let l = lsn.0;
    if block == 0 || segment == 0 {
        return lsn;
    }
    if l % segment == 40 && l >= 40 {
        return Lsn(l - 40);
    }
    if l % block == 24 && l % segment != 24 && l >= 24 {
        return Lsn(l - 24);
    }
    lsn
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encode;

    fn client(sql: &str) -> Vec<u8> {
        let mut v = Vec::new();
        encode::query(&mut v, &[sql.as_bytes()]);
        v
    }

    #[test]
    fn w4_wrapper_bytes_are_exact() {
        let mut out = Vec::new();
        let h = Hidden {
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 500,
                lsn: 97_500_059_720,
                wait_for_statement: false,
            }),
            ..Hidden::default()
        };
        let n = build_query(
            &mut out,
            &h,
            &client("SELECT status FROM orders WHERE id = 42"),
        );
        assert_eq!(n, 3);
        let mut expect = Vec::new();
        encode::query(
            &mut expect,
            &[b"SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 500; SET polar_xact_split_wait_lsn = '97500059720'; SELECT status FROM orders WHERE id = 42"],
        );
        assert_eq!(out, expect);
    }

    #[test]
    fn w4_split_order_is_xids_mode_timeout_lsn() {
        let mut out = Vec::new();
        let h = Hidden {
            import: Some("1,1234,5678"),
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 5000,
                lsn: 97_500_059_720,
                wait_for_statement: false,
            }),
            ..Hidden::default()
        };
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 4);
        let s = String::from_utf8_lossy(&out[5..out.len() - 1]).into_owned();
        assert_eq!(
            s,
            "SET polar_xact_split_xids = '1,1234,5678'; SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 5000; SET polar_xact_split_wait_lsn = '97500059720'; SELECT 1"
        );
    }

    #[test]
    fn pg19_wait_for_lsn_statement() {
        let mut out = Vec::new();
        let h = Hidden {
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 1000,
                lsn: 97_500_059_720,
                wait_for_statement: true,
            }),
            ..Hidden::default()
        };
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 1);
        assert_eq!(
            &out[5..out.len() - 1],
            b"WAIT FOR LSN '16/B374D848' WITH (TIMEOUT '1000ms'); SELECT 1"
        );
    }

    #[test]
    fn no_hidden_statements_is_the_client_message() {
        let mut out = Vec::new();
        let c = client("SELECT 1");
        assert_eq!(build_query(&mut out, &Hidden::default(), &c), 0);
        assert_eq!(out, c);
        let mut out = Vec::new();
        assert_eq!(build_hidden_pbe(&mut out, &Hidden::default()), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn reset_comes_first() {
        let h = Hidden {
            reset: true,
            ..Hidden::default()
        };
        let mut out = Vec::new();
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 1);
        assert_eq!(
            &out[5..out.len() - 1],
            b"SET polar_xact_split_xids = ''; SELECT 1"
        );
    }

    #[test]
    fn s5_settings_replay_is_hex_and_ordered() {
        let mut s = SessionSettings::default();
        s.replace(
            vec![(b"search_path".to_vec().into(), b"a'; DROP".to_vec().into())],
            Some(b"ru".to_vec().into()),
            Some(b"rr".to_vec().into()),
            None,
        );
        let mut out = Vec::new();
        assert_eq!(settings_query(&mut out, &s), 4);
        let text = String::from_utf8(out[5..out.len() - 1].to_vec()).unwrap();
        // Only hex digits from captured data; authorization before role, settings first.
        assert!(!text.contains("DROP"));
        let sp = text
            .find(
                &"search_path"
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
            )
            .unwrap();
        let auth = text
            .find(
                &"session_authorization"
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
            )
            .unwrap();
        let role = text.rfind("'726f6c65'").unwrap();
        assert!(sp < auth && auth < role, "{text}");
        assert_eq!(text.matches("SELECT pg_catalog.set_config(").count(), 3);
        // The login check last, with no placeholder replayed.
        let check = text
            .find("SELECT ('polarsplit: the reader connection has")
            .unwrap();
        assert!(
            role < check && text.ends_with("'{}'::pg_catalog.text[])) AS v (x)"),
            "{text}"
        );
        // Nothing set since the login: the role (`none`) and the check all the same.
        let mut none = Vec::new();
        assert_eq!(settings_query(&mut none, &SessionSettings::default()), 2);
        let text = String::from_utf8(none[5..none.len() - 1].to_vec()).unwrap();
        assert!(text.starts_with(&format!(
            "SELECT pg_catalog.set_config(pg_catalog.convert_from(pg_catalog.decode('{}', 'hex'), 'UTF8'), pg_catalog.convert_from(pg_catalog.decode('{}', 'hex'), 'UTF8'), false); ",
            "role".bytes().map(|b| format!("{b:02x}")).collect::<String>(),
            "none".bytes().map(|b| format!("{b:02x}")).collect::<String>(),
        )), "{text}");
        // Replayed placeholders are named (lower case, validated) in the check.
        let mut p = SessionSettings::default();
        p.replace(
            vec![(b"App.Tenant".to_vec().into(), b"7".to_vec().into())],
            None,
            None,
            None,
        );
        let mut out = Vec::new();
        settings_query(&mut out, &p);
        let text = String::from_utf8(out[5..out.len() - 1].to_vec()).unwrap();
        assert!(
            text.ends_with("'{\"app.tenant\"}'::pg_catalog.text[])) AS v (x)"),
            "{text}"
        );
    }

    #[test]
    fn s5_the_replay_asserts_the_writers_settings_digest_last() {
        let d = "0123456789abcdef".repeat(4);
        let mut s = SessionSettings::default();
        s.replace(
            vec![(b"work_mem".to_vec().into(), b"4096".to_vec().into())],
            None,
            None,
            Some(d.as_bytes().to_vec().into()),
        );
        assert_eq!(s.digest(), Some(d.as_bytes()));
        // The digest is no setting to replay.
        assert_eq!(s.iter().count(), 1);
        let mut out = Vec::new();
        // work_mem, role, the login check, the settings check.
        assert_eq!(settings_query(&mut out, &s), 4);
        let text = String::from_utf8(out[5..out.len() - 1].to_vec()).unwrap();
        let login = text
            .find(std::str::from_utf8(LOGIN_CHECK_TAIL).unwrap())
            .unwrap();
        let check = text
            .find(std::str::from_utf8(DIGEST_CHECK_HEAD).unwrap())
            .unwrap();
        assert!(login < check, "{text}");
        assert!(text.ends_with(&format!("IS DISTINCT FROM '{d}'")), "{text}");
        // The capture's digest and the check's are one expression over the same rows: the
        // capture's `g` is every row of `pg_show_all_settings()`, unfiltered.
        let capture = std::str::from_utf8(CAPTURE_STATEMENT).unwrap();
        assert!(capture.contains(&format!("SELECT 5, 'settings', {}", settings_digest!("g"))));
        assert!(capture.starts_with(
            "WITH g AS (SELECT name, setting, source, context, vartype FROM \
             pg_catalog.pg_show_all_settings()), l (n) AS ("
        ));
        let check = std::str::from_utf8(DIGEST_CHECK_HEAD).unwrap();
        assert!(check.contains(settings_digest!("pg_catalog.pg_show_all_settings()")));
        // Anything but 64 hex digits is no digest: no check.
        for bad in ["xyz", "0123", &format!("{}'", &d[1..])] {
            let mut s = SessionSettings::default();
            s.replace(vec![], None, None, Some(bad.as_bytes().to_vec().into()));
            assert_eq!(s.digest(), None, "{bad}");
            let mut out = Vec::new();
            assert_eq!(settings_query(&mut out, &s), 2);
        }
    }

    #[test]
    fn w7_page_boundary_rule() {
        let (b, g) = (8192, 16 << 20);
        assert_eq!(probe_position(Lsn(8192 + 24), b, g), Lsn(8192));
        assert_eq!(probe_position(Lsn((16 << 20) + 40), b, g), Lsn(16 << 20));
        assert_eq!(
            probe_position(Lsn((16 << 20) + 24), b, g),
            Lsn((16 << 20) + 24)
        );
        assert_eq!(probe_position(Lsn(8192 + 25), b, g), Lsn(8192 + 25));
        assert_eq!(probe_position(Lsn(100), b, g), Lsn(100));
    }

    #[test]
    fn e3_hidden_pbe_shape() {
        let mut out = Vec::new();
        pbe(&mut out, b"SET polar_consistency_mode = 'strict'");
        let tags: Vec<u8> = {
            let mut v = Vec::new();
            let mut i = 0;
            while i < out.len() {
                v.push(out[i]);
                let len = u32::from_be_bytes(out[i + 1..i + 5].try_into().unwrap()) as usize;
                i += 1 + len;
            }
            v
        };
        assert_eq!(tags, b"PBE");
    }
}
