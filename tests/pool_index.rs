//! The pool index and warmup (SPEC P-9, P-7, R-3), one behaviour per test.

use polarsplit::internals::cluster::readers::Readers;
use polarsplit::Warmup;
use polarsplit::{
    CheckinOutcome, Checkout, DemandOutcome, DemandReason, PoolCounts, PoolError, PoolIndex,
    PoolLimits, PublishCheck, PublishError, ReaderKey, ReaderKeyBuilder, ReserveError, WarmupQueue,
};

fn key(user: &str, db: &str, settings: &[(&str, &str)]) -> ReaderKey {
    let mut b = ReaderKeyBuilder::new(1, user.as_bytes(), db.as_bytes());
    for (n, v) in settings {
        b.setting(n.as_bytes(), v.as_bytes());
    }
    b.build()
}

fn ok_check(profile_generation: u64) -> PublishCheck {
    PublishCheck {
        writer_generation: 7,
        profile_generation,
        member: true,
    }
}

/// Reserves and publishes `conn` for (server, key) under writer generation 7.
fn open(p: &PoolIndex, server: u32, k: &ReaderKey, conn: u64) {
    let r = p.reserve(server, k, 7).expect("reserve");
    p.publish(r.id, conn, &ok_check(k.profile_generation))
        .expect("publish");
}

#[test]
fn p9_a_connection_never_serves_another_user_database_or_settings() {
    let p = PoolIndex::default();
    let alice = key("alice", "app", &[]);
    open(&p, 1, &alice, 100);
    for other in [
        key("bob", "app", &[]),
        key("alice", "other", &[]),
        key("alice", "app", &[("search_path", "x")]),
        ReaderKey {
            startup_identity_hash: 9,
            ..alice
        },
    ] {
        assert_eq!(p.checkout(&other, &[1]), None, "{other:?}");
        assert_eq!(p.checkout_from(&other, &[1]), None);
    }
    let c = p.checkout(&alice, &[]).unwrap();
    assert_eq!(
        c,
        Checkout {
            conn: 100,
            server: 1,
            needs_reset: false
        }
    );
    assert_eq!(p.checkout(&alice, &[]), None, "one holder at a time");
    p.check_consistency().unwrap();
}

#[test]
fn p9_checkout_prefers_servers_in_order_then_any() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    open(&p, 3, &k, 30);
    open(&p, 1, &k, 10);
    open(&p, 2, &k, 20);
    assert_eq!(p.checkout(&k, &[2, 1]).unwrap().conn, 20);
    assert_eq!(p.checkout(&k, &[2, 1]).unwrap().conn, 10);
    assert_eq!(p.checkout_from(&k, &[2, 1]), None);
    assert_eq!(p.checkout(&k, &[2, 1]).unwrap().conn, 30);
    assert_eq!(p.checkout(&k, &[]), None);
    let st = p.stats();
    assert_eq!((st.hits, st.misses), (3, 2));
}

#[test]
fn p9_profile_change_makes_old_connections_incompatible() {
    let p = PoolIndex::default();
    let old = key("u", "d", &[]);
    open(&p, 1, &old, 1);
    open(&p, 1, &old, 2);
    let held = p.checkout(&old, &[]).unwrap();
    assert_eq!(p.invalidate_before(2), 1, "the idle one is queued to close");
    assert_eq!(p.take_closed(), vec![3 - held.conn]);
    assert_eq!(p.checkout(&old, &[]), None, "never checked out again");
    assert_eq!(
        p.checkin(held.conn, false),
        Ok(CheckinOutcome::Close),
        "the in-use one is closed when returned"
    );
    assert_eq!(p.checkout(&old, &[]), None);
    assert_eq!(p.reserve(1, &old, 7), Err(ReserveError::StaleProfile));
    // The new generation's key works.
    let new = ReaderKey {
        profile_generation: 2,
        ..old
    };
    open(&p, 1, &new, 5);
    assert_eq!(p.checkout(&new, &[]).unwrap().conn, 5);
    assert_eq!(p.server_counts(1).in_use, 1);
    p.check_consistency().unwrap();
}

#[test]
fn p7_a_dirty_connection_is_handed_out_only_with_the_reset_flag() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    open(&p, 1, &k, 1);
    open(&p, 1, &k, 2);
    let a = p.checkout(&k, &[]).unwrap();
    assert_eq!(p.checkin(a.conn, true), Ok(CheckinOutcome::Pooled));
    assert_eq!(
        p.slot_counts(1, &k),
        PoolCounts {
            idle: 1,
            dirty: 1,
            in_use: 0,
            reserved: 0
        }
    );
    // The clean one goes first, then the dirty one with the flag.
    let clean = p.checkout(&k, &[]).unwrap();
    assert!(!clean.needs_reset && clean.conn != a.conn);
    let dirty = p.checkout(&k, &[]).unwrap();
    assert_eq!((dirty.conn, dirty.needs_reset), (a.conn, true));
    // The caller prefixed the reset: returned clean, it is clean again.
    p.checkin(dirty.conn, false).unwrap();
    assert!(!p.checkout(&k, &[1]).unwrap().needs_reset);
    // mark_dirty on an idle connection.
    p.checkin(clean.conn, false).unwrap();
    p.mark_dirty(clean.conn).unwrap();
    assert!(p.checkout(&k, &[1]).unwrap().needs_reset);
    p.check_consistency().unwrap();
}

