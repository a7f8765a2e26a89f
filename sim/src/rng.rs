//! A small seeded PRNG (SplitMix64). Every random choice of the simulator draws from one of
//! these, each stream derived from the cluster seed and a fixed purpose, so that adding draws to
//! one purpose (say, missing-LSN RFQs) never shifts another (say, reader lag).

/// SplitMix64: tiny, fast, good enough for simulation, and fully determined by its seed.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A stream for one purpose: the same `(seed, purpose, index)` always gives the same stream.
    pub fn derive(seed: u64, purpose: &str, index: u64) -> Rng {
        // FNV-1a over the purpose, mixed with the seed and index through one SplitMix step.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in purpose.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut r = Rng::new(seed ^ h ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo` when `hi <= lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + self.next_u64() % (span + 1)
    }

    /// True with probability `per_million / 1_000_000`.
    pub fn chance_per_million(&mut self, per_million: u32) -> bool {
        per_million > 0 && self.next_u64() % 1_000_000 < u64::from(per_million)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_purposes_differ() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::derive(7, "lag", 1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::derive(7, "lag", 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        let mut c = Rng::derive(7, "lag", 2);
        assert_ne!(a[0], c.next_u64());
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            let v = r.range(3, 9);
            assert!((3..=9).contains(&v));
        }
        assert_eq!(r.range(5, 5), 5);
        assert!(!r.chance_per_million(0));
        assert!(r.chance_per_million(1_000_000));
    }
}
