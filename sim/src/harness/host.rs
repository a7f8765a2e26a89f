//! A fake proxy host: it owns "connections" to the simulated servers and carries out the
//! engine's actions exactly as a proxy would (byte actions through `polarsplit::Streams`,
//! writer connects, reader acquire/release through its own pool, closes), while clients run
//! random workloads and faults strike. A `naive` host instead routes every SELECT outside a
//! transaction to a reader with no wait — the checker must catch it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use polarsplit::internals::protocol::framer::frame;
use polarsplit::internals::protocol::RfqExtensions;
use polarsplit::Engine;
use polarsplit::Limits;
use polarsplit::ReaderKey;
use polarsplit::Streams;
use polarsplit::{Action, ClientInfo, Decision, Event as SEvent, Outcome, Reason, Session};
use polarsplit::{
    Config, ConfigBuilder, Consistency, OnMissingLsn, OnReplicaLoss, OnWaitTimeout, ReadFallback,
    ServerDialect, StartupProfile,
};

use super::families::{present_token, resync, take_token, token_read, Families, FamilyWork};
use super::shape;
use super::workload::{Op, OpKind, Workload};
use crate::client::{self, Decoder, Msg};
use crate::{
    Cluster, ClusterConfig, ConnId, Dialect, Injection, Matcher, Rng, ServerId, ServerRef, Target,
};

/// Everything that defines one scenario; derived from its seed.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub seed: u64,
    pub dialect: Dialect,
    pub config: Config,
    pub cluster: ClusterConfig,
    pub clients: u32,
    pub ops_per_client: u32,
    pub keys: i64,
    /// Per-mille chance of a fault at each host step.
    pub fault_per_mille: u64,
    pub allow_failover: bool,
    pub naive: bool,
    /// Scenario families beyond the CI set (all off in [`Scenario::random`]).
    pub families: Families,
}

impl Scenario {
    /// A random scenario; the same seed gives the same scenario.
    pub fn random(seed: u64) -> Scenario {
        let mut r = Rng::derive(seed, "scenario", 0);
        let dialect = match r.range(0, 9) {
            0..=5 => Dialect::Awide,
            6..=7 => Dialect::Polardb,
            _ => Dialect::Stock,
        };
        // Through the builder, as a host does: every setting checked, then the combination.
        let mut c = ConfigBuilder::new();
        let mut set = |name: &str, value: &str| {
            c.set(name, value)
                .unwrap_or_else(|e| panic!("scenario {seed}: {e}"));
        };
        set("seed", &seed.to_string());
        set(
            "server_dialect",
            match dialect {
                Dialect::Awide => ServerDialect::Awide,
                Dialect::Polardb => ServerDialect::PolarDb,
                Dialect::Stock => ServerDialect::Stock,
            }
            .as_str(),
        );
        if dialect == Dialect::Stock {
            set("startup_profile", StartupProfile::Off.as_str());
        } else if r.range(0, 4) == 0 {
            set("startup_profile", StartupProfile::Legacy.as_str());
        }
        set(
            "consistency",
            match r.range(0, 19) {
                0 => Consistency::Off,
                1 => Consistency::Eventual,
                2..=4 => Consistency::Global,
                _ => Consistency::Session,
            }
            .as_str(),
        );
        set("txn_split", if r.range(0, 9) != 0 { "on" } else { "off" });
        set(
            "wait_timeout_ms",
            &[20, 80, 300, 1000][r.range(0, 3) as usize].to_string(),
        );
        set(
            "split_wait_timeout_ms",
            &[50, 300, 2000][r.range(0, 2) as usize].to_string(),
        );
        set(
            "on_wait_timeout",
            match r.range(0, 9) {
                0 => OnWaitTimeout::Error,
                1 => OnWaitTimeout::Warning,
                _ => OnWaitTimeout::Primary,
            }
            .as_str(),
        );
        set(
            "on_replica_loss",
            match r.range(0, 9) {
                0 => OnReplicaLoss::Primary,
                1 => OnReplicaLoss::ReplicaThenError,
                _ => OnReplicaLoss::ReplicaThenPrimary,
            }
            .as_str(),
        );
        set(
            "on_missing_lsn",
            match r.range(0, 9) {
                0 => OnMissingLsn::Error,
                1 => OnMissingLsn::Warning,
                _ => OnMissingLsn::Primary,
            }
            .as_str(),
        );
        set(
            "read_fallback",
            if r.range(0, 14) == 0 {
                ReadFallback::Error
            } else {
                ReadFallback::Primary
            }
            .as_str(),
        );
        set(
            "reader_lsn_max_age_ms",
            &[5, 50, 5000][r.range(0, 2) as usize].to_string(),
        );
        let c = c.build().unwrap_or_else(|e| panic!("scenario {seed}: {e}"));
        let cluster = ClusterConfig {
            seed,
            dialect,
            readers: r.range(1, 3) as usize,
            initial_keys: 20,
            min_lag_ms: r.range(0, 20),
            max_lag_ms: [5, 60, 250][r.range(0, 2) as usize],
            lag_change_interval_ms: 200,
            flush_interval_ms: [50, 200][r.range(0, 1) as usize],
            missing_lsn_per_million: if r.range(0, 9) == 0 { 50_000 } else { 0 },
            ..ClusterConfig::default()
        };
        Scenario {
            seed,
            dialect,
            config: c,
            cluster,
            clients: r.range(2, 4) as u32,
            ops_per_client: r.range(8, 20) as u32,
            keys: r.range(3, 8) as i64,
            fault_per_mille: [0, 5, 20][r.range(0, 2) as usize],
            allow_failover: r.range(0, 14) == 0,
            naive: false,
            families: Families::NONE,
        }
    }

    /// The same scenario with these families on: the servers buffer extended-protocol
    /// answers until Sync or Flush as real ones do (extended, pipeline) and record session
    /// state (session_state). Nothing else of the scenario changes.
    pub fn with_families(mut self, f: Families) -> Scenario {
        self.families = f;
        if f.extended || f.pipeline || f.flush {
            self.cluster.hold_until_flush = true;
        }
        if f.session_state {
            self.cluster.record_session_state = true;
        }
        self
    }
}

/// What one client did: each operation, the messages it received and when.
#[derive(Clone, Debug)]
pub struct OpRecord {
    pub op: Op,
    pub msgs: Vec<Msg>,
    pub sent_at: u64,
    pub done_at: u64,
    /// The engine's latest writer LSN when the operation was sent (global mode).
    pub writer_lsn_at_send: u64,
    /// Writer generation when sent.
    pub generation_at_send: u64,
}

