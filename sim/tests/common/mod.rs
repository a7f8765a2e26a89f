//! A tiny fake host for the conformance tests: raw bytes in, decoded messages out.
#![allow(dead_code)]

use polarsplit::internals::protocol::RfqExtensions;
use polarsplit::{LsnField, Marker, TxStatus};
use polarsplit_sim::client::{self, Decoder, Fields, Msg};
use polarsplit_sim::{Cluster, ClusterConfig, ConnId, Dialect, Lsn, ServerRef};

pub const BOTH: RfqExtensions = RfqExtensions {
    lsn: true,
    xact: true,
};
pub const NONE: RfqExtensions = RfqExtensions {
    lsn: false,
    xact: false,
};

/// A quiet cluster: no random lag changes, no periodic flush unless asked.
pub fn cluster(dialect: Dialect) -> Cluster {
    Cluster::new(ClusterConfig {
        seed: 42,
        dialect,
        readers: 2,
        initial_keys: 10,
        min_lag_ms: 50,
        max_lag_ms: 50,
        lag_change_interval_ms: 0,
        flush_interval_ms: 0,
        ..ClusterConfig::default()
    })
}

pub struct Conn {
    pub id: ConnId,
    pub dec: Decoder,
}

/// Connects and completes the startup; returns the connection and the startup messages.
pub fn open(
    c: &mut Cluster,
    to: ServerRef,
    startup: &[u8],
    ext: RfqExtensions,
) -> (Conn, Vec<Msg>) {
    let id = c.connect(to).expect("connect");
    c.write(id, startup).expect("write startup");
    let mut conn = Conn {
        id,
        dec: Decoder::new(ext),
    };
    let msgs = conn.read(c);
    (conn, msgs)
}

/// Opens a v15-profile connection (LSN + xact info), asserting the startup succeeded.
pub fn v15(c: &mut Cluster, to: ServerRef) -> Conn {
    let (conn, msgs) = open(c, to, &client::startup_v15("app", "db"), BOTH);
    assert!(
        msgs.last().is_some_and(Msg::is_rfq),
        "startup failed: {msgs:?}"
    );
    conn
}

/// Opens a plain connection (no `_polar_*` keys).
pub fn plain(c: &mut Cluster, to: ServerRef) -> Conn {
    let (conn, msgs) = open(c, to, &client::startup_plain("app", "db"), NONE);
    assert!(
        msgs.last().is_some_and(Msg::is_rfq),
        "startup failed: {msgs:?}"
    );
    conn
}

impl Conn {
    pub fn read(&mut self, c: &mut Cluster) -> Vec<Msg> {
        let bytes = c.read_all(self.id);
        self.dec.feed(&bytes)
    }

    /// Sends a simple Query and returns whatever came back so far.
    pub fn q(&mut self, c: &mut Cluster, sql: &str) -> Vec<Msg> {
        c.write(self.id, &client::query(sql)).expect("write query");
        self.read(c)
    }

    /// Sends a Query that must complete now; returns its messages.
    pub fn ok(&mut self, c: &mut Cluster, sql: &str) -> Vec<Msg> {
        let m = self.q(c, sql);
        assert!(
            m.last().is_some_and(Msg::is_rfq),
            "{sql}: no RFQ yet: {m:?}"
        );
        assert!(error(&m).is_none(), "{sql}: {m:?}");
        m
    }
}

pub fn rfq(m: &[Msg]) -> (TxStatus, LsnField, Option<(Marker, String)>, u32) {
    match m.iter().rev().find(|m| m.is_rfq()) {
        Some(Msg::ReadyForQuery {
            status,
            lsn,
            xact,
            len,
        }) => (*status, *lsn, xact.clone(), *len),
        _ => panic!("no RFQ in {m:?}"),
    }
}

pub fn rfq_lsn(m: &[Msg]) -> Lsn {
    match rfq(m).1 {
        LsnField::At(l) => l,
        other => panic!("RFQ LSN is {other:?}"),
    }
}

pub fn error(m: &[Msg]) -> Option<&Fields> {
    m.iter().find_map(|m| match m {
        Msg::Error(f) => Some(f),
        _ => None,
    })
}

pub fn notices(m: &[Msg]) -> Vec<&Fields> {
    m.iter()
        .filter_map(|m| match m {
            Msg::Notice(f) => Some(f),
            _ => None,
        })
        .collect()
}

pub fn code(m: &[Msg]) -> Option<String> {
    error(m).and_then(|f| f.code().map(str::to_string))
}

pub fn tags(m: &[Msg]) -> Vec<String> {
    m.iter()
        .filter_map(|m| match m {
            Msg::CommandComplete(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

pub fn rows(m: &[Msg]) -> Vec<Vec<Option<String>>> {
    m.iter()
        .filter_map(|m| match m {
            Msg::DataRow(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The single value of a one-row, one-column result (None: no row or NULL).
pub fn value(m: &[Msg]) -> Option<String> {
    rows(m).first().and_then(|r| r[0].clone())
}

pub fn count_rfq(m: &[Msg]) -> usize {
    m.iter().filter(|m| m.is_rfq()).count()
}
