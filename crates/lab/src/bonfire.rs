//! Bonfire §4.3 and §6.1 on the cache simulator: a multi-day trace split into days, each day's
//! new cache warmed from the day before, over the Table 2 parameter grid.
//!
//! Per volume (the paper's unit is a volume's trace) and per day d ≥ 2, three schemes are
//! compared on day d's requests: *always-warm* (one cache running since the trace start),
//! *cold* (created empty at the start of day d) and *warmed* (created at the start of day d and
//! pre-loaded by a warm-up algorithm from day d − 1's requests). Cache and warm-up sizes are
//! percentages of the volume's working set (distinct 4 KiB blocks over the whole trace).
//!
//! Reported, as in the paper:
//! - **Table 3**: for every grid point, the best algorithm of each (volume, day), and the
//!   median over those of T_preload, cold and Bonfire T_converge, the improvement, and the
//!   server load reduction of cold, always-warm and Bonfire over cold's T_converge;
//! - **Figures 6–7**: every algorithm at the middle setting on one day;
//! - **Figure 8**: the algorithm the decision tree recommends from the volume's reaccess classes,
//!   next to the one measured best;
//! - **daily reaccesses** (§4.3.3): for volumes with a daily pattern, the middle setting again
//!   with days starting at the hour of the daily reaccesses;
//! - **Figure 10** ([`zipf`]): 5 M 4 KiB Zipf reads, caches created half-way, hit rate over I/Os.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use cordillera_sim::workload::Zipf;
use cordillera_trace::reaccess::{ReaccessBuilder, VolumeReaccess};
use cordillera_trace::record::{Record, TraceInfo, VolumeId, VolumeTable};
use cordillera_types::units::{MIB, NS_PER_DAY, NS_PER_HOUR, NS_PER_S};
use cordillera_types::Op;
use cordillera_warmup::algorithms::{self, Algorithm, ALGORITHMS};
use cordillera_warmup::cache::Lru;
use cordillera_warmup::schemes::{self, Interval, Scheme, Timeline};
use cordillera_warmup::sim::BLOCK_BYTES;
use serde::Serialize;

use crate::bonfire_overheads::{self, Overhead, OverheadOptions};

/// One point of the grid that Figures 6–7 use (the paper's middle setting).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Setting {
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub th_v: f64,
    pub th_n: f64,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Day length (the paper's: 24 h).
    pub day_ns: i64,
    /// Days start at this hour of the trace's clock (wall clock when the trace has one);
    /// `None`: at the first request, as the paper's MSR days (5 PM).
    pub day_start_hour: Option<u32>,
    /// Hit rates are counted per interval; it must divide the day.
    pub interval_ns: i64,
    pub cache_pcts: Vec<f64>,
    pub warmup_pcts: Vec<f64>,
    pub region_bytes: Vec<u64>,
    pub th_vs: Vec<f64>,
    pub th_ns: Vec<f64>,
    pub middle: Setting,
    /// The day of Figures 6–7, counted from 1 (the paper's: day five); the last when `None` or
    /// past the end.
    pub figure_day: Option<usize>,
    pub preload_mb_per_s: f64,
    /// Disk read-ahead of all caches (0: none; §4.3.2's is 128 KiB).
    pub readahead_bytes: u64,
    /// Seed of Random-K.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Table 4: staging buffers and disk models.
    pub overhead: OverheadOptions,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            day_ns: NS_PER_DAY,
            day_start_hour: None,
            interval_ns: 600 * NS_PER_S,
            cache_pcts: vec![25.0, 50.0, 75.0, 100.0],
            warmup_pcts: vec![5.0, 10.0, 25.0],
            region_bytes: vec![4096, MIB],
            th_vs: vec![0.7, 0.8, 0.9],
            th_ns: vec![0.01, 0.03, 0.05],
            middle: Setting {
                cache_pct: 50.0,
                warmup_pct: 10.0,
                region_bytes: MIB,
                th_v: 0.8,
                th_n: 0.03,
            },
            figure_day: Some(5),
            preload_mb_per_s: 100.0,
            readahead_bytes: 0,
            seed: 1,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            overhead: OverheadOptions::default(),
        }
    }
}

impl Options {
    pub fn validate(&self) -> Result<(), String> {
        if self.day_ns <= 0 || self.interval_ns <= 0 || self.day_ns % self.interval_ns != 0 {
            return Err("the interval must be positive and divide the day".into());
        }
        if self.day_start_hour.is_some_and(|h| h >= 24) {
            return Err("the day start hour must be 0–23".into());
        }
        if self.day_start_hour.is_some() && self.day_ns != NS_PER_DAY {
            return Err("a day start hour needs 24-hour days".into());
        }
        let pcts = self.cache_pcts.iter().chain(&self.warmup_pcts);
        if self.cache_pcts.is_empty()
            || self.warmup_pcts.is_empty()
            || pcts.clone().any(|p| !(*p > 0.0 && *p <= 1000.0))
        {
            return Err("cache and warm-up sizes must be percentages in (0, 1000]".into());
        }
        if self.region_bytes.is_empty()
            || self
                .region_bytes
                .iter()
                .any(|r| *r == 0 || !r.is_multiple_of(BLOCK_BYTES))
        {
            return Err("regions must be positive multiples of 4 KiB".into());
        }
        if self.th_vs.is_empty()
            || self.th_ns.is_empty()
            || self.th_vs.iter().any(|v| !(*v > 0.0 && *v <= 1.0))
            || self.th_ns.iter().any(|n| !(*n >= 0.0 && *n < 1.0))
        {
            return Err("Equation 1 needs 0 < Th_V ≤ 1 and 0 ≤ Th_N < 1".into());
        }
        let m = &self.middle;
        if !self.cache_pcts.contains(&m.cache_pct)
            || !self.warmup_pcts.contains(&m.warmup_pct)
            || !self.region_bytes.contains(&m.region_bytes)
            || !self.th_vs.contains(&m.th_v)
            || !self.th_ns.contains(&m.th_n)
        {
            return Err("the middle setting must be a point of the grid".into());
        }
        if self.preload_mb_per_s.is_nan() || self.preload_mb_per_s <= 0.0 || self.threads == 0 {
            return Err("the pre-load bandwidth and the threads must be positive".into());
        }
        Ok(())
    }

    fn intervals_per_day(&self) -> usize {
        (self.day_ns / self.interval_ns) as usize
    }
}

