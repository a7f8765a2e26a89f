//! The cluster: servers, connections, virtual time, replication, faults, ground truth.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use polarsplit::Lsn;

use crate::config::{ClusterConfig, ConnId, Dialect, Role, ServerId, ServerRef};
use crate::fault::{Injection, Target};
use crate::history::{CloseReason, Entry, Event, WaitOutcome};
use crate::rng::Rng;
use crate::session::Conn;
use crate::store::{Store, Xid, XidStatus};

/// A simulated server.
#[derive(Debug)]
pub(crate) struct Server {
    pub id: ServerId,
    pub role: Role,
    pub up: bool,
    /// Readers: how far the WAL has been replayed.
    pub replay: Lsn,
    pub lag_ms: u64,
    pub lag_pinned: bool,
    pub rng_lag: Rng,
    pub injections: VecDeque<Injection>,
    /// SIGSTOP: until then the server reads, answers and replays nothing.
    pub frozen_until: Option<u64>,
    /// After a restart: connections are refused with 57P03 until then.
    pub starting_until: Option<u64>,
    /// After a crash restart: redo from the restart point, `redo_bytes_per_ms` from `since`,
    /// until it catches up with the lag model again.
    pub redo: Option<(Lsn, u64)>,
    /// Bumped whenever the server's processes end (stop, crash): a connection opened before
    /// is gone, so a monitor that holds one notices even a restart too fast to refuse it.
    pub incarnation: u64,
}

/// What a host can learn about a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    pub id: ServerId,
    pub role: Role,
    pub up: bool,
    /// Readers: replay position.
    pub replay: Option<Lsn>,
    pub lag_ms: u64,
}

/// Why a connect failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The server is stopped (connection refused).
    ServerDown(ServerId),
    /// No such server (or no reader with that index).
    NoSuchServer,
}

