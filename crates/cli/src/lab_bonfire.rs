//! `cordillera lab bonfire`: Bonfire §4.3 (Tables 2–3, Figures 6–8) on a multi-day trace and
//! §6.1 (Figure 10) on the Zipf workload, with tables, JSON, CSV and SVG.

use std::fmt::Write as _;
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cordillera_lab::bonfire::{self, Options, Report, Setting, ZipfOptions, ZipfReport};
use cordillera_lab::bonfire_overheads::{Overhead, OverheadOptions};
use cordillera_sim::presets::parse_size;
use cordillera_sim::workload::{Generated, Reaccess};
use cordillera_trace::RecordReader;
use cordillera_types::units::NS_PER_S;
use serde::Serialize;

use crate::lab_io::{trace_input, writer};
use crate::lab_plots::{bars, chart, Series};
use crate::trace_cmd::for_each_record;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PartArg {
    /// Days warmed from the day before: Table 3, Figures 6–8 and the daily-reaccess shift.
    Days,
    /// §6.1: the Zipf workload of Figure 10.
    Zipf,
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
    /// Parts to run (repeat or separate with commas); both when absent.
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
    /// Table 4: disk model of the data and logging disks (the paper's: 7,200 rpm SATA).
    #[arg(long, default_value = "sata-7200")]
    disk: String,
    /// Table 4: the Zipf foreground speed, MB/s (the paper assumes 1 Gbps).
    #[arg(long, default_value_t = 125.0)]
    zipf_foreground_mb_per_s: f64,
    /// Worker threads (default: the cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the built-in trace, the Zipf workload and Random-K.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and SVG plots into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Serialize)]
struct FullReport {
    days: Option<Report>,
    zipf: Option<ZipfReport>,
}

/// The paper's value when the grid has it, else the grid's middle value.
fn middle_of<T: Copy + PartialEq + PartialOrd>(grid: &[T], preferred: T) -> T {
    if grid.contains(&preferred) {
        return preferred;
    }
    let mut sorted = grid.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    sorted[sorted.len() / 2]
}

pub fn run(a: BonfireArgs) -> Result<()> {
    let parts = if a.parts.is_empty() {
        vec![PartArg::Days, PartArg::Zipf]
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
    cordillera_sim::presets::build(&a.disk, None).map_err(|e| anyhow::anyhow!("--disk: {e}"))?;
    if a.day_s == 0 || a.interval_s == 0 {
        bail!("--day-s and --interval-s must be positive");
    }
    let o = Options {
        day_ns: (a.day_s as i64).saturating_mul(NS_PER_S),
        day_start_hour: a.day_start_hour,
        interval_ns: (a.interval_s as i64).saturating_mul(NS_PER_S),
        middle: Setting {
            cache_pct: middle_of(&a.cache_pct, 50.0),
            warmup_pct: middle_of(&a.warmup_pct, 10.0),
            region_bytes: middle_of(&regions, 1 << 20),
            th_v: middle_of(&a.th_v, 0.8),
            th_n: middle_of(&a.th_n, 0.03),
        },
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
    let started = Instant::now();
    let verbose = io::stderr().is_terminal() || std::env::var_os("CORDILLERA_PROGRESS").is_some();
    let progress = |line: &str| {
        if verbose {
            eprintln!("[{:>6.1} s] {line}", started.elapsed().as_secs_f64());
        }
    };
    let mut full = FullReport {
        days: None,
        zipf: None,
    };
    if parts.contains(&PartArg::Days) {
        let (source, records, names, info) = match &a.trace {
            Some(path) => {
                let input = trace_input(path, a.format, a.time_unit, a.skip_invalid);
                let mut records = Vec::new();
                let reader = for_each_record(&input, |_, r| records.push(*r))?;
                progress(&format!("{} requests read", records.len()));
                (
                    path.display().to_string(),
                    records,
                    reader.volumes().clone(),
                    reader.info().clone(),
                )
            }
            None => {
                let w = Reaccess {
                    days: a.days,
                    seed: a.seed,
                    ..Reaccess::bonfire()
                };
                w.validate().map_err(anyhow::Error::msg)?;
                let g = Generated::new(&w.volume_names(), Box::new(w.records()));
                let (info, names) = (g.info().clone(), g.volumes().clone());
                let records: Vec<_> = w.records().collect();
                progress(&format!("gen:reaccess: {} requests", records.len()));
                (
                    format!("gen:reaccess:days={},seed={}", a.days, a.seed),
                    records,
                    names,
                    info,
                )
            }
        };
        let records = only_volumes(records, &names, &a.volumes)?;
        let report = bonfire::run(&source, records, &names, &info, &o, &progress)
            .map_err(anyhow::Error::msg)?;
        full.days = Some(report);
    }
    if parts.contains(&PartArg::Zipf) {
        let z = ZipfOptions {
            workload: cordillera_sim::workload::Zipf {
                count: a.zipf_count,
                alpha: a.zipf_alpha,
                seed: a.seed,
                ..cordillera_sim::workload::Zipf::bonfire()
            },
            cache_pct: a.zipf_cache_pct,
            foreground_bytes_per_s: a.zipf_foreground_mb_per_s * 1e6,
            overhead,
            ..ZipfOptions::default()
        };
        progress(&format!("Zipf workload: {} reads", a.zipf_count));
        full.zipf = Some(bonfire::zipf(&z).map_err(anyhow::Error::msg)?);
    }
    if let Some(dir) = &a.out {
        write_outputs(dir, &full)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&full)?);
    } else {
        if let Some(r) = &full.days {
            print!("{}", days_text(r));
        }
        if let Some(z) = &full.zipf {
            print!("{}", zipf_text(z));
        }
        print!("{}", overheads_text(&full));
        if let Some(dir) = &a.out {
            println!(
                "\nreport.json, CSV files and SVG plots in {}",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The records of the named volumes (all when none are named).
fn only_volumes(
    records: Vec<cordillera_trace::Record>,
    names: &cordillera_trace::VolumeTable,
    wanted: &[String],
) -> Result<Vec<cordillera_trace::Record>> {
    if wanted.is_empty() {
        return Ok(records);
    }
    let mut ids = Vec::new();
    for w in wanted {
        match names.lookup(w) {
            Some(id) => ids.push(id),
            None => bail!("--volume {w}: the trace has no such volume"),
        }
    }
    Ok(records
        .into_iter()
        .filter(|r| ids.contains(&r.volume))
        .collect())
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn region_name(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{} KB", bytes >> 10)
    }
}

fn days_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Bonfire §4.3 on {}: {}, each warmed from the one before; hit rates per {:.0} s; LRU caches{}\n",
        r.source,
        if r.day_s == 86_400.0 {
            "days of 24 h".to_owned()
        } else {
            format!("periods (\"days\") of {} s", r.day_s)
        },
        r.interval_s,
        if r.readahead_bytes > 0 {
            format!(", {} KiB read-ahead", r.readahead_bytes >> 10)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "Volumes, reaccess classes (% of reaccessed blocks) and the decision tree (Figure 8)"
    );
    for v in &r.volumes {
        let _ = write!(
            s,
            "  {:<12} {:>9} requests ({:>3.0} % reads), working set {:>9} blocks, {} day(s)",
            v.volume,
            v.requests,
            100.0 * v.read_requests as f64 / v.requests.max(1) as f64,
            v.working_set_blocks,
            v.days
        );
        if let Some(why) = &v.skipped {
            let _ = writeln!(s, " — skipped: {why}");
            continue;
        }
        let _ = writeln!(s);
        if let Some(c) = &v.reaccess {
            let _ = writeln!(
                s,
                "      hourly {:.0} %, daily {:.0} %, other {:.0} %; {:.0} % of reaccesses within 10 MiB",
                c.hourly_block_pct, c.daily_block_pct, c.other_block_pct, c.reuse_under_10mib_pct
            );
        }
        if let Some(rec) = &v.recommendation {
            let _ = writeln!(s, "      recommended: {} — {}", rec.algorithm, rec.because);
        }
        let _ = match v.measured_best {
            Some(best) => writeln!(
                s,
                "      measured best at the middle setting: {best} ({} of {} days)",
                v.measured_best_days, v.warmed_days
            ),
            None => writeln!(
                s,
                "      measured best at the middle setting: none (the top is shared over {} days)",
                v.warmed_days
            ),
        };
    }
    let m = &r.middle;
    let _ = writeln!(
        s,
        "\nTable 3 over the Table 2 grid: medians over (volume, day) of each one's best algorithm"
    );
    let _ = writeln!(
        s,
        "  {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>9} | {:>8} {:>8} {:>8} | {:>6} {:>6} {:>6} {:>7}",
        "region",
        "cache",
        "warmup",
        "Th_V",
        "Th_N",
        "cases",
        "T_pre min",
        "cold h",
        "bonf. h",
        "impr. %",
        "SLR cold",
        "always",
        "bonf.",
        "impr. %"
    );
    let mut regions: Vec<u64> = r.table.iter().map(|t| t.region_bytes).collect();
    regions.dedup();
    regions.sort_unstable_by(|a, b| b.cmp(a));
    regions.dedup();
    for region in regions {
        for t in r.table.iter().filter(|t| t.region_bytes == region) {
            let _ = writeln!(
                s,
                "  {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>9} | {:>8} {:>8} {:>8} | {:>8} {:>6} {:>6} {:>7}",
                region_name(t.region_bytes),
                t.cache_pct,
                t.warmup_pct,
                t.th_v * 100.0,
                t.th_n * 100.0,
                t.cases,
                opt(t.preload_min, 2),
                opt(t.cold_converge_h, 1),
                opt(t.bonfire_converge_h, 1),
                opt(t.converge_improvement_pct, 0),
                opt(t.load_reduction_cold_pct, 0),
                opt(t.load_reduction_always_pct, 0),
                opt(t.load_reduction_bonfire_pct, 0),
                opt(t.load_reduction_improvement_pct, 0),
            );
        }
    }
    let _ = writeln!(
        s,
        "\nFigures 6–7 at the middle setting (cache {} %, warm-up {} %, {} regions, Th_V {}, Th_N {}): T_converge h [server load reduction %]",
        m.cache_pct,
        m.warmup_pct,
        region_name(m.region_bytes),
        m.th_v,
        m.th_n
    );
    for f in &r.figures {
        let _ = write!(
            s,
            "  {:<12} day {}: cold {:.1} [{}], always-warm [{}]",
            f.volume,
            f.day,
            f.cold_converge_h,
            opt(f.load_reduction_cold_pct, 0),
            opt(f.load_reduction_always_pct, 0)
        );
        for x in &f.algorithms {
            let _ = write!(
                s,
                ", {} {:.1} [{}]",
                x.algorithm,
                x.converge_h,
                opt(x.load_reduction_pct, 0)
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\nHeadline at the middle setting, over {} warmed (volume, day) pairs",
        r.headline.cases
    );
    s.push_str(&tally_text(&r.headline));
    for d in &r.shifted_daily {
        let _ = writeln!(
            s,
            "\nDaily reaccesses (§4.3.3): {} with days starting at {:02}:00, over {} days",
            d.volume, d.day_start_hour, d.headline.cases
        );
        s.push_str(&tally_text(&d.headline));
    }
    s
}

fn tally_text(h: &bonfire::Headline) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<9} {:>13} {:>10} {:>18} {:>17} {:>13} {:>12}",
        "algorithm",
        "best T_conv",
        "best SLR",
        "sooner than cold",
        "more SLR than cold",
        "median T_conv",
        "median SLR"
    );
    for t in &h.algorithms {
        let _ = writeln!(
            s,
            "  {:<9} {:>13} {:>10} {:>18} {:>17} {:>11} h {:>10} %",
            t.algorithm.to_string(),
            t.best_converge,
            t.best_load,
            t.converges_sooner_than_cold,
            t.reduces_more_load_than_cold,
            opt(t.median_converge_h, 1),
            opt(t.median_load_reduction_pct, 0)
        );
    }
    s
}

fn zipf_text(z: &ZipfReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nBonfire §6.1 (Figure 10): {} 4 KiB Zipf reads, α = {}, over {:.0} GiB; working set {:.2} GB; caches of {} blocks created at I/O {}; Last-K of 4 KiB blocks",
        z.requests,
        z.alpha,
        z.span_bytes as f64 / (1u64 << 30) as f64,
        z.working_set_blocks as f64 * 4096.0 / 1e9,
        z.cache_blocks,
        z.start_io
    );
    let _ = writeln!(
        s,
        "  {:<14} {:>14} {:>16} {:>16} {:>14}",
        "scheme", "pre-loaded", "hit rate, half 2", "hit rate at end", "converged at"
    );
    for x in &z.series {
        let _ = writeln!(
            s,
            "  {:<14} {:>14} {:>14} % {:>14} % {:>14}",
            x.scheme,
            x.preload_blocks,
            opt(x.hit_rate.map(|h| h * 100.0), 1),
            opt(x.final_hit_rate.map(|h| h * 100.0), 1),
            if x.converge_io >= z.requests {
                "never".to_owned()
            } else {
                format!("{:.2} M I/O", x.converge_io as f64 / 1e6)
            }
        );
    }
    let _ = writeln!(
        s,
        "  (converged: Equation 1 with Th_V {} and Th_N {})",
        z.th_v, z.th_n
    );
    s
}

/// Every Table 4 column the run measured.
fn all_overheads(r: &FullReport) -> Vec<&Overhead> {
    let mut all: Vec<&Overhead> = r.zipf.iter().map(|z| &z.overhead).collect();
    if let Some(d) = &r.days {
        all.extend(d.overheads.iter());
    }
    all
}

fn bytes_text(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

fn overheads_text(r: &FullReport) -> String {
    let all = all_overheads(r);
    let mut s = String::new();
    if all.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\nOverheads (Table 4): monitoring a window, then pre-loading Last-K on {} disk models; metadata-only / metadata+data",
        all[0].device
    );
    for o in all {
        let _ = writeln!(
            s,
            "  {}: {} requests over {:.0} s, {} warm-up blocks",
            o.workload, o.window_requests, o.window_s, o.warmup_blocks
        );
        let _ = writeln!(
            s,
            "      log space      {:>10} / {:>10}",
            bytes_text(o.metadata_only.log_bytes as f64),
            bytes_text(o.metadata_data.log_bytes as f64)
        );
        let _ = writeln!(
            s,
            "      log bandwidth  {:>8}/s / {:>8}/s",
            bytes_text(o.metadata_only.log_bytes_per_s),
            bytes_text(o.metadata_data.log_bytes_per_s)
        );
        let _ = writeln!(
            s,
            "      pre-warm time  {:>8.1} s / {:>8.1} s",
            o.metadata_only.prewarm_s, o.metadata_data.prewarm_s
        );
    }
    s
}

fn cell(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.4}"))
}

fn write_outputs(dir: &Path, r: &FullReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = writer(dir);
    write("report.json", serde_json::to_string_pretty(r)?)?;
    let mut t4 = String::from(
        "workload,scheme,window_requests,window_s,warmup_blocks,log_bytes,log_writes,log_bytes_per_s,preload_log_read_bytes,prewarm_s\n",
    );
    for o in all_overheads(r) {
        for (scheme, x) in [
            ("metadata-only", &o.metadata_only),
            ("metadata+data", &o.metadata_data),
        ] {
            let _ = writeln!(
                t4,
                "{},{scheme},{},{:.3},{},{},{},{:.1},{},{:.3}",
                o.workload,
                o.window_requests,
                o.window_s,
                o.warmup_blocks,
                x.log_bytes,
                x.log_writes,
                x.log_bytes_per_s,
                x.preload_log_read_bytes,
                x.prewarm_s
            );
        }
    }
    write("table4_overheads.csv", t4)?;
    if let Some(d) = &r.days {
        let mut cases = String::from(
            "volume,day,cache_pct,warmup_pct,region_bytes,algorithm,th_v,th_n,preload_blocks,preload_s,cold_converge_h,warmed_converge_h,converge_improvement_pct,load_reduction_cold_pct,load_reduction_always_pct,load_reduction_warmed_pct\n",
        );
        for c in &d.cases {
            let _ = writeln!(
                cases,
                "{},{},{},{},{},{},{},{},{},{:.3},{:.4},{:.4},{},{},{},{}",
                c.volume,
                c.day,
                c.cache_pct,
                c.warmup_pct,
                c.region_bytes,
                c.algorithm,
                c.th_v,
                c.th_n,
                c.preload_blocks,
                c.preload_s,
                c.cold_converge_h,
                c.warmed_converge_h,
                cell(c.converge_improvement_pct),
                cell(c.load_reduction_cold_pct),
                cell(c.load_reduction_always_pct),
                cell(c.load_reduction_warmed_pct)
            );
        }
        write("cases.csv", cases)?;
        let mut t3 = String::from(
            "region_bytes,cache_pct,warmup_pct,th_v,th_n,cases,preload_min,cold_converge_h,bonfire_converge_h,converge_improvement_pct,load_reduction_cold_pct,load_reduction_always_pct,load_reduction_bonfire_pct,load_reduction_improvement_pct\n",
        );
        for t in &d.table {
            let _ = writeln!(
                t3,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                t.region_bytes,
                t.cache_pct,
                t.warmup_pct,
                t.th_v,
                t.th_n,
                t.cases,
                cell(t.preload_min),
                cell(t.cold_converge_h),
                cell(t.bonfire_converge_h),
                cell(t.converge_improvement_pct),
                cell(t.load_reduction_cold_pct),
                cell(t.load_reduction_always_pct),
                cell(t.load_reduction_bonfire_pct),
                cell(t.load_reduction_improvement_pct)
            );
        }
        write("table3.csv", t3)?;
        let mut f67 = String::from("volume,day,scheme,converge_h,load_reduction_pct\n");
        for f in &d.figures {
            let _ = writeln!(
                f67,
                "{},{},cold,{},{}",
                f.volume,
                f.day,
                f.cold_converge_h,
                cell(f.load_reduction_cold_pct)
            );
            let _ = writeln!(
                f67,
                "{},{},always-warm,0,{}",
                f.volume,
                f.day,
                cell(f.load_reduction_always_pct)
            );
            for x in &f.algorithms {
                let _ = writeln!(
                    f67,
                    "{},{},{},{},{}",
                    f.volume,
                    f.day,
                    x.algorithm,
                    x.converge_h,
                    cell(x.load_reduction_pct)
                );
            }
        }
        write("fig6_7_algorithms.csv", f67)?;
        let mut rec = String::from(
            "volume,hourly_block_pct,daily_block_pct,other_block_pct,reuse_under_10mib_pct,recommended,start_at_hour,measured_best,measured_best_days,warmed_days\n",
        );
        for v in d.volumes.iter().filter(|v| v.skipped.is_none()) {
            let (Some(c), Some(r)) = (&v.reaccess, &v.recommendation) else {
                continue;
            };
            let _ = writeln!(
                rec,
                "{},{:.2},{:.2},{:.2},{:.2},{},{},{},{},{}",
                v.volume,
                c.hourly_block_pct,
                c.daily_block_pct,
                c.other_block_pct,
                c.reuse_under_10mib_pct,
                r.algorithm,
                r.start_at_hour.map_or(String::new(), |h| h.to_string()),
                v.measured_best.map_or(String::new(), |a| a.to_string()),
                v.measured_best_days,
                v.warmed_days
            );
        }
        write("fig8_recommendations.csv", rec)?;
        days_svgs(dir, d)?;
    }
    if let Some(z) = &r.zipf {
        let mut csv = String::from("io,scheme,hit_rate\n");
        for x in &z.series {
            for (i, h) in x.hit_rates.iter().enumerate() {
                let _ = writeln!(
                    csv,
                    "{},{},{}",
                    z.start_io + i as u64 * z.interval_ios,
                    x.scheme,
                    cell(*h)
                );
            }
        }
        write("fig10_zipf.csv", csv)?;
        let series: Vec<Series> = z
            .series
            .iter()
            .map(|x| Series {
                name: x.scheme.clone(),
                points: x
                    .hit_rates
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| {
                        h.map(|h| {
                            (
                                (z.start_io + i as u64 * z.interval_ios) as f64 / 1e6,
                                h * 100.0,
                            )
                        })
                    })
                    .collect(),
            })
            .collect();
        chart(
            &dir.join("fig10_zipf.svg"),
            "Read hit rate of the Zipf workload (Bonfire Fig. 10)",
            "I/Os, millions",
            "read hit rate, %",
            false,
            &series,
        )?;
    }
    Ok(())
}