/// A volume of the trace, as the lab saw it.
#[derive(Clone, Debug, Serialize)]
pub struct VolumeSummary {
    pub volume: String,
    pub requests: usize,
    pub read_requests: usize,
    pub working_set_blocks: u64,
    pub days: usize,
    /// Why the volume was left out, if it was.
    pub skipped: Option<String>,
    pub reaccess: Option<ReaccessClasses>,
    pub recommendation: Option<Recommendation>,
    /// The algorithm best (ties included) at the middle setting on more days than any other,
    /// and on how many of the warmed days; `None` when the top is shared.
    pub measured_best: Option<Algorithm>,
    pub measured_best_days: usize,
    pub warmed_days: usize,
}

/// The reaccess figures the decision tree reads (Bonfire §3).
#[derive(Clone, Debug, Serialize)]
pub struct ReaccessClasses {
    pub reaccess_pct: Option<f64>,
    /// Percentages of the reaccessed blocks (classes overlap; Figure 1a).
    pub hourly_block_pct: f64,
    pub daily_block_pct: f64,
    pub other_block_pct: f64,
    /// Percentage of reaccesses within 10 MiB of reuse distance (Figure 3).
    pub reuse_under_10mib_pct: f64,
    /// The hour (of the trace's clock) with the most daily reaccesses.
    pub daily_peak_hour: Option<u32>,
}

/// Figure 8's choice and the branch that led to it.
#[derive(Clone, Debug, Serialize)]
pub struct Recommendation {
    pub algorithm: Algorithm,
    pub because: String,
    /// For a daily pattern: start the new cache just before this hour.
    pub start_at_hour: Option<u32>,
}

/// A block is "daily" in the decision tree's sense when at least this percentage of reaccessed
/// blocks show the daily class and it is not less than the hourly class.
pub const DAILY_PATTERN_MIN_PCT: f64 = 10.0;

impl ReaccessClasses {
    pub fn from_report(r: &VolumeReaccess) -> ReaccessClasses {
        let class = |name: &str| {
            r.classes
                .iter()
                .find(|c| c.class == name)
                .and_then(|c| c.block_pct)
                .unwrap_or(0.0)
        };
        let reaccesses: u64 = r.reuse_distance.iter().map(|b| b.reaccesses).sum();
        let near = r.reuse_distance.first().map_or(0, |b| b.reaccesses);
        let peak = (0..24).max_by_key(|h| (r.daily_by_hour[*h], std::cmp::Reverse(*h)));
        ReaccessClasses {
            reaccess_pct: r.reaccess_pct,
            hourly_block_pct: class("hourly"),
            daily_block_pct: class("daily"),
            other_block_pct: class("other"),
            reuse_under_10mib_pct: if reaccesses > 0 {
                100.0 * near as f64 / reaccesses as f64
            } else {
                0.0
            },
            daily_peak_hour: peak.filter(|h| r.daily_by_hour[*h] > 0).map(|h| h as u32),
        }
    }

    /// The decision tree of Figure 8 (Bonfire §4.3.3):
    /// - a known daily pattern → First-K, with the cache started just before the daily
    ///   reaccesses (the wall-clock box of the figure);
    /// - mostly hourly reaccesses → Last-K;
    /// - mostly other reaccesses → Last-K when reuse distances are small (most within 10 MiB);
    ///   when they are big, First-K for small (4 KiB) regions and Last-K (or Top-K) for big ones.
    pub fn recommend(&self, region_bytes: u64) -> Recommendation {
        if self.daily_block_pct >= DAILY_PATTERN_MIN_PCT
            && self.daily_block_pct >= self.hourly_block_pct
        {
            return Recommendation {
                algorithm: Algorithm::FirstK,
                because: format!(
                    "daily pattern ({:.0} % of reaccessed blocks daily, {:.0} % hourly): start the cache just before the daily reaccesses",
                    self.daily_block_pct, self.hourly_block_pct
                ),
                start_at_hour: self.daily_peak_hour,
            };
        }
        if self.hourly_block_pct >= self.other_block_pct {
            return Recommendation {
                algorithm: Algorithm::LastK,
                because: format!(
                    "hourly reaccesses dominate ({:.0} % of reaccessed blocks)",
                    self.hourly_block_pct
                ),
                start_at_hour: None,
            };
        }
        let (algorithm, because) = if self.reuse_under_10mib_pct >= 50.0 {
            (Algorithm::LastK, "other reaccesses, small reuse distance")
        } else if region_bytes <= BLOCK_BYTES {
            (
                Algorithm::FirstK,
                "other reaccesses, big reuse distance, small regions",
            )
        } else {
            (
                Algorithm::LastK,
                "other reaccesses, big reuse distance, big regions (Last-K or Top-K)",
            )
        };
        Recommendation {
            algorithm,
            because: format!(
                "{because} ({:.0} % of reaccesses within 10 MiB)",
                self.reuse_under_10mib_pct
            ),
            start_at_hour: None,
        }
    }
}

/// One (volume, day, grid point, algorithm).
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub volume: String,
    /// Counted from 1.
    pub day: usize,
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub algorithm: Algorithm,
    pub th_v: f64,
    pub th_n: f64,
    pub preload_blocks: u64,
    pub preload_s: f64,
    pub cold_converge_h: f64,
    pub warmed_converge_h: f64,
    /// (cold − (warmed + pre-load)) ÷ cold, %; `None` when cold converges at once.
    pub converge_improvement_pct: Option<f64>,
    /// Equation 2 over cold's T_converge, %; `None` when it is empty or has no reads.
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub load_reduction_warmed_pct: Option<f64>,
}

/// A Table 3 row: medians over (volume, day) of each one's best algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub th_v: f64,
    pub th_n: f64,
    /// (volume, day) pairs.
    pub cases: usize,
    pub preload_min: Option<f64>,
    pub cold_converge_h: Option<f64>,
    pub bonfire_converge_h: Option<f64>,
    pub converge_improvement_pct: Option<f64>,
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub load_reduction_bonfire_pct: Option<f64>,
    /// (Bonfire − cold) ÷ cold, %.
    pub load_reduction_improvement_pct: Option<f64>,
}

