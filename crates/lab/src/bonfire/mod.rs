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

mod classes;
pub mod latency;
pub mod parts;
pub mod preload;
pub mod replay;
mod report;
pub mod schemes_run;
mod simulate;
mod zipf;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use cordillera_sim::workload::Zipf;
use cordillera_trace::reaccess::ReaccessBuilder;
use cordillera_trace::record::{Record, TraceInfo, VolumeId, VolumeTable};
use cordillera_trace::RecordReader;
use cordillera_types::units::{MIB, NS_PER_DAY, NS_PER_HOUR, NS_PER_S};
use cordillera_types::Op;
use cordillera_warmup::algorithms::{self, Algorithm, ALGORITHMS};
use cordillera_warmup::cache::{Cache, Lru};
use cordillera_warmup::multi::{ColdRun, MultiScheme};
use cordillera_warmup::schemes::{self, Interval, Timeline};
use cordillera_warmup::sim::{block_range, BLOCK_BYTES};
use serde::Serialize;
use std::sync::Arc;

use crate::bonfire_overheads::{self, Overhead, OverheadOptions};

pub use classes::*;
pub use report::*;
use simulate::*;
pub use zipf::*;

/// One point of the grid that Figures 6–7 use (the paper's middle setting).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Setting {
    pub cache_pct: f64,
    pub warmup_pct: f64,
    pub region_bytes: u64,
    pub th_v: f64,
    pub th_n: f64,
}

impl Setting {
    /// The paper's middle setting (50 %, 10 %, 1 MiB, 0.8, 0.03), each value taken where its
    /// grid has it, else the grid's middle value. Every grid holds at least one value.
    pub fn middle_of_grids(
        cache_pcts: &[f64],
        warmup_pcts: &[f64],
        region_bytes: &[u64],
        th_vs: &[f64],
        th_ns: &[f64],
    ) -> Setting {
        fn middle_of<T: Copy + PartialOrd>(grid: &[T], preferred: T) -> T {
            assert!(!grid.is_empty(), "an empty grid has no middle");
            if grid.contains(&preferred) {
                return preferred;
            }
            let mut sorted = grid.to_vec();
            sorted.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
            sorted[sorted.len() / 2]
        }
        Setting {
            cache_pct: middle_of(cache_pcts, 50.0),
            warmup_pct: middle_of(warmup_pcts, 10.0),
            region_bytes: middle_of(region_bytes, MIB),
            th_v: middle_of(th_vs, 0.8),
            th_n: middle_of(th_ns, 0.03),
        }
    }
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

/// A trace held in memory as a [`RecordReader`] (for [`run`]).
struct InMemory<'a> {
    records: std::slice::Iter<'a, Record>,
    names: &'a VolumeTable,
    info: TraceInfo,
    summary: cordillera_trace::ReadSummary,
}

impl RecordReader for InMemory<'_> {
    fn info(&self) -> &TraceInfo {
        &self.info
    }
    fn volumes(&self) -> &VolumeTable {
        self.names
    }
    fn next_record(&mut self) -> Result<Option<Record>, cordillera_trace::TraceError> {
        Ok(self.records.next().copied())
    }
    fn summary(&self) -> &cordillera_trace::ReadSummary {
        &self.summary
    }
}

/// Runs the lab on a trace held in memory (tests, small traces); [`run_stream`] reads a trace
/// of any length.
pub fn run(
    source: &str,
    records: Vec<Record>,
    names: &VolumeTable,
    info: &TraceInfo,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, String> {
    let mut open = || -> Result<Box<dyn RecordReader + '_>, String> {
        Ok(Box::new(InMemory {
            records: records.iter(),
            names,
            info: info.clone(),
            summary: Default::default(),
        }))
    };
    run_stream(source, &mut open, o, progress)
}

/// Opens the trace again (the lab reads it twice).
pub type Opener<'a> = dyn FnMut() -> Result<Box<dyn RecordReader + 'a>, String> + 'a;

/// Records per batch handed to a pass 1 worker.
const PASS1_BATCH: usize = 1 << 14;

