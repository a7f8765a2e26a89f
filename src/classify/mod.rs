//! Statement classification (SPEC §7): is a client's SQL a replica-safe read, and if not, what is it?
//!
//! Classification is a pure function of the SQL text and the [`FunctionPolicy`] (the configured
//! function lists and the built-in table), finished per database against the host-reported
//! catalogue of user functions ([`FunctionCatalogs`]). The session engine uses the result to
//! plan (P-3), to track transaction state (S-3), session hazards (S-4), tracked settings and code
//! it cannot see into (S-5, S-6), and to decide whether a statement "may have written" (P-6).
//!
//! How: a PostgreSQL-aware lexer (`lexer.rs`) feeds one linear pass (`scan.rs`) that splits the
//! Query string into statements and decides reads from the token stream alone; other statements
//! get a small strict parse of their head (`head.rs`). Every identifier is normalised before it
//! is matched (`ident.rs`); function calls are judged by the F-policy (`functions.rs`) against
//! PostgreSQL's built-ins, generated from a real server's `pg_proc` (`builtins/`). No AST is built
//! and `sqlparser` is not used: it rejects valid PostgreSQL reads (`FOR NO KEY UPDATE`, `TABLE t`,
//! `ROWS FROM`, …), costs ~8 µs per point select, and could only ever confirm facts the token scan
//! already sees (the tests use it as an oracle). Every rule errs towards "not replica-safe": a false
//! "not safe" loses offload, a false "safe" is a correctness bug.
//!
//! This module depends on nothing else in the crate.

pub mod builtins;
mod cache;
mod catalog_query;
mod functions;
mod head;
mod ident;
mod keywords;
mod lexer;
mod mentions;
mod scan;
mod shape;
mod statement;
mod token_statement;
mod types;

pub use builtins::BuiltinTable;
pub use cache::Classifier;
pub use catalog_query::CATALOG_QUERY;
pub(crate) use catalog_query::CATALOG_QUERY_NUL;
pub use functions::{
    may_be_read_function, CatalogError, DbCatalog, FunctionCatalogs, FunctionPolicy, ReadFunctions,
    UnknownFunctions, UserFunction, UserObject, UserSequence, Volatility, MAX_DATABASES,
    MAX_FUNCTIONS_PER_DATABASE, MAX_OBJECTS_PER_DATABASE, MAX_SEQUENCES_PER_DATABASE,
};
pub(crate) use lexer::value_may_spell_txn_time;
pub use mentions::{prepared_mentions, Mention};
pub use scan::set_config_names;
pub(crate) use token_statement::token_command;
pub use types::*;

/// Bounds that keep classification linear in time and bounded in memory whatever the input
/// (a hostile 10 MB string, 100 000 nested parentheses, 100 000 statements). Exceeding any of
/// them makes the whole string one [`Kind::Unknown`] statement with [`NotSafe::TooComplex`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest SQL text classified, in bytes.
    pub max_sql_len: usize,
    /// Deepest parenthesis nesting.
    pub max_paren_depth: u32,
    /// Most statements in one Query string.
    pub max_statements: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        max_sql_len: 1 << 20,
        max_paren_depth: 1_000,
        max_statements: 10_000,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// Classifies one simple-protocol Query string (which may hold several statements) under the
/// default F-policy with these write functions, for a database whose catalogue is not known.
///
/// Never panics, whatever the input; anything it cannot understand is [`Kind::Unknown`] and
/// therefore not replica-safe.
pub fn classify(sql: &str, write_functions: &WriteFunctions) -> Classification {
    classify_with_limits(sql, write_functions, &Limits::DEFAULT)
}

/// [`classify`] with explicit [`Limits`].
pub fn classify_with_limits(
    sql: &str,
    write_functions: &WriteFunctions,
    limits: &Limits,
) -> Classification {
    let rules = functions::Rules::with_write(write_functions);
    rules.finish(statement::classify_str(sql, rules, limits), None)
}

/// Classifies `sql` under `policy`, finished against a database's catalogue (`None`: not
/// reported).
pub fn classify_with_policy(
    sql: &str,
    policy: &FunctionPolicy,
    catalog: Option<&DbCatalog>,
    limits: &Limits,
) -> Classification {
    let rules = functions::Rules {
        record_names: catalog.is_some(),
        ..policy.rules()
    };
    rules.finish(statement::classify_str(sql, rules, limits), catalog)
}
