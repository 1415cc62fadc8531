//! `cordillera warmup`: storage-level cache warm-up (Bonfire). `warmup simulate` drives a trace
//! or a generated workload through a block cache that starts empty.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use cordillera_trace::record::Record;
use cordillera_warmup::algorithms::{self, Algorithm};
use cordillera_warmup::cache::{Cache, Clock, Fifo, Lru, Policy};
use cordillera_warmup::schemes::{self, Timeline};
use cordillera_warmup::sim::{apply, block_range, Counts, BLOCK_BYTES};
use serde::Serialize;

use crate::trace_cmd::{for_each_record, InputArgs};

#[derive(Args)]
pub struct WarmupArgs {
    #[command(subcommand)]
    command: WarmupCommand,
}

#[derive(Subcommand)]
enum WarmupCommand {
    /// Drive a trace through a block cache (4 KiB blocks) that starts empty; count read block
    /// accesses and hits (reads and writes both insert or refresh the blocks they touch).
    Simulate(SimulateArgs),
    /// Bonfire's three schemes side by side: a new cache created at T, cold (empty) and warmed
    /// (pre-loaded by a warm-up algorithm from the 24 hours before T), against a cache running
    /// since the trace start; read hit rate per interval, T_converge (Eq. 1) and server load
    /// reduction (Eq. 2). The trace is held in memory (about 40 bytes per request).
    Schemes(SchemesArgs),
}

#[derive(Clone, Copy, clap::ValueEnum, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Axis {
    /// Trace time, in seconds.
    Time,
    /// Requests, counted from the first (for traces without timestamps, and Figure 10).
    Requests,
}

#[derive(Args)]
struct SchemesArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Replacement policy of all three caches.
    #[arg(long, default_value = "lru")]
    policy: Policy,
    /// Cache size: bytes (k, m, g suffixes) or a percentage of the working set (e.g. 50%).
    #[arg(long, default_value = "50%")]
    cache_size: String,
    /// Warm-up size: bytes or a percentage of the working set.
    #[arg(long, default_value = "10%")]
    warmup_size: String,
    /// Warm-up algorithm: last-k, first-k, top-k, random-k.
    #[arg(long, default_value = "last-k")]
    algorithm: Algorithm,
    /// Warm-up region size in bytes (the paper's are 4k and 1m).
    #[arg(long, default_value = "1m")]
    region: String,
    /// What T, intervals and the history window are measured in.
    #[arg(long, value_enum, default_value_t = Axis::Time)]
    axis: Axis,
    /// T, when the new caches are created (seconds or requests from the start; default half-way).
    #[arg(long)]
    start: Option<f64>,
    /// Interval length (seconds, or requests); default 600 s, or 1 % of the trace in requests.
    #[arg(long)]
    interval: Option<f64>,
    /// The history the algorithms choose from: this much before T (seconds, or requests;
    /// default 24 hours, or everything before T in requests).
    #[arg(long)]
    history: Option<f64>,
    /// Disk read-ahead in bytes (0: none; the paper's is 128k).
    #[arg(long, default_value = "0")]
    readahead: String,
    /// Violation threshold Th_V of Equation 1.
    #[arg(long, default_value_t = 0.8)]
    th_v: f64,
    /// Convergence threshold Th_N of Equation 1.
    #[arg(long, default_value_t = 0.03)]
    th_n: f64,
    /// Sequential bandwidth for the pre-load time estimate, MB/s.
    #[arg(long, default_value_t = 100.0)]
    preload_mb_per_s: f64,
    /// Also measure the pre-load on this simulator device (a preset, e.g. cheetah-15k): in
    /// place (metadata-only) and from a snapshot (metadata+data), 32 reads outstanding.
    #[arg(long)]
    preload_device: Option<String>,
    /// Seed of Random-K, and of a generated workload (`gen:…` without its own `seed=`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs seeds --seed … --seed + K − 1 and prints each figure's mean, minimum – maximum and
    /// standard deviation over them.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SimulateArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Replacement policy: lru, fifo or clock.
    #[arg(long, default_value = "lru")]
    policy: Policy,
    /// Cache size in bytes (k, m, g suffixes), rounded down to whole 4 KiB blocks.
    #[arg(long)]
    cache_size: String,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Simulated {
    policy: Policy,
    cache_bytes: u64,
    cache_blocks: u64,
    #[serde(flatten)]
    counts: Counts,
    read_hit_rate: Option<f64>,
    seconds: f64,
    requests_per_s: f64,
}

