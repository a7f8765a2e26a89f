//! Configuration (SPEC §8): a mutable builder that validates each setting as it is given and the
//! combination when built, yielding an immutable [`Config`] shared by the engine and its sessions.

use std::fmt;

use crate::classify::{
    may_be_read_function, Isolation, ReadFunctions, UnknownFunctions, WriteFunctions,
};
use crate::protocol::Limits;

macro_rules! setting_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// All accepted spellings, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The value spelled `s` (surrounding blanks and letter case ignored), or `None` when
            /// `s` is none of [`Self::NAMES`].
            pub fn parse(s: &str) -> Option<$name> {
                let s = s.trim();
                $(if s.eq_ignore_ascii_case($text) { return Some($name::$variant); })+
                None
            }

            /// The value's spelling in [`ConfigBuilder::set`] and config files.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

setting_enum!(
    /// `consistency` (SPEC §8, P-3): how fresh a read on a reader must be.
    Consistency {
        /// The engine decides nothing: every statement is PASSTHROUGH, routed by the host.
        Off = "off",
        /// Reads outside a transaction go to a reader with no wait; reads inside one go to the
        /// writer.
        Eventual = "eventual",
        /// Read-your-writes: a read sees everything this session wrote or read before it.
        Session = "session",
        /// Like `session`, and a read also sees every write the writer had reported when it was
        /// sent (writes of other sessions included).
        Global = "global",
    }
);
setting_enum!(
    /// `on_wait_timeout` (F-2): what a read does when its wait on a reader times out.
    OnWaitTimeout {
        /// Re-run the statement on the writer, whose result is authoritative.
        Primary = "primary",
        /// Answer the client with an error.
        Error = "error",
        /// Close the client connection.
        Disconnect = "disconnect",
        /// Ask the reader for `best_effort` instead (a possibly stale result); never for split
        /// reads.
        Warning = "warning",
    }
);
setting_enum!(
    /// `on_replica_loss` (F-2): what a read does when its reader connection is lost.
    OnReplicaLoss {
        /// One retry on another compatible reader, then the writer.
        ReplicaThenPrimary = "replica_then_primary",
        /// One retry on another compatible reader, then an error to the client.
        ReplicaThenError = "replica_then_error",
        /// Re-run the statement on the writer.
        Primary = "primary",
        /// Answer the client with an error.
        Error = "error",
        /// Close the client connection.
        Disconnect = "disconnect",
    }
);
setting_enum!(
    /// `on_replica_error` (F-2): what a read does when its reader answers with an error that
    /// leaves the connection usable.
    OnReplicaError {
        /// Re-run the statement on the writer.
        Primary = "primary",
        /// Answer the client with an engine-built error that names the reader's.
        Error = "error",
        /// Close the client connection.
        Disconnect = "disconnect",
    }
);
setting_enum!(
    /// `on_missing_lsn` (P-3 step 7): what a read does when the position it must wait for is
    /// unknown (the writer reported no LSN for a write).
    OnMissingLsn {
        /// Send the read to the writer.
        Primary = "primary",
        /// Send it to a reader with no wait, and a WARNING notice to the client.
        Warning = "warning",
        /// Refuse it: REJECT, with an error to the client.
        Error = "error",
    }
);
setting_enum!(
    /// `read_fallback`: what a read does when no reader can be had (P-3 step 1, P-4).
    ReadFallback {
        /// Send the read to the writer.
        Primary = "primary",
        /// Refuse it: REJECT, with an error to the client (writes still go to the writer).
        Error = "error",
    }
);
setting_enum!(
    /// `startup_profile` (W-1): which startup keys ask backend connections to report LSNs.
    StartupProfile {
        /// `_polar_proxy_send_lsn`, `_polar_proxy_send_xact` and the `_polar_proxy_client_*`
        /// identity pair (PostgreSQL 15 based servers).
        V15 = "v15",
        /// `_polar_send_lsn`, `_polar_send_xact` and the `_polar_origin_client_*` identity pair.
        Legacy = "legacy",
        /// No startup keys: the servers report no LSN (required for stock PostgreSQL).
        Off = "off",
    }
);
setting_enum!(
    /// `server_dialect` (W-7): which family of server the backends are.
    ServerDialect {
        /// Servers with everything in W-2…W-5: transaction markers, a one-shot bounded wait,
        /// `strict`/`best_effort`.
        Awide = "awide",
        /// Upstream PolarDB for PostgreSQL: LSNs and XID lists on RFQs, but a wait with no
        /// timeout, so the engine never sends one.
        PolarDb = "polardb",
        /// Plain PostgreSQL: no `_polar_*` keys, no LSN on RFQs, no XID import.
        Stock = "stock",
    }
);
setting_enum!(
    /// `identity_mode` (W-1): which address the identity startup keys advertise.
    IdentityMode {
        /// The real client's address ([`ClientInfo::client_addr`](crate::ClientInfo)).
        Client = "client",
        /// The proxy's own listener address ([`ClientInfo::proxy_addr`](crate::ClientInfo)).
        Proxy = "proxy",
        /// The configured `identity_host` and `identity_port`.
        Configured = "configured",
    }
);
setting_enum!(
    /// `lsn_probe` (W-7): when the engine asks the writer for its WAL position after a commit,
    /// where the writer's RFQs carry none (stock PostgreSQL).
    LsnProbe {
        /// Never: write positions come only from the monitor's writer samples.
        Off = "off",
        /// After every committed write.
        On = "on",
        /// After every committed write while the probes pay (a read went to a reader at a
        /// position a probe learned); after a run of probes that did not, on fewer and fewer
        /// writes (every 2nd, 4th, … 64th), and again after every write from the first one
        /// that paid. Always when a causal token needs the position (C-1).
        Adaptive = "adaptive",
    }
);
setting_enum!(
    /// `warmup` (R-3): when the engine asks the host to open reader connections ahead of need.
    Warmup {
        /// Never.
        Off = "off",
        /// On a pool miss (a reader connection was asked for and none was pooled).
        Demand = "demand",
        /// When a transaction begins, so a split read finds a connection.
        Begin = "begin",
        /// On a pool miss and when a transaction begins.
        Both = "both",
    }
);

