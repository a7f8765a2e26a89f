//! Directed failure scenarios (issue 6) through the simulated cluster: the engine, a minimal
//! host, real wire bytes, and faults placed exactly where each scenario needs them.

use std::sync::Arc;

use polarsplit::internals::protocol::RfqExtensions;
use polarsplit::Engine;
use polarsplit::Streams;
use polarsplit::{Action, ClientInfo, Decision, Event as SEvent, Outcome, Reason, Session};
use polarsplit::{Config, OnWaitTimeout};
use polarsplit_sim::client::{self, Decoder, Msg};
use polarsplit_sim::{
    Cluster, ClusterConfig, ConnId, Dialect, Event, Injection, Matcher, Role, ServerId, ServerRef,
    Target,
};

/// One client, its session, and the connections the host opened for it.
struct Rig {
    cluster: Cluster,
    engine: Arc<Engine>,
    session: Session,
    streams: Streams,
    decoder: Decoder,
    conns: Vec<u64>,
    decisions: Vec<Decision>,
    pending: Vec<(u64, SEvent)>,
}

impl Rig {
    fn new(readers: usize, lag_ms: u64, config: Config) -> Rig {
        let mut cluster = Cluster::new(ClusterConfig {
            seed: 42,
            dialect: Dialect::Awide,
            readers,
            min_lag_ms: lag_ms,
            max_lag_ms: lag_ms,
            lag_change_interval_ms: 0,
            ..ClusterConfig::default()
        });
        for r in cluster.readers() {
            cluster.pin_reader_lag(r, Some(lag_ms)).unwrap();
        }
        let engine = Engine::new(config);
        for r in cluster.readers() {
            engine.add_reader(r.0, 1);
        }
        let session = Session::new(
            engine.clone(),
            ClientInfo {
                client_addr: Some(("10.0.0.9".into(), 4000)),
                ..ClientInfo::default()
            },
        );
        let mut rig = Rig {
            cluster,
            engine,
            session,
            streams: Streams::new(),
            decoder: Decoder::new(RfqExtensions::default()),
            conns: Vec::new(),
            decisions: Vec::new(),
            pending: Vec::new(),
        };
        rig.client(&client::startup_plain("app", "db"));
        rig.until_rfq(|_| {});
        rig
    }

    fn client(&mut self, bytes: &[u8]) {
        let now = self.cluster.now();
        let n = self.session.recv_client(bytes, now).unwrap();
        assert_eq!(n, bytes.len());
        self.streams.fed_client(bytes);
        self.drain();
    }

    /// Applies the session's actions; opens connections as asked.
    fn drain(&mut self) {
        loop {
            while let Some(a) = self.session.poll_action() {
                self.streams.apply(&a).unwrap();
                match a {
                    Action::ConnectWriter { startup } => {
                        let w = self.cluster.connect(ServerRef::Primary).unwrap();
                        self.cluster.write(w, startup).unwrap();
                        self.conns.push(w.0);
                        self.pending.push((w.0, SEvent::WriterConnected));
                    }
                    Action::AcquireReader {
                        server, startup, ..
                    } => {
                        // Always a fresh connection (this host keeps no pool).
                        match self.cluster.connect(ServerRef::Id(ServerId(server))) {
                            Ok(c) => {
                                self.cluster.write(c, startup).unwrap();
                                let _ = self.cluster.read_all(c);
                                self.conns.push(c.0);
                                self.pending.push((
                                    c.0,
                                    SEvent::ReaderAttached {
                                        server,
                                        fresh: true,
                                        needs_reset: false,
                                    },
                                ));
                            }
                            Err(_) => self.pending.push((
                                0,
                                SEvent::ReaderUnavailable {
                                    no_credentials: false,
                                },
                            )),
                        }
                    }
                    Action::ReleaseReader { conn, .. } | Action::CloseBackend { conn } => {
                        self.conns.retain(|c| *c != conn);
                        let _ = self.cluster.kill(ConnId(conn));
                    }
                    Action::Decision(d) => self.decisions.push(d),
                    _ => {}
                }
            }
            for (conn, b) in self.streams.backends.iter_mut() {
                if !b.sent.is_empty() {
                    let bytes = std::mem::take(&mut b.sent);
                    let _ = self.cluster.write(ConnId(*conn), &bytes);
                }
            }
            if self.pending.is_empty() {
                break;
            }
            let (conn, ev) = self.pending.remove(0);
            let now = self.cluster.now();
            self.session.on_backend_event(conn, ev, now).unwrap();
        }
    }