pub fn run(args: WarmupArgs) -> Result<()> {
    match args.command {
        WarmupCommand::Simulate(a) => simulate(a),
        WarmupCommand::Schemes(a) => schemes(a),
    }
}

fn drive<C: Cache>(mut cache: C, input: &InputArgs) -> Result<Counts> {
    let mut counts = Counts::default();
    for_each_record(input, |_, record| apply(&mut cache, record, &mut counts))?;
    Ok(counts)
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let cache_bytes =
        cordillera_sim::presets::parse_size(&a.cache_size).map_err(anyhow::Error::msg)?;
    let blocks = cache_bytes / BLOCK_BYTES;
    if blocks >= u64::from(u32::MAX) {
        bail!(
            "--cache-size {cache_bytes} is over the simulator's limit of 2^32 - 1 blocks (16 TiB)"
        );
    }
    let capacity = blocks as usize;
    let started = Instant::now();
    let counts = match a.policy {
        Policy::Lru => drive(Lru::new(capacity), &a.input)?,
        Policy::Fifo => drive(Fifo::new(capacity), &a.input)?,
        Policy::Clock => drive(Clock::new(capacity), &a.input)?,
    };
    let seconds = started.elapsed().as_secs_f64();
    let out = Simulated {
        policy: a.policy,
        cache_bytes,
        cache_blocks: blocks,
        read_hit_rate: counts.read_hit_rate(),
        requests_per_s: counts.requests as f64 / seconds.max(1e-9),
        counts,
        seconds,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let c = &out.counts;
    println!(
        "{} cache of {} blocks ({} bytes), starting empty",
        out.policy, out.cache_blocks, out.cache_bytes
    );
    println!(
        "  requests            {:>14} ({} reads, {} writes)",
        c.requests, c.read_requests, c.write_requests
    );
    println!("  read block accesses {:>14}", c.read_block_accesses);
    println!(
        "  read block hits     {:>14}   hit rate {}",
        c.read_block_hits,
        out.read_hit_rate
            .map_or("-".to_owned(), |r| format!("{:.2} %", r * 100.0))
    );
    println!("  write block accesses{:>14}", c.write_block_accesses);
    println!(
        "  {:.2} s, {:.1} M requests/s (reading the trace included)",
        out.seconds,
        out.requests_per_s / 1e6
    );
    Ok(())
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
        cordillera_sim::presets::parse_size(text).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    Ok(bytes / BLOCK_BYTES)
}

#[derive(Serialize)]
struct SchemeRow {
    name: &'static str,
    /// Equation 1's T_converge; `null` when the scheme never converged within the trace.
    converge_intervals: Option<usize>,
    converge: Option<f64>,
    server_load_reduction: Option<f64>,
}

#[derive(Serialize)]
struct SchemesReport {
    policy: Policy,
    algorithm: Algorithm,
    axis: Axis,
    requests: usize,
    working_set_blocks: u64,
    cache_blocks: u64,
    warmup_blocks: u64,
    region_bytes: u64,
    start: f64,
    interval: f64,
    th_v: f64,
    th_n: f64,
    preload_s: f64,
    /// Measured on `--preload-device`: reading the blocks in place, and from a snapshot.
    preload_device: Option<String>,
    preload_metadata_only_s: Option<f64>,
    preload_snapshot_s: Option<f64>,
    /// Per the paper: (cold − (warmed + pre-load)) ÷ cold, in percent; `None` when cold is 0.
    converge_improvement_percent: Option<f64>,
    schemes: Vec<SchemeRow>,
    /// Per interval from T: read hit rates of always-warm, cold, warmed.
    intervals: Vec<[Option<f64>; 3]>,
}

/// The third pass of `warmup schemes`: the trace through always-warm, cold and warmed caches.
fn three<C: Cache>(
    input: &InputArgs,
    axis: Axis,
    timeline: Timeline,
    preload: &[u64],
    make: impl Fn() -> C,
) -> Result<[Vec<schemes::Interval>; 3]> {
    let mut three = schemes::Three::new(timeline, preload, make);
    let mut index = 0;
    for_each_record(input, |_, r| {
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

/// Streams the trace three times, holding only the working set's blocks, the history window
/// and the caches: (1) its extent and working set, (2) the history the warm-up chooses from,
/// (3) the three schemes.
fn schemes(a: SchemesArgs) -> Result<()> {
    a.input.input().refuse_stdin("warmup schemes")?;
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    if a.seeds > 1 {
        return schemes_over_seeds(&a);
    }
    let report = schemes_report(&a, &a.input, a.seed)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_schemes(&a, &report);
    Ok(())
}

/// One run of the three schemes on `input`, Random-K drawing from `seed`.
fn schemes_report(a: &SchemesArgs, input: &InputArgs, seed: u64) -> Result<SchemesReport> {
    let (mut n, mut first, mut last) = (0usize, i64::MAX, i64::MIN);
    let mut first_time = None;
    let mut one_time = true;
    let mut seen = rustc_hash::FxHashSet::default();
    for_each_record(input, |_, r| {
        let r = on_axis(a.axis, n, r);
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
    if a.axis == Axis::Time && one_time {
        bail!("the trace has no timestamps: use --axis requests");
    }
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
    let region_bytes =
        cordillera_sim::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    if region_bytes == 0 || !region_bytes.is_multiple_of(BLOCK_BYTES) {
        bail!("--region must be a positive multiple of 4 KiB");
    }
    let readahead_bytes =
        cordillera_sim::presets::parse_size(&a.readahead).map_err(anyhow::Error::msg)?;
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
    let mut history = Vec::new();
    let mut index = 0;
    for_each_record(input, |_, r| {
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
    };
    let [always, cold, warmed] = &series;
    let cold_t = schemes::convergence(cold, always, a.th_v, a.th_n);
    let warmed_t = schemes::convergence(warmed, always, a.th_v, a.th_n);
    let interval = interval_ns as f64 / unit;
    let preload_s = preload.len() as f64 * BLOCK_BYTES as f64 / (a.preload_mb_per_s * 1e6);
    let preload_axis = if a.axis == Axis::Time { preload_s } else { 0.0 };
    let (mut metadata_only_s, mut snapshot_s) = (None, None);
    if let Some(name) = &a.preload_device {
        let mut device = cordillera_sim::presets::build(name, None).map_err(anyhow::Error::msg)?;
        metadata_only_s = Some(
            cordillera_lab::bonfire::preload::metadata_only_s(device.as_mut(), &preload, 32)
                .map_err(anyhow::Error::msg)?,
        );
        let mut device = cordillera_sim::presets::build(name, None).map_err(anyhow::Error::msg)?;
        snapshot_s = Some(
            cordillera_lab::bonfire::preload::snapshot_s(device.as_mut(), &preload, 32)
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

/// The report as text.
fn print_schemes(a: &SchemesArgs, report: &SchemesReport) {
    let interval = report.interval;
    let cold_converge = report.schemes[1].converge;
    let warmed_converge = report.schemes[2].converge;
    let unit_name = if a.axis == Axis::Time {
        "s"
    } else {
        "requests"
    };
    println!(
        "{} requests; working set {} blocks; {} cache of {} blocks; {} warmed {} blocks ({} B regions) from the history before T = {:.0} {unit_name}; pre-load {:.1} s at {} MB/s",
        report.requests,
        report.working_set_blocks,
        report.policy,
        report.cache_blocks,
        report.algorithm,
        report.warmup_blocks,
        report.region_bytes,
        report.start,
        report.preload_s,
        a.preload_mb_per_s
    );
    println!(
        "{:>12} {:>12} {:>12} {:>12}",
        format!("from T, {unit_name}"),
        "always-warm",
        "cold",
        "warmed"
    );
    let pct = |h: Option<f64>| h.map_or("-".to_owned(), |h| format!("{:.1} %", h * 100.0));
    for (i, row) in report.intervals.iter().enumerate() {
        println!(
            "{:>12.0} {:>12} {:>12} {:>12}",
            i as f64 * interval,
            pct(row[0]),
            pct(row[1]),
            pct(row[2])
        );
    }
    let when = |t: Option<f64>| {
        t.map_or("never (within the trace)".to_owned(), |t| {
            format!("{t:.0} {unit_name}")
        })
    };
    println!(
        "T_converge (Th_V {}, Th_N {}): cold {}, warmed {}; improvement {}",
        a.th_v,
        a.th_n,
        when(cold_converge),
        when(warmed_converge),
        match (
            cold_converge,
            warmed_converge,
            report.converge_improvement_percent
        ) {
            (_, _, Some(p)) => format!("{p:.0} %"),
            (None, _, None) | (_, None, None) => "- (a scheme never converged)".to_owned(),
            _ => "- (cold converges at once)".to_owned(),
        }
    );
    if let (Some(name), Some(m), Some(s)) = (
        &report.preload_device,
        report.preload_metadata_only_s,
        report.preload_snapshot_s,
    ) {
        println!("pre-load on {name}: in place (metadata-only) {m:.2} s, from a snapshot (metadata+data) {s:.2} s");
    }
    println!(
        "server load reduction over {}: always-warm {}, cold {}, warmed {}",
        if report.schemes[1].converge_intervals.is_some() {
            "cold's T_converge"
        } else {
            "the whole run (cold never converged)"
        },
        pct(report.schemes[0].server_load_reduction),
        pct(report.schemes[1].server_load_reduction),
        pct(report.schemes[2].server_load_reduction)
    );
}

/// `--seeds K`: the run over K seeds (each its own generated workload, when the trace is one
/// without a seed of its own, and its own Random-K), on the machine's cores; the spread of
/// T_converge, the improvement and the load reductions.
fn schemes_over_seeds(a: &SchemesArgs) -> Result<()> {
    use cordillera_lab::spread::{spread, Figure};
    let spec = a.input.file.to_string_lossy().into_owned();
    let workload_seeded = cordillera_lab::input::seeded_spec(&spec, 0).is_some();
    let seeds: Vec<u64> = (a.seed..a.seed + a.seeds).collect();
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
                let mut input = a.input.clone();
                if let Some(seeded) = cordillera_lab::input::seeded_spec(&spec, seed) {
                    input.file = seeded.into();
                }
                eprintln!("warmup schemes: seed {seed}");
                let report = schemes_report(a, &input, seed);
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
        let unit = if a.axis == Axis::Time {
            "s"
        } else {
            "requests"
        };
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
    let rows = spread(&figures);
    let never: Vec<u64> = runs
        .iter()
        .zip(&seeds)
        .filter(|(r, _)| r.schemes[2].converge.is_none() || r.schemes[1].converge.is_none())
        .map(|(_, s)| *s)
        .collect();
    if a.json {
        #[derive(Serialize)]
        struct OverSeeds<'a> {
            seeds: &'a [u64],
            workload_seeded: bool,
            /// Seeds where cold or warmed never converged (left out of T_converge's spread).
            never_converged: &'a [u64],
            spread: &'a [cordillera_lab::spread::Spread],
            runs: &'a [SchemesReport],
        }
        let out = OverSeeds {
            seeds: &seeds,
            workload_seeded,
            never_converged: &never,
            spread: &rows,
            runs: &runs,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "warmup schemes over seeds {}–{} ({}): mean, min – max, standard deviation",
        seeds[0],
        seeds[seeds.len() - 1],
        if workload_seeded {
            "each its own generated workload and Random-K"
        } else {
            "the same trace; only Random-K's choices change"
        }
    );
    for r in &rows {
        println!(
            "  {:<48} {:>10.2} {}  ({:.2} – {:.2}, sd {:.2}; {} seeds)",
            r.label,
            r.mean,
            r.unit,
            r.min,
            r.max,
            r.std_dev,
            r.values.len()
        );
    }
    if !never.is_empty() {
        println!(
            "  a scheme never converged with seed(s) {never:?}: left out of T_converge's spread"
        );
    }
    Ok(())
}
