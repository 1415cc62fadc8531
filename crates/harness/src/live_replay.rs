//! `cordillera replay`: a trace replayed against a live NBD export, open loop from its
//! timestamps or closed loop at a fixed depth, with the response-time table of `sim replay`;
//! and the trace-reading flags both replays share.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use cordillera_lab::render::sim::latencies_text;
use cordillera_runtime::nbd_client::NbdUrl;
use cordillera_runtime::replay::{replay, LiveReplayReport, Mode, ReplayOptions};

/// The reading flags of `trace`, without its positional file (replay takes `--trace`).
#[derive(Args, Clone)]
pub struct ReplayInputArgs {
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::Format))]
    pub format: Option<cordillera_trace::Format>,
    #[arg(long, value_parser = clap::value_parser!(cordillera_trace::TimeUnit))]
    pub time_unit: Option<cordillera_trace::TimeUnit>,
    /// Replay only these volumes of the trace (names as the trace spells them).
    #[arg(long = "volume", value_delimiter = ',')]
    pub volumes: Vec<String>,
    #[arg(long)]
    pub skip_invalid: bool,
}

impl ReplayInputArgs {
    /// The reading flags for the trace at `file` (`gen:NAME` for a generated one).
    pub fn input(&self, file: &std::path::Path) -> cordillera_lab::input::TraceInput {
        cordillera_lab::input::TraceInput {
            format: self.format,
            time_unit: self.time_unit,
            volumes: self.volumes.clone(),
            skip_invalid: self.skip_invalid,
            ..cordillera_lab::input::TraceInput::file(file)
        }
    }
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The trace (any format `cordillera trace` reads, or gen:NAME[:key=value,…]).
    #[arg(long)]
    trace: std::path::PathBuf,
    /// The export: nbd://HOST:PORT[/EXPORT] (or HOST:PORT).
    #[arg(long)]
    nbd: NbdUrl,
    #[command(flatten)]
    input: ReplayInputArgs,
    /// Open loop: divide the trace's inter-arrival times by this (2 = twice as fast).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Closed loop instead: keep this many requests in flight, ignoring timestamps.
    #[arg(long, conflicts_with = "speed")]
    depth: Option<usize>,
    /// Open loop: the most requests in flight; arrivals beyond wait and are counted.
    #[arg(long, default_value_t = 4096)]
    max_outstanding: usize,
    /// Stop after this many records.
    #[arg(long)]
    max_records: Option<u64>,
    /// Length of the intervals of the series, in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval_s: f64,
    /// Print the trace's recorded response times beside the measured ones.
    #[arg(long)]
    compare_recorded: bool,
    /// Print the interval series too (always in --json).
    #[arg(long)]
    intervals: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(args: ReplayArgs) -> Result<()> {
    let input = args.input.input(&args.trace);
    let mut reader = input.open()?;
    let mode = match args.depth {
        Some(depth) => Mode::Closed { depth },
        None => {
            if !reader.info().has_time {
                bail!(
                    "{} has no timestamps: replay it closed-loop with --depth N",
                    input.file.display()
                );
            }
            Mode::Open { speed: args.speed }
        }
    };
    let options = ReplayOptions {
        mode,
        interval_s: args.interval_s,
        max_outstanding: args.max_outstanding,
        max_records: args.max_records,
        progress_every: Some(Duration::from_secs(10)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the event loop")?;
    let mut error = None;
    let records = cordillera_lab::input::records_until_error(reader.as_mut(), &mut error);
    let report = runtime
        .block_on(replay(&args.nbd, records, &options))
        .with_context(|| format!("replaying on {}", args.nbd))?;
    if let Some(e) = error {
        return Err(anyhow::Error::from(e).context("the trace ended early"));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &args);
    }
    if report.errors > 0 {
        bail!(
            "{} requests failed (first error value {})",
            report.errors,
            report.first_error.unwrap_or(0)
        );
    }
    Ok(())
}

fn print_report(r: &LiveReplayReport, args: &ReplayArgs) {
    let mode = match (r.speed, r.depth) {
        (Some(speed), _) => format!("open loop at {speed}× trace speed"),
        (_, Some(depth)) => format!("closed loop, {depth} in flight"),
        _ => unreachable!("a replay is open or closed"),
    };
    println!(
        "Replayed {} records of {} on {} ({:.1} GiB; {mode}) in {:.1} s: {:.0} IOPS, {:.1} MB/s",
        r.records,
        args.trace.display(),
        r.target,
        r.export_bytes as f64 / (1u64 << 30) as f64,
        r.duration_s,
        r.iops,
        r.mb_per_s
    );
    if r.skipped_empty + r.wrapped + r.late > 0 {
        println!(
            "  skipped {} zero-length or oversized, wrapped {} beyond the export, {} out of order",
            r.skipped_empty, r.wrapped, r.late
        );
    }
    let lag: Vec<(&str, &_)> = r.send_lag.iter().map(|lag| ("send lag", lag)).collect();
    print!(
        "{}",
        latencies_text(
            &[("measured reads", &r.reads), ("measured writes", &r.writes)],
            args.compare_recorded
                .then_some([r.recorded_reads.as_ref(), r.recorded_writes.as_ref()]),
            &lag,
        )
    );
    println!(
        "most in flight {}, arrivals that waited for a slot {}",
        r.max_outstanding_seen, r.throttled
    );
    if args.intervals {
        println!(
            "{:>10} {:>12} {:>14} {:>14}",
            "start_s", "completions", "read_mean_ms", "write_mean_ms"
        );
        let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.3}"));
        for i in &r.intervals {
            println!(
                "{:>10.1} {:>12} {:>14} {:>14}",
                i.start_s,
                i.completions,
                opt(i.reads_mean_ms),
                opt(i.writes_mean_ms)
            );
        }
    }
}
