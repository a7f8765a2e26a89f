//! The reader key (SPEC P-9): a pooled reader connection may serve a session only when all four
//! values match, so connections never cross users, databases or settings.

use std::hash::{BuildHasher, DefaultHasher, Hasher, RandomState};
use std::sync::OnceLock;

/// The four-part compatibility key of a reader connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReaderKey {
    /// Bumped when the startup profile or protocol settings change (config generation).
    pub profile_generation: u64,
    /// User and database.
    pub auth_hash: u64,
    /// The advertised client identity (W-1), for LSN-reporting profiles; 0 otherwise.
    pub startup_identity_hash: u64,
    /// Startup parameters and the session's tracked settings.
    pub startup_options_hash: u64,
}

impl ReaderKey {
    /// Whether a connection opened under `self` may serve a session whose key is `wanted`.
    pub fn compatible_with(&self, wanted: &ReaderKey) -> bool {
        self == wanted
    }
}

/// The setting name under which a session's `SET SESSION AUTHORIZATION` enters its reader key
/// (not a possible setting name: PostgreSQL's cannot hold a space, so no setting can stand for
/// it).
pub const AUTHORIZATION_KEY: &[u8] = b"polarsplit session authorization";
/// The setting name under which a session's `SET ROLE` enters its reader key (see
/// [`AUTHORIZATION_KEY`]).
pub const ROLE_KEY: &[u8] = b"polarsplit role";
/// The setting name under which the digest of the writer session's settings (S-5: the replay
/// asserts a reader connection's equals it) enters its reader key (see [`AUTHORIZATION_KEY`]).
pub const SETTINGS_DIGEST_KEY: &[u8] = b"polarsplit settings digest";
/// The setting name under which the engine's reader configuration epoch (how many standby
/// configuration reloads the host reported, `Engine::reader_config_loaded`) enters every reader
/// key once one was reported (see [`AUTHORIZATION_KEY`]).
pub const READER_CONFIGURATION_KEY: &[u8] = b"polarsplit reader configuration";

/// Builds a [`ReaderKey`] (P-9) from what a reader connection is opened with and what the session
/// has set since. The engine's sessions compute the keys of their `AcquireReader` requests with
/// this builder, so a host reproduces one by giving the same: every parameter of the
/// StartupMessage the connection is opened with (the startup bytes of the request; the W-1
/// identity keys among them), the identity, the tracked settings, and — when the session set
/// them — its session authorization and role as settings named [`AUTHORIZATION_KEY`] and
/// [`ROLE_KEY`]. All hashing is a keyed 64-bit hash over length-prefixed fields (see
/// `KeyedHash`): equal inputs give equal keys in every thread of a process; another process
/// (or run) has another key, so keys are never compared across processes.
///
/// - `profile_generation`: the configuration generation that fixed the startup profile.
/// - `auth_hash`: user and database.
/// - `startup_identity_hash`: the advertised identity `(host, port)` of W-1's identity modes;
///   0 when the profile reports no LSN (no identity keys are sent then).
/// - `startup_options_hash`: the startup parameters, then the tracked session settings, each
///   set order-independent (sorted by name). Names compare ASCII-case-insensitively, as
///   PostgreSQL's setting names do; values exactly. A name given twice in one set keeps its last
///   value (what the server ends up with). The two sets are hashed apart: a value given at
///   startup and the same value set later are different connection states (`RESET` differs).
#[derive(Clone, Debug)]
pub struct ReaderKeyBuilder<'a> {
    profile_generation: u64,
    user: &'a [u8],
    database: &'a [u8],
    identity: Option<(&'a [u8], u16)>,
    params: Vec<(&'a [u8], &'a [u8])>,
    settings: Vec<(&'a [u8], &'a [u8])>,
}

impl<'a> ReaderKeyBuilder<'a> {
    /// A builder for a connection of `user` to `database` under the configuration's
    /// `profile_generation` ([`Engine::profile_generation`](crate::Engine::profile_generation)),
    /// with no identity, startup parameter or setting yet.
    pub fn new(profile_generation: u64, user: &'a [u8], database: &'a [u8]) -> Self {
        ReaderKeyBuilder {
            profile_generation,
            user,
            database,
            identity: None,
            params: Vec::new(),
            settings: Vec::new(),
        }
    }

    /// The advertised identity (W-1). Ignored (hash 0) when `reports_lsn` is false: profile
    /// `off` sends no identity keys, so the identity cannot make connections differ.
    pub fn identity(&mut self, reports_lsn: bool, host: &'a [u8], port: u16) -> &mut Self {
        self.identity = reports_lsn.then_some((host, port));
        self
    }

