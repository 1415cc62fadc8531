//! `cordillera lab …`: the papers' experiments on the simulator.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use cordillera_lab::everest::{self, Options, Parts};
use cordillera_sim::workload::{ExchangeLike, Generated};
use cordillera_types::units::s_to_ns;

use cordillera_lab::render::everest::{table, write_outputs};

use crate::lab_io::trace_input;
use crate::trace_cmd::open_input;

/// Opens the lab's input again (it is read once for the peaks, once for the episodes).
type Opener = dyn FnMut() -> Result<Box<dyn cordillera_trace::RecordReader>, String>;

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
    /// Off-loaded data is sampled this often (Figure 6), seconds.
    #[arg(long, default_value_t = 10)]
    sample_s: u64,
    /// Parts beyond Figures 5 and 6 (repeat or separate with commas); all when absent.
    #[arg(long, value_enum, value_delimiter = ',')]
    parts: Vec<PartArg>,
    /// Only Figures 5 and 6 (no sensitivity, NVRAM, recovery or micro-benchmarks).
    #[arg(long, conflicts_with = "parts")]
    main_only: bool,
    /// Micro-benchmark run length, seconds (Everest §4.3: 20 s).
    #[arg(long, default_value_t = 20)]
    micro_s: u64,
    /// Print the report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Write report.json, CSV files and SVG plots into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
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
    if a.sample_s == 0 || a.micro_s == 0 || a.episodes == 0 {
        bail!("--sample-s, --micro-s and --episodes must be positive");
    }
    if !(a.rate_window_s > 0.0 && a.segment_s >= a.rate_window_s) {
        bail!("--rate-window-s must be positive and at most --segment-s");
    }
    let peaks = cordillera_trace::peaks::PeaksOptions {
        rate_window_ns: s_to_ns(a.rate_window_s)
            .ok_or_else(|| anyhow::anyhow!("--rate-window-s out of range"))?,
        segment_ns: s_to_ns(a.segment_s)
            .ok_or_else(|| anyhow::anyhow!("--segment-s out of range"))?,
        top: a.episodes,
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
        }
    };
    let options = Options {
        peaks,
        t_base: a.t_base,
        t_store: a.t_store,
        n_reclaim: a.n_reclaim,
        sample_ns: a.sample_s * 1_000_000_000,
        micro_s: a.micro_s,
        parts,
        seed: a.seed,
        ..Options::default()
    };
    let (source, mut open): (String, Box<Opener>) = match &a.trace {
        Some(path) => {
            let input = trace_input(path, a.format, a.time_unit, a.skip_invalid);
            (
                path.display().to_string(),
                Box::new(move || open_input(&input).map_err(|e| format!("{e:#}"))),
            )
        }
        None => {
            let w = ExchangeLike::everest();
            w.validate().map_err(anyhow::Error::msg)?;
            (
                "exchange-like".into(),
                Box::new(move || {
                    Ok(
                        Box::new(Generated::new(&w.volume_names(), Box::new(w.records())))
                            as Box<dyn cordillera_trace::RecordReader>,
                    )
                }),
            )
        }
    };
    let started = Instant::now();
    let verbose = io::stderr().is_terminal() || std::env::var_os("CORDILLERA_PROGRESS").is_some();
    let mut progress = |line: &str| {
        if verbose {
            eprintln!("[{:>6.1} s] {line}", started.elapsed().as_secs_f64());
        }
    };
    let report =
        everest::run(&mut *open, &source, &options, &mut progress).map_err(anyhow::Error::msg)?;
    if let Some(dir) = &a.out {
        write_outputs(dir, &report)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
        if let Some(dir) = &a.out {
            println!(
                "\nreport.json, CSV files and SVG plots in {}",
                dir.display()
            );
        }
    }
    Ok(())
}
