//! Bursty volumes with a base load and peaks (Everest §2).

use super::*;

/// Bursty volumes (Everest §2): every volume has a Poisson base load; peaks of `peak_s` seconds
/// at random times raise the total rate to `peak_to_mean` times the base total, with
/// `concentration` of the peak's requests on one volume and `peak_read_fraction` reads.
#[derive(Clone, Debug)]
pub struct Bursty {
    pub volumes: u32,
    pub duration_s: u64,
    pub base_rate_per_s: f64,
    pub peaks: u32,
    pub peak_s: u64,
    pub peak_to_mean: f64,
    pub peak_read_fraction: f64,
    pub base_read_fraction: f64,
    /// Fraction of a peak's requests on its busiest volume.
    pub concentration: f64,
    pub span_bytes: u64,
    pub seed: u64,
}

impl Bursty {
    /// Everest's Exchange peaks: 8 volumes, peaks on one volume carrying 90 % of the load.
    pub fn everest() -> Bursty {
        Bursty {
            volumes: 8,
            duration_s: 6 * 3600,
            base_rate_per_s: 4.0,
            peaks: 3,
            peak_s: 120,
            peak_to_mean: 13.5,
            peak_read_fraction: 0.27,
            base_read_fraction: 0.6,
            concentration: 0.9,
            span_bytes: 64 * GIB,
            seed: 1,
        }
    }

    pub fn volume_names(&self) -> Vec<String> {
        (0..self.volumes).map(|v| format!("vol_{v}")).collect()
    }

    /// The total request rate during a peak such that the whole trace's peak-to-mean ratio is
    /// `peak_to_mean`: with base total `B`, peak total `P` and a fraction `d` of time in peaks,
    /// the mean is `B(1 − d) + P d`, so `P = r B (1 − d) / (1 − r d)`.
    pub fn peak_total_rate_per_s(&self, peaks: usize) -> f64 {
        let base = self.base_rate_per_s * self.volumes as f64;
        let d = (peaks as u64 * self.peak_s) as f64 / self.duration_s.max(1) as f64;
        let r = self.peak_to_mean;
        assert!(
            r * d < 1.0,
            "peaks this long cannot reach a peak-to-mean ratio of {r}"
        );
        r * base * (1.0 - d) / (1.0 - r * d)
    }

    /// Peak start times (s) and volumes, drawn from the seed; peaks never overlap.
    pub fn peak_schedule(&self) -> Vec<(u64, u32)> {
        let mut rng = SimRng::new(self.seed, 1);
        let slots = (self.duration_s / self.peak_s.max(1)).max(1);
        let mut chosen: Vec<u64> = Vec::new();
        let mut attempts = 0;
        while (chosen.len() as u32) < self.peaks.min(slots as u32 / 2) && attempts < 100_000 {
            attempts += 1;
            let slot = rng.below(slots);
            if chosen.iter().all(|c| c.abs_diff(slot) > 1) {
                chosen.push(slot);
            }
        }
        chosen.sort_unstable();
        chosen
            .into_iter()
            .map(|slot| (slot * self.peak_s, rng.below(self.volumes as u64) as u32))
            .collect()
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let spec = self.clone();
        let peaks = self.peak_schedule();
        let peak_total = spec.peak_total_rate_per_s(peaks.len());
        let rates = move |second: u64, v: u32| {
            let peak = peaks
                .iter()
                .find(|(start, _)| (*start..start + spec.peak_s).contains(&second));
            match peak {
                None => (spec.base_rate_per_s, spec.base_read_fraction),
                Some((_, hot)) => {
                    let share = if v == *hot {
                        spec.concentration
                    } else {
                        (1.0 - spec.concentration) / (spec.volumes - 1).max(1) as f64
                    };
                    (peak_total * share, spec.peak_read_fraction)
                }
            }
        };
        poisson_volumes(
            self.volumes,
            self.duration_s,
            8 * KIB,
            self.span_bytes,
            SimRng::new(self.seed, 2),
            rates,
        )
    }
}

/// Requests of `request_bytes` at uniformly random aligned offsets within `span_bytes`, Poisson
/// second by second on each volume at the rate and read fraction `rates(second, volume)` gives,
/// in time order.
pub(super) fn poisson_volumes(
    volumes: u32,
    duration_s: u64,
    request_bytes: u64,
    span_bytes: u64,
    mut rng: SimRng,
    rates: impl Fn(u64, u32) -> (f64, f64) + 'static,
) -> impl Iterator<Item = Record> {
    let slots = span_bytes / request_bytes;
    let mut second = 0u64;
    let mut batch: Vec<Record> = Vec::new();
    let mut at = 0;
    std::iter::from_fn(move || loop {
        if at < batch.len() {
            at += 1;
            return Some(batch[at - 1]);
        }
        if second >= duration_s {
            return None;
        }
        batch.clear();
        at = 0;
        for v in 0..volumes {
            let (rate, reads) = rates(second, v);
            for _ in 0..rng.poisson(rate) {
                let op = if rng.chance(reads) {
                    Op::Read
                } else {
                    Op::Write
                };
                batch.push(Record {
                    time_ns: (second * NS_PER_S as u64 + rng.below(NS_PER_S as u64)) as i64,
                    volume: VolumeId(v),
                    op,
                    offset_bytes: rng.below(slots) * request_bytes,
                    length_bytes: request_bytes,
                    response_ns: None,
                });
            }
        }
        batch.sort_by_key(|r| (r.time_ns, r.volume));
        second += 1;
    })
}
