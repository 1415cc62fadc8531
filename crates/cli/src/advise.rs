//! `cordillera advise TRACE…`: what each mechanism — peak off-load, gears, warm-up, striping —
//! would do for a workload, judged by the labs on the trace itself (`cordillera_lab::advise`).
//! Without a trace it advises on the built-in generated multi-volume workload (what `demo`
//! runs).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use cordillera_lab::advise::{self, Open, Options, Report};
use cordillera_lab::devices::DeviceSpec;
use cordillera_lab::render::advise::{text, write_outputs};
use cordillera_trace::synth::SynthOptions;

use crate::lab_io::trace_input;

/// The built-in workload's peaks: 100 times the base rate, each second's requests within its
/// first 100 ms (bursts of checkpoint writes that queue on the disks, as Everest's do).
pub const BUILTIN_PEAK_FACTOR: f64 = 100.0;
pub const BUILTIN_PEAK_BURST_MS: u64 = 100;

#[derive(Args, Clone)]
pub struct AdviseArgs {
    /// Traces to judge, each on its own (any format `trace stats` reads, or
    /// gen:NAME[:key=value,…]); none: the built-in generated workload (four volumes, three days,
    /// with peaks, a diurnal swing, hot data and a nightly job).
    pub traces: Vec<PathBuf>,
    /// The traces' format (detected from their content when absent).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    pub format: Option<cordillera_trace::Format>,
    /// The time unit of traces whose format does not fix it (ASCII5).
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    pub time_unit: Option<cordillera_trace::TimeUnit>,
    /// Skip malformed trace lines instead of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
    /// The device the verdicts are judged on: hdd-7200, hdd-10k, hdd-15k, sata-ssd, nvme
    /// (calibrated models; docs/SIMULATION.md). Default: fitted from the trace's recorded
    /// response times, or, when it records none, Everest's testbed (a RAID-0 of four hdd-15k),
    /// named on every verdict.
    #[arg(long)]
    pub device: Option<String>,
    /// An array of --device: LEVEL:DISKS[:STRIPE_UNIT], e.g. raid5:5, raid10:4, raid0:4:128k.
    #[arg(long, requires = "device")]
    pub array: Option<String>,
    /// First seed of the seeded runs (Everest's simulator, Bonfire's Random-K, the built-in
    /// workload).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds to run: every seeded figure is reported with its spread over them.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// A faster, coarser answer: one seed, the busiest peak only, 1 MB warm-up regions only.
    #[arg(long)]
    pub quick: bool,
    /// Days of the built-in workload (three: two whole calendar days, so that the gear
    /// prediction trains on one and is tested on the next).
    #[arg(long, default_value_t = 3)]
    pub days: u64,
    /// The built-in workload's peaks: their rate over the base rate.
    #[arg(long, default_value_t = BUILTIN_PEAK_FACTOR)]
    pub peak_factor: f64,
    /// The built-in workload's peaks: each second's requests arrive within its first this
    /// many milliseconds (a burst of checkpoint writes); 1000 spreads them over the second.
    #[arg(long, default_value_t = BUILTIN_PEAK_BURST_MS)]
    pub peak_burst_ms: u64,
    /// Worker threads (default: the cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress on standard error.
    #[arg(long)]
    pub quiet: bool,
    /// Print the report as JSON on standard output (an array, one report per trace).
    #[arg(long)]
    pub json: bool,
    /// Write report.html (self-contained: open it in any browser, no network needed),
    /// report.json and the figures as SVG into this folder (one sub-folder per trace when
    /// there are several); the built-in workload is saved there too (workload.cdt), for the
    /// report's commands.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace the files of an earlier report in --out (report.html, report.json, the figures,
    /// the tables, workload.cdt, trace-N folders); without it a non-empty --out is refused
    /// before any work. Other files there are left alone.
    #[arg(long)]
    pub force: bool,
}