impl StartupProfile {
    /// Whether connections with this profile get LSNs on their RFQs.
    pub fn reports_lsn(self) -> bool {
        !matches!(self, StartupProfile::Off)
    }
}

impl ServerDialect {
    /// Whether the dialect has a one-shot, bounded wait (W-7): only `awide`.
    pub fn has_bounded_wait(self) -> bool {
        matches!(self, ServerDialect::Awide)
    }

    /// Whether the dialect can import XIDs (W-3/W-4).
    pub fn can_import_xids(self) -> bool {
        !matches!(self, ServerDialect::Stock)
    }
}

/// A setting was refused: names the setting and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct ConfigError {
    /// The setting's name as [`SETTING_NAMES`] spells it (or as given, when it is unknown).
    pub setting: String,
    /// Why the value was refused, with the accepted values or range.
    pub message: String,
}

impl ConfigError {
    fn new(setting: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            setting: setting.to_string(),
            message: message.into(),
        }
    }
}

/// The immutable engine configuration. Build it with [`ConfigBuilder`].
///
/// A `Config` comes only from [`ConfigBuilder::build`]: it has no `Default`, no public field and
/// no public constructor, so [`Engine::new`](crate::Engine::new) never sees one that skipped
/// the builder's checks (the one that keeps `_polar_*` startup keys away from stock servers
/// among them). Settings are read through the accessors below.
///
/// ```
/// let mut b = polarsplit::ConfigBuilder::new();
/// b.set("consistency", "global")?;
/// let c = b.build()?;
/// assert_eq!(c.consistency(), polarsplit::Consistency::Global);
///
/// // The builder refuses what a stock server would refuse at connect.
/// let mut b = polarsplit::ConfigBuilder::new();
/// b.set("server_dialect", "stock")?;
/// assert_eq!(b.build().unwrap_err().setting, "server_dialect");
/// # Ok::<(), polarsplit::ConfigError>(())
/// ```
///
/// None of these compile:
/// ```compile_fail
/// let c = polarsplit::Config::default();
/// ```
/// ```compile_fail
/// let mut c = polarsplit::ConfigBuilder::new().build().unwrap();
/// c.startup_profile = polarsplit::StartupProfile::V15;
/// ```
/// ```compile_fail
/// let mut b = polarsplit::ConfigBuilder::new();
/// b.config_mut().seed = 1;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub(crate) consistency: Consistency,
    pub(crate) txn_split: bool,
    pub(crate) wait_timeout_ms: u32,
    pub(crate) split_wait_timeout_ms: u32,
    pub(crate) on_wait_timeout: OnWaitTimeout,
    pub(crate) on_replica_loss: OnReplicaLoss,
    pub(crate) on_replica_error: OnReplicaError,
    pub(crate) on_missing_lsn: OnMissingLsn,
    pub(crate) read_fallback: ReadFallback,
    pub(crate) reader_retry_limit: u32,
    pub(crate) reader_lsn_max_age_ms: u64,
    pub(crate) startup_profile: StartupProfile,
    pub(crate) server_dialect: ServerDialect,
    pub(crate) identity_mode: IdentityMode,
    /// For `identity_mode = configured`.
    pub(crate) identity_host: Option<String>,
    pub(crate) identity_port: Option<u16>,
    pub(crate) server_default_isolation: Isolation,
    pub(crate) write_functions: WriteFunctions,
    /// Functions declared read-safe (SPEC §7 F-policy; never a never-safe built-in).
    pub(crate) read_functions: ReadFunctions,
    /// Where a statement calling a function the engine knows nothing of goes (default primary).
    pub(crate) unknown_functions: UnknownFunctions,
    pub(crate) warmup: Warmup,
    /// Bound of the warmup demand queue (R-3).
    pub(crate) warmup_queue_capacity: usize,
    /// Seed of every random choice the engine makes (reader tie-breaks), for determinism.
    pub(crate) seed: u64,
    /// Entries of the statement-classification cache (0 disables it). A text is cached on its
    /// second sighting.
    pub(crate) classify_cache_capacity: usize,
    /// Wire limits.
    pub(crate) limits: Limits,
    /// The writer hostgroup sessions use unless the host says otherwise.
    pub(crate) writer_hostgroup: u32,
    /// The reader hostgroup of `writer_hostgroup` (`None`: no readers, everything on the writer).
    pub(crate) reader_hostgroup: Option<u32>,
    /// Where the writer's RFQs carry no LSN (stock PostgreSQL, profile `off`): whether a
    /// committed write's position is learned with the hidden probe of
    /// `pg_current_wal_insert_lsn()` on the writer connection (W-7): never, always, or while
    /// the probes pay ([`LsnProbe`]).
    pub(crate) lsn_probe: LsnProbe,
    /// Most bytes of one extended-protocol batch the engine holds to decide it (E-1); a larger
    /// batch goes to the writer.
    pub(crate) max_batch_bytes: usize,
    /// Most prepared statements tracked per session (E-2).
    pub(crate) max_prepared_statements: usize,
    /// A reader that has answered nothing for this long since a statement was sent, while its
    /// monitor also failed to answer, is treated as lost (R-1b; 0 disables).
    pub(crate) reader_response_timeout_ms: u64,
    /// Consecutive failures after which a reader is held out of reader choice (R-1b).
    pub(crate) reader_failure_threshold: u32,
    /// Placeholder settings (`app.tenant`) the capture always asks for (S-5). When set, the
    /// operator declares that these are the names the application's code sets.
    pub(crate) custom_settings: Vec<String>,
    /// Capture the writer's session state after DML too (triggers may change it, S-5).
    pub(crate) capture_after_dml: bool,
    /// The writer's WAL page and segment sizes, for the page-boundary rule of W-7.
    pub(crate) wal_block_size: u64,
    pub(crate) wal_segment_size: u64,
}

