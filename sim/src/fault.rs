//! Injected errors (F-1's `REUSABLE_ERROR`, and FATAL for `CONNECTION_LOST`).

use crate::config::{ConnId, ServerId};
use crate::sql::Parsed;

/// Which statement an injected error replaces: the first one that matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    Any,
    /// A SELECT of the subset.
    Select,
    /// A `SET polar_*` (a hidden statement the engine adds).
    PolarSet,
    /// A statement whose text contains this (case-insensitive).
    Contains(String),
}

impl Matcher {
    pub(crate) fn matches(&self, p: &Parsed) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Select => p.stmt.is_select(),
            Matcher::PolarSet => p.stmt.is_polar_set(),
            Matcher::Contains(s) => p
                .text
                .to_ascii_lowercase()
                .contains(&s.to_ascii_lowercase()),
        }
    }
}

/// An error that replaces the next matching statement: it does not run, the client gets an
/// ErrorResponse with this SQLSTATE and message, and (unless `fatal`) the connection stays
/// usable, with PostgreSQL's usual consequences (the implicit transaction rolls back, an
/// explicit one is failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injection {
    pub sqlstate: String,
    pub message: String,
    pub matcher: Matcher,
    /// Severity FATAL: the connection closes after the error.
    pub fatal: bool,
}

impl Injection {
    /// A reusable ERROR for the next statement.
    pub fn error(sqlstate: &str, message: &str) -> Injection {
        Injection {
            sqlstate: sqlstate.to_string(),
            message: message.to_string(),
            matcher: Matcher::Any,
            fatal: false,
        }
    }

    pub fn matching(mut self, m: Matcher) -> Injection {
        self.matcher = m;
        self
    }

    pub fn fatal(mut self) -> Injection {
        self.fatal = true;
        self
    }
}

/// Where an injection waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Conn(ConnId),
    /// Any connection of the server (the first matching statement of any of them).
    Server(ServerId),
}
