//! The SQL subset the simulated servers understand: a statement splitter that respects quotes,
//! dollar quotes and comments (W-6: the whole string is parsed before anything runs), a lexer,
//! and a parser into [`Stmt`]. Anything outside the subset is a syntax error (42601), as the
//! brief asks.

use std::fmt;
use std::ops::Range;

/// Isolation levels (READ UNCOMMITTED behaves as READ COMMITTED, as in PostgreSQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    pub fn guc_text(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }

    /// Parses a `default_transaction_isolation` / `transaction_isolation` value.
    pub fn parse(s: &str) -> Option<Isolation> {
        let n: String = s
            .trim()
            .to_ascii_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        match n.as_str() {
            "read committed" | "read uncommitted" => Some(Isolation::ReadCommitted),
            "repeatable read" => Some(Isolation::RepeatableRead),
            "serializable" => Some(Isolation::Serializable),
            _ => None,
        }
    }
}

/// Options of BEGIN / START TRANSACTION / SET TRANSACTION.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxModes {
    pub isolation: Option<Isolation>,
    /// `Some(true)` READ ONLY, `Some(false)` READ WRITE.
    pub read_only: Option<bool>,
}

/// `LOCK TABLE` modes, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockMode {
    AccessShare,
    RowShare,
    RowExclusive,
    ShareUpdateExclusive,
    Share,
    ShareRowExclusive,
    Exclusive,
    AccessExclusive,
}

/// Row-locking clause of a SELECT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLock {
    Update,
    NoKeyUpdate,
    Share,
    KeyShare,
}

impl RowLock {
    pub fn sql(self) -> &'static str {
        match self {
            RowLock::Update => "FOR UPDATE",
            RowLock::NoKeyUpdate => "FOR NO KEY UPDATE",
            RowLock::Share => "FOR SHARE",
            RowLock::KeyShare => "FOR KEY SHARE",
        }
    }
}

/// The value of a `SET`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetValue {
    /// The value as text (quotes removed; a list is joined with ", ").
    Text(String),
    Default,
}

/// A text argument: a literal, or the form the engine's settings replay sends (S-5):
/// `[pg_catalog.]convert_from([pg_catalog.]decode('<hex>', 'hex'), 'UTF8')`, evaluated when the
/// statement runs (bad hex is 22023, bytes that are not UTF-8 22021, as in PostgreSQL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrExpr {
    Lit(String),
    FromHex(String),
}

impl StrExpr {
    /// The value, or the error PostgreSQL 15 gives for it (verified on 15.18).
    pub fn eval(&self) -> Result<String, (&'static str, String)> {
        let h = match self {
            StrExpr::Lit(s) => return Ok(s.clone()),
            StrExpr::FromHex(h) => h.as_bytes(),
        };
        // decode() skips whitespace in front of each digit pair, nowhere else.
        let mut bytes = Vec::with_capacity(h.len() / 2);
        let mut i = 0;
        while i < h.len() {
            if b" \t\n\r".contains(&h[i]) {
                i += 1;
                continue;
            }
            let hi = hex_digit(h[i])?;
            let Some(&lo) = h.get(i + 1) else {
                return Err((
                    "22023",
                    "invalid hexadecimal data: odd number of digits".to_string(),
                ));
            };
            bytes.push(hi << 4 | hex_digit(lo)?);
            i += 2;
        }
        String::from_utf8(bytes).map_err(|e| {
            let bad = e.as_bytes()[e.utf8_error().valid_up_to()];
            (
                "22021",
                format!("invalid byte sequence for encoding \"UTF8\": 0x{bad:02x}"),
            )
        })
    }

    /// Whether this is the engine's encoded form (a client writes literals).
    pub fn is_encoded(&self) -> bool {
        matches!(self, StrExpr::FromHex(_))
    }
}

fn hex_digit(c: u8) -> Result<u8, (&'static str, String)> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err((
            "22023",
            format!("invalid hexadecimal digit: \"{}\"", char::from(c)),
        )),
    }
}

/// Functions callable as `SELECT f(…)` (optionally `pg_catalog.f(…)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Func {
    Nextval(String),
    SetConfig {
        name: StrExpr,
        value: StrExpr,
        is_local: bool,
    },
    AdvisoryLock(i64),
    AdvisoryUnlockAll,
    CurrentWalInsertLsn,
    CurrentWalLsn,
    LastWalReplayLsn,
    IsInRecovery,
    TxidCurrent,
    /// `current_user` (no parentheses in SQL).
    CurrentUser,
    /// `session_user`.
    SessionUser,
    /// `current_setting('name'[, missing_ok])`.
    CurrentSetting {
        name: String,
        missing_ok: bool,
    },
    /// A user function (`LANGUAGE sql`) that runs `set_config('app.tenant', $1, false)`: the
    /// row-level-security tenant pattern (S-6).
    SetTenant(String),
    /// `pg_notify('channel', 'payload')`.
    PgNotify {
        channel: String,
        payload: String,
    },
}

impl Func {
    /// The result column's name, as PostgreSQL names it.
    pub fn column(&self) -> &'static str {
        match self {
            Func::Nextval(_) => "nextval",
            Func::SetConfig { .. } => "set_config",
            Func::AdvisoryLock(_) => "pg_advisory_lock",
            Func::AdvisoryUnlockAll => "pg_advisory_unlock_all",
            Func::CurrentWalInsertLsn => "pg_current_wal_insert_lsn",
            Func::CurrentWalLsn => "pg_current_wal_lsn",
            Func::LastWalReplayLsn => "pg_last_wal_replay_lsn",
            Func::IsInRecovery => "pg_is_in_recovery",
            Func::TxidCurrent => "txid_current",
            Func::CurrentUser => "current_user",
            Func::SessionUser => "session_user",
            Func::CurrentSetting { .. } => "current_setting",
            Func::SetTenant(_) => "set_tenant",
            Func::PgNotify { .. } => "pg_notify",
        }
    }
}

