//! `cordillera warmup`: storage-level cache warm-up (Bonfire). `warmup simulate` drives a trace
//! or a generated workload through a block cache that starts empty.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use cordillera_warmup::algorithms::Algorithm;
use cordillera_warmup::cache::Policy;

use cordillera_lab::bonfire::schemes_run;
use cordillera_lab::render::bonfire_schemes;
use cordillera_lab::tools;

use crate::trace_cmd::InputArgs;

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

#[derive(Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
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
    /// Replacement policy: lru, fifo, clock, sieve, s3fifo or arc.
    #[arg(long, default_value = "lru")]
    policy: Policy,
    /// Cache size in bytes (k, m, g suffixes), rounded down to whole 4 KiB blocks.
    #[arg(long)]
    cache_size: String,
    #[arg(long)]
    json: bool,
}

pub fn run(args: WarmupArgs) -> Result<()> {
    match args.command {
        WarmupCommand::Simulate(a) => simulate(a),
        WarmupCommand::Schemes(a) => schemes(a),
    }
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let cache_bytes =
        cordillera_models::presets::parse_size(&a.cache_size).map_err(anyhow::Error::msg)?;
    let out = tools::simulate_cache(&a.input.input(), a.policy, cache_bytes)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", tools::simulated_text(&out));
    }
    Ok(())
}

/// `warmup schemes`: the lab's experiment on the trace (once, or over seeds), printed.
fn schemes(a: SchemesArgs) -> Result<()> {
    let input = a.input.input();
    input.refuse_stdin("warmup schemes")?;
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let config = a.config();
    if a.seeds > 1 {
        let o = schemes_run::over_seeds(&config, &input, a.seed, a.seeds)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&o)?);
        } else {
            print!("{}", bonfire_schemes::over_seeds_text(&o));
        }
        return Ok(());
    }
    let report = schemes_run::run(&config, &input, a.seed)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print!("{}", bonfire_schemes::schemes_text(&config, &report));
    Ok(())
}

impl SchemesArgs {
    fn config(&self) -> schemes_run::SchemesConfig {
        schemes_run::SchemesConfig {
            policy: self.policy,
            cache_size: self.cache_size.clone(),
            warmup_size: self.warmup_size.clone(),
            algorithm: self.algorithm,
            region: self.region.clone(),
            axis: match self.axis {
                Axis::Time => schemes_run::Axis::Time,
                Axis::Requests => schemes_run::Axis::Requests,
            },
            start: self.start,
            interval: self.interval,
            history: self.history,
            readahead: self.readahead.clone(),
            th_v: self.th_v,
            th_n: self.th_n,
            preload_mb_per_s: self.preload_mb_per_s,
            preload_device: self.preload_device.clone(),
        }
    }
}
