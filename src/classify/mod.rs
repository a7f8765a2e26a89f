//! Statement classification (SPEC §7): is a client's SQL a replica-safe read, and if not, what is it?
//!
//! `classify` is a pure function of the SQL text and the configured write-function list. The
//! session engine uses the result to plan (P-3), to track transaction state (S-3), session hazards
//! (S-4) and tracked settings, and to decide whether a statement "may have written" (P-6).
//!
//! This module depends on nothing else in the crate.

mod types;

pub use types::*;

/// Classifies one simple-protocol Query string (which may hold several statements).
///
/// Never panics, whatever the input; anything it cannot understand is [`Kind::Unknown`] and
/// therefore not replica-safe.
pub fn classify(sql: &str, write_functions: &WriteFunctions) -> Classification {
    let _ = (sql, write_functions);
    Classification::single(StatementInfo::unknown(NotSafe::Unparseable))
}
