//! The backend: startup, message handling, statement execution, transactions, RFQs and waits.
//! Everything a connection does happens here, at the cluster's current virtual time.

use std::collections::BTreeMap;

use polarsplit::protocol::rfq::{Marker, TxStatus};
use polarsplit::protocol::{
    frame, FrontendMessage, Limits, Lsn, RfqExtensions, StartupPacket, XidList,
};

use crate::cluster::Cluster;
use crate::config::{Dialect, Role};
use crate::history::{
    CloseReason, CommitRecord, Event, ImportRecord, SnapshotRecord, StatementRecord, StmtResult,
    TxRecord, WaitOutcome, WaitRecord, WriteRecord,
};
use crate::session::{
    known_default, parse_ms, ActiveWait, Conn, Gucs, Inbound, Level, Phase, Running, Tx, TxWrite,
    FIXED_GUCS, KNOWN_GUCS,
};
use crate::sql::{
    parse_query, Func, Isolation, LockMode, Parsed, RowLock, SetValue, Stmt, TxModes,
};
use crate::store::{OwnView, Snapshot, WriteConflict, Xid, XidStatus};
use crate::wire::{self, oid, Column, RfqBody};

/// An error the server sends.
#[derive(Clone, Debug, Default)]
pub(crate) struct SqlError {
    pub fatal: bool,
    pub code: String,
    pub message: String,
    pub detail: Option<Box<str>>,
    pub hint: Option<Box<str>>,
    pub routine: Option<Box<str>>,
    pub injected: bool,
    pub refused_write: bool,
}

impl SqlError {
    fn new(code: &str, message: impl Into<String>) -> SqlError {
        SqlError {
            code: code.to_string(),
            message: message.into(),
            ..SqlError::default()
        }
    }

    fn detail(mut self, d: impl Into<String>) -> SqlError {
        self.detail = Some(d.into().into_boxed_str());
        self
    }

    fn hint(mut self, h: impl Into<String>) -> SqlError {
        self.hint = Some(h.into().into_boxed_str());
        self
    }

    fn routine(mut self, r: &str) -> SqlError {
        self.routine = Some(r.into());
        self
    }

    /// A write a hot standby refuses.
    fn refused(mut self) -> SqlError {
        self.refused_write = true;
        self
    }

    fn fatal(mut self) -> SqlError {
        self.fatal = true;
        self
    }
}

fn unrecognized(name: &str) -> SqlError {
    SqlError::new(
        "42704",
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

fn invalid_value(name: &str, value: &str) -> SqlError {
    SqlError::new(
        "22023",
        format!("invalid value for parameter \"{name}\": \"{value}\""),
    )
}

fn read_only_tx(verb: &str) -> SqlError {
    SqlError::new(
        "25006",
        format!("cannot execute {verb} in a read-only transaction"),
    )
}

fn no_tx_block(what: &str) -> SqlError {
    SqlError::new(
        "25P01",
        format!("{what} can only be used in transaction blocks"),
    )
}

fn conflict_error(c: WriteConflict, k: i64) -> SqlError {
    match c {
        WriteConflict::Locked => SqlError::new(
            "55P03",
            "could not obtain lock on row in relation \"kv\"",
        )
        .detail("The simulator does not block: a row held by another open transaction is refused at once."),
        WriteConflict::Serialization => SqlError::new(
            "40001",
            "could not serialize access due to concurrent update",
        ),
        WriteConflict::Duplicate => SqlError::new(
            "23505",
            "duplicate key value violates unique constraint \"kv_pkey\"",
        )
        .detail(format!("Key (k)=({k}) already exists.")),
    }
}

fn emit_error(out: &mut Vec<u8>, e: &SqlError) {
    let sev = if e.fatal { "FATAL" } else { "ERROR" };
    let mut f: Vec<(u8, &str)> = vec![
        (b'S', sev),
        (b'V', sev),
        (b'C', &e.code),
        (b'M', &e.message),
    ];
    if let Some(d) = &e.detail {
        f.push((b'D', d));
    }
    if let Some(h) = &e.hint {
        f.push((b'H', h));
    }
    if let Some(r) = &e.routine {
        f.push((b'R', r));
    }
    wire::fields_message(out, false, &f);
}

/// Sends a FATAL error (the caller closes the connection).
pub(crate) fn send_fatal(c: &mut Conn, code: &str, message: &str) {
    emit_error(&mut c.out, &SqlError::new(code, message).fatal());
}

/// What a statement did, for its history record.
#[derive(Default)]
struct StmtInfo {
    snapshot: Option<SnapshotRecord>,
    reads: Vec<(i64, Option<i64>)>,
    rows: usize,
    warnings: Vec<(String, Option<String>)>,
    wait: Option<WaitRecord>,
}

/// Why a statement did not complete now.
enum Flow {
    Wait(ActiveWait),
    Fail(SqlError),
}

impl From<SqlError> for Flow {
    fn from(e: SqlError) -> Flow {
        Flow::Fail(e)
    }
}

type ExecResult = Result<String, Flow>;

fn tx(c: &mut Conn) -> &mut Tx {
    c.tx.as_mut().expect("statements run inside a transaction")
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "1" | "on" | "true" | "yes")
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" | "t" => Some(true),
        "0" | "off" | "false" | "no" | "f" => Some(false),
        _ => None,
    }
}

/// `polardb` reads the wait LSN like `strtoull`: leading digits, junk is 0, `-N` wraps.
fn lenient_lsn(v: &str) -> u64 {
    let t = v.trim();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let n = digits
        .parse::<u64>()
        .unwrap_or(if digits.is_empty() { 0 } else { u64::MAX });
    if neg {
        n.wrapping_neg()
    } else {
        n
    }
}

/// The `options` startup parameter: `-c name=value` and `--name=value`.
fn parse_options(s: &str) -> Result<Vec<(String, String)>, SqlError> {
    let toks: Vec<&str> = s.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let kv = if t == "-c" {
            i += 1;
            toks.get(i).copied()
        } else if let Some(kv) = t.strip_prefix("-c") {
            Some(kv)
        } else {
            t.strip_prefix("--")
        };
        let Some((k, v)) = kv.and_then(|kv| kv.split_once('=')) else {
            return Err(SqlError::new(
                "08P01",
                format!("invalid command-line argument for server process: {t}"),
            ));
        };
        out.push((k.replace('-', "_"), v.to_string()));
        i += 1;
    }
    Ok(out)
}

fn columns_of(stmt: &Stmt) -> Option<Vec<Column>> {
    Some(match stmt {
        Stmt::SelectConst(_) => vec![Column::new("?column?", oid::INT4)],
        Stmt::SelectV { .. } => vec![Column::new("v", oid::INT4)],
        Stmt::SelectAll => vec![Column::new("k", oid::INT4), Column::new("v", oid::INT4)],
        Stmt::SelectFunc(f) => {
            let t = match f {
                Func::Nextval(_) | Func::TxidCurrent => oid::INT8,
                Func::SetConfig { .. } => oid::TEXT,
                Func::AdvisoryLock(_) | Func::AdvisoryUnlockAll => oid::VOID,
                Func::CurrentWalInsertLsn | Func::CurrentWalLsn | Func::LastWalReplayLsn => {
                    oid::PG_LSN
                }
                Func::IsInRecovery => oid::BOOL,
            };
            vec![Column::new(f.column(), t)]
        }
        Stmt::Show(name) => vec![Column::new(&display_name(name), oid::TEXT)],
        _ => return None,
    })
}

fn display_name(name: &str) -> String {
    KNOWN_GUCS
        .iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, _, d)| *d)
        .map(str::to_string)
        .unwrap_or_else(|| name.to_string())
}

/// What kind of setting a name is, for this dialect.
enum GucKind {
    Known,
    Placeholder,
    Fixed,
    PolarMode,
    PolarTimeout,
    PolarWaitLsn,
    PolarXids,
}