    /// A startup parameter the connection is opened with (user and database belong to
    /// `auth_hash` and the W-1 keys to the identity; passing them here too only makes the key
    /// stricter).
    pub fn startup_param(&mut self, name: &'a [u8], value: &'a [u8]) -> &mut Self {
        self.params.push((name, value));
        self
    }

    /// A tracked session setting (S-4) in effect on the connection.
    pub fn setting(&mut self, name: &'a [u8], value: &'a [u8]) -> &mut Self {
        self.settings.push((name, value));
        self
    }

    /// The key of everything given so far (the builder can go on and build again).
    pub fn build(&self) -> ReaderKey {
        ReaderKey {
            profile_generation: self.profile_generation,
            auth_hash: auth_hash(self.user, self.database),
            startup_identity_hash: match self.identity {
                Some((host, port)) => KeyedHash::new()
                    .field(b"identity")
                    .field(host)
                    .u64(u64::from(port))
                    .finish(),
                None => 0,
            },
            startup_options_hash: {
                let mut h = KeyedHash::new();
                hash_set(h.field(b"startup"), &self.params);
                hash_set(h.field(b"settings"), &self.settings);
                h.finish()
            },
        }
    }
}

/// `auth_hash` of P-9: user and database.
pub fn auth_hash(user: &[u8], database: &[u8]) -> u64 {
    KeyedHash::new()
        .field(b"auth")
        .field(user)
        .field(database)
        .finish()
}

fn lower_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.iter()
        .map(u8::to_ascii_lowercase)
        .cmp(b.iter().map(u8::to_ascii_lowercase))
}

/// Hashes a set of `(name, value)`: sorted by case-folded name, the last value of a repeated
/// name winning.
fn hash_set(h: &mut KeyedHash, pairs: &[(&[u8], &[u8])]) {
    let mut sorted: Vec<(usize, &[u8], &[u8])> = pairs
        .iter()
        .enumerate()
        .map(|(i, &(n, v))| (i, n, v))
        .collect();
    // By name, and for equal names the last given first, so dedup keeps it.
    sorted.sort_by(|a, b| lower_cmp(a.1, b.1).then(b.0.cmp(&a.0)));
    sorted.dedup_by(|later, first| lower_cmp(later.1, first.1).is_eq());
    h.u64(sorted.len() as u64);
    for (_, name, value) in sorted {
        h.u64(name.len() as u64);
        for &b in name {
            h.bytes(&[b.to_ascii_lowercase()]);
        }
        h.field(value);
    }
}

/// The hash of every reader key and prepared-statement name: SipHash-1-3 (std's
/// `DefaultHasher`) keyed with a random key drawn once per process, so keys computed by different
/// threads and sessions of one process agree. It is keyed because the hashed inputs — setting
/// values, statement texts — are chosen by clients, and equal hashes are trusted: two connection
/// states with equal reader keys are taken to be equal (P-9), two statements with equal names
/// to be the same statement (E-2). An unkeyed hash (FNV, used here before) can be collided on
/// purpose by a client that controls a few bytes of its input; with a secret key, finding a text
/// whose hash equals another client's takes about 2^64 tries. Fields are length-prefixed so that
/// `("ab", "c")` and `("a", "bc")` differ.
#[derive(Clone, Debug)]
pub(crate) struct KeyedHash(DefaultHasher);

/// The process's hashing key (drawn at first use).
fn process_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