#[derive(Debug)]
struct InFlight {
    op: Op,
    msgs: Vec<Msg>,
    sent_at: u64,
    writer_lsn_at_send: u64,
    generation_at_send: u64,
}

#[derive(Debug)]
struct ClientState {
    session: Option<Session>,
    streams: Streams,
    writer: Option<u64>,
    /// Naive host: the client's reader connection.
    naive_reader: Option<u64>,
    naive_in_txn: bool,
    readers: BTreeSet<u64>,
    work: Workload,
    family: Option<FamilyWork>,
    /// A causal token to present before anything else, and the read it is for (§11).
    token: std::collections::VecDeque<Op>,
    /// Families: a client thinks between operations (virtual ms drawn from this), so that
    /// time passes while clients work.
    think: Option<Rng>,
    ready_at: u64,
    current: Option<InFlight>,
    decoder: Decoder,
    /// Naive host: one decoder per backend connection (their streams reach the client as is).
    naive_decoders: BTreeMap<u64, Decoder>,
    authenticated: bool,
    closed: bool,
    unconsumed: Vec<u8>,
    log: Vec<OpRecord>,
    lost_reported: BTreeSet<u64>,
    /// Asynchronous messages received between operations, with the time.
    async_log: Vec<(u64, Msg)>,
    /// A write of this client just committed (causal family: its position may be handed on).
    committed_write: Option<(i64, i64)>,
    /// Causal family: the write whose token this client asked for (`SHOW`), and the token
    /// the engine answered, to hand on.
    token_asked: Option<(i64, i64)>,
    token_taken: Option<(String, i64, i64)>,
    /// An error answered the batch this client left open at a Flush: its next message is
    /// the Sync a driver sends then.
    resync: bool,
}

#[derive(Clone, Copy, Debug)]
struct Pooled {
    conn: u64,
    server: u32,
    key: ReaderKey,
    dirty: bool,
}

/// Who sent the n-th Query on a connection: (client, operation index).
type Attribution = BTreeMap<u64, Vec<(usize, usize)>>;

/// The result of running one scenario.
pub struct Run {
    pub scenario: Scenario,
    pub cluster: Cluster,
    pub engine: Arc<Engine>,
    pub clients: Vec<Vec<OpRecord>>,
    pub attribution: Attribution,
    pub decisions: Vec<Decision>,
    /// The host found the engine breaking the byte contract, or the run never finished.
    pub host_errors: Vec<String>,
    /// Clients whose session ended early (writer lost at failover, policy disconnect).
    pub closed_clients: BTreeSet<usize>,
    /// Sessions that ended a transaction with a reader still pinned or attached.
    pub pin_leaks: Vec<String>,
    pub failovers: u32,
    /// Per client: asynchronous messages received between operations.
    pub async_msgs: Vec<Vec<(u64, Msg)>>,
    /// Reader faults of the reader_faults family: (time, what).
    pub reader_faults: Vec<(u64, String)>,
}

/// The host.
pub struct Host {
    sc: Scenario,
    cluster: Cluster,
    engine: Arc<Engine>,
    clients: Vec<ClientState>,
    owner: BTreeMap<u64, usize>,
    pool: Vec<Pooled>,
    frame_buf: BTreeMap<u64, Vec<u8>>,
    /// The key each reader connection was opened under.
    keys: BTreeMap<u64, ReaderKey>,
    attribution: Attribution,
    rng: Rng,
    decisions: Vec<Decision>,
    host_errors: Vec<String>,
    pin_leaks: Vec<String>,
    last_monitor: u64,
    stopped: Vec<(ServerId, u64)>,
    failovers: u32,
    /// The families' own random stream (faults, token passing).
    family_rng: Rng,
    /// The monitor's connection to each reader: the server incarnation it was opened at.
    monitor_conn: BTreeMap<ServerId, u64>,
    /// A frozen reader's probe: when it was sent (it times out after 1 s).
    monitor_waiting: BTreeMap<ServerId, u64>,
    /// Readers the monitor has reported down.
    monitor_down: BTreeSet<ServerId>,
    /// After a failure the monitor tries a reader again only 200 ms later.
    monitor_retry: BTreeMap<ServerId, u64>,
    reader_faults: Vec<(u64, String)>,
    /// `SIM_TRACE=<client>`: that client's wire traffic on stderr (a debugging aid).
    trace: Option<Trace>,
}

/// The wire traffic of one client, printed as it happens (`SIM_TRACE=<client>`).
struct Trace {
    client: usize,
    backends: BTreeMap<u64, Decoder>,
}

impl Trace {
    fn from_env() -> Option<Trace> {
        let client = std::env::var("SIM_TRACE").ok()?.parse().ok()?;
        Some(Trace {
            client,
            backends: BTreeMap::new(),
        })
    }

    /// Frontend messages the engine sent to a backend connection.
    fn sent(&self, now: u64, i: usize, conn: u64, bytes: &[u8]) {
        if i != self.client {
            return;
        }
        let mut rest = bytes;
        while let Ok(Some(f)) = frame(rest, &Limits::default()) {
            use polarsplit::internals::protocol::FrontendMessage as F;
            let short = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(90)]).into_owned();
            let what = match F::parse(f.tag, f.body) {
                Ok(F::Query { sql }) => format!("Query {:?}", short(sql)),
                Ok(F::Parse { statement, sql, .. }) => {
                    format!("Parse {:?} {:?}", short(statement), short(sql))
                }
                Ok(F::Bind { portal, statement }) => {
                    format!("Bind {:?} {:?}", short(portal), short(statement))
                }
                Ok(F::Close { kind, name }) => format!("Close {} {:?}", kind as char, short(name)),
                Ok(F::Describe { kind, name }) => {
                    format!("Describe {} {:?}", kind as char, short(name))
                }
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("{} ({e})", f.tag as char),
            };
            eprintln!("t={now} -> {conn}: {what}");
            rest = &rest[f.wire_len..];
        }
    }

    /// Backend messages read from a connection.
    fn read(&mut self, now: u64, i: usize, conn: u64, bytes: &[u8]) {
        if i != self.client {
            return;
        }
        let ext = RfqExtensions {
            lsn: true,
            xact: true,
        };
        for m in self
            .backends
            .entry(conn)
            .or_insert_with(|| Decoder::new(ext))
            .feed(bytes)
        {
            eprintln!("t={now} <- {conn}: {m:?}");
        }
    }
}

const LIMIT_MS: u64 = 600_000;

