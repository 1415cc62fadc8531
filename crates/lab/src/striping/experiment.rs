//! The paper's synthetic experiments (§3.2–3.3) as scenarios: arrays, Poisson ON-OFF streams
//! placed narrow (each on its own array) or wide (every store over every array), and the ratio
//! of mean response times, wide over narrow, per kind of stream.

use cordillera_sim::workload::{OnOff, Stream};
use cordillera_trace::{Record, VolumeId as TraceVolume};

use super::model::Model;
use super::sim::{self, RunReport};
use cordillera_striping::policy::Policy;
use cordillera_striping::pool::{ArraySpec, Pool};

/// One kind of stream (the paper's L or S).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamKind {
    pub name: &'static str,
    pub mean_request_bytes: f64,
    pub read_fraction: f64,
    pub stripe_unit_bytes: u64,
    /// Requests per second during ON periods.
    pub rate_on_per_s: f64,
}

impl StreamKind {
    /// §3.1: large requests, 2 MB mean, 1 MB stripe unit.
    pub fn large(rate_on_per_s: f64) -> StreamKind {
        StreamKind {
            name: "large",
            mean_request_bytes: 2e6,
            read_fraction: 1.0,
            stripe_unit_bytes: 1 << 20,
            rate_on_per_s,
        }
    }
    /// §3.1: small requests, 64 KB mean, 32 KB stripe unit.
    pub fn small(rate_on_per_s: f64) -> StreamKind {
        StreamKind {
            name: "small",
            mean_request_bytes: 64e3,
            read_fraction: 1.0,
            stripe_unit_bytes: 32 << 10,
            rate_on_per_s,
        }
    }
    fn stream(&self) -> Stream {
        Stream {
            rate_on_per_s: self.rate_on_per_s,
            mean_request_bytes: self.mean_request_bytes,
            read_fraction: self.read_fraction,
        }
    }
}

/// Arrays, and on each array (narrow) one or two stores: `kinds[0]` alone, or the pair
/// (`kinds[0]`, `kinds[1]`) whose ON periods overlap by `(1 + pair_correlation) / 2`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub arrays: usize,
    pub array: ArraySpec,
    pub preset: String,
    pub kinds: Vec<StreamKind>,
    pub pair_correlation: f64,
    /// Between the streams of different arrays (§3.3's second part), in [0, 1].
    pub cross_correlation: f64,
    pub mean_on_s: f64,
    pub duration_s: f64,
    pub seed: u64,
    /// Wide stores: stripe units on one array before the next (1: unit by unit; the array's
    /// data disks: whole RAID stripes, as a volume manager striping across arrays).
    pub wide_chunk_units: u64,
    /// The modelling choices the paper leaves open.
    pub model: Model,
}

/// The Fujitsu MAJ3182MC's 18.2 GB, in whole MiB.
pub const FUJITSU_DISK_BYTES: u64 = 18_200_000_000 / (1 << 20) * (1 << 20);

impl Scenario {
    /// RAID-5 4+p arrays of Fujitsu disks, stores filling them.
    pub fn paper(arrays: usize, kinds: Vec<StreamKind>, seed: u64) -> Scenario {
        Scenario {
            arrays,
            array: ArraySpec::raid5_4p(FUJITSU_DISK_BYTES),
            preset: "fujitsu-maj3182mc".into(),
            kinds,
            pair_correlation: -1.0,
            cross_correlation: 0.0,
            mean_on_s: 10.0,
            duration_s: 600.0,
            seed,
            wide_chunk_units: 1,
            model: Model::default(),
        }
    }

    fn per_array(&self) -> usize {
        self.kinds.len()
    }

    /// Each store's size: its array's data capacity over the stores it holds (narrow), or the
    /// model's size when it is smaller, a multiple of 4 MiB × arrays so that every stripe unit
    /// divides it.
    fn store_bytes(&self) -> u64 {
        let data = self.array.disk_bytes * self.array.data_disks() as u64;
        let step = (4u64 << 20)
            * self.arrays as u64
            * self.array.data_disks() as u64
            * self.wide_chunk_units.max(1);
        // Some room for the rounding up of extents.
        let fill = (data / self.per_array() as u64).saturating_sub(step);
        let wanted = self.model.store_bytes.map_or(fill, |b| b.min(fill));
        (wanted / step).max(1) * step
    }