fn days_svgs(dir: &Path, d: &Report) -> Result<()> {
    if d.figures.is_empty() {
        return Ok(());
    }
    let groups: Vec<String> = d
        .figures
        .iter()
        .map(|f| format!("{} d{}", f.volume, f.day))
        .collect();
    let algs: Vec<_> = d.figures[0]
        .algorithms
        .iter()
        .map(|x| x.algorithm)
        .collect();
    let mut conv = vec![(
        "cold".to_owned(),
        d.figures
            .iter()
            .map(|f| Some(f.cold_converge_h))
            .collect::<Vec<_>>(),
    )];
    let mut slr = vec![
        (
            "cold".to_owned(),
            d.figures
                .iter()
                .map(|f| f.load_reduction_cold_pct)
                .collect::<Vec<_>>(),
        ),
        (
            "always-warm".to_owned(),
            d.figures
                .iter()
                .map(|f| f.load_reduction_always_pct)
                .collect(),
        ),
    ];
    for (i, alg) in algs.iter().enumerate() {
        conv.push((
            alg.to_string(),
            d.figures
                .iter()
                .map(|f| f.algorithms.get(i).map(|x| x.converge_h))
                .collect(),
        ));
        slr.push((
            alg.to_string(),
            d.figures
                .iter()
                .map(|f| f.algorithms.get(i).and_then(|x| x.load_reduction_pct))
                .collect(),
        ));
    }
    bars(
        &dir.join("fig6_convergence.svg"),
        "Convergence time at the middle setting (Bonfire Fig. 6)",
        "T_converge, hours",
        &groups,
        &conv,
    )?;
    bars(
        &dir.join("fig7_load_reduction.svg"),
        "Server I/O load reduction (Bonfire Fig. 7)",
        "server load reduction, %",
        &groups,
        &slr,
    )?;
    // The hit rate over each figure day.
    for f in &d.figures {
        let mut names = vec!["always-warm".to_owned(), "cold".to_owned()];
        names.extend(f.algorithms.iter().map(|x| x.algorithm.to_string()));
        let series: Vec<Series> = names
            .iter()
            .enumerate()
            .map(|(k, name)| Series {
                name: name.clone(),
                points: f
                    .hit_rates
                    .iter()
                    .enumerate()
                    .filter_map(|(i, row)| {
                        row[k].map(|h| (i as f64 * d.interval_s / 3600.0, h * 100.0))
                    })
                    .collect(),
            })
            .collect();
        let safe: String = f
            .volume
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        chart(
            &dir.join(format!("hit_rate_{safe}_day{}.svg", f.day)),
            &format!("Read hit rate of {} on day {}", f.volume, f.day),
            "hours into the day",
            "read hit rate, %",
            false,
            &series,
        )?;
    }
    Ok(())
}