impl Host {
    pub fn new(sc: Scenario) -> Host {
        let cluster = Cluster::new(sc.cluster.clone());
        let engine = Engine::new(sc.config.clone());
        for r in cluster.readers() {
            engine.add_reader(r.0, 1);
        }
        let clients = (0..sc.clients as usize)
            .map(|i| ClientState {
                session: (!sc.naive).then(|| {
                    Session::new(
                        engine.clone(),
                        ClientInfo {
                            client_addr: Some((format!("10.0.0.{}", i + 1), 40_000 + i as u16)),
                            proxy_addr: Some(("127.0.0.1".into(), 6432)),
                            writer_hostgroup: None,
                        },
                    )
                }),
                streams: Streams::new(),
                writer: None,
                naive_reader: None,
                naive_in_txn: false,
                readers: BTreeSet::new(),
                work: Workload::new(sc.seed, i as u64, sc.ops_per_client, sc.keys),
                family: sc.families.any().then(|| {
                    FamilyWork::new(sc.families, sc.seed, i as u64, sc.ops_per_client, sc.keys)
                }),
                token: Default::default(),
                think: sc
                    .families
                    .any()
                    .then(|| Rng::derive(sc.seed, "family-think", i as u64)),
                ready_at: 0,
                current: None,
                decoder: Decoder::new(RfqExtensions::default()),
                naive_decoders: BTreeMap::new(),
                authenticated: false,
                closed: false,
                unconsumed: Vec::new(),
                log: Vec::new(),
                lost_reported: BTreeSet::new(),
                async_log: Vec::new(),
                committed_write: None,
                token_asked: None,
                token_taken: None,
                resync: false,
            })
            .collect();
        Host {
            rng: Rng::derive(sc.seed, "host", 0),
            family_rng: Rng::derive(sc.seed, "family-host", 0),
            monitor_conn: BTreeMap::new(),
            monitor_waiting: BTreeMap::new(),
            monitor_down: BTreeSet::new(),
            monitor_retry: BTreeMap::new(),
            reader_faults: Vec::new(),
            trace: Trace::from_env(),
            sc,
            cluster,
            engine,
            clients,
            owner: BTreeMap::new(),
            pool: Vec::new(),
            frame_buf: BTreeMap::new(),
            keys: BTreeMap::new(),
            attribution: BTreeMap::new(),
            decisions: Vec::new(),
            host_errors: Vec::new(),
            pin_leaks: Vec::new(),
            last_monitor: 0,
            stopped: Vec::new(),
            failovers: 0,
        }
    }

    /// Runs the scenario to the end (every client done or closed) or to the time limit.
    pub fn run(mut self) -> Run {
        self.engine.set_writer_identity(0, self.writer_identity());
        for i in 0..self.clients.len() {
            self.start_client(i);
        }
        let mut idle_rounds = 0u32;
        loop {
            self.monitor();
            let progressed = self.step();
            if self.all_done() {
                break;
            }
            if progressed {
                idle_rounds = 0;
                continue;
            }
            idle_rounds += 1;
            let now = self.cluster.now();
            // Families run things that may hang (a Flush, a frozen reader): 120 s of nothing is
            // enough to say so.
            let idle_limit = if self.sc.families.any() {
                24_000
            } else {
                100_000
            };
            if now > LIMIT_MS || idle_rounds > idle_limit {
                self.host_errors
                    .push(format!("stuck: clients did not finish by t={now}"));
                if std::env::var("SIM_STUCK").is_ok() {
                    for (i, c) in self.clients.iter().enumerate() {
                        if c.current.is_some() {
                            eprintln!("stuck client {i}: {:#?}", c.session);
                        }
                    }
                }
                break;
            }
            let next = self
                .cluster
                .next_event_time()
                .unwrap_or(now + 5)
                .min(now + 5)
                .min(self.next_deadline().unwrap_or(u64::MAX));
            self.cluster.advance_to(next.max(now + 1));
        }
        if self.sc.families.notify {
            // Whatever the servers sent last (notifications to idle listeners) is read.
            for _ in 0..100 {
                self.monitor();
                if !self.step() {
                    break;
                }
            }
        }
        Run {
            clients: self.clients.iter().map(|c| c.log.clone()).collect(),
            closed_clients: self
                .clients
                .iter()
                .enumerate()
                .filter(|(_, c)| c.closed && (c.current.is_some() || c.work_left()))
                .map(|(i, _)| i)
                .collect(),
            scenario: self.sc,
            cluster: self.cluster,
            engine: self.engine,
            attribution: self.attribution,
            decisions: self.decisions,
            host_errors: self.host_errors,
            pin_leaks: self.pin_leaks,
            failovers: self.failovers,
            async_msgs: self.clients.iter().map(|c| c.async_log.clone()).collect(),
            reader_faults: self.reader_faults,
        }
    }

    fn all_done(&self) -> bool {
        self.clients
            .iter()
            .all(|c| c.closed || (c.current.is_none() && !c.work_left()))
    }

    fn monitor(&mut self) {
        let now = self.cluster.now();
        if now < self.last_monitor + 10 && self.last_monitor != 0 {
            return;
        }
        self.last_monitor = now.max(1);
        for r in self.cluster.readers() {
            if !self.monitor_probe(r, now) {
                continue;
            }
            if self.cluster.is_up(r) {
                if let Some(l) = self.cluster.replay_lsn(r) {
                    self.engine.reader_sample(r.0, l, now);
                }
            }
        }
        let primary = self.cluster.primary();
        if self.cluster.is_up(primary) {
            self.engine.writer_sample(0, self.cluster.insert_lsn(), now);
        }
        // Restart stopped servers after a while.
        let due: Vec<ServerId> = self
            .stopped
            .iter()
            .filter(|(_, t)| *t <= now)
            .map(|(s, _)| *s)
            .collect();
        for s in due {
            self.stopped.retain(|(x, _)| *x != s);
            if self.cluster.start_server(s).is_ok() {
                self.engine.set_reader_health(s.0, true);
            }
        }
    }

    fn start_client(&mut self, i: usize) {
        let startup = client::startup_plain("app", "db");
        if self.sc.naive {
            let Ok(w) = self.cluster.connect(ServerRef::Primary) else {
                self.clients[i].closed = true;
                return;
            };
            let _ = self.cluster.write(w, &startup);
            let _ = self.cluster.read_all(w);
            self.owner.insert(w.0, i);
            self.clients[i].writer = Some(w.0);
            self.clients[i].authenticated = true;
            return;
        }
        self.feed_client(i, &startup);
    }

