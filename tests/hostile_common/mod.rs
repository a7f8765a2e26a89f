//! Shared by the `hostile_*` and `isolation_*` test binaries: the counting allocator and the
//! lean host of `polarsplit-test-support`, and the byte-string builders these tests use.
#![allow(dead_code, unused_imports)]

use polarsplit_test_support::{be, fe};

pub use polarsplit_test_support::alloc::{
    allocations, heap_contains, live_bytes, measure, start_tracking, stop_tracking, Counting,
};
pub use polarsplit_test_support::contains;
pub use polarsplit_test_support::fe::msg;
pub use polarsplit_test_support::host::WRITER;
pub use polarsplit_test_support::lean::{Lean, Seen};

pub fn query(sql: &[u8]) -> Vec<u8> {
    fe::query_bytes(sql)
}

pub fn startup() -> Vec<u8> {
    fe::startup_plain("app", "db")
}

pub fn rfq(status: u8, lsn: Option<u64>, xact: Option<(u8, &[u8])>) -> Vec<u8> {
    be::rfq(status, lsn, xact)
}

pub fn command_complete(tag: &str) -> Vec<u8> {
    be::command_complete(tag)
}

/// A one-column DataRow.
pub fn data_row(value: &[u8]) -> Vec<u8> {
    be::data_row(&[Some(value)])
}

/// A one-column RowDescription (`v`, type fields zero).
pub fn row_description() -> Vec<u8> {
    be::row_description(&[be::Column::untyped("v")])
}
