//! A Hotmail-like back end (Sierra §2, §4.2–4.4; the traces are not public): `gen:hotmail-like`.

use super::*;

/// Where `gen:hotmail-like` starts on the clock: midnight at the start of Monday 4 August 2008,
/// the day the paper's Hotmail I/O traces start (§4.2, at midnight PDT; the generated clock is
/// the service's local time, written as UTC so that hours of day read as local hours).
pub const HOTMAIL_ORIGIN_UNIX_NS: i64 = 1_217_808_000 * NS_PER_S;

/// Eight back-end volumes of a web mail service over whole days from local midnight. The
/// assumptions, written out in `docs/WORKLOADS.md`:
///
/// - **Diurnal shape.** The rate at hour of day h is `trough + (1 − trough)·((1 + cos(2π(h −
///   peak_hour)/24))/2)^sharpness` of the daytime peak: a long night trough and a narrower day
///   peak (Figure 1(a)'s shape; the gear schedule of Figure 10 spends most of the day below the
///   top gear).
/// - **Maintenance.** From midnight for `maintenance_hours` hours a background job adds load so
///   that the total is `maintenance_factor` × the daytime peak, mostly reads (§4.3: "the peak
///   load in our traces happens just after midnight during what we believe is a 2-hour period
///   of maintenance background activity").
/// - **Day to day.** Each hour of each day is scaled by a factor drawn from a log-normal of
///   spread `day_noise` (the paper's Hotmail prediction error is small after one day of
///   training, Figure 8); no weekly pattern.
/// - **Requests.** Poisson arrivals; 8 volumes of unequal weight; `read_fraction` reads; sizes
///   exponential with mean `mean_request_bytes`, in 4 KiB units between 4 KiB and 256 KiB,
///   uniform over `span_bytes`; a `sequential_fraction` continue the volume's previous request
///   (message bodies read or written in pieces).
#[derive(Clone, Debug)]
pub struct HotmailLike {
    pub days: u64,
    /// The trace's length in hours when shorter than `days` (a part of the first day: a
    /// short run for tests).
    pub hours: Option<u64>,
    /// Requests per second over all volumes at the daytime peak (hourly mean).
    pub peak_rate_per_s: f64,
    /// The trough's rate over the daytime peak's.
    pub trough: f64,
    pub sharpness: f64,
    pub peak_hour: f64,
    pub maintenance_hours: u64,
    pub maintenance_factor: f64,
    pub maintenance_read_fraction: f64,
    pub day_noise: f64,
    pub weights: Vec<f64>,
    pub read_fraction: f64,
    pub mean_request_bytes: u64,
    pub sequential_fraction: f64,
    pub span_bytes: u64,
    pub seed: u64,
}

impl HotmailLike {
    /// Two days sized for Sierra's testbed (§4.3): at the daytime peak about 13 chunk servers of
    /// Table 4's performance with 3-way writes, so provisioning gives 15.
    pub fn sierra() -> HotmailLike {
        HotmailLike {
            days: 2,
            hours: None,
            peak_rate_per_s: 1000.0,
            trough: 0.22,
            sharpness: 3.0,
            peak_hour: 14.0,
            maintenance_hours: 2,
            maintenance_factor: 1.6,
            maintenance_read_fraction: 0.8,
            day_noise: 0.06,
            weights: vec![1.4, 1.2, 1.1, 1.0, 1.0, 0.9, 0.8, 0.6],
            read_fraction: 0.6,
            mean_request_bytes: 24 * KIB,
            sequential_fraction: 0.1,
            span_bytes: 64 * GIB,
            seed: 1,
        }
    }

    pub fn volume_names(&self) -> Vec<String> {
        (0..self.weights.len())
            .map(|v| format!("hotmail_{v}"))
            .collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        let v = self.weights.len() as u32;
        if v == 0 || v > GENERATED_VOLUMES_MAX || self.weights.iter().any(|w| *w <= 0.0) {
            return Err("hotmail-like needs 1 to 4096 volumes of positive weight".into());
        }
        if self.days == 0 || self.days > 366 {
            return Err("hotmail-like needs 1 to 366 days".into());
        }
        if self.hours.is_some_and(|h| h == 0 || h > self.days * 24) {
            return Err("hotmail-like needs hours from 1 to days × 24".into());
        }
        if self.peak_rate_per_s <= 0.0
            || self.peak_rate_per_s * self.maintenance_factor.max(1.0) > GENERATED_RATE_MAX_PER_S
        {
            return Err(format!(
                "hotmail-like needs 0 < peak_rate, at most {GENERATED_RATE_MAX_PER_S} requests/s"
            ));
        }
        if !(0.0..=1.0).contains(&self.trough) || self.sharpness <= 0.0 {
            return Err("hotmail-like needs trough in [0, 1] and sharpness > 0".into());
        }
        if self.maintenance_hours > 24 || self.maintenance_factor < 0.0 {
            return Err("hotmail-like needs maintenance_hours ≤ 24 and maintenance ≥ 0".into());
        }
        for f in [
            self.read_fraction,
            self.maintenance_read_fraction,
            self.sequential_fraction,
        ] {
            if !(0.0..=1.0).contains(&f) {
                return Err("hotmail-like: fractions are in [0, 1]".into());
            }
        }
        if !(0.0..=1.0).contains(&self.day_noise) {
            return Err("hotmail-like needs day_noise in [0, 1]".into());
        }
        if self.mean_request_bytes < 4 * KIB || self.span_bytes < 256 * KIB {
            return Err("hotmail-like needs mean_bs ≥ 4k and span ≥ 256k".into());
        }
        Ok(())
    }