/// What the first pass finds: each volume's span, requests and working set, the trace's
/// volumes and information, the reaccess classes, and the requests in all.
struct Pass1 {
    stats: Vec<VolumeStats>,
    names: VolumeTable,
    info: TraceInfo,
    reaccess: cordillera_trace::reaccess::ReaccessReport,
    total: u64,
}

/// The first pass over the trace. The reaccess analysis (exact reuse distances) costs most of
/// it: volumes are dealt to worker threads (volume mod threads) in batches, each with its own
/// builder. A trace with no request, or no timestamps, is refused.
fn first_pass(
    open: &mut Opener,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Pass1, String> {
    progress("pass 1: each volume's days, working set and reaccesses");
    let mut reader = open()?;
    let mut stats: Vec<VolumeStats> = Vec::new();
    let mut total = 0u64;
    let info = reader.info().clone();
    let workers = o.threads.max(1);
    let (reaccess, read) = std::thread::scope(|scope| {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..workers {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Record>>(4);
            let info = info.clone();
            senders.push(tx);
            handles.push(scope.spawn(move || {
                let mut builder = ReaccessBuilder::new(0);
                for batch in rx {
                    for r in &batch {
                        builder.add(r, &info);
                    }
                }
                builder
            }));
        }
        let mut batches: Vec<Vec<Record>> = vec![Vec::with_capacity(PASS1_BATCH); workers];
        let read = (|| -> Result<(), String> {
            while let Some(r) = reader.next_record().map_err(|e| e.to_string())? {
                total += 1;
                let i = r.volume.index();
                if stats.len() <= i {
                    stats.resize_with(i + 1, VolumeStats::default);
                }
                let v = &mut stats[i];
                if v.requests == 0 {
                    (v.first_ns, v.last_ns) = (r.time_ns, r.time_ns);
                }
                v.first_ns = v.first_ns.min(r.time_ns);
                v.last_ns = v.last_ns.max(r.time_ns);
                v.requests += 1;
                v.reads += (r.op == Op::Read) as usize;
                let batch = &mut batches[i % workers];
                batch.push(r);
                if batch.len() == PASS1_BATCH {
                    let full = std::mem::replace(batch, Vec::with_capacity(PASS1_BATCH));
                    // A worker only stops early by panicking, which the join below reports.
                    let _ = senders[i % workers].send(full);
                }
                if total.is_multiple_of(1 << 24) {
                    progress(&format!("pass 1: {} M requests", total >> 20));
                }
            }
            Ok(())
        })();
        for (tx, batch) in senders.into_iter().zip(batches) {
            let _ = tx.send(batch);
        }
        let mut reaccess = ReaccessBuilder::new(0);
        for h in handles {
            reaccess.absorb(h.join().expect("a pass 1 worker panicked"));
        }
        (reaccess, read)
    });
    read?;
    let names = reader.volumes().clone();
    let info = reader.info().clone();
    drop(reader);
    if total == 0 {
        return Err("the trace has no requests".into());
    }
    if !info.has_time {
        return Err("the trace has no timestamps, so it cannot be split into days".into());
    }
    let reaccess = reaccess.finish(&names, &info);
    for (i, v) in stats.iter_mut().enumerate() {
        let name = names.name(VolumeId(i as u32));
        v.wss = reaccess
            .volumes
            .iter()
            .find(|r| r.volume == name)
            .map_or(0, |r| r.distinct_blocks);
    }
    Ok(Pass1 {
        stats,
        names,
        info,
        reaccess,
        total,
    })
}

/// Runs the lab, streaming the trace twice: first for each volume's span, working set and
/// reaccess classes, then through the caches day by day (see `simulate_stream`). Memory is
/// bounded by the working sets and two days of requests per volume, not the trace's length.
pub fn run_stream(
    source: &str,
    open: &mut Opener,
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, String> {
    o.validate()?;
    let Pass1 {
        stats,
        names,
        info,
        reaccess,
        total,
    } = first_pass(open, o, progress)?;
    let clock_origin = info.origin_unix_ns.unwrap_or(0);
    let m = &o.middle;
    let (mut summaries, mut views) = volume_views(&stats, &names, &reaccess, clock_origin, o);
    if views.is_empty() {
        return Err(
            "no volume has reads over at least two days (Bonfire warms day d from day d − 1)"
                .into(),
        );
    }
    let own = views.len();
    // §4.3.3: daily-pattern volumes again, days starting at their daily reaccess hour (the
    // middle setting only), in the same pass.
    let shifted_hours = add_shifted_views(&summaries, &mut views, &stats, clock_origin, o);
    progress(&format!(
        "pass 2: {} volume(s) over {} requests, {} grid points × {} algorithms per day",
        own,
        total,
        o.cache_pcts.len() * o.warmup_pcts.len() * o.region_bytes.len(),
        ALGORITHMS.len()
    ));
    let mut reader = open()?;
    let simulated = simulate_stream(reader.as_mut(), &views, o, progress)?;
    drop(reader);
    let (series, shifted_series): (Vec<DaySeries>, Vec<DaySeries>) =
        simulated.series.into_iter().partition(|s| s.volume < own);
    let cases = cases(&series, &views, o);
    let figures = figure_days(&views[..own], &series, o);
    let overheads = overheads(&views[..own], &simulated.kept, o, progress)?;
    measured_best(&mut summaries, &cases, m);
    let one = Options {
        th_vs: vec![m.th_v],
        th_ns: vec![m.th_n],
        ..o.clone()
    };
    let shifted_cases = self::cases(&shifted_series, &views, &one);
    let shifted_daily = (own..views.len())
        .zip(shifted_hours)
        .map(|(k, hour)| ShiftedDaily {
            volume: views[k].name.clone(),
            day_start_hour: hour,
            headline: headline(shifted_cases.iter().filter(|c| {
                // Cases carry the volume's name; the shifted view's series are its own.
                c.volume == views[k].name
            })),
        })
        .collect();
    if simulated.late > 0 {
        progress(&format!(
            "{} requests arrived after their day had ended (the trace is ordered by completion); each was counted in the day it arrived in",
            simulated.late
        ));
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
        late_requests: simulated.late,
        cases,
    })
}

#[cfg(test)]
mod tests;

/// Each volume with requests: its summary (days, reaccess classes, the decision tree's
/// recommendation, or why it is skipped), and a view for the simulation of those judged.
fn volume_views(
    stats: &[VolumeStats],
    names: &VolumeTable,
    reaccess: &cordillera_trace::reaccess::ReaccessReport,
    clock_origin: i64,
    o: &Options,
) -> (Vec<VolumeSummary>, Vec<View>) {
    let m = &o.middle;
    let mut summaries = Vec::new();
    let mut views: Vec<View> = Vec::new();
    for (index, v) in stats.iter().enumerate().filter(|(_, v)| v.requests > 0) {
        let name = names.name(VolumeId(index as u32)).to_owned();
        let origin_ns = origin(v.first_ns, clock_origin, o.day_start_hour, o.day_ns);
        let days = ((v.last_ns - origin_ns) / o.day_ns + 1).max(1) as usize;
        let classes = reaccess
            .volumes
            .iter()
            .find(|r| r.volume == name)
            .map(ReaccessClasses::from_report);
        let skipped = if v.reads == 0 {
            Some("no reads: read hit rates are undefined".to_owned())
        } else if days < 2 {
            Some("shorter than two days".to_owned())
        } else {
            None
        };
        summaries.push(VolumeSummary {
            volume: name.clone(),
            requests: v.requests,
            read_requests: v.reads,
            working_set_blocks: v.wss,
            days,
            skipped: skipped.clone(),
            recommendation: classes.as_ref().map(|c| c.recommend(m.region_bytes)),
            reaccess: classes,
            measured_best: None,
            measured_best_days: 0,
            warmed_days: 0,
        });
        if skipped.is_none() {
            let figure_day = o.figure_day.map_or(days, |d| d.clamp(2, days));
            views.push(View {
                name,
                volume: index,
                wss: v.wss,
                origin_ns,
                last_ns: v.last_ns,
                days,
                cache_pcts: o.cache_pcts.clone(),
                warmup_pcts: o.warmup_pcts.clone(),
                regions: o.region_bytes.clone(),
                keep_day: Some(figure_day - 2),
            });
        }
    }
    (summaries, views)
}

/// Views of the daily-pattern volumes again, days starting at their daily reaccess hour, at
/// the middle setting; returns each one's hour.
fn add_shifted_views(
    summaries: &[VolumeSummary],
    views: &mut Vec<View>,
    stats: &[VolumeStats],
    clock_origin: i64,
    o: &Options,
) -> Vec<u32> {
    let m = &o.middle;
    let own = views.len();
    let mut shifted_hours = Vec::new();
    for summary in summaries {
        let Some(hour) = summary
            .recommendation
            .as_ref()
            .filter(|r| r.algorithm == Algorithm::FirstK)
            .and_then(|r| r.start_at_hour)
        else {
            continue;
        };
        let Some(view) = views[..own].iter().find(|v| v.name == summary.volume) else {
            continue;
        };
        if o.day_start_hour == Some(hour) || o.day_ns != NS_PER_DAY {
            continue;
        }
        let first = stats[view.volume].first_ns;
        let origin_ns = origin(first, clock_origin, Some(hour), o.day_ns);
        let days = ((view.last_ns - origin_ns) / o.day_ns + 1).max(1) as usize;
        if days < 2 {
            continue;
        }
        shifted_hours.push(hour);
        views.push(View {
            name: view.name.clone(),
            volume: view.volume,
            wss: view.wss,
            origin_ns,
            last_ns: view.last_ns,
            days,
            cache_pcts: vec![m.cache_pct],
            warmup_pcts: vec![m.warmup_pct],
            regions: vec![m.region_bytes],
            keep_day: None,
        });
    }
    shifted_hours
}

/// Figures 6–7: each volume's chosen day at the middle setting.
fn figure_days(views: &[View], series: &[DaySeries], o: &Options) -> Vec<FigureDay> {
    let m = &o.middle;
    let mut figures = Vec::new();
    for (v, vol) in views.iter().enumerate() {
        let last = vol.days;
        let day = o.figure_day.map_or(last, |d| d.clamp(2, last));
        let Some(s) = series
            .iter()
            .find(|s| s.volume == v && s.day + 1 == day && s.cache_pct == m.cache_pct)
        else {
            continue;
        };
        let cold_t = schemes::convergence(&s.cold, &s.always, m.th_v, m.th_n);
        let hours = |i: usize| i as f64 * o.interval_ns as f64 / NS_PER_HOUR as f64;
        // Equation 2 over cold's T_converge, or the whole day if cold never converged.
        let window = cold_t.unwrap_or(s.cold.len());
        let picked: Vec<_> = s
            .warmed
            .iter()
            .filter(|w| w.0 == m.warmup_pct && w.1 == m.region_bytes)
            .collect();
        figures.push(FigureDay {
            volume: vol.name.clone(),
            day,
            cold_converge_h: cold_t.map(hours),
            load_reduction_cold_pct: pct(schemes::server_load_reduction(&s.cold, window)),
            load_reduction_always_pct: pct(schemes::server_load_reduction(&s.always, window)),
            algorithms: picked
                .iter()
                .map(|w| AlgorithmResult {
                    algorithm: w.2,
                    converge_h: schemes::convergence(&w.4, &s.always, m.th_v, m.th_n).map(hours),
                    load_reduction_pct: pct(schemes::server_load_reduction(&w.4, window)),
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
    figures
}

/// Table 4: each volume's monitoring of the day before its figure day.
fn overheads(
    views: &[View],
    kept: &[Option<Arc<Vec<Record>>>],
    o: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Vec<Overhead>, String> {
    let m = &o.middle;
    let mut overheads = Vec::new();
    for (v, vol) in views.iter().enumerate() {
        let day = o.figure_day.map_or(vol.days, |d| d.clamp(2, vol.days));
        let Some(window) = &kept[v] else {
            continue;
        };
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
    Ok(overheads)
}

/// The measured best algorithm per volume at the middle setting: the one best on the most
/// days, when no other ties it.
fn measured_best(summaries: &mut [VolumeSummary], cases: &[Case], m: &Setting) {
    for summary in summaries.iter_mut().filter(|s| s.skipped.is_none()) {
        let groups = by_volume_day(at_middle(cases, m).filter(|c| c.volume == summary.volume));
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
}