#[test]
fn p7_mark_dirty_during_use_survives_a_clean_checkin() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    open(&p, 1, &k, 1);
    let c = p.checkout(&k, &[]).unwrap();
    p.mark_dirty(c.conn).unwrap();
    p.checkin(c.conn, false).unwrap();
    assert!(p.checkout(&k, &[]).unwrap().needs_reset);
}

#[test]
fn pool_errors_name_unknown_and_idle_connections() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    assert_eq!(p.checkin(9, false), Err(PoolError::UnknownConnection));
    assert_eq!(p.mark_dirty(9), Err(PoolError::UnknownConnection));
    assert_eq!(p.remove(9), Err(PoolError::UnknownConnection));
    open(&p, 4, &k, 9);
    assert_eq!(p.checkin(9, false), Err(PoolError::NotInUse));
    assert_eq!(p.remove(9), Ok(4));
    assert_eq!(p.key_counts(&k), PoolCounts::default());
    p.check_consistency().unwrap();
}

#[test]
fn r3_capacity_per_key_and_per_server_is_checked_at_reserve() {
    let p = PoolIndex::new(PoolLimits {
        max_per_key: 2,
        max_per_server: 3,
    });
    let (k1, k2) = (key("a", "d", &[]), key("b", "d", &[]));
    let r1 = p.reserve(1, &k1, 7).unwrap();
    open(&p, 1, &k1, 10);
    assert_eq!(p.reserve(1, &k1, 7), Err(ReserveError::KeyFull));
    let r2 = p.reserve(1, &k2, 7).unwrap();
    assert_eq!(p.reserve(1, &k2, 7), Err(ReserveError::ServerFull));
    // Another server has its own budget.
    let r3 = p.reserve(2, &k1, 7).unwrap();
    assert_eq!(p.server_counts(1).reserved + p.server_counts(1).open(), 3);
    // Cancelling frees the slot.
    assert!(p.cancel(r2.id));
    assert!(!p.cancel(r2.id));
    p.reserve(1, &k2, 7).unwrap();
    assert!(p.cancel(r1.id) && p.cancel(r3.id));
    assert_eq!(p.stats().reserve_refused, 2);
    assert_eq!(p.stats().cancelled, 3);
    p.check_consistency().unwrap();
}

#[test]
fn r3_a_generation_bump_during_the_handshake_discards_the_reservation() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    let r = p.reserve(1, &k, 7).unwrap();
    let stale = PublishCheck {
        writer_generation: 8,
        ..ok_check(1)
    };
    assert_eq!(
        p.publish(r.id, 50, &stale),
        Err(PublishError::StaleWriterGeneration)
    );
    assert_eq!(p.checkout(&k, &[]), None);
    // Consumed: a second publish is refused too.
    assert_eq!(
        p.publish(r.id, 50, &ok_check(1)),
        Err(PublishError::UnknownReservation)
    );
    // Profile generation changed (the host's view) …
    let r = p.reserve(1, &k, 7).unwrap();
    assert_eq!(
        p.publish(r.id, 51, &ok_check(2)),
        Err(PublishError::StaleProfile)
    );
    // … or the index was invalidated meanwhile.
    let r = p.reserve(1, &k, 7).unwrap();
    p.invalidate_before(2);
    assert_eq!(
        p.publish(r.id, 52, &ok_check(1)),
        Err(PublishError::StaleProfile)
    );
    assert_eq!(p.stats().discarded, 3);
    assert_eq!(p.key_counts(&k), PoolCounts::default());
    p.check_consistency().unwrap();
}

#[test]
fn r3_a_server_removed_or_unhealthy_during_the_handshake_is_not_published() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    let r = p.reserve(1, &k, 7).unwrap();
    p.remove_server(1);
    assert_eq!(
        p.publish(r.id, 60, &ok_check(1)),
        Err(PublishError::ServerRemoved)
    );
    // A reservation taken after the removal is fine (the server came back).
    open(&p, 1, &k, 61);

    let readers = Readers::new();
    readers.upsert(2, 10);
    let r = p.reserve(2, &k, 7).unwrap();
    readers.set_health(2, false);
    assert_eq!(
        p.publish_checked(&r, 62, 7, 1, &readers, 10),
        Err(PublishError::NotMember)
    );
    readers.set_health(2, true);
    let r = p.reserve(2, &k, 7).unwrap();
    readers.upsert(2, 11); // moved to another hostgroup
    assert_eq!(
        p.publish_checked(&r, 63, 7, 1, &readers, 10),
        Err(PublishError::NotMember)
    );
    let r = p.reserve(2, &k, 7).unwrap();
    assert_eq!(p.publish_checked(&r, 64, 7, 1, &readers, 11), Ok(()));
    assert_eq!(p.checkout_from(&k, &[2]).unwrap().conn, 64);
    p.check_consistency().unwrap();
}