    /// The pool for a policy: store `a * per_array + k` is kind k's store of array a.
    pub fn pool(&self, policy: Policy) -> Result<Pool, String> {
        let mut pool = Pool::new(&vec![self.array; self.arrays]).map_err(|e| e.to_string())?;
        let size = self.store_bytes();
        let all: Vec<usize> = (0..self.arrays).collect();
        for a in 0..self.arrays {
            for kind in &self.kinds {
                let (arrays, chunk) = match policy {
                    Policy::Narrow => (vec![a], 1),
                    Policy::Wide => (all.clone(), self.wide_chunk_units),
                };
                pool.create_chunked(
                    &format!("{}{a}", &kind.name[..1].to_uppercase()),
                    size,
                    kind.stripe_unit_bytes,
                    chunk,
                    &arrays,
                )
                .map_err(|e| e.to_string())?;
            }
        }
        Ok(pool)
    }

    /// The requests of every store, time-ordered; `volume` is the store's index in the pool.
    pub fn records(&self) -> impl Iterator<Item = Record> {
        let per = self.per_array();
        // One OnOff pair per array; a lone kind gets a silent partner.
        let pairs = (0..self.arrays)
            .map(|_| {
                let a = self.kinds[0].stream();
                let b = match self.kinds.get(1) {
                    Some(k) => k.stream(),
                    None => Stream {
                        rate_on_per_s: 1e-12,
                        ..self.kinds[0].stream()
                    },
                };
                (a, b, self.pair_correlation)
            })
            .collect();
        let g = OnOff {
            pairs,
            mean_on_s: self.mean_on_s,
            duration_s: self.duration_s,
            span_bytes: self.store_bytes(),
            seed: self.seed,
            cross_correlation: self.cross_correlation,
        };
        let model = self.model.clone();
        let means: Vec<f64> = self.kinds.iter().map(|k| k.mean_request_bytes).collect();
        g.records().filter_map(move |mut r| {
            let (array, k) = (r.volume.0 as usize / 2, r.volume.0 as usize % 2);
            if k >= per {
                return None;
            }
            r.volume = TraceVolume((array * per + k) as u32);
            r.length_bytes = model.size(r.length_bytes, means[k]);
            Some(r)
        })
    }

    /// Runs the scenario under a policy.
    pub fn run(&self, policy: Policy) -> Result<RunReport, String> {
        let mut device = sim::device_with(self.pool(policy)?, &|| self.model.disk(&self.preset))?;
        Ok(sim::run(&mut device, self.records(), 1_000_000_000))
    }

    /// The mean response time (ms) of each kind's requests in a report.
    pub fn means_ms(&self, report: &RunReport) -> Vec<f64> {
        let per = self.per_array();
        (0..per)
            .map(|k| {
                let mut h = cordillera_models::histogram::Histogram::new();
                for v in report.volumes.iter().skip(k).step_by(per) {
                    h.merge(&v.histogram);
                }
                h.mean_ns().map_or(f64::NAN, |n| n / 1e6)
            })
            .collect()
    }