/// One statement of the subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `BEGIN` (`start == false`) or `START TRANSACTION`.
    Begin {
        start: bool,
        modes: TxModes,
    },
    Commit,
    Rollback,
    Savepoint(String),
    Release(String),
    RollbackTo(String),
    Set {
        local: bool,
        name: String,
        value: SetValue,
    },
    SetTransaction(TxModes),
    SetSessionCharacteristics(TxModes),
    /// `RESET name`; `None` is `RESET ALL`.
    Reset(Option<String>),
    Show(String),
    /// `SELECT <integer>`.
    SelectConst(i64),
    /// `SELECT v FROM kv WHERE k = N [FOR …]`.
    SelectV {
        k: i64,
        lock: Option<RowLock>,
    },
    /// `SELECT k, v FROM kv [ORDER BY k]`.
    SelectAll,
    SelectFunc(Func),
    Insert {
        k: i64,
        v: i64,
    },
    Update {
        k: i64,
        v: i64,
    },
    Delete {
        k: i64,
    },
    Lock(LockMode),
    CreateTemp,
    DiscardAll,
    Listen(String),
    /// `UNLISTEN channel`; `None` is `UNLISTEN *`.
    Unlisten(Option<String>),
    Notify {
        channel: String,
        payload: String,
    },
    /// `DEALLOCATE [PREPARE] name`; `None` is `DEALLOCATE ALL`.
    Deallocate(Option<String>),
    /// `SET ROLE name` (`None`: `SET ROLE NONE`, `RESET ROLE`).
    SetRole(Option<String>),
    /// `SET SESSION AUTHORIZATION name` (`None`: `DEFAULT`, `RESET SESSION AUTHORIZATION`).
    SetSessionAuthorization(Option<String>),
    /// The engine's capture of the writer's session state (S-5, [`CAPTURE_TEXT`]); the
    /// argument is what stands in its `$1` (a `text[]` literal once bound).
    Capture(CaptureArg),
    /// The engine's capture right behind a writer's startup RFQ ([`capture_login_text`]): the
    /// capture without its hazard kinds (4, 6, 7, 8, 9).
    CaptureLogin(CaptureArg),
    /// The settings replay's login check (S-5, [`LOGIN_CHECK_TEXT`]), with the replayed
    /// placeholder names.
    LoginCheck(CaptureArg),
    /// `DO $$ BEGIN RAISE EXCEPTION '<message>'; END $$` — the only DO block of the subset
    /// (the engine's F-3 abort, `hidden.rs::ABORT_STATEMENT`): it fails with P0001.
    DoRaise(String),
}

/// What stands in the capture's `$1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureArg {
    /// A string literal: the `text[]` value as text (parsed when the statement runs).
    Array(String),
    /// `NULL` (no names), or the `0` a Parse reads its placeholders as for Describe.
    Other,
}

impl Stmt {
    /// Whether the statement reads the database through a snapshot (the point where a replica
    /// wait happens, W-4).
    pub fn takes_snapshot(&self) -> bool {
        matches!(
            self,
            Stmt::SelectConst(_)
                | Stmt::SelectV { .. }
                | Stmt::SelectAll
                | Stmt::SelectFunc(_)
                | Stmt::Capture(_)
                | Stmt::CaptureLogin(_)
                | Stmt::LoginCheck(_)
                | Stmt::Insert { .. }
                | Stmt::Update { .. }
                | Stmt::Delete { .. }
        )
    }

    pub fn is_select(&self) -> bool {
        matches!(
            self,
            Stmt::SelectConst(_)
                | Stmt::SelectV { .. }
                | Stmt::SelectAll
                | Stmt::SelectFunc(_)
                | Stmt::Capture(_)
                | Stmt::CaptureLogin(_)
                | Stmt::LoginCheck(_)
        )
    }

    /// One of the engine's own hidden statements that a client does not write: the capture
    /// and the settings replay's encoded `set_config` (S-5).
    pub fn is_engine_statement(&self) -> bool {
        match self {
            Stmt::Capture(_) | Stmt::CaptureLogin(_) | Stmt::LoginCheck(_) => true,
            Stmt::SelectFunc(Func::SetConfig { name, value, .. }) => {
                name.is_encoded() || value.is_encoded()
            }
            _ => false,
        }
    }

    /// A `SET polar_*` statement (the kind the engine hides in front of a client's query).
    pub fn is_polar_set(&self) -> bool {
        matches!(self, Stmt::Set { name, .. } if name.starts_with("polar_"))
    }
}

/// A statement with its source text (trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub text: String,
    pub stmt: Stmt,
}

/// A syntax error: the message PostgreSQL would give (`syntax error at or near "…"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Splits a Query string into statement texts at top-level semicolons (the lexer's `;`
/// tokens, so quotes, dollar quotes and comments are respected). Empty statements are dropped.
/// Unterminated quotes or comments are a syntax error.
pub fn split(sql: &str) -> Result<Vec<&str>, SyntaxError> {
    let (toks, spans) = lex(sql)?;
    let mut out = Vec::new();
    let (mut start, mut has_tokens) = (0, false);
    for (t, span) in toks.iter().zip(&spans) {
        if *t == Tok::Sym(';') {
            if has_tokens {
                out.push(sql[start..span.start].trim());
            }
            start = span.end;
            has_tokens = false;
        } else {
            has_tokens = true;
        }
    }
    if has_tokens {
        out.push(sql[start..].trim());
    }
    Ok(out)
}

/// `$tag$` at the start of `b` (tag: letters, digits, underscores, not starting with a digit).
fn dollar_tag(b: &[u8]) -> Option<usize> {
    let mut j = 1;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        if j == 1 && b[j].is_ascii_digit() {
            return None;
        }
        j += 1;
    }
    (j < b.len() && b[j] == b'$').then_some(j + 1)
}

