//! Bonfire's three schemes side by side (`warmup schemes`): a new cache created at T, cold
//! (empty) and warmed (pre-loaded by a warm-up algorithm from the history before T), against a
//! cache running since the trace start; read hit rate per interval, T_converge (Eq. 1) and
//! server load reduction (Eq. 2). The trace is streamed three times, holding only the working
//! set's blocks, the history window and the caches.

use anyhow::{bail, Result};
use serde::Serialize;

use cordillera_trace::record::Record;
use cordillera_warmup::algorithms::{self, Algorithm};
use cordillera_warmup::cache::{ArcCache, Cache, Clock, Fifo, Lru, Policy, S3Fifo, Sieve};
use cordillera_warmup::schemes::{self, Timeline};
use cordillera_warmup::sim::{block_range, BLOCK_BYTES};

use crate::input::TraceInput;
use crate::spread::{spread, Figure, Spread};

/// What T, intervals and the history window are measured in.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Trace time, in seconds.
    Time,
    /// Requests, counted from the first (for traces without timestamps, and Figure 10).
    Requests,
}

impl Axis {
    pub fn unit(self) -> &'static str {
        match self {
            Axis::Time => "s",
            Axis::Requests => "requests",
        }
    }
}

/// The experiment's settings, as `warmup schemes` takes them (sizes as text: bytes with k, m,
/// g suffixes, or a percentage of the working set).
#[derive(Clone, Debug)]
pub struct SchemesConfig {
    pub policy: Policy,
    pub cache_size: String,
    pub warmup_size: String,
    pub algorithm: Algorithm,
    pub region: String,
    pub axis: Axis,
    pub start: Option<f64>,
    pub interval: Option<f64>,
    pub history: Option<f64>,
    pub readahead: String,
    pub th_v: f64,
    pub th_n: f64,
    pub preload_mb_per_s: f64,
    pub preload_device: Option<String>,
}

/// Bytes, or a percentage of `whole_blocks` blocks, in blocks.
fn blocks_of(text: &str, whole_blocks: u64, flag: &str) -> Result<u64> {
    if let Some(p) = text.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{flag}: bad percentage {text:?}"))?;
        if !(0.0..=1000.0).contains(&p) {
            bail!("{flag}: percentage {p} out of 0–1000");
        }
        return Ok((whole_blocks as f64 * p / 100.0).round() as u64);
    }
    let bytes =
        cordillera_models::presets::parse_size(text).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    Ok(bytes / BLOCK_BYTES)
}

#[derive(Serialize)]
pub struct SchemeRow {
    pub name: &'static str,
    /// Equation 1's T_converge; `null` when the scheme never converged within the trace.
    pub converge_intervals: Option<usize>,
    pub converge: Option<f64>,
    pub server_load_reduction: Option<f64>,
}

#[derive(Serialize)]
pub struct SchemesReport {
    pub policy: Policy,
    pub algorithm: Algorithm,
    pub axis: Axis,
    pub requests: usize,
    pub working_set_blocks: u64,
    pub cache_blocks: u64,
    pub warmup_blocks: u64,
    pub region_bytes: u64,
    pub start: f64,
    pub interval: f64,
    pub th_v: f64,
    pub th_n: f64,
    pub preload_s: f64,
    /// Measured on `--preload-device`: reading the blocks in place, and from a snapshot.
    pub preload_device: Option<String>,
    pub preload_metadata_only_s: Option<f64>,
    pub preload_snapshot_s: Option<f64>,
    /// Per the paper: (cold − (warmed + pre-load)) ÷ cold, in percent; `None` when cold is 0.
    pub converge_improvement_percent: Option<f64>,
    pub schemes: Vec<SchemeRow>,
    /// Per interval from T: read hit rates of always-warm, cold, warmed.
    pub intervals: Vec<[Option<f64>; 3]>,
}

/// The third pass of `warmup schemes`: the trace through always-warm, cold and warmed caches.
fn three<C: Cache>(
    input: &TraceInput,
    axis: Axis,
    timeline: Timeline,
    preload: &[u64],
    make: impl Fn() -> C,
) -> Result<[Vec<schemes::Interval>; 3]> {
    let mut three = schemes::Three::new(timeline, preload, make);
    let mut index = 0;
    input.for_each_record(|_, r| {
        three.feed(&on_axis(axis, index, r));
        index += 1;
    })?;
    Ok(three.finish())
}