    /// What the host's sockets tell at once, before anything else of this round: an idle
    /// pooled connection or the monitor's connection of a reader that ended (a stop, a crash —
    /// its EOF arrives within a network round trip) is reported (R-1a: an outage of that
    /// reader; R-1b: a failure). Returns whether anything was reported.
    fn watch_connections(&mut self) -> bool {
        let now = self.cluster.now();
        let cluster = &self.cluster;
        let (gone, kept): (Vec<Pooled>, Vec<Pooled>) = std::mem::take(&mut self.pool)
            .into_iter()
            .partition(|p| cluster.server_closed(ConnId(p.conn)));
        self.pool = kept;
        let mut reported = !gone.is_empty();
        for p in gone {
            if self.trace.is_some() {
                eprintln!(
                    "t={now} pooled connection {} of server{} lost",
                    p.conn, p.server
                );
            }
            self.engine.reader_lost(p.server, now);
            self.engine.connection_closed(p.conn);
        }
        let broken: Vec<ServerId> = self
            .monitor_conn
            .iter()
            .filter(|(r, at)| self.cluster.incarnation(**r) != Some(**at))
            .map(|(r, _)| *r)
            .collect();
        for r in broken {
            self.monitor_conn.remove(&r);
            self.monitor_failed(r, now);
            reported = true;
        }
        reported
    }

    /// The earliest time a session asked to be called back at (R-1b).
    fn next_deadline(&self) -> Option<u64> {
        self.clients
            .iter()
            .filter(|c| !c.closed)
            .filter_map(|c| c.session.as_ref().and_then(Session::next_deadline))
            .min()
    }

    /// Tells every session whose deadline has come that the time passed (R-1b), as a proxy's
    /// timer does; the session may give up on a reader (the host then closes it). A deadline
    /// still due right after `on_timeout` would spin a real host's timer: a host error.
    fn deadlines(&mut self) {
        let now = self.cluster.now();
        for i in 0..self.clients.len() {
            if self.clients[i].closed {
                continue;
            }
            let Some(s) = self.clients[i].session.as_mut() else {
                continue;
            };
            if s.is_closed() || s.next_deadline().is_none_or(|d| d > now) {
                continue;
            }
            if let Err(e) = s.on_timeout(now) {
                self.host_errors
                    .push(format!("client {i}: on_timeout: {e}"));
            }
            if let Some(d) = s.next_deadline().filter(|d| *d <= now) {
                self.host_errors.push(format!(
                    "client {i}: deadline {d} still due after on_timeout at t={now}"
                ));
            }
            self.drain(i);
        }
    }

    /// One round: deadlines pass, clients send, backends answer, faults strike. Returns
    /// whether anything moved.
    fn step(&mut self) -> bool {
        self.deadlines();
        let mut progressed = self.watch_connections();
        for i in 0..self.clients.len() {
            if self.clients[i].closed {
                continue;
            }
            if !self.clients[i].unconsumed.is_empty() {
                let rest = std::mem::take(&mut self.clients[i].unconsumed);
                self.feed_client(i, &rest);
                progressed = true;
            }
            let now = self.cluster.now();
            if self.clients[i].authenticated
                && self.clients[i].current.is_none()
                && now >= self.clients[i].ready_at
            {
                if let Some(op) = self.clients[i].next_op() {
                    self.send_op(i, op);
                    progressed = true;
                }
            }
        }
        let conns: Vec<u64> = self.owner.keys().copied().collect();
        for conn in conns {
            let Some(&i) = self.owner.get(&conn) else {
                continue;
            };
            let pending = self.cluster.pending_output(ConnId(conn));
            if pending > 0 {
                let chunk = match self.rng.range(0, 3) {
                    0 => self.rng.range(1, 16) as usize,
                    1 => self.rng.range(1, 400) as usize,
                    _ => usize::MAX,
                };
                let bytes = self.cluster.read(ConnId(conn), chunk);
                let now = self.cluster.now();
                if let Some(t) = self.trace.as_mut() {
                    t.read(now, i, conn, &bytes);
                }
                self.backend_bytes(i, conn, &bytes);
                progressed = true;
            } else if self.cluster.server_closed(ConnId(conn))
                && !self.clients[i].lost_reported.contains(&conn)
            {
                self.clients[i].lost_reported.insert(conn);
                self.owner.remove(&conn);
                self.conn_lost(i, conn);
                progressed = true;
            }
        }
        if self.sc.fault_per_mille > 0 && self.rng.range(0, 999) < self.sc.fault_per_mille {
            self.fault();
        }
        if self.sc.families.reader_faults && self.family_rng.range(0, 999) < 6 {
            self.reader_fault();
        }
        if self.sc.families.causal {
            self.pass_positions();
        }
        progressed
    }

    fn send_op(&mut self, i: usize, op: Op) {
        let now = self.cluster.now();
        let view = self.engine.writer_view(0);
        let bytes = op.bytes();
        if self.trace.as_ref().is_some_and(|t| t.client == i) {
            eprintln!(
                "t={now} client {i} op {} => {:?} {:?}",
                self.clients[i].log.len(),
                op.sql,
                op.script
            );
        }
        self.clients[i].current = Some(InFlight {
            op,
            msgs: Vec::new(),
            sent_at: now,
            writer_lsn_at_send: view.writer_lsn.0,
            generation_at_send: view.generation,
        });
        if self.sc.naive {
            self.naive_send(i, &bytes);
            return;
        }
        // Split the client's bytes at a random point: bytes may arrive split anywhere.
        let cut = self.rng.range(0, bytes.len() as u64) as usize;
        let (a, b) = bytes.split_at(cut);
        self.feed_client(i, a);
        if !self.clients[i].closed {
            self.feed_client(i, b);
        }
    }

    fn naive_send(&mut self, i: usize, bytes: &[u8]) {
        let op = self.clients[i]
            .current
            .as_ref()
            .map(|f| f.op.sql.clone())
            .unwrap_or_default();
        let upper = op.to_ascii_uppercase();
        if upper.starts_with("BEGIN") || upper.starts_with("START") {
            self.clients[i].naive_in_txn = true;
        }
        let to_reader = !self.clients[i].naive_in_txn
            && upper.starts_with("SELECT")
            && !upper.contains("FOR UPDATE")
            && !self.cluster.readers().is_empty();
        if upper.starts_with("COMMIT") || upper.starts_with("ROLLBACK") {
            self.clients[i].naive_in_txn = false;
        }
        let conn = if to_reader {
            match self.clients[i].naive_reader {
                Some(c) if !self.cluster.server_closed(ConnId(c)) => c,
                _ => {
                    let readers = self.cluster.readers();
                    let r = readers[self.rng.range(0, readers.len() as u64 - 1) as usize];
                    let Ok(c) = self.cluster.connect(ServerRef::Id(r)) else {
                        self.clients[i].closed = true;
                        return;
                    };
                    let _ = self.cluster.write(c, &client::startup_plain("app", "db"));
                    let _ = self.cluster.read_all(c);
                    self.owner.insert(c.0, i);
                    self.clients[i].naive_reader = Some(c.0);
                    c.0
                }
            }
        } else {
            match self.clients[i].writer {
                Some(w) => w,
                None => return,
            }
        };
        self.attribute(i, conn, bytes);
        let _ = self.cluster.write(ConnId(conn), bytes);
    }

