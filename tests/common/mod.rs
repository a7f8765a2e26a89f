//! The transcript tests' builders and fake host: thin names over `polarsplit-test-support`
//! (one set of builders for tests, simulator, fuzz targets and benches). The fake host feeds
//! real protocol bytes and records the exact action sequence, and the bytes each side receives
//! (reconstructed by `polarsplit::Streams`).
#![allow(dead_code, unused_imports)]

use polarsplit::Config;
use polarsplit::Isolation;
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

/// SPEC §8's defaults changed by `(name, value)` settings, built through `ConfigBuilder`.
pub use polarsplit_test_support::config;

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

/// The ErrorResponse a server answers a cancelled statement with (57014).
pub fn cancelled_error() -> Vec<u8> {
    error(
        "ERROR",
        "57014",
        "canceling statement due to user request",
        None,
        None,
    )
}

pub fn isolation_rc() -> Option<Isolation> {
    Some(Isolation::ReadCommitted)
}

/// The writer's answer to the engine's capture of the session state (S-5) for the session user
/// `app` ([`capture_answer_as`]).
pub fn capture_answer(settings: &[(&str, &str)], role: Option<&str>) -> Vec<u8> {
    capture_answer_as("app", settings, role)
}

pub use polarsplit_test_support::host::{
    capture_answer_as, capture_answer_with, ends_with_touch, is_abort, is_keepalive,
    probe_answer_rows, sends_capture, steps_answer, touch_answer,
};

// --- Extended-protocol client messages --------------------------------------------------------

pub fn parse(name: &str, sql: &str) -> Vec<u8> {
    let mut b = format!("{name}\0{sql}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes());
    msg(b'P', &b)
}

/// A Bind of `stmt` to `portal` with one text parameter `7`.
pub fn bind(portal: &str, stmt: &str) -> Vec<u8> {
    let mut b = format!("{portal}\0{stmt}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes()); // parameter formats
    b.extend_from_slice(&1i16.to_be_bytes()); // one parameter
    b.extend_from_slice(&1i32.to_be_bytes());
    b.push(b'7');
    b.extend_from_slice(&0i16.to_be_bytes()); // result formats
    msg(b'B', &b)
}

/// A Bind of `stmt` to `portal` with text-format `values`.
pub fn bind_values(portal: &str, stmt: &str, values: &[&str]) -> Vec<u8> {
    let mut b = format!("{portal}\0{stmt}\0").into_bytes();
    b.extend_from_slice(&0i16.to_be_bytes()); // parameter formats: all text
    b.extend_from_slice(&(values.len() as i16).to_be_bytes());
    for v in values {
        b.extend_from_slice(&(v.len() as i32).to_be_bytes());
        b.extend_from_slice(v.as_bytes());
    }
    b.extend_from_slice(&0i16.to_be_bytes()); // result formats
    msg(b'B', &b)
}

pub fn describe(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'D', &b)
}

pub fn execute(portal: &str) -> Vec<u8> {
    execute_rows(portal, 0)
}

pub fn execute_rows(portal: &str, max_rows: i32) -> Vec<u8> {
    let mut b = format!("{portal}\0").into_bytes();
    b.extend_from_slice(&max_rows.to_be_bytes());
    msg(b'E', &b)
}

pub fn close(kind: u8, name: &str) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    msg(b'C', &b)
}

pub fn sync() -> Vec<u8> {
    msg(b'S', b"")
}

pub fn flush() -> Vec<u8> {
    msg(b'H', b"")
}

/// psycopg's shape for a query with parameters: Parse, Bind, Describe portal, Execute, Sync.
pub fn unnamed_batch(sql: &str) -> Vec<u8> {
    let mut b = parse("", sql);
    b.extend(bind("", ""));
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}

/// A named statement executed: Bind, Describe portal, Execute, Sync (psycopg after
/// `prepare_threshold`, asyncpg, JDBC).
pub fn named_execute(stmt: &str) -> Vec<u8> {
    let mut b = bind("", stmt);
    b.extend(describe(b'P', ""));
    b.extend(execute(""));
    b.extend(sync());
    b
}

/// The backend's answer to Bind/Describe/Execute/Sync of a one-column read.
pub fn bound_answer(rows: &[&str], lsn: Option<u64>) -> Vec<u8> {
    let mut b = msg(b'2', b"");
    b.extend(row_description(1));
    for r in rows {
        b.extend(data_row(&[r]));
    }
    b.extend(command_complete(&format!("SELECT {}", rows.len())));
    b.extend(rfq(b'I', lsn, None));
    b
}

/// The answers to `n` hidden SETs the engine sent ahead of a batch's own messages (E-3: a wait
/// as hidden unnamed Parse/Bind/Execute): ParseComplete, BindComplete, CommandComplete each.
pub fn hidden_sets_answer(n: usize) -> Vec<u8> {
    let mut b = Vec::new();
    for _ in 0..n {
        b.extend(msg(b'1', b""));
        b.extend(msg(b'2', b""));
        b.extend(command_complete("SET"));
    }
    b
}

/// ParseComplete then `bound_answer`.
pub fn parsed_answer(rows: &[&str], lsn: Option<u64>) -> Vec<u8> {
    let mut b = msg(b'1', b"");
    b.extend(bound_answer(rows, lsn));
    b
}

/// Statement names in a frontend byte stream, per message: (tag, name).
pub fn named(bytes: &[u8]) -> Vec<(char, String)> {
    messages(bytes)
        .into_iter()
        .filter_map(|(t, b)| {
            let name = match t {
                b'P' | b'D' | b'C' => {
                    let start = usize::from(matches!(t, b'D' | b'C'));
                    let end = b[start..].iter().position(|&x| x == 0)? + start;
                    String::from_utf8_lossy(&b[start..end]).into_owned()
                }
                b'B' => {
                    let p = b.iter().position(|&x| x == 0)?;
                    let e = b[p + 1..].iter().position(|&x| x == 0)? + p + 1;
                    String::from_utf8_lossy(&b[p + 1..e]).into_owned()
                }
                _ => String::new(),
            };
            Some((t as char, name))
        })
        .collect()
}