/// Why an operation on a connection failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    UnknownConn(ConnId),
    /// The server side is closed: writes go nowhere.
    Closed(ConnId),
    UnknownServer(ServerId),
    /// The operation needs a reader (or an up server) and this one is not.
    BadServer(ServerId, &'static str),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for ConnectError {}
impl std::error::Error for SimError {}

/// A deterministic PolarDB / PostgreSQL cluster speaking the v3 wire protocol.
///
/// The host connects ([`Cluster::connect`]), writes frontend bytes ([`Cluster::write`]), reads
/// backend bytes ([`Cluster::read`]) and moves virtual time ([`Cluster::advance`]). Nothing
/// happens between calls; the same configuration and the same calls always give the same
/// bytes and the same [`Cluster::history`].
pub struct Cluster {
    pub(crate) cfg: ClusterConfig,
    pub(crate) now: u64,
    pub(crate) store: Store,
    pub(crate) servers: Vec<Server>,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    next_pid: i32,
    pub(crate) generation: u64,
    pub(crate) timeline: u32,
    history: Vec<Entry>,
    pub(crate) rng_missing: Rng,
    rng_secret: Rng,
    last_flush_tick: Option<u64>,
    last_lag_tick: Option<u64>,
}

impl Cluster {
    pub fn new(cfg: ClusterConfig) -> Cluster {
        let store = Store::new(
            cfg.initial_lsn,
            cfg.first_xid,
            cfg.initial_keys,
            Rng::derive(cfg.seed, "wal", 0),
            cfg.wal_record_min,
            cfg.wal_record_max,
        );
        let mut servers = Vec::new();
        for i in 0..=cfg.readers {
            let mut rng_lag = Rng::derive(cfg.seed, "lag", i as u64);
            let lag_ms = rng_lag.range(cfg.min_lag_ms, cfg.max_lag_ms);
            servers.push(Server {
                id: ServerId(i as u32),
                role: if i == 0 { Role::Primary } else { Role::Reader },
                up: true,
                replay: cfg.initial_lsn,
                lag_ms: if i == 0 { 0 } else { lag_ms },
                lag_pinned: false,
                rng_lag,
                injections: VecDeque::new(),
                frozen_until: None,
                starting_until: None,
                incarnation: 0,
                redo: None,
            });
        }
        Cluster {
            rng_missing: Rng::derive(cfg.seed, "missing-lsn", 0),
            rng_secret: Rng::derive(cfg.seed, "secret", 0),
            cfg,
            now: 0,
            store,
            servers,
            conns: BTreeMap::new(),
            next_conn: 1,
            next_pid: 10_000,
            generation: 1,
            timeline: 1,
            history: Vec::new(),
            last_flush_tick: None,
            last_lag_tick: None,
        }
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    pub fn dialect(&self) -> Dialect {
        self.cfg.dialect
    }

    // ----- time -------------------------------------------------------------------------------

    /// Virtual time in milliseconds.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn advance(&mut self, ms: u64) {
        self.advance_to(self.now.saturating_add(ms));
    }

    /// Moves time forward to `t`, handling every scheduled event on the way in order (a
    /// `t` in the past does nothing).
    pub fn advance_to(&mut self, t: u64) {
        while let Some(e) = self.next_event_time() {
            if e > t {
                break;
            }
            self.now = e;
            self.process_now();
        }
        if t > self.now {
            self.now = t;
            self.process_now();
        }
    }

    /// Advances through scheduled events until `conn` has finished all its work (not
    /// [`Cluster::is_busy`]) or time `limit` is reached. Returns whether it finished. A query
    /// that can never finish (a wait for WAL nobody will write) stops at `limit`.
    pub fn settle(&mut self, conn: ConnId, limit: u64) -> bool {
        while self.is_busy(conn) {
            match self.next_event_time() {
                Some(t) if t <= limit => self.advance_to(t),
                _ => {
                    self.advance_to(limit);
                    return !self.is_busy(conn);
                }
            }
        }
        true
    }

    /// When the next scheduled thing happens (strictly after now): a periodic WAL flush with
    /// WAL pending, a reader lag change, a wait reaching its target or timing out.
    pub fn next_event_time(&self) -> Option<u64> {
        let now = self.now;
        let mut best: Option<u64> = None;
        let mut consider = |t: u64| {
            if t > now {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        };
        let fi = self.cfg.flush_interval_ms;
        if fi > 0 && self.primary_up() && self.store.insert > self.store.flushed {
            consider((now / fi + 1) * fi);
        }
        let lci = self.cfg.lag_change_interval_ms;
        if lci > 0
            && self
                .servers
                .iter()
                .any(|s| s.role == Role::Reader && s.up && !s.lag_pinned)
        {
            consider((now / lci + 1) * lci);
        }
        for s in &self.servers {
            s.frozen_until.into_iter().for_each(&mut consider);
            s.starting_until.into_iter().for_each(&mut consider);
            if s.redo.is_some() {
                // Redo moves the replay position by itself: look again soon.
                consider(now + 5);
            }
        }
        for c in self.conns.values() {
            let Some(w) = c.running.as_ref().and_then(|r| r.wait.as_ref()) else {
                continue;
            };
            if let Some(d) = w.deadline() {
                consider(d);
            }
            if let Some(t) = self.reach_time(c.server, w.target) {
                consider(t);
            }
        }
        best
    }

    /// When reader `id` will have replayed `target`, if its current lag holds and the WAL is
    /// already flushed that far.
    fn reach_time(&self, id: ServerId, target: Lsn) -> Option<u64> {
        let s = &self.servers[id.0 as usize];
        if !s.up || s.role != Role::Reader {
            return None;
        }
        let tf = self.store.flushed_reach_time(target)?;
        Some(tf.saturating_add(s.lag_ms))
    }

    /// Runs everything due at `now` until nothing changes.
    pub(crate) fn process_now(&mut self) {
        self.thaw();
        loop {
            self.refresh_replays();
            let mut progress = false;
            let fi = self.cfg.flush_interval_ms;
            if fi > 0
                && self.now.is_multiple_of(fi)
                && self.last_flush_tick != Some(self.now)
                && self.primary_up()
            {
                self.last_flush_tick = Some(self.now);
                if self.store.flush(self.now) {
                    let lsn = self.store.flushed;
                    self.log(Event::Flush { lsn });
                    progress = true;
                }
            }
            let lci = self.cfg.lag_change_interval_ms;
            if lci > 0
                && self.now > 0
                && self.now.is_multiple_of(lci)
                && self.last_lag_tick != Some(self.now)
            {
                self.last_lag_tick = Some(self.now);
                let (lo, hi) = (self.cfg.min_lag_ms, self.cfg.max_lag_ms);
                let mut changed = Vec::new();
                for s in self.servers.iter_mut() {
                    if s.role == Role::Reader && s.up && !s.lag_pinned {
                        s.lag_ms = s.rng_lag.range(lo, hi);
                        changed.push((s.id, s.lag_ms));
                    }
                }
                for (server, lag_ms) in changed {
                    self.log(Event::LagChanged { server, lag_ms });
                    progress = true;
                }
            }
            if self.resolve_waits() {
                progress = true;
            }
            if !progress {
                break;
            }
        }
    }

    /// Frozen servers whose time has come resume: their connections work through the input
    /// that waited; a restarted server whose startup is over accepts connections.
    fn thaw(&mut self) {
        let now = self.now;
        for i in 0..self.servers.len() {
            if self.servers[i].starting_until.is_some_and(|t| t <= now) {
                self.servers[i].starting_until = None;
            }
            if self.servers[i].frozen_until.is_none_or(|t| t > now) {
                continue;
            }
            self.servers[i].frozen_until = None;
            let id = self.servers[i].id;
            self.log(Event::ServerThawed { server: id });
            let ids = self.open_conns_of(id);
            self.refresh_replays();
            for cid in ids {
                let mut c = self.conns.remove(&cid).expect("listed");
                self.ingest(&mut c);
                self.run(&mut c);
                self.conns.insert(cid, c);
            }
        }
    }

    /// Replay positions at `now` with each reader's current lag (never backwards).
    pub(crate) fn refresh_replays(&mut self) {
        let now = self.now;
        for i in 0..self.servers.len() {
            let s = &self.servers[i];
            if s.role != Role::Reader || !s.up || s.frozen_until.is_some() {
                continue;
            }
            let Some(t) = now.checked_sub(s.lag_ms) else {
                continue;
            };
            let mut l = self.store.flushed_at(t);
            let s = &mut self.servers[i];
            if let Some((from, since)) = s.redo {
                // Redo after a crash: at its own pace until it has caught up.
                let redone = Lsn(from.0.saturating_add(
                    self.cfg
                        .redo_bytes_per_ms
                        .saturating_mul(now.saturating_sub(since)),
                ));
                if redone < l {
                    l = redone;
                } else {
                    s.redo = None;
                }
            }
            if l > s.replay {
                s.replay = l;
            }
        }
    }

    /// Ends the waits that reached their target or deadline; resumes their connections.
    fn resolve_waits(&mut self) -> bool {
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.running.as_ref().is_some_and(|r| r.wait.is_some()))
            .map(|(id, _)| *id)
            .collect();
        let mut any = false;
        for id in ids {
            let Some(c) = self.conns.get(&id) else {
                continue;
            };
            let Some(w) = c.running.as_ref().and_then(|r| r.wait.as_ref()) else {
                continue;
            };
            let s = &self.servers[c.server.0 as usize];
            let reached = s.role == Role::Reader && s.replay >= w.target;
            // The earliest deadline that has passed decides (the wait timeout on a tie).
            let due = |d: Option<u64>| d.filter(|d| *d <= self.now);
            let outcome = if reached {
                Some(WaitOutcome::Reached)
            } else {
                match (due(w.wait_deadline), due(w.stmt_deadline)) {
                    (Some(a), Some(b)) if b < a => Some(WaitOutcome::StatementTimeout),
                    (Some(_), _) => Some(WaitOutcome::TimedOut),
                    (None, Some(_)) => Some(WaitOutcome::StatementTimeout),
                    (None, None) => None,
                }
            };
            if let Some(o) = outcome {
                self.end_wait(id, o);
                any = true;
            }
        }
        any
    }

    // ----- topology ---------------------------------------------------------------------------

    /// The current primary.
    pub fn primary(&self) -> ServerId {
        self.servers
            .iter()
            .find(|s| s.role == Role::Primary)
            .map(|s| s.id)
            .unwrap_or(ServerId(0))
    }

    fn primary_up(&self) -> bool {
        self.servers.iter().any(|s| s.role == Role::Primary && s.up)
    }

    /// The current readers, in id order (stopped ones included).
    pub fn readers(&self) -> Vec<ServerId> {
        self.servers
            .iter()
            .filter(|s| s.role == Role::Reader)
            .map(|s| s.id)
            .collect()
    }

    pub fn servers(&self) -> Vec<ServerInfo> {
        self.servers
            .iter()
            .map(|s| ServerInfo {
                id: s.id,
                role: s.role,
                up: s.up,
                replay: (s.role == Role::Reader).then_some(s.replay),
                lag_ms: s.lag_ms,
            })
            .collect()
    }

    pub fn role(&self, id: ServerId) -> Option<Role> {
        self.servers.get(id.0 as usize).map(|s| s.role)
    }

    pub fn is_up(&self, id: ServerId) -> bool {
        self.servers.get(id.0 as usize).is_some_and(|s| s.up)
    }

    /// Bumped on every writer change (promotion, restart on a new timeline): the host reports
    /// it to the engine, which never compares LSNs across generations.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn timeline(&self) -> u32 {
        self.timeline
    }

    fn resolve(&self, to: ServerRef) -> Option<ServerId> {
        match to {
            ServerRef::Primary => Some(self.primary()),
            ServerRef::Reader(n) => self.readers().get(n).copied(),
            ServerRef::Id(id) => ((id.0 as usize) < self.servers.len()).then_some(id),
        }
    }

    // ----- connections ------------------------------------------------------------------------

    /// Opens a connection to a server. The host then writes the startup packet. Fails when the
    /// server is stopped (as a refused TCP connect would).
    pub fn connect(&mut self, to: impl Into<ServerRef>) -> Result<ConnId, ConnectError> {
        let server = self.resolve(to.into()).ok_or(ConnectError::NoSuchServer)?;
        if !self.servers[server.0 as usize].up {
            self.log(Event::ConnectionRefused {
                conn: None,
                server,
                sqlstate: String::new(),
                message: "connection refused (server down)".into(),
            });
            return Err(ConnectError::ServerDown(server));
        }
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        let pid = self.next_pid;
        self.next_pid += 1;
        let secret = self.rng_secret.next_u64() as u32;
        self.conns.insert(id, Conn::new(id, server, pid, secret));
        Ok(id)
    }

    /// Delivers frontend bytes (startup packet first). They are processed at once, at the
    /// current virtual time; answers become readable with [`Cluster::read`].
    pub fn write(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SimError> {
        let mut c = self
            .conns
            .remove(&conn)
            .ok_or(SimError::UnknownConn(conn))?;
        if c.is_closed() {
            self.conns.insert(conn, c);
            return Err(SimError::Closed(conn));
        }
        c.inbuf.extend_from_slice(bytes);
        if self.servers[c.server.0 as usize].frozen_until.is_none() {
            self.ingest(&mut c);
            self.run(&mut c);
        }
        self.conns.insert(conn, c);
        self.process_now();
        Ok(())
    }

    /// Reads up to `max` bytes the server has sent (and not yet read).
    pub fn read(&mut self, conn: ConnId, max: usize) -> Vec<u8> {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Vec::new();
        };
        if self.servers[c.server.0 as usize].frozen_until.is_some() {
            return Vec::new();
        }
        let end = c.visible_end().min(c.out_pos.saturating_add(max));
        let v = c.out[c.out_pos..end].to_vec();
        c.out_pos = end;
        if c.out_pos == c.out.len() && c.hold_from.is_none() {
            c.out.clear();
            c.out_pos = 0;
        }
        v
    }

    pub fn read_all(&mut self, conn: ConnId) -> Vec<u8> {
        self.read(conn, usize::MAX)
    }

    /// Bytes sent and not yet read.
    pub fn pending_output(&self, conn: ConnId) -> usize {
        self.conns.get(&conn).map_or(0, |c| {
            if self.servers[c.server.0 as usize].frozen_until.is_some() {
                0
            } else {
                c.visible_end() - c.out_pos
            }
        })
    }

    /// End of stream: the server closed the connection and every byte it sent was read
    /// (an unknown connection is closed too).
    pub fn is_closed(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_none_or(|c| c.is_closed() && c.out_pos == c.out.len())
    }

    /// The server closed the connection (unread bytes may remain).
    pub fn server_closed(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_none_or(Conn::is_closed)
    }

    /// The connection has work the server has not finished: a query waiting for replay, or
    /// messages queued behind it.
    pub fn is_busy(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| !c.is_closed() && (c.running.is_some() || !c.inbox.is_empty()))
    }

    /// The connection is waiting for replay (W-4).
    pub fn is_waiting(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.running.as_ref().is_some_and(|r| r.wait.is_some()))
    }

    pub fn conn_server(&self, conn: ConnId) -> Option<ServerId> {
        self.conns.get(&conn).map(|c| c.server)
    }

    /// The BackendKeyData (process id, secret) of a connection, for CancelRequest.
    pub fn backend_key(&self, conn: ConnId) -> Option<(i32, u32)> {
        self.conns.get(&conn).map(|c| (c.pid, c.secret))
    }

    /// Open connections of one server, in id order.
    pub(crate) fn open_conns_of(&self, id: ServerId) -> Vec<ConnId> {
        self.conns
            .values()
            .filter(|c| c.server == id && !c.is_closed())
            .map(|c| c.id)
            .collect()
    }

    /// Open (not closed) connections, in id order.
    pub fn open_conns(&self) -> Vec<ConnId> {
        self.conns
            .values()
            .filter(|c| !c.is_closed())
            .map(|c| c.id)
            .collect()
    }

    // ----- faults -----------------------------------------------------------------------------

    /// Cuts a connection: the server side closes at once (an open transaction rolls back, a
    /// wait is abandoned). Bytes sent before the cut stay readable, then EOF.
    pub fn kill(&mut self, conn: ConnId) -> Result<(), SimError> {
        let mut c = self
            .conns
            .remove(&conn)
            .ok_or(SimError::UnknownConn(conn))?;
        self.close_conn(&mut c, CloseReason::Killed);
        self.conns.insert(conn, c);
        self.process_now();
        Ok(())
    }

    /// Like [`Cluster::kill`], but bytes not yet read are lost too (a cut in the middle of a
    /// result).
    pub fn kill_discarding(&mut self, conn: ConnId) -> Result<(), SimError> {
        self.kill(conn)?;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.out.clear();
            c.out_pos = 0;
        }
        Ok(())
    }

    /// Stops a server: every open connection gets FATAL 57P01 and closes; new connects fail
    /// until [`Cluster::start_server`]. A stopped reader replays nothing; a stopped primary
    /// accepts no writes (its flushed WAL still reaches readers).
    pub fn stop_server(&mut self, id: ServerId) -> Result<(), SimError> {
        self.server_check(id)?;
        let ids = self.open_conns_of(id);
        for cid in ids {
            let mut c = self.conns.remove(&cid).expect("listed");
            crate::server::send_fatal(
                &mut c,
                "57P01",
                "terminating connection due to administrator command",
            );
            self.close_conn(&mut c, CloseReason::ServerStopped);
            self.conns.insert(cid, c);
        }
        self.refresh_replays();
        let s = &mut self.servers[id.0 as usize];
        s.up = false;
        s.incarnation += 1;
        if s.role == Role::Primary && self.store.flush(self.now) {
            let lsn = self.store.flushed;
            self.log(Event::Flush { lsn });
        }
        self.log(Event::ServerStopped { server: id });
        self.process_now();
        Ok(())
    }

    /// Starts a stopped server again (a reader resumes replay from where it stopped).
    pub fn start_server(&mut self, id: ServerId) -> Result<(), SimError> {
        self.server_check(id)?;
        let s = &mut self.servers[id.0 as usize];
        if !s.up {
            s.up = true;
            let role = s.role;
            if role == Role::Reader && s.replay > self.store.flushed {
                s.replay = self.store.flushed;
            }
            self.log(Event::ServerStarted { server: id, role });
        }
        self.process_now();
        Ok(())
    }

    /// Stops then starts a server.
    pub fn restart_server(&mut self, id: ServerId) -> Result<(), SimError> {
        self.stop_server(id)?;
        self.start_server(id)
    }

    /// `kill -9` of a reader and its restart (R-1a): every connection drops without a word,
    /// the server refuses connections with 57P03 for `startup_refusal_ms`, then accepts
    /// reads while it redoes WAL from `restart_point` (at most its replay position before the
    /// crash) at `redo_bytes_per_ms` — serving a past it had already replayed.
    pub fn crash_restart_reader(
        &mut self,
        id: ServerId,
        restart_point: Lsn,
    ) -> Result<(), SimError> {
        let refusal = self.cfg.startup_refusal_ms;
        self.crash_restart_reader_for(id, restart_point, refusal)
    }

    /// [`Cluster::crash_restart_reader`] with a startup of `refusal_ms` (0: it accepts
    /// connections again at once — a restart a monitor may never see).
    pub fn crash_restart_reader_for(
        &mut self,
        id: ServerId,
        restart_point: Lsn,
        refusal_ms: u64,
    ) -> Result<(), SimError> {
        self.reader_check(id)?;
        let ids = self.open_conns_of(id);
        for cid in ids {
            let mut c = self.conns.remove(&cid).expect("listed");
            c.out.clear();
            c.out_pos = 0;
            self.close_conn(&mut c, CloseReason::Killed);
            self.conns.insert(cid, c);
        }
        self.refresh_replays();
        let now = self.now;
        let refusal = refusal_ms;
        let s = &mut self.servers[id.0 as usize];
        let before = s.replay;
        let point = restart_point.min(before);
        s.replay = point;
        s.redo = Some((point, now + refusal));
        s.starting_until = (refusal > 0).then_some(now + refusal);
        s.frozen_until = None;
        s.incarnation += 1;
        self.log(Event::ReaderCrashRestarted {
            server: id,
            replay_before: before,
            restart_point: point,
        });
        self.process_now();
        Ok(())
    }

    /// SIGSTOP of a server until `until` (then SIGCONT): it reads, answers and replays nothing
    /// meanwhile; bytes sent to it wait; connects are accepted but not answered.
    pub fn freeze(&mut self, id: ServerId, until: u64) -> Result<(), SimError> {
        self.server_check(id)?;
        self.refresh_replays();
        self.servers[id.0 as usize].frozen_until = Some(until.max(self.now + 1));
        self.log(Event::ServerFrozen { server: id, until });
        Ok(())
    }

    /// Whether a server is frozen now.
    pub fn is_frozen(&self, id: ServerId) -> bool {
        self.servers
            .get(id.0 as usize)
            .is_some_and(|s| s.frozen_until.is_some())
    }

    /// How many times the server's processes ended (stopped, crashed): a connection opened at
    /// another incarnation is gone. (A host's monitor holds one connection and sees it break.)
    pub fn incarnation(&self, id: ServerId) -> Option<u64> {
        self.servers.get(id.0 as usize).map(|s| s.incarnation)
    }

    /// Whether a server accepts connections now (up, not frozen, not starting up).
    pub fn accepts_connections(&self, id: ServerId) -> bool {
        self.servers
            .get(id.0 as usize)
            .is_some_and(|s| s.up && s.frozen_until.is_none() && s.starting_until.is_none())
    }

    /// The client the host last said connection `conn` serves.
    pub fn owner_of(&self, conn: ConnId) -> Option<u64> {
        self.conns.get(&conn).and_then(|c| c.owner)
    }

    /// Says which client a connection serves now (`None`: nobody), so that statements record
    /// the state of that client's writer connection next to their own (S-5 ground truth).
    pub fn set_owner(&mut self, conn: ConnId, owner: Option<u64>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.owner = owner;
        }
    }

    /// Arms an error for the next matching statement of a connection or server.
    pub fn inject_error(&mut self, target: Target, inj: Injection) -> Result<(), SimError> {
        match target {
            Target::Conn(id) => self
                .conns
                .get_mut(&id)
                .ok_or(SimError::UnknownConn(id))?
                .injections
                .push_back(inj),
            Target::Server(id) => {
                self.server_check(id)?;
                self.servers[id.0 as usize].injections.push_back(inj);
            }
        }
        Ok(())
    }

    /// Sets a reader's lag now (a jump); it holds until the next scheduled lag change, or for
    /// good when the lag is pinned. Replay never goes backwards.
    pub fn set_reader_lag(&mut self, id: ServerId, lag_ms: u64) -> Result<(), SimError> {
        self.reader_check(id)?;
        self.refresh_replays();
        self.servers[id.0 as usize].lag_ms = lag_ms;
        self.log(Event::LagChanged { server: id, lag_ms });
        self.process_now();
        Ok(())
    }

    /// Pins a reader's lag (`Some`) so scheduled changes skip it, or unpins it (`None`).
    pub fn pin_reader_lag(&mut self, id: ServerId, lag_ms: Option<u64>) -> Result<(), SimError> {
        self.reader_check(id)?;
        match lag_ms {
            Some(l) => {
                self.set_reader_lag(id, l)?;
                self.servers[id.0 as usize].lag_pinned = true;
            }
            None => self.servers[id.0 as usize].lag_pinned = false,
        }
        Ok(())
    }

    /// Writer failover: reader `id` becomes the primary. The old primary stops; its connections
    /// break without a message; its open transactions are gone. The new timeline starts at the
    /// promoted reader's replay position: commits after it are lost (see the history's
    /// `Failover`), and other readers that had replayed past it are rewound to it (their
    /// connections break). Connections to the promoted server stay, except those waiting for
    /// replay (broken: their target may lie on the lost timeline). Returns the new generation.
    pub fn promote(&mut self, id: ServerId) -> Result<u64, SimError> {
        self.reader_check(id)?;
        if !self.servers[id.0 as usize].up {
            return Err(SimError::BadServer(
                id,
                "a stopped reader cannot be promoted",
            ));
        }
        self.refresh_replays();
        let old = self.primary();
        let old_was_up = self.servers[old.0 as usize].up;
        let cut = self.servers[id.0 as usize].replay;
        let mut rewound = Vec::new();
        for s in &self.servers {
            if s.role == Role::Reader && s.id != id && s.replay > cut {
                rewound.push(s.id);
            }
        }
        let victims: Vec<ConnId> = self
            .conns
            .values()
            .filter(|c| {
                !c.is_closed()
                    && (c.server == old
                        || rewound.contains(&c.server)
                        || (c.server == id && c.running.as_ref().is_some_and(|r| r.wait.is_some())))
            })
            .map(|c| c.id)
            .collect();
        for cid in victims {
            let mut c = self.conns.remove(&cid).expect("listed");
            // Open transactions of the old primary abort (their abort records are cut off with
            // the rest of the timeline below).
            self.close_conn(&mut c, CloseReason::Broken);
            self.conns.insert(cid, c);
        }
        let lost = self.store.truncate(cut);
        self.store.append(); // end-of-recovery / timeline switch record
        self.store.flush(self.now);
        for s in self.servers.iter_mut() {
            if s.id == old {
                s.up = false;
                s.role = Role::Reader;
                s.replay = cut;
                s.incarnation += 1;
            } else if s.id == id {
                s.role = Role::Primary;
                s.lag_ms = 0;
            } else if s.replay > cut {
                s.replay = cut;
                s.incarnation += 1;
            }
        }
        self.generation += 1;
        self.timeline += 1;
        if old_was_up {
            self.log(Event::ServerStopped { server: old });
        }
        self.log(Event::Failover {
            old_primary: old,
            new_primary: id,
            generation: self.generation,
            timeline: self.timeline,
            truncated_at: cut,
            lost_xids: lost,
            rewound,
        });
        self.process_now();
        Ok(self.generation)
    }

    /// The primary restarts on a new timeline: every connection to it breaks (open
    /// transactions roll back), no committed data is lost. Returns the new generation.
    pub fn restart_primary_new_timeline(&mut self) -> u64 {
        let p = self.primary();
        let ids: Vec<ConnId> = self
            .conns
            .values()
            .filter(|c| c.server == p && !c.is_closed())
            .map(|c| c.id)
            .collect();
        for cid in ids {
            let mut c = self.conns.remove(&cid).expect("listed");
            self.close_conn(&mut c, CloseReason::Broken);
            self.conns.insert(cid, c);
        }
        self.store.append();
        if self.store.flush(self.now) {
            let lsn = self.store.flushed;
            self.log(Event::Flush { lsn });
        }
        self.servers[p.0 as usize].up = true;
        self.generation += 1;
        self.timeline += 1;
        self.log(Event::PrimaryRestarted {
            server: p,
            generation: self.generation,
            timeline: self.timeline,
        });
        self.process_now();
        self.generation
    }

    fn server_check(&self, id: ServerId) -> Result<(), SimError> {
        if (id.0 as usize) < self.servers.len() {
            Ok(())
        } else {
            Err(SimError::UnknownServer(id))
        }
    }

    fn reader_check(&self, id: ServerId) -> Result<(), SimError> {
        self.server_check(id)?;
        if self.servers[id.0 as usize].role != Role::Reader {
            return Err(SimError::BadServer(id, "not a reader"));
        }
        Ok(())
    }

    // ----- ground truth -----------------------------------------------------------------------

    /// The primary's WAL insert position.
    pub fn insert_lsn(&self) -> Lsn {
        self.store.insert
    }

    /// The primary's flushed WAL position.
    pub fn flushed_lsn(&self) -> Lsn {
        self.store.flushed
    }

    /// A reader's replay position now (`None` for the primary or an unknown server).
    pub fn replay_lsn(&self, id: ServerId) -> Option<Lsn> {
        let s = self.servers.get(id.0 as usize)?;
        (s.role == Role::Reader).then_some(s.replay)
    }

    pub fn lag_ms(&self, id: ServerId) -> Option<u64> {
        self.servers.get(id.0 as usize).map(|s| s.lag_ms)
    }

    /// The committed value of `k` as of `lsn` on the current timeline (`None`: no row).
    pub fn committed_value(&self, k: i64, lsn: Lsn) -> Option<i64> {
        self.store.committed_value(k, lsn)
    }

    /// The committed value of `k` now.
    pub fn committed_value_now(&self, k: i64) -> Option<i64> {
        self.store.committed_value(k, self.store.insert)
    }

    /// The whole committed table as of `lsn`.
    pub fn committed_rows(&self, lsn: Lsn) -> Vec<(i64, i64)> {
        self.store.scan(&crate::store::Snapshot { lsn, own: None })
    }

    pub fn xid_status(&self, xid: Xid) -> Option<XidStatus> {
        self.store.xids.get(&xid).copied()
    }

    /// Last value handed out by `nextval('s')` (0 before the first).
    pub fn sequence_value(&self) -> i64 {
        self.store.seq_s
    }

    // ----- history ----------------------------------------------------------------------------

    pub fn history(&self) -> &[Entry] {
        &self.history
    }

    /// Entries from position `seq` on.
    pub fn history_since(&self, seq: u64) -> &[Entry] {
        let i = (seq as usize).min(self.history.len());
        &self.history[i..]
    }

    pub(crate) fn log(&mut self, event: Event) {
        let seq = self.history.len() as u64;
        self.history.push(Entry {
            seq,
            time: self.now,
            event,
        });
    }

    pub(crate) fn server(&self, id: ServerId) -> &Server {
        &self.servers[id.0 as usize]
    }

    pub(crate) fn server_mut(&mut self, id: ServerId) -> &mut Server {
        &mut self.servers[id.0 as usize]
    }
}
