//! Workload generators calibrated to the papers. Each is a time-ordered stream of the trace
//! crate's [`Record`], so a generated workload and a real trace are interchangeable: every
//! `cordillera trace …` and `sim replay` command accepts `gen:NAME[:key=value,…]` in place of a
//! file (see [`open_spec`]).
//!
//! - [`OnOff`]: Poisson ON-OFF request streams with exponential request sizes, in pairs whose ON
//!   periods overlap by a chosen correlation in [−1, 1] (striping paper §3.1).
//! - [`Zipf`]: 4 KiB reads with Zipf popularity over an address space (Bonfire §6.1).
//! - [`Diurnal`]: Poisson load following an hour-of-day curve with a peak-to-trough ratio (Sierra §2).
//! - [`Bursty`]: volumes with a base load and peaks of a given peak-to-mean ratio, read fraction
//!   and concentration on one volume (Everest §2, Table 1).
//! - [`ExchangeLike`]: Everest's three peak episodes (Table 1) in an Exchange-like mail server
//!   trace: `gen:exchange-like`.
//! - [`Reaccess`]: a week of Bonfire's hourly and daily reaccess patterns (§3):
//!   `gen:reaccess`.

use cordillera_trace::format::Format;
use cordillera_trace::{
    ReadSummary, Record, RecordReader, TraceError, TraceInfo, VolumeId, VolumeTable,
};
use cordillera_types::units::{GIB, KIB, NS_PER_HOUR, NS_PER_S};
use cordillera_types::Op;

use crate::rng::SimRng;

/// A generated trace as a [`RecordReader`].
pub struct Generated {
    info: TraceInfo,
    volumes: VolumeTable,
    records: Box<dyn Iterator<Item = Record>>,
    summary: ReadSummary,
}

impl Generated {
    pub fn new(volume_names: &[String], records: Box<dyn Iterator<Item = Record>>) -> Generated {
        let mut volumes = VolumeTable::new();
        for name in volume_names {
            volumes.intern(name.as_bytes()).expect("few volumes");
        }
        Generated {
            // Generated traces start at the MSR Cambridge traces' start, so hours of day read naturally.
            info: TraceInfo {
                format: Format::Binary,
                origin_unix_ns: Some(cordillera_trace::synth::SYNTH_ORIGIN_UNIX_NS),
                has_time: true,
                last_line_unterminated: false,
            },
            volumes,
            records,
            summary: ReadSummary::default(),
        }
    }
}

impl RecordReader for Generated {
    fn info(&self) -> &TraceInfo {
        &self.info
    }
    fn volumes(&self) -> &VolumeTable {
        &self.volumes
    }
    fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        let record = self.records.next();
        if record.is_some() {
            self.summary.records += 1;
            self.summary.lines += 1;
        }
        Ok(record)
    }
    fn summary(&self) -> &ReadSummary {
        &self.summary
    }
}

// ---------------------------------------------------------------------------------------------

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
                size_bytes: 4 * KIB,
                response_ns: None,
            }
        })
    }
}