    /// Runs until the client has an RFQ; `each` may strike a fault between steps. Returns the
    /// client's messages.
    fn until_rfq(&mut self, mut each: impl FnMut(&mut Rig)) -> Vec<Msg> {
        let mut got = Vec::new();
        for _ in 0..100_000 {
            each(self);
            let mut moved = false;
            for conn in self.conns.clone() {
                let c = ConnId(conn);
                if self.cluster.pending_output(c) > 0 {
                    let bytes = self.cluster.read(c, 64);
                    let now = self.cluster.now();
                    self.session.recv_backend(conn, &bytes, now).unwrap();
                    self.streams.fed_backend(conn, &bytes);
                    self.drain();
                    moved = true;
                } else if self.cluster.server_closed(c) {
                    self.conns.retain(|x| *x != conn);
                    let now = self.cluster.now();
                    let _ = self
                        .session
                        .on_backend_event(conn, SEvent::ConnectionLost, now);
                    self.drain();
                    moved = true;
                }
            }
            let out = std::mem::take(&mut self.streams.to_client);
            for m in self.decoder.feed(&out) {
                let rfq = m.is_rfq();
                got.push(m);
                if rfq {
                    return got;
                }
            }
            if !moved {
                let now = self.cluster.now();
                let next = self
                    .cluster
                    .next_event_time()
                    .unwrap_or(now + 1)
                    .min(now + 5);
                self.cluster.advance_to(next.max(now + 1));
                for r in self.cluster.readers() {
                    if let Some(l) = self.cluster.replay_lsn(r) {
                        self.engine.reader_sample(r.0, l, self.cluster.now());
                    }
                }
            }
        }
        panic!("no answer: {got:?}");
    }

    fn run(&mut self, sql: &str, each: impl FnMut(&mut Rig)) -> Vec<Msg> {
        self.client(&client::query(sql));
        self.until_rfq(each)
    }

    fn reasons(&self) -> Vec<Reason> {
        self.decisions.iter().map(|d| d.reason).collect()
    }

    /// Where the last `SELECT v` statement with this text ran, per the server's history.
    fn last_select_role(&self, text: &str) -> Option<Role> {
        self.cluster
            .history()
            .iter()
            .rev()
            .find_map(|e| match &e.event {
                Event::Statement(s) if s.text == text && s.result.is_ok() => Some(s.role),
                _ => None,
            })
    }

    fn waiting_reader_conn(&self) -> Option<u64> {
        self.conns
            .iter()
            .copied()
            .find(|c| self.cluster.is_waiting(ConnId(*c)))
    }
}

fn value(msgs: &[Msg]) -> Option<String> {
    msgs.iter().find_map(|m| match m {
        Msg::DataRow(cols) => cols.first().cloned().flatten(),
        _ => None,
    })
}

fn error_code(msgs: &[Msg]) -> Option<String> {
    msgs.iter().find_map(|m| match m {
        Msg::Error(f) => f.code().map(str::to_string),
        _ => None,
    })
}

const READ: &str = "SELECT v FROM kv WHERE k = 5";

#[test]
fn f2_reader_dies_mid_wait_retried_on_another_reader_then_the_writer() {
    let mut rig = Rig::new(2, 400, polarsplit_test_support::default_config());
    rig.run("UPDATE kv SET v = 777 WHERE k = 5", |_| {});
    let mut kills = 0;
    let msgs = rig.run(READ, |r| {
        if let Some(c) = r.waiting_reader_conn() {
            r.cluster.kill(ConnId(c)).unwrap();
            kills += 1;
        }
    });
    assert_eq!(kills, 2, "both readers were waiting when they died");
    assert_eq!(value(&msgs).as_deref(), Some("777"));
    let reasons = rig.reasons();
    assert!(reasons.contains(&Reason::RetryOtherReader), "{reasons:?}");
    assert!(
        reasons.contains(&Reason::RetryPrimaryAfterLoss),
        "{reasons:?}"
    );
    assert_eq!(rig.last_select_role(READ), Some(Role::Primary));
}