/// Figures 6–7 for one volume on one day, at the middle setting.
#[derive(Clone, Debug, Serialize)]
pub struct FigureDay {
    pub volume: String,
    pub day: usize,
    pub cold_converge_h: f64,
    pub load_reduction_cold_pct: Option<f64>,
    pub load_reduction_always_pct: Option<f64>,
    pub algorithms: Vec<AlgorithmResult>,
    /// Per interval of the day: always-warm, cold, then each algorithm's read hit rate.
    pub hit_rates: Vec<Vec<Option<f64>>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmResult {
    pub algorithm: Algorithm,
    pub converge_h: f64,
    pub load_reduction_pct: Option<f64>,
}

/// How the algorithms fared at the middle setting over every warmed (volume, day).
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub cases: usize,
    pub algorithms: Vec<AlgorithmTally>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AlgorithmTally {
    pub algorithm: Algorithm,
    /// Cases where its T_converge is the smallest (ties count for every algorithm tied).
    pub best_converge: usize,
    /// Cases where its load reduction is the largest (ties likewise).
    pub best_load: usize,
    /// Cases where it converges strictly sooner than cold.
    pub converges_sooner_than_cold: usize,
    /// Cases where it converges no later than cold.
    pub converges_no_later_than_cold: usize,
    /// Cases where its load reduction exceeds cold's.
    pub reduces_more_load_than_cold: usize,
    pub median_converge_h: Option<f64>,
    pub median_load_reduction_pct: Option<f64>,
}

/// §4.3.3: a daily-pattern volume with days starting at its daily reaccess hour.
#[derive(Clone, Debug, Serialize)]
pub struct ShiftedDaily {
    pub volume: String,
    pub day_start_hour: u32,
    pub headline: Headline,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub source: String,
    pub day_s: f64,
    pub interval_s: f64,
    pub day_start_hour: Option<u32>,
    pub middle: Setting,
    pub figure_day: Option<usize>,
    pub preload_mb_per_s: f64,
    pub readahead_bytes: u64,
    pub volumes: Vec<VolumeSummary>,
    /// Table 3 over the whole grid.
    pub table: Vec<TableRow>,
    pub figures: Vec<FigureDay>,
    pub headline: Headline,
    pub shifted_daily: Vec<ShiftedDaily>,
    /// Table 4 per volume: monitoring the day before the figure day, pre-loading Last-K of
    /// 4 KiB blocks of the middle warm-up size.
    pub overheads: Vec<Overhead>,
    #[serde(skip)]
    pub cases: Vec<Case>,
}

/// The simulated series of one (volume, day, cache size).
struct DaySeries {
    volume: usize,
    day: usize,
    cache_pct: f64,
    intervals: usize,
    always: Vec<Interval>,
    cold: Vec<Interval>,
    /// (warm-up %, region, algorithm, pre-loaded blocks, series)
    warmed: Vec<(f64, u64, Algorithm, u64, Vec<Interval>)>,
}

/// A volume's requests in time order and its days.
struct VolumeDays {
    name: String,
    records: Vec<Record>,
    wss: u64,
    origin_ns: i64,
    /// Record index where each day starts, and one past the end.
    bounds: Vec<usize>,
}

impl VolumeDays {
    fn new(name: String, mut records: Vec<Record>, origin_ns: i64, day_ns: i64) -> VolumeDays {
        records.sort_by_key(|r| r.time_ns);
        let wss = algorithms::working_set_blocks(&records);
        let last = records.last().map_or(origin_ns, |r| r.time_ns);
        let days = ((last - origin_ns) / day_ns + 1).max(1) as usize;
        let bounds = (0..=days)
            .map(|d| records.partition_point(|r| r.time_ns < origin_ns + d as i64 * day_ns))
            .collect();
        VolumeDays {
            name,
            records,
            wss,
            origin_ns,
            bounds,
        }
    }

    fn days(&self) -> usize {
        self.bounds.len() - 1
    }

    fn day(&self, d: usize) -> &[Record] {
        &self.records[self.bounds[d]..self.bounds[d + 1]]
    }

    fn day_start(&self, d: usize, day_ns: i64) -> i64 {
        self.origin_ns + d as i64 * day_ns
    }

    fn blocks(&self, pct: f64) -> u64 {
        ((self.wss as f64 * pct / 100.0).round() as u64).max(1)
    }
}

/// The grid one simulation pass covers.
struct Grid<'a> {
    cache_pcts: &'a [f64],
    warmup_pcts: &'a [f64],
    regions: &'a [u64],
}

/// Runs every (volume, cache size) of `grid` on `threads` threads.
fn simulate(
    volumes: &[VolumeDays],
    grid: &Grid,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Vec<DaySeries> {
    let tasks: Vec<(usize, f64)> = (0..volumes.len())
        .flat_map(|v| grid.cache_pcts.iter().map(move |c| (v, *c)))
        .filter(|(v, _)| volumes[*v].days() >= 2)
        .collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..o.threads.min(tasks.len()).max(1) {
            s.spawn(|| loop {
                let t = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(v, cache_pct)) = tasks.get(t) else {
                    break;
                };
                let series = simulate_one(&volumes[v], v, cache_pct, grid, o);
                out.lock().expect("no panics").extend(series);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(&format!(
                    "{} at cache {cache_pct} % simulated ({n}/{})",
                    volumes[v].name,
                    tasks.len()
                ));
            });
        }
    });
    let mut out = out.into_inner().expect("no panics");
    out.sort_by(|a, b| {
        (a.volume, a.day)
            .cmp(&(b.volume, b.day))
            .then(a.cache_pct.total_cmp(&b.cache_pct))
    });
    out
}

fn simulate_one(
    vol: &VolumeDays,
    v: usize,
    cache_pct: f64,
    grid: &Grid,
    o: &Options,
) -> Vec<DaySeries> {
    let capacity = vol.blocks(cache_pct) as usize;
    let per_day = o.intervals_per_day();
    let timeline = |start_ns| Timeline {
        start_ns,
        interval_ns: o.interval_ns,
        readahead_bytes: o.readahead_bytes,
    };
    let mut always = Scheme::new(Lru::new(capacity));
    always.run(&vol.records, timeline(vol.origin_ns));
    let last_ns = vol.records.last().map_or(vol.origin_ns, |r| r.time_ns);
    let mut out = Vec::new();
    for d in 1..vol.days() {
        let start = vol.day_start(d, o.day_ns);
        // The intervals this day covers (the last day may end early).
        let intervals = (((last_ns - start) / o.interval_ns) as usize + 1).min(per_day);
        let fit = |mut s: Vec<Interval>| {
            s.resize(intervals, Interval::default());
            s
        };
        let always_day: Vec<Interval> = (0..intervals)
            .map(|i| {
                always
                    .intervals
                    .get(d * per_day + i)
                    .copied()
                    .unwrap_or_default()
            })
            .collect();
        let mut cold = Scheme::new(Lru::new(capacity));
        cold.run(vol.day(d), timeline(start));
        let mut warmed = Vec::new();
        for &warmup_pct in grid.warmup_pcts {
            let warmup_bytes = vol.blocks(warmup_pct) * BLOCK_BYTES;
            for &region in grid.regions {
                for alg in ALGORITHMS {
                    let preload =
                        algorithms::select(vol.day(d - 1), alg, region, warmup_bytes, o.seed);
                    let mut s = Scheme::new(Lru::new(capacity));
                    s.preload(preload.iter().copied());
                    s.run(vol.day(d), timeline(start));
                    warmed.push((
                        warmup_pct,
                        region,
                        alg,
                        preload.len() as u64,
                        fit(s.intervals),
                    ));
                }
            }
        }
        out.push(DaySeries {
            volume: v,
            day: d,
            cache_pct,
            intervals,
            always: always_day,
            cold: fit(cold.intervals),
            warmed,
        });
    }
    out
}

