//! Same seed + same calls ⇒ identical bytes and history; and under a randomized workload every
//! reader read matches the ground truth at its snapshot (the simulator's own consistency).
mod common;

use common::BOTH;
use polarsplit_sim::client::{self, Decoder};
use polarsplit_sim::history::{Event, StmtResult, WaitOutcome};
use polarsplit_sim::{Cluster, ClusterConfig, ConnId, Dialect, Lsn, Rng, Role, ServerRef};

/// A randomized multi-connection workload; returns the cluster and each connection's bytes.
fn workload(seed: u64, dialect: Dialect) -> (Cluster, Vec<(ConnId, Vec<u8>)>) {
    let mut c = Cluster::new(ClusterConfig {
        seed,
        dialect,
        readers: 2,
        initial_keys: 20,
        flush_interval_ms: 100,
        min_lag_ms: 5,
        max_lag_ms: 200,
        lag_change_interval_ms: 250,
        missing_lsn_per_million: 100_000,
        ..ClusterConfig::default()
    });
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut conns = Vec::new();
    for to in [
        ServerRef::Primary,
        ServerRef::Primary,
        ServerRef::Primary,
        ServerRef::Reader(0),
        ServerRef::Reader(1),
        ServerRef::Reader(1),
    ] {
        let id = c.connect(to).unwrap();
        c.write(id, &client::startup_v15("u", "d")).unwrap();
        conns.push((id, c.read_all(id)));
    }
    let mut last_lsn = Lsn(0);
    for _ in 0..400 {
        let i = rng.range(0, conns.len() as u64 - 1) as usize;
        let id = conns[i].0;
        let k = rng.range(1, 30);
        let v = rng.range(0, 1000);
        let sql = if i < 3 {
            match rng.range(0, 9) {
                0 => "BEGIN".to_string(),
                1 => "COMMIT".to_string(),
                2 => "ROLLBACK".to_string(),
                3 => format!("INSERT INTO kv VALUES ({k}, {v})"),
                4 | 5 => format!("UPDATE kv SET v = {v} WHERE k = {k}"),
                6 => format!("DELETE FROM kv WHERE k = {k}"),
                7 => "SAVEPOINT a".to_string(),
                8 => "SELECT nextval('s')".to_string(),
                _ => format!("SELECT v FROM kv WHERE k = {k}"),
            }
        } else if dialect == Dialect::Awide && rng.range(0, 1) == 0 {
            let mode = if rng.range(0, 1) == 0 {
                "strict"
            } else {
                "best_effort"
            };
            format!(
                "SET polar_consistency_mode = '{mode}'; SET polar_proxy_wait_timeout_ms = {}; \
                 SET polar_xact_split_wait_lsn = '{}'; SELECT v FROM kv WHERE k = {k}",
                rng.range(0, 300),
                last_lsn.0
            )
        } else {
            "SELECT k, v FROM kv ORDER BY k".to_string()
        };
        if !c.server_closed(id) {
            c.write(id, &client::query(&sql)).unwrap();
        }
        c.advance(rng.range(0, 40));
        last_lsn = c.insert_lsn();
        for (id, bytes) in conns.iter_mut() {
            bytes.extend(c.read_all(*id));
        }
    }
    // Let every wait end (awide timeouts are bounded by 300 ms; lag by 200 ms).
    c.advance(1_000);
    for (id, bytes) in conns.iter_mut() {
        bytes.extend(c.read_all(*id));
    }
    (c, conns)
}

#[test]
fn determinism_same_seed_same_transcript() {
    for d in [Dialect::Awide, Dialect::Polardb] {
        let (a, ta) = workload(7, d);
        let (b, tb) = workload(7, d);
        assert_eq!(ta, tb, "{d:?}");
        assert_eq!(a.history(), b.history(), "{d:?}");
        assert!(a.history().len() > 500);
        let (x, tx) = workload(8, d);
        assert_ne!(ta, tx, "{d:?}: another seed, another run");
        assert_ne!(a.history(), x.history());
    }
}

#[test]
fn transcripts_decode_and_reader_reads_match_ground_truth() {
    for d in [Dialect::Awide, Dialect::Polardb] {
        let (c, transcripts) = workload(11, d);
        for (_, bytes) in &transcripts {
            // Every byte is a well-formed backend message the engine's parser accepts.
            let mut dec = Decoder::new(BOTH);
            dec.feed(bytes);
            assert_eq!(dec.buffered(), 0);
        }
        let mut checked = 0;
        for e in c.history() {
            let Event::Statement(s) = &e.event else {
                continue;
            };
            if s.role != Role::Reader || !s.result.is_ok() {
                continue;
            }
            let Some(snap) = &s.snapshot else { continue };
            assert!(snap.import.is_none());
            for (k, v) in &s.reads {
                assert_eq!(*v, c.committed_value(*k, snap.lsn), "{d:?} {s:?}");
                checked += 1;
            }
            if let Some(w) = &s.wait {
                assert!(w.ended >= w.started);
            }
        }
        assert!(checked > 100, "{d:?}: {checked}");
        let errors = c
            .history()
            .iter()
            .filter(|e| matches!(&e.event, Event::Statement(s) if matches!(s.result, StmtResult::Error { .. })))
            .count();
        assert!(errors > 0, "the workload exercises errors too");
        if d == Dialect::Awide {
            let ends: Vec<WaitOutcome> = c
                .history()
                .iter()
                .filter_map(|e| match e.event {
                    Event::WaitEnded { outcome, .. } => Some(outcome),
                    _ => None,
                })
                .collect();
            assert!(ends.contains(&WaitOutcome::Reached) && ends.contains(&WaitOutcome::TimedOut));
        }
    }
}
