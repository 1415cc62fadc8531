//! Diurnal Poisson load following an hour-of-day curve (Sierra §2).

use super::*;

/// Diurnal Poisson load: the rate at hour of day `h` is `mean × f(h)`, with `f` a cosine peaking
/// at `peak_hour` whose maximum is `peak_to_trough` times its minimum and whose mean is 1.
#[derive(Clone, Debug)]
pub struct Diurnal {
    pub days: u64,
    pub mean_rate_per_s: f64,
    pub peak_to_trough: f64,
    pub peak_hour: f64,
    pub read_fraction: f64,
    pub request_bytes: u64,
    pub span_bytes: u64,
    pub seed: u64,
}

impl Diurnal {
    /// The rate multiplier at `hour` (0–24).
    pub fn factor(&self, hour: f64) -> f64 {
        // f = 1 + a·cos(…), (1 + a) / (1 − a) = peak_to_trough.
        let a = (self.peak_to_trough - 1.0) / (self.peak_to_trough + 1.0);
        1.0 + a * (std::f64::consts::TAU * (hour - self.peak_hour) / 24.0).cos()
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let spec = self.clone();
        let mut rng = SimRng::new(self.seed, 0);
        let max_rate = self.mean_rate_per_s
            * (1.0 + (self.peak_to_trough - 1.0) / (self.peak_to_trough + 1.0));
        let end_ns = self.days as f64 * 24.0 * NS_PER_HOUR as f64;
        let origin_hour = 17.0; // the generated trace starts at 17:00 UTC
        let mut t = 0.0;
        std::iter::from_fn(move || loop {
            // Thinning: candidates at the maximum rate, kept with probability rate(t) / max.
            t += rng.exponential(NS_PER_S as f64 / max_rate);
            if t >= end_ns {
                return None;
            }
            let hour = (origin_hour + t / NS_PER_HOUR as f64) % 24.0;
            if rng.unit() * max_rate > spec.mean_rate_per_s * spec.factor(hour) {
                continue;
            }
            let op = if rng.chance(spec.read_fraction) {
                Op::Read
            } else {
                Op::Write
            };
            let blocks = spec.span_bytes / spec.request_bytes;
            let offset_bytes = rng.below(blocks.max(1)) * spec.request_bytes;
            return Some(Record {
                time_ns: t as i64,
                volume: VolumeId(0),
                op,
                offset_bytes,
                length_bytes: spec.request_bytes,
                response_ns: None,
            });
        })
    }
}
