//! Property tests of the pool index (SPEC P-9, P-7, R-3) against a simple model, over random
//! operation sequences: a connection is only ever handed out to its own key, never twice at once,
//! never after its server was removed or its profile generation invalidated, and a connection
//! carrying an XID import is always handed out with `needs_reset`. Stale reservations are never
//! published. After every step the index's own invariants hold.

use std::collections::BTreeMap;

use polarsplit::{CheckinOutcome, PoolIndex, PoolLimits, PublishCheck, ReaderKey, ReservationId};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Reserve { server: u32, key: usize },
    Publish { res: usize, member: bool },
    Cancel { res: usize },
    Checkout { key: usize, preferred: Vec<u32> },
    Checkin { held: usize, dirty: bool },
    MarkDirty { conn: usize },
    Remove { conn: usize },
    RemoveServer { server: u32 },
    Invalidate,
    BumpWriter,
    Limits { per_key: u32, per_server: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3u32, 0..3usize).prop_map(|(server, key)| Op::Reserve { server, key }),
        3 => (0..8usize, prop::bool::weighted(0.9)).prop_map(|(res, member)| Op::Publish { res, member }),
        1 => (0..8usize).prop_map(|res| Op::Cancel { res }),
        4 => (0..3usize, prop::collection::vec(0..3u32, 0..3))
            .prop_map(|(key, preferred)| Op::Checkout { key, preferred }),
        3 => (0..8usize, any::<bool>()).prop_map(|(held, dirty)| Op::Checkin { held, dirty }),
        1 => (0..16usize).prop_map(|conn| Op::MarkDirty { conn }),
        1 => (0..16usize).prop_map(|conn| Op::Remove { conn }),
        1 => (0..3u32).prop_map(|server| Op::RemoveServer { server }),
        1 => Just(Op::Invalidate),
        1 => Just(Op::BumpWriter),
        1 => (1..4u32, 1..6u32).prop_map(|(per_key, per_server)| Op::Limits { per_key, per_server }),
    ]
}

#[derive(Clone, Copy, Debug)]
struct ModelConn {
    key: usize,
    server: u32,
    in_use: bool,
    /// Carries an XID import: set by a dirty checkin or mark_dirty, cleared only by a handout
    /// with needs_reset.
    import: bool,
    /// Must never be handed out again (server removed / profile invalidated).
    dead: bool,
}

struct ModelRes {
    id: ReservationId,
    server: u32,
    key: usize,
    writer: u64,
    epoch: u64,
}