impl Cluster {
    fn guc_kind(&self, name: &str) -> Result<GucKind, SqlError> {
        let d = self.cfg.dialect;
        Ok(match name {
            "polar_consistency_mode" if d == Dialect::Awide => GucKind::PolarMode,
            "polar_proxy_wait_timeout_ms" if d == Dialect::Awide => GucKind::PolarTimeout,
            "polar_xact_split_wait_lsn" if d != Dialect::Stock => GucKind::PolarWaitLsn,
            "polar_xact_split_xids" if d != Dialect::Stock => GucKind::PolarXids,
            n if FIXED_GUCS.contains(&n) => GucKind::Fixed,
            n if known_default(n).is_some() => GucKind::Known,
            n if n.contains('.') => GucKind::Placeholder,
            n => return Err(unrecognized(n)),
        })
    }

    /// Validates and normalises a value.
    fn guc_value(&self, kind: &GucKind, name: &str, v: &str) -> Result<String, SqlError> {
        Ok(match kind {
            GucKind::Fixed => {
                return Err(SqlError::new(
                    "55P02",
                    format!("parameter \"{name}\" cannot be changed"),
                ))
            }
            GucKind::Placeholder => v.to_string(),
            GucKind::PolarMode => match v.to_ascii_lowercase().as_str() {
                m @ ("strict" | "best_effort") => m.to_string(),
                _ => {
                    return Err(
                        invalid_value(name, v).hint("Available values: strict, best_effort.")
                    )
                }
            },
            GucKind::PolarTimeout => match v.trim().parse::<u32>() {
                Ok(n) if n <= i32::MAX as u32 => n.to_string(),
                _ => return Err(invalid_value(name, v)),
            },
            GucKind::PolarWaitLsn => {
                if self.cfg.dialect == Dialect::Awide && v.trim().parse::<u64>().is_err() {
                    return Err(invalid_value(name, v)
                        .detail("The wait LSN is a decimal unsigned 64-bit integer."));
                }
                v.to_string()
            }
            GucKind::PolarXids => {
                if !v.is_empty() {
                    if let Err(e) = XidList::parse(v.as_bytes()) {
                        let why = match e {
                            polarsplit::protocol::XidError::TooFewFields => {
                                "xid list is too short".to_string()
                            }
                            other => other.to_string(),
                        };
                        return Err(invalid_value(name, v).detail(why));
                    }
                }
                v.to_string()
            }
            GucKind::Known => match name {
                "statement_timeout" | "lock_timeout" | "idle_in_transaction_session_timeout" => {
                    parse_ms(v)
                        .ok_or_else(|| invalid_value(name, v))?
                        .to_string()
                }
                "default_transaction_isolation" => Isolation::parse(v)
                    .ok_or_else(|| invalid_value(name, v))?
                    .guc_text()
                    .to_string(),
                "default_transaction_read_only" | "standard_conforming_strings" => {
                    if parse_bool(v).ok_or_else(|| invalid_value(name, v))? {
                        "on".into()
                    } else {
                        "off".into()
                    }
                }
                "client_encoding" => {
                    let u = v.to_ascii_uppercase().replace('-', "");
                    match u.as_str() {
                        "UTF8" | "UNICODE" => "UTF8".into(),
                        "LATIN1" | "SQL_ASCII" | "WIN1252" => u,
                        _ => return Err(invalid_value(name, v)),
                    }
                }
                _ => v.to_string(),
            },
        })
    }

    // ----- input ------------------------------------------------------------------------------

    /// Frames the bytes received so far into messages.
    pub(crate) fn ingest(&mut self, c: &mut Conn) {
        loop {
            match c.phase {
                Phase::Closed => {
                    c.inbuf.clear();
                    return;
                }
                Phase::Startup => {
                    if c.inbuf.len() < 4 {
                        return;
                    }
                    let len = u32::from_be_bytes([c.inbuf[0], c.inbuf[1], c.inbuf[2], c.inbuf[3]])
                        as usize;
                    if !(8..=10_000).contains(&len) {
                        self.refuse(
                            c,
                            SqlError::new("08P01", "invalid length of startup packet"),
                        );
                        return;
                    }
                    if c.inbuf.len() < len {
                        return;
                    }
                    let body: Vec<u8> = c.inbuf[4..len].to_vec();
                    c.inbuf.drain(..len);
                    match StartupPacket::parse(&body) {
                        Ok(StartupPacket::SslRequest) | Ok(StartupPacket::GssEncRequest) => {
                            c.out.push(b'N')
                        }
                        Ok(StartupPacket::Cancel { pid, secret }) => {
                            let secret = (secret.len() == 4).then(|| {
                                u32::from_be_bytes([secret[0], secret[1], secret[2], secret[3]])
                            });
                            self.cancel(c, pid, secret);
                            self.close_conn(c, CloseReason::CancelRequest);
                            return;
                        }
                        Ok(StartupPacket::Startup { params, .. }) => {
                            let params: Vec<(String, String)> = params
                                .iter()
                                .map(|(k, v)| {
                                    (
                                        String::from_utf8_lossy(k).into_owned(),
                                        String::from_utf8_lossy(v).into_owned(),
                                    )
                                })
                                .collect();
                            self.startup(c, &params);
                        }
                        Err(e) => {
                            self.refuse(
                                c,
                                SqlError::new(
                                    "08P01",
                                    format!("invalid startup packet layout: {e}"),
                                ),
                            );
                            return;
                        }
                    }
                }
                Phase::Ready => {
                    let (msg, n) = match frame(&c.inbuf, &Limits::default()) {
                        Ok(None) => return,
                        Ok(Some(f)) => (
                            FrontendMessage::parse(f.tag, f.body).map(|m| to_inbound(f.tag, m)),
                            f.wire_len,
                        ),
                        Err(e) => (Err(e), 0),
                    };
                    match msg {
                        Ok(m) => {
                            c.inbuf.drain(..n);
                            c.inbox.push_back(m);
                        }
                        Err(e) => {
                            send_fatal(c, "08P01", &format!("invalid frontend message: {e}"));
                            self.close_conn(c, CloseReason::Fatal);
                            return;
                        }
                    }
                }
            }
        }
    }

    /// A FATAL during startup.
    fn refuse(&mut self, c: &mut Conn, e: SqlError) {
        let e = e.fatal();
        emit_error(&mut c.out, &e);
        self.log(Event::ConnectionRefused {
            conn: Some(c.id),
            server: c.server,
            sqlstate: e.code.clone(),
            message: e.message.clone(),
        });
        self.close_conn(c, CloseReason::StartupFatal);
    }

    fn startup(&mut self, c: &mut Conn, params: &[(String, String)]) {
        if let Err(e) = self.check_startup(c, params) {
            self.refuse(c, e);
            return;
        }
        c.phase = Phase::Ready;
        wire::auth_ok(&mut c.out);
        let ps = self.reported_params(c);
        for (k, v) in &ps {
            wire::parameter_status(&mut c.out, k, v);
        }
        c.reported = ps.into_iter().collect();
        wire::backend_key_data(&mut c.out, c.pid, c.secret);
        let role = self.server(c.server).role;
        self.log(Event::Connected {
            conn: c.id,
            server: c.server,
            role,
            generation: self.generation,
            user: c.user.clone(),
            database: c.database.clone(),
            lsn_reporting: c.ext.lsn,
            xact_reporting: c.ext.xact,
        });
        self.send_rfq(c);
    }