impl Config {
    /// SPEC §8's defaults, which pass every check of [`ConfigBuilder::build`]. Only the builder
    /// hands out a `Config`.
    pub(crate) fn defaults() -> Config {
        Config {
            consistency: Consistency::Session,
            txn_split: true,
            wait_timeout_ms: 1000,
            split_wait_timeout_ms: 5000,
            on_wait_timeout: OnWaitTimeout::Primary,
            on_replica_loss: OnReplicaLoss::ReplicaThenPrimary,
            on_replica_error: OnReplicaError::Primary,
            on_missing_lsn: OnMissingLsn::Primary,
            read_fallback: ReadFallback::Primary,
            reader_retry_limit: 1,
            reader_lsn_max_age_ms: 5000,
            startup_profile: StartupProfile::V15,
            server_dialect: ServerDialect::Awide,
            identity_mode: IdentityMode::Client,
            identity_host: None,
            identity_port: None,
            server_default_isolation: Isolation::ReadCommitted,
            write_functions: WriteFunctions::defaults(),
            read_functions: ReadFunctions::new(),
            unknown_functions: UnknownFunctions::Primary,
            warmup: Warmup::Off,
            warmup_queue_capacity: 256,
            seed: 0x5eed_0f90_11a7,
            classify_cache_capacity: 4096,
            limits: Limits::default(),
            writer_hostgroup: 0,
            reader_hostgroup: Some(1),
            lsn_probe: LsnProbe::Adaptive,
            max_batch_bytes: 64 << 10,
            max_prepared_statements: 256,
            reader_response_timeout_ms: 10_000,
            reader_failure_threshold: 3,
            custom_settings: Vec::new(),
            capture_after_dml: false,
            wal_block_size: 8192,
            wal_segment_size: 16 << 20,
        }
    }
}

