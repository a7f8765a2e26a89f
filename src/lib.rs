//! polarsplit: the read/write-splitting brain a PostgreSQL proxy embeds.
//!
//! The engine is sans-IO: it never opens a socket, reads a clock or starts a thread. The host
//! feeds it bytes and events and drains actions. See `README.md` and `include/polarsplit.h`.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod classify;
pub mod cluster;
pub mod config;
pub mod decision;
pub mod ffi;
pub mod host;
pub mod ids;
pub mod policy;
pub mod pool;
pub mod protocol;
pub mod session;
pub mod token;

pub use cluster::Engine;
pub use config::{Config, ConfigBuilder, ConfigError};
pub use session::Session;