    /// W-1: startup parameters, the `_polar_*` keys and their identity rules.
    fn check_startup(&mut self, c: &mut Conn, params: &[(String, String)]) -> Result<(), SqlError> {
        let dialect = self.cfg.dialect;
        let (mut user, mut db) = (None, None);
        let (mut want_lsn, mut want_xact) = (false, false);
        let (mut v15_host, mut v15_port, mut leg_ip, mut leg_port) = (false, false, false, false);
        for (k, v) in params {
            match k.as_str() {
                "user" => user = Some(v.clone()),
                "database" => db = Some(v.clone()),
                "options" => {
                    for (name, val) in parse_options(v)? {
                        self.startup_guc(c, &name, &val)?;
                    }
                }
                "replication" => {
                    if truthy(v) || v == "database" {
                        return Err(SqlError::new(
                            "08P01",
                            "replication connections are not simulated",
                        ));
                    }
                }
                k if k.starts_with("_polar_") => {
                    if dialect == Dialect::Stock {
                        return Err(unrecognized(k));
                    }
                    match k {
                        "_polar_proxy_send_lsn" | "_polar_send_lsn" => want_lsn |= truthy(v),
                        "_polar_proxy_send_xact" | "_polar_send_xact" => want_xact |= truthy(v),
                        "_polar_proxy_client_host" => v15_host = true,
                        "_polar_proxy_client_port" => v15_port = true,
                        "_polar_origin_client_ip" => leg_ip = true,
                        "_polar_origin_client_port" => leg_port = true,
                        _ => return Err(unrecognized(k)),
                    }
                }
                _ => self.startup_guc(c, k, v)?,
            }
        }
        let user = user.ok_or_else(|| {
            SqlError::new(
                "28000",
                "no PostgreSQL user name specified in startup packet",
            )
        })?;
        if v15_host != v15_port || leg_ip != leg_port {
            return Err(SqlError::new("XX000", "[Proxy] proxy info is incomplete."));
        }
        if want_lsn && !(v15_host || leg_ip) {
            return Err(SqlError::new(
                "08P01",
                "[Proxy] Proxy is disabled, unable to use lsn or ssl",
            ));
        }
        c.database = db.unwrap_or_else(|| user.clone());
        c.user = user;
        c.ext = RfqExtensions {
            lsn: want_lsn,
            xact: want_xact,
        };
        Ok(())
    }

    fn startup_guc(&mut self, c: &mut Conn, name: &str, v: &str) -> Result<(), SqlError> {
        let name = name.to_ascii_lowercase();
        if name == "transaction_isolation" || name == "transaction_read_only" {
            return Ok(());
        }
        let kind = self.guc_kind(&name)?;
        let v = self.guc_value(&kind, &name, v)?;
        if matches!(kind, GucKind::PolarXids) && !v.is_empty() {
            return Err(SqlError::new(
                "XX000",
                "Unable to start xact split without begin",
            ));
        }
        c.startup_gucs.insert(name, v);
        Ok(())
    }

    fn reported_params(&self, c: &Conn) -> Vec<(String, String)> {
        let role = self.server(c.server).role;
        let mut v: Vec<(String, String)> = KNOWN_GUCS
            .iter()
            .filter_map(|(n, _, d)| d.map(|d| (d.to_string(), c.guc_or_default(n))))
            .collect();
        let fixed = [
            (
                "in_hot_standby",
                if role == Role::Reader { "on" } else { "off" },
            ),
            ("integer_datetimes", "on"),
            ("is_superuser", "on"),
            ("server_encoding", "UTF8"),
            ("server_version", self.cfg.server_version.as_str()),
            ("session_authorization", c.user.as_str()),
        ];
        v.extend(
            fixed
                .iter()
                .map(|(k, val)| (k.to_string(), val.to_string())),
        );
        v.sort_by_key(|(k, _)| k.to_ascii_lowercase());
        v
    }

    fn cancel(&mut self, from: &Conn, pid: i32, secret: Option<u32>) {
        let target = self
            .conns
            .values()
            .find(|t| {
                t.server == from.server
                    && t.pid == pid
                    && Some(t.secret) == secret
                    && !t.is_closed()
            })
            .map(|t| t.id);
        let waiting = target.is_some_and(|t| self.is_waiting(t));
        let effective = waiting && self.cfg.dialect != Dialect::Polardb;
        self.log(Event::Cancel {
            server: from.server,
            target,
            effective,
        });
        if let (true, Some(t)) = (effective, target) {
            self.end_wait(t, WaitOutcome::Cancelled);
        }
    }

    // ----- the connection loop ----------------------------------------------------------------

    /// Works through the connection's queued messages until it must wait or has nothing left.
    pub(crate) fn run(&mut self, c: &mut Conn) {
        self.refresh_replays();
        loop {
            if c.phase != Phase::Ready {
                return;
            }
            if c.running.is_some() {
                if !self.step(c) {
                    return;
                }
                continue;
            }
            let Some(m) = c.inbox.pop_front() else {
                return;
            };
            self.handle(c, m);
        }
    }