    /// Scales each kind's ON rate so that, alone on a narrow array, it keeps the array's disks
    /// `target` busy while it is ON — or over the whole run, by the model's `utilization_of`
    /// (two short calibration runs per kind).
    pub fn solve_rates(&mut self, target: f64) -> Result<(), String> {
        for k in 0..self.kinds.len() {
            for _ in 0..2 {
                let mut alone = self.clone();
                alone.kinds = vec![self.kinds[k].clone()];
                alone.arrays = 1;
                // Forty ON periods, and at least a minute for short ones.
                alone.duration_s = (self.mean_on_s * 40.0)
                    .max(60.0)
                    .min(self.duration_s.max(1.0));
                let report = alone.run(Policy::Narrow)?;
                // A lone stream is ON half the time.
                let of = self.model.utilization_of;
                let busy = if of.of_array() {
                    report.busy_fraction
                } else {
                    report.array_mean_utilization[0]
                };
                let utilization = if of.while_on() { busy / 0.5 } else { busy };
                if utilization <= 0.0 {
                    return Err(format!("{} made no load", self.kinds[k].name));
                }
                self.kinds[k].rate_on_per_s *= target / utilization;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::striping::model::UtilizationOf;

    #[test]
    fn the_solver_reaches_its_target_and_the_stores_fill_the_arrays() {
        let mut s = Scenario::paper(1, vec![StreamKind::small(20.0)], 5);
        s.duration_s = 200.0;
        s.solve_rates(0.5).unwrap();
        let r = s.run(Policy::Narrow).unwrap();
        let on = r.array_mean_utilization[0] / 0.5;
        assert!(
            (on - 0.5).abs() < 0.1,
            "{on} at {} requests/s",
            s.kinds[0].rate_on_per_s
        );
        let pool = s.pool(Policy::Wide).unwrap();
        assert!(pool.free_disk_bytes(0) < FUJITSU_DISK_BYTES / 50);
    }

    /// Figure 2(b)'s shape on two arrays: anti-correlated large and small stores, 75 % busy while
    /// ON; wide striping serves the large requests faster and the small ones slower (§3.2.2).
    #[test]
    fn wide_striping_helps_large_requests_and_hurts_small_ones_beside_them() {
        let mut s = Scenario::paper(
            2,
            vec![StreamKind::large(10.0), StreamKind::small(100.0)],
            3,
        );
        s.duration_s = 300.0;
        s.solve_rates(0.75).unwrap();
        let narrow = s.means_ms(&s.run(Policy::Narrow).unwrap());
        let wide = s.means_ms(&s.run(Policy::Wide).unwrap());
        let (large, small) = (wide[0] / narrow[0], wide[1] / narrow[1]);
        assert!(
            large < 0.97,
            "large: wide/narrow {large} ({wide:?} vs {narrow:?})"
        );
        assert!(
            small > 1.1,
            "small: wide/narrow {small} ({wide:?} vs {narrow:?})"
        );
    }
    fn pair_ratios(s: &Scenario) -> (f64, f64) {
        let narrow = s.means_ms(&s.run(Policy::Narrow).unwrap());
        let wide = s.means_ms(&s.run(Policy::Wide).unwrap());
        (wide[0] / narrow[0], wide[1] / narrow[1])
    }

    /// Figure 2(b)'s small-request penalty falls with the ON periods' length (docs/LAB.md): a
    /// narrow array's queue from one stream's ON period still drains when the other's begins.
    #[test]
    fn shorter_on_periods_shrink_wide_stripings_penalty_for_small_requests() {
        let small = |mean_on_s: f64| {
            let mut s = Scenario::paper(
                2,
                vec![StreamKind::large(10.0), StreamKind::small(100.0)],
                3,
            );
            s.duration_s = 200.0;
            s.mean_on_s = mean_on_s;
            s.solve_rates(0.75).unwrap();
            pair_ratios(&s).1
        };
        let (long, short) = (small(10.0), small(0.1));
        assert!(long > 1.6, "10 s ON periods: small wide/narrow {long}");
        assert!(
            short < 1.5 && short < long - 0.3,
            "0.1 s: {short} (10 s: {long})"
        );
    }

    /// With the array as the server, the solver sets the time some request is outstanding, and
    /// the disks are less busy than that.
    #[test]
    fn the_array_busy_fraction_is_solved_for_and_exceeds_the_disks() {
        let mut s = Scenario::paper(1, vec![StreamKind::small(20.0)], 5);
        s.duration_s = 200.0;
        s.model.utilization_of = UtilizationOf::ArrayOn;
        s.solve_rates(0.5).unwrap();
        let r = s.run(Policy::Narrow).unwrap();
        let (array, disks) = (r.busy_fraction / 0.5, r.array_mean_utilization[0] / 0.5);
        assert!((array - 0.5).abs() < 0.1, "array busy {array} while ON");
        assert!(disks < array - 0.1, "disks {disks}, array {array}");
    }

    /// Figure 3's small requests at an 8 KB unit, unloaded: wide reads one unit from each of 8
    /// disks, narrow two contiguous units from each of 4, and the slowest of 8 positionings
    /// outlasts the slowest of 4 — wide is slower with no queue at all.
    #[test]
    fn small_requests_at_small_units_are_slower_wide_even_unloaded() {
        let mut s = Scenario::paper(
            2,
            vec![StreamKind::large(10.0), StreamKind::small(100.0)],
            4,
        );
        s.duration_s = 200.0;
        s.solve_rates(0.05).unwrap();
        s.kinds[0].stripe_unit_bytes = 128 << 10;
        s.kinds[1].stripe_unit_bytes = 8 << 10;
        let small = pair_ratios(&s).1;
        assert!(small > 1.1, "small at 8 KB, 5 % busy: wide/narrow {small}");
    }
}
