//! P-5 / W-4 XID import on readers: an open transaction's own writes are visible to a reader's
//! SELECT only with the import, only once their WAL was replayed, and only for commands before
//! the imported command id. awide keeps an import until cleared (a leak the history shows).
mod common;

use common::*;
use polarsplit::Marker;
use polarsplit_sim::history::{Event, ImportRecord, StatementRecord};
use polarsplit_sim::{Cluster, Dialect, ServerId, ServerRef};

const R1: ServerId = ServerId(1);

fn last_select(c: &Cluster) -> Box<StatementRecord> {
    c.history()
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::Statement(s) if s.text.starts_with("SELECT") => Some(s.clone()),
            _ => None,
        })
        .unwrap()
}

fn import_of(c: &Cluster) -> Option<ImportRecord> {
    last_select(c).snapshot.unwrap().import
}

#[test]
fn import_shows_uncommitted_insert_only_with_import_and_once_replayed() {
    for d in [Dialect::Awide, Dialect::Polardb] {
        let mut c = cluster(d);
        let mut w = v15(&mut c, ServerRef::Primary);
        let mut other = v15(&mut c, ServerRef::Primary);
        let mut r = v15(&mut c, ServerRef::Id(R1));
        c.advance(10);
        let m = w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (500, 5)");
        let (_, _, xact, _) = rfq(&m);
        let list = xact.unwrap().1;
        assert_eq!(list, "1,732");
        let sel = |list: &str| {
            format!("SET polar_xact_split_xids = '{list}'; SELECT v FROM kv WHERE k = 500")
        };

        // Its WAL is not even flushed: the reader cannot have it.
        assert_eq!(value(&r.ok(&mut c, &sel(&list))), None, "{d:?}");
        // Someone else's commit flushes it (t=10); replayed at t=60.
        other.ok(&mut c, "UPDATE kv SET v = 0 WHERE k = 9");
        c.advance(49);
        assert_eq!(
            value(&r.ok(&mut c, &sel(&list))),
            None,
            "{d:?}: not replayed yet"
        );
        c.advance(1);
        assert_eq!(value(&r.ok(&mut c, &sel(&list))), Some("5".into()), "{d:?}");
        let imp = import_of(&c).unwrap();
        assert_eq!(
            (imp.cid, imp.xids.clone(), imp.from_earlier_query),
            (1, vec![732], false)
        );
        r.ok(&mut c, "SET polar_xact_split_xids = ''");
        // Without the import: invisible; another transaction's XIDs: invisible.
        assert_eq!(
            value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 500")),
            None,
            "{d:?}"
        );
        assert_eq!(value(&r.ok(&mut c, &sel("1,999"))), None, "{d:?}");
        r.ok(&mut c, "SET polar_xact_split_xids = ''");
        // After the commit is replayed, everyone sees it.
        w.ok(&mut c, "COMMIT");
        c.advance(50);
        assert_eq!(
            value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 500")),
            Some("5".into())
        );
    }
}

#[test]
fn import_command_id_limits_visibility() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (501, 1)");
    let m = w.ok(&mut c, "UPDATE kv SET v = 2 WHERE k = 501");
    let (_, _, xact, _) = rfq(&m);
    assert_eq!(xact, Some((Marker::WalPending, "2,732".into())));
    v15(&mut c, ServerRef::Primary).ok(
        &mut c,
        "SELECT pg_advisory_lock(1); INSERT INTO kv VALUES (900, 0)",
    );
    c.advance(50);
    let read = |r: &mut Conn, c: &mut Cluster, list: &str| {
        value(&r.ok(
            c,
            &format!("SET polar_xact_split_xids = '{list}'; SELECT v FROM kv WHERE k = 501"),
        ))
    };
    assert_eq!(read(&mut r, &mut c, "2,732"), Some("2".into()));
    assert_eq!(read(&mut r, &mut c, "1,732"), Some("1".into()));
    assert_eq!(read(&mut r, &mut c, "0,732"), None);
}

#[test]
fn import_of_rolled_back_subtransaction_is_invisible() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    w.ok(
        &mut c,
        "BEGIN; INSERT INTO kv VALUES (600, 1); SAVEPOINT a; INSERT INTO kv VALUES (601, 1)",
    );
    w.ok(&mut c, "ROLLBACK TO a");
    v15(&mut c, ServerRef::Primary).ok(&mut c, "INSERT INTO kv VALUES (900, 0)");
    c.advance(50);
    // Even an engine that imports the stale list (with the aborted subxact) sees nothing of it.
    let m = r.ok(
        &mut c,
        "SET polar_xact_split_xids = '2,733,732'; SELECT k, v FROM kv ORDER BY k",
    );
    let ks: Vec<String> = rows(&m)
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    assert!(ks.contains(&"600".to_string()) && !ks.contains(&"601".to_string()));
}

#[test]
fn awide_import_persists_and_the_history_flags_the_leak() {
    let mut c = cluster(Dialect::Awide);
    let mut w = v15(&mut c, ServerRef::Primary);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    w.ok(&mut c, "BEGIN; INSERT INTO kv VALUES (700, 7)");
    v15(&mut c, ServerRef::Primary).ok(&mut c, "INSERT INTO kv VALUES (900, 0)");
    c.advance(50);
    // A lone SET is fine on awide, and the import stays.
    r.ok(&mut c, "SET polar_xact_split_xids = '1,732'");
    assert_eq!(
        value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 700")),
        Some("7".into())
    );
    assert!(
        import_of(&c).unwrap().from_earlier_query,
        "leaked into a later query"
    );
    r.ok(&mut c, "SET polar_xact_split_xids = ''");
    assert_eq!(value(&r.ok(&mut c, "SELECT v FROM kv WHERE k = 700")), None);
    assert_eq!(import_of(&c), None);
}

#[test]
fn import_rejects_bad_lists() {
    let mut c = cluster(Dialect::Awide);
    let mut r = v15(&mut c, ServerRef::Id(R1));
    for list in ["1", "1,a", "1,,2", "1, 2", "-1,2"] {
        let m = r.q(
            &mut c,
            &format!("SET polar_xact_split_xids = '{list}'; SELECT 1"),
        );
        assert_eq!(code(&m).as_deref(), Some("22023"), "{list}");
        assert!(rows(&m).is_empty());
    }
    let m = r.q(&mut c, "SET polar_xact_split_xids = '1'");
    assert_eq!(error(&m).unwrap().detail(), Some("xid list is too short"));
}
