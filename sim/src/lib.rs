//! polarsplit-sim: a deterministic simulator of a PolarDB / PostgreSQL 15 cluster — one primary
//! and hot standbys — that speaks the real v3 wire protocol, for driving polarsplit without a
//! real server.
//!
//! * **Virtual time.** Nothing happens between calls. Time is `u64` milliseconds moved only by
//!   [`Cluster::advance`] / [`Cluster::advance_to`]; [`Cluster::next_event_time`] says when
//!   something is scheduled. Randomness (WAL record sizes, reader lag, missing-LSN RFQs, cancel
//!   secrets) comes from seeded streams: the same [`ClusterConfig`] and the same calls give the
//!   same bytes and the same [`Cluster::history`].
//! * **Primary.** WAL with insert and flushed positions (an open transaction's WAL stays
//!   unflushed until someone commits or the periodic flush), `kv(k int primary key, v int)` as
//!   MVCC row versions, a sequence `s`, XIDs assigned at the first write, subtransactions, READ
//!   COMMITTED / REPEATABLE READ.
//! * **Readers.** Replay the flushed WAL as of `now - lag` (lag random within bounds, changing
//!   over time, never replaying backwards); refuse writes as a PostgreSQL 15 hot standby does;
//!   serve the W-4 wait settings and XID imports per [`Dialect`].
//! * **Wire.** The host writes frontend bytes (startup packet first) and reads backend bytes,
//!   possibly a few at a time. See [`client`] for encoders and a decoder.
//! * **Faults.** Kill a connection, stop/start a server, inject errors, make lag jump, promote a
//!   reader, restart the primary on a new timeline ([`Cluster::generation`] counts writer
//!   changes).
//! * **History.** A structured log ([`history::Event`]) of every statement with its snapshot and
//!   result, every commit and uncommitted write, refused writes, waits, faults — plus ground-truth
//!   queries ([`Cluster::committed_value`], [`Cluster::replay_lsn`], …) for a checker.
//!
//! ```
//! use polarsplit_sim::client::{self, Decoder, Msg};
//! use polarsplit_sim::{Cluster, ClusterConfig, Dialect, ServerRef};
//!
//! let mut c = Cluster::new(ClusterConfig { seed: 7, dialect: Dialect::Awide, ..Default::default() });
//! let w = c.connect(ServerRef::Primary).unwrap();
//! let r = c.connect(ServerRef::Reader(0)).unwrap();
//! c.write(w, &client::startup_v15("app", "db")).unwrap();
//! c.write(r, &client::startup_v15("app", "db")).unwrap();
//! c.write(w, &client::query("INSERT INTO kv VALUES (1000, 1)")).unwrap();
//! let lsn = c.insert_lsn().0; // a host reads it from the writer's RFQ
//! c.write(r, &client::query(&format!(
//!     "SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 500; \
//!      SET polar_xact_split_wait_lsn = '{lsn}'; SELECT v FROM kv WHERE k = 1000"))).unwrap();
//! c.advance(250); // virtual time: the reader replays (lag ≤ 200 ms by default)
//! let ext = polarsplit::internals::protocol::RfqExtensions { lsn: true, xact: true };
//! let msgs = Decoder::new(ext).feed(&c.read(r, usize::MAX));
//! assert!(msgs.contains(&Msg::DataRow(vec![Some("1".into())])));
//! ```

pub mod client;
mod cluster;
mod config;
mod fault;
pub mod harness;
pub mod history;
mod rng;
mod server;
pub(crate) mod session;
pub mod sql;
mod store;
mod wire;

pub use cluster::{Cluster, ConnectError, ServerInfo, SimError};
pub use config::{ClusterConfig, ConnId, Dialect, Role, ServerId, ServerRef};
pub use fault::{Injection, Matcher, Target};
pub use history::{Entry, Event};
pub use polarsplit::Lsn;
pub use rng::Rng;
pub use session::SessionState;
pub use store::{Xid, XidStatus};
