//! `cordillera`: the command-line entry point. One module per subcommand.

mod bench;
mod demo;
mod trace_cmd;

use clap::{Parser, Subcommand};

/// Cordillera: a storage system that adapts to the shape of I/O load.
#[derive(Parser)]
#[command(name = "cordillera", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read, convert and characterize block traces.
    Trace(trace_cmd::TraceArgs),
    /// Benchmarks that print measured figures.
    Bench(bench::BenchArgs),
    /// Generate a built-in synthetic bursty trace and characterize it (no data needed).
    Demo(demo::DemoArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(args) => trace_cmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
    };
    if let Err(error) = result {
        eprintln!("cordillera: error: {error:#}");
        std::process::exit(1);
    }
}