#[test]
fn f3_reader_dies_after_the_first_row_the_error_is_forwarded_and_the_transaction_fails() {
    let mut rig = Rig::new(1, 0, polarsplit_test_support::default_config());
    rig.run("BEGIN", |_| {});
    let scan = "SELECT k, v FROM kv ORDER BY k";
    let mut cut = false;
    let msgs = rig.run(scan, |r| {
        // Once a row reached the client, cut the reader's connection.
        if cut {
            return;
        }
        let primary = r.cluster.primary();
        let reader = r
            .conns
            .iter()
            .copied()
            .find(|c| r.cluster.conn_server(ConnId(*c)) != Some(primary));
        if let Some(c) = reader {
            // RowDescription (~40 bytes) and at least one row went to the client.
            if r.streams.backends.get(&c).is_some_and(|b| b.forwarded > 60) {
                r.cluster.kill_discarding(ConnId(c)).unwrap();
                cut = true;
            }
        }
    });
    assert!(cut);
    let rows = msgs.iter().filter(|m| matches!(m, Msg::DataRow(_))).count();
    assert!(
        (1..100).contains(&rows),
        "some rows, then the error: {rows}"
    );
    assert_eq!(
        msgs.iter()
            .filter(|m| matches!(m, Msg::RowDescription(_)))
            .count(),
        1,
        "no retry"
    );
    assert_eq!(error_code(&msgs).as_deref(), Some("55000"));
    match msgs.last() {
        Some(Msg::ReadyForQuery { status, .. }) => {
            assert_eq!(*status, polarsplit::TxStatus::Failed)
        }
        other => panic!("{other:?}"),
    }
    // The writer's transaction is failed like PostgreSQL's would be.
    let msgs = rig.run("SELECT v FROM kv WHERE k = 1", |_| {});
    assert_eq!(error_code(&msgs).as_deref(), Some("25P02"));
    rig.run("ROLLBACK", |_| {});
}

#[test]
fn f2_strict_timeout_is_answered_by_the_writer_with_the_primarys_result() {
    let config = polarsplit_test_support::config(&[("wait_timeout_ms", "50")]);
    let mut rig = Rig::new(1, 2000, config);
    rig.run("UPDATE kv SET v = 4242 WHERE k = 5", |_| {});
    let msgs = rig.run(READ, |_| {});
    assert_eq!(value(&msgs).as_deref(), Some("4242"));
    assert_eq!(rig.cluster.committed_value_now(5), Some(4242));
    assert!(rig.reasons().contains(&Reason::RetryPrimaryAfterTimeout));
    assert_eq!(rig.last_select_role(READ), Some(Role::Primary));
    assert!(error_code(&msgs).is_none());
}

#[test]
fn w5_best_effort_timeout_gives_one_warning_and_the_stale_rows() {
    let config = polarsplit_test_support::config(&[
        ("wait_timeout_ms", "50"),
        ("on_wait_timeout", OnWaitTimeout::Warning.as_str()),
    ]);
    let mut rig = Rig::new(1, 2000, config);
    rig.run("UPDATE kv SET v = 99 WHERE k = 5", |_| {});
    let msgs = rig.run(READ, |_| {});
    let warnings: Vec<&Msg> = msgs
        .iter()
        .filter(
            |m| matches!(m, Msg::Notice(f) if f.detail() == Some("polar_proxy_lsn_wait_timeout")),
        )
        .collect();
    assert_eq!(warnings.len(), 1, "{msgs:?}");
    // Stale: the reader had not replayed the write.
    assert_eq!(value(&msgs).as_deref(), Some("50"));
    assert_eq!(rig.last_select_role(READ), Some(Role::Reader));
    assert_eq!(
        rig.engine
            .stats()
            .get(polarsplit::Counter::BestEffortWarnings),
        1
    );
}

#[test]
fn f1_reader_refusing_the_wait_sets_is_answered_by_the_writer_and_gets_no_more_waits() {
    let mut rig = Rig::new(1, 300, polarsplit_test_support::default_config());
    let reader = rig.cluster.readers()[0];
    rig.cluster
        .inject_error(
            Target::Server(reader),
            Injection::error(
                "42704",
                "unrecognized configuration parameter \"polar_consistency_mode\"",
            )
            .matching(Matcher::PolarSet),
        )
        .unwrap();
    rig.run("UPDATE kv SET v = 31 WHERE k = 5", |_| {});
    let msgs = rig.run(READ, |_| {});
    assert_eq!(value(&msgs).as_deref(), Some("31"));
    assert!(
        error_code(&msgs).is_none(),
        "the hidden SET's error never reaches the client"
    );
    assert!(rig.reasons().contains(&Reason::RetryPrimaryAfterError));
    assert!(rig.engine.waits_unsupported(reader.0));
    // The next read that needs a wait does not get one on that reader.
    rig.run("UPDATE kv SET v = 32 WHERE k = 5", |_| {});
    let msgs = rig.run(READ, |_| {});
    assert_eq!(value(&msgs).as_deref(), Some("32"));
    let last = *rig.decisions.last().unwrap();
    assert_eq!(
        (last.outcome, last.reason),
        (Outcome::ForcePrimary, Reason::ReadNoBoundedWait)
    );
}