/// Read accessors that copy a setting out of [`Config`] (each with its doc comment).
macro_rules! settings_read {
    ($($(#[$m:meta])* $name:ident: $ty:ty;)+) => {
        $($(#[$m])* pub fn $name(&self) -> $ty { self.$name })+
    };
}

/// Read access to every setting, for hosts that log or act on the configuration. A `Config` is
/// never changed: build a new one ([`ConfigBuilder::from_config`]) and hand it to
/// [`Engine::replace_config`](crate::Engine::replace_config).
impl Config {
    settings_read! {
        /// The consistency level (`consistency`, P-3): how fresh a read on a reader must be.
        consistency: Consistency;
        /// Whether reads inside an open transaction may go to a reader (`txn_split`, W-3).
        txn_split: bool;
        /// How long, in milliseconds, a reader may wait for its replay to reach a read's position
        /// (`wait_timeout_ms`).
        wait_timeout_ms: u32;
        /// How long, in milliseconds, a reader may wait for a transaction's writes before a split
        /// read (`split_wait_timeout_ms`).
        split_wait_timeout_ms: u32;
        /// What a read does when its wait on a reader times out (`on_wait_timeout`, F-2).
        on_wait_timeout: OnWaitTimeout;
        /// What a read does when its reader connection is lost (`on_replica_loss`, F-2).
        on_replica_loss: OnReplicaLoss;
        /// What a read does when its reader answers with an error (`on_replica_error`, F-2).
        on_replica_error: OnReplicaError;
        /// What the session does when the writer reports no LSN where one was expected
        /// (`on_missing_lsn`, P-3 step 7).
        on_missing_lsn: OnMissingLsn;
        /// What a read does when no reader can be had (`read_fallback`, P-4).
        read_fallback: ReadFallback;
        /// How many other readers a failed read may be retried on (`reader_retry_limit`).
        reader_retry_limit: u32;
        /// How old, in milliseconds, a reader's sampled replay position may be and still count
        /// (`reader_lsn_max_age_ms`).
        reader_lsn_max_age_ms: u64;
        /// Which startup keys backend connections get (`startup_profile`, W-1).
        startup_profile: StartupProfile;
        /// Which server family the backends are (`server_dialect`, W-7).
        server_dialect: ServerDialect;
        /// Which address the identity startup keys advertise (`identity_mode`, W-1).
        identity_mode: IdentityMode;
        /// When the engine asks the host to open reader connections ahead of need (`warmup`, R-3).
        warmup: Warmup;
        /// The most warmup demands queued at once (`warmup_queue_capacity`, R-3).
        warmup_queue_capacity: usize;
        /// The seed of every random choice the engine makes (`seed`): the same seed and inputs give
        /// the same actions.
        seed: u64;
        /// Entries of the statement-classification cache, 0 when it is off
        /// (`classify_cache_capacity`).
        classify_cache_capacity: usize;
        /// The writer hostgroup sessions use unless the host names another (`writer_hostgroup`).
        writer_hostgroup: u32;
        /// The reader hostgroup of the writer hostgroup; `None` when every statement goes to the
        /// writer (`reader_hostgroup`).
        reader_hostgroup: Option<u32>;
        /// When the engine asks the writer for its WAL position after a commit where RFQs carry
        /// none (`lsn_probe`, W-7).
        lsn_probe: LsnProbe;
        /// The most bytes of one extended-protocol batch held to decide it (`max_batch_bytes`,
        /// E-1).
        max_batch_bytes: usize;
        /// The most prepared statements tracked per session (`max_prepared_statements`, E-2).
        max_prepared_statements: usize;
        /// After how many milliseconds of silence a reader whose monitor also fails counts as lost;
        /// 0 when off (`reader_response_timeout_ms`, R-1b).
        reader_response_timeout_ms: u64;
        /// How many consecutive failures hold a reader out of reader choice
        /// (`reader_failure_threshold`, R-1b).
        reader_failure_threshold: u32;
        /// Whether the writer's session state is captured after DML too (`capture_after_dml`, S-5).
        capture_after_dml: bool;
        /// The writer's WAL page size in bytes (`wal_block_size`, W-7).
        wal_block_size: u64;
        /// The writer's WAL segment size in bytes (`wal_segment_size`, W-7).
        wal_segment_size: u64;
    }

    /// The address the identity startup keys advertise under `identity_mode = configured`, as
    /// host and port (`identity_host`, `identity_port`); `None` for either that is not set.
    pub fn identity(&self) -> (Option<&str>, Option<u16>) {
        (self.identity_host.as_deref(), self.identity_port)
    }

    /// The isolation level a session starts in when its client names none
    /// (`server_default_isolation`).
    pub fn server_default_isolation(&self) -> Isolation {
        self.server_default_isolation
    }

    /// Where a statement calling a function the engine knows nothing of goes
    /// (`unknown_functions`, F-policy).
    pub fn unknown_functions(&self) -> UnknownFunctions {
        self.unknown_functions
    }

    /// The placeholder settings (`app.tenant`) the session-state capture always asks for, in
    /// lower case (`custom_settings`, S-5).
    pub fn custom_settings(&self) -> &[String] {
        &self.custom_settings
    }

    /// The wire limits (`max_inspected_message_bytes`).
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

/// The names [`ConfigBuilder::set`] accepts.
pub const SETTING_NAMES: &[&str] = &[
    "consistency",
    "txn_split",
    "wait_timeout_ms",
    "split_wait_timeout_ms",
    "on_wait_timeout",
    "on_replica_loss",
    "on_replica_error",
    "on_missing_lsn",
    "read_fallback",
    "reader_retry_limit",
    "reader_lsn_max_age_ms",
    "startup_profile",
    "server_dialect",
    "identity_mode",
    "identity_host",
    "identity_port",
    "server_default_isolation",
    "write_functions",
    "read_functions",
    "unknown_functions",
    "warmup",
    "warmup_queue_capacity",
    "seed",
    "classify_cache_capacity",
    "max_inspected_message_bytes",
    "writer_hostgroup",
    "reader_hostgroup",
    "lsn_probe",
    "max_batch_bytes",
    "max_prepared_statements",
    "reader_response_timeout_ms",
    "reader_failure_threshold",
    "custom_settings",
    "capture_after_dml",
    "wal_block_size",
    "wal_segment_size",
];

/// A mutable configuration under construction.
#[derive(Clone, Debug)]
pub struct ConfigBuilder {
    config: Config,
}

fn parse_enum<T>(
    setting: &str,
    value: &str,
    parse: fn(&str) -> Option<T>,
    names: &[&str],
) -> Result<T, ConfigError> {
    parse(value).ok_or_else(|| {
        ConfigError::new(
            setting,
            format!("'{value}' is not one of {}", names.join(", ")),
        )
    })
}

fn parse_num<T: std::str::FromStr>(setting: &str, value: &str, max: u64) -> Result<T, ConfigError> {
    let v = value.trim();
    let n: u64 = v.parse().map_err(|_| {
        ConfigError::new(setting, format!("'{value}' is not a non-negative integer"))
    })?;
    if n > max {
        return Err(ConfigError::new(
            setting,
            format!("{n} is above the maximum {max}"),
        ));
    }
    v.parse::<T>()
        .map_err(|_| ConfigError::new(setting, format!("'{value}' is out of range")))
}

fn parse_bool(setting: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "1" | "yes" => Ok(true),
        "false" | "off" | "0" | "no" => Ok(false),
        _ => Err(ConfigError::new(
            setting,
            format!("'{value}' is not a boolean"),
        )),
    }
}

impl Default for ConfigBuilder {
    fn default() -> ConfigBuilder {
        ConfigBuilder {
            config: Config::defaults(),
        }
    }
}

impl ConfigBuilder {
    /// A builder holding SPEC §8's default for every setting.
    pub fn new() -> ConfigBuilder {
        ConfigBuilder::default()
    }

    /// Starts from an existing configuration (to change a few settings at runtime).
    pub fn from_config(config: &Config) -> ConfigBuilder {
        ConfigBuilder {
            config: config.clone(),
        }
    }

    /// Sets one setting from its text form (the C ABI and config files use this). Names are
    /// those of [`SETTING_NAMES`]; the error names the setting and the accepted values.
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut ConfigBuilder, ConfigError> {
        const MS_MAX: u64 = 24 * 3600 * 1000;
        let c = &mut self.config;
        match name.trim() {
            "consistency" => {
                c.consistency = parse_enum(name, value, Consistency::parse, Consistency::NAMES)?
            }
            "txn_split" => c.txn_split = parse_bool(name, value)?,
            "wait_timeout_ms" => c.wait_timeout_ms = parse_num(name, value, MS_MAX)?,
            "split_wait_timeout_ms" => c.split_wait_timeout_ms = parse_num(name, value, MS_MAX)?,
            "on_wait_timeout" => {
                c.on_wait_timeout =
                    parse_enum(name, value, OnWaitTimeout::parse, OnWaitTimeout::NAMES)?
            }
            "on_replica_loss" => {
                c.on_replica_loss =
                    parse_enum(name, value, OnReplicaLoss::parse, OnReplicaLoss::NAMES)?
            }
            "on_replica_error" => {
                c.on_replica_error =
                    parse_enum(name, value, OnReplicaError::parse, OnReplicaError::NAMES)?
            }
            "on_missing_lsn" => {
                c.on_missing_lsn =
                    parse_enum(name, value, OnMissingLsn::parse, OnMissingLsn::NAMES)?
            }
            "read_fallback" => {
                c.read_fallback = parse_enum(name, value, ReadFallback::parse, ReadFallback::NAMES)?
            }
            "reader_retry_limit" => c.reader_retry_limit = parse_num(name, value, 16)?,
            "reader_lsn_max_age_ms" => c.reader_lsn_max_age_ms = parse_num(name, value, MS_MAX)?,
            "startup_profile" => {
                c.startup_profile =
                    parse_enum(name, value, StartupProfile::parse, StartupProfile::NAMES)?
            }
            "server_dialect" => {
                c.server_dialect =
                    parse_enum(name, value, ServerDialect::parse, ServerDialect::NAMES)?
            }
            "identity_mode" => {
                c.identity_mode = parse_enum(name, value, IdentityMode::parse, IdentityMode::NAMES)?
            }
            "identity_host" => {
                let v = value.trim();
                if v.is_empty()
                    || v.len() > 255
                    || v.bytes().any(|b| b == 0 || b.is_ascii_whitespace())
                {
                    return Err(ConfigError::new(
                        name,
                        "must be a host name or address without spaces",
                    ));
                }
                c.identity_host = Some(v.to_string());
            }
            "identity_port" => c.identity_port = Some(parse_num(name, value, u64::from(u16::MAX))?),
            "server_default_isolation" => {
                c.server_default_isolation = Isolation::parse(value).ok_or_else(|| {
                    ConfigError::new(
                        name,
                        "expected read committed, repeatable read or serializable",
                    )
                })?
            }
            "write_functions" => {
                for f in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    if !c.write_functions.add(f) {
                        return Err(ConfigError::new(
                            name,
                            format!("'{f}' is not a function name"),
                        ));
                    }
                }
            }
            "read_functions" => {
                for f in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    if !may_be_read_function(f) {
                        return Err(ConfigError::new(
                            name,
                            format!("'{f}' names a built-in that is never read-safe"),
                        ));
                    }
                    if !c.read_functions.add(f) {
                        return Err(ConfigError::new(
                            name,
                            format!("'{f}' is not a function name"),
                        ));
                    }
                }
            }
            "unknown_functions" => {
                c.unknown_functions = parse_enum(
                    name,
                    value,
                    UnknownFunctions::parse,
                    UnknownFunctions::NAMES,
                )?
            }
            "warmup" => c.warmup = parse_enum(name, value, Warmup::parse, Warmup::NAMES)?,
            "warmup_queue_capacity" => c.warmup_queue_capacity = parse_num(name, value, 1 << 20)?,
            "seed" => c.seed = parse_num(name, value, u64::MAX)?,
            "classify_cache_capacity" => {
                c.classify_cache_capacity = parse_num(name, value, 1 << 24)?
            }
            "max_inspected_message_bytes" => {
                c.limits.max_inspected_len = parse_num(name, value, 1 << 30)?;
                if c.limits.max_inspected_len < 1024 {
                    return Err(ConfigError::new(name, "must be at least 1024"));
                }
            }
            "lsn_probe" => {
                // `true`/`false` and the other boolean spellings of the old on/off setting
                // keep their meaning.
                c.lsn_probe = match parse_bool(name, value) {
                    Ok(true) => LsnProbe::On,
                    Ok(false) => LsnProbe::Off,
                    Err(_) => parse_enum(name, value, LsnProbe::parse, LsnProbe::NAMES)?,
                }
            }
            "max_batch_bytes" => {
                c.max_batch_bytes = parse_num(name, value, 1 << 30)?;
                if c.max_batch_bytes < 1024 {
                    return Err(ConfigError::new(name, "must be at least 1024"));
                }
            }
            "max_prepared_statements" => {
                c.max_prepared_statements = parse_num(name, value, 1 << 16)?;
                if c.max_prepared_statements == 0 {
                    return Err(ConfigError::new(name, "must be at least 1"));
                }
            }
            "reader_response_timeout_ms" => {
                c.reader_response_timeout_ms = parse_num(name, value, MS_MAX)?
            }
            "reader_failure_threshold" => {
                c.reader_failure_threshold = parse_num(name, value, 1000)?;
                if c.reader_failure_threshold == 0 {
                    return Err(ConfigError::new(name, "must be at least 1"));
                }
            }
            "custom_settings" => {
                for n in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let ok = n.len() <= 63
                        && n.contains('.')
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
                    if !ok {
                        return Err(ConfigError::new(
                            name,
                            format!("'{n}' is not a placeholder setting name (like app.tenant)"),
                        ));
                    }
                    let n = n.to_ascii_lowercase();
                    if !c.custom_settings.contains(&n) {
                        c.custom_settings.push(n);
                    }
                }
            }
            "capture_after_dml" => c.capture_after_dml = parse_bool(name, value)?,
            "wal_block_size" => {
                c.wal_block_size = parse_num(name, value, 1 << 16)?;
                if !c.wal_block_size.is_power_of_two() || c.wal_block_size < 1024 {
                    return Err(ConfigError::new(
                        name,
                        "must be a power of two, at least 1024",
                    ));
                }
            }
            "wal_segment_size" => {
                c.wal_segment_size = parse_num(name, value, 1 << 30)?;
                if !c.wal_segment_size.is_power_of_two() || c.wal_segment_size < (1 << 20) {
                    return Err(ConfigError::new(
                        name,
                        "must be a power of two, at least 1 MiB",
                    ));
                }
            }
            "writer_hostgroup" => {
                c.writer_hostgroup = parse_num(name, value, u64::from(u32::MAX - 1))?
            }
            "reader_hostgroup" => {
                c.reader_hostgroup = if value.trim().eq_ignore_ascii_case("none") {
                    None
                } else {
                    Some(parse_num(name, value, u64::from(u32::MAX - 1))?)
                }
            }
            other => {
                return Err(ConfigError::new(
                    other,
                    format!(
                        "unknown setting; known settings are {}",
                        SETTING_NAMES.join(", ")
                    ),
                ))
            }
        }
        Ok(self)
    }

    /// Validates the combination and yields the immutable configuration.
    pub fn build(self) -> Result<Config, ConfigError> {
        let c = self.config;
        if c.server_dialect == ServerDialect::Stock && c.startup_profile != StartupProfile::Off {
            return Err(ConfigError::new(
                "server_dialect",
                format!(
                    "'stock' servers refuse the _polar_* startup keys: it needs startup_profile = off, not {}",
                    c.startup_profile
                ),
            ));
        }
        if c.identity_mode == IdentityMode::Configured
            && (c.identity_host.is_none() || c.identity_port.is_none())
        {
            return Err(ConfigError::new(
                "identity_mode",
                "'configured' needs both identity_host and identity_port",
            ));
        }
        if c.reader_response_timeout_ms != 0
            && c.reader_response_timeout_ms
                <= u64::from(c.split_wait_timeout_ms.max(c.wait_timeout_ms))
        {
            return Err(ConfigError::new(
                "reader_response_timeout_ms",
                "must be above split_wait_timeout_ms and wait_timeout_ms (a reader waiting for its position is not hung)",
            ));
        }
        if c.wal_segment_size < c.wal_block_size {
            return Err(ConfigError::new(
                "wal_segment_size",
                "must be at least wal_block_size",
            ));
        }
        if let Some(f) = c
            .read_functions
            .entries()
            .into_iter()
            .find(|f| c.write_functions.contains(f.trim_end_matches('*')))
        {
            return Err(ConfigError::new(
                "read_functions",
                format!("'{f}' is also on write_functions"),
            ));
        }
        if c.reader_hostgroup == Some(c.writer_hostgroup) {
            return Err(ConfigError::new(
                "reader_hostgroup",
                "must differ from writer_hostgroup",
            ));
        }
        if c.server_default_isolation == Isolation::ReadUncommitted {
            // PostgreSQL runs it as READ COMMITTED; store what it means.
            let mut c = c;
            c.server_default_isolation = Isolation::ReadCommitted;
            return Ok(c);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_spec_section_8() {
        let c = ConfigBuilder::new().build().unwrap();
        assert_eq!(c.consistency, Consistency::Session);
        assert!(c.txn_split);
        assert_eq!(c.wait_timeout_ms, 1000);
        assert_eq!(c.split_wait_timeout_ms, 5000);
        assert_eq!(c.on_wait_timeout, OnWaitTimeout::Primary);
        assert_eq!(c.on_replica_loss, OnReplicaLoss::ReplicaThenPrimary);
        assert_eq!(c.on_replica_error, OnReplicaError::Primary);
        assert_eq!(c.on_missing_lsn, OnMissingLsn::Primary);
        assert_eq!(c.read_fallback, ReadFallback::Primary);
        assert_eq!(c.reader_retry_limit, 1);
        assert_eq!(c.reader_lsn_max_age_ms, 5000);
        assert_eq!(c.startup_profile, StartupProfile::V15);
        assert_eq!(c.server_default_isolation, Isolation::ReadCommitted);
    }

    #[test]
    fn set_parses_and_names_the_bad_setting() {
        let mut b = ConfigBuilder::new();
        b.set("consistency", "GLOBAL").unwrap();
        b.set("txn_split", "off").unwrap();
        b.set("wait_timeout_ms", "250").unwrap();
        b.set("write_functions", "audit_log, myschema_*").unwrap();
        b.set("server_default_isolation", "repeatable read")
            .unwrap();
        let c = b.clone().build().unwrap();
        assert_eq!(c.consistency, Consistency::Global);
        assert!(!c.txn_split);
        assert_eq!(c.wait_timeout_ms, 250);
        assert!(c.write_functions.contains("audit_log"));
        assert!(c.write_functions.contains("myschema_touch"));
        assert_eq!(c.server_default_isolation, Isolation::RepeatableRead);

        let e = b.set("consistency", "strong").unwrap_err();
        assert_eq!(e.setting, "consistency");
        assert!(e.message.contains("eventual"), "{e}");
        let e = b.set("wait_timeout_ms", "-1").unwrap_err();
        assert_eq!(e.setting, "wait_timeout_ms");
        b.set("lsn_probe", "off").unwrap();
        assert_eq!(b.clone().build().unwrap().lsn_probe, LsnProbe::Off);
        let e = b.set("nonsense", "1").unwrap_err();
        assert_eq!(e.setting, "nonsense");
        let e = b.set("write_functions", "bad name").unwrap_err();
        assert_eq!(e.setting, "write_functions");
    }

    #[test]
    fn f_policy_settings_parse_and_refuse_never_safe_read_functions() {
        let c = ConfigBuilder::new().build().unwrap();
        assert_eq!(c.unknown_functions, UnknownFunctions::Primary);
        assert!(c.read_functions.is_empty());
        let mut b = ConfigBuilder::new();
        b.set("unknown_functions", "Replica").unwrap();
        b.set("read_functions", "my_report, stats_*").unwrap();
        let c = b.clone().build().unwrap();
        assert_eq!(c.unknown_functions, UnknownFunctions::Replica);
        assert!(c.read_functions.contains("my_report"));
        assert!(c.read_functions.contains("stats_daily"));
        assert_eq!(
            b.set("unknown_functions", "reader").unwrap_err().setting,
            "unknown_functions"
        );
        for never in [
            "set_config",
            "pg_advisory_lock",
            "pg_try_*",
            "lo_open",
            "pg_stat_reset_shared",
        ] {
            let e = b.set("read_functions", never).unwrap_err();
            assert_eq!(e.setting, "read_functions", "{never}");
        }
        let mut b = ConfigBuilder::new();
        b.set("write_functions", "audit_log").unwrap();
        b.set("read_functions", "audit_log").unwrap();
        assert_eq!(b.build().unwrap_err().setting, "read_functions");
    }

    #[test]
    fn w7_stock_with_polar_profile_is_refused() {
        let mut b = ConfigBuilder::new();
        b.set("server_dialect", "stock").unwrap();
        let e = b.clone().build().unwrap_err();
        assert_eq!(e.setting, "server_dialect");
        b.set("startup_profile", "off").unwrap();
        assert!(b.build().is_ok());
    }

    #[test]
    fn configured_identity_needs_host_and_port() {
        let mut b = ConfigBuilder::new();
        b.set("identity_mode", "configured").unwrap();
        assert_eq!(b.clone().build().unwrap_err().setting, "identity_mode");
        b.set("identity_host", "10.0.0.1").unwrap();
        b.set("identity_port", "5432").unwrap();
        assert!(b.build().is_ok());
    }
}