fn pct(x: Option<f64>) -> Option<f64> {
    x.map(|x| x * 100.0)
}

/// Cases of every series at every threshold pair.
fn cases(series: &[DaySeries], volumes: &[VolumeDays], o: &Options) -> Vec<Case> {
    let hours = |intervals: usize| intervals as f64 * o.interval_ns as f64 / NS_PER_HOUR as f64;
    let mut out = Vec::new();
    for s in series {
        for &th_v in &o.th_vs {
            for &th_n in &o.th_ns {
                let cold_t = schemes::convergence(&s.cold, &s.always, th_v, th_n);
                let cold_h = hours(cold_t);
                let always_slr = pct(schemes::server_load_reduction(&s.always, cold_t));
                let cold_slr = pct(schemes::server_load_reduction(&s.cold, cold_t));
                for (warmup_pct, region, alg, blocks, w) in &s.warmed {
                    let warmed_h = hours(schemes::convergence(w, &s.always, th_v, th_n));
                    let preload_s = (*blocks * BLOCK_BYTES) as f64 / (o.preload_mb_per_s * 1e6);
                    out.push(Case {
                        volume: volumes[s.volume].name.clone(),
                        day: s.day + 1,
                        cache_pct: s.cache_pct,
                        warmup_pct: *warmup_pct,
                        region_bytes: *region,
                        algorithm: *alg,
                        th_v,
                        th_n,
                        preload_blocks: *blocks,
                        preload_s,
                        cold_converge_h: cold_h,
                        warmed_converge_h: warmed_h,
                        converge_improvement_pct: (cold_h > 0.0)
                            .then(|| 100.0 * (cold_h - (warmed_h + preload_s / 3600.0)) / cold_h),
                        load_reduction_cold_pct: cold_slr,
                        load_reduction_always_pct: always_slr,
                        load_reduction_warmed_pct: pct(schemes::server_load_reduction(w, cold_t)),
                    });
                }
            }
        }
    }
    out
}

/// The median of the values present.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().flatten().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Orders cases best first: sooner convergence, then more load reduction.
fn better(a: &Case, b: &Case) -> std::cmp::Ordering {
    a.warmed_converge_h.total_cmp(&b.warmed_converge_h).then(
        b.load_reduction_warmed_pct
            .unwrap_or(-1.0)
            .total_cmp(&a.load_reduction_warmed_pct.unwrap_or(-1.0)),
    )
}

fn same_point(c: &Case, cache: f64, warmup: f64, region: u64, th_v: f64, th_n: f64) -> bool {
    c.cache_pct == cache
        && c.warmup_pct == warmup
        && c.region_bytes == region
        && c.th_v == th_v
        && c.th_n == th_n
}

/// Groups the cases of one grid point by (volume, day).
fn by_volume_day<'a>(cases: impl Iterator<Item = &'a Case>) -> Vec<Vec<&'a Case>> {
    let mut groups: Vec<Vec<&Case>> = Vec::new();
    for c in cases {
        match groups
            .iter_mut()
            .find(|g| g[0].volume == c.volume && g[0].day == c.day)
        {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    groups
}

fn table(cases: &[Case], o: &Options) -> Vec<TableRow> {
    let mut rows = Vec::new();
    for &cache in &o.cache_pcts {
        for &warmup in &o.warmup_pcts {
            for &region in &o.region_bytes {
                for &th_v in &o.th_vs {
                    for &th_n in &o.th_ns {
                        let groups = by_volume_day(
                            cases
                                .iter()
                                .filter(|c| same_point(c, cache, warmup, region, th_v, th_n)),
                        );
                        let best: Vec<&Case> = groups
                            .iter()
                            .map(|g| *g.iter().min_by(|a, b| better(a, b)).expect("not empty"))
                            .collect();
                        rows.push(TableRow {
                            cache_pct: cache,
                            warmup_pct: warmup,
                            region_bytes: region,
                            th_v,
                            th_n,
                            cases: best.len(),
                            preload_min: median(best.iter().map(|c| Some(c.preload_s / 60.0))),
                            cold_converge_h: median(best.iter().map(|c| Some(c.cold_converge_h))),
                            bonfire_converge_h: median(
                                best.iter().map(|c| Some(c.warmed_converge_h)),
                            ),
                            converge_improvement_pct: median(
                                best.iter().map(|c| c.converge_improvement_pct),
                            ),
                            load_reduction_cold_pct: median(
                                best.iter().map(|c| c.load_reduction_cold_pct),
                            ),
                            load_reduction_always_pct: median(
                                best.iter().map(|c| c.load_reduction_always_pct),
                            ),
                            load_reduction_bonfire_pct: median(
                                best.iter().map(|c| c.load_reduction_warmed_pct),
                            ),
                            load_reduction_improvement_pct: median(best.iter().map(|c| {
                                match (c.load_reduction_warmed_pct, c.load_reduction_cold_pct) {
                                    (Some(w), Some(k)) if k > 0.0 => Some(100.0 * (w - k) / k),
                                    _ => None,
                                }
                            })),
                        });
                    }
                }
            }
        }
    }
    rows
}

fn headline<'a>(cases: impl Iterator<Item = &'a Case>) -> Headline {
    let groups = by_volume_day(cases);
    let algorithms = ALGORITHMS
        .iter()
        .map(|&alg| {
            let mine: Vec<(&Vec<&Case>, &Case)> = groups
                .iter()
                .filter_map(|g| g.iter().find(|c| c.algorithm == alg).map(|c| (g, *c)))
                .collect();
            let count = |f: &dyn Fn(&Vec<&Case>, &Case) -> bool| {
                mine.iter().filter(|(g, c)| f(g, c)).count()
            };
            AlgorithmTally {
                algorithm: alg,
                best_converge: count(&|g, c| {
                    g.iter().all(|o| c.warmed_converge_h <= o.warmed_converge_h)
                }),
                best_load: count(&|g, c| {
                    g.iter().all(|o| {
                        c.load_reduction_warmed_pct.unwrap_or(-1.0)
                            >= o.load_reduction_warmed_pct.unwrap_or(-1.0)
                    })
                }),
                converges_sooner_than_cold: count(&|_, c| c.warmed_converge_h < c.cold_converge_h),
                converges_no_later_than_cold: count(&|_, c| {
                    c.warmed_converge_h <= c.cold_converge_h
                }),
                reduces_more_load_than_cold: count(&|_, c| {
                    matches!(
                        (c.load_reduction_warmed_pct, c.load_reduction_cold_pct),
                        (Some(w), Some(k)) if w > k
                    )
                }),
                median_converge_h: median(mine.iter().map(|(_, c)| Some(c.warmed_converge_h))),
                median_load_reduction_pct: median(
                    mine.iter().map(|(_, c)| c.load_reduction_warmed_pct),
                ),
            }
        })
        .collect();
    Headline {
        cases: groups.len(),
        algorithms,
    }
}