    /// The diurnal factor (daytime peak = 1) at `hour` of day, maintenance excluded.
    pub fn diurnal(&self, hour: f64) -> f64 {
        let c = (std::f64::consts::TAU * (hour - self.peak_hour) / 24.0).cos();
        self.trough + (1.0 - self.trough) * ((1.0 + c) / 2.0).powf(self.sharpness)
    }

    /// The rate (requests/s, all volumes) and the read fraction at `hour` of day on a day whose
    /// hour has the noise factor `noise`.
    fn rate_at(&self, hour: f64, noise: f64) -> (f64, f64) {
        let base = self.peak_rate_per_s * self.diurnal(hour) * noise;
        if hour < self.maintenance_hours as f64 {
            let total = (self.peak_rate_per_s * self.maintenance_factor).max(base);
            let extra = total - base;
            let reads = base * self.read_fraction + extra * self.maintenance_read_fraction;
            (total, reads / total.max(f64::MIN_POSITIVE))
        } else {
            (base, self.read_fraction)
        }
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let spec = self.clone();
        let mut rng = SimRng::new(self.seed, 0);
        let hours = self.hours.unwrap_or(self.days * 24) as usize;
        // Noise per hour of the trace, drawn up front from its own stream.
        let mut noise_rng = SimRng::new(self.seed, 1);
        let noise: Vec<f64> = (0..hours)
            .map(|_| {
                // A standard normal by Box–Muller.
                let (u1, u2) = (1.0 - noise_rng.unit(), noise_rng.unit());
                let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (spec.day_noise * normal).exp()
            })
            .collect();
        // Thinning needs a bound on the rate at every instant: the diurnal factor is at most 1.
        let noise_max = noise.iter().copied().fold(0.0, f64::max);
        let max_rate = spec.peak_rate_per_s * noise_max.max(spec.maintenance_factor) * 1.0001;
        let total_weight: f64 = spec.weights.iter().sum();
        let end_ns = hours as f64 * NS_PER_HOUR as f64;
        let blocks = spec.span_bytes / (4 * KIB);
        let mut next_offset = vec![0u64; spec.weights.len()];
        let mut t = 0.0;
        std::iter::from_fn(move || loop {
            // Thinning against a bound above every hour's rate.
            t += rng.exponential(NS_PER_S as f64 / max_rate);
            if t >= end_ns {
                return None;
            }
            let hour_index = (t / NS_PER_HOUR as f64) as usize;
            let hour = t / NS_PER_HOUR as f64 % 24.0;
            let (rate, read_fraction) = spec.rate_at(hour, noise[hour_index]);
            if rng.unit() * max_rate > rate {
                continue;
            }
            let mut pick = rng.unit() * total_weight;
            let mut volume = 0;
            while volume + 1 < spec.weights.len() && pick >= spec.weights[volume] {
                pick -= spec.weights[volume];
                volume += 1;
            }
            let op = if rng.chance(read_fraction) {
                Op::Read
            } else {
                Op::Write
            };
            let size_blocks = ((rng.exponential(spec.mean_request_bytes as f64) / (4 * KIB) as f64)
                .round() as u64)
                .clamp(1, 64);
            let length_bytes = size_blocks * 4 * KIB;
            let offset_bytes = if rng.chance(spec.sequential_fraction)
                && next_offset[volume] + length_bytes <= spec.span_bytes
            {
                next_offset[volume]
            } else {
                rng.below(blocks - size_blocks + 1) * 4 * KIB
            };
            next_offset[volume] = offset_bytes + length_bytes;
            return Some(Record {
                time_ns: t as i64,
                volume: VolumeId(volume as u32),
                op,
                offset_bytes,
                length_bytes,
                response_ns: None,
            });
        })
    }
}