/// A record's place on the axis: its time, or its index in the trace.
fn on_axis(axis: Axis, index: usize, r: &Record) -> Record {
    let mut r = *r;
    if axis == Axis::Requests {
        r.time_ns = index as i64;
    }
    r
}

/// One run of the three schemes on `input`, Random-K drawing from `seed`.
pub fn run(a: &SchemesConfig, input: &TraceInput, seed: u64) -> Result<SchemesReport> {
    let (n, first, last, wss) = scan(input, a.axis)?;
    // The axis unit in ns (time) or 1 (requests).
    let unit = if a.axis == Axis::Time { 1e9 } else { 1.0 };
    let start_ns = match a.start {
        Some(s) if s >= 0.0 => first + (s * unit) as i64,
        Some(_) => bail!("--start must not be negative"),
        None => first + (last - first) / 2,
    };
    if start_ns >= last {
        bail!(
            "--start {} is at or past the trace's end ({} {} from its start): no request would meet the new caches",
            a.start.unwrap_or(0.0),
            (last - first) as f64 / unit,
            if a.axis == Axis::Time { "s" } else { "requests" }
        );
    }
    let interval_ns = match a.interval {
        Some(i) if i > 0.0 => (i * unit) as i64,
        Some(_) => bail!("--interval must be positive"),
        None if a.axis == Axis::Time => 600_000_000_000,
        None => ((n / 100).max(1)) as i64,
    }
    .max(1);
    let history_from = match a.history {
        Some(h) if h > 0.0 => start_ns - (h * unit) as i64,
        Some(_) => bail!("--history must be positive"),
        None if a.axis == Axis::Time => start_ns - 86_400_000_000_000,
        None => i64::MIN,
    };
    let (region_bytes, readahead_bytes, cache_blocks, warmup_blocks) = sizes(a, wss)?;
    let mut history = Vec::new();
    let mut index = 0;
    input.for_each_record(|_, r| {
        let r = on_axis(a.axis, index, r);
        index += 1;
        if r.time_ns >= history_from && r.time_ns < start_ns {
            history.push(r);
        }
    })?;
    let preload = algorithms::select(
        &history,
        a.algorithm,
        region_bytes,
        warmup_blocks * BLOCK_BYTES,
        seed,
    );
    let timeline = Timeline {
        start_ns,
        interval_ns,
        readahead_bytes,
    };
    drop(history);
    let capacity = cache_blocks as usize;
    let axis = a.axis;
    let series = match a.policy {
        Policy::Lru => three(input, axis, timeline, &preload, || Lru::new(capacity))?,
        Policy::Fifo => three(input, axis, timeline, &preload, || Fifo::new(capacity))?,
        Policy::Clock => three(input, axis, timeline, &preload, || Clock::new(capacity))?,
        Policy::Sieve => three(input, axis, timeline, &preload, || Sieve::new(capacity))?,
        Policy::S3Fifo => three(input, axis, timeline, &preload, || S3Fifo::new(capacity))?,
        Policy::Arc => three(input, axis, timeline, &preload, || ArcCache::new(capacity))?,
    };
    let [always, cold, warmed] = &series;
    let cold_t = schemes::convergence(cold, always, a.th_v, a.th_n);
    let warmed_t = schemes::convergence(warmed, always, a.th_v, a.th_n);
    let interval = interval_ns as f64 / unit;
    let preload_s = preload.len() as f64 * BLOCK_BYTES as f64 / (a.preload_mb_per_s * 1e6);
    let preload_axis = if a.axis == Axis::Time { preload_s } else { 0.0 };
    let (mut metadata_only_s, mut snapshot_s) = (None, None);
    if let Some(name) = &a.preload_device {
        let mut device =
            cordillera_models::presets::build(name, None).map_err(anyhow::Error::msg)?;
        metadata_only_s = Some(
            crate::bonfire::preload::metadata_only_s(device.as_mut(), &preload, 32)
                .map_err(anyhow::Error::msg)?,
        );
        let mut device =
            cordillera_models::presets::build(name, None).map_err(anyhow::Error::msg)?;
        snapshot_s = Some(
            crate::bonfire::preload::snapshot_s(device.as_mut(), &preload, 32)
                .map_err(anyhow::Error::msg)?,
        );
    }
    let cold_converge = cold_t.map(|t| t as f64 * interval);
    let warmed_converge = warmed_t.map(|t| t as f64 * interval);
    // Equation 2 over cold's T_converge, or the whole run if cold never converged.
    let window = cold_t.unwrap_or(cold.len());
    let report = SchemesReport {
        policy: a.policy,
        algorithm: a.algorithm,
        axis: a.axis,
        requests: n,
        working_set_blocks: wss,
        cache_blocks,
        warmup_blocks: preload.len() as u64,
        region_bytes,
        start: (start_ns - first) as f64 / unit,
        interval,
        th_v: a.th_v,
        th_n: a.th_n,
        preload_s,
        preload_device: a.preload_device.clone(),
        preload_metadata_only_s: metadata_only_s,
        preload_snapshot_s: snapshot_s,
        converge_improvement_percent: match (cold_converge, warmed_converge) {
            (Some(c), Some(w)) => schemes::converge_improvement_pct(c, w, preload_axis),
            _ => None,
        },
        schemes: vec![
            SchemeRow {
                name: "always-warm",
                converge_intervals: Some(0),
                converge: Some(0.0),
                server_load_reduction: schemes::server_load_reduction(always, window),
            },
            SchemeRow {
                name: "cold",
                converge_intervals: cold_t,
                converge: cold_converge,
                server_load_reduction: schemes::server_load_reduction(cold, window),
            },
            SchemeRow {
                name: "warmed",
                converge_intervals: warmed_t,
                converge: warmed_converge,
                server_load_reduction: schemes::server_load_reduction(warmed, window),
            },
        ],
        intervals: (0..always.len())
            .map(|i| {
                [
                    always[i].hit_rate(),
                    cold[i].hit_rate(),
                    warmed[i].hit_rate(),
                ]
            })
            .collect(),
    };
    Ok(report)
}