fn unterminated(what: &str) -> SyntaxError {
    SyntaxError {
        message: format!("unterminated {what}"),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// A keyword or unquoted identifier, lowercased.
    Word(String),
    /// A double-quoted identifier, case kept.
    QIdent(String),
    Str(String),
    Num(String),
    Sym(char),
}

/// Tokens, and where each is in the source (error messages quote a token as written).
fn lex(s: &str) -> Result<(Vec<Tok>, Vec<Range<usize>>), SyntaxError> {
    let b = s.as_bytes();
    let mut toks = Vec::new();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let (st, before) = (i, toks.len());
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 1;
            i += 2;
            while depth > 0 {
                if i + 1 >= b.len() {
                    return Err(unterminated("/* comment"));
                }
                if b[i] == b'/' && b[i + 1] == b'*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b[i + 1] == b'/' {
                    depth -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
        } else if c == b'\'' || c == b'"' {
            let mut v = Vec::new();
            i += 1;
            loop {
                if i >= b.len() {
                    return Err(unterminated("quoted string"));
                }
                if b[i] == c {
                    if b.get(i + 1) == Some(&c) {
                        v.push(c);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                v.push(b[i]);
                i += 1;
            }
            let v = String::from_utf8_lossy(&v).into_owned();
            toks.push(if c == b'\'' {
                Tok::Str(v)
            } else {
                Tok::QIdent(v)
            });
        } else if c == b'$' {
            match dollar_tag(&b[i..]) {
                Some(n) => {
                    let tag = &b[i..i + n];
                    let body_start = i + n;
                    let mut j = body_start;
                    loop {
                        if j >= b.len() {
                            return Err(unterminated("dollar-quoted string"));
                        }
                        if b[j..].starts_with(tag) {
                            break;
                        }
                        j += 1;
                    }
                    toks.push(Tok::Str(
                        String::from_utf8_lossy(&b[body_start..j]).into_owned(),
                    ));
                    i = j + n;
                }
                None => {
                    toks.push(Tok::Sym('$'));
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            toks.push(Tok::Num(s[st..i].to_string()));
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let st = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            toks.push(Tok::Word(s[st..i].to_ascii_lowercase()));
        } else {
            // Multi-byte UTF-8 is handled above (>= 0x80), so `c` is ASCII here.
            toks.push(Tok::Sym(c as char));
            i += 1;
        }
        if toks.len() > before {
            spans.push(st..i);
        }
    }
    Ok((toks, spans))
}

/// The engine's capture of the writer's session state, as `src/session/hidden.rs`
/// (`CAPTURE_STATEMENT`) sends it. The simulated servers recognise it token by token (so
/// spacing, comments and keyword case do not matter), with any one literal in the place of
/// `$1`; `tests/hidden_statements.rs` fails if the engine's text drifts from this one.
pub const CAPTURE_TEXT: &str = "WITH g AS (SELECT name, setting, source, context, vartype FROM pg_catalog.pg_show_all_settings()), l (n) AS (SELECT pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_db_role_setting AS d, pg_catalog.unnest(d.setconfig) AS c WHERE d.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))) SELECT k, pg_catalog.encode(pg_catalog.convert_to(n, 'UTF8'), 'hex'), pg_catalog.encode(pg_catalog.convert_to(v, 'UTF8'), 'hex') FROM (SELECT 1 AS k, name AS n, setting AS v FROM g WHERE (source = 'session' OR source IN ('global', 'user', 'database', 'database user') AND (context = 'user' OR pg_catalog.current_setting('is_superuser') = 'on') OR source IN ('configuration file', 'command line') AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') OR pg_catalog.lower(name) IN (SELECT n FROM l) AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') OR name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout') AND setting <> '0') AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable', 'session_authorization', 'role') AND NOT (vartype = 'real' AND source IN ('global', 'user', 'database', 'database user')) UNION ALL SELECT 1, x, pg_catalog.current_setting(x, true) FROM (SELECT pg_catalog.unnest($1::pg_catalog.text[]) UNION SELECT n FROM l WHERE pg_catalog.strpos(n, '.') > 0) AS p (x) WHERE pg_catalog.current_setting(x, true) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM g AS r WHERE r.name = x AND r.vartype = 'real' AND r.source <> 'session') UNION ALL SELECT 2, 'session_authorization', pg_catalog.current_setting('session_authorization') UNION ALL SELECT 3, 'role', pg_catalog.current_setting('role') UNION ALL SELECT 4, 'temp', '' WHERE CASE WHEN pg_catalog.pg_my_temp_schema() = 0 THEN false ELSE (EXISTS (SELECT 1 FROM pg_catalog.pg_class AS t WHERE t.relnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_type AS t WHERE t.typnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_collation AS t WHERE t.collnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config AS t WHERE t.cfgnamespace = pg_catalog.pg_my_temp_schema()) OR EXISTS (SELECT 1 FROM pg_catalog.pg_ts_dict AS t WHERE t.dictnamespace = pg_catalog.pg_my_temp_schema())) END UNION ALL SELECT 6, 'prepared', '' WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS p WHERE p.from_sql) UNION ALL SELECT 7, 'advisory', '' WHERE '' = ANY ($1::pg_catalog.text[]) AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks AS l WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()) UNION ALL SELECT 8, 'listen', '' WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_listening_channels()) UNION ALL SELECT 9, 'inexact', '' WHERE EXISTS (SELECT 1 FROM g WHERE vartype = 'real' AND source = 'session') UNION ALL SELECT 5, 'settings', (SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.string_agg(name || '=' || COALESCE(setting, ''), pg_catalog.chr(10) ORDER BY name COLLATE pg_catalog.\"C\") || (SELECT pg_catalog.chr(10) || 'identity=' || pg_catalog.string_agg(i.oid::pg_catalog.text, ',' ORDER BY i.k) FROM (VALUES (1, pg_catalog.to_regrole(pg_catalog.quote_ident(SESSION_USER))::pg_catalog.oid), (2, pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid)) AS i (k, oid)), 'UTF8')), 'hex') FROM g WHERE context IN ('user', 'superuser') AND pg_catalog.strpos(name, '.') = 0 AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable', 'session_authorization', 'role', 'polar_consistency_mode', 'polar_proxy_wait_timeout_ms') AND pg_catalog.strpos(name, 'polar_xact_split_') <> 1 AND (pg_catalog.strpos(name, 'log_') <> 1 OR pg_catalog.current_setting('client_min_messages') IN ('log', 'debug1', 'debug2', 'debug3', 'debug4', 'debug5')))) AS s ORDER BY 1, 2";

/// The capture the engine sends right behind a writer's startup RFQ on a server before 17
/// (`CAPTURE_LOGIN_STATEMENT`): [`CAPTURE_TEXT`] without the rows of the hazard kinds (4, 6, 7,
/// 8, 9), which stand together between kind 3's row and kind 5's.
pub fn capture_login_text() -> &'static str {
    static T: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let from = CAPTURE_TEXT
            .find(" UNION ALL SELECT 4, 'temp'")
            .expect("kind 4");
        let to = CAPTURE_TEXT
            .find(" UNION ALL SELECT 5, 'settings'")
            .expect("kind 5");
        format!("{}{}", &CAPTURE_TEXT[..from], &CAPTURE_TEXT[to..])
    })
}

/// The settings replay's login check, as `src/session/hidden.rs` (`LOGIN_CHECK_HEAD`, the
/// replayed placeholder names as a `text[]` literal, `LOGIN_CHECK_TAIL`) sends it, with `$1`
/// where the literal stands; recognised like [`CAPTURE_TEXT`]. The simulated servers log every
/// connection in with the defaults the writer's sessions have, so it answers no row.
pub const LOGIN_CHECK_TEXT: &str = "SELECT ('polarsplit: the reader connection has ' || x || ' from its login, which the session on the primary does not have')::pg_catalog.int4 FROM (SELECT name FROM pg_catalog.pg_settings WHERE source IN ('global', 'database', 'user', 'database user') AND (context = 'user' OR context = 'superuser' AND pg_catalog.current_setting('is_superuser') = 'on') AND vartype <> 'real' UNION ALL SELECT n FROM (SELECT pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_db_role_setting AS d, pg_catalog.unnest(d.setconfig) AS c WHERE d.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))) AS p (n) WHERE pg_catalog.strpos(n, '.') > 0 AND pg_catalog.current_setting(n, true) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_settings AS r WHERE r.name = n AND r.vartype = 'real') AND n <> ALL ($1::pg_catalog.text[])) AS v (x)";

/// The capture template's tokens, with `None` where its `$1` is.
fn capture_template() -> &'static [Option<Tok>] {
    static T: std::sync::OnceLock<Vec<Option<Tok>>> = std::sync::OnceLock::new();
    T.get_or_init(|| template(CAPTURE_TEXT))
}