fn at_middle<'a>(cases: &'a [Case], m: &'a Setting) -> impl Iterator<Item = &'a Case> + 'a {
    cases
        .iter()
        .filter(move |c| same_point(c, m.cache_pct, m.warmup_pct, m.region_bytes, m.th_v, m.th_n))
}

/// Where days start: the first request, or the latest `hour`:00 of the trace's clock at or
/// before it.
fn origin(first_ns: i64, clock_origin_ns: i64, hour: Option<u32>, day_ns: i64) -> i64 {
    match hour {
        None => first_ns,
        Some(h) => {
            let clock = clock_origin_ns + first_ns;
            let since = (clock - h as i64 * NS_PER_HOUR).rem_euclid(day_ns);
            first_ns - since
        }
    }
}

/// Splits the trace by volume (records of volumes without a name in `names` keep their index).
fn split_volumes(records: Vec<Record>, names: &VolumeTable) -> Vec<(String, Vec<Record>)> {
    let mut by: Vec<Vec<Record>> = Vec::new();
    for r in records {
        let i = r.volume.index();
        if by.len() <= i {
            by.resize_with(i + 1, Vec::new);
        }
        by[i].push(r);
    }
    by.into_iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .map(|(i, r)| (names.name(VolumeId(i as u32)).to_owned(), r))
        .collect()
}

