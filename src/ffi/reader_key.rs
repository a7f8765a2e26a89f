//! The reader key (SPEC P-9) for C hosts: the value in ACQUIRE_READER and the pool index's key.

use std::ffi::c_char;

use super::handle::{boundary, cbytes, slice, try_arg, try_out, value};
use super::status::{PolarsplitStatus, POLARSPLIT_OK};
use crate::pool::{ReaderKey, ReaderKeyBuilder};

/// The four-part reader key (SPEC P-9). A pooled reader connection may serve a session only if
/// all four values are equal (`polarsplit_reader_key_compatible`); its hashes are keyed per
/// process, so keys are compared only within one process. Frozen for ABI 3.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolarsplitReaderKey {
    /// Bumped when the startup profile or protocol settings change.
    pub profile_generation: u64,
    /// User and database.
    pub auth_hash: u64,
    /// The advertised client identity (LSN-reporting profiles); 0 otherwise.
    pub startup_identity_hash: u64,
    /// Startup parameters and tracked session settings.
    pub startup_options_hash: u64,
}

impl From<ReaderKey> for PolarsplitReaderKey {
    fn from(k: ReaderKey) -> Self {
        PolarsplitReaderKey {
            profile_generation: k.profile_generation,
            auth_hash: k.auth_hash,
            startup_identity_hash: k.startup_identity_hash,
            startup_options_hash: k.startup_options_hash,
        }
    }
}

impl From<PolarsplitReaderKey> for ReaderKey {
    fn from(k: PolarsplitReaderKey) -> Self {
        ReaderKey {
            profile_generation: k.profile_generation,
            auth_hash: k.auth_hash,
            startup_identity_hash: k.startup_identity_hash,
            startup_options_hash: k.startup_options_hash,
        }
    }
}

/// A key argument.
///
/// # Safety
/// `p` must be NULL or point to a readable key.
pub(crate) unsafe fn key_arg(p: *const PolarsplitReaderKey) -> Result<ReaderKey, PolarsplitStatus> {
    // SAFETY: as documented.
    unsafe { value(p) }.map(ReaderKey::from)
}

/// (name, value) byte strings.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// `n` (name, value) string pairs from two parallel arrays; NULL arrays only with `n == 0`.
///
/// # Safety
/// Each array must be NULL (with `n == 0`) or hold `n` NUL-terminated strings.
unsafe fn cpairs<'a>(
    names: *const *const c_char,
    values: *const *const c_char,
    n: usize,
) -> Result<Pairs<'a>, PolarsplitStatus> {
    // SAFETY: both arrays hold `n` string pointers (the caller's contract).
    let (names, values) = unsafe { (slice(names, n)?, slice(values, n)?) };
    names
        .iter()
        .zip(values)
        // SAFETY: every element is a NUL-terminated string.
        .map(|(k, v)| unsafe { Ok((cbytes(*k)?, cbytes(*v)?)) })
        .collect()
}

/// Whether a connection opened under key `a` may serve a session whose key is `b` (all four
/// values equal). NULL arguments give `false`.
///
/// # Safety
/// `a` and `b` must be NULL or point to readable keys.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_reader_key_compatible(
    a: *const PolarsplitReaderKey,
    b: *const PolarsplitReaderKey,
) -> bool {
    boundary! {
        // SAFETY: NULL or readable keys.
        let (a, b) = unsafe { (try_arg!(key_arg(a)), try_arg!(key_arg(b))) };
        a.compatible_with(&b)
    }
}

/// Computes the reader key (P-9) of a connection into `*out`: `profile_generation` as given;
/// `user` and `database` hashed into `auth_hash`; the advertised identity into
/// `startup_identity_hash` — pass `identity_host = NULL` when the startup profile reports no
/// LSN (the hash is then 0); the startup parameters (`param_names[i]`, `param_values[i]`) and
/// the tracked session settings (`setting_names[i]`, `setting_values[i]`) into
/// `startup_options_hash`, each set independent of order (names compare case-insensitively;
/// a repeated name keeps its last value). The engine's sessions compute the keys of their
/// ACQUIRE_READER actions this way, so a host reproduces one by passing every parameter of the
/// StartupMessage the connection is opened with (the action's startup bytes; the W-1 identity
/// keys among them), the identity, the tracked settings, and — when the session set them — its
/// session authorization and role as settings named `polarsplit session authorization` and
/// `polarsplit role` (no setting name can hold a space). The hashes are keyed with a secret drawn once per
/// process (clients choose the hashed values, and equal keys are trusted): compare keys only
/// within one process.
///
/// # Safety
/// `user`, `database` and every array element must be NUL-terminated strings;
/// `identity_host` NULL or a NUL-terminated string; each array NULL (only with a count of 0)
/// or holding that many pointers; `out` a writable key.
#[no_mangle]
pub unsafe extern "C" fn polarsplit_reader_key_build(
    profile_generation: u64,
    user: *const c_char,
    database: *const c_char,
    identity_host: *const c_char,
    identity_port: u16,
    param_names: *const *const c_char,
    param_values: *const *const c_char,
    n_params: usize,
    setting_names: *const *const c_char,
    setting_values: *const *const c_char,
    n_settings: usize,
    out: *mut PolarsplitReaderKey,
) -> PolarsplitStatus {
    boundary! {
        let mut out = try_out!(out);
        // SAFETY: the strings and arrays are as documented.
        let (user, database, params, settings) = unsafe {
            (
                try_arg!(cbytes(user)),
                try_arg!(cbytes(database)),
                try_arg!(cpairs(param_names, param_values, n_params)),
                try_arg!(cpairs(setting_names, setting_values, n_settings)),
            )
        };
        let mut b = ReaderKeyBuilder::new(profile_generation, user, database);
        if !identity_host.is_null() {
            // SAFETY: a NUL-terminated string.
            b.identity(true, try_arg!(unsafe { cbytes(identity_host) }), identity_port);
        }
        for (n, v) in params {
            b.startup_param(n, v);
        }
        for (n, v) in settings {
            b.setting(n, v);
        }
        out.set(b.build().into());
        POLARSPLIT_OK
    }
}
