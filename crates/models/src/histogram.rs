//! A latency histogram in constant memory: 64 sub-buckets per power of two, so any percentile
//! is reported within 1.6 % of the exact value; mean and max are exact.

use serde::Serialize;

const SUB_BUCKETS: u64 = 64;

#[derive(Clone, Debug, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

/// What reports print of a histogram (milliseconds).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let power = 63 - value.leading_zeros() as u64; // ≥ 6
    let shift = power - 6;
    let sub = (value >> shift) - SUB_BUCKETS; // 0..64
    ((power - 5) * SUB_BUCKETS + sub) as usize
}

/// The largest value of a bucket (percentiles report the bucket's upper edge).
fn bucket_high(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < SUB_BUCKETS {
        return bucket;
    }
    let power = bucket / SUB_BUCKETS + 5;
    let sub = bucket % SUB_BUCKETS;
    let shift = power - 6;
    ((SUB_BUCKETS + sub + 1) << shift) - 1
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram::default()
    }

    pub fn record(&mut self, value_ns: u64) {
        let bucket = bucket_of(value_ns);
        if self.counts.len() <= bucket {
            self.counts.resize(bucket + 1, 0);
        }
        self.counts[bucket] += 1;
        self.count += 1;
        self.sum_ns += value_ns as u128;
        self.max_ns = self.max_ns.max(value_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds every value of `other` (the result is the histogram of both sets of values).
    pub fn merge(&mut self, other: &Histogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// The value at quantile `q` (nearest rank), as the upper edge of its bucket, capped at max.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (bucket, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_high(bucket).min(self.max_ns));
            }
        }
        Some(self.max_ns)
    }

    pub fn summary(&self) -> LatencySummary {
        let ms = |ns: u64| ns as f64 / 1e6;
        LatencySummary {
            count: self.count,
            mean_ms: self.mean_ns().map(|n| n / 1e6),
            p50_ms: self.quantile_ns(0.5).map(ms),
            p99_ms: self.quantile_ns(0.99).map(ms),
            max_ms: (self.count > 0).then(|| ms(self.max_ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_equals_recording_both() {
        let (mut a, mut b, mut both) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 1..5_000u64 {
            let value = v * v * 37;
            if v % 3 == 0 {
                a.record(value)
            } else {
                b.record(value)
            }
            both.record(value);
        }
        a.merge(&b);
        assert_eq!(a.summary(), both.summary());
        assert_eq!(a.count(), 4_999);
    }

    #[test]
    fn quantiles_within_bucket_precision() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        for q in [0.5, 0.9, 0.99] {
            let exact = (q * 100_000.0) * 1000.0;
            let got = h.quantile_ns(q).unwrap() as f64;
            assert!(
                got >= exact && got <= exact * 1.016,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile_ns(1.0), Some(100_000_000));
        assert_eq!(h.mean_ns(), Some(50_000_500.0));
        for v in [0, 1, 63, 64, 65, 127, 128, 1 << 40, u64::MAX / 2] {
            let b = bucket_of(v);
            assert!(
                bucket_high(b) >= v && (b == 0 || bucket_high(b - 1) < v),
                "value {v}"
            );
        }
        assert_eq!(Histogram::new().summary().p50_ms, None);
    }
}
