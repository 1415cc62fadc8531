//! `cordillera warmup`: storage-level cache warm-up (Bonfire). `warmup simulate` drives a trace
//! or a generated workload through a block cache that starts empty.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use cordillera_warmup::cache::{Cache, Clock, Fifo, Lru, Policy};
use cordillera_warmup::sim::{apply, Counts, BLOCK_BYTES};
use serde::Serialize;

use crate::trace_cmd::{for_each_record, InputArgs};

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
}

#[derive(Args)]
struct SimulateArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Replacement policy: lru, fifo or clock.
    #[arg(long, default_value = "lru")]
    policy: Policy,
    /// Cache size in bytes (k, m, g suffixes), rounded down to whole 4 KiB blocks.
    #[arg(long)]
    cache_size: String,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Simulated {
    policy: Policy,
    cache_bytes: u64,
    cache_blocks: u64,
    #[serde(flatten)]
    counts: Counts,
    read_hit_rate: Option<f64>,
    seconds: f64,
    requests_per_s: f64,
}

pub fn run(args: WarmupArgs) -> Result<()> {
    match args.command {
        WarmupCommand::Simulate(a) => simulate(a),
    }
}

fn drive<C: Cache>(mut cache: C, input: &InputArgs) -> Result<Counts> {
    let mut counts = Counts::default();
    for_each_record(input, |_, record| apply(&mut cache, record, &mut counts))?;
    Ok(counts)
}

fn simulate(a: SimulateArgs) -> Result<()> {
    let cache_bytes =
        cordillera_sim::presets::parse_size(&a.cache_size).map_err(anyhow::Error::msg)?;
    let blocks = cache_bytes / BLOCK_BYTES;
    if blocks >= u64::from(u32::MAX) {
        bail!(
            "--cache-size {cache_bytes} is over the simulator's limit of 2^32 - 1 blocks (16 TiB)"
        );
    }
    let capacity = blocks as usize;
    let started = Instant::now();
    let counts = match a.policy {
        Policy::Lru => drive(Lru::new(capacity), &a.input)?,
        Policy::Fifo => drive(Fifo::new(capacity), &a.input)?,
        Policy::Clock => drive(Clock::new(capacity), &a.input)?,
    };
    let seconds = started.elapsed().as_secs_f64();
    let out = Simulated {
        policy: a.policy,
        cache_bytes,
        cache_blocks: blocks,
        read_hit_rate: counts.read_hit_rate(),
        requests_per_s: counts.requests as f64 / seconds.max(1e-9),
        counts,
        seconds,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let c = &out.counts;
    println!(
        "{} cache of {} blocks ({} bytes), starting empty",
        out.policy, out.cache_blocks, out.cache_bytes
    );
    println!(
        "  requests            {:>14} ({} reads, {} writes)",
        c.requests, c.read_requests, c.write_requests
    );
    println!("  read block accesses {:>14}", c.read_block_accesses);
    println!(
        "  read block hits     {:>14}   hit rate {}",
        c.read_block_hits,
        out.read_hit_rate
            .map_or("-".to_owned(), |r| format!("{:.2} %", r * 100.0))
    );
    println!("  write block accesses{:>14}", c.write_block_accesses);
    println!(
        "  {:.2} s, {:.1} M requests/s (reading the trace included)",
        out.seconds,
        out.requests_per_s / 1e6
    );
    Ok(())
}
