//! Hidden statements (SPEC W-4): built only from fixed text, validated numbers, a validated XID
//! list and the client's own bytes, in a fixed order, each `SET <name> = <value>;` followed by
//! one space, then the client's statement byte for byte — one Query message, one NUL.

use std::io::Write;

use super::state::Settings;
use crate::protocol::tag;

/// The LSN wait (W-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// `strict` or `best_effort`.
    pub mode: &'static str,
    pub timeout_ms: u32,
    pub lsn: u64,
    /// Stock PostgreSQL 19+: one `WAIT FOR LSN` statement instead of the PolarDB SETs.
    pub wait_for_statement: bool,
}

/// What goes in front of the client's statement.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hidden<'a> {
    /// Clear an XID import left on the connection (P-7).
    pub reset: bool,
    /// Bring a fresh connection's settings in line with the session's (S-4).
    pub settings: Option<&'a Settings>,
    /// A validated XID list to import (P-5). Callers pass only `XidList`-validated text.
    pub import: Option<&'a str>,
    pub wait: Option<Wait>,
}

/// A statement that always fails without side effects: it aborts the writer's transaction
/// after an error reached the client (F-3). Its result is swallowed.
pub const ABORT_STATEMENT: &[u8] =
    b"DO $polarsplit$ BEGIN RAISE EXCEPTION 'polarsplit: transaction aborted after a failed replica read'; END $polarsplit$";

/// The post-commit position probe for writers whose RFQs carry no LSN (issue 11). The insert
/// position, not `pg_current_wal_lsn()`: with `synchronous_commit = off` the latter can lag the
/// commit (verified here, NOTES).
pub const PROBE_STATEMENT: &[u8] = b"SELECT pg_current_wal_insert_lsn()";

/// Writes the hidden statements' text; returns how many statements (each answers one
/// CommandComplete).
fn hidden_text(out: &mut Vec<u8>, h: &Hidden<'_>) -> u16 {
    let mut n = 0u16;
    if h.reset {
        out.extend_from_slice(b"SET polar_xact_split_xids = ''; ");
        n += 1;
    }
    if let Some(settings) = h.settings {
        for (_, stmt) in settings.iter() {
            out.extend_from_slice(
                stmt.trim_end_matches([';', ' ', '\n', '\t', '\r'])
                    .as_bytes(),
            );
            out.extend_from_slice(b"; ");
            n += 1;
        }
    }
    if let Some(x) = h.import {
        debug_assert!(x.bytes().all(|b| b.is_ascii_digit() || b == b','));
        out.extend_from_slice(b"SET polar_xact_split_xids = '");
        out.extend_from_slice(x.as_bytes());
        out.extend_from_slice(b"'; ");
        n += 1;
    }
    if let Some(w) = h.wait.filter(|w| w.wait_for_statement) {
        // PostgreSQL 19: its timeout is 57014 answering this statement (W-5, by position).
        let lsn = crate::protocol::Lsn(w.lsn);
        if w.timeout_ms == 0 {
            let _ = write!(out, "WAIT FOR LSN '{lsn}'; ");
        } else {
            let _ = write!(
                out,
                "WAIT FOR LSN '{lsn}' WITH (TIMEOUT '{}ms'); ",
                w.timeout_ms
            );
        }
        return n + 1;
    }
    if let Some(w) = h.wait {
        let _ = write!(
            out,
            "SET polar_consistency_mode = '{}'; SET polar_proxy_wait_timeout_ms = {}; SET polar_xact_split_wait_lsn = '{}'; ",
            w.mode, w.timeout_ms, w.lsn
        );
        n += 3;
    }
    n
}

fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - 1) as u32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
}

