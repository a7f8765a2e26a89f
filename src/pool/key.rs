//! The reader key (SPEC P-9): a pooled reader connection may serve a session only when all four
//! values match, so connections never cross users, databases or settings.

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

/// FNV-1a, 64-bit: a small, stable, deterministic hash (no per-process seed), so keys computed by
/// different threads, sessions and runs agree. Fields are length-prefixed so that
/// `("ab", "c")` and `("a", "bc")` differ.
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    pub fn new() -> Fnv64 {
        Fnv64::default()
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Fnv64 {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// A length-prefixed field.
    pub fn field(&mut self, b: &[u8]) -> &mut Fnv64 {
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b)
    }

    pub fn u64(&mut self, v: u64) -> &mut Fnv64 {
        self.bytes(&v.to_le_bytes())
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_length_prefixed() {
        let a = Fnv64::new().field(b"ab").field(b"c").finish();
        let b = Fnv64::new().field(b"a").field(b"bc").finish();
        assert_ne!(a, b);
        assert_eq!(a, Fnv64::new().field(b"ab").field(b"c").finish());
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
}
