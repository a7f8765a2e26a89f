//! Settings: which names exist per dialect, value validation, SET / RESET / SHOW.

use super::prelude::*;

pub(super) fn display_name(name: &str) -> String {
    KNOWN_GUCS
        .iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, _, d)| *d)
        .map(str::to_string)
        .unwrap_or_else(|| name.to_string())
}

/// `DateStyle` is two parts, output style and field order; a SET changes the parts it names
/// and keeps the other (`SET datestyle TO iso; SET datestyle TO ymd` leaves `ISO, YMD`,
/// NOTES.md), as PostgreSQL's check hook does. `DEFAULT` stands for the default's part.
fn compose_datestyle(current: &str, v: &str) -> Result<String, SqlError> {
    let parts = |s: &str| -> (Option<&'static str>, Option<&'static str>) {
        let mut out = (None, None);
        for w in s.split(',').map(|w| w.trim().to_ascii_lowercase()) {
            match w.as_str() {
                "iso" => out.0 = Some("ISO"),
                "sql" => out.0 = Some("SQL"),
                "postgres" => out.0 = Some("Postgres"),
                "german" => out.0 = Some("German"),
                "ymd" => out.1 = Some("YMD"),
                "dmy" | "euro" | "european" => out.1 = Some("DMY"),
                "mdy" | "us" | "noneuro" | "noneuropean" => out.1 = Some("MDY"),
                _ => {}
            }
        }
        out
    };
    let default = known_default("datestyle").unwrap_or("ISO, MDY");
    let (mut style, mut order) = parts(current);
    let (mut new_style, mut new_order) = (None, None);
    for w in v.split(',').map(str::trim) {
        let (s, o) = match w.to_ascii_lowercase().as_str() {
            "default" => parts(default),
            _ => match parts(w) {
                (None, None) => {
                    return Err(invalid_value("DateStyle", v)
                        .detail(format!("Unrecognized key word: \"{w}\".")))
                }
                p => p,
            },
        };
        for (new, got) in [(&mut new_style, s), (&mut new_order, o)] {
            if let Some(g) = got {
                if new.is_some_and(|n| n != g) {
                    return Err(invalid_value("DateStyle", v)
                        .detail("Conflicting \"datestyle\" specifications."));
                }
                *new = Some(g);
            }
        }
    }
    style = new_style.or(style);
    order = new_order.or(order);
    Ok(format!(
        "{}, {}",
        style.unwrap_or("ISO"),
        order.unwrap_or("MDY")
    ))
}

/// What kind of setting a name is, for this dialect.
pub(super) enum GucKind {
    Known,
    Placeholder,
    Fixed,
    PolarMode,
    PolarTimeout,
    PolarWaitLsn,
    PolarXids,
}

