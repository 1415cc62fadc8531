//! `cordillera lab bonfire`: Bonfire §4.3 (Tables 2–3, Figures 6–8) on a multi-day trace and
//! §6.1 (Figure 10) on the Zipf workload, with tables, JSON, CSV and SVG.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use cordillera_lab::bonfire::latency::LatencyOptions;
use cordillera_lab::bonfire::parts::{self, Parts, PartsConfig};
use cordillera_lab::bonfire::replay::ReplayOptions;
use cordillera_lab::bonfire::{Options, Setting, ZipfOptions};
use cordillera_lab::bonfire_overheads::OverheadOptions;
use cordillera_models::presets::parse_size;
use cordillera_types::units::NS_PER_S;

use cordillera_lab::render::bonfire::{
    full_text, seeds_json, seeds_spread, seeds_text, write_outputs, write_seed_files,
};

use crate::lab_io::trace_input;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PartArg {
    /// Days warmed from the day before: Table 3, Figures 6–8 and the daily-reaccess shift.
    Days,
    /// §6.1: the Zipf workload of Figures 10 (hit rate) and 11 (read latency).
    Zipf,
    /// §6.2: the trace replayed to the new-cache day (`--replay-day`), hit rate and read
    /// latency of always-warm, cold and Bonfire per volume (Figures 12–15).
    Replay,
}