/// The built-in workload of the flags (`advise::builtin`), saved to `save` when given.
fn builtin(a: &AdviseArgs, save: Option<&Path>) -> Result<(String, Open)> {
    let options = SynthOptions {
        duration_s: a.days.max(1) * 24 * 3600,
        seed: a.seed,
        peak_factor: a.peak_factor,
        peak_burst_ms: a.peak_burst_ms,
        ..SynthOptions::default()
    };
    advise::builtin(&options, save)
}

fn opener(a: &AdviseArgs, path: &Path) -> Result<Open> {
    let input = trace_input(path, a.format, a.time_unit, a.skip_invalid);
    input.refuse_stdin("advise")?;
    // Fail now, with the file's own error, rather than inside a lab.
    input
        .open()
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Arc::new(move || input.open().map_err(|e| format!("{e:#}"))))
}

/// The flags that make a lab read a trace as advise did.
fn trace_flags(a: &AdviseArgs) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(f) = a.format {
        flags.extend(["--format".to_owned(), f.name().to_owned()]);
    }
    if let Some(u) = a.time_unit {
        flags.extend(["--time-unit".to_owned(), format!("{u:?}").to_lowercase()]);
    }
    if a.skip_invalid {
        flags.push("--skip-invalid".to_owned());
    }
    flags
}

/// Runs advise and returns the reports (the `demo` command prints its own summary).
pub fn advise(a: &AdviseArgs) -> Result<Vec<(Report, Option<PathBuf>)>> {
    if a.days == 0 || a.days > 30 {
        bail!("--days must be 1 to 30");
    }
    if !(a.peak_factor >= 1.0 && a.peak_factor <= 1000.0) {
        bail!("--peak-factor must be 1 to 1000");
    }
    if a.peak_burst_ms == 0 || a.peak_burst_ms > 1000 {
        bail!("--peak-burst-ms must be 1 to 1000");
    }
    if let Some(dir) = &a.out {
        cordillera_lab::render::advise::prepare_out(dir, a.force)?;
    }
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let device = a
        .device
        .as_deref()
        .map(|name| DeviceSpec::parse(name, a.array.as_deref()))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut inputs: Vec<(String, String, Open)> = Vec::new();
    if a.traces.is_empty() {
        let saved = a.out.as_ref().map(|d| d.join("workload.cdt"));
        let (source, open) = builtin(a, saved.as_deref())?;
        let arg = saved.map_or(String::new(), |p| p.display().to_string());
        inputs.push((source, arg, open));
    } else {
        for t in &a.traces {
            inputs.push((
                t.display().to_string(),
                t.display().to_string(),
                opener(a, t)?,
            ));
        }
    }
    let reporter = crate::progress::Progress::new(a.quiet);
    let several = inputs.len() > 1;
    let mut out = Vec::new();
    for (i, (source, arg, open)) in inputs.into_iter().enumerate() {
        let options = Options {
            seed: a.seed,
            seeds: a.seeds,
            quick: a.quick,
            threads,
            trace_flags: trace_flags(a),
            trace_arg: arg,
            device: device.clone(),
        };
        let say = |line: &str| {
            if several {
                reporter.step(&format!("{source}: {line}"))
            } else {
                reporter.step(line)
            }
        };
        let report = advise::run(&source, open, &options, &say).map_err(anyhow::Error::msg)?;
        let dir = a.out.as_ref().map(|d| {
            if several {
                d.join(format!("trace-{}", i + 1))
            } else {
                d.clone()
            }
        });
        if let Some(dir) = &dir {
            write_outputs(dir, &report)?;
        }
        out.push((report, dir));
    }
    reporter.finish();
    Ok(out)
}

pub fn run(a: AdviseArgs) -> Result<()> {
    let reports = advise(&a)?;
    if a.json {
        let all: Vec<&Report> = reports.iter().map(|(r, _)| r).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    for (report, dir) in &reports {
        print!("{}", text(report));
        if let Some(dir) = dir {
            println!("\nThe report: {}", dir.join("report.html").display());
        }
    }
    Ok(())
}
