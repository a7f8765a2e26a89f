//! Input framing, the startup packet (W-1 keys and their identity rules, `options`),
//! the settings reported at connect, and CancelRequest.

use super::prelude::*;

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

impl Cluster {
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
                            FrontendMessage::parse(f.tag, f.body)
                                .map(|m| to_inbound(f.tag, f.body, m)),
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
    pub(super) fn refuse(&mut self, c: &mut Conn, e: SqlError) {
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

    pub(super) fn startup(&mut self, c: &mut Conn, params: &[(String, String)]) {
        if self.server(c.server).starting_until.is_some() {
            let e = SqlError::new("57P03", "the database system is starting up");
            self.refuse(c, e);
            return;
        }
        if let Err(e) = self.check_startup(c, params) {
            self.refuse(c, e);
            return;
        }
        c.phase = Phase::Ready;
        c.out.extend(be::auth_ok());
        let ps = self.reported_params(c);
        for (k, v) in &ps {
            c.out.extend(be::param_status(k, v));
        }
        c.reported = ps.into_iter().collect();
        c.out.extend(be::backend_key(c.pid, c.secret));
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
    pub(super) fn check_startup(
        &mut self,
        c: &mut Conn,
        params: &[(String, String)],
    ) -> Result<(), SqlError> {
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

    pub(super) fn startup_guc(
        &mut self,
        c: &mut Conn,
        name: &str,
        v: &str,
    ) -> Result<(), SqlError> {
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

    pub(super) fn reported_params(&self, c: &Conn) -> Vec<(String, String)> {
        let role = self.server(c.server).role;
        let mut v: Vec<(String, String)> = KNOWN_GUCS
            .iter()
            .filter_map(|(n, _, d)| d.map(|d| (d.to_string(), c.guc_or_default(n))))
            .collect();
        let session_user = c.session_user();
        let superuser = if is_superuser(&c.current_user()) {
            "on"
        } else {
            "off"
        };
        let fixed = [
            (
                "in_hot_standby",
                if role == Role::Reader { "on" } else { "off" },
            ),
            ("integer_datetimes", "on"),
            ("is_superuser", superuser),
            ("server_encoding", "UTF8"),
            ("server_version", self.cfg.server_version.as_str()),
            ("session_authorization", session_user.as_str()),
        ];
        v.extend(
            fixed
                .iter()
                .map(|(k, val)| (k.to_string(), val.to_string())),
        );
        v.sort_by_key(|(k, _)| k.to_ascii_lowercase());
        v
    }

    pub(super) fn cancel(&mut self, from: &Conn, pid: i32, secret: Option<u32>) {
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
}

fn to_inbound(t: u8, body: &[u8], m: FrontendMessage<'_>) -> Inbound {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Inbound::Msg(match m {
        FrontendMessage::Query { sql } => Front::Query(s(sql)),
        FrontendMessage::Parse { statement, sql, .. } => Front::Parse {
            name: s(statement),
            sql: s(sql),
        },
        FrontendMessage::Bind { portal, statement } => Front::Bind {
            portal: s(portal),
            statement: s(statement),
            params: bind_params(body, portal.len() + statement.len() + 2).unwrap_or_default(),
        },
        FrontendMessage::Describe { kind, name } => Front::Describe {
            portal: kind == b'P',
            name: s(name),
        },
        FrontendMessage::Execute { portal, max_rows } => Front::Execute {
            portal: s(portal),
            max_rows,
        },
        FrontendMessage::Close { kind, name } => Front::Close {
            portal: kind == b'P',
            name: s(name),
        },
        FrontendMessage::Sync => Front::Sync,
        FrontendMessage::Flush => Front::Flush,
        FrontendMessage::Terminate => return Inbound::Terminate,
        _ => return Inbound::Unsupported(t),
    })
}

/// The text parameter values of a Bind body (from `at`, after the two names): format codes,
/// then the values. Binary values are read as text too (the simulator's drivers send text).
fn bind_params(b: &[u8], at: usize) -> Option<Vec<Option<String>>> {
    let i16_at = |i: usize| Some(i16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]));
    let mut i = at;
    let formats = usize::try_from(i16_at(i)?).ok()?;
    i += 2 + 2 * formats;
    let n = usize::try_from(i16_at(i)?).ok()?;
    i += 2;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?);
        i += 4;
        if len < 0 {
            out.push(None);
        } else {
            let v = b.get(i..i + len as usize)?;
            out.push(Some(String::from_utf8_lossy(v).into_owned()));
            i += len as usize;
        }
    }
    Some(out)
}