impl Cluster {
    pub(super) fn guc_kind(&self, name: &str) -> Result<GucKind, SqlError> {
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
    pub(super) fn guc_value(
        &self,
        kind: &GucKind,
        name: &str,
        v: &str,
    ) -> Result<String, SqlError> {
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
                            polarsplit::internals::protocol::XidError::TooFewFields => {
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

    /// SET / set_config.
    pub(super) fn set(
        &mut self,
        c: &mut Conn,
        name: &str,
        value: SetValue,
        local: bool,
    ) -> Result<(), SqlError> {
        let name = name.to_ascii_lowercase();
        let role = self.server(c.server).role;
        match name.as_str() {
            "role" if !local => {
                return match value {
                    SetValue::Default => self.set_role(c, None),
                    SetValue::Text(v) => {
                        self.set_role(c, Some(v.as_str()).filter(|v| *v != "none"))
                    }
                }
            }
            "session_authorization" if !local => {
                return match value {
                    SetValue::Default => self.set_session_authorization(c, None),
                    SetValue::Text(v) => self.set_session_authorization(c, Some(&v)),
                }
            }
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
            SetValue::Text(v) if name == "datestyle" => {
                compose_datestyle(&c.guc_or_default("datestyle"), &v)?
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

    pub(super) fn show(&self, c: &mut Conn, name: &str) -> Result<String, SqlError> {
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
            "session_authorization" => c.session_user(),
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

/// The capture of a session's state (S-5), answered from the connection's real state.
impl Cluster {
    /// The rows of the engine's capture statement, as PostgreSQL 15 returns them (verified
    /// on 15.18): `(kind, hex(name), hex(value))` ordered by kind, then the hex name —
    /// (1) every setting whose source is `session` (`SET`, `SET LOCAL`, `set_config`; not
    /// startup parameters), under its `pg_settings` name, minus the transaction ones,
    /// `role` and `session_authorization`; placeholders are not in `pg_settings`, so (1) also
    /// each name of `$1` that `current_setting(name, true)` finds; (2) the session
    /// authorization; (3) the role (`none` when none is set).
    pub(super) fn capture(
        &mut self,
        c: &mut Conn,
        arg: &CaptureArg,
    ) -> Result<Vec<Vec<Option<String>>>, SqlError> {
        let names = match arg {
            CaptureArg::Array(a) => {
                crate::sql::parse_text_array(a).map_err(|m| SqlError::new("22P02", m))?
            }
            CaptureArg::Other => Vec::new(),
        };
        const NOT_CAPTURED: &[&str] = &[
            "transaction_isolation",
            "transaction_read_only",
            "transaction_deferrable",
            "session_authorization",
            "role",
        ];
        let mut rows: Vec<(u8, String, String)> = Vec::new();
        let session: std::collections::BTreeSet<&String> =
            c.gucs.session.keys().chain(c.gucs.local.keys()).collect();
        for name in session {
            if NOT_CAPTURED.contains(&name.as_str()) {
                continue;
            }
            if !matches!(self.guc_kind(name), Ok(k) if !matches!(k, GucKind::Placeholder)) {
                continue;
            }
            rows.push((1, display_name(name), c.guc_or_default(name)));
        }
        // The empty name asks whether the session holds an advisory lock (kind 7, S-4).
        let mut ask_advisory = false;
        for name in names.into_iter().flatten() {
            if name.is_empty() {
                ask_advisory = true;
            } else if let Ok(v) = self.show(c, &name) {
                rows.push((1, name, v));
            }
        }
        if ask_advisory && !c.advisory.is_empty() {
            rows.push((7, "advisory".into(), String::new()));
        }
        rows.push((2, "session_authorization".into(), c.session_user()));
        let role = c.guc("role").filter(|r| !r.is_empty()).unwrap_or("none");
        rows.push((3, "role".into(), role.to_string()));
        if c.temp {
            rows.push((4, "temp".into(), String::new()));
        }
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let mut rows: Vec<(u8, String, String)> = rows
            .into_iter()
            .map(|(k, n, v)| (k, hex(&n), hex(&v)))
            .collect();
        rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(rows
            .into_iter()
            .map(|(k, n, v)| vec![Some(k.to_string()), Some(n), Some(v)])
            .collect())
    }
}

/// Statements about settings.
impl Cluster {
    pub(super) fn set_stmt(
        &mut self,
        c: &mut Conn,
        info: &mut StmtInfo,
        local: bool,
        name: &str,
        value: &SetValue,
    ) -> ExecResult {
        if local && !tx(c).explicit {
            Self::warn(
                c,
                info,
                "25P01",
                "SET LOCAL can only be used in transaction blocks",
                None,
                None,
            );
        }
        self.set(c, name, value.clone(), local)?;
        Ok("SET".into())
    }

    pub(super) fn set_transaction(
        &mut self,
        c: &mut Conn,
        info: &mut StmtInfo,
        modes: TxModes,
    ) -> ExecResult {
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
        self.apply_modes(c, modes)?;
        Ok("SET".into())
    }

    pub(super) fn set_session_characteristics(
        &mut self,
        c: &mut Conn,
        modes: TxModes,
    ) -> ExecResult {
        if let Some(iso) = modes.isolation {
            self.set(
                c,
                "default_transaction_isolation",
                SetValue::Text(iso.guc_text().into()),
                false,
            )?;
        }
        if let Some(ro) = modes.read_only {
            if !ro && self.server(c.server).role == Role::Reader {
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

    /// `RESET name`; `None` is `RESET ALL`.
    pub(super) fn reset(&mut self, c: &mut Conn, name: Option<&str>) -> ExecResult {
        let Some(name) = name else {
            // RESET ALL leaves role and session_authorization alone (NOTES.md).
            let keep =
                |k: &String, _: &mut crate::session::GucVal| NO_RESET_ALL.contains(&k.as_str());
            c.gucs.session.retain(keep);
            c.gucs.local.retain(keep);
            return Ok("RESET".into());
        };
        let name = name.to_ascii_lowercase();
        if matches!(self.guc_kind(&name)?, GucKind::Fixed) {
            return Err(
                SqlError::new("55P02", format!("parameter \"{name}\" cannot be changed")).into(),
            );
        }
        c.gucs.remove(&name);
        Ok("RESET".into())
    }

    pub(super) fn discard_all(&mut self, c: &mut Conn) -> ExecResult {
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
        c.temp = false;
        c.prepared.clear();
        c.portals.clear();
        c.listening.clear();
        Ok("DISCARD ALL".into())
    }

    /// `SET ROLE` (`None`: NONE): only to a role the session user may become.
    pub(super) fn set_role(&mut self, c: &mut Conn, role: Option<&str>) -> Result<(), SqlError> {
        let v = match role {
            None => "none".to_string(),
            Some(r) => {
                let r = r.to_ascii_lowercase();
                if !ROLES.iter().any(|(n, _, _)| *n == r) {
                    return Err(SqlError::new(
                        "22023",
                        format!("role \"{r}\" does not exist"),
                    ));
                }
                if !may_set_role(&c.session_user(), &r) {
                    return Err(SqlError::new(
                        "42501",
                        format!("permission denied to set role \"{r}\""),
                    ));
                }
                r
            }
        };
        self.store_guc(c, "role", v, false);
        Ok(())
    }

    /// `SET SESSION AUTHORIZATION` (`None`: DEFAULT): only for a superuser login; it resets
    /// the role (NOTES.md).
    pub(super) fn set_session_authorization(
        &mut self,
        c: &mut Conn,
        user: Option<&str>,
    ) -> Result<(), SqlError> {
        let user = user.map(str::to_ascii_lowercase);
        if let Some(u) = &user {
            if !ROLES.iter().any(|(n, _, _)| n == u) {
                return Err(SqlError::new(
                    "22023",
                    format!("role \"{u}\" does not exist"),
                ));
            }
            // The authenticated user may always become itself (PostgreSQL 15.18's message).
            if *u != c.user && !is_superuser(&c.user) {
                return Err(SqlError::new(
                    "42501",
                    format!("permission denied to set session authorization \"{u}\""),
                ));
            }
        }
        self.store_guc(c, "session_authorization", user.unwrap_or_default(), false);
        self.store_guc(c, "role", "none".into(), false);
        Ok(())
    }

    /// Stores a session (or `SET LOCAL`) value.
    fn store_guc(&mut self, c: &mut Conn, name: &str, value: String, local: bool) {
        let gv = crate::session::GucVal {
            value,
            query_seq: c.query_seq,
        };
        if local {
            c.gucs.local.insert(name.to_string(), gv);
        } else {
            c.gucs.local.remove(name);
            c.gucs.session.insert(name.to_string(), gv);
        }
    }
}