    fn feed_client(&mut self, i: usize, bytes: &[u8]) {
        let now = self.cluster.now();
        let Some(s) = self.clients[i].session.as_mut() else {
            return;
        };
        match s.recv_client(bytes, now) {
            Ok(n) => {
                self.clients[i].streams.fed_client(&bytes[..n]);
                if n < bytes.len() {
                    self.clients[i].unconsumed = bytes[n..].to_vec();
                }
            }
            Err(e) => self
                .host_errors
                .push(format!("client {i}: recv_client: {e}")),
        }
        self.drain(i);
    }

    fn backend_bytes(&mut self, i: usize, conn: u64, bytes: &[u8]) {
        if self.sc.naive {
            let msgs = self.clients[i]
                .naive_decoders
                .entry(conn)
                .or_insert_with(|| Decoder::new(RfqExtensions::default()))
                .feed(bytes);
            self.client_messages(i, msgs);
            return;
        }
        let now = self.cluster.now();
        let Some(s) = self.clients[i].session.as_mut() else {
            return;
        };
        match s.recv_backend(conn, bytes, now) {
            Ok(()) => self.clients[i].streams.fed_backend(conn, bytes),
            Err(e) => {
                // The host fed bytes of a connection the session no longer uses: a host bug
                // unless the session is closed.
                if !s.is_closed() {
                    self.host_errors
                        .push(format!("client {i}: recv_backend({conn}): {e}"));
                }
            }
        }
        self.drain(i);
    }

    fn conn_lost(&mut self, i: usize, conn: u64) {
        if self.sc.naive {
            self.clients[i].naive_decoders.remove(&conn);
            if self.clients[i].writer == Some(conn) {
                self.clients[i].closed = true;
            }
            if self.clients[i].naive_reader == Some(conn) {
                self.clients[i].naive_reader = None;
                // The naive router answers the client with nothing: the op failed.
                if let Some(f) = self.clients[i].current.take() {
                    self.clients[i].log.push(OpRecord {
                        op: f.op,
                        msgs: vec![Msg::Error(client::Fields(vec![(b'C', "08006".into())]))],
                        sent_at: f.sent_at,
                        done_at: self.cluster.now(),
                        writer_lsn_at_send: f.writer_lsn_at_send,
                        generation_at_send: f.generation_at_send,
                    });
                }
            }
            return;
        }
        let now = self.cluster.now();
        if self.trace.is_some() {
            eprintln!("t={now} client {i}: connection {conn} lost");
        }
        self.clients[i].readers.remove(&conn);
        let Some(s) = self.clients[i].session.as_mut() else {
            return;
        };
        if s.is_closed() {
            return;
        }
        match s.on_backend_event(conn, SEvent::ConnectionLost, now) {
            Ok(()) => {}
            Err(polarsplit::SessionError::UnknownConnection(_)) => {}
            Err(e) => self
                .host_errors
                .push(format!("client {i}: connection lost: {e}")),
        }
        self.drain(i);
    }

    /// Records which client sent each Query message on `conn` (for the checker).
    fn attribute(&mut self, i: usize, conn: u64, bytes: &[u8]) {
        let op_index = self.clients[i].log.len();
        let buf = self.frame_buf.entry(conn).or_default();
        buf.extend_from_slice(bytes);
        let mut consumed = 0;
        let mut count = 0;
        while let Ok(Some(f)) = frame(&buf[consumed..], &Limits::default()) {
            if f.tag == b'Q' || f.tag == b'S' {
                count += 1;
            }
            consumed += f.wire_len;
        }
        buf.drain(..consumed);
        let v = self.attribution.entry(conn).or_default();
        for _ in 0..count {
            v.push((i, op_index));
        }
    }

    /// Applies every pending action of client `i`'s session, then the events they lead to.
    fn drain(&mut self, i: usize) {
        let mut events: Vec<(u64, SEvent)> = Vec::new();
        loop {
            let now = self.cluster.now();
            let mut acquires: Vec<(u32, ReaderKey, Vec<u8>)> = Vec::new();
            let mut connect: Option<Vec<u8>> = None;
            let mut releases: Vec<(u64, bool)> = Vec::new();
            let mut closes: Vec<u64> = Vec::new();
            let mut close_client = false;
            {
                let c = &mut self.clients[i];
                let Some(s) = c.session.as_mut() else { return };
                while let Some(a) = s.poll_action() {
                    if let Err(e) = c.streams.apply(&a) {
                        self.host_errors.push(format!("client {i}: {e}"));
                    }
                    match a {
                        Action::ConnectWriter { startup } => connect = Some(startup.to_vec()),
                        Action::AcquireReader {
                            server,
                            key,
                            startup,
                        } => acquires.push((server, key, startup.to_vec())),
                        Action::ReleaseReader { conn, needs_reset } => {
                            releases.push((conn, needs_reset))
                        }
                        Action::CloseBackend { conn } => closes.push(conn),
                        Action::CloseClient => close_client = true,
                        Action::Decision(d) => self.decisions.push(d),
                        _ => {}
                    }
                }
            }
            // Bytes for the servers.
            let sends: Vec<(u64, Vec<u8>)> = self.clients[i]
                .streams
                .backends
                .iter_mut()
                .filter(|(_, b)| !b.sent.is_empty())
                .map(|(c, b)| (*c, std::mem::take(&mut b.sent)))
                .collect();
            for (conn, bytes) in sends {
                if let Some(t) = self.trace.as_ref() {
                    t.sent(now, i, conn, &bytes);
                }
                self.attribute(i, conn, &bytes);
                let _ = self.cluster.write(ConnId(conn), &bytes);
            }
            // Bytes for the client.
            let to_client = std::mem::take(&mut self.clients[i].streams.to_client);
            if !to_client.is_empty() {
                self.client_receives(i, to_client);
            }
            for (conn, dirty) in releases {
                self.clients[i].readers.remove(&conn);
                self.cluster.set_owner(ConnId(conn), None);
                self.owner.remove(&conn);
                match self.conn_key(conn) {
                    Some(key) if !self.cluster.server_closed(ConnId(conn)) => {
                        let server = self.cluster.conn_server(ConnId(conn)).map_or(0, |s| s.0);
                        self.pool.push(Pooled {
                            conn,
                            server,
                            key,
                            dirty,
                        });
                    }
                    _ => {
                        let _ = self.cluster.kill(ConnId(conn));
                        self.engine.connection_closed(conn);
                    }
                }
            }
            for conn in closes {
                self.clients[i].readers.remove(&conn);
                self.owner.remove(&conn);
                let _ = self.cluster.kill(ConnId(conn));
            }
            if let Some(startup) = connect {
                match self.cluster.connect(ServerRef::Primary) {
                    Ok(w) => {
                        let _ = self.cluster.write(w, &startup);
                        self.owner.insert(w.0, i);
                        self.clients[i].writer = Some(w.0);
                        self.cluster.set_owner(w, Some(i as u64));
                        events.push((w.0, SEvent::WriterConnected));
                    }
                    Err(_) => events.push((0, SEvent::WriterConnectFailed)),
                }
            }
            for (server, key, startup) in acquires {
                events.push(self.acquire(i, server, key, &startup));
            }
            if close_client {
                self.close_client(i);
                return;
            }
            let Some((conn, ev)) = (if events.is_empty() {
                None
            } else {
                Some(events.remove(0))
            }) else {
                break;
            };
            let Some(s) = self.clients[i].session.as_mut() else {
                return;
            };
            if let Err(e) = s.on_backend_event(conn, ev, now) {
                self.host_errors
                    .push(format!("client {i}: event {ev:?}: {e}"));
            }
        }
        // A transaction that ended must have released its reader (P-7).
        let c = &self.clients[i];
        if let Some(s) = c.session.as_ref() {
            if !s.in_transaction() && s.pinned_reader().is_some() {
                self.pin_leaks
                    .push(format!("client {i}: pinned reader outside a transaction"));
            }
            // A batch the client left open at a Flush (asyncpg's Parse/Describe/Flush) keeps
            // its reader until the rest of it follows (E-1): that reader is still executing.
            let open_batch = s
                .executing_connection()
                .is_some_and(|conn| c.readers.contains(&conn));
            if c.current.is_none()
                && !c.readers.is_empty()
                && !s.is_closed()
                && !s.in_transaction()
                && !open_batch
            {
                self.pin_leaks.push(format!(
                    "client {i}: reader connections {:?} held while idle",
                    c.readers
                ));
            }
        }
    }