    /// Ends a wait with `outcome` and lets the connection continue.
    pub(crate) fn end_wait(&mut self, id: crate::config::ConnId, outcome: WaitOutcome) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.take_wait(&mut c, outcome);
        self.run(&mut c);
        self.conns.insert(id, c);
    }

    fn take_wait(&mut self, c: &mut Conn, outcome: WaitOutcome) {
        let Some(r) = c.running.as_mut() else {
            return;
        };
        let Some(w) = r.wait.take() else {
            return;
        };
        let replay = self.server(c.server).replay;
        r.outcome = Some((
            outcome,
            WaitRecord {
                target: w.target,
                started: w.started,
                ended: self.now,
                outcome,
            },
        ));
        self.log(Event::WaitEnded {
            server: c.server,
            conn: c.id,
            target: w.target,
            replay,
            outcome,
        });
    }

    /// Closes the server side: a wait is abandoned, an open transaction rolls back.
    pub(crate) fn close_conn(&mut self, c: &mut Conn, reason: CloseReason) {
        if c.phase == Phase::Closed {
            return;
        }
        if c.running.as_ref().is_some_and(|r| r.wait.is_some()) {
            self.take_wait(c, WaitOutcome::Aborted);
        }
        c.running = None;
        if c.tx.is_some() {
            self.abort_tx(c);
        }
        c.phase = Phase::Closed;
        c.inbox.clear();
        c.inbuf.clear();
        self.log(Event::Closed {
            conn: c.id,
            server: c.server,
            reason,
        });
    }

    fn batch(&mut self, c: &mut Conn) {
        if !c.batch_open {
            c.batch_open = true;
            c.query_seq += 1;
        }
    }

    fn handle(&mut self, c: &mut Conn, m: Inbound) {
        // After an error in an extended-protocol batch, everything up to Sync is ignored (as
        // PostgreSQL does, a simple Query included).
        if c.skip_until_sync && !matches!(m, Inbound::Sync | Inbound::Terminate) {
            return;
        }
        if matches!(
            m,
            Inbound::Parse { .. }
                | Inbound::Bind { .. }
                | Inbound::Describe { .. }
                | Inbound::Execute { .. }
                | Inbound::Close { .. }
        ) {
            self.batch(c);
        }
        match m {
            Inbound::Query(sql) => {
                c.query_seq += 1;
                c.batch_open = false;
                match parse_query(&sql) {
                    Err(e) => {
                        let e = SqlError::new("42601", e.message);
                        emit_error(&mut c.out, &e);
                        self.record_parse_error(c, &sql, &e);
                        self.fail_tx(c);
                        self.finish_query(c);
                    }
                    Ok(stmts) if stmts.is_empty() => {
                        wire::empty_query(&mut c.out);
                        self.finish_query(c);
                    }
                    Ok(stmts) => {
                        c.running = Some(Running {
                            stmts,
                            idx: 0,
                            extended: false,
                            started: self.now,
                            wait: None,
                            outcome: None,
                        })
                    }
                }
            }
            Inbound::Parse { name, sql } => {
                let parsed = match parse_query(&sql) {
                    Err(e) => Err(SqlError::new("42601", e.message)),
                    Ok(v) if v.len() > 1 => Err(SqlError::new(
                        "42601",
                        "cannot insert multiple commands into a prepared statement",
                    )),
                    Ok(v) => Ok(v.into_iter().next()),
                };
                match parsed {
                    Err(e) => self.ext_error(c, e),
                    Ok(_) if !name.is_empty() && c.prepared.contains_key(&name) => self.ext_error(
                        c,
                        SqlError::new(
                            "42P05",
                            format!("prepared statement \"{name}\" already exists"),
                        ),
                    ),
                    Ok(p) => {
                        c.prepared.insert(name, p);
                        wire::parse_complete(&mut c.out);
                    }
                }
            }
            Inbound::Bind { portal, statement } => match c.prepared.get(&statement).cloned() {
                None => self.ext_error(c, no_prepared(&statement)),
                Some(p) => {
                    c.portals.insert(portal, p);
                    wire::bind_complete(&mut c.out);
                }
            },
            Inbound::Describe { portal, name } => {
                let found = if portal {
                    c.portals.get(&name).cloned()
                } else {
                    c.prepared.get(&name).cloned()
                };
                match found {
                    None => {
                        let e = if portal {
                            no_portal(&name)
                        } else {
                            no_prepared(&name)
                        };
                        self.ext_error(c, e);
                    }
                    Some(p) => {
                        if !portal {
                            wire::parameter_description(&mut c.out);
                        }
                        match p.as_ref().and_then(|p| columns_of(&p.stmt)) {
                            Some(cols) => wire::row_description(&mut c.out, &cols),
                            None => wire::no_data(&mut c.out),
                        }
                    }
                }
            }
            Inbound::Execute { portal } => match c.portals.get(&portal).cloned() {
                None => self.ext_error(c, no_portal(&portal)),
                Some(None) => wire::empty_query(&mut c.out),
                Some(Some(p)) => {
                    c.running = Some(Running {
                        stmts: vec![p],
                        idx: 0,
                        extended: true,
                        started: self.now,
                        wait: None,
                        outcome: None,
                    })
                }
            },
            Inbound::Close { portal, name } => {
                if portal {
                    c.portals.remove(&name);
                } else {
                    c.prepared.remove(&name);
                }
                wire::close_complete(&mut c.out);
            }
            Inbound::Sync => {
                self.batch(c);
                c.skip_until_sync = false;
                c.portals.remove("");
                self.finish_query(c);
                c.batch_open = false;
            }
            Inbound::Flush => {}
            Inbound::Terminate => self.close_conn(c, CloseReason::Terminate),
            Inbound::Unsupported(t) => {
                let e = SqlError::new(
                    "0A000",
                    format!(
                        "message type '{}' is not supported by the simulator",
                        char::from(t)
                    ),
                );
                if c.batch_open {
                    self.ext_error(c, e);
                } else {
                    emit_error(&mut c.out, &e);
                    self.send_rfq(c);
                }
            }
        }
    }

    /// An error in an extended-protocol batch: skip to Sync.
    fn ext_error(&mut self, c: &mut Conn, e: SqlError) {
        emit_error(&mut c.out, &e);
        self.fail_tx(c);
        c.skip_until_sync = true;
    }

    /// After an error: an explicit transaction is failed, an implicit one rolls back.
    fn fail_tx(&mut self, c: &mut Conn) {
        match c.tx.as_mut() {
            Some(t) if t.explicit => {
                t.failed = true;
                t.unsplittable = true;
            }
            Some(_) => self.abort_tx(c),
            None => {}
        }
    }

    /// The end of a simple Query (or a Sync): the implicit transaction commits, per-query
    /// server state is cleared, ReadyForQuery is sent.
    fn finish_query(&mut self, c: &mut Conn) {
        if c.tx.as_ref().is_some_and(|t| !t.explicit) {
            self.commit_tx(c);
        }
        match self.cfg.dialect {
            // PolarDB clears the import when the query ends (NOTES.md).
            Dialect::Polardb => c.gucs.remove("polar_xact_split_xids"),
            // The awide wait target is one-shot.
            Dialect::Awide => c.gucs.remove("polar_xact_split_wait_lsn"),
            Dialect::Stock => {}
        }
        self.send_rfq(c);
    }

    /// ParameterStatus for changed reported settings, then ReadyForQuery (W-2).
    fn send_rfq(&mut self, c: &mut Conn) {
        let ps = self.reported_params(c);
        for (k, v) in &ps {
            if c.reported.get(k) != Some(v) {
                wire::parameter_status(&mut c.out, k, v);
            }
        }
        c.reported = ps.into_iter().collect();
        let status = match &c.tx {
            None => TxStatus::Idle,
            Some(t) if t.failed => TxStatus::Failed,
            Some(_) => TxStatus::InTransaction,
        };
        let role = self.server(c.server).role;
        let mut body = RfqBody {
            status,
            lsn: None,
            xact: None,
        };
        if self.cfg.dialect != Dialect::Stock {
            let missing = c.ext.lsn
                && self
                    .rng_missing
                    .chance_per_million(self.cfg.missing_lsn_per_million);
            if !missing {
                if c.ext.lsn {
                    body.lsn = Some(match role {
                        Role::Primary => self.store.insert,
                        Role::Reader => self.server(c.server).replay,
                    });
                }
                if c.ext.xact && role == Role::Primary {
                    body.xact = self.marker(c);
                }
            }
        }
        wire::ready_for_query(&mut c.out, &body);
    }

    /// W-2 / W-7: the marker and XID list of the writer's transaction.
    fn marker(&self, c: &Conn) -> Option<(Marker, String)> {
        let t = c.tx.as_ref()?;
        if !t.explicit || t.failed || t.unsplittable || t.isolation != Isolation::ReadCommitted {
            return None;
        }
        let list = t.xid_list();
        match self.cfg.dialect {
            Dialect::Awide => {
                let pending = t.last_wal.is_some_and(|l| l > self.store.flushed);
                Some(if !list.is_empty() && pending {
                    (Marker::WalPending, list)
                } else {
                    (Marker::Splittable, list)
                })
            }
            Dialect::Polardb => (!list.is_empty()).then_some((Marker::Splittable, list)),
            Dialect::Stock => None,
        }
    }

    /// Runs the current Query's statements; false when it must wait.
    fn step(&mut self, c: &mut Conn) -> bool {
        let Some(mut r) = c.running.take() else {
            return true;
        };
        if r.wait.is_some() {
            c.running = Some(r);
            return false;
        }
        while r.idx < r.stmts.len() {
            let p = r.stmts[r.idx].clone();
            if c.tx.is_none() {
                let multi = !r.extended && r.stmts.len() > 1;
                c.tx = Some(Tx::new(
                    c.default_isolation(),
                    c.default_read_only(),
                    multi,
                    c.gucs.clone(),
                ));
            }
            if r.outcome.is_none() {
                r.started = self.now;
            }
            let before = self.tx_record(c);
            let mut info = StmtInfo::default();
            let failed = c.tx.as_ref().is_some_and(|t| t.failed);
            let res = if failed
                && !matches!(p.stmt, Stmt::Rollback | Stmt::Commit | Stmt::RollbackTo(_))
            {
                Err(Flow::Fail(SqlError::new(
                    "25P02",
                    "current transaction is aborted, commands ignored until end of transaction block",
                )))
            } else if let Some(e) = self.take_injection(c, &p) {
                Err(Flow::Fail(e))
            } else {
                self.exec(c, &mut r, &p, &mut info)
            };
            match res {
                Err(Flow::Wait(w)) => {
                    let replay = self.server(c.server).replay;
                    self.log(Event::WaitStarted {
                        server: c.server,
                        conn: c.id,
                        target: w.target,
                        replay,
                        deadline: w.deadline(),
                    });
                    r.wait = Some(w);
                    c.running = Some(r);
                    return false;
                }
                Ok(tag) => {
                    if let Some(t) = c.tx.as_mut() {
                        if t.cid_used {
                            t.cid += 1;
                            t.cid_used = false;
                        }
                    }
                    wire::command_complete(&mut c.out, &tag);
                    let txr = self
                        .tx_record(c)
                        .unwrap_or(before.clone().expect("tx existed"));
                    self.record(c, &r, &p, info, txr, StmtResult::Ok { tag }, false);
                    r.idx += 1;
                    r.outcome = None;
                }
                Err(Flow::Fail(e)) => {
                    emit_error(&mut c.out, &e);
                    let txr = self
                        .tx_record(c)
                        .unwrap_or(before.clone().expect("tx existed"));
                    let result = StmtResult::Error {
                        sqlstate: e.code.clone(),
                        message: e.message.clone(),
                        injected: e.injected,
                    };
                    self.record(c, &r, &p, info, txr, result, e.refused_write);
                    if e.refused_write {
                        self.log(Event::RefusedWrite {
                            server: c.server,
                            conn: c.id,
                            text: p.text.clone(),
                            sqlstate: e.code.clone(),
                        });
                    }
                    if e.fatal {
                        self.close_conn(c, CloseReason::Fatal);
                        return true;
                    }
                    self.fail_tx(c);
                    if r.extended {
                        c.skip_until_sync = true;
                    }
                    r.idx = r.stmts.len();
                    r.outcome = None;
                }
            }
        }
        if !r.extended {
            self.finish_query(c);
        }
        true
    }

    fn take_injection(&mut self, c: &mut Conn, p: &Parsed) -> Option<SqlError> {
        let inj = if let Some(i) = c.injections.iter().position(|j| j.matcher.matches(p)) {
            c.injections.remove(i)
        } else {
            let s = self.server_mut(c.server);
            let i = s.injections.iter().position(|j| j.matcher.matches(p))?;
            s.injections.remove(i)
        }?;
        let mut e = SqlError::new(&inj.sqlstate, inj.message);
        e.fatal = inj.fatal;
        e.injected = true;
        Some(e)
    }

    fn tx_record(&self, c: &Conn) -> Option<TxRecord> {
        c.tx.as_ref().map(|t| TxRecord {
            explicit: t.explicit,
            isolation: t.isolation,
            xid: t.top.xid,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        c: &Conn,
        r: &Running,
        p: &Parsed,
        info: StmtInfo,
        tx: TxRecord,
        result: StmtResult,
        refused_write: bool,
    ) {
        let role = self.server(c.server).role;
        let rec = StatementRecord {
            server: c.server,
            conn: c.id,
            role,
            generation: self.generation,
            query_seq: c.query_seq,
            index: r.idx,
            of: r.stmts.len(),
            text: p.text.clone(),
            polar_set: p.stmt.is_polar_set(),
            extended: r.extended,
            started: r.started,
            tx,
            snapshot: info.snapshot,
            reads: info.reads,
            rows: info.rows,
            result,
            warnings: info.warnings,
            wait: info.wait,
            refused_write,
        };
        self.log(Event::Statement(Box::new(rec)));
    }

    fn record_parse_error(&mut self, c: &Conn, sql: &str, e: &SqlError) {
        let role = self.server(c.server).role;
        let tx = self.tx_record(c).unwrap_or(TxRecord {
            explicit: false,
            isolation: c.default_isolation(),
            xid: None,
        });
        let rec = StatementRecord {
            server: c.server,
            conn: c.id,
            role,
            generation: self.generation,
            query_seq: c.query_seq,
            index: 0,
            of: 0,
            text: sql.to_string(),
            polar_set: false,
            extended: false,
            started: self.now,
            tx,
            snapshot: None,
            reads: Vec::new(),
            rows: 0,
            result: StmtResult::Error {
                sqlstate: e.code.clone(),
                message: e.message.clone(),
                injected: false,
            },
            warnings: Vec::new(),
            wait: None,
            refused_write: false,
        };
        self.log(Event::Statement(Box::new(rec)));
    }

    // ----- transactions -----------------------------------------------------------------------

    fn commit_tx(&mut self, c: &mut Conn) {
        let Some(t) = c.tx.take() else {
            return;
        };
        c.gucs.local.clear();
        let xids = t.all_xids();
        if xids.is_empty() {
            return;
        }
        let lsn = self.store.append();
        if self.store.flush(self.now) {
            let f = self.store.flushed;
            self.log(Event::Flush { lsn: f });
        }
        let mut fin: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for w in &t.writes {
            if self.store.status(w.xid) != XidStatus::Aborted {
                fin.insert(w.k, w.v);
            }
        }
        self.store.finish(&xids, XidStatus::Committed(lsn));
        self.log(Event::Commit(CommitRecord {
            server: c.server,
            conn: c.id,
            generation: self.generation,
            xid: xids[0],
            subxids: xids[1..].to_vec(),
            commit_lsn: lsn,
            writes: fin.into_iter().collect(),
        }));
    }

    fn abort_tx(&mut self, c: &mut Conn) {
        let Some(t) = c.tx.take() else {
            return;
        };
        c.gucs = t.gucs_at_start.clone();
        let xids = t.all_xids();
        if xids.is_empty() {
            return;
        }
        if self.server(c.server).role == Role::Primary && self.server(c.server).up {
            self.store.append(); // the abort record (not flushed)
        }
        self.store.finish(&xids, XidStatus::Aborted);
        self.log(Event::Abort {
            server: c.server,
            conn: c.id,
            xid: xids[0],
            xids,
        });
    }

    /// The XID of the current (sub)transaction level, assigning it (and its parents') on the
    /// first write.
    fn ensure_xid(&mut self, c: &mut Conn) -> Xid {
        let store = &mut self.store;
        let t = tx(c);
        let top = *t.top.xid.get_or_insert_with(|| store.assign_xid(None));
        let mut cur = top;
        for l in t.subs.iter_mut() {
            cur = *l.xid.get_or_insert_with(|| store.assign_xid(Some(top)));
        }
        cur
    }

    fn ensure_top_xid(&mut self, c: &mut Conn) -> Xid {
        let store = &mut self.store;
        *tx(c).top.xid.get_or_insert_with(|| store.assign_xid(None))
    }

    fn apply_modes(&self, c: &mut Conn, modes: TxModes) -> Result<(), SqlError> {
        let role = self.server(c.server).role;
        let t = tx(c);
        if let Some(iso) = modes.isolation {
            if t.snapshot_taken && iso != t.isolation {
                return Err(SqlError::new(
                    "25001",
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                ));
            }
            t.isolation = iso;
        }
        match modes.read_only {
            Some(false) if role == Role::Reader => {
                return Err(SqlError::new(
                    "0A000",
                    "cannot set transaction read-write mode during recovery",
                )
                .refused())
            }
            Some(false) if t.read_only && t.snapshot_taken => {
                return Err(SqlError::new(
                    "25001",
                    "transaction read-write mode must be set before any query",
                ))
            }
            Some(ro) => t.read_only = ro,
            None => {}
        }
        Ok(())
    }

    // ----- statements -------------------------------------------------------------------------

    fn warn(
        c: &mut Conn,
        info: &mut StmtInfo,
        code: &str,
        msg: &str,
        detail: Option<&str>,
        routine: Option<&str>,
    ) {
        let mut f: Vec<(u8, &str)> = vec![
            (b'S', "WARNING"),
            (b'V', "WARNING"),
            (b'C', code),
            (b'M', msg),
        ];
        if let Some(d) = detail {
            f.push((b'D', d));
        }
        if let Some(r) = routine {
            f.push((b'R', r));
        }
        wire::fields_message(&mut c.out, true, &f);
        info.warnings
            .push((code.to_string(), detail.map(str::to_string)));
    }

    fn emit_rows(
        c: &mut Conn,
        describe: bool,
        stmt: &Stmt,
        rows: Vec<Vec<Option<String>>>,
        info: &mut StmtInfo,
    ) -> String {
        if describe {
            if let Some(cols) = columns_of(stmt) {
                wire::row_description(&mut c.out, &cols);
            }
        }
        let n = rows.len();
        for r in rows {
            wire::data_row(&mut c.out, &r);
        }
        info.rows = n;
        format!("SELECT {n}")
    }

    fn exec(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        p: &Parsed,
        info: &mut StmtInfo,
    ) -> ExecResult {
        let role = self.server(c.server).role;
        let describe = !r.extended;
        let is_reader = role == Role::Reader;
        match &p.stmt {
            Stmt::Begin { start, modes } => {
                if tx(c).explicit {
                    Self::warn(
                        c,
                        info,
                        "25001",
                        "there is already a transaction in progress",
                        None,
                        None,
                    );
                } else {
                    self.apply_modes(c, *modes)?;
                    tx(c).explicit = true;
                }
                Ok(if *start { "START TRANSACTION" } else { "BEGIN" }.into())
            }
            Stmt::Commit => {
                let t = tx(c);
                if !t.explicit {
                    Self::warn(
                        c,
                        info,
                        "25P01",
                        "there is no transaction in progress",
                        None,
                        None,
                    );
                    self.commit_tx(c);
                    return Ok("COMMIT".into());
                }
                if t.failed {
                    self.abort_tx(c);
                    return Ok("ROLLBACK".into());
                }
                self.commit_tx(c);
                Ok("COMMIT".into())
            }
            Stmt::Rollback => {
                if !tx(c).explicit {
                    Self::warn(
                        c,
                        info,
                        "25P01",
                        "there is no transaction in progress",
                        None,
                        None,
                    );
                }
                self.abort_tx(c);
                Ok("ROLLBACK".into())
            }
            Stmt::Savepoint(name) => {
                if !tx(c).explicit {
                    return Err(no_tx_block("SAVEPOINT").into());
                }
                let gucs = c.gucs.clone();
                tx(c).subs.push(Level {
                    name: name.clone(),
                    xid: None,
                    children: Vec::new(),
                    gucs,
                });
                Ok("SAVEPOINT".into())
            }
            Stmt::Release(name) => {
                let t = tx(c);
                if !t.explicit {
                    return Err(no_tx_block("RELEASE SAVEPOINT").into());
                }
                let idx = t
                    .subs
                    .iter()
                    .rposition(|l| &l.name == name)
                    .ok_or_else(|| no_savepoint(name))?;
                let removed: Vec<Level> = t.subs.drain(idx..).collect();
                let parent = if idx == 0 {
                    &mut t.top
                } else {
                    &mut t.subs[idx - 1]
                };
                for l in removed {
                    parent.children.extend(l.xid);
                    parent.children.extend(l.children);
                }
                Ok("RELEASE".into())
            }
            Stmt::RollbackTo(name) => {
                let t = tx(c);
                if !t.explicit {
                    return Err(no_tx_block("ROLLBACK TO SAVEPOINT").into());
                }
                let idx = t
                    .subs
                    .iter()
                    .rposition(|l| &l.name == name)
                    .ok_or_else(|| no_savepoint(name))?;
                let removed: Vec<Level> = t.subs.drain(idx..).collect();
                let gucs = removed[0].gucs.clone();
                let aborted: Vec<Xid> = removed
                    .iter()
                    .flat_map(|l| l.xid.into_iter().chain(l.children.iter().copied()))
                    .collect();
                t.subs.push(Level {
                    name: name.clone(),
                    xid: None,
                    children: Vec::new(),
                    gucs: gucs.clone(),
                });
                t.failed = false;
                if !aborted.is_empty() {
                    let lsn = self.store.append();
                    tx(c).last_wal = Some(lsn);
                    self.store.finish(&aborted, XidStatus::Aborted);
                }
                c.gucs = gucs;
                Ok("ROLLBACK".into())
            }
            Stmt::Set { local, name, value } => {
                if *local && !tx(c).explicit {
                    Self::warn(
                        c,
                        info,
                        "25P01",
                        "SET LOCAL can only be used in transaction blocks",
                        None,
                        None,
                    );
                }
                self.set(c, name, value.clone(), *local)?;
                Ok("SET".into())
            }
            Stmt::SetTransaction(modes) => {
                if !tx(c).explicit {
                    Self::warn(
                        c,
                        info,
                        "25P01",
                        "SET TRANSACTION can only be used in transaction blocks",
                        None,
                        None,
                    );
                    return Ok("SET".into());
                }
                self.apply_modes(c, *modes)?;
                Ok("SET".into())
            }
            Stmt::SetSessionCharacteristics(modes) => {
                if let Some(iso) = modes.isolation {
                    self.set(
                        c,
                        "default_transaction_isolation",
                        SetValue::Text(iso.guc_text().into()),
                        false,
                    )?;
                }
                if let Some(ro) = modes.read_only {
                    if !ro && is_reader {
                        return Err(SqlError::new(
                            "0A000",
                            "cannot set transaction read-write mode during recovery",
                        )
                        .into());
                    }
                    let v = if ro { "on" } else { "off" };
                    self.set(
                        c,
                        "default_transaction_read_only",
                        SetValue::Text(v.into()),
                        false,
                    )?;
                }
                Ok("SET".into())
            }
            Stmt::Reset(None) => {
                c.gucs.session.clear();
                c.gucs.local.clear();
                Ok("RESET".into())
            }
            Stmt::Reset(Some(name)) => {
                let name = name.to_ascii_lowercase();
                if matches!(self.guc_kind(&name)?, GucKind::Fixed) {
                    return Err(SqlError::new(
                        "55P02",
                        format!("parameter \"{name}\" cannot be changed"),
                    )
                    .into());
                }
                c.gucs.remove(&name);
                Ok("RESET".into())
            }
            Stmt::Show(name) => {
                let value = self.show(c, name)?;
                Self::emit_rows(c, describe, &p.stmt, vec![vec![Some(value)]], info);
                Ok("SHOW".into())
            }
            Stmt::DiscardAll => {
                let t = tx(c);
                if t.explicit || t.multi {
                    return Err(SqlError::new(
                        "25001",
                        "DISCARD ALL cannot run inside a transaction block",
                    )
                    .into());
                }
                c.gucs = Gucs::default();
                c.advisory.clear();
                c.prepared.clear();
                c.portals.clear();
                Ok("DISCARD ALL".into())
            }
            Stmt::Lock(mode) => {
                let t = tx(c);
                if !(t.explicit || t.multi) {
                    return Err(no_tx_block("LOCK TABLE").into());
                }
                let strong = *mode > LockMode::RowExclusive;
                if is_reader {
                    if strong {
                        return Err(SqlError::new(
                            "25006",
                            "cannot execute LOCK TABLE during recovery",
                        )
                        .refused()
                        .into());
                    }
                    return Ok("LOCK TABLE".into());
                }
                if strong && t.read_only {
                    return Err(read_only_tx("LOCK TABLE").into());
                }
                t.unsplittable = true;
                if *mode == LockMode::AccessExclusive {
                    // Logged for hot standbys: needs an XID and a WAL record.
                    self.ensure_xid(c);
                    let lsn = self.store.append();
                    tx(c).last_wal = Some(lsn);
                }
                Ok("LOCK TABLE".into())
            }
            Stmt::CreateTemp => {
                if is_reader {
                    return Err(read_only_tx("CREATE TABLE").refused().into());
                }
                if tx(c).read_only {
                    return Err(read_only_tx("CREATE TABLE").into());
                }
                self.ensure_xid(c);
                let lsn = self.store.append();
                let t = tx(c);
                t.last_wal = Some(lsn);
                t.cid_used = true;
                Ok("CREATE TABLE".into())
            }
            Stmt::Insert { k, v } => {
                self.check_writable(c, "INSERT")?;
                let k = int4(*k)?;
                let v = int4(*v)?;
                self.snapshot(c, info);
                let own = tx(c).own_set();
                self.store
                    .check_insert(k, &own)
                    .map_err(|e| conflict_error(e, k))?;
                let xid = self.ensure_xid(c);
                let lsn = self.store.append();
                let cid = tx(c).cid;
                self.store.insert_row(k, v, xid, cid, lsn);
                self.note_write(c, xid, k, Some(v), lsn);
                Ok("INSERT 0 1".into())
            }
            Stmt::Update { k, v } => {
                self.check_writable(c, "UPDATE")?;
                let (k, v) = (int4(*k)?, int4(*v)?);
                let n = self.modify(c, k, Some(v), info)?;
                Ok(format!("UPDATE {n}"))
            }
            Stmt::Delete { k } => {
                self.check_writable(c, "DELETE")?;
                let k = int4(*k)?;
                let n = self.modify(c, k, None, info)?;
                Ok(format!("DELETE {n}"))
            }
            Stmt::SelectConst(n) => {
                self.select_prelude(c, r, info)?;
                Ok(Self::emit_rows(
                    c,
                    describe,
                    &p.stmt,
                    vec![vec![Some(n.to_string())]],
                    info,
                ))
            }
            Stmt::SelectAll => {
                let snap = self.select_prelude(c, r, info)?;
                let rows = self.store.scan(&snap);
                info.reads = rows.iter().map(|(k, v)| (*k, Some(*v))).collect();
                let rows = rows
                    .into_iter()
                    .map(|(k, v)| vec![Some(k.to_string()), Some(v.to_string())])
                    .collect();
                Ok(Self::emit_rows(c, describe, &p.stmt, rows, info))
            }
            Stmt::SelectV { k, lock } => {
                let k = int4(*k)?;
                let snap = self.select_prelude(c, r, info)?;
                let value = match lock {
                    None => self.store.read(k, &snap),
                    Some(l) => self.lock_row(c, k, *l, &snap)?,
                };
                info.reads = vec![(k, value)];
                let rows = value
                    .map(|v| vec![Some(v.to_string())])
                    .into_iter()
                    .collect();
                Ok(Self::emit_rows(c, describe, &p.stmt, rows, info))
            }
            Stmt::SelectFunc(f) => {
                self.select_prelude(c, r, info)?;
                let value = self.func(c, f)?;
                Ok(Self::emit_rows(
                    c,
                    describe,
                    &p.stmt,
                    vec![vec![value]],
                    info,
                ))
            }
        }
    }

    fn check_writable(&self, c: &mut Conn, verb: &str) -> Result<(), SqlError> {
        if self.server(c.server).role == Role::Reader {
            return Err(read_only_tx(verb).refused());
        }
        if tx(c).read_only {
            return Err(read_only_tx(verb));
        }
        Ok(())
    }

    fn note_write(&mut self, c: &mut Conn, xid: Xid, k: i64, v: Option<i64>, lsn: Lsn) {
        let t = tx(c);
        t.writes.push(TxWrite { xid, k, v });
        t.last_wal = Some(lsn);
        t.cid_used = true;
        let (cid, top) = (t.cid, t.top.xid.unwrap_or(xid));
        self.log(Event::Write(WriteRecord {
            server: c.server,
            conn: c.id,
            xid,
            top_xid: top,
            cid,
            k,
            v,
            lsn,
        }));
    }

    fn modify(
        &mut self,
        c: &mut Conn,
        k: i64,
        v: Option<i64>,
        info: &mut StmtInfo,
    ) -> Result<u32, SqlError> {
        let snap = self.snapshot(c, info);
        let own = tx(c).own_set();
        let Some(idx) = self
            .store
            .prepare_modify(k, &snap, &own)
            .map_err(|e| conflict_error(e, k))?
        else {
            return Ok(0);
        };
        let xid = self.ensure_xid(c);
        let lsn = self.store.append();
        let cid = tx(c).cid;
        self.store.apply_modify(k, idx, v, xid, cid, lsn);
        self.note_write(c, xid, k, v, lsn);
        Ok(1)
    }

    fn lock_row(
        &mut self,
        c: &mut Conn,
        k: i64,
        l: RowLock,
        snap: &Snapshot,
    ) -> Result<Option<i64>, SqlError> {
        let verb = format!("SELECT {}", l.sql());
        if self.server(c.server).role == Role::Reader {
            return Err(read_only_tx(&verb).refused());
        }
        if tx(c).read_only {
            return Err(read_only_tx(&verb));
        }
        let exclusive = matches!(l, RowLock::Update | RowLock::NoKeyUpdate);
        let own = tx(c).own_set();
        let v = self
            .store
            .check_lock(k, snap, &own, exclusive)
            .map_err(|e| conflict_error(e, k))?;
        if v.is_some() {
            let xid = self.ensure_xid(c);
            let lsn = self.store.append();
            self.store.add_row_lock(k, xid, exclusive);
            let t = tx(c);
            t.last_wal = Some(lsn);
            t.cid_used = true;
        }
        Ok(v)
    }

    fn func(&mut self, c: &mut Conn, f: &Func) -> Result<Option<String>, SqlError> {
        let role = self.server(c.server).role;
        let is_reader = role == Role::Reader;
        Ok(match f {
            Func::Nextval(name) => {
                if name != "s" {
                    return Err(SqlError::new(
                        "42P01",
                        format!("relation \"{name}\" does not exist"),
                    ));
                }
                if is_reader {
                    return Err(read_only_tx("nextval()").refused());
                }
                if tx(c).read_only {
                    return Err(read_only_tx("nextval()"));
                }
                self.ensure_top_xid(c);
                let lsn = self.store.append();
                tx(c).last_wal = Some(lsn);
                self.store.seq_s += 1;
                Some(self.store.seq_s.to_string())
            }
            Func::SetConfig {
                name,
                value,
                is_local,
            } => {
                self.set(c, name, SetValue::Text(value.clone()), *is_local)?;
                Some(value.clone())
            }
            Func::AdvisoryLock(n) => {
                c.advisory.insert(*n);
                Some(String::new())
            }
            Func::AdvisoryUnlockAll => {
                c.advisory.clear();
                Some(String::new())
            }
            Func::CurrentWalInsertLsn | Func::CurrentWalLsn => {
                if is_reader {
                    return Err(SqlError::new("55000", "recovery is in progress")
                        .hint("WAL control functions cannot be executed during recovery.")
                        .refused());
                }
                let l = if matches!(f, Func::CurrentWalInsertLsn) {
                    self.store.insert
                } else {
                    self.store.flushed
                };
                Some(l.to_string())
            }
            Func::LastWalReplayLsn => is_reader.then(|| self.server(c.server).replay.to_string()),
            Func::IsInRecovery => Some(if is_reader { "t" } else { "f" }.to_string()),
            Func::TxidCurrent => {
                if is_reader {
                    return Err(SqlError::new(
                        "25006",
                        "cannot assign TransactionIds during recovery",
                    )
                    .refused());
                }
                Some(self.ensure_top_xid(c).to_string())
            }
        })
    }

    /// W-4: on a reader, the wait for `polar_xact_split_wait_lsn` happens when a SELECT takes
    /// its snapshot; then the snapshot.
    fn select_prelude(
        &mut self,
        c: &mut Conn,
        r: &mut Running,
        info: &mut StmtInfo,
    ) -> Result<Snapshot, Flow> {
        let dialect = self.cfg.dialect;
        let role = self.server(c.server).role;
        if role == Role::Reader
            && tx(c).isolation == Isolation::Serializable
            && !tx(c).snapshot_taken
        {
            return Err(
                SqlError::new("0A000", "cannot use serializable mode in a hot standby")
                    .hint("You can use REPEATABLE READ instead.")
                    .into(),
            );
        }
        if dialect != Dialect::Stock {
            let outcome = match r.outcome.take() {
                Some((o, rec)) => {
                    info.wait = Some(rec);
                    Some(o)
                }
                None => {
                    let raw = c.guc("polar_xact_split_wait_lsn").map(str::to_string);
                    if dialect == Dialect::Awide {
                        c.gucs.remove("polar_xact_split_wait_lsn");
                    }
                    let target = raw.as_deref().map(|v| match dialect {
                        Dialect::Awide => v.trim().parse::<u64>().unwrap_or(0),
                        _ => lenient_lsn(v),
                    });
                    let target = Lsn(target.unwrap_or(0));
                    if role == Role::Reader && !target.is_zero() {
                        let replay = self.server(c.server).replay;
                        if replay < target {
                            let wait_deadline = if dialect == Dialect::Awide {
                                let t = c
                                    .guc("polar_proxy_wait_timeout_ms")
                                    .and_then(|v| v.parse::<u64>().ok())
                                    .unwrap_or(self.cfg.default_wait_timeout_ms);
                                (t > 0).then(|| self.now + t)
                            } else {
                                None
                            };
                            // PolarDB's wait cannot be interrupted (W-7).
                            let stmt_deadline = if dialect == Dialect::Polardb {
                                None
                            } else {
                                c.guc("statement_timeout")
                                    .and_then(parse_ms)
                                    .filter(|t| *t > 0)
                                    .map(|t| self.now + t)
                            };
                            return Err(Flow::Wait(ActiveWait {
                                target,
                                started: self.now,
                                wait_deadline,
                                stmt_deadline,
                            }));
                        }
                        info.wait = Some(WaitRecord {
                            target,
                            started: self.now,
                            ended: self.now,
                            outcome: WaitOutcome::Reached,
                        });
                    }
                    None
                }
            };
            match outcome {
                Some(WaitOutcome::TimedOut) => {
                    let target = info.wait.as_ref().map(|w| w.target).unwrap_or_default();
                    let replay = self.server(c.server).replay;
                    let msg = format!(
                        "timed out waiting for replay to reach {target} (replayed up to {replay})"
                    );
                    let mode = c
                        .guc("polar_consistency_mode")
                        .unwrap_or("strict")
                        .to_string();
                    if mode == "best_effort" {
                        Self::warn(
                            c,
                            info,
                            "01000",
                            &msg,
                            Some("polar_proxy_lsn_wait_timeout"),
                            Some("polar_proxy_wait_for_lsn"),
                        );
                    } else {
                        return Err(SqlError::new("72000", msg)
                            .detail("polar_proxy_lsn_wait_timeout")
                            .routine("polar_proxy_wait_for_lsn")
                            .into());
                    }
                }
                Some(WaitOutcome::StatementTimeout) => {
                    return Err(SqlError::new(
                        "57014",
                        "canceling statement due to statement timeout",
                    )
                    .into())
                }
                Some(WaitOutcome::Cancelled) => {
                    return Err(
                        SqlError::new("57014", "canceling statement due to user request").into(),
                    )
                }
                _ => {}
            }
        }
        Ok(self.snapshot(c, info))
    }

    /// The statement's snapshot: the primary sees everything committed so far plus its own
    /// writes; a reader sees its replay position plus an XID import.
    fn snapshot(&mut self, c: &mut Conn, info: &mut StmtInfo) -> Snapshot {
        let role = self.server(c.server).role;
        let base = match role {
            Role::Primary => self.store.insert,
            Role::Reader => self.server(c.server).replay,
        };
        let import = if role == Role::Reader && self.cfg.dialect != Dialect::Stock {
            c.gucs
                .get_val("polar_xact_split_xids")
                .filter(|g| !g.value.is_empty())
                .map(|g| {
                    let fields: Vec<u64> = g
                        .value
                        .split(',')
                        .map(|f| f.parse::<u64>().unwrap_or(0))
                        .collect();
                    ImportRecord {
                        cid: fields[0] as u32,
                        xids: fields[1..].to_vec(),
                        from_earlier_query: g.query_seq != c.query_seq,
                    }
                })
        } else {
            None
        };
        let t = tx(c);
        let (lsn, reused) = if t.isolation == Isolation::ReadCommitted {
            (base, false)
        } else {
            match t.rr_lsn {
                Some(l) => (l, true),
                None => {
                    t.rr_lsn = Some(base);
                    (base, false)
                }
            }
        };
        t.snapshot_taken = true;
        let own = match role {
            Role::Primary => Some(OwnView {
                xids: t.own_set(),
                cid: t.cid,
                upto: None,
            }),
            Role::Reader => import.as_ref().map(|i| OwnView {
                xids: i.xids.iter().copied().collect(),
                cid: i.cid,
                upto: Some(base),
            }),
        };
        info.snapshot = Some(SnapshotRecord {
            lsn,
            import,
            reused,
        });
        Snapshot { lsn, own }
    }

    /// SET / set_config.
    fn set(
        &mut self,
        c: &mut Conn,
        name: &str,
        value: SetValue,
        local: bool,
    ) -> Result<(), SqlError> {
        let name = name.to_ascii_lowercase();
        let role = self.server(c.server).role;
        match name.as_str() {
            "transaction_isolation" | "transaction_read_only" => {
                let SetValue::Text(v) = value else {
                    return Ok(());
                };
                let modes = if name == "transaction_isolation" {
                    TxModes {
                        isolation: Some(
                            Isolation::parse(&v).ok_or_else(|| invalid_value(&name, &v))?,
                        ),
                        read_only: None,
                    }
                } else {
                    TxModes {
                        isolation: None,
                        read_only: Some(parse_bool(&v).ok_or_else(|| invalid_value(&name, &v))?),
                    }
                };
                return self.apply_modes(c, modes);
            }
            _ => {}
        }
        let kind = self.guc_kind(&name)?;
        let v = match value {
            SetValue::Default => {
                if matches!(kind, GucKind::Fixed) {
                    self.guc_value(&kind, &name, "")?;
                }
                if local {
                    let reset = c
                        .startup_gucs
                        .get(&name)
                        .cloned()
                        .or_else(|| known_default(&name).map(str::to_string))
                        .unwrap_or_default();
                    c.gucs.local.insert(
                        name,
                        crate::session::GucVal {
                            value: reset,
                            query_seq: c.query_seq,
                        },
                    );
                } else {
                    c.gucs.remove(&name);
                }
                return Ok(());
            }
            SetValue::Text(v) => self.guc_value(&kind, &name, &v)?,
        };
        match kind {
            GucKind::PolarXids if !v.is_empty() => {
                if role == Role::Primary {
                    return Err(SqlError::new(
                        "XX000",
                        "cannot import transaction split xids on a primary",
                    ));
                }
                let t = tx(c);
                if self.cfg.dialect == Dialect::Polardb && !(t.explicit || t.multi) {
                    return Err(SqlError::new(
                        "XX000",
                        "Unable to start xact split without begin",
                    ));
                }
            }
            GucKind::PolarWaitLsn
                if self.cfg.dialect == Dialect::Polardb && role == Role::Reader =>
            {
                let replay = self.server(c.server).replay;
                self.log(Event::PolardbWaitSent {
                    server: c.server,
                    conn: c.id,
                    target: Lsn(lenient_lsn(&v)),
                    replay,
                });
            }
            _ => {}
        }
        let gv = crate::session::GucVal {
            value: v,
            query_seq: c.query_seq,
        };
        if local {
            c.gucs.local.insert(name, gv);
        } else {
            c.gucs.local.remove(&name);
            c.gucs.session.insert(name, gv);
        }
        Ok(())
    }

    fn show(&self, c: &mut Conn, name: &str) -> Result<String, SqlError> {
        let name = name.to_ascii_lowercase();
        let role = self.server(c.server).role;
        Ok(match name.as_str() {
            "transaction_isolation" => tx(c).isolation.guc_text().to_string(),
            "transaction_read_only" => if role == Role::Reader || tx(c).read_only {
                "on"
            } else {
                "off"
            }
            .to_string(),
            "in_hot_standby" => if role == Role::Reader { "on" } else { "off" }.to_string(),
            "server_version" => self.cfg.server_version.clone(),
            "server_encoding" => "UTF8".into(),
            "integer_datetimes" | "is_superuser" => "on".into(),
            "session_authorization" => c.user.clone(),
            _ => {
                let kind = self.guc_kind(&name)?;
                match (kind, c.guc(&name)) {
                    (_, Some(v)) => v.to_string(),
                    (GucKind::PolarMode, None) => "strict".into(),
                    (GucKind::PolarTimeout, None) => self.cfg.default_wait_timeout_ms.to_string(),
                    (GucKind::PolarWaitLsn, None) => "0".into(),
                    (GucKind::PolarXids, None) => String::new(),
                    (GucKind::Placeholder, None) => return Err(unrecognized(&name)),
                    _ => c.guc_or_default(&name),
                }
            }
        })
    }
}

fn no_prepared(name: &str) -> SqlError {
    SqlError::new(
        "26000",
        format!("prepared statement \"{name}\" does not exist"),
    )
}

fn no_portal(name: &str) -> SqlError {
    SqlError::new("34000", format!("portal \"{name}\" does not exist"))
}

fn no_savepoint(name: &str) -> SqlError {
    SqlError::new("3B001", format!("savepoint \"{name}\" does not exist"))
}

fn int4(v: i64) -> Result<i64, SqlError> {
    if i32::try_from(v).is_ok() {
        Ok(v)
    } else {
        Err(SqlError::new("22003", "integer out of range"))
    }
}

fn to_inbound(t: u8, m: FrontendMessage<'_>) -> Inbound {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match m {
        FrontendMessage::Query { sql } => Inbound::Query(s(sql)),
        FrontendMessage::Parse { statement, sql, .. } => Inbound::Parse {
            name: s(statement),
            sql: s(sql),
        },
        FrontendMessage::Bind { portal, statement } => Inbound::Bind {
            portal: s(portal),
            statement: s(statement),
        },
        FrontendMessage::Describe { kind, name } => Inbound::Describe {
            portal: kind == b'P',
            name: s(name),
        },
        FrontendMessage::Execute { portal, .. } => Inbound::Execute { portal: s(portal) },
        FrontendMessage::Close { kind, name } => Inbound::Close {
            portal: kind == b'P',
            name: s(name),
        },
        FrontendMessage::Sync => Inbound::Sync,
        FrontendMessage::Flush => Inbound::Flush,
        FrontendMessage::Terminate => Inbound::Terminate,
        _ => Inbound::Unsupported(t),
    }
}
