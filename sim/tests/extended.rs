//! The minimal extended protocol: Parse / Bind / Describe / Execute / Sync of single statements,
//! no parameters; errors skip to Sync; the implicit transaction ends at Sync.
mod common;

use common::*;
use polarsplit::TxStatus;
use polarsplit_sim::client::{self, Msg};
use polarsplit_sim::{Dialect, ServerId, ServerRef};

fn frame_of(sql: &str) -> Vec<u8> {
    let mut b = client::parse("", sql);
    b.extend(client::bind("", ""));
    b.extend(client::describe(true, ""));
    b.extend(client::execute(""));
    b.extend(client::sync());
    b
}

#[test]
fn extended_self_contained_select() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    c.write(r.id, &frame_of("SELECT v FROM kv WHERE k = 1"))
        .unwrap();
    let m = r.read(&mut c);
    assert_eq!(
        m[..5],
        [
            Msg::ParseComplete,
            Msg::BindComplete,
            Msg::RowDescription(vec!["v".into()]),
            Msg::DataRow(vec![Some("10".into())]),
            Msg::CommandComplete("SELECT 1".into()),
        ]
    );
    assert_eq!(rfq(&m).0, TxStatus::Idle);
    assert_eq!(rfq_lsn(&m), c.replay_lsn(ServerId(1)).unwrap());
    let st = c.history().iter().rev().find_map(|e| match &e.event {
        polarsplit_sim::Event::Statement(s) => Some(s.clone()),
        _ => None,
    });
    assert!(st.unwrap().extended);
}

#[test]
fn extended_error_skips_to_sync_and_rolls_back() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut b = client::parse("ins", "INSERT INTO kv VALUES (100, 1)");
    b.extend(client::bind("", "ins"));
    b.extend(client::execute(""));
    b.extend(client::parse("", "INSERT INTO kv VALUES (1, 1)"));
    b.extend(client::bind("", ""));
    b.extend(client::execute(""));
    b.extend(client::parse("", "SELECT 1"));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    let m = w.read(&mut c);
    assert_eq!(tags(&m), vec!["INSERT 0 1"]);
    assert_eq!(code(&m).as_deref(), Some("23505"));
    assert_eq!(
        m.iter().filter(|m| **m == Msg::ParseComplete).count(),
        2,
        "the last Parse skipped"
    );
    assert_eq!(count_rfq(&m), 1);
    assert_eq!(
        c.committed_value_now(100),
        None,
        "the implicit transaction rolled back at Sync"
    );
    // The named statement survives the batch.
    let mut b = client::bind("", "ins");
    b.extend(client::execute(""));
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    let m = w.read(&mut c);
    assert_eq!(tags(&m), vec!["INSERT 0 1"]);
    assert_eq!(c.committed_value_now(100), Some(1));
}

#[test]
fn extended_refuses_multiple_statements_and_unknown_names() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut b = client::parse("", "SELECT 1; SELECT 2");
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(code(&w.read(&mut c)).as_deref(), Some("42601"));
    let mut b = client::bind("", "nope");
    b.extend(client::sync());
    c.write(w.id, &b).unwrap();
    assert_eq!(code(&w.read(&mut c)).as_deref(), Some("26000"));
}

#[test]
fn extended_execute_waits_like_a_simple_select() {
    let mut c = cluster(Dialect::Polardb);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(ServerId(1)));
    let target = rfq_lsn(&w.ok(&mut c, "INSERT INTO kv VALUES (100, 5)"));
    // polardb keeps the wait target on the connection: it applies to the extended read too.
    r.ok(
        &mut c,
        &format!("SET polar_xact_split_wait_lsn = '{}'", target.0),
    );
    c.write(r.id, &frame_of("SELECT v FROM kv WHERE k = 100"))
        .unwrap();
    let m = r.read(&mut c);
    assert!(!m.iter().any(|m| matches!(m, Msg::DataRow(_))));
    c.advance(50);
    let m = r.read(&mut c);
    assert_eq!(value(&m), Some("5".into()));
    assert_eq!(count_rfq(&m), 1);
}

#[test]
fn extended_error_ignores_even_a_simple_query_until_sync() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut b = client::bind("", "nope");
    b.extend(client::query("INSERT INTO kv VALUES (100, 1)"));
    b.extend(client::sync());
    b.extend(client::query("SELECT 1"));
    c.write(w.id, &b).unwrap();
    let m = w.read(&mut c);
    assert_eq!(code(&m).as_deref(), Some("26000"));
    assert_eq!(tags(&m), vec!["SELECT 1"]);
    assert_eq!(count_rfq(&m), 2);
    assert_eq!(c.committed_value_now(100), None);
}