    /// The key a pooled connection was opened or last used under.
    fn conn_key(&self, conn: u64) -> Option<ReaderKey> {
        self.keys.get(&conn).copied()
    }

    fn acquire(&mut self, i: usize, server: u32, key: ReaderKey, startup: &[u8]) -> (u64, SEvent) {
        if let Some(pos) = self.pool.iter().position(|p| {
            p.server == server && p.key == key && !self.cluster.server_closed(ConnId(p.conn))
        }) {
            let p = self.pool.remove(pos);
            self.owner.insert(p.conn, i);
            self.clients[i].readers.insert(p.conn);
            self.cluster.set_owner(ConnId(p.conn), Some(i as u64));
            return (
                p.conn,
                SEvent::ReaderAttached {
                    server,
                    fresh: false,
                    needs_reset: p.dirty,
                },
            );
        }
        let now = self.cluster.now();
        // R-1b: while a failing reader's back-off runs, the host opens no new connection to it.
        if self
            .engine
            .reader_retry_after(server)
            .is_some_and(|t| t > now)
        {
            return (
                0,
                SEvent::ReaderUnavailable {
                    no_credentials: false,
                },
            );
        }
        let Ok(conn) = self.cluster.connect(ServerRef::Id(ServerId(server))) else {
            return (0, SEvent::ReaderConnectFailed { starting_up: false });
        };
        let _ = self.cluster.write(conn, startup);
        let auth = client::decode_all(
            &self.cluster.read_all(conn),
            RfqExtensions {
                lsn: true,
                xact: false,
            },
        );
        if self.cluster.server_closed(conn) || !auth.iter().any(Msg::is_rfq) {
            // Refused (57P03 while the standby starts up), or no answer at all (a frozen
            // server: the host's connect timeout, taken at once here).
            let starting_up = auth
                .iter()
                .any(|m| matches!(m, Msg::Error(f) if f.code() == Some("57P03")));
            let _ = self.cluster.kill(conn);
            return (0, SEvent::ReaderConnectFailed { starting_up });
        }
        self.keys.insert(conn.0, key);
        self.owner.insert(conn.0, i);
        self.clients[i].readers.insert(conn.0);
        self.cluster.set_owner(conn, Some(i as u64));
        (
            conn.0,
            SEvent::ReaderAttached {
                server,
                fresh: true,
                needs_reset: false,
            },
        )
    }

    fn close_client(&mut self, i: usize) {
        let c = &mut self.clients[i];
        c.closed = true;
        let mut conns: Vec<u64> = c.readers.iter().copied().collect();
        conns.extend(c.writer);
        for conn in conns {
            self.owner.remove(&conn);
            let _ = self.cluster.kill(ConnId(conn));
            self.engine.connection_closed(conn);
        }
        if let Some(f) = self.clients[i].current.take() {
            self.clients[i].log.push(OpRecord {
                op: f.op,
                msgs: f.msgs,
                sent_at: f.sent_at,
                done_at: self.cluster.now(),
                writer_lsn_at_send: f.writer_lsn_at_send,
                generation_at_send: f.generation_at_send,
            });
        }
    }

    fn client_receives(&mut self, i: usize, bytes: Vec<u8>) {
        let msgs = self.clients[i].decoder.feed(&bytes);
        if self.trace.as_ref().is_some_and(|t| t.client == i) {
            let now = self.cluster.now();
            for m in &msgs {
                eprintln!("t={now} client {i} <= {m:?}");
            }
        }
        self.client_messages(i, msgs);
    }

