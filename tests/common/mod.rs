//! The transcript tests' builders and fake host: thin names over `polarsplit-test-support`
//! (one set of builders for tests, simulator, fuzz targets and benches). The fake host feeds
//! real protocol bytes and records the exact action sequence, and the bytes each side receives
//! (reconstructed by `polarsplit::host::Streams`).
#![allow(dead_code, unused_imports)]

use polarsplit::classify::Isolation;
use polarsplit::config::Config;
use polarsplit_test_support::be;

pub use polarsplit_test_support::action::A;
pub use polarsplit_test_support::be::{
    auth_ok, command_complete, error, notice, param_status, select_result, wait_timeout_error,
};
pub use polarsplit_test_support::decode::{
    client_rfq_statuses, messages, parse_client_rfq, sent_queries, tags,
};
pub use polarsplit_test_support::fe::{msg, query, startup};
pub use polarsplit_test_support::host::{client_info, Host, WRITER};

/// A default configuration changed by `f`.
pub fn config(f: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    f(&mut c);
    c
}

pub fn backend_key(pid: i32, secret: i32) -> Vec<u8> {
    be::backend_key(pid, secret as u32)
}

/// An RFQ: status, optional 8-byte LSN, optional marker + XID list.
pub fn rfq(status: u8, lsn: Option<u64>, xact: Option<(u8, &str)>) -> Vec<u8> {
    be::rfq(status, lsn, xact.map(|(m, x)| (m, x.as_bytes())))
}

/// A RowDescription of `cols` columns `c0`, `c1`, … (type fields zero).
pub fn row_description(cols: u16) -> Vec<u8> {
    let cols: Vec<be::Column> = (0..cols)
        .map(|i| be::Column::untyped(&format!("c{i}")))
        .collect();
    be::row_description(&cols)
}

pub fn data_row(vals: &[&str]) -> Vec<u8> {
    let vals: Vec<Option<&str>> = vals.iter().map(|v| Some(*v)).collect();
    be::data_row(&vals)
}

pub fn isolation_rc() -> Option<Isolation> {
    Some(Isolation::ReadCommitted)
}