/// The wrapped Query: hidden statements, then the client's Query string. `client_query` is the
/// client's whole Query message (tag, length, string, NUL). Returns the hidden statement count.
pub fn build_query(out: &mut Vec<u8>, h: &Hidden<'_>, client_query: &[u8]) -> u16 {
    let start = out.len();
    out.push(tag::QUERY);
    out.extend_from_slice(&[0; 4]);
    let n = hidden_text(out, h);
    // The client's string with its NUL.
    out.extend_from_slice(client_query.get(5..).unwrap_or(b"\0"));
    patch_len(out, start);
    n
}

/// A separate Query message with only the hidden statements (in front of an extended-protocol
/// batch); nothing when there are none. Returns the count.
pub fn build_hidden_query(out: &mut Vec<u8>, h: &Hidden<'_>) -> u16 {
    let start = out.len();
    out.push(tag::QUERY);
    out.extend_from_slice(&[0; 4]);
    let n = hidden_text(out, h);
    if n == 0 {
        out.truncate(start);
        return 0;
    }
    out.push(0);
    patch_len(out, start);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encode;

    fn client(sql: &str) -> Vec<u8> {
        let mut v = Vec::new();
        encode::query(&mut v, &[sql.as_bytes()]);
        v
    }

    #[test]
    fn w4_wrapper_bytes_are_exact() {
        let mut out = Vec::new();
        let h = Hidden {
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 500,
                lsn: 97_500_059_720,
                wait_for_statement: false,
            }),
            ..Hidden::default()
        };
        let n = build_query(
            &mut out,
            &h,
            &client("SELECT status FROM orders WHERE id = 42"),
        );
        assert_eq!(n, 3);
        let mut expect = Vec::new();
        encode::query(
            &mut expect,
            &[b"SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 500; SET polar_xact_split_wait_lsn = '97500059720'; SELECT status FROM orders WHERE id = 42"],
        );
        assert_eq!(out, expect);
    }

    #[test]
    fn w4_split_order_is_xids_mode_timeout_lsn() {
        let mut out = Vec::new();
        let h = Hidden {
            import: Some("1,1234,5678"),
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 5000,
                lsn: 97_500_059_720,
                wait_for_statement: false,
            }),
            ..Hidden::default()
        };
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 4);
        let s = String::from_utf8_lossy(&out[5..out.len() - 1]).into_owned();
        assert_eq!(
            s,
            "SET polar_xact_split_xids = '1,1234,5678'; SET polar_consistency_mode = 'strict'; SET polar_proxy_wait_timeout_ms = 5000; SET polar_xact_split_wait_lsn = '97500059720'; SELECT 1"
        );
    }

    #[test]
    fn pg19_wait_for_lsn_statement() {
        let mut out = Vec::new();
        let h = Hidden {
            wait: Some(Wait {
                mode: "strict",
                timeout_ms: 1000,
                lsn: 97_500_059_720,
                wait_for_statement: true,
            }),
            ..Hidden::default()
        };
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 1);
        assert_eq!(
            &out[5..out.len() - 1],
            b"WAIT FOR LSN '16/B374D848' WITH (TIMEOUT '1000ms'); SELECT 1"
        );
    }

    #[test]
    fn no_hidden_statements_is_the_client_message() {
        let mut out = Vec::new();
        let c = client("SELECT 1");
        assert_eq!(build_query(&mut out, &Hidden::default(), &c), 0);
        assert_eq!(out, c);
        let mut out = Vec::new();
        assert_eq!(build_hidden_query(&mut out, &Hidden::default()), 0);
        assert!(out.is_empty());
    }

    #[test]
    fn reset_and_settings_come_first() {
        let mut s = Settings::default();
        s.put("search_path", Some("SET search_path = app;"));
        let h = Hidden {
            reset: true,
            settings: Some(&s),
            ..Hidden::default()
        };
        let mut out = Vec::new();
        assert_eq!(build_query(&mut out, &h, &client("SELECT 1")), 2);
        assert_eq!(
            &out[5..out.len() - 1],
            b"SET polar_xact_split_xids = ''; SET search_path = app; SELECT 1"
        );
    }
}
