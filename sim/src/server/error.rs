//! The errors a simulated server sends: SQLSTATE, message and the optional fields, with the
//! constructors shared by every statement.

use super::prelude::*;

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
    pub(super) fn new(code: &str, message: impl Into<String>) -> SqlError {
        SqlError {
            code: code.to_string(),
            message: message.into(),
            ..SqlError::default()
        }
    }

    pub(super) fn detail(mut self, d: impl Into<String>) -> SqlError {
        self.detail = Some(d.into().into_boxed_str());
        self
    }

    pub(super) fn hint(mut self, h: impl Into<String>) -> SqlError {
        self.hint = Some(h.into().into_boxed_str());
        self
    }

    pub(super) fn routine(mut self, r: &str) -> SqlError {
        self.routine = Some(r.into());
        self
    }

    /// A write a hot standby refuses.
    pub(super) fn refused(mut self) -> SqlError {
        self.refused_write = true;
        self
    }

    pub(super) fn fatal(mut self) -> SqlError {
        self.fatal = true;
        self
    }
}

pub(super) fn unrecognized(name: &str) -> SqlError {
    SqlError::new(
        "42704",
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

pub(super) fn invalid_value(name: &str, value: &str) -> SqlError {
    SqlError::new(
        "22023",
        format!("invalid value for parameter \"{name}\": \"{value}\""),
    )
}

pub(super) fn read_only_tx(verb: &str) -> SqlError {
    SqlError::new(
        "25006",
        format!("cannot execute {verb} in a read-only transaction"),
    )
}

pub(super) fn no_tx_block(what: &str) -> SqlError {
    SqlError::new(
        "25P01",
        format!("{what} can only be used in transaction blocks"),
    )
}

pub(super) fn conflict_error(c: WriteConflict, k: i64) -> SqlError {
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

pub(super) fn emit_error(out: &mut Vec<u8>, e: &SqlError) {
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
    out.extend(wire::fields_message(false, &f));
}

/// Sends a FATAL error (the caller closes the connection).
pub(crate) fn send_fatal(c: &mut Conn, code: &str, message: &str) {
    emit_error(&mut c.out, &SqlError::new(code, message).fatal());
}

pub(super) fn no_prepared(name: &str) -> SqlError {
    SqlError::new(
        "26000",
        format!("prepared statement \"{name}\" does not exist"),
    )
}

pub(super) fn no_portal(name: &str) -> SqlError {
    SqlError::new("34000", format!("portal \"{name}\" does not exist"))
}

pub(super) fn no_savepoint(name: &str) -> SqlError {
    SqlError::new("3B001", format!("savepoint \"{name}\" does not exist"))
}