/// The login capture template's tokens, with `None` where its `$1` is.
fn capture_login_template() -> &'static [Option<Tok>] {
    static T: std::sync::OnceLock<Vec<Option<Tok>>> = std::sync::OnceLock::new();
    T.get_or_init(|| template(capture_login_text()))
}

/// The login check template's tokens, with `None` where its `$1` is.
fn login_check_template() -> &'static [Option<Tok>] {
    static T: std::sync::OnceLock<Vec<Option<Tok>>> = std::sync::OnceLock::new();
    T.get_or_init(|| template(LOGIN_CHECK_TEXT))
}

/// A hidden statement's tokens, with `None` where its `$1` is.
fn template(text: &str) -> Vec<Option<Tok>> {
    {
        let (toks, _) = lex(text).expect("the template lexes");
        let mut out = Vec::with_capacity(toks.len());
        let mut i = 0;
        while i < toks.len() {
            if toks[i] == Tok::Sym('$') && toks.get(i + 1) == Some(&Tok::Num("1".into())) {
                out.push(None);
                i += 2;
            } else {
                out.push(Some(toks[i].clone()));
                i += 1;
            }
        }
        out
    }
}

/// The capture's `$1` when `toks` are the capture statement's.
fn capture_arg(toks: &[Tok]) -> Option<CaptureArg> {
    template_arg(toks, capture_template())
}

/// What stands in `$1` when `toks` are the template `t`'s.
fn template_arg(toks: &[Tok], t: &[Option<Tok>]) -> Option<CaptureArg> {
    if toks.len() != t.len() {
        return None;
    }
    let mut arg = None;
    for (got, want) in toks.iter().zip(t) {
        match (want, got) {
            (Some(w), g) if w == g => {}
            (Some(_), _) => return None,
            (None, Tok::Str(s)) => arg = Some(CaptureArg::Array(s.clone())),
            (None, Tok::Num(_)) => arg = Some(CaptureArg::Other),
            (None, Tok::Word(w)) if w == "null" => arg = Some(CaptureArg::Other),
            (None, _) => return None,
        }
    }
    arg
}

/// Parses a one-dimensional `text[]` literal (`{a,"b c",NULL}`); `None` elements are SQL
/// NULLs. Anything else is PostgreSQL's 22P02.
pub fn parse_text_array(s: &str) -> Result<Vec<Option<String>>, String> {
    let bad = || format!("malformed array literal: \"{s}\"");
    let t = s.trim();
    let inner = t
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .ok_or_else(bad)?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut v = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(bad()),
                    Some('"') => break,
                    Some('\\') => v.push(chars.next().ok_or_else(bad)?),
                    Some(c) => v.push(c),
                }
            }
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if matches!(c, '{' | '}' | '"') {
                    return Err(bad());
                }
                if c == '\\' {
                    chars.next();
                    v.push(chars.next().ok_or_else(bad)?);
                    continue;
                }
                v.push(c);
                chars.next();
            }
            let trimmed = v.trim_end().to_string();
            if trimmed.is_empty() {
                return Err(bad());
            }
            v = trimmed;
        }
        let null = !quoted && v.eq_ignore_ascii_case("null");
        out.push((!null).then_some(v));
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(_) => return Err(bad()),
        }
    }
}

/// The message of a PL/pgSQL body that is exactly `BEGIN RAISE EXCEPTION '<message>'; END`.
fn parse_statement_body_raise(body: &str) -> Option<String> {
    let (toks, _) = lex(body).ok()?;
    let word = |t: &Tok, w: &str| matches!(t, Tok::Word(x) if x == w);
    match toks.as_slice() {
        [b, r, e, Tok::Str(m), Tok::Sym(';'), end, rest @ ..]
            if word(b, "begin")
                && word(r, "raise")
                && word(e, "exception")
                && word(end, "end")
                && matches!(rest, [] | [Tok::Sym(';')]) =>
        {
            Some(m.clone())
        }
        _ => None,
    }
}

/// Parses a whole Query string: every statement must parse, or nothing runs (W-6).
pub fn parse_query(sql: &str) -> Result<Vec<Parsed>, SyntaxError> {
    split(sql)?
        .into_iter()
        .map(|text| {
            parse_statement(text).map(|stmt| Parsed {
                text: text.to_string(),
                stmt,
            })
        })
        .collect()
}

/// Parses one statement (no top-level semicolon).
pub fn parse_statement(text: &str) -> Result<Stmt, SyntaxError> {
    let (toks, spans) = lex(text)?;
    if let Some(arg) = capture_arg(&toks) {
        return Ok(Stmt::Capture(arg));
    }
    if let Some(arg) = template_arg(&toks, capture_login_template()) {
        return Ok(Stmt::CaptureLogin(arg));
    }
    if let Some(arg) = template_arg(&toks, login_check_template()) {
        return Ok(Stmt::LoginCheck(arg));
    }
    let raw = spans.into_iter().map(|r| text[r].to_string()).collect();
    let mut p = P { toks, raw, pos: 0 };
    let st = p.statement()?;
    if p.pos < p.toks.len() {
        return Err(p.err());
    }
    Ok(st)
}

struct P {
    toks: Vec<Tok>,
    raw: Vec<String>,
    pos: usize,
}

type R<T> = Result<T, SyntaxError>;

impl P {
    fn err(&self) -> SyntaxError {
        let message = match self.raw.get(self.pos) {
            Some(t) => format!("syntax error at or near \"{t}\""),
            None => "syntax error at end of input".to_string(),
        };
        SyntaxError { message }
    }