#[derive(Args)]
pub struct BonfireArgs {
    /// A multi-day trace (any format `trace stats` reads) or gen:NAME[:key=value,…]; by default
    /// gen:reaccess (an hourly-reaccess volume and a nightly-job volume), `--days` long.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    format: Option<cordillera_trace::Format>,
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    time_unit: Option<cordillera_trace::TimeUnit>,
    /// Only these volumes of the trace (repeat the flag).
    #[arg(long = "volume")]
    volumes: Vec<String>,
    /// Skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Days of the default workload (the paper's traces are a week long).
    #[arg(long, default_value_t = 7)]
    days: u64,
    /// Length of a "day" in seconds: the paper's is 86400; shorter periods let the method run
    /// on short traces (each period warmed from the one before).
    #[arg(long, default_value_t = 86_400)]
    day_s: u64,
    /// Parts to run (repeat or separate with commas); all three when absent.
    #[arg(long, value_enum, value_delimiter = ',')]
    parts: Vec<PartArg>,
    /// Days start at this hour of the trace's clock; by default at the first request (the
    /// paper's MSR days start at 5 PM, the traces' start). Only with 24-hour days.
    #[arg(long)]
    day_start_hour: Option<u32>,
    /// Hit rates are counted per interval of this many seconds (it must divide a day).
    #[arg(long, default_value_t = 600)]
    interval_s: u64,
    /// Cache sizes, % of each volume's working set (Table 2).
    #[arg(long, value_delimiter = ',', default_values_t = [25.0, 50.0, 75.0, 100.0])]
    cache_pct: Vec<f64>,
    /// Warm-up sizes, % of the working set (Table 2).
    #[arg(long, value_delimiter = ',', default_values_t = [5.0, 10.0, 25.0])]
    warmup_pct: Vec<f64>,
    /// Warm-up region sizes (Table 2).
    #[arg(long, value_delimiter = ',', default_values = ["4k", "1m"])]
    region: Vec<String>,
    /// Violation thresholds Th_V of Equation 1 (Table 2).
    #[arg(long, value_delimiter = ',', default_values_t = [0.7, 0.8, 0.9])]
    th_v: Vec<f64>,
    /// Convergence thresholds Th_N of Equation 1 (Table 2).
    #[arg(long, value_delimiter = ',', default_values_t = [0.01, 0.03, 0.05])]
    th_n: Vec<f64>,
    /// The day of Figures 6–7, from 1 (the paper's: five; the last day if the trace is shorter).
    #[arg(long, default_value_t = 5)]
    figure_day: usize,
    /// Sequential bandwidth of the T_preload estimate, MB/s.
    #[arg(long, default_value_t = 100.0)]
    preload_mb_per_s: f64,
    /// Disk read-ahead of every cache (0: none; §4.3.2's is 128k).
    #[arg(long, default_value = "0")]
    readahead: String,
    /// Requests of the Zipf workload (the paper's: five million).
    #[arg(long, default_value_t = 5_000_000)]
    zipf_count: u64,
    /// Zipf exponent (the paper's: 0.4).
    #[arg(long, default_value_t = 0.4)]
    zipf_alpha: f64,
    /// The Zipf caches' size, % of its working set (the paper's 256 GB cache holds all of it).
    #[arg(long, default_value_t = 100.0)]
    zipf_cache_pct: f64,
    /// Table 4: the metadata staging buffer.
    #[arg(long, default_value = "256k")]
    metadata_buffer: String,
    /// Table 4: the data staging buffer (metadata+data).
    #[arg(long, default_value = "128m")]
    data_buffer: String,
    /// Disk model of the data and logging disks (Table 4's pre-load times, the read latencies
    /// of Figures 11, 13 and 15; the paper's: 7,200 rpm SATA).
    #[arg(long, default_value = "sata-7200")]
    disk: String,
    /// Figures 11, 13, 15: the time of a read served by the cache (DRAM), µs.
    #[arg(long, default_value_t = 20.0)]
    hit_us: f64,
    /// Replay (Figures 12–15): the new caches start at the start of this day, from 2 (the
    /// paper's: 6); a volume with fewer days has them at the start of its last day.
    #[arg(long, default_value_t = 6)]
    replay_day: usize,
    /// Replay: cache size, % of each volume's working set (the paper's 256 GB cache against
    /// proj1's 642 GB working set is 40 %).
    #[arg(long, default_value_t = 50.0)]
    replay_cache_pct: f64,
    /// Replay: warm-up size, % of each volume's working set.
    #[arg(long, default_value_t = 25.0)]
    replay_warmup_pct: f64,
    /// Table 4: the Zipf foreground speed, MB/s (the paper assumes 1 Gbps).
    #[arg(long, default_value_t = 125.0)]
    zipf_foreground_mb_per_s: f64,
    /// Worker threads (default: the cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the built-in trace, the Zipf workload and Random-K.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs this many seeds (--seed, --seed + 1, …) and reports the headline figures' mean,
    /// minimum, maximum and standard deviation beside the paper's (Table 3's rows, Figure 10).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// No progress on standard error (it is printed whether or not standard error is a
    /// terminal: a status line on a terminal, a line per step otherwise).
    #[arg(long)]
    quiet: bool,
    /// Print the report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and SVG plots into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: BonfireArgs) -> Result<()> {
    let (o, config) = configure(&a)?;
    let reporter = crate::progress::Progress::new(a.quiet);
    let progress = |line: &str| reporter.step(line);
    if a.seeds > 1 {
        let reports = parts::run_seeds(&config, &o, a.seed..a.seed + a.seeds, &progress)
            .map_err(anyhow::Error::msg)?;
        reporter.finish();
        let builtin = a.trace.is_none();
        let rows = seeds_spread(&reports, builtin);
        if let Some(dir) = &a.out {
            write_seed_files(dir, &reports, &rows)?;
        }
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&seeds_json(&reports, &rows))?
            );
        } else {
            print!("{}", seeds_text(&reports, &rows, builtin));
        }
        return Ok(());
    }
    let full = parts::run_parts(&config, &o, a.seed, &progress).map_err(anyhow::Error::msg)?;
    reporter.finish();
    if let Some(dir) = &a.out {
        write_outputs(dir, &full)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&full)?);
    } else {
        print!("{}", full_text(&full));
        if let Some(dir) = &a.out {
            println!(
                "\nreport.json, CSV files and SVG plots in {}",
                dir.display()
            );
        }
    }
    Ok(())
}

/// How the labs time reads (Figures 11, 13, 15).
fn latency(a: &BonfireArgs) -> LatencyOptions {
    LatencyOptions {
        device: a.disk.clone(),
        hit_ns: (a.hit_us * 1e3).round() as u64,
    }
}

