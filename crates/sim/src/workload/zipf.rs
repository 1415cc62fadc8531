//! Zipf-distributed reads (Bonfire §6.1) and the Zipf sampler.

use super::*;

/// Zipf-distributed 4 KiB reads: block of rank `k` (1 = most popular) is read with probability
/// ∝ `k^-alpha`; ranks are scattered over the address space by a fixed bijection. Arrivals are
/// Poisson at `rate_per_s`.
#[derive(Clone, Debug)]
pub struct Zipf {
    pub count: u64,
    pub alpha: f64,
    pub span_bytes: u64,
    pub rate_per_s: f64,
    pub seed: u64,
}

impl Zipf {
    /// Bonfire §6.1 as published: five million 4 KB reads, α = 0.4, N = 50 GB.
    pub fn bonfire() -> Zipf {
        Zipf {
            count: 5_000_000,
            alpha: 0.4,
            span_bytes: 50 * GIB,
            rate_per_s: 1_000.0,
            seed: 1,
        }
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let blocks = (self.span_bytes / (4 * KIB)).max(1);
        let mut sampler = ZipfSampler::new(blocks, self.alpha);
        let mut rng = SimRng::new(self.seed, 0);
        let mean_gap_ns = NS_PER_S as f64 / self.rate_per_s;
        let mut t = 0.0;
        (0..self.count).map(move |_| {
            t += rng.exponential(mean_gap_ns);
            let rank = sampler.sample(&mut rng) - 1;
            let block = scatter(rank, blocks);
            Record {
                time_ns: t as i64,
                volume: VolumeId(0),
                op: Op::Read,
                offset_bytes: block * 4 * KIB,
                length_bytes: 4 * KIB,
                response_ns: None,
            }
        })
    }
}

/// A bijection of `0..n` that spreads consecutive ranks over the space.
pub(super) fn scatter(rank: u64, n: u64) -> u64 {
    // 2654435761 is prime; it is coprime with n unless n is a multiple of it.
    const P: u128 = 2_654_435_761;
    if n.is_multiple_of(P as u64) {
        return rank;
    }
    ((rank as u128 * P) % n as u128) as u64
}

/// Rejection-inversion sampling of Zipf(n, alpha) (Hörmann & Derflinger, 1996): O(1) per sample,
/// no tables, any alpha > 0.
pub struct ZipfSampler {
    n: f64,
    alpha: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl ZipfSampler {
    pub fn new(n: u64, alpha: f64) -> ZipfSampler {
        assert!(n >= 1 && alpha > 0.0);
        let mut z = ZipfSampler {
            n: n as f64,
            alpha,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in 1..=n.
    pub fn sample(&mut self, rng: &mut SimRng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.unit() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = x.round().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.alpha * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.alpha) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.alpha);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, continuous at 0.
pub(super) fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x − 1) / x`, continuous at 0.
pub(super) fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}