/// A bijection of `0..n` that spreads consecutive ranks over the space.
fn scatter(rank: u64, n: u64) -> u64 {
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
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x − 1) / x`, continuous at 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

// ---------------------------------------------------------------------------------------------

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
                size_bytes: spec.request_bytes,
                response_ns: None,
            });
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// Two volumes with Bonfire's reaccess patterns (§3), for the warm-up lab (`gen:reaccess`):
/// - `hourly`: most requests reaccess what the volume touched recently (a recency-driven
///   working set, like MSR proj1 or usr: mostly within minutes, some hours back), the rest go
///   to long-lived popular data (Zipf over 1 GiB) or to new data at a moving frontier;
/// - `daily`: a nightly job reads the same 2 GiB region sequentially from 02:00 to 03:00 every
///   day (like src11 and web2), over a light background of popular and new data.
///
/// Both follow a diurnal curve (peak at 14:00, three times the trough). The trace starts at
/// 17:00 UTC like the MSR traces.
#[derive(Clone, Debug)]
pub struct Reaccess {
    pub days: u64,
    /// Mean requests per second of the hourly volume (the daily one's background is a third).
    pub rate_per_s: f64,
    pub seed: u64,
}

impl Reaccess {
    pub fn bonfire() -> Reaccess {
        Reaccess {
            days: 7,
            rate_per_s: 2.0,
            seed: 1,
        }
    }

    pub fn volume_names(&self) -> Vec<String> {
        vec!["hourly".to_owned(), "daily".to_owned()]
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.days == 0 || self.days > 366 || !(self.rate_per_s > 0.0 && self.rate_per_s <= 1e5) {
            return Err("reaccess needs 1–366 days and 0 < rate ≤ 100000".into());
        }
        Ok(())
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        const BLOCK: u64 = 4 * KIB;
        const RECENT: usize = 1 << 18;
        // Reaccess distances in requests: most about 15 minutes back at the mean rate, some
        // about six hours back.
        const MEAN_BACK_NEAR: f64 = 2000.0;
        const MEAN_BACK_FAR: f64 = 45_000.0;
        const FAR_SHARE: f64 = 0.4;
        const POPULAR_BLOCKS: u64 = GIB / BLOCK;
        const NEW_BASE: u64 = 8 * GIB;
        const NEW_SPAN: u64 = 56 * GIB;
        const NIGHTLY_BASE: u64 = 4 * GIB;
        const NIGHTLY_BYTES: u64 = 2 * GIB;
        const NIGHTLY_READ: u64 = 64 * KIB;
        let spec = self.clone();
        let diurnal = Diurnal {
            days: spec.days,
            mean_rate_per_s: spec.rate_per_s,
            peak_to_trough: 3.0,
            peak_hour: 14.0,
            read_fraction: 0.0,
            request_bytes: BLOCK,
            span_bytes: BLOCK,
            seed: spec.seed,
        };
        let mut rng = SimRng::new(spec.seed, 7);
        let mut popular = ZipfSampler::new(POPULAR_BLOCKS, 1.0);
        // Per volume: the recent requests (offset, size) and the new-data frontier.
        let mut recent: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
        let mut at: [usize; 2] = [0, 0];
        let mut frontier: [u64; 2] = [0, NEW_SPAN / 2];
        let mut second = 0u64;
        let end_s = spec.days * 24 * 3600;
        let mut batch: Vec<Record> = Vec::new();
        let mut next = 0usize;
        std::iter::from_fn(move || loop {
            if next < batch.len() {
                next += 1;
                return Some(batch[next - 1]);
            }
            if second >= end_s {
                return None;
            }
            batch.clear();
            next = 0;
            let hour = (17 + second / 3600) % 24;
            let factor = diurnal.factor(hour as f64 + (second % 3600) as f64 / 3600.0);
            for v in 0..2usize {
                let rate = spec.rate_per_s * factor * if v == 0 { 1.0 } else { 1.0 / 3.0 };
                for _ in 0..rng.poisson(rate) {
                    let u = rng.unit();
                    let filled = recent[v].len();
                    let mean = if rng.chance(FAR_SHARE) {
                        MEAN_BACK_FAR
                    } else {
                        MEAN_BACK_NEAR
                    };
                    let back = (1 + rng.exponential(mean) as usize).min(RECENT);
                    let (reaccess, popular_share) = if v == 0 { (0.55, 0.25) } else { (0.0, 0.5) };
                    let (offset, size, read) = if u < reaccess && back <= filled {
                        let (o, s) = recent[v][(at[v] + RECENT - back) % RECENT];
                        (o, s, rng.chance(0.75))
                    } else if u < reaccess + popular_share {
                        let block = scatter(popular.sample(&mut rng) - 1, POPULAR_BLOCKS);
                        (block * BLOCK, BLOCK * (1 + rng.below(2)), rng.chance(0.8))
                    } else {
                        let size = BLOCK * (1 + rng.below(8));
                        let o = NEW_BASE + frontier[v];
                        frontier[v] = (frontier[v] + size) % (NEW_SPAN - 32 * KIB);
                        (o, size, rng.chance(0.3))
                    };
                    if filled < RECENT {
                        recent[v].push((offset, size));
                    } else {
                        recent[v][at[v]] = (offset, size);
                    }
                    at[v] = (at[v] + 1) % RECENT;
                    batch.push(Record {
                        time_ns: second as i64 * NS_PER_S + rng.below(NS_PER_S as u64) as i64,
                        volume: VolumeId(v as u32),
                        op: if read { Op::Read } else { Op::Write },
                        offset_bytes: offset,
                        size_bytes: size,
                        response_ns: None,
                    });
                }
            }
            if hour == 2 {
                // The nightly job: the region read once, in order, over the hour.
                let reads = NIGHTLY_BYTES / NIGHTLY_READ;
                let (from, to) = (
                    (second % 3600) * reads / 3600,
                    (second % 3600 + 1) * reads / 3600,
                );
                for k in from..to {
                    batch.push(Record {
                        time_ns: second as i64 * NS_PER_S + rng.below(NS_PER_S as u64) as i64,
                        volume: VolumeId(1),
                        op: Op::Read,
                        offset_bytes: NIGHTLY_BASE + k * NIGHTLY_READ,
                        size_bytes: NIGHTLY_READ,
                        response_ns: None,
                    });
                }
            }
            batch.sort_by_key(|r| r.time_ns);
            second += 1;
        })
    }
}

// ---------------------------------------------------------------------------------------------

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
fn poisson_volumes(
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
                    size_bytes: request_bytes,
                    response_ns: None,
                });
            }
        }
        batch.sort_by_key(|r| (r.time_ns, r.volume));
        second += 1;
    })
}

// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------

/// One Poisson ON-OFF request stream: during ON periods requests arrive at `rate_on_per_s` with
/// exponentially distributed sizes of mean `mean_request_bytes`, at random locations.
#[derive(Clone, Debug)]
pub struct Stream {
    pub rate_on_per_s: f64,
    pub mean_request_bytes: f64,
    pub read_fraction: f64,
}

impl Stream {
    /// The striping paper's large-request stream: 2 MB mean.
    pub fn large(rate_on_per_s: f64) -> Stream {
        Stream {
            rate_on_per_s,
            mean_request_bytes: 2e6,
            read_fraction: 1.0,
        }
    }
    /// The striping paper's small-request stream: 64 KB mean.
    pub fn small(rate_on_per_s: f64) -> Stream {
        Stream {
            rate_on_per_s,
            mean_request_bytes: 64e3,
            read_fraction: 1.0,
        }
    }
}

/// Pairs of ON-OFF streams (volumes `2i` and `2i + 1`). Each pair shares a cycle of an ON period
/// of mean `mean_on_s` (exponential) and an OFF period of the same length; the second stream's
/// ON period is shifted by `(1 − correlation) / 2` of the ON length, so correlation 1 means
/// synchronized ON periods, 0 half overlap and −1 mutually exclusive ones.
#[derive(Clone, Debug)]
pub struct OnOff {
    pub pairs: Vec<(Stream, Stream, f64)>,
    pub mean_on_s: f64,
    pub duration_s: f64,
    pub span_bytes: u64,
    pub seed: u64,
}

impl OnOff {
    pub fn volume_names(&self) -> Vec<String> {
        (0..self.pairs.len() * 2)
            .map(|v| format!("stream_{v}"))
            .collect()
    }

    /// The ON intervals (ns) of each stream.
    pub fn on_periods(&self) -> Vec<Vec<(f64, f64)>> {
        let mut out = Vec::new();
        for (p, (_, _, correlation)) in self.pairs.iter().enumerate() {
            assert!((-1.0..=1.0).contains(correlation), "correlation in [-1, 1]");
            let mut rng = SimRng::new(self.seed, 100 + p as u64);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let end = self.duration_s * 1e9;
            let mut t = rng.unit() * self.mean_on_s * 1e9;
            while t < end {
                let on = rng.exponential(self.mean_on_s * 1e9);
                let shift = (1.0 - correlation) / 2.0 * on;
                a.push((t, (t + on).min(end)));
                if t + shift < end {
                    b.push((t + shift, (t + shift + on).min(end)));
                }
                t += 2.0 * on;
            }
            out.push(a);
            out.push(b);
        }
        out
    }

    pub fn records(&self) -> impl Iterator<Item = Record> {
        let periods = self.on_periods();
        let streams: Vec<Stream> = self
            .pairs
            .iter()
            .flat_map(|(a, b, _)| [a.clone(), b.clone()])
            .collect();
        let span = self.span_bytes;
        let seed = self.seed;
        // One lazily advanced cursor per stream; the merge takes the earliest next arrival.
        let mut cursors: Vec<StreamCursor> = streams
            .into_iter()
            .zip(periods)
            .enumerate()
            .map(|(v, (stream, periods))| {
                StreamCursor::new(v as u32, stream, periods, SimRng::new(seed, v as u64))
            })
            .collect();
        std::iter::from_fn(move || {
            let next = cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.next_time().map(|t| (t, i)))
                .min_by(|a, b| a.0.total_cmp(&b.0))?;
            cursors[next.1].take(span)
        })
    }
}

struct StreamCursor {
    volume: u32,
    stream: Stream,
    periods: Vec<(f64, f64)>,
    period: usize,
    next: Option<f64>,
    rng: SimRng,
}

impl StreamCursor {
    fn new(volume: u32, stream: Stream, periods: Vec<(f64, f64)>, rng: SimRng) -> StreamCursor {
        let mut c = StreamCursor {
            volume,
            stream,
            periods,
            period: 0,
            next: None,
            rng,
        };
        c.next = c.periods.first().map(|p| p.0);
        c.advance();
        c
    }

    /// Moves `next` to the next arrival at or after it, inside an ON period.
    fn advance(&mut self) {
        while let Some(t) = self.next {
            let Some(&(start, end)) = self.periods.get(self.period) else {
                self.next = None;
                return;
            };
            let candidate = t.max(start) + self.rng.exponential(1e9 / self.stream.rate_on_per_s);
            if candidate < end {
                self.next = Some(candidate);
                return;
            }
            self.period += 1;
            self.next = self.periods.get(self.period).map(|p| p.0);
        }
    }

    fn next_time(&self) -> Option<f64> {
        self.next
    }

    fn take(&mut self, span: u64) -> Option<Record> {
        let t = self.next?;
        let size = ((self.rng.exponential(self.stream.mean_request_bytes) / 512.0)
            .ceil()
            .max(1.0) as u64
            * 512)
            .min(span);
        let offset = self.rng.below((span - size) / 512 + 1) * 512;
        let op = if self.rng.chance(self.stream.read_fraction) {
            Op::Read
        } else {
            Op::Write
        };
        let record = Record {
            time_ns: t as i64,
            volume: VolumeId(self.volume),
            op,
            offset_bytes: offset,
            size_bytes: size,
            response_ns: None,
        };
        // The next arrival starts from this one.
        self.next = Some(t);
        self.advance();
        Some(record)
    }
}

// ---------------------------------------------------------------------------------------------

/// Generated workloads are bounded so a mistyped parameter cannot exhaust the machine.
pub const GENERATED_VOLUMES_MAX: u32 = 4096;
pub const GENERATED_RATE_MAX_PER_S: f64 = 10_000_000.0;

/// Opens a generated workload from a specification such as
/// `gen:zipf:alpha=1,count=100000` or `gen:bursty:peak_to_mean=10`. Names: `zipf`, `diurnal`,
/// `bursty`, `onoff`, `exchange-like`; keys are the fields of each generator (sizes accept `64k`, `50g`).
pub fn open_spec(spec: &str) -> Result<Generated, String> {
    let body = spec
        .strip_prefix("gen:")
        .ok_or("a generator specification starts with gen:")?;
    let (name, params) = body.split_once(':').unwrap_or((body, ""));
    let mut kv: Vec<(String, String)> = Vec::new();
    for pair in params.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
        kv.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut take = |key: &str| {
        kv.iter()
            .position(|(k, _)| k == key)
            .map(|i| kv.remove(i).1)
    };
    // Every number parsed below is finite, so plain comparisons validate them.
    let num = |v: Option<String>, default: f64| -> Result<f64, String> {
        v.map_or(Ok(default), |s| match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(format!("{s:?} is not a finite number")),
        })
    };
    let size = |v: Option<String>, default: u64| -> Result<u64, String> {
        v.map_or(Ok(default), |s| crate::presets::parse_size(&s))
    };
    let generated = match name {
        "zipf" => {
            let d = Zipf::bonfire();
            let z = Zipf {
                count: num(take("count"), d.count as f64)? as u64,
                alpha: num(take("alpha"), d.alpha)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                rate_per_s: num(take("rate"), d.rate_per_s)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
            };
            if z.alpha <= 0.0 || z.alpha > 10.0 || z.rate_per_s <= 0.0 || z.span_bytes < 4096 {
                return Err("zipf needs 0 < alpha ≤ 10, rate > 0 and a span of at least 4k".into());
            }
            Generated::new(&["zipf".to_owned()], Box::new(z.records()))
        }
        "diurnal" => {
            let g = Diurnal {
                days: num(take("days"), 2.0)? as u64,
                mean_rate_per_s: num(take("rate"), 50.0)?,
                peak_to_trough: num(take("peak_to_trough"), 4.0)?,
                peak_hour: num(take("peak_hour"), 15.0)?,
                read_fraction: num(take("read_fraction"), 0.7)?,
                request_bytes: size(take("bs"), 64 * KIB)?,
                span_bytes: size(take("span"), 100 * GIB)?,
                seed: num(take("seed"), 1.0)? as u64,
            };
            if g.peak_to_trough < 1.0
                || g.mean_rate_per_s <= 0.0
                || g.mean_rate_per_s * g.peak_to_trough > GENERATED_RATE_MAX_PER_S
                || g.request_bytes == 0
                || g.span_bytes < g.request_bytes
                || !(0.0..=1.0).contains(&g.read_fraction)
            {
                return Err("diurnal needs peak_to_trough ≥ 1, rate > 0, 0 < bs ≤ span and read_fraction in [0, 1]".into());
            }
            Generated::new(&["diurnal".to_owned()], Box::new(g.records()))
        }
        "reaccess" => {
            let d = Reaccess::bonfire();
            let g = Reaccess {
                days: num(take("days"), d.days as f64)? as u64,
                rate_per_s: num(take("rate"), d.rate_per_s)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
            };
            g.validate()?;
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "exchange-like" => {
            let d = ExchangeLike::everest();
            let g = ExchangeLike {
                duration_s: num(take("duration_s"), d.duration_s as f64)? as u64,
                peak_rate_per_s: num(take("peak_rate"), d.peak_rate_per_s)?,
                peak_to_mean: num(take("peak_to_mean"), d.peak_to_mean)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
                ..d
            };
            g.validate()?;
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "bursty" => {
            let d = Bursty::everest();
            let g = Bursty {
                volumes: num(take("volumes"), d.volumes as f64)? as u32,
                duration_s: num(take("duration_s"), d.duration_s as f64)? as u64,
                base_rate_per_s: num(take("rate"), d.base_rate_per_s)?,
                peaks: num(take("peaks"), d.peaks as f64)? as u32,
                peak_s: num(take("peak_s"), d.peak_s as f64)? as u64,
                peak_to_mean: num(take("peak_to_mean"), d.peak_to_mean)?,
                peak_read_fraction: num(take("peak_read_fraction"), d.peak_read_fraction)?,
                base_read_fraction: num(take("read_fraction"), d.base_read_fraction)?,
                concentration: num(take("concentration"), d.concentration)?,
                span_bytes: size(take("span"), d.span_bytes)?,
                seed: num(take("seed"), d.seed as f64)? as u64,
            };
            if g.volumes == 0
                || g.peak_s == 0
                || g.duration_s == 0
                || g.span_bytes < 8 * KIB
                || !(0.0..=1.0).contains(&g.concentration)
            {
                return Err("bursty needs volumes > 0, peak_s > 0, duration_s > 0, span ≥ 8k and concentration in [0, 1]".into());
            }
            if g.base_rate_per_s <= 0.0
                || g.peak_to_mean < 1.0
                || !(0.0..=1.0).contains(&g.peak_read_fraction)
                || !(0.0..=1.0).contains(&g.base_read_fraction)
            {
                return Err(
                    "bursty needs rate > 0, peak_to_mean ≥ 1 and read fractions in [0, 1]".into(),
                );
            }
            if g.volumes > GENERATED_VOLUMES_MAX
                || g.base_rate_per_s * g.volumes as f64 * g.peak_to_mean > GENERATED_RATE_MAX_PER_S
            {
                return Err(format!("bursty: at most {GENERATED_VOLUMES_MAX} volumes and {GENERATED_RATE_MAX_PER_S} requests/s at peak"));
            }
            let d = (g.peak_schedule().len() as u64 * g.peak_s) as f64 / g.duration_s as f64;
            if g.peak_to_mean * d >= 1.0 {
                return Err(format!(
                    "peaks covering {:.1} % of the time cannot reach a peak-to-mean of {}: use fewer or shorter peaks",
                    100.0 * d,
                    g.peak_to_mean
                ));
            }
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        "onoff" => {
            let pairs = num(take("pairs"), 2.0)? as usize;
            let correlation = num(take("correlation"), 0.0)?;
            if !(-1.0..=1.0).contains(&correlation)
                || pairs == 0
                || pairs > GENERATED_VOLUMES_MAX as usize / 2
            {
                return Err(format!(
                    "onoff needs 1 to {} pairs and correlation in [-1, 1]",
                    GENERATED_VOLUMES_MAX / 2
                ));
            }
            let large_rate = num(take("large_rate"), 20.0)?;
            let small_rate = num(take("small_rate"), 100.0)?;
            if !(large_rate > 0.0 && small_rate > 0.0)
                || (large_rate + small_rate) * pairs as f64 > GENERATED_RATE_MAX_PER_S
            {
                return Err(format!("onoff needs positive rates, at most {GENERATED_RATE_MAX_PER_S} requests/s in all"));
            }
            let g = OnOff {
                pairs: (0..pairs)
                    .map(|_| {
                        (
                            Stream::large(large_rate),
                            Stream::small(small_rate),
                            correlation,
                        )
                    })
                    .collect(),
                mean_on_s: num(take("mean_on_s"), 10.0)?,
                duration_s: num(take("duration_s"), 600.0)?,
                span_bytes: size(take("span"), 64 * GIB)?,
                seed: num(take("seed"), 1.0)? as u64,
            };
            // ON periods are laid out up front: bound their number.
            if !(g.mean_on_s > 0.0 && g.duration_s > 0.0)
                || g.duration_s / g.mean_on_s > 1e6
                || g.span_bytes < 2 * 1024 * 1024
            {
                return Err(
                    "onoff needs mean_on_s > 0, 0 < duration_s ≤ 10^6 × mean_on_s and a span of at least 2m".into(),
                );
            }
            Generated::new(&g.volume_names(), Box::new(g.records()))
        }
        other => {
            return Err(format!(
                "unknown generator {other:?}; one of zipf, diurnal, bursty, onoff, exchange-like, reaccess"
            ))
        }
    };
    if let Some((k, _)) = kv.first() {
        return Err(format!("unknown parameter {k:?} for gen:{name}"));
    }
    Ok(generated)
}