impl KeyedHash {
    pub(crate) fn new() -> KeyedHash {
        KeyedHash(process_key().build_hasher())
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut KeyedHash {
        self.0.write(b);
        self
    }

    /// A length-prefixed field.
    pub(crate) fn field(&mut self, b: &[u8]) -> &mut KeyedHash {
        self.0.write_u64(b.len() as u64);
        self.bytes(b)
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut KeyedHash {
        self.0.write_u64(v);
        self
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed by the child processes of the test below.
    #[test]
    #[ignore = "run as a child process by p9_e2_hashes_are_keyed_per_process"]
    fn print_keyed_hash() {
        println!(
            "KEYED_HASH={}",
            KeyedHash::new().field(b"SELECT $1").finish()
        );
    }

    /// P-9, E-2: reader keys and engine statement names trust equal hashes, and clients choose
    /// what is hashed; so the hash is keyed, with a secret key per process — the same input
    /// hashes alike within a process, differently in another process, and not as the unkeyed
    /// FNV-1a the engine used before (which a client could collide on purpose).
    #[test]
    fn p9_e2_hashes_are_keyed_per_process() {
        let exe = std::env::current_exe().unwrap();
        let child = || {
            let out = std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "pool::key::tests::print_keyed_hash",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let v = text
                .lines()
                .find_map(|l| l.split_once("KEYED_HASH=").map(|(_, v)| v))
                .unwrap_or_else(|| panic!("no hash printed: {text}"));
            v.trim().parse::<u64>().unwrap()
        };
        let (a, b) = (child(), child());
        assert_ne!(a, b, "two processes hashed alike: the hash is not keyed");
        let here = KeyedHash::new().field(b"SELECT $1").finish();
        assert_eq!(here, KeyedHash::new().field(b"SELECT $1").finish());
        let mut fnv: u64 = 0xcbf2_9ce4_8422_2325;
        for &x in (9u64).to_le_bytes().iter().chain(b"SELECT $1") {
            fnv ^= u64::from(x);
            fnv = fnv.wrapping_mul(0x0000_0100_0000_01b3);
        }
        assert!(a != fnv && b != fnv && here != fnv);
    }

    #[test]
    fn fields_are_length_prefixed() {
        let a = KeyedHash::new().field(b"ab").field(b"c").finish();
        let b = KeyedHash::new().field(b"a").field(b"bc").finish();
        assert_ne!(a, b);
        assert_eq!(a, KeyedHash::new().field(b"ab").field(b"c").finish());
    }

    #[test]
    fn p9_every_part_must_match() {
        let k = ReaderKey {
            profile_generation: 1,
            auth_hash: 2,
            startup_identity_hash: 3,
            startup_options_hash: 4,
        };
        assert!(k.compatible_with(&k));
        for i in 0..4 {
            let mut o = k;
            match i {
                0 => o.profile_generation += 1,
                1 => o.auth_hash += 1,
                2 => o.startup_identity_hash += 1,
                _ => o.startup_options_hash += 1,
            }
            assert!(!k.compatible_with(&o));
        }
    }

    fn key(params: &[(&str, &str)], settings: &[(&str, &str)]) -> ReaderKey {
        let mut b = ReaderKeyBuilder::new(1, b"alice", b"app");
        b.identity(true, b"10.0.0.1", 5432);
        for (n, v) in params {
            b.startup_param(n.as_bytes(), v.as_bytes());
        }
        for (n, v) in settings {
            b.setting(n.as_bytes(), v.as_bytes());
        }
        b.build()
    }

    #[test]
    fn p9_key_builder_options_are_order_independent_and_case_folded_by_name() {
        let a = key(&[("application_name", "x"), ("DateStyle", "ISO")], &[]);
        let b = key(&[("datestyle", "ISO"), ("application_name", "x")], &[]);
        assert_eq!(a, b);
        // Values are exact.
        assert_ne!(
            a,
            key(&[("datestyle", "iso"), ("application_name", "x")], &[])
        );
        // The last value of a repeated name wins.
        assert_eq!(
            a,
            key(
                &[
                    ("DateStyle", "SQL"),
                    ("application_name", "x"),
                    ("datestyle", "ISO")
                ],
                &[]
            )
        );
        // Startup parameters and session settings are different states.
        assert_ne!(
            key(&[("search_path", "a")], &[]),
            key(&[], &[("search_path", "a")])
        );
        let s1 = key(&[], &[("search_path", "a"), ("TimeZone", "UTC")]);
        assert_eq!(s1, key(&[], &[("timezone", "UTC"), ("search_path", "a")]));
        assert_ne!(s1, key(&[], &[("timezone", "UTC"), ("search_path", "b")]));
        // Name/value boundaries are length-prefixed.
        assert_ne!(key(&[("ab", "c")], &[]), key(&[("a", "bc")], &[]));
    }

    #[test]
    fn p9_key_builder_separates_users_databases_identities_and_generations() {
        let base = ReaderKeyBuilder::new(1, b"alice", b"app").build();
        assert_eq!(base.startup_identity_hash, 0);
        let others = [
            ReaderKeyBuilder::new(1, b"bob", b"app").build(),
            ReaderKeyBuilder::new(1, b"alice", b"other").build(),
            ReaderKeyBuilder::new(1, b"alic", b"eapp").build(),
            ReaderKeyBuilder::new(2, b"alice", b"app").build(),
            ReaderKeyBuilder::new(1, b"alice", b"app")
                .identity(true, b"h", 1)
                .build(),
        ];
        for o in others {
            assert!(!base.compatible_with(&o), "{o:?}");
        }
        // Without LSN reporting the identity is not sent, so it does not split connections.
        assert_eq!(
            base,
            ReaderKeyBuilder::new(1, b"alice", b"app")
                .identity(false, b"h", 1)
                .build()
        );
        let id = |h: &'static [u8], p| {
            ReaderKeyBuilder::new(1, b"alice", b"app")
                .identity(true, h, p)
                .build()
                .startup_identity_hash
        };
        assert_ne!(id(b"h", 1), id(b"h", 2));
        assert_ne!(id(b"h", 1), id(b"g", 1));
        assert_ne!(id(b"h", 1), 0);
    }
}
