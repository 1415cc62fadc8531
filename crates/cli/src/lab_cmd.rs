//! `cordillera lab …`: the papers' experiments on the simulator.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use cordillera_lab::everest::{self, Opener, Options, Parts};
use cordillera_types::units::s_to_ns;

use cordillera_lab::render::everest::{
    seeds_json, seeds_text, table, write_outputs, write_seed_files,
};
use cordillera_lab::spread;

use crate::progress::Progress;
use crate::trace_cmd::AlignArg;

use crate::lab_io::trace_input;

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Subcommand)]
enum LabCommand {
    /// Everest §4.1 (Figures 5–8, Table 3) and §4.3 (Figure 13) on a trace or generated workload.
    Everest(EverestArgs),
    /// Bonfire §4.3 (Tables 2–3, Figures 6–8) on a multi-day trace, days warmed from the day
    /// before, and §6.1 (Figure 10) on the Zipf workload.
    Bonfire(Box<crate::lab_bonfire::BonfireArgs>),
    /// Sierra §2 and §4: load traces (Figures 1, 2, 8, 9), the gear schedule and power of a
    /// two-day I/O trace (Figures 9, 10), on a generated Hotmail-like workload or your traces.
    Sierra(Box<crate::lab_sierra::SierraArgs>),
    /// Narrow vs wide striping (Goyal et al.): Figures 2–7, the ratio of mean response times
    /// wide over narrow, on simulated RAID-5 arrays of Fujitsu disks.
    Striping(crate::lab_striping::StripingArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum WorkloadArg {
    /// Three peak episodes of an Exchange-like mail server (docs/WORKLOADS.md).
    ExchangeLike,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PartArg {
    /// Figure 7: sensitivity to T_base, T_store and N_reclaim.
    Sensitivity,
    /// Figure 8: 128 MB of NVRAM shared by the three volumes.
    Nvram,
    /// Table 3: a crash when the off-loaded data is largest.
    Recovery,
    /// §4.3 micro-benchmarks (Figure 13).
    Micro,
    /// §4.2 OLTP throughput (Figures 9, 11, 12).
    Oltp,
    /// §4.2's worst case (Figure 10; not in the default set: two 20-minute runs).
    WorstCase,
}

#[derive(Args)]
struct EverestArgs {
    /// A generated workload (the default when no --trace is given).
    #[arg(long, value_enum, conflicts_with = "trace")]
    workload: Option<WorkloadArg>,
    /// A real trace (any format `trace stats` reads), or gen:NAME[:key=value,…].
    #[arg(long)]
    trace: Option<PathBuf>,
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    format: Option<cordillera_trace::Format>,
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    time_unit: Option<cordillera_trace::TimeUnit>,
    /// Skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Peak episodes to replay.
    #[arg(long, default_value_t = 3)]
    episodes: usize,
    /// Request-rate window, seconds (Everest: 1 min).
    #[arg(long, default_value_t = 60.0)]
    rate_window_s: f64,
    /// Segment length, seconds (Everest: 15 min); an episode is the peak's segment and the next.
    #[arg(long, default_value_t = 900.0)]
    segment_s: f64,
    #[arg(long, default_value_t = 32)]
    t_base: u64,
    #[arg(long, default_value_t = 32)]
    t_store: u64,
    #[arg(long, default_value_t = 256)]
    n_reclaim: usize,
    /// The episodes' volumes (Figures 5 and 6): a device kind (hdd-7200, hdd-10k, hdd-15k,
    /// sata-ssd, nvme) or model preset; the other parts keep Everest's testbed.
    #[arg(long, default_value = "hdd-15k")]
    device: String,
    /// The episodes' volumes as arrays of --device: LEVEL:DISKS[:STRIPE_UNIT], or `none` for one
    /// device (default: the testbed's raid0:4).
    #[arg(long, default_value = "raid0:4")]
    array: String,
    /// Off-loaded data is sampled this often (Figure 6), seconds, a multiple of 0.1; by default
    /// the longest episode over 200 (a 30-minute episode: 9 s). The largest off-loaded figure
    /// is exact whatever the sampling.
    #[arg(long)]
    sample_s: Option<f64>,
    /// Parts beyond Figures 5 and 6 (repeat or separate with commas); all when absent.
    #[arg(long, value_enum, value_delimiter = ',')]
    parts: Vec<PartArg>,
    /// Only Figures 5 and 6 (no sensitivity, NVRAM, recovery, micro-benchmarks or OLTP).
    #[arg(long, conflicts_with = "parts")]
    main_only: bool,
    /// Micro-benchmark and OLTP run length, seconds (Everest §4.3: 20 s).
    #[arg(long, default_value_t = 20)]
    micro_s: u64,
    /// The OLTP load's fraction of writes (§4.2: 27–32 % at the disk).
    #[arg(long, default_value_t = 0.3)]
    oltp_writes: f64,
    /// The OLTP load's locality, SPAN:SHARE: a SHARE of its requests fall in the first SPAN
    /// of the 7.5 GB (`0.1:0.9`); uniform when absent.
    #[arg(long, value_name = "SPAN:SHARE")]
    oltp_hot: Option<cordillera_lab::volumes::Hot>,
    /// The worst case's off-load bound, run beside the unbounded one.
    #[arg(long, default_value = "256m", value_parser = cordillera_models::presets::parse_size)]
    worst_bound: u64,
    /// Print the report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and SVG plots into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The seed of every random choice: the generated workload's (unless its spec names one)
    /// and the simulator's.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs this many seeds (--seed, --seed + 1, …) and reports every figure's mean, minimum,
    /// maximum and standard deviation beside the paper's.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Threads for --seeds (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Where an episode lies: centred on its peak (no peak is cut) or on Everest's segment grid
    /// (a peak near a segment's end may be cut; the report says so).
    #[arg(long, value_enum, default_value_t = AlignArg::Centred)]
    align: AlignArg,
    /// No progress on standard error.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.command {
        LabCommand::Everest(a) => run_everest(a),
        LabCommand::Bonfire(a) => crate::lab_bonfire::run(*a),
        LabCommand::Sierra(a) => crate::lab_sierra::run(*a),
        LabCommand::Striping(a) => crate::lab_striping::run(a),
    }
}

fn run_everest(a: EverestArgs) -> Result<()> {
    if !(0.0..1.0).contains(&a.oltp_writes) {
        bail!("--oltp-writes must be at least 0 and below 1");
    }
    if a.sample_s == Some(0.0) || a.micro_s == 0 || a.episodes == 0 {
        bail!("--sample-s, --micro-s and --episodes must be positive");
    }
    let sample_ns = everest::sample_ns(a.sample_s).map_err(anyhow::Error::msg)?;
    if !(a.rate_window_s > 0.0 && a.segment_s >= a.rate_window_s) {
        bail!("--rate-window-s must be positive and at most --segment-s");
    }
    crate::lab_io::check_seeds(a.seed, a.seeds)?;
    let peaks = cordillera_trace::peaks::PeaksOptions {
        rate_window_ns: s_to_ns(a.rate_window_s)
            .ok_or_else(|| anyhow::anyhow!("--rate-window-s out of range"))?,
        segment_ns: s_to_ns(a.segment_s)
            .ok_or_else(|| anyhow::anyhow!("--segment-s out of range"))?,
        top: a.episodes,
        align: a.align.into(),
        ..Default::default()
    };
    peaks.validate().map_err(anyhow::Error::msg)?;
    let parts = if a.main_only {
        Parts::default()
    } else if a.parts.is_empty() {
        Parts::all()
    } else {
        Parts {
            sensitivity: a.parts.contains(&PartArg::Sensitivity),
            nvram: a.parts.contains(&PartArg::Nvram),
            recovery: a.parts.contains(&PartArg::Recovery),
            micro: a.parts.contains(&PartArg::Micro),
            oltp: a.parts.contains(&PartArg::Oltp),
            worst_case: a.parts.contains(&PartArg::WorstCase),
        }
    };
    let device = cordillera_lab::devices::DeviceSpec::parse(
        &a.device,
        (a.array != "none").then_some(a.array.as_str()),
    )
    .map_err(anyhow::Error::msg)?;
    let base = Options {
        peaks,
        t_base: a.t_base,
        t_store: a.t_store,
        n_reclaim: a.n_reclaim,
        sample_ns,
        micro_s: a.micro_s,
        oltp_write_fraction: a.oltp_writes,
        oltp_hot: a.oltp_hot,
        worst_bound_bytes: a.worst_bound,
        parts,
        seed: a.seed,
        device: device.kind.preset.to_owned(),
        array: device.array,
        ..Options::default()
    };
    // A generated workload takes the run's seed, unless its spec names one (then only the
    // simulator's own choices change with --seed).
    let workload_seeded = everest::workload_seeded(a.trace.as_deref());
    if a.seeds > 1
        && !workload_seeded
        && a.trace
            .as_ref()
            .is_some_and(|p| p.to_string_lossy().starts_with("gen:"))
    {
        bail!("--seeds {}: the workload names its own seed (seed=…); leave it out so that each run draws its own", a.seeds);
    }
    let seeds: Vec<u64> = (a.seed..a.seed + a.seeds).collect();
    let progress = Progress::new(a.quiet);
    let per_seed = parts.steps(a.episodes);
    progress.expect(per_seed * seeds.len());
    let run_one = |seed: u64| -> Result<everest::Report> {
        let options = Options {
            seed,
            ..base.clone()
        };
        let (source, mut open) = opener(&a, seed)?;
        let many = seeds.len() > 1;
        let mut say = |line: &str| {
            if many {
                progress.step(&format!("seed {seed}: {line}"))
            } else {
                progress.step(line)
            }
        };
        everest::run(&mut *open, &source, &options, &mut say).map_err(anyhow::Error::msg)
    };
    let reports = run_seeds(&seeds, a.threads, &run_one)?;
    progress.finish();
    if !workload_seeded && seeds.len() > 1 {
        progress.say("the trace is fixed: the spread over seeds is the simulator's alone (disk positions, timing)");
    }
    if reports.len() == 1 {
        let report = &reports[0];
        if let Some(dir) = &a.out {
            write_outputs(dir, report)?;
        }
        if a.json {
            println!("{}", serde_json::to_string_pretty(report)?);
        } else {
            print!("{}", table(report));
            if let Some(dir) = &a.out {
                println!(
                    "\nreport.json, CSV files and SVG plots in {}",
                    dir.display()
                );
            }
        }
        return Ok(());
    }
    let runs: Vec<(u64, Vec<spread::Figure>)> = reports
        .iter()
        .map(|r| (r.seed, everest::headlines(r, a.trace.is_none())))
        .collect();
    let rows = spread::spread(&runs);
    if let Some(dir) = &a.out {
        write_seed_files(dir, &reports, &rows)?;
    }
    if a.json {
        let json = seeds_json(&reports, &rows, workload_seeded);
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    print!("{}", seeds_text(&reports, &rows, workload_seeded));
    if let Some(dir) = &a.out {
        println!(
            "\nspread.csv, spread.json, fig5_spread.svg, and each seed's full outputs (seed-N/) in {}",
            dir.display()
        );
    }
    Ok(())
}

/// Runs `run` for every seed on up to `threads` threads (default: the cores), in seed order;
/// the first error stops nothing but is returned.
fn run_seeds<T: Send>(
    seeds: &[u64],
    threads: Option<usize>,
    run: &(dyn Fn(u64) -> Result<T> + Sync),
) -> Result<Vec<T>> {
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cordillera_lab::spread::per_seed(seeds, threads, run)
        .into_iter()
        .collect()
}

/// The lab's input for `seed` (`everest::opener`), the trace refused when it is stdin.
fn opener(a: &EverestArgs, seed: u64) -> Result<(String, Box<Opener>)> {
    let input = a
        .trace
        .as_ref()
        .map(|p| trace_input(p, a.format, a.time_unit, a.skip_invalid));
    if let Some(i) = &input {
        i.refuse_stdin("lab everest")?;
    }
    everest::opener(input.as_ref(), seed).map_err(anyhow::Error::msg)
}