/// `--seeds K`: the runs, each its own generated workload (when the trace is one without a
/// seed of its own) and its own Random-K, and the spread of T_converge, the improvement and
/// the load reductions.
#[derive(Serialize)]
pub struct OverSeeds {
    pub seeds: Vec<u64>,
    pub workload_seeded: bool,
    /// Seeds where cold or warmed never converged (left out of T_converge's spread).
    pub never_converged: Vec<u64>,
    pub spread: Vec<Spread>,
    pub runs: Vec<SchemesReport>,
}

/// The experiment over seeds `first … first + count − 1`, on the machine's cores.
pub fn over_seeds(
    a: &SchemesConfig,
    input: &TraceInput,
    first: u64,
    count: u64,
) -> Result<OverSeeds> {
    let spec = input.file.to_string_lossy().into_owned();
    let workload_seeded = crate::input::seeded_spec(&spec, 0).is_some();
    let seeds: Vec<u64> = (first..first + count).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(seeds.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<(u64, Result<SchemesReport>)>> = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&seed) = seeds.get(k) else { break };
                let mut input = input.clone();
                if let Some(seeded) = crate::input::seeded_spec(&spec, seed) {
                    input.file = seeded.into();
                }
                eprintln!("warmup schemes: seed {seed}");
                let report = run(a, &input, seed);
                results.lock().expect("no panics").push((seed, report));
            });
        }
    });
    let mut results = results.into_inner().expect("no panics");
    results.sort_by_key(|(seed, _)| *seed);
    let mut runs = Vec::new();
    let mut figures = Vec::new();
    for (seed, report) in results {
        let report = report.map_err(|e| e.context(format!("seed {seed}")))?;
        let mut f = Vec::new();
        let unit = a.axis.unit();
        if let Some(c) = report.schemes[1].converge {
            f.push(Figure::new(
                "cold_converge",
                "T_converge, cold",
                unit,
                c,
                "",
            ));
        }
        if let Some(w) = report.schemes[2].converge {
            f.push(Figure::new(
                "warmed_converge",
                "T_converge, warmed",
                unit,
                w,
                "",
            ));
        }
        if let Some(p) = report.converge_improvement_percent {
            f.push(Figure::new(
                "converge_improvement_pct",
                "improvement in T_converge (Table 3's measure)",
                "%",
                p,
                "",
            ));
        }
        for (k, name) in ["always-warm", "cold", "warmed"].iter().enumerate() {
            if let Some(r) = report.schemes[k].server_load_reduction {
                f.push(Figure::new(
                    format!("load_reduction/{name}"),
                    format!("server load reduction, {name}"),
                    "%",
                    r * 100.0,
                    "",
                ));
            }
        }
        figures.push((seed, f));
        runs.push(report);
    }
    let spread = spread(&figures);
    let never_converged: Vec<u64> = runs
        .iter()
        .zip(&seeds)
        .filter(|(r, _)| r.schemes[2].converge.is_none() || r.schemes[1].converge.is_none())
        .map(|(_, s)| *s)
        .collect();
    Ok(OverSeeds {
        seeds,
        workload_seeded,
        never_converged,
        spread,
        runs,
    })
}