/// Runs the lab on a trace held in memory.
pub fn run(
    source: &str,
    records: Vec<Record>,
    names: &VolumeTable,
    info: &TraceInfo,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, String> {
    o.validate()?;
    if records.is_empty() {
        return Err("the trace has no requests".into());
    }
    if !info.has_time {
        return Err("the trace has no timestamps, so it cannot be split into days".into());
    }
    let mut reaccess = ReaccessBuilder::new(0);
    for r in &records {
        reaccess.add(r, info);
    }
    let reaccess = reaccess.finish(names, info);
    let clock_origin = info.origin_unix_ns.unwrap_or(0);
    let mut summaries = Vec::new();
    let mut volumes = Vec::new();
    for (name, recs) in split_volumes(records, names) {
        let first = recs.iter().map(|r| r.time_ns).min().expect("not empty");
        let reads = recs.iter().filter(|r| r.op == Op::Read).count();
        let vol = VolumeDays::new(
            name.clone(),
            recs,
            origin(first, clock_origin, o.day_start_hour, o.day_ns),
            o.day_ns,
        );
        let classes = reaccess
            .volumes
            .iter()
            .find(|v| v.volume == name)
            .map(ReaccessClasses::from_report);
        let skipped = if reads == 0 {
            Some("no reads: read hit rates are undefined".to_owned())
        } else if vol.days() < 2 {
            Some("shorter than two days".to_owned())
        } else {
            None
        };
        summaries.push(VolumeSummary {
            volume: name,
            requests: vol.records.len(),
            read_requests: reads,
            working_set_blocks: vol.wss,
            days: vol.days(),
            skipped: skipped.clone(),
            recommendation: classes.as_ref().map(|c| c.recommend(o.middle.region_bytes)),
            reaccess: classes,
            measured_best: None,
            measured_best_days: 0,
            warmed_days: 0,
        });
        if skipped.is_none() {
            volumes.push(vol);
        }
    }
    if volumes.is_empty() {
        return Err(
            "no volume has reads over at least two days (Bonfire warms day d from day d − 1)"
                .into(),
        );
    }
    progress(&format!(
        "{} volume(s), {} grid points × {} algorithms per day",
        volumes.len(),
        o.cache_pcts.len() * o.warmup_pcts.len() * o.region_bytes.len(),
        ALGORITHMS.len()
    ));
    let grid = Grid {
        cache_pcts: &o.cache_pcts,
        warmup_pcts: &o.warmup_pcts,
        regions: &o.region_bytes,
    };
    let series = simulate(&volumes, &grid, o, progress);
    let cases = cases(&series, &volumes, o);
    let m = &o.middle;
    // Figures 6–7: each volume's chosen day at the middle setting.
    let mut figures = Vec::new();
    for (v, vol) in volumes.iter().enumerate() {
        let last = vol.days();
        let day = o.figure_day.map_or(last, |d| d.clamp(2, last));
        let Some(s) = series
            .iter()
            .find(|s| s.volume == v && s.day + 1 == day && s.cache_pct == m.cache_pct)
        else {
            continue;
        };
        let cold_t = schemes::convergence(&s.cold, &s.always, m.th_v, m.th_n);
        let hours = |i: usize| i as f64 * o.interval_ns as f64 / NS_PER_HOUR as f64;
        let picked: Vec<_> = s
            .warmed
            .iter()
            .filter(|w| w.0 == m.warmup_pct && w.1 == m.region_bytes)
            .collect();
        figures.push(FigureDay {
            volume: vol.name.clone(),
            day,
            cold_converge_h: hours(cold_t),
            load_reduction_cold_pct: pct(schemes::server_load_reduction(&s.cold, cold_t)),
            load_reduction_always_pct: pct(schemes::server_load_reduction(&s.always, cold_t)),
            algorithms: picked
                .iter()
                .map(|w| AlgorithmResult {
                    algorithm: w.2,
                    converge_h: hours(schemes::convergence(&w.4, &s.always, m.th_v, m.th_n)),
                    load_reduction_pct: pct(schemes::server_load_reduction(&w.4, cold_t)),
                })
                .collect(),
            hit_rates: (0..s.intervals)
                .map(|i| {
                    let mut row = vec![s.always[i].hit_rate(), s.cold[i].hit_rate()];
                    row.extend(picked.iter().map(|w| w.4[i].hit_rate()));
                    row
                })
                .collect(),
        });
    }
    // Table 4: each volume's monitoring of the day before its figure day.
    let mut overheads = Vec::new();
    for vol in &volumes {
        let day = o.figure_day.map_or(vol.days(), |d| d.clamp(2, vol.days()));
        let window = vol.day(day - 2);
        let warmup = algorithms::select(
            window,
            Algorithm::LastK,
            BLOCK_BYTES,
            vol.blocks(m.warmup_pct) * BLOCK_BYTES,
            o.seed,
        );
        let name = format!("{} day {}", vol.name, day - 1);
        overheads.push(bonfire_overheads::measure(
            &name,
            window,
            o.day_ns as f64 / 1e9,
            &warmup,
            &o.overhead,
        )?);
        progress(&format!("overheads of {name} measured"));
    }
    // The measured best algorithm per volume at the middle setting.
    for summary in summaries.iter_mut().filter(|s| s.skipped.is_none()) {
        let groups = by_volume_day(at_middle(&cases, m).filter(|c| c.volume == summary.volume));
        let mut wins = [0usize; 4];
        for g in &groups {
            let best = g.iter().min_by(|a, b| better(a, b)).expect("not empty");
            for (i, alg) in ALGORITHMS.iter().enumerate() {
                if g.iter()
                    .any(|c| c.algorithm == *alg && better(c, best).is_eq())
                {
                    wins[i] += 1;
                }
            }
        }
        let top = (0..4).max_by_key(|i| (wins[*i], std::cmp::Reverse(*i)));
        summary.warmed_days = groups.len();
        // Only a single best counts: when the top is shared, there is none.
        let unique = top.filter(|t| wins[*t] > 0 && (0..4).all(|i| i == *t || wins[i] < wins[*t]));
        if let Some(i) = unique {
            summary.measured_best = Some(ALGORITHMS[i]);
            summary.measured_best_days = wins[i];
        }
    }
    // §4.3.3: daily-pattern volumes again, days starting at their daily reaccess hour.
    let mut shifted_daily = Vec::new();
    for summary in &summaries {
        let Some(hour) = summary
            .recommendation
            .as_ref()
            .filter(|r| r.algorithm == Algorithm::FirstK)
            .and_then(|r| r.start_at_hour)
        else {
            continue;
        };
        let Some(vol) = volumes.iter().find(|v| v.name == summary.volume) else {
            continue;
        };
        if o.day_start_hour == Some(hour) || o.day_ns != NS_PER_DAY {
            continue;
        }
        let first = vol.records[0].time_ns;
        let shifted = VolumeDays::new(
            vol.name.clone(),
            vol.records.clone(),
            origin(first, clock_origin, Some(hour), o.day_ns),
            o.day_ns,
        );
        if shifted.days() < 2 {
            continue;
        }
        let grid = Grid {
            cache_pcts: &[m.cache_pct],
            warmup_pcts: &[m.warmup_pct],
            regions: &[m.region_bytes],
        };
        let one = Options {
            th_vs: vec![m.th_v],
            th_ns: vec![m.th_n],
            ..o.clone()
        };
        let vols = [shifted];
        let series = simulate(&vols, &grid, &one, progress);
        let cases = self::cases(&series, &vols, &one);
        shifted_daily.push(ShiftedDaily {
            volume: summary.volume.clone(),
            day_start_hour: hour,
            headline: headline(cases.iter()),
        });
    }
    Ok(Report {
        source: source.to_owned(),
        day_s: o.day_ns as f64 / 1e9,
        interval_s: o.interval_ns as f64 / 1e9,
        day_start_hour: o.day_start_hour,
        middle: *m,
        figure_day: o.figure_day,
        preload_mb_per_s: o.preload_mb_per_s,
        readahead_bytes: o.readahead_bytes,
        volumes: summaries,
        table: table(&cases, o),
        figures,
        headline: headline(at_middle(&cases, m)),
        shifted_daily,
        overheads,
        cases,
    })
}

/// §6.1 and Figure 10.
#[derive(Clone, Debug)]
pub struct ZipfOptions {
    pub workload: Zipf,
    /// The new caches' size, % of the working set (the paper's 256 GB cache holds it all).
    pub cache_pct: f64,
    pub warmup_pcts: Vec<f64>,
    /// I/Os per interval; `None`: 1 % of the trace.
    pub interval_ios: Option<u64>,
    pub th_v: f64,
    pub th_n: f64,
    /// Table 4: the foreground speed that times the monitored half (the paper assumes an
    /// intense 1 Gbps), in bytes per second.
    pub foreground_bytes_per_s: f64,
    pub overhead: OverheadOptions,
}

impl Default for ZipfOptions {
    fn default() -> ZipfOptions {
        ZipfOptions {
            workload: Zipf::bonfire(),
            cache_pct: 100.0,
            warmup_pcts: vec![25.0, 50.0, 75.0, 100.0],
            interval_ios: None,
            th_v: 0.9,
            th_n: 0.03,
            foreground_bytes_per_s: 125e6,
            overhead: OverheadOptions::default(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ZipfSeries {
    /// "always-warm", "cold" or "bonfire N %".
    pub scheme: String,
    pub warmup_pct: Option<f64>,
    pub preload_blocks: u64,
    /// Read hit rate per interval from the half-way mark.
    pub hit_rates: Vec<Option<f64>>,
    /// Equation 1, in I/Os from the trace start (the paper's "I/O mark").
    pub converge_io: u64,
    pub final_hit_rate: Option<f64>,
    /// Over the second half.
    pub hit_rate: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ZipfReport {
    pub requests: u64,
    pub alpha: f64,
    pub span_bytes: u64,
    pub working_set_blocks: u64,
    pub cache_blocks: u64,
    pub start_io: u64,
    pub interval_ios: u64,
    pub th_v: f64,
    pub th_n: f64,
    pub series: Vec<ZipfSeries>,
    /// Table 4: monitoring the first half, pre-loading the largest warm-up.
    pub overhead: Overhead,
}

/// Generates the workload, creates the new caches half-way, and warms them with Last-K of
/// 4 KiB blocks from the first half (the prototype's log of recent blocks).
pub fn zipf(o: &ZipfOptions) -> Result<ZipfReport, String> {
    if o.workload.count < 2
        || o.cache_pct.is_nan()
        || o.cache_pct <= 0.0
        || o.warmup_pcts.iter().any(|p| p.is_nan() || *p <= 0.0)
    {
        return Err("the Zipf lab needs at least 2 requests and positive sizes".into());
    }
    if o.foreground_bytes_per_s.is_nan() || o.foreground_bytes_per_s <= 0.0 {
        return Err("the foreground speed must be positive".into());
    }
    if !(o.workload.alpha > 0.0 && o.workload.alpha <= 10.0) || o.workload.span_bytes < 4096 {
        return Err("Zipf needs 0 < α ≤ 10 and a span of at least 4 KiB".into());
    }
    let mut records: Vec<Record> = o.workload.records().collect();
    for (i, r) in records.iter_mut().enumerate() {
        r.time_ns = i as i64; // the axis is I/Os
    }
    let n = records.len() as u64;
    let start = n / 2;
    let interval = o.interval_ios.unwrap_or(n / 100).max(1);
    let wss = algorithms::working_set_blocks(&records);
    let capacity = ((wss as f64 * o.cache_pct / 100.0).round() as usize).max(1);
    let timeline = Timeline {
        start_ns: start as i64,
        interval_ns: interval as i64,
        readahead_bytes: 0,
    };
    let (first_half, second_half) = records.split_at(start as usize);
    let mut always = Scheme::new(Lru::new(capacity));
    always.run(&records, timeline);
    let mut runs: Vec<(String, Option<f64>, u64, Vec<Interval>)> = Vec::new();
    let mut cold = Scheme::new(Lru::new(capacity));
    cold.run(second_half, timeline);
    runs.push(("cold".into(), None, 0, cold.intervals));
    for &p in &o.warmup_pcts {
        let bytes = ((wss as f64 * p / 100.0).round() as u64) * BLOCK_BYTES;
        let preload = algorithms::select(first_half, Algorithm::LastK, BLOCK_BYTES, bytes, 0);
        let mut s = Scheme::new(Lru::new(capacity));
        s.preload(preload.iter().copied());
        s.run(second_half, timeline);
        runs.push((
            format!("bonfire {p} %"),
            Some(p),
            preload.len() as u64,
            s.intervals,
        ));
    }
    let largest = o.warmup_pcts.iter().copied().fold(0.0, f64::max);
    let warmup = algorithms::select(
        first_half,
        Algorithm::LastK,
        BLOCK_BYTES,
        ((wss as f64 * largest / 100.0).round() as u64) * BLOCK_BYTES,
        0,
    );
    let half_bytes: u64 = first_half.iter().map(|r| r.size_bytes).sum();
    let overhead = bonfire_overheads::measure(
        &format!(
            "zipf, first half at {:.0} MB/s",
            o.foreground_bytes_per_s / 1e6
        ),
        first_half,
        half_bytes as f64 / o.foreground_bytes_per_s,
        &warmup,
        &o.overhead,
    )?;
    let len = always.intervals.len();
    let mut series = vec![summarize(
        "always-warm".into(),
        None,
        0,
        always.intervals.clone(),
        &always.intervals,
        o,
        start,
        interval,
    )];
    for (name, p, blocks, mut s) in runs {
        s.resize(len, Interval::default());
        series.push(summarize(
            name,
            p,
            blocks,
            s,
            &always.intervals,
            o,
            start,
            interval,
        ));
    }
    Ok(ZipfReport {
        requests: n,
        alpha: o.workload.alpha,
        span_bytes: o.workload.span_bytes,
        working_set_blocks: wss,
        cache_blocks: capacity as u64,
        start_io: start,
        interval_ios: interval,
        th_v: o.th_v,
        th_n: o.th_n,
        series,
        overhead,
    })
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    scheme: String,
    warmup_pct: Option<f64>,
    preload_blocks: u64,
    s: Vec<Interval>,
    always: &[Interval],
    o: &ZipfOptions,
    start: u64,
    interval: u64,
) -> ZipfSeries {
    let t = schemes::convergence(&s, always, o.th_v, o.th_n) as u64;
    ZipfSeries {
        scheme,
        warmup_pct,
        preload_blocks,
        converge_io: start + t * interval,
        final_hit_rate: s.iter().rev().find_map(|i| i.hit_rate()),
        hit_rate: schemes::server_load_reduction(&s, s.len()),
        hit_rates: s.iter().map(|i| i.hit_rate()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::format::Format;

    fn info() -> TraceInfo {
        TraceInfo {
            format: Format::Binary,
            origin_unix_ns: None,
            has_time: true,
            last_line_unterminated: false,
        }
    }

    fn read(time_ns: i64, block: u64) -> Record {
        Record {
            time_ns,
            volume: VolumeId(0),
            op: Op::Read,
            offset_bytes: block * BLOCK_BYTES,
            size_bytes: BLOCK_BYTES,
            response_ns: None,
        }
    }

    /// Three "days" of an hour each: every day reads the same 64 blocks, twice, in order; a
    /// warmed cache starts each day with them, a cold one misses them once.
    fn repeating_days() -> (Vec<Record>, VolumeTable, Options) {
        let hour = NS_PER_HOUR;
        let mut records = Vec::new();
        for day in 0..3i64 {
            for k in 0..128i64 {
                records.push(read(day * hour + k * (hour / 128), (k % 64) as u64));
            }
        }
        let mut names = VolumeTable::new();
        names.intern(b"v").unwrap();
        let o = Options {
            day_ns: hour,
            interval_ns: hour / 4,
            cache_pcts: vec![100.0],
            warmup_pcts: vec![100.0],
            region_bytes: vec![4096],
            th_vs: vec![0.9],
            th_ns: vec![0.0],
            middle: Setting {
                cache_pct: 100.0,
                warmup_pct: 100.0,
                region_bytes: 4096,
                th_v: 0.9,
                th_n: 0.0,
            },
            figure_day: None,
            threads: 2,
            ..Options::default()
        };
        (records, names, o)
    }

    #[test]
    fn days_warmed_from_the_day_before_converge_at_once() {
        let (records, names, o) = repeating_days();
        let r = run("t", records, &names, &info(), &o, &|_| {}).unwrap();
        assert_eq!(r.volumes[0].days, 3);
        // Days 2 and 3, one grid point, four algorithms.
        assert_eq!(r.cases.len(), 2 * 4);
        for c in &r.cases {
            // Cold misses the first half hour (64 blocks once), then hits: it converges after
            // two intervals; every algorithm loads all 64 blocks and converges at once.
            assert_eq!(c.cold_converge_h, 0.5, "{c:?}");
            assert_eq!(c.warmed_converge_h, 0.0, "{c:?}");
            assert_eq!(c.load_reduction_cold_pct, Some(0.0));
            assert_eq!(c.load_reduction_always_pct, Some(100.0));
            assert_eq!(c.load_reduction_warmed_pct, Some(100.0));
            assert_eq!(c.preload_blocks, 64);
        }
        let row = &r.table[0];
        assert_eq!(row.cases, 2);
        assert_eq!(row.cold_converge_h, Some(0.5));
        assert_eq!(row.bonfire_converge_h, Some(0.0));
        // 64 blocks at 100 MB/s take 2.6 ms: almost all of the improvement remains.
        assert!(row.converge_improvement_pct.unwrap() > 99.9);
        assert_eq!(r.figures.len(), 1);
        assert_eq!(r.figures[0].day, 3);
        assert_eq!(r.headline.cases, 2);
        for t in &r.headline.algorithms {
            assert_eq!(t.best_converge, 2);
            assert_eq!(t.converges_sooner_than_cold, 2);
        }
    }

    #[test]
    fn last_k_beats_first_k_when_the_end_of_the_day_predicts_the_next() {
        // Each day reads 64 "morning" blocks, then 64 "evening" ones; the next day starts with
        // the evening blocks again. A warm-up of half the working set: Last-K takes the evening,
        // First-K the morning.
        let hour = NS_PER_HOUR;
        let mut records = Vec::new();
        for day in 0..3i64 {
            let base = day * hour;
            let step = hour / 256;
            let mut t = base;
            // The previous evening's blocks first (day 0 has none before), read twice.
            for _ in 0..2 {
                for b in 0..64 {
                    records.push(read(t, 1000 + day as u64 * 100 + b));
                    t += step;
                }
            }
            // Morning blocks, never read again.
            for b in 0..64 {
                records.push(read(t, 10_000 + day as u64 * 100 + b));
                t += step;
            }
            // Evening blocks, read first thing next day.
            for b in 0..64 {
                records.push(read(t, 1000 + (day as u64 + 1) * 100 + b));
                t += step;
            }
        }
        records.sort_by_key(|r| r.time_ns);
        let mut names = VolumeTable::new();
        names.intern(b"v").unwrap();
        let (_, _, base) = repeating_days();
        let wss = algorithms::working_set_blocks(&records) as f64;
        let warm = (64.0 / wss * 100.0 * 1000.0).round() / 1000.0;
        let o = Options {
            warmup_pcts: vec![warm],
            middle: Setting {
                warmup_pct: warm,
                ..base.middle
            },
            ..base
        };
        let r = run("t", records, &names, &info(), &o, &|_| {}).unwrap();
        let f = &r.figures[0];
        let get = |a: Algorithm| f.algorithms.iter().find(|x| x.algorithm == a).unwrap();
        assert!(
            get(Algorithm::LastK).load_reduction_pct > get(Algorithm::FirstK).load_reduction_pct,
            "{f:?}"
        );
        assert!(
            get(Algorithm::LastK).converge_h < f.cold_converge_h,
            "{f:?}"
        );
        assert_eq!(r.volumes[0].measured_best, Some(Algorithm::LastK));
    }

    #[test]
    fn the_decision_tree_follows_figure_8() {
        let c = |hourly, daily, other, near| ReaccessClasses {
            reaccess_pct: Some(50.0),
            hourly_block_pct: hourly,
            daily_block_pct: daily,
            other_block_pct: other,
            reuse_under_10mib_pct: near,
            daily_peak_hour: Some(2),
        };
        let daily = c(20.0, 60.0, 30.0, 10.0).recommend(MIB);
        assert_eq!(daily.algorithm, Algorithm::FirstK);
        assert_eq!(daily.start_at_hour, Some(2));
        assert_eq!(
            c(80.0, 5.0, 30.0, 10.0).recommend(MIB).algorithm,
            Algorithm::LastK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 80.0).recommend(4096).algorithm,
            Algorithm::LastK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 20.0).recommend(4096).algorithm,
            Algorithm::FirstK
        );
        assert_eq!(
            c(10.0, 5.0, 90.0, 20.0).recommend(MIB).algorithm,
            Algorithm::LastK
        );
    }

    #[test]
    fn days_can_start_at_a_wall_clock_hour() {
        // Clock origin at 17:00; a request at 18:00; days from 02:00 start at 02:00 that day,
        // 16 hours before the request.
        let origin_ns = 17 * NS_PER_HOUR;
        assert_eq!(
            origin(NS_PER_HOUR, origin_ns, Some(2), NS_PER_DAY),
            NS_PER_HOUR - 16 * NS_PER_HOUR
        );
        assert_eq!(origin(5, origin_ns, None, NS_PER_DAY), 5);
    }

    #[test]
    fn bad_options_and_traces_are_errors() {
        let (records, names, o) = repeating_days();
        let bad = Options {
            interval_ns: NS_PER_HOUR / 7 + 1,
            ..o.clone()
        };
        assert!(run("t", records.clone(), &names, &info(), &bad, &|_| {}).is_err());
        let off_grid = Options {
            middle: Setting {
                cache_pct: 33.0,
                ..o.middle
            },
            ..o.clone()
        };
        assert!(off_grid.validate().is_err());
        let one_day: Vec<Record> = records.into_iter().take(100).collect();
        let e = run("t", one_day, &names, &info(), &o, &|_| {}).unwrap_err();
        assert!(e.contains("two days"), "{e}");
    }

    #[test]
    fn zipf_warmed_with_everything_matches_always_warm_at_once() {
        let o = ZipfOptions {
            workload: Zipf {
                count: 200_000,
                alpha: 0.4,
                span_bytes: 256 << 20,
                rate_per_s: 1000.0,
                seed: 3,
            },
            ..ZipfOptions::default()
        };
        let r = zipf(&o).unwrap();
        let get = |name: &str| r.series.iter().find(|s| s.scheme == name).unwrap();
        let (always, cold, full, quarter) = (
            get("always-warm"),
            get("cold"),
            get("bonfire 100 %"),
            get("bonfire 25 %"),
        );
        // 100 % of the working set holds everything the first half read: converged at once.
        assert_eq!(full.converge_io, r.start_io);
        // More warm-up, sooner convergence and more hits; cold does not converge by the end.
        let order: Vec<&ZipfSeries> = ["cold", "bonfire 25 %", "bonfire 50 %", "bonfire 75 %"]
            .iter()
            .map(|n| get(n))
            .chain([full])
            .collect();
        for w in order.windows(2) {
            assert!(w[0].converge_io >= w[1].converge_io, "{r:?}");
            assert!(w[0].hit_rate < w[1].hit_rate, "{r:?}");
        }
        assert_eq!(cold.converge_io, r.requests);
        assert!(get("bonfire 75 %").converge_io < r.requests);
        assert!(quarter.hit_rate > cold.hit_rate);
        assert_eq!(full.hit_rate, always.hit_rate);
    }
}
