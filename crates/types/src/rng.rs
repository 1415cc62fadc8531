//! The arithmetic of the small random streams every crate uses, written once: SplitMix64 (a
//! seedable generator good enough for workload shapes, epochs and test data; not for anything
//! statistical beyond that), its finaliser, and the draws built on any 64-bit stream (the
//! simulator's ChaCha streams use them too).

/// SplitMix64's finaliser: mixes the bits of `x` (the same input gives the same output).
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Uniform in [0, 1) from 64 random bits.
pub fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// Uniform in [0, n) from 64 random bits; `n` > 0.
pub fn below(bits: u64, n: u64) -> u64 {
    assert!(n > 0);
    ((bits as u128 * n as u128) >> 64) as u64
}

/// Poisson with mean `lambda`, from uniform draws in [0, 1) (Knuth's method, in steps of 30 for
/// large means).
pub fn poisson(mut lambda: f64, unit: &mut impl FnMut() -> f64) -> u64 {
    let mut count = 0;
    while lambda > 30.0 {
        count += poisson(30.0, unit);
        lambda -= 30.0;
    }
    let limit = (-lambda).exp();
    let mut product = unit();
    while product > limit {
        count += 1;
        product *= unit();
    }
    count
}

/// SplitMix64: the state is the seed, advanced by the golden-ratio increment at every draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform in [0, n); `n` > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        below(self.next_u64(), n)
    }

    /// Poisson with mean `lambda`.
    pub fn poisson(&mut self, lambda: f64) -> u64 {
        poisson(lambda, &mut || self.unit())
    }
}

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A component's random stream (the simulator's, and Random-K's): one independent ChaCha8
/// stream per component, all derived from one seed, so adding a component never changes the
/// numbers another one draws.
#[derive(Clone, Debug)]
pub struct SimRng {
    inner: ChaCha8Rng,
}

impl SimRng {
    /// The stream `stream` of the run seeded with `seed`.
    pub fn new(seed: u64, stream: u64) -> SimRng {
        let mut inner = ChaCha8Rng::seed_from_u64(seed);
        inner.set_stream(stream);
        SimRng { inner }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Fills `dest` with the stream's next bytes: for a length that is a multiple of 8, the
    /// little-endian bytes of as many [`SimRng::next_u64`]s (in one pass, not one call each).
    pub fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.inner.fill_bytes(dest)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform in [0, n); `n` > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        below(self.next_u64(), n)
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Poisson with mean `lambda` (Knuth's method, in steps of 30 for large means).
    pub fn poisson(&mut self, lambda: f64) -> u64 {
        poisson(lambda, &mut || self.unit())
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fill_bytes` gives the bytes `next_u64` would, and leaves the stream where they would,
    /// across the generator's block edges and after other draws.
    #[test]
    fn fill_bytes_are_the_next_u64s() {
        for (seed, words) in [
            (1, 1),
            (2, 7),
            (3, 31),
            (4, 32),
            (5, 33),
            (6, 512),
            (7, 1000),
        ] {
            let (mut a, mut b) = (SimRng::new(seed, 9), SimRng::new(seed, 9));
            for _ in 0..seed * 5 {
                assert_eq!(a.below(1000), b.below(1000));
            }
            let mut filled = vec![0u8; words * 8];
            a.fill_bytes(&mut filled);
            let drawn: Vec<u8> = (0..words)
                .flat_map(|_| b.next_u64().to_le_bytes())
                .collect();
            assert_eq!(filled, drawn, "seed {seed}, {words} words");
            assert_eq!(
                a.next_u64(),
                b.next_u64(),
                "seed {seed}: the streams went apart"
            );
        }
    }

    #[test]
    fn splitmix64_matches_its_reference_values() {
        // The first outputs of SplitMix64 seeded with 1234567 (the reference implementation's
        // published test vector).
        let mut g = SplitMix64(1234567);
        assert_eq!(g.next_u64(), 6457827717110365317);
        assert_eq!(g.next_u64(), 3203168211198807973);
        assert_eq!(g.next_u64(), 9817491932198370423);
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut g = SplitMix64(7);
        for _ in 0..10_000 {
            assert!((0.0..1.0).contains(&g.unit()));
            assert!(g.below(10) < 10);
        }
        let mean = (0..10_000).map(|_| g.poisson(50.0)).sum::<u64>() as f64 / 10_000.0;
        assert!((mean - 50.0).abs() < 1.0, "{mean}");
    }
}

#[cfg(test)]
mod sim_rng_tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = SimRng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = SimRng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = SimRng::new(7, 2);
                move |_| r.next_u64()
            })
            .collect();
        let d: Vec<u64> = (0..4)
            .map({
                let mut r = SimRng::new(8, 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        let mut r = SimRng::new(1, 0);
        let mean = (0..100_000).map(|_| r.exponential(2.0)).sum::<f64>() / 100_000.0;
        assert!((mean - 2.0).abs() < 0.05, "{mean}");
    }
}