/// The first pass: the records, the first and last places on the axis, and the working set
/// in blocks. A trace with no record, or (on the time axis) no timestamps, is refused.
fn scan(input: &TraceInput, axis: Axis) -> Result<(usize, i64, i64, u64)> {
    let (mut n, mut first, mut last) = (0usize, i64::MAX, i64::MIN);
    let mut first_time = None;
    let mut one_time = true;
    let mut seen = rustc_hash::FxHashSet::default();
    input.for_each_record(|_, r| {
        let r = on_axis(axis, n, r);
        n += 1;
        (first, last) = (first.min(r.time_ns), last.max(r.time_ns));
        one_time &= *first_time.get_or_insert(r.time_ns) == r.time_ns;
        seen.extend(block_range(r.offset_bytes, r.length_bytes));
    })?;
    let wss = seen.len() as u64;
    drop(seen);
    if n == 0 {
        bail!("the trace has no records");
    }
    if axis == Axis::Time && one_time {
        bail!("the trace has no timestamps: use --axis requests");
    }
    Ok((n, first, last, wss))
}

/// The region, read-ahead, cache and warm-up sizes (the last two in blocks of a working set
/// of `wss`), each checked; and Equation 1's thresholds.
fn sizes(a: &SchemesConfig, wss: u64) -> Result<(u64, u64, u64, u64)> {
    let region_bytes =
        cordillera_models::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    if region_bytes == 0 || !region_bytes.is_multiple_of(BLOCK_BYTES) {
        bail!("--region must be a positive multiple of 4 KiB");
    }
    let readahead_bytes =
        cordillera_models::presets::parse_size(&a.readahead).map_err(anyhow::Error::msg)?;
    if !(a.th_v > 0.0 && a.th_v <= 1.0 && a.th_n >= 0.0 && a.th_n < 1.0) {
        bail!("Equation 1 needs 0 < Th_V ≤ 1 and 0 ≤ Th_N < 1");
    }
    let cache_blocks = blocks_of(&a.cache_size, wss, "--cache-size")?;
    let warmup_blocks = blocks_of(&a.warmup_size, wss, "--warmup-size")?;
    if cache_blocks == 0 {
        bail!(
            "--cache-size {} is less than one 4 KiB block (the working set is {wss} blocks)",
            a.cache_size
        );
    }
    if warmup_blocks > cache_blocks {
        bail!(
            "--warmup-size {} ({warmup_blocks} blocks) is more than the cache holds (--cache-size {}: {cache_blocks} blocks)",
            a.warmup_size,
            a.cache_size
        );
    }
    if cache_blocks >= u64::from(u32::MAX) {
        bail!("--cache-size is over the simulator's limit of 2^32 - 1 blocks");
    }
    Ok((region_bytes, readahead_bytes, cache_blocks, warmup_blocks))
}
