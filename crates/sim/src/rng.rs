//! Seeded randomness: one independent ChaCha8 stream per component, all derived from one seed,
//! so adding a component never changes the numbers another one draws.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A component's random stream.
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

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        cordillera_types::rng::unit(self.next_u64())
    }

    /// Uniform in [0, n); `n` > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        cordillera_types::rng::below(self.next_u64(), n)
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Poisson with mean `lambda` (Knuth's method, in steps of 30 for large means).
    pub fn poisson(&mut self, lambda: f64) -> u64 {
        cordillera_types::rng::poisson(lambda, &mut || self.unit())
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
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