/// The lab's options and parts from the flags, every value checked.
fn configure(a: &BonfireArgs) -> Result<(Options, PartsConfig)> {
    let parts = if a.parts.is_empty() {
        vec![PartArg::Days, PartArg::Zipf, PartArg::Replay]
    } else {
        a.parts.clone()
    };
    if a.cache_pct.is_empty()
        || a.warmup_pct.is_empty()
        || a.region.is_empty()
        || a.th_v.is_empty()
        || a.th_n.is_empty()
    {
        bail!("every grid list needs at least one value");
    }
    let regions = a
        .region
        .iter()
        .map(|r| parse_size(r).map_err(|e| anyhow::anyhow!("--region {r}: {e}")))
        .collect::<Result<Vec<u64>>>()?;
    let readahead_bytes = parse_size(&a.readahead).map_err(anyhow::Error::msg)?;
    let overhead = OverheadOptions {
        metadata_buffer_bytes: parse_size(&a.metadata_buffer)
            .map_err(|e| anyhow::anyhow!("--metadata-buffer: {e}"))?,
        data_buffer_bytes: parse_size(&a.data_buffer)
            .map_err(|e| anyhow::anyhow!("--data-buffer: {e}"))?,
        device: a.disk.clone(),
        ..OverheadOptions::default()
    };
    if overhead.metadata_buffer_bytes == 0 || overhead.data_buffer_bytes == 0 {
        bail!("--metadata-buffer and --data-buffer must be positive");
    }
    cordillera_models::presets::build(&a.disk, None).map_err(|e| anyhow::anyhow!("--disk: {e}"))?;
    if !(a.hit_us.is_finite() && (0.0..=1e6).contains(&a.hit_us)) {
        bail!("--hit-us must be 0 to 1000000");
    }
    ReplayOptions {
        new_cache_day: a.replay_day,
        cache_pct: a.replay_cache_pct,
        warmup_pct: a.replay_warmup_pct,
        ..ReplayOptions::default()
    }
    .validate()
    .map_err(anyhow::Error::msg)?;
    if a.day_s == 0 || a.interval_s == 0 {
        bail!("--day-s and --interval-s must be positive");
    }
    let o = Options {
        day_ns: (a.day_s as i64).saturating_mul(NS_PER_S),
        day_start_hour: a.day_start_hour,
        interval_ns: (a.interval_s as i64).saturating_mul(NS_PER_S),
        middle: Setting::middle_of_grids(&a.cache_pct, &a.warmup_pct, &regions, &a.th_v, &a.th_n),
        cache_pcts: a.cache_pct.clone(),
        warmup_pcts: a.warmup_pct.clone(),
        region_bytes: regions,
        th_vs: a.th_v.clone(),
        th_ns: a.th_n.clone(),
        figure_day: Some(a.figure_day),
        preload_mb_per_s: a.preload_mb_per_s,
        readahead_bytes,
        seed: a.seed,
        overhead: overhead.clone(),
        threads: a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    o.validate().map_err(anyhow::Error::msg)?;
    crate::lab_io::check_seeds(a.seed, a.seeds)?;
    let trace = match &a.trace {
        Some(path) => {
            let input = trace_input(path, a.format, a.time_unit, a.skip_invalid);
            if parts.contains(&PartArg::Days) || parts.contains(&PartArg::Replay) {
                input.refuse_stdin("lab bonfire")?;
            }
            Some(input)
        }
        None => None,
    };
    let config = PartsConfig {
        parts: Parts {
            days: parts.contains(&PartArg::Days),
            zipf: parts.contains(&PartArg::Zipf),
            replay: parts.contains(&PartArg::Replay),
        },
        trace,
        volumes: a.volumes.clone(),
        days: a.days,
        replay: ReplayOptions {
            new_cache_day: a.replay_day,
            cache_pct: a.replay_cache_pct,
            warmup_pct: a.replay_warmup_pct,
            latency: latency(a),
            ..ReplayOptions::default()
        },
        zipf: ZipfOptions {
            workload: cordillera_sim::workload::Zipf {
                count: a.zipf_count,
                alpha: a.zipf_alpha,
                ..cordillera_sim::workload::Zipf::bonfire()
            },
            cache_pct: a.zipf_cache_pct,
            foreground_bytes_per_s: a.zipf_foreground_mb_per_s * 1e6,
            overhead,
            latency: latency(a),
            ..ZipfOptions::default()
        },
    };
    Ok((o, config))
}
