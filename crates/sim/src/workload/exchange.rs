//! Everest's three peak episodes of an Exchange-like mail server (Table 1).

use super::*;

/// One peak of [`ExchangeLike`]: for `duration_s` from `start_s`, the volumes together receive
/// `rate_factor` times the first peak's rate, `concentration` of it on volume `hot`.
#[derive(Clone, Debug)]
pub struct ExchangePeak {
    pub start_s: u64,
    pub duration_s: u64,
    pub rate_factor: f64,
    pub read_fraction: f64,
    pub concentration: f64,
    pub hot: u32,
}

/// An Exchange-like mail server (Everest §2 and Table 1; the trace itself is not public). The
/// assumptions are written out in `docs/WORKLOADS.md`:
///
/// - 8 volumes with unequal Poisson base loads (`weights`), 60 % reads, 8 KiB requests (the
///   Exchange database page) uniformly over `span_bytes` of each volume;
/// - three peaks shaped like Table 1's episodes: two write-dominated (27 % and 24 % reads) and
///   one read-dominated (91 %), the first two of nearly equal height (98 vs 95 thousand
///   requests/s in Table 1), the third at 36 % of the first;
/// - write-dominated peaks fall mostly on one volume (Everest §2: the load is concentrated on
///   a few volumes), the read-dominated one is spread over all, so the other volumes' disks are
///   busy too;
/// - the base rate is set so that the highest 1-minute rate over the mean rate of the whole
///   trace is `peak_to_mean` (13.5 in Everest §2).
#[derive(Clone, Debug)]
pub struct ExchangeLike {
    pub duration_s: u64,
    /// The first peak's total rate (requests/s over all volumes).
    pub peak_rate_per_s: f64,
    pub peak_to_mean: f64,
    /// Relative base load of each volume (their number is the number of volumes).
    pub weights: Vec<f64>,
    pub base_read_fraction: f64,
    pub request_bytes: u64,
    pub span_bytes: u64,
    pub peaks: Vec<ExchangePeak>,
    pub seed: u64,
}

impl ExchangeLike {
    /// Six hours with three peaks. The first peak's hot volume receives 2,700 requests/s for
    /// three minutes: more than a RAID-0 of four Cheetah 15K disks serves at any queue depth
    /// (about 2,100 random 8 KiB I/Os per second at depth 128 on the simulator).
    pub fn everest() -> ExchangeLike {
        ExchangeLike {
            duration_s: 6 * 3600,
            peak_rate_per_s: 2550.0,
            peak_to_mean: 13.5,
            weights: vec![1.6, 1.4, 1.2, 1.0, 0.9, 0.8, 0.6, 0.5],
            base_read_fraction: 0.6,
            request_bytes: 8 * KIB,
            span_bytes: 256 * GIB,
            peaks: vec![
                ExchangePeak {
                    start_s: 3600 + 13 * 60,
                    duration_s: 180,
                    rate_factor: 1.0,
                    read_fraction: 0.27,
                    concentration: 0.9,
                    hot: 2,
                },
                ExchangePeak {
                    start_s: 3 * 3600 + 16 * 60,
                    duration_s: 840,
                    rate_factor: 0.97,
                    read_fraction: 0.91,
                    concentration: 0.2,
                    hot: 5,
                },
                ExchangePeak {
                    start_s: 5 * 3600 + 5 * 60,
                    duration_s: 180,
                    rate_factor: 0.6,
                    read_fraction: 0.24,
                    concentration: 0.9,
                    hot: 0,
                },
            ],
            seed: 1,
        }
    }

    pub fn volume_names(&self) -> Vec<String> {
        (0..self.weights.len())
            .map(|v| format!("exch_{v}"))
            .collect()
    }

    /// The base total rate such that the highest 1-minute rate over the mean is
    /// `peak_to_mean`: with peak total rates `P_i` lasting `d_i` and a base total `B`
    /// elsewhere, the mean over `T` is `(B (T − Σd_i) + Σ P_i d_i) / T`.
    pub fn base_total_rate_per_s(&self) -> f64 {
        let t = self.duration_s as f64;
        let highest =
            self.peaks.iter().map(|p| p.rate_factor).fold(0.0, f64::max) * self.peak_rate_per_s;
        let mean = highest / self.peak_to_mean;
        let in_peaks: f64 = self.peaks.iter().map(|p| p.duration_s as f64).sum();
        let peak_requests: f64 = self
            .peaks
            .iter()
            .map(|p| p.rate_factor * self.peak_rate_per_s * p.duration_s as f64)
            .sum();
        ((mean * t - peak_requests) / (t - in_peaks)).max(0.0)
    }

    pub fn validate(&self) -> Result<(), String> {
        let v = self.weights.len() as u32;
        if v == 0 || v > GENERATED_VOLUMES_MAX || self.weights.iter().any(|w| *w <= 0.0) {
            return Err("exchange-like needs 1 to 4096 volumes of positive weight".into());
        }
        if self.peak_rate_per_s <= 0.0 || self.peak_rate_per_s > GENERATED_RATE_MAX_PER_S {
            return Err("exchange-like needs 0 < peak rate ≤ 10,000,000 requests/s".into());
        }
        if self.request_bytes == 0 || self.span_bytes < self.request_bytes {
            return Err("exchange-like needs a request size > 0 within the span".into());
        }
        for p in &self.peaks {
            if p.hot >= v
                || p.start_s + p.duration_s > self.duration_s
                || !(0.0..=1.0).contains(&p.read_fraction)
                || !(0.0..=1.0).contains(&p.concentration)
                || p.rate_factor <= 0.0
            {
                return Err(format!("exchange-like: bad peak {p:?}"));
            }
        }
        if self.base_total_rate_per_s() <= 0.0 {
            return Err(format!(
                "exchange-like: peaks this long cannot reach a peak-to-mean ratio of {}",
                self.peak_to_mean
            ));
        }
        Ok(())
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let spec = self.clone();
        let base_total = self.base_total_rate_per_s();
        let weight_sum: f64 = self.weights.iter().sum();
        let volumes = self.weights.len() as u32;
        let rates = move |second: u64, v: u32| {
            let peak = spec
                .peaks
                .iter()
                .find(|p| (p.start_s..p.start_s + p.duration_s).contains(&second));
            match peak {
                None => (
                    base_total * spec.weights[v as usize] / weight_sum,
                    spec.base_read_fraction,
                ),
                Some(p) => {
                    let share = if v == p.hot {
                        p.concentration
                    } else {
                        (1.0 - p.concentration) / (volumes - 1).max(1) as f64
                    };
                    (
                        p.rate_factor * spec.peak_rate_per_s * share,
                        p.read_fraction,
                    )
                }
            }
        };
        poisson_volumes(
            volumes,
            self.duration_s,
            self.request_bytes,
            self.span_bytes,
            SimRng::new(self.seed, 3),
            rates,
        )
    }
}