    fn client_messages(&mut self, i: usize, msgs: Vec<Msg>) {
        for m in msgs {
            let c = &mut self.clients[i];
            if !c.authenticated {
                if m.is_rfq() {
                    c.authenticated = true;
                }
                continue;
            }
            let rfq = m.is_rfq();
            if let Some(f) = c.current.as_mut() {
                f.msgs.push(m);
                // A family operation is done when everything one server would answer came
                // (or as many RFQs as it has Syncs and Queries, if the answer went astray).
                let done = if f.op.script.is_empty() {
                    rfq
                } else {
                    let p = shape::progress(&f.op.script, &f.msgs);
                    p.complete
                        || (p.violation.is_some()
                            && f.msgs.iter().filter(|m| m.is_rfq()).count()
                                >= shape::rfqs_expected(&f.op.script))
                };
                if done {
                    let f = c.current.take().expect("in flight");
                    c.resync = shape::leaves_batch_open(&f.op.script)
                        && f.msgs.iter().any(|m| matches!(m, Msg::Error(_)));
                    if self.sc.families.causal {
                        c.committed_write = committed_write(&f.op, &f.msgs);
                        if matches!(&f.op.kind, OpKind::Family(x) if x.what == "take-token") {
                            let text = f.msgs.iter().find_map(|m| match m {
                                Msg::DataRow(cols) => cols.first().cloned().flatten(),
                                _ => None,
                            });
                            if let (Some(t), Some((k, v))) = (text, c.token_asked.take()) {
                                c.token_taken = Some((t, k, v));
                            }
                        }
                    }
                    if let Some(r) = c.think.as_mut() {
                        c.ready_at = self.cluster.now() + r.range(0, 30);
                    }
                    c.log.push(OpRecord {
                        op: f.op,
                        msgs: f.msgs,
                        sent_at: f.sent_at,
                        done_at: self.cluster.now(),
                        writer_lsn_at_send: f.writer_lsn_at_send,
                        generation_at_send: f.generation_at_send,
                    });
                }
            } else {
                // Asynchronous messages between operations are allowed (notices); anything else
                // would be a leak of some hidden result.
                let fatal = matches!(&m, Msg::Error(f) if f.severity() == Some("FATAL"));
                let notification = matches!(m, Msg::Notification { .. }) && self.sc.families.notify;
                if !matches!(m, Msg::Notice(_) | Msg::ParameterStatus(..))
                    && !fatal
                    && !notification
                {
                    self.host_errors.push(format!(
                        "client {i}: unexpected message between operations: {m:?}"
                    ));
                }
                if self.sc.families.any() {
                    let now = self.cluster.now();
                    self.clients[i].async_log.push((now, m));
                }
            }
        }
    }

    fn fault(&mut self) {
        let readers = self.cluster.readers();
        if readers.is_empty() {
            return;
        }
        let r = readers[self.rng.range(0, readers.len() as u64 - 1) as usize];
        match self.rng.range(0, 9) {
            0 | 1 => {
                // A reader connection dies mid-wait or mid-result.
                let busy: Vec<u64> = self
                    .owner
                    .keys()
                    .copied()
                    .filter(|c| {
                        self.cluster
                            .conn_server(ConnId(*c))
                            .is_some_and(|s| s != self.cluster.primary())
                            && (self.cluster.is_busy(ConnId(*c))
                                || self.cluster.pending_output(ConnId(*c)) > 0)
                    })
                    .collect();
                if let Some(&c) = busy.first() {
                    if self.rng.range(0, 1) == 0 {
                        let _ = self.cluster.kill(ConnId(c));
                    } else {
                        let _ = self.cluster.kill_discarding(ConnId(c));
                    }
                }
            }
            2 | 3 => {
                let _ = self.cluster.inject_error(
                    Target::Server(r),
                    Injection::error("XX001", "injected reusable error").matching(Matcher::Select),
                );
            }
            4 => {
                if self.sc.dialect == Dialect::Awide {
                    let _ = self.cluster.inject_error(
                        Target::Server(r),
                        Injection::error(
                            "42704",
                            "unrecognized configuration parameter \"polar_consistency_mode\"",
                        )
                        .matching(Matcher::PolarSet),
                    );
                }
            }
            5 | 6 => {
                let lag = self.rng.range(100, 1500);
                let _ = self.cluster.set_reader_lag(r, lag);
            }
            7 => {
                if self.cluster.is_up(r) && self.stopped.is_empty() {
                    let _ = self.cluster.stop_server(r);
                    self.engine.set_reader_health(r.0, false);
                    let back = self.cluster.now() + self.rng.range(50, 500);
                    self.stopped.push((r, back));
                }
            }
            8 => {
                // The reader hostgroup changes (same servers, new group).
                let hg = 1 + self.rng.range(1, 3) as u32;
                for s in self.cluster.readers() {
                    self.engine.add_reader(s.0, hg);
                }
                self.engine.set_reader_hostgroup(0, Some(hg));
            }
            _ => {
                if self.sc.allow_failover
                    && self.failovers == 0
                    && self.cluster.is_up(r)
                    && self.stopped.is_empty()
                    && self.cluster.promote(r).is_ok()
                {
                    self.failovers += 1;
                    self.engine.remove_reader(r.0);
                    // A new timeline is a new writer history: the generation moves (S-2).
                    self.engine.set_writer_identity(0, self.writer_identity());
                }
            }
        }
    }
}

/// Reader faults and causal tokens (families), and the host's monitor of readers that hang.
impl Host {
    /// The monitor's probe of reader `r`, as a proxy's monitor sees it: it holds one
    /// connection per reader and asks for the replay position every 10 ms, with a 1 s timeout.
    /// A connection that broke (the server stopped or crashed — even a restart too fast to
    /// refuse anything — or was rewound at a failover), a refused connect (down, or 57P03
    /// while starting up) and a timeout (frozen) are monitor failures (R-1a, R-1b); the
    /// reader is reported down at its first failure and up when the monitor answers again;
    /// after a failure it is tried again 200 ms later. Returns whether the probe answered.
    fn monitor_probe(&mut self, r: ServerId, now: u64) -> bool {
        if self.monitor_retry.get(&r).is_some_and(|t| now < *t) {
            return false;
        }
        let incarnation = self.cluster.incarnation(r).unwrap_or(0);
        let mut failed = false;
        if self
            .monitor_conn
            .get(&r)
            .is_some_and(|at| *at != incarnation)
        {
            // Its connection broke.
            self.monitor_conn.remove(&r);
            failed = true;
        } else if self.cluster.is_frozen(r) {
            let since = *self.monitor_waiting.entry(r).or_insert(now);
            if now < since + 1000 {
                return false;
            }
            // Timed out: the monitor closes the connection and tries again.
            self.monitor_conn.remove(&r);
            failed = true;
        } else if !self.monitor_conn.contains_key(&r) && !self.cluster.accepts_connections(r) {
            failed = true;
        }
        if failed {
            self.monitor_failed(r, now);
            return false;
        }
        self.monitor_waiting.remove(&r);
        self.monitor_conn.entry(r).or_insert(incarnation);
        if self.monitor_down.remove(&r) {
            self.engine.set_reader_health_at(r.0, true, now);
        }
        true
    }