#[test]
fn r3_capacity_filled_meanwhile_is_not_published() {
    let p = PoolIndex::new(PoolLimits {
        max_per_key: 2,
        max_per_server: 10,
    });
    let k = key("u", "d", &[]);
    let r1 = p.reserve(1, &k, 7).unwrap();
    let r2 = p.reserve(1, &k, 7).unwrap();
    open_with(&p, r1.id, 70);
    // The limit was lowered while r2's handshake ran: the pool is already full.
    p.set_limits(PoolLimits {
        max_per_key: 1,
        max_per_server: 10,
    });
    assert_eq!(
        p.publish(r2.id, 71, &ok_check(1)),
        Err(PublishError::KeyFull)
    );
    p.set_limits(PoolLimits::default());
    let r3 = p.reserve(2, &k, 7).unwrap();
    let r4 = p.reserve(2, &k, 7).unwrap();
    p.set_limits(PoolLimits {
        max_per_key: 5,
        max_per_server: 1,
    });
    open_with(&p, r3.id, 72);
    assert_eq!(
        p.publish(r4.id, 73, &ok_check(1)),
        Err(PublishError::ServerFull)
    );
    assert_eq!(p.key_counts(&k).open(), 2);
    p.check_consistency().unwrap();
}

fn open_with(p: &PoolIndex, id: polarsplit::ReservationId, conn: u64) {
    p.publish(id, conn, &ok_check(1)).unwrap();
}

#[test]
fn r3_a_duplicate_connection_id_is_refused() {
    let p = PoolIndex::default();
    let k = key("u", "d", &[]);
    open(&p, 1, &k, 5);
    let r = p.reserve(2, &k, 7).unwrap();
    assert_eq!(
        p.publish(r.id, 5, &ok_check(1)),
        Err(PublishError::DuplicateConnection)
    );
    p.check_consistency().unwrap();
}

#[test]
fn r3_remove_server_queues_idle_and_closes_in_use_at_checkin() {
    let p = PoolIndex::default();
    let (k1, k2) = (key("a", "d", &[]), key("b", "d", &[]));
    open(&p, 1, &k1, 1);
    open(&p, 1, &k1, 2);
    open(&p, 1, &k2, 3);
    open(&p, 2, &k1, 4);
    let held = p.checkout_from(&k1, &[1]).unwrap();
    assert_eq!(p.remove_server(99), 0, "a server the index never saw");
    assert_eq!(p.remove_server(1), 2);
    let mut out = [0u64; 1];
    assert_eq!(p.take_closed_into(&mut out), 1);
    assert_eq!(p.take_closed_into(&mut out[..]), 1);
    assert_eq!(p.take_closed_into(&mut out), 0);
    assert_eq!(p.checkout_from(&k1, &[1]), None);
    assert_eq!(p.checkin(held.conn, true), Ok(CheckinOutcome::Close));
    assert_eq!(p.server_counts(1), PoolCounts::default());
    assert_eq!(p.checkout(&k1, &[1]).unwrap().conn, 4);
    p.check_consistency().unwrap();
}

#[test]
fn r3_demands_are_deduplicated_and_bounded() {
    let q = WarmupQueue::new(Warmup::Demand, 2);
    let (k1, k2) = (key("a", "d", &[]), key("b", "d", &[]));
    assert_eq!(q.demand(1, &k1, DemandReason::Miss), DemandOutcome::Queued);
    assert_eq!(
        q.demand(1, &k1, DemandReason::Miss),
        DemandOutcome::Duplicate
    );
    assert_eq!(q.demand(2, &k1, DemandReason::Miss), DemandOutcome::Queued);
    assert_eq!(q.demand(1, &k2, DemandReason::Miss), DemandOutcome::Dropped);
    assert_eq!(
        q.demand(1, &k2, DemandReason::Begin),
        DemandOutcome::Disabled
    );
    let d = q.drain(1);
    assert_eq!((d.len(), d[0].server, d[0].key), (1, 1, k1));
    // Drained: the same (server, key) may be asked for again.
    assert_eq!(q.demand(1, &k1, DemandReason::Miss), DemandOutcome::Queued);
    assert_eq!(q.drain(10).len(), 2);
    assert!(q.is_empty());
    let s = q.stats();
    assert_eq!(
        (s.queued, s.duplicates, s.dropped, s.disabled),
        (3, 1, 1, 1)
    );
}

#[test]
fn r3_warmup_mode_selects_the_signals() {
    let k = key("a", "d", &[]);
    for (mode, miss, begin) in [
        (Warmup::Off, false, false),
        (Warmup::Demand, true, false),
        (Warmup::Begin, false, true),
        (Warmup::Both, true, true),
    ] {
        let q = WarmupQueue::new(mode, 8);
        assert_eq!(
            q.demand(1, &k, DemandReason::Miss) == DemandOutcome::Queued,
            miss
        );
        assert_eq!(
            q.demand(2, &k, DemandReason::Begin) == DemandOutcome::Queued,
            begin
        );
    }
}