fn keys() -> [ReaderKey; 3] {
    let k = |generation, auth| ReaderKey {
        profile_generation: generation,
        auth_hash: auth,
        startup_identity_hash: 0,
        startup_options_hash: 0,
    };
    [k(1, 10), k(1, 20), k(2, 10)]
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let keys = keys();
    let p = PoolIndex::new(PoolLimits {
        max_per_key: 2,
        max_per_server: 4,
    });
    let mut conns: BTreeMap<u64, ModelConn> = BTreeMap::new();
    let mut held: Vec<u64> = Vec::new();
    let mut res: Vec<ModelRes> = Vec::new();
    let mut epochs = [0u64; 3];
    let (mut writer, mut profile, mut next_conn) = (1u64, 1u64, 1u64);
    for op in ops {
        match op {
            Op::Reserve { server, key } => {
                if let Ok(r) = p.reserve(server, &keys[key], writer) {
                    prop_assert!(keys[key].profile_generation >= profile);
                    res.push(ModelRes {
                        id: r.id,
                        server,
                        key,
                        writer,
                        epoch: epochs[server as usize],
                    });
                }
            }
            Op::Publish { res: i, member } if i < res.len() => {
                let r = res.swap_remove(i);
                let conn = next_conn;
                next_conn += 1;
                let check = PublishCheck {
                    writer_generation: writer,
                    profile_generation: profile,
                    member,
                };
                let stale = r.writer != writer
                    || keys[r.key].profile_generation != profile
                    || r.epoch != epochs[r.server as usize]
                    || !member;
                match p.publish(r.id, conn, &check) {
                    Ok(()) => {
                        prop_assert!(!stale, "stale reservation published");
                        conns.insert(
                            conn,
                            ModelConn {
                                key: r.key,
                                server: r.server,
                                in_use: false,
                                import: false,
                                dead: false,
                            },
                        );
                    }
                    Err(e) => prop_assert!(
                        stale || format!("{e:?}").contains("Full"),
                        "fresh reservation refused: {e:?}"
                    ),
                }
                prop_assert!(p.publish(r.id, conn, &check).is_err(), "published twice");
            }
            Op::Cancel { res: i } if i < res.len() => {
                let r = res.swap_remove(i);
                prop_assert!(p.cancel(r.id));
                prop_assert!(!p.cancel(r.id));
            }
            Op::Checkout { key, preferred } => {
                if let Some(c) = p.checkout(&keys[key], &preferred) {
                    let m = conns
                        .get_mut(&c.conn)
                        .expect("handed out a connection never published");
                    prop_assert_eq!(m.key, key, "crossed keys");
                    prop_assert_eq!(m.server, c.server);
                    prop_assert!(!m.in_use, "checked out twice");
                    prop_assert!(!m.dead, "handed out after removal/invalidation");
                    prop_assert_eq!(c.needs_reset, m.import, "reset flag wrong for {:?}", m);
                    m.in_use = true;
                    m.import = false;
                    held.push(c.conn);
                } else {
                    // A miss only when nothing compatible is idle.
                    let idle = conns.values().any(|m| m.key == key && !m.in_use && !m.dead);
                    prop_assert!(!idle, "miss with an idle compatible connection");
                }
            }
            Op::Checkin { held: i, dirty } if i < held.len() => {
                let conn = held.swap_remove(i);
                let m = conns.get_mut(&conn).unwrap();
                let out = p.checkin(conn, dirty);
                if m.dead {
                    prop_assert_eq!(out, Ok(CheckinOutcome::Close));
                    conns.remove(&conn);
                } else {
                    prop_assert_eq!(out, Ok(CheckinOutcome::Pooled));
                    m.in_use = false;
                    m.import |= dirty;
                }
            }
            Op::MarkDirty { conn } => {
                let id = conn as u64 + 1;
                match conns.get_mut(&id) {
                    Some(m) => {
                        prop_assert!(p.mark_dirty(id).is_ok());
                        m.import = true;
                    }
                    None => prop_assert!(p.mark_dirty(id).is_err()),
                }
            }
            Op::Remove { conn } => {
                let id = conn as u64 + 1;
                match conns.remove(&id) {
                    Some(m) => {
                        prop_assert_eq!(p.remove(id), Ok(m.server));
                        held.retain(|&h| h != id);
                    }
                    None => prop_assert!(p.remove(id).is_err()),
                }
            }
            Op::RemoveServer { server } => {
                epochs[server as usize] += 1;
                p.remove_server(server);
                for c in p.take_closed() {
                    let m = conns.remove(&c).unwrap();
                    prop_assert!(m.server == server && !m.in_use);
                }
                for m in conns.values_mut().filter(|m| m.server == server) {
                    prop_assert!(m.in_use, "idle connection of a removed server kept");
                    m.dead = true;
                }
            }
            Op::Invalidate => {
                profile = 2;
                p.invalidate_before(2);
                for c in p.take_closed() {
                    let m = conns.remove(&c).unwrap();
                    prop_assert!(keys[m.key].profile_generation < 2 && !m.in_use);
                }
                for m in conns
                    .values_mut()
                    .filter(|m| keys[m.key].profile_generation < 2)
                {
                    prop_assert!(m.in_use);
                    m.dead = true;
                }
            }
            Op::BumpWriter => writer += 1,
            Op::Limits {
                per_key,
                per_server,
            } => p.set_limits(PoolLimits {
                max_per_key: per_key,
                max_per_server: per_server,
            }),
            _ => {}
        }
        if let Err(e) = p.check_consistency() {
            return Err(TestCaseError::fail(e));
        }
        for (i, k) in keys.iter().enumerate() {
            let c = p.key_counts(k);
            let live = conns.values().filter(|m| m.key == i).count() as u32;
            prop_assert_eq!(c.open(), live, "key {} counts", i);
            let reserved = res.iter().filter(|r| r.key == i).count() as u32;
            prop_assert_eq!(c.reserved, reserved);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn p7_p9_r3_random_operation_sequences_keep_every_pool_invariant(
        ops in prop::collection::vec(op(), 1..120)
    ) {
        run(ops)?;
    }
}
