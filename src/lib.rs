//! polarsplit: the read/write-splitting brain a PostgreSQL proxy embeds.
//!
//! The engine is sans-IO: it never opens a socket, reads a clock or starts a thread. The host
//! feeds it bytes and events and drains actions. See `README.md`, `ARCHITECTURE.md` and
//! `include/polarsplit.h`.
//!
//! # The Rust API
//!
//! Everything a Rust host needs is re-exported here, and only here; the modules are private.
//!
//! - Build a [`Config`] with a [`ConfigBuilder`] (the only way to get one: every setting is
//!   checked, and the combination when built), then one [`Engine`] per proxy, shared by all
//!   threads.
//! - One [`Session`] per client connection. Inputs: [`Session::recv_client`],
//!   [`Session::recv_backend`] or [`Session::recv_backend_fact`], [`Session::on_backend_event`]
//!   with an [`Event`], [`Session::on_timeout`]. Output: [`Session::poll_action`] until `None`,
//!   each an [`Action`]; the routing of every statement is reported as a [`Decision`] (an
//!   [`Outcome`] and a [`Reason`]). [`Streams`] is a reference host for the byte actions.
//! - Engine-wide inputs about servers: reader positions ([`Lsn`]), health, the writer's identity
//!   ([`WriterIdentity`]), the function and sequence catalogues ([`UserFunction`], [`UserSequence`]); counters ([`Counter`],
//!   [`Stats`]).
//! - A reader connection pool index keyed by [`ReaderKey`] ([`PoolIndex`]) with its warmup
//!   queue ([`WarmupQueue`]), for hosts that pool reader connections.
//!
//! The C ABI (`include/polarsplit.h`) is a thin layer over this API; its `extern "C"` symbols
//! are exported from the `cdylib` and `staticlib`, not from the Rust API:
//!
//! ```compile_fail
//! let v = polarsplit::ffi::polarsplit_abi_version();
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, unreachable_pub)]

// Every module is private. What is internal but reachable through `internals` is #[doc(hidden)]
// where it is defined (`missing_docs` skips an item whose module or own attributes say so): the
// whole of `classify` (the statement classifier) and `policy` (the failure table), the wire
// codec's submodules of `protocol`, `session::{plan, state}`, `cluster::readers`, and single
// items that say so. The five types re-exported from `classify` are documented by hand: the
// lint does not see them.
#[doc(hidden)]
mod classify;
mod cluster;
mod config;
mod decision;
mod ffi;
mod host;
mod ids;
#[doc(hidden)]
mod policy;
mod pool;
mod protocol;
mod session;
mod token;

pub use classify::{
    CatalogError, Isolation, UnknownFunctions, UserFunction, UserObject, UserSequence, Volatility,
    CATALOG_QUERY,
};
pub use cluster::stats::{Counter, Stats, StatsSnapshot};
pub use cluster::Engine;
pub use config::{
    Config, ConfigBuilder, ConfigError, Consistency, IdentityMode, LsnProbe, OnMissingLsn,
    OnReplicaError, OnReplicaLoss, OnWaitTimeout, ReadFallback, ServerDialect, StartupProfile,
    Warmup, SETTING_NAMES,
};
pub use decision::{Decision, Outcome, Reason};
pub use host::{BackendStream, ContractError, Streams};
pub use ids::{ConnId, Hostgroup, ServerId};
pub use pool::{
    auth_hash, CheckinOutcome, Checkout, Demand, DemandOutcome, DemandReason, PoolCounts,
    PoolError, PoolIndex, PoolLimits, PoolStats, PublishCheck, PublishError, ReaderKey,
    ReaderKeyBuilder, Reservation, ReservationId, ReserveError, WarmupQueue, WarmupStats,
    AUTHORIZATION_KEY, READER_CONFIGURATION_KEY, ROLE_KEY, SETTINGS_DIGEST_KEY,
};
pub use protocol::{Limits, Lsn, LsnField, Marker, ProtocolError, TxStatus};
pub use session::{
    Action, BackendFact, ClientInfo, Event, Params, Role, Session, SessionError, Startup,
};
pub use token::{Token, WriterIdentity};

/// Not part of the API: the crate's internal modules, for this workspace's own tests,
/// simulator, fuzz targets and benchmarks. No stability, no documentation promise; a host that
/// uses anything from here is on its own.
#[doc(hidden)]
pub mod internals {
    macro_rules! internal {
        ($($m:ident),+) => {
            $(pub mod $m {
                pub use crate::$m::*;
            })+
        };
    }
    internal!(classify, cluster, config, policy, pool, protocol, session, token);
}