    /// The monitor's query or connection to reader `r` failed: reported at once (R-1a,
    /// R-1b), the reader is down until the monitor answers again (tried 200 ms later).
    fn monitor_failed(&mut self, r: ServerId, now: u64) {
        if self.trace.is_some() {
            eprintln!("t={now} monitor of {r} failed");
        }
        self.monitor_waiting.remove(&r);
        self.monitor_retry.insert(r, now + 200);
        self.engine.reader_monitor_failed(r.0, now);
        if self.monitor_down.insert(r) {
            self.engine.set_reader_health_at(r.0, false, now);
        }
    }

    fn reader_fault(&mut self) {
        let readers = self.cluster.readers();
        if readers.is_empty() {
            return;
        }
        let r = readers[self.family_rng.range(0, readers.len() as u64 - 1) as usize];
        if !self.cluster.accepts_connections(r) {
            return;
        }
        let now = self.cluster.now();
        match self.family_rng.range(0, 5) {
            0 | 1 => {
                let replay = self.cluster.replay_lsn(r).unwrap_or_default();
                // Back to a restart point well behind (recent writes are redone).
                let back = self.family_rng.range(1_000, 40_000);
                let point = crate::Lsn(replay.0.saturating_sub(back).max(0x4000_0000));
                // A fast restart may fall between two probes of the monitor (every 10 ms).
                let refusal = self.family_rng.range(0, 25);
                if self
                    .cluster
                    .crash_restart_reader_for(r, point, refusal)
                    .is_ok()
                {
                    self.reader_faults.push((
                        now,
                        format!("{r} crashed at {replay}, restarts from {point}"),
                    ));
                }
            }
            2 => {
                if self.reader_faults.iter().any(|(_, w)| w.contains("frozen")) {
                    return;
                }
                let until = now + 30_000;
                if self.cluster.freeze(r, until).is_ok() {
                    self.reader_faults
                        .push((now, format!("{r} frozen until t={until}")));
                }
            }
            3 => {
                let _ = self.cluster.inject_error(
                    Target::Server(r),
                    Injection::error("40001", "canceling statement due to conflict with recovery")
                        .matching(Matcher::Select),
                );
                self.reader_faults
                    .push((now, format!("{r}: recovery conflict (ERROR 40001)")));
            }
            _ => {
                let _ = self.cluster.inject_error(
                    Target::Server(r),
                    Injection::error(
                        "40001",
                        "terminating connection due to conflict with recovery",
                    )
                    .matching(Matcher::Select)
                    .fatal(),
                );
                self.reader_faults
                    .push((now, format!("{r}: recovery conflict (FATAL 40001)")));
            }
        }
    }

    /// A client whose write just committed asks the engine for its causal token (C-1) and
    /// hands it to another client, as a web application passes a token to its next request,
    /// which may land on another connection or proxy (§11).
    fn pass_positions(&mut self) {
        for i in 0..self.clients.len() {
            if let Some((k, v)) = self.clients[i].committed_write.take() {
                let c = &mut self.clients[i];
                if self.family_rng.range(0, 1) == 0
                    && c.token.is_empty()
                    && !c.work.in_transaction()
                {
                    c.token_asked = Some((k, v));
                    c.token.push_back(take_token());
                }
            }
            let Some((token, k, v)) = self.clients[i].token_taken.take() else {
                continue;
            };
            let Some(lsn) = polarsplit::Token::parse(&token).map(|t| t.lsn.0) else {
                self.host_errors.push(format!(
                    "client {i}: the engine's causal token {token:?} does not parse"
                ));
                continue;
            };
            // The token goes to a session that has not seen the write itself.
            let n = self.clients.len();
            let j = (i + 1 + self.family_rng.range(0, n as u64 - 2) as usize) % n;
            let behind = self.clients[j]
                .session
                .as_ref()
                .is_some_and(|s| s.lsn_state().target().0 < lsn);
            if !behind {
                continue;
            }
            let cj = &mut self.clients[j];
            if j != i && !cj.closed && cj.token.is_empty() && !cj.work.in_transaction() {
                cj.token.push_back(present_token(&token, i, k, v));
                cj.token.push_back(token_read(k));
            }
        }
    }

    /// The writer's history as a monitor reads it (C-1): one system identifier per simulated
    /// cluster, and the timeline the writer writes now.
    fn writer_identity(&self) -> polarsplit::WriterIdentity {
        polarsplit::WriterIdentity {
            system_id: 7_000_000_000_000_000_000 + self.sc.seed,
            timeline: self.cluster.timeline(),
        }
    }
}

/// The write an operation committed (autocommit, no error), if any.
fn committed_write(op: &Op, msgs: &[Msg]) -> Option<(i64, i64)> {
    let idle = matches!(
        msgs.iter().rev().find(|m| m.is_rfq()),
        Some(Msg::ReadyForQuery {
            status: polarsplit::TxStatus::Idle,
            ..
        })
    );
    if !idle || msgs.iter().any(|m| matches!(m, Msg::Error(_))) {
        return None;
    }
    match &op.kind {
        OpKind::Write { k, v } | OpKind::WriteThenRead { k, v } => Some((*k, *v)),
        OpKind::Family(f) => f.steps.iter().find_map(|(_, s)| match s {
            super::families::Step::Write { k, v } => Some((*k, *v)),
            _ => None,
        }),
        _ => None,
    }
}

impl ClientState {
    fn work_left(&self) -> bool {
        self.work.has_more()
            || self.resync
            || !self.token.is_empty()
            || self.family.as_ref().is_some_and(FamilyWork::has_more)
    }

    /// A token to present first; a family operation between transactions; else the ordinary
    /// workload's next operation.
    fn next_op(&mut self) -> Option<Op> {
        if std::mem::take(&mut self.resync) {
            return Some(resync());
        }
        if let Some(t) = self.token.pop_front() {
            return Some(t);
        }
        if !self.work.in_transaction() {
            if let Some(op) = self.family.as_mut().and_then(FamilyWork::next_op) {
                return Some(op);
            }
        }
        self.work.next_op().or_else(|| {
            // The ordinary workload is done: the family's operations finish.
            let f = self.family.as_mut()?;
            while f.has_more() {
                if let Some(op) = f.next_op() {
                    return Some(op);
                }
            }
            None
        })
    }
}

/// A decision's outcome and reason, for coverage reports.
pub fn coverage(decisions: &[Decision]) -> (BTreeMap<Outcome, u64>, BTreeMap<Reason, u64>) {
    let mut o = BTreeMap::new();
    let mut r = BTreeMap::new();
    for d in decisions {
        *o.entry(d.outcome).or_default() += 1;
        *r.entry(d.reason).or_default() += 1;
    }
    (o, r)
}