    fn peek_word(&self) -> Option<&str> {
        match self.toks.get(self.pos) {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.peek_word() == Some(kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn kw(&mut self, kw: &str) -> R<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(self.err())
        }
    }

    fn eat_sym(&mut self, c: char) -> bool {
        if self.toks.get(self.pos) == Some(&Tok::Sym(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn sym(&mut self, c: char) -> R<()> {
        if self.eat_sym(c) {
            Ok(())
        } else {
            Err(self.err())
        }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    /// An identifier (keywords are accepted as names, as most are in PostgreSQL).
    fn ident(&mut self) -> R<String> {
        match self.toks.get(self.pos) {
            Some(Tok::Word(w)) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            Some(Tok::QIdent(w)) => {
                let w = w.clone();
                self.pos += 1;
                Ok(w)
            }
            _ => Err(self.err()),
        }
    }

    /// A possibly qualified name (`a.b`), lowercased where unquoted.
    fn dotted_name(&mut self) -> R<String> {
        let mut n = self.ident()?;
        while self.eat_sym('.') {
            n.push('.');
            n.push_str(&self.ident()?);
        }
        Ok(n)
    }

    fn int(&mut self) -> R<i64> {
        let neg = self.eat_sym('-');
        if !neg {
            self.eat_sym('+');
        }
        match self.toks.get(self.pos) {
            Some(Tok::Num(n)) if !n.contains('.') => {
                let v: i64 = n.parse().map_err(|_| self.err())?;
                self.pos += 1;
                Ok(if neg { -v } else { v })
            }
            _ => Err(self.err()),
        }
    }

    fn string(&mut self) -> R<String> {
        match self.toks.get(self.pos) {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.err()),
        }
    }

    /// The table `kv` (optionally `public.kv`).
    fn table_kv(&mut self) -> R<()> {
        if self.is_kw("public") {
            self.pos += 1;
            self.sym('.')?;
        }
        self.kw("kv")
    }

    fn statement(&mut self) -> R<Stmt> {
        let Some(first) = self.peek_word().map(str::to_string) else {
            return Err(self.err());
        };
        self.pos += 1;
        match first.as_str() {
            "begin" => {
                let _ = self.eat_kw("work") || self.eat_kw("transaction");
                Ok(Stmt::Begin {
                    start: false,
                    modes: self.tx_modes()?,
                })
            }
            "start" => {
                self.kw("transaction")?;
                Ok(Stmt::Begin {
                    start: true,
                    modes: self.tx_modes()?,
                })
            }
            "commit" | "end" => {
                let _ = self.eat_kw("work") || self.eat_kw("transaction");
                Ok(Stmt::Commit)
            }
            "rollback" | "abort" => {
                let _ = self.eat_kw("work") || self.eat_kw("transaction");
                if first == "rollback" && self.eat_kw("to") {
                    self.eat_kw("savepoint");
                    return Ok(Stmt::RollbackTo(self.ident()?));
                }
                Ok(Stmt::Rollback)
            }
            "savepoint" => Ok(Stmt::Savepoint(self.ident()?)),
            "release" => {
                self.eat_kw("savepoint");
                Ok(Stmt::Release(self.ident()?))
            }
            "set" => self.set(),
            "reset" => {
                if self.eat_kw("all") {
                    Ok(Stmt::Reset(None))
                } else if self.is_kw("role") && self.toks.len() == self.pos + 1 {
                    self.pos += 1;
                    Ok(Stmt::SetRole(None))
                } else if self.eat_kw("session") {
                    self.kw("authorization")?;
                    Ok(Stmt::SetSessionAuthorization(None))
                } else {
                    Ok(Stmt::Reset(Some(self.dotted_name()?)))
                }
            }
            "show" => {
                if self.eat_kw("transaction") {
                    self.kw("isolation")?;
                    self.kw("level")?;
                    return Ok(Stmt::Show("transaction_isolation".into()));
                }
                Ok(Stmt::Show(self.dotted_name()?))
            }
            "select" => self.select(),
            "insert" => {
                self.kw("into")?;
                self.table_kv()?;
                if self.eat_sym('(') {
                    self.kw("k")?;
                    self.sym(',')?;
                    self.kw("v")?;
                    self.sym(')')?;
                }
                self.kw("values")?;
                self.sym('(')?;
                let k = self.int()?;
                self.sym(',')?;
                let v = self.int()?;
                self.sym(')')?;
                Ok(Stmt::Insert { k, v })
            }
            "update" => {
                self.table_kv()?;
                self.kw("set")?;
                self.kw("v")?;
                self.sym('=')?;
                let v = self.int()?;
                let k = self.where_k()?;
                Ok(Stmt::Update { k, v })
            }
            "delete" => {
                self.kw("from")?;
                self.table_kv()?;
                let k = self.where_k()?;
                Ok(Stmt::Delete { k })
            }
            "lock" => {
                self.eat_kw("table");
                self.eat_kw("only");
                self.table_kv()?;
                let mode = if self.eat_kw("in") {
                    let m = self.lock_mode()?;
                    self.kw("mode")?;
                    m
                } else {
                    LockMode::AccessExclusive
                };
                self.eat_kw("nowait");
                Ok(Stmt::Lock(mode))
            }
            "create" => {
                if !(self.eat_kw("temp") || self.eat_kw("temporary")) {
                    return Err(self.err());
                }
                self.kw("table")?;
                // Whatever follows is accepted: only the statement's effects are simulated.
                self.pos = self.toks.len();
                Ok(Stmt::CreateTemp)
            }
            "discard" => {
                self.kw("all")?;
                Ok(Stmt::DiscardAll)
            }
            "do" => {
                let body = self.string()?;
                if self.eat_kw("language") {
                    self.kw("plpgsql")?;
                }
                let raise = parse_statement_body_raise(&body).ok_or_else(|| {
                    self.pos -= 1;
                    self.err()
                })?;
                Ok(Stmt::DoRaise(raise))
            }
            "listen" => Ok(Stmt::Listen(self.ident()?)),
            "unlisten" => {
                if self.eat_sym('*') {
                    Ok(Stmt::Unlisten(None))
                } else {
                    Ok(Stmt::Unlisten(Some(self.ident()?)))
                }
            }
            "notify" => {
                let channel = self.ident()?;
                let payload = if self.eat_sym(',') {
                    self.string()?
                } else {
                    String::new()
                };
                Ok(Stmt::Notify { channel, payload })
            }
            "deallocate" => {
                self.eat_kw("prepare");
                if self.eat_kw("all") {
                    Ok(Stmt::Deallocate(None))
                } else {
                    Ok(Stmt::Deallocate(Some(self.ident()?)))
                }
            }
            _ => {
                self.pos -= 1;
                Err(self.err())
            }
        }
    }

    fn where_k(&mut self) -> R<i64> {
        self.kw("where")?;
        self.kw("k")?;
        self.sym('=')?;
        self.int()
    }

    fn lock_mode(&mut self) -> R<LockMode> {
        if self.eat_kw("access") {
            if self.eat_kw("share") {
                return Ok(LockMode::AccessShare);
            }
            self.kw("exclusive")?;
            return Ok(LockMode::AccessExclusive);
        }
        if self.eat_kw("row") {
            if self.eat_kw("share") {
                return Ok(LockMode::RowShare);
            }
            self.kw("exclusive")?;
            return Ok(LockMode::RowExclusive);
        }
        if self.eat_kw("share") {
            if self.eat_kw("update") {
                self.kw("exclusive")?;
                return Ok(LockMode::ShareUpdateExclusive);
            }
            if self.eat_kw("row") {
                self.kw("exclusive")?;
                return Ok(LockMode::ShareRowExclusive);
            }
            return Ok(LockMode::Share);
        }
        self.kw("exclusive")?;
        Ok(LockMode::Exclusive)
    }

    fn tx_modes(&mut self) -> R<TxModes> {
        let mut m = TxModes::default();
        loop {
            if self.eat_kw("isolation") {
                self.kw("level")?;
                m.isolation = Some(if self.eat_kw("serializable") {
                    Isolation::Serializable
                } else if self.eat_kw("repeatable") {
                    self.kw("read")?;
                    Isolation::RepeatableRead
                } else {
                    self.kw("read")?;
                    if !self.eat_kw("committed") {
                        self.kw("uncommitted")?;
                    }
                    Isolation::ReadCommitted
                });
            } else if self.eat_kw("read") {
                if self.eat_kw("only") {
                    m.read_only = Some(true);
                } else {
                    self.kw("write")?;
                    m.read_only = Some(false);
                }
            } else if self.eat_kw("not") {
                self.kw("deferrable")?;
            } else if self.eat_kw("deferrable") {
            } else {
                break;
            }
            self.eat_sym(',');
        }
        Ok(m)
    }

    fn set(&mut self) -> R<Stmt> {
        if self.eat_kw("transaction") {
            return Ok(Stmt::SetTransaction(self.tx_modes()?));
        }
        let local = self.eat_kw("local");
        if !local && self.is_kw("session") {
            self.pos += 1;
            if self.eat_kw("authorization") {
                if self.eat_kw("default") {
                    return Ok(Stmt::SetSessionAuthorization(None));
                }
                return Ok(Stmt::SetSessionAuthorization(Some(self.role_name()?)));
            }
            if self.eat_kw("characteristics") {
                self.kw("as")?;
                self.kw("transaction")?;
                return Ok(Stmt::SetSessionCharacteristics(self.tx_modes()?));
            }
        }
        if !local
            && self.is_kw("role")
            && !matches!(self.toks.get(self.pos + 1), Some(Tok::Sym('=')) | None)
            && !matches!(self.toks.get(self.pos + 1), Some(Tok::Word(w)) if w == "to")
        {
            self.pos += 1;
            if self.eat_kw("none") {
                return Ok(Stmt::SetRole(None));
            }
            return Ok(Stmt::SetRole(Some(self.role_name()?)));
        }
        if self.is_kw("time")
            && matches!(self.toks.get(self.pos + 1), Some(Tok::Word(w)) if w == "zone")
        {
            self.pos += 2;
            let value = self.set_value()?;
            return Ok(Stmt::Set {
                local,
                name: "timezone".into(),
                value,
            });
        }
        let name = self.dotted_name()?;
        if !(self.eat_sym('=') || self.eat_kw("to")) {
            return Err(self.err());
        }
        let value = self.set_value()?;
        Ok(Stmt::Set { local, name, value })
    }

    fn set_value(&mut self) -> R<SetValue> {
        if self.eat_kw("default") {
            return Ok(SetValue::Default);
        }
        let mut parts = Vec::new();
        loop {
            let part = match self.toks.get(self.pos).cloned() {
                Some(Tok::Str(s)) => s,
                Some(Tok::Word(w)) | Some(Tok::QIdent(w)) => w,
                Some(Tok::Num(n)) => n,
                Some(Tok::Sym('-')) => {
                    self.pos += 1;
                    match self.toks.get(self.pos).cloned() {
                        Some(Tok::Num(n)) => format!("-{n}"),
                        _ => return Err(self.err()),
                    }
                }
                _ => return Err(self.err()),
            };
            self.pos += 1;
            parts.push(part);
            if !self.eat_sym(',') {
                break;
            }
        }
        Ok(SetValue::Text(parts.join(", ")))
    }

    fn select(&mut self) -> R<Stmt> {
        // SELECT <integer>
        if matches!(
            self.toks.get(self.pos),
            Some(Tok::Num(_)) | Some(Tok::Sym('-'))
        ) {
            let v = self.int()?;
            return Ok(Stmt::SelectConst(v));
        }
        // SELECT v FROM kv WHERE k = N [FOR …]
        if self.eat_kw("v") {
            self.kw("from")?;
            self.table_kv()?;
            let k = self.where_k()?;
            let lock = self.row_lock()?;
            return Ok(Stmt::SelectV { k, lock });
        }
        // SELECT k, v FROM kv [ORDER BY k]   (or SELECT * FROM kv)
        let all = if self.eat_sym('*') {
            true
        } else if self.is_kw("k") && self.toks.get(self.pos + 1) == Some(&Tok::Sym(',')) {
            self.pos += 2;
            self.kw("v")?;
            true
        } else {
            false
        };
        if all {
            self.kw("from")?;
            self.table_kv()?;
            if self.eat_kw("order") {
                self.kw("by")?;
                self.kw("k")?;
                self.eat_kw("asc");
            }
            return Ok(Stmt::SelectAll);
        }
        // SELECT f(…) or SELECT pg_catalog.f(…)
        let name = self.func_name()?;
        match name.as_str() {
            "current_user" | "current_role" => return Ok(Stmt::SelectFunc(Func::CurrentUser)),
            "session_user" => return Ok(Stmt::SelectFunc(Func::SessionUser)),
            _ => {}
        }
        self.sym('(')?;
        let f = match name.as_str() {
            "nextval" => Func::Nextval(self.regclass()?),
            "set_config" => {
                let name = self.str_expr()?;
                self.sym(',')?;
                let value = self.str_expr()?;
                self.sym(',')?;
                let is_local = if self.eat_kw("true") {
                    true
                } else {
                    self.kw("false")?;
                    false
                };
                Func::SetConfig {
                    name,
                    value,
                    is_local,
                }
            }
            "pg_advisory_lock" => Func::AdvisoryLock(self.int()?),
            "pg_advisory_unlock_all" => Func::AdvisoryUnlockAll,
            "pg_current_wal_insert_lsn" => Func::CurrentWalInsertLsn,
            "pg_current_wal_lsn" => Func::CurrentWalLsn,
            "pg_last_wal_replay_lsn" => Func::LastWalReplayLsn,
            "pg_is_in_recovery" => Func::IsInRecovery,
            "txid_current" => Func::TxidCurrent,
            "current_setting" => {
                let name = self.string()?.to_ascii_lowercase();
                let missing_ok = if self.eat_sym(',') {
                    if self.eat_kw("true") {
                        true
                    } else {
                        self.kw("false")?;
                        false
                    }
                } else {
                    false
                };
                Func::CurrentSetting { name, missing_ok }
            }
            "set_tenant" => Func::SetTenant(self.string()?),
            "pg_notify" => {
                let channel = self.string()?;
                self.sym(',')?;
                let payload = self.string()?;
                Func::PgNotify { channel, payload }
            }
            _ => {
                self.pos -= 2;
                return Err(self.err());
            }
        };
        self.sym(')')?;
        Ok(Stmt::SelectFunc(f))
    }

    /// A function name, optionally qualified with `pg_catalog` (the schema of every built-in
    /// function; the engine qualifies its hidden statements' calls).
    fn func_name(&mut self) -> R<String> {
        let mut name = match self.toks.get(self.pos) {
            Some(Tok::Word(w)) | Some(Tok::QIdent(w)) => w.clone(),
            _ => return Err(self.err()),
        };
        self.pos += 1;
        if name == "pg_catalog" && self.eat_sym('.') {
            name = match self.toks.get(self.pos) {
                Some(Tok::Word(w)) | Some(Tok::QIdent(w)) => w.clone(),
                _ => return Err(self.err()),
            };
            self.pos += 1;
        }
        Ok(name)
    }

    /// A text argument: a string literal, or
    /// `convert_from(decode('<hex>', 'hex'), 'UTF8')` (each optionally `pg_catalog.`).
    fn str_expr(&mut self) -> R<StrExpr> {
        if matches!(self.toks.get(self.pos), Some(Tok::Str(_))) {
            return Ok(StrExpr::Lit(self.string()?));
        }
        let at = self.pos;
        if self.func_name().ok().as_deref() != Some("convert_from") {
            self.pos = at;
            return Err(self.err());
        }
        self.sym('(')?;
        let at = self.pos;
        if self.func_name().ok().as_deref() != Some("decode") {
            self.pos = at;
            return Err(self.err());
        }
        self.sym('(')?;
        let hex = self.string()?;
        self.sym(',')?;
        // Only the hex format is in the subset.
        if !self.string()?.eq_ignore_ascii_case("hex") {
            self.pos -= 1;
            return Err(self.err());
        }
        self.sym(')')?;
        self.sym(',')?;
        let enc = self.string()?;
        if !matches!(
            enc.to_ascii_lowercase().replace(['-', '_'], "").as_str(),
            "utf8" | "unicode"
        ) {
            self.pos -= 1;
            return Err(self.err());
        }
        self.sym(')')?;
        Ok(StrExpr::FromHex(hex))
    }

    /// A role name: an identifier or a string.
    fn role_name(&mut self) -> R<String> {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok(s)
            }
            _ => self.ident(),
        }
    }

    /// `'s'` or `'s'::regclass`.
    fn regclass(&mut self) -> R<String> {
        let s = self.string()?;
        if self.eat_sym(':') {
            self.sym(':')?;
            self.kw("regclass")?;
        }
        Ok(s.to_ascii_lowercase())
    }

    fn row_lock(&mut self) -> R<Option<RowLock>> {
        if !self.eat_kw("for") {
            return Ok(None);
        }
        let l = if self.eat_kw("update") {
            RowLock::Update
        } else if self.eat_kw("share") {
            RowLock::Share
        } else if self.eat_kw("no") {
            self.kw("key")?;
            self.kw("update")?;
            RowLock::NoKeyUpdate
        } else {
            self.kw("key")?;
            self.kw("share")?;
            RowLock::KeyShare
        };
        let _ = self.eat_kw("nowait") || (self.eat_kw("skip") && self.eat_kw("locked"));
        if !self.at_end() {
            return Err(self.err());
        }
        Ok(Some(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Stmt {
        parse_statement(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn splits_respecting_quotes_and_comments() {
        assert_eq!(
            split("SELECT 1; SELECT 2").unwrap(),
            vec!["SELECT 1", "SELECT 2"]
        );
        assert_eq!(split("SELECT ';'; ;").unwrap(), vec!["SELECT ';'"]);
        assert_eq!(split("SELECT 1 /* ; */").unwrap(), vec!["SELECT 1 /* ; */"]);
        assert_eq!(split("SELECT 1 -- ;\n").unwrap(), vec!["SELECT 1 -- ;"]);
        assert_eq!(split("SELECT $$;$$").unwrap(), vec!["SELECT $$;$$"]);
        assert_eq!(split("SELECT \"a;b\"").unwrap(), vec!["SELECT \"a;b\""]);
        assert!(split("").unwrap().is_empty());
        assert!(split(" ; -- x").unwrap().is_empty());
        assert!(split("SELECT 'x").is_err());
        assert!(split("SELECT /* x").is_err());
    }

    #[test]
    fn parses_the_subset() {
        assert_eq!(
            one("begin isolation level repeatable read read only"),
            Stmt::Begin {
                start: false,
                modes: TxModes {
                    isolation: Some(Isolation::RepeatableRead),
                    read_only: Some(true)
                }
            }
        );
        assert!(matches!(
            one("START TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE"),
            Stmt::Begin { start: true, .. }
        ));
        assert_eq!(one("end"), Stmt::Commit);
        assert_eq!(one("ABORT"), Stmt::Rollback);
        assert_eq!(one("rollback to savepoint a"), Stmt::RollbackTo("a".into()));
        assert_eq!(one("ROLLBACK TO a"), Stmt::RollbackTo("a".into()));
        assert_eq!(one("release a"), Stmt::Release("a".into()));
        assert_eq!(
            one("SET polar_xact_split_wait_lsn = '97500059720'"),
            Stmt::Set {
                local: false,
                name: "polar_xact_split_wait_lsn".into(),
                value: SetValue::Text("97500059720".into())
            }
        );
        assert_eq!(
            one("set local statement_timeout to 5"),
            Stmt::Set {
                local: true,
                name: "statement_timeout".into(),
                value: SetValue::Text("5".into())
            }
        );
        assert_eq!(
            one("SET polarsplit.x = DEFAULT"),
            Stmt::Set {
                local: false,
                name: "polarsplit.x".into(),
                value: SetValue::Default
            }
        );
        assert!(matches!(
            one("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
            Stmt::SetSessionCharacteristics(TxModes {
                isolation: Some(Isolation::RepeatableRead),
                ..
            })
        ));
        assert_eq!(
            one("select v from kv where k = -3"),
            Stmt::SelectV { k: -3, lock: None }
        );
        assert_eq!(
            one("SELECT v FROM public.kv WHERE k = 3 FOR SHARE"),
            Stmt::SelectV {
                k: 3,
                lock: Some(RowLock::Share)
            }
        );
        assert_eq!(one("SELECT k, v FROM kv ORDER BY k"), Stmt::SelectAll);
        assert_eq!(one("SELECT 1"), Stmt::SelectConst(1));
        assert_eq!(
            one("SELECT nextval('s')"),
            Stmt::SelectFunc(Func::Nextval("s".into()))
        );
        assert_eq!(
            one("SELECT \"nextval\"('s'::regclass)"),
            Stmt::SelectFunc(Func::Nextval("s".into()))
        );
        assert_eq!(
            one("SELECT set_config('a.b', 'x', true)"),
            Stmt::SelectFunc(Func::SetConfig {
                name: StrExpr::Lit("a.b".into()),
                value: StrExpr::Lit("x".into()),
                is_local: true
            })
        );
        assert_eq!(
            one("INSERT INTO kv VALUES (1, 2)"),
            Stmt::Insert { k: 1, v: 2 }
        );
        assert_eq!(
            one("insert into kv (k, v) values (1, -2)"),
            Stmt::Insert { k: 1, v: -2 }
        );
        assert_eq!(
            one("UPDATE kv SET v = 9 WHERE k = 1"),
            Stmt::Update { k: 1, v: 9 }
        );
        assert_eq!(one("DELETE FROM kv WHERE k = 1"), Stmt::Delete { k: 1 });
        assert_eq!(one("LOCK TABLE kv"), Stmt::Lock(LockMode::AccessExclusive));
        assert_eq!(
            one("lock kv in access share mode"),
            Stmt::Lock(LockMode::AccessShare)
        );
        assert_eq!(
            one("LOCK TABLE kv IN SHARE ROW EXCLUSIVE MODE"),
            Stmt::Lock(LockMode::ShareRowExclusive)
        );
        assert_eq!(one("CREATE TEMP TABLE t (a int)"), Stmt::CreateTemp);
        assert_eq!(
            one("SHOW transaction isolation level"),
            Stmt::Show("transaction_isolation".into())
        );
        assert_eq!(one("reset all"), Stmt::Reset(None));
    }

    #[test]
    fn w7_probe_is_schema_qualified() {
        assert_eq!(
            one("SELECT pg_catalog.pg_current_wal_insert_lsn()"),
            Stmt::SelectFunc(Func::CurrentWalInsertLsn)
        );
        assert_eq!(
            one("select PG_CATALOG.\"current_setting\"('role')"),
            Stmt::SelectFunc(Func::CurrentSetting {
                name: "role".into(),
                missing_ok: false
            })
        );
        // Only pg_catalog qualifies a built-in function.
        assert!(parse_statement("SELECT public.pg_current_wal_insert_lsn()").is_err());
    }

    #[test]
    fn s5_settings_replay_decodes_hex_as_postgresql_does() {
        let replay = "SELECT pg_catalog.set_config(pg_catalog.convert_from(pg_catalog.decode('6170702e74656e616e74', 'hex'), 'UTF8'), pg_catalog.convert_from(pg_catalog.decode('61 6362', 'hex'), 'UTF8'), false)";
        let Stmt::SelectFunc(Func::SetConfig {
            name,
            value,
            is_local,
        }) = one(replay)
        else {
            panic!("not set_config");
        };
        assert!(!is_local);
        assert_eq!(name.eval(), Ok("app.tenant".to_string()));
        // decode() skips whitespace in front of a digit pair.
        assert_eq!(value.eval(), Ok("acb".to_string()));
        assert!(one(replay).is_engine_statement());
        assert!(!one("SELECT set_config('a.b', 'x', false)").is_engine_statement());
        // The errors PostgreSQL 15.18 gives (verified here).
        let err = |h: &str| StrExpr::FromHex(h.into()).eval().unwrap_err();
        assert_eq!(
            err("7"),
            (
                "22023",
                "invalid hexadecimal data: odd number of digits".into()
            )
        );
        assert_eq!(
            err("7x"),
            ("22023", "invalid hexadecimal digit: \"x\"".into())
        );
        assert_eq!(
            err("ff"),
            (
                "22021",
                "invalid byte sequence for encoding \"UTF8\": 0xff".into()
            )
        );
        assert!(parse_statement(
            "SELECT set_config(convert_from(decode('61', 'base64'), 'UTF8'), 'x', false)"
        )
        .is_err());
    }

    #[test]
    fn s5_capture_is_recognised_token_by_token() {
        let bound = CAPTURE_TEXT.replace("$1", "'{\"app.tenant\",\"app.x\"}'");
        assert_eq!(
            one(&bound),
            Stmt::Capture(CaptureArg::Array("{\"app.tenant\",\"app.x\"}".into()))
        );
        // Spacing, comments and keyword case do not matter; the Describe stand-in and NULL
        // bind as no names.
        let spaced = CAPTURE_TEXT
            .replace(", ", " ,\n  ")
            .replace("SELECT", "select /* x */")
            .replace("$1", "0");
        assert_eq!(one(&spaced), Stmt::Capture(CaptureArg::Other));
        assert_eq!(
            one(&CAPTURE_TEXT.replace("$1", "NULL")),
            Stmt::Capture(CaptureArg::Other)
        );
        // Anything else is not the capture.
        assert!(parse_statement(&CAPTURE_TEXT.replace("'session'", "'client'")).is_err());
        assert!(parse_statement(&CAPTURE_TEXT.replace("ORDER BY 1, 2", "ORDER BY 2")).is_err());
    }

    #[test]
    fn f3_abort_block_raises() {
        assert_eq!(
            one("DO $polarsplit$ BEGIN RAISE EXCEPTION 'polarsplit: transaction aborted after a failed replica read'; END $polarsplit$"),
            Stmt::DoRaise("polarsplit: transaction aborted after a failed replica read".into())
        );
        assert!(parse_statement("DO $$ BEGIN PERFORM 1; END $$").is_err());
    }

    #[test]
    fn text_array_literals() {
        assert_eq!(parse_text_array("{}"), Ok(vec![]));
        assert_eq!(
            parse_text_array("{\"app.tenant\", app.x ,NULL,\"a\\\"b\"}"),
            Ok(vec![
                Some("app.tenant".into()),
                Some("app.x".into()),
                None,
                Some("a\"b".into())
            ])
        );
        for bad in ["", "x", "{a", "{a,}", "{\"a}", "{a}b"] {
            assert!(parse_text_array(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_the_rest() {
        for s in [
            "SELECT * FROM other",
            "SELECT v FROM kv WHERE k = 1 extra",
            "VACUUM",
            "INSERT INTO kv VALUES (1)",
            "SELECT pg_sleep(1)",
            "SELECT 1.5",
        ] {
            assert!(parse_statement(s).is_err(), "{s}");
        }
        assert_eq!(
            parse_statement("FOO").unwrap_err().message,
            "syntax error at or near \"FOO\""
        );
        assert!(parse_query("SELECT 1; FOO").is_err());
    }
}
