//! `cordillera`: the command-line entry point.
//!
//! # Layout
//!
//! One module per subcommand; each parses its arguments with clap, drives library code, and
//! prints a table or JSON. Errors are `anyhow` here only (the edge), typed in the libraries.
//!
//! - `trace_cmd`: `trace stats|convert|peaks|reaccess|profile` and the shared input flags.
//! - `sim_cmd`: `sim disk|replay|calibrate`.
//! - `store_cmd`: `store format|serve|inspect|bench`.
//! - `volume_cmd`: `volume serve|status|cache-reset|bench|warmup-bench|pgbench`, the
//!   off-loading NBD volume server.
//! - `cluster_cmd`: `cluster spec|mds|server|up|status|gear|pgbench|bench` (Sierra).
//! - `pool_cmd`: `pool serve|create-volume|add-array|replace-member|scrub|status|bench`.
//! - `lab_cmd`: `lab everest`; `lab_bonfire`, `lab_sierra`, `lab_striping`: the other labs
//!   (their tables, CSV and SVG output are `cordillera_lab::render`); `lab_io`: the trace
//!   input every lab shares.
//! - `advise`: the main job: each mechanism's verdict on a trace, and a self-contained HTML report.
//! - `demo`: `advise` on the built-in synthetic workload.
//! - `warmup_cmd`: `warmup simulate|schemes` (Bonfire).
//!
//! The benchmarks (`bench …`, `… bench`), `replay` (a trace against a live NBD export) and
//! `chaos` are `cordillera_harness`'s; the trace
//! tools behind `trace convert`, `warmup simulate` and `sim replay` are `cordillera_lab::tools`.

/// The daemons move frames of up to a few MiB through buffers made per request. glibc serves
/// each from fresh pages (above its mmap threshold, or after trimming its heap), which the
/// kernel faults in and zeroes: in a replicated cluster's streaming writes that was a quarter
/// of all CPU time (docs/BENCHMARKS.md). mimalloc keeps freed pages for the next buffer.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod advise;
mod cluster_cmd;
mod demo;
mod lab_bonfire;
mod lab_cmd;
mod lab_io;
mod lab_sierra;
mod lab_striping;
mod limit_args;
mod pool_cmd;
mod progress;
mod sim_cmd;
mod store_cmd;
mod tls_args;
mod trace_cmd;
mod volume_cmd;
mod warmup_cmd;

use clap::{Parser, Subcommand};

/// Cordillera: a storage system that adapts to the shape of I/O load.
#[derive(Parser)]
#[command(name = "cordillera", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on standard error: `text` (one line per event) or `json` (one object per
    /// line, with the event's fields). The level filter comes from `CORDILLERA_LOG`
    /// (default `info`; e.g. `CORDILLERA_LOG=debug` or `cordillera_runtime=debug`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Read, convert and characterize block traces.
    Trace(trace_cmd::TraceArgs),
    /// The simulator: device microbenchmarks, trace replay, calibration.
    Sim(sim_cmd::SimArgs),
    /// The versioned store: format, serve, inspect.
    Store(store_cmd::StoreArgs),
    /// Benchmarks that print measured figures.
    Bench(cordillera_harness::bench::BenchArgs),
    /// An off-loading block device: a base volume exported over NBD (Everest on real I/O).
    Volume(volume_cmd::VolumeArgs),
    /// Replay a trace against a live NBD export and report response times (as `sim replay`).
    Replay(cordillera_harness::live_replay::ReplayArgs),
    /// The papers' experiments on the simulator with the real cores.
    Lab(lab_cmd::LabArgs),
    /// What each mechanism (peak off-load, gears, warm-up, striping) would do for a workload:
    /// verdicts from the labs run on the trace, a self-contained HTML report.
    Advise(advise::AdviseArgs),
    /// The main job on a built-in default: advise on the generated multi-volume workload (peaks,
    /// a diurnal swing, hot data), the report written to a folder (no data or servers needed).
    Demo(demo::DemoArgs),
    /// Storage-level cache warm-up (Bonfire): the cache simulator.
    Warmup(warmup_cmd::WarmupArgs),
    /// A kill-and-fault campaign on real processes: SIGKILLs, stalls, stalled and dropped links,
    /// damaged logs and failing pool members under load; every acknowledged write checked after
    /// each event.
    Chaos(cordillera_harness::chaos::ChaosArgs),
    /// Sierra on real processes: a power-proportional replicated cluster (MDS, chunk servers,
    /// loggers) that shifts gears.
    Cluster(cluster_cmd::ClusterArgs),
    /// A storage pool of RAID arrays: volumes placed narrow or wide (the striping paper),
    /// exported over NBD, restriped online when an array is added.
    Pool(pool_cmd::PoolArgs),
}

fn main() {
    let cli = Cli::parse();
    cordillera_runtime::logging::init(matches!(cli.log_format, LogFormat::Json));
    let result = match cli.command {
        Command::Trace(args) => trace_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Store(args) => store_cmd::run(args),
        Command::Bench(args) => cordillera_harness::bench::run(args),
        Command::Volume(args) => volume_cmd::run(args),
        Command::Replay(args) => cordillera_harness::live_replay::run(args),
        Command::Lab(args) => lab_cmd::run(args),
        Command::Advise(args) => advise::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Warmup(args) => warmup_cmd::run(args),
        Command::Chaos(args) => cordillera_harness::chaos::run(args),
        Command::Pool(args) => pool_cmd::run(args),
        Command::Cluster(args) => cluster_cmd::run(args),
    };
    if let Err(error) = result {
        eprintln!("cordillera: error: {error:#}");
        std::process::exit(1);
    }
}

/// Runs `work` on `threads` event threads (1: this thread alone) to its end.
fn block_on<T>(
    threads: usize,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build()?.block_on(work)
}

/// Serves `daemon` on `threads` event threads until it ends or Ctrl-C.
fn serve_until_interrupted(
    threads: usize,
    daemon: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    block_on(threads, async {
        tokio::select! {
            r = daemon => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}
