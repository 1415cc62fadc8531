//! `cordillera sim …`: device microbenchmarks, trace replay and calibration on the simulator.

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use cordillera_harness::live_replay::ReplayInputArgs;
use cordillera_lab::render::sim;
use cordillera_models::bench::{self, DiskBench, Pattern};
use cordillera_models::calibration;
use cordillera_models::device::nvram::{Nvram, NvramParams};
use cordillera_models::presets::{self, parse_size, ArraySpec};
use cordillera_sim::replay::ReplayReport;
use cordillera_types::Op;

#[derive(Args)]
pub struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Subcommand)]
enum SimCommand {
    /// Closed-loop microbenchmark of a simulated device (what calibration checks).
    Disk(DiskArgs),
    /// Replay a trace open-loop on a simulated device and report response times.
    Replay(ReplayArgs),
    /// Measure every preset against its published figures.
    Calibrate(CalibrateArgs),
}

/// The simulated device: a preset, or an array of presets.
#[derive(Args, Clone)]
pub struct DeviceArgs {
    /// Device preset: cheetah-15k, fujitsu-maj3182mc, sata-7200, sierra-1tb, ssd, nvme.
    #[arg(long, default_value = "cheetah-15k")]
    pub device: String,
    /// An array of the preset: raid0:N, raid1:N, raid10:N or raid5:N, with an optional stripe
    /// unit (raid5:5:64k; default 64k).
    #[arg(long)]
    pub array: Option<ArraySpec>,
    /// Battery-backed NVRAM in front of the device (Everest Figure 8): SIZE[:WRITE_FRACTION],
    /// e.g. 512m:0.5 (half buffers writes, half caches reads; 0.05 ms per hit).
    #[arg(long)]
    pub nvram: Option<String>,
}

impl DeviceArgs {
    pub fn build(&self) -> Result<Box<dyn cordillera_models::device::Device>> {
        let device = presets::build(&self.device, self.array).map_err(anyhow::Error::msg)?;
        let Some(spec) = &self.nvram else {
            return Ok(device);
        };
        let (size, fraction) = spec.split_once(':').unwrap_or((spec, "0.5"));
        let capacity_bytes = parse_size(size).map_err(anyhow::Error::msg)?;
        let write_fraction: f64 = fraction
            .parse()
            .ok()
            .filter(|f| (0.0..=1.0).contains(f))
            .ok_or_else(|| anyhow::anyhow!("--nvram: the write fraction must be in [0, 1]"))?;
        let params = NvramParams {
            capacity_bytes,
            write_fraction,
            latency_ms: 0.05,
            destage_depth_max: 8,
        };
        Ok(Box::new(Nvram::new(params, device)))
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum PatternArg {
    Seq,
    Rand,
}

#[derive(Clone, Copy, ValueEnum)]
enum RwArg {
    Read,
    Write,
}

#[derive(Args)]
struct DiskArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[arg(long, value_enum, default_value = "rand")]
    pattern: PatternArg,
    #[arg(long, value_enum, default_value = "read")]
    rw: RwArg,
    /// Block size (4096, 64k, 1m).
    #[arg(long, default_value = "64k")]
    bs: String,
    /// Requests kept outstanding.
    #[arg(long, default_value_t = 1)]
    qd: usize,
    /// Requests to complete.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Random offsets within the first SPAN bytes (default: the whole device).
    #[arg(long)]
    span: Option<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ReplayArgs {
    /// The trace (any format `cordillera trace` reads, or gen:NAME[:key=value,…]).
    #[arg(long)]
    trace: std::path::PathBuf,
    #[command(flatten)]
    input: ReplayInputArgs,
    #[command(flatten)]
    device: DeviceArgs,
    /// Length of the intervals of the utilization and queue-length series, in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval_s: f64,
    /// Print the trace's recorded response times beside the simulated ones.
    #[arg(long)]
    compare_recorded: bool,
    /// Print the interval series too (always in --json).
    #[arg(long)]
    intervals: bool,
    /// Divide the trace's times by this (2 = twice as fast), as `cordillera replay --speed`.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CalibrateArgs {
    /// Print the Markdown table of docs/SIMULATION.md.
    #[arg(long)]
    markdown: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(args: SimArgs) -> Result<()> {
    match args.command {
        SimCommand::Disk(args) => disk(args),
        SimCommand::Replay(args) => replay_cmd(args),
        SimCommand::Calibrate(args) => calibrate(args),
    }
}

fn disk(args: DiskArgs) -> Result<()> {
    let mut device = args.device.build()?;
    let spec = DiskBench {
        pattern: match args.pattern {
            PatternArg::Seq => Pattern::Sequential,
            PatternArg::Rand => Pattern::Random,
        },
        op: match args.rw {
            RwArg::Read => Op::Read,
            RwArg::Write => Op::Write,
        },
        block_bytes: parse_size(&args.bs).map_err(anyhow::Error::msg)?,
        queue_depth: args.qd,
        count: args.count,
        span_bytes: args
            .span
            .as_deref()
            .map(parse_size)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        seed: args.seed,
    };
    let result = bench::run(device.as_mut(), &spec).map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    println!(
        "{} requests in {:.3} s simulated: {:.2} MB/s, {:.1} IOPS; latency mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        result.count,
        result.elapsed_s,
        result.throughput_mb_per_s,
        result.iops,
        result.mean_latency_ms,
        result.p50_latency_ms,
        result.p99_latency_ms,
        result.max_latency_ms
    );
    Ok(())
}

fn replay_cmd(args: ReplayArgs) -> Result<()> {
    let input = args.input.input(&args.trace);
    let interval_ns = match cordillera_types::units::s_to_ns(args.interval_s) {
        Some(ns) if ns > 0 => ns as u64,
        _ => bail!("--interval-s must be positive"),
    };
    let mut device = args.device.build()?;
    let report =
        cordillera_lab::tools::replay_trace(&input, device.as_mut(), interval_ns, args.speed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_replay(&report, &args);
    Ok(())
}

/// `sim replay`'s text: the device described as the flags built it.
fn print_replay(r: &ReplayReport, args: &ReplayArgs) {
    let mut device = match args.device.array {
        Some(a) => format!(
            "{:?} of {} × {}, {} KiB stripe unit",
            a.level,
            a.disks,
            args.device.device,
            a.stripe_unit_bytes / 1024
        ),
        None => args.device.device.clone(),
    };
    if let Some(nvram) = &args.device.nvram {
        device = format!("{device} behind {nvram} of NVRAM");
    }
    print!(
        "{}",
        sim::replay_text(
            r,
            &args.trace.display().to_string(),
            &device,
            args.compare_recorded,
            args.intervals
        )
    );
}

fn calibrate(args: CalibrateArgs) -> Result<()> {
    let rows = calibration::table();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if args.markdown {
        print!("{}", calibration::markdown(&rows));
    } else {
        print!("{}", sim::calibration_text(&rows));
    }
    Ok(())
}
