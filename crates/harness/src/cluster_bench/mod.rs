//! `cordillera cluster bench`: a compressed diurnal day replayed against a local Sierra cluster
//! of real processes on emulated disks, once in the top gear all day (the baseline) and once
//! with the gear plan the scheduler derives from the day's load (§4.4–4.5).
//!
//! - **Workload.** `gen:hotmail-like` for one day (docs/WORKLOADS.md), replayed open loop with
//!   each hour compressed to `--hour-seconds`, onto one object through `volume serve --cluster`
//!   and our NBD client. L (§3.4, writes weighted by r, at Table 4's server performance) is
//!   measured per second of the replay.
//! - **`--method paper`** (the default, §4.3–4.4): the day has the generator's two maintenance
//!   hours after midnight; its rate is set so that the busiest second outside them needs
//!   `--peak-load` (0.9) of the chunk servers, so the paper's provisioning rule (that peak
//!   rounded up to a multiple of 3) gives the cluster's servers. Each hour's gear is the lowest
//!   that sustains its busiest second (g = ⌈(L/N)·r⌉ clamped to [g_min, r], the oracle policy of
//!   §4.2), the maintenance hours in gear 3. Energy: the chunk servers' against the baseline's
//!   (Figure 9's last bars), and with the loggers' measured energy against a second baseline
//!   run with as many chunk servers as the shifting cluster has servers and no loggers (the
//!   paper's 6 per rack against 5 and a logger).
//! - **`--method mean-load`** (a labelled variant, this bench's first method): the hour's mean
//!   load over `--gear-utilization` (0.75), no maintenance hours, the peak hour's mean at 0.6
//!   of the servers; loggers at the model's idle power all day against the chunk servers'
//!   baseline scaled to as many servers.
//! - **Energy.** Each chunk server's and logger's power model (`PowerMeter`: active watts while
//!   its disk has requests in flight, idle while up or waking, standby watts), from their
//!   `/status`. The MDS runs the plan by the clock; up-shifts take effect three wake-up delays
//!   early.
//! - **Response times** per hour (mean and p99, reads and writes together); hours with a gear
//!   shift, or an up-shift's lead, are the shift windows; the others are compared with the
//!   baseline's same hour.
//! - **Migrations** per shift from the MDS (`/status` `shifts`): count and time to settle
//!   (Table 3). **Logging** from the chunk servers: bytes logged, bytes reclaimed, and each
//!   reclaim after an up-shift to the top gear: its duration and rate (Table 2).
//! - **Throughput** (Table 5): closed-loop streaming 1 MiB and random 64 KiB reads and writes in
//!   the top gear, beside the ideal from the servers' emulated disks.
//!
//! The day's generation and gear plan are in `day.rs`, one run of the day in `phase.rs`, Table 5
//! and Figure 12's runs and results in `micro.rs`, the report in `print.rs`.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;

use cordillera_gears::schedule::GearPolicy;
use cordillera_models::power::PowerParams;

use crate::volume_pgbench::default_parent;

mod day;
mod micro;
mod phase;
mod print;

pub use day::Method;
use day::{day, gears_text, Day, HourPlan};
use micro::{rebuild_run, table5, RebuildRow, ThroughputRow};
use phase::{run_phase, start_volume, Phase, Reclaim, LOGGERS_PER_RACK};
use print::print_result;

#[derive(Args)]
pub struct ClusterBenchArgs {
    /// Directory for the clusters (default: a fresh one under /dev/shm or /var/tmp, removed
    /// after).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 3)]
    racks: usize,
    /// Chunk servers per rack (the paper's testbed ran 5).
    #[arg(long, default_value_t = 5)]
    per_rack: u32,
    /// Real seconds per hour of the day (the day lasts 24 of them, twice).
    #[arg(long, default_value_t = 10)]
    hour_seconds: u64,
    /// Disk model of the chunk servers and loggers.
    #[arg(long, default_value = "sierra-1tb")]
    emulate: String,
    /// Seconds from a wake request to a server serving again.
    #[arg(long, default_value_t = 1.0)]
    wake_seconds: f64,
    /// How gears and energy are figured: `paper` (§4.3–4.4: each hour's busiest second, the
    /// workload's two maintenance hours kept in the top gear, the loggers' energy as measured,
    /// the baseline with loggers run with as many chunk servers as the shifting cluster has
    /// servers) or `mean-load` (this bench's first method, a labelled variant: the hour's mean
    /// load over `--gear-utilization` 0.75, no maintenance hours, loggers at idle power, that
    /// baseline scaled from the chunk servers' one).
    #[arg(long, value_enum, default_value_t = Method::Paper)]
    method: Method,
    /// The load the day is generated for, as a fraction of the chunk servers (L/N): with
    /// `paper`, the busiest second outside the maintenance hours (default 0.9: the paper's
    /// provisioning, N = that peak rounded up to a multiple of 3, gives the cluster's servers);
    /// with `mean-load`, the daytime peak hour's mean (default 0.6).
    #[arg(long)]
    peak_load: Option<f64>,
    /// Gears are chosen so that the awake servers run at most this loaded (L over this;
    /// default 1.0 with `paper`, 0.75 with `mean-load`).
    #[arg(long)]
    gear_utilization: Option<f64>,
    /// The lowest gear (1: most power saved; 2: two replicas always awake).
    #[arg(long, default_value_t = 1)]
    g_min: usize,
    /// Size of the object the day is replayed on (offsets wrap onto it).
    #[arg(long, default_value = "2g")]
    object_size: String,
    /// The workload's seed (the first, with --seeds).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run this many seeds (seed, seed + 1, …) and report each and their spread.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Chunk servers start no reclaim job while more than this many other operations are in
    /// flight on their disk (default: reclaim whatever the load, as the paper's prototype).
    #[arg(long)]
    reclaim_busy_disk: Option<String>,
    /// Skip the day (its baseline and gear-shifting runs): only Table 5 and Figure 12.
    #[arg(long)]
    no_day: bool,
    /// Seconds of each Table 5 throughput run (0: skip Table 5).
    #[arg(long, default_value_t = 5)]
    throughput_seconds: u64,
    /// Figure 12: rebuild rate against the number of servers writing — one cluster per value
    /// of chunk servers per rack (the failed server's gear group is its rack, so a value of k
    /// rebuilds onto k − 1 servers); `none` to skip.
    #[arg(long, default_value = "2,3,4,5")]
    rebuild_per_rack: String,
    /// Figure 12: bytes of the object on each chunk server before one fails for good.
    #[arg(long, default_value = "128m")]
    rebuild_bytes_per_server: String,
    /// Write `bench.json` here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the whole result as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// The paper's figures, as it states them.
const PAPER_SAVING: &str = "at least 23 % (Hotmail, g_min = 1, loggers included; §4.4)";
const PAPER_TABLE3: &str = "102 migrations in 28 ms; 77 retries of 254,536 requests";
const PAPER_TABLE2: &str = "166 GB logged in 48 h; required 3.4 MB/s; 22 GB reclaimed at 6.3 MB/s";

#[derive(Clone, Debug, Serialize)]
struct SeedResult {
    seed: u64,
    plan: Vec<HourPlan>,
    rate_at_peak_per_s: f64,
    /// The paper's provisioning rule on the day's load (§4.3); the cluster has `servers`.
    provisioned_servers: usize,
    baseline: Phase,
    /// `paper`: the baseline run with as many chunk servers as the shifting cluster's servers.
    baseline_all: Option<Phase>,
    /// The loggers' energy counted (measured with `paper`, idle power with `mean-load`).
    logger_energy_j: f64,
    gears: Phase,
    /// 1 − gears/baseline, chunk servers alone (the last two bars of Figure 9).
    saving_servers: f64,
    /// The loggers counted, against a baseline of as many servers (Figure 9's Hotmail bars).
    saving_with_loggers: f64,
    /// Hours outside shift windows and reclaims (the target's "outside shift windows").
    p99_steady: Ratios,
    /// Hours with an up-shift's reclaim running, outside shift windows.
    p99_reclaim: Ratios,
    /// Hours in shift windows.
    p99_shift: Ratios,
}

/// Per-hour p99 of the gear-shifting run over the baseline's same hour.
#[derive(Clone, Debug, Default, Serialize)]
struct Ratios {
    hours: usize,
    within_2x: usize,
    max: Option<f64>,
}

impl Ratios {
    fn add(&mut self, ratio: f64) {
        self.hours += 1;
        self.within_2x += (ratio <= 2.0) as usize;
        self.max = Some(self.max.map_or(ratio, |m| m.max(ratio)));
    }

    fn text(&self) -> String {
        match self.max {
            None => "no hours".into(),
            Some(m) => format!(
                "{} of {} hours within 2× (largest ratio {m:.2}×)",
                self.within_2x, self.hours
            ),
        }
    }
}

#[derive(Serialize)]
struct BenchResult {
    method: Method,
    servers: usize,
    loggers: usize,
    hour_seconds: u64,
    emulate: String,
    seeds: Vec<SeedResult>,
    throughput: Vec<ThroughputRow>,
    rebuild: Vec<RebuildRow>,
}

pub fn run(a: ClusterBenchArgs) -> Result<()> {
    if a.hour_seconds < 2 {
        bail!("--hour-seconds must be at least 2");
    }
    if a.peak_load.is_some_and(|p| !(p > 0.0 && p <= 2.0)) {
        bail!("--peak-load must be above 0 and at most 2");
    }
    if a.gear_utilization.is_some_and(|u| !(u > 0.0 && u <= 1.0)) {
        bail!("--gear-utilization must be above 0 and at most 1");
    }
    if !(0.0..=60.0).contains(&a.wake_seconds) || a.wake_seconds * 3.0 >= a.hour_seconds as f64 {
        bail!("--wake-seconds must be 0 to 60 and three of them shorter than an hour");
    }
    if a.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let object_bytes = cordillera_models::presets::parse_size(&a.object_size)
        .map_err(|e| anyhow!("--object-size: {e}"))?;
    let servers = a.racks * a.per_rack as usize;
    // Checks g_min and the cluster's shape.
    GearPolicy::new(servers, 3, a.g_min, Vec::new()).map_err(|e| anyhow!("{e}"))?;
    let (dir, _scratch) =
        crate::volume_bench::work_dir(&a.dir, default_parent(), "cordillera-cluster-bench")?;
    eprintln!("cluster bench: files in {}", dir.display());
    let me = crate::this_program().context("the path of this program")?;
    let mut seeds = Vec::new();
    let days = if a.no_day { 0 } else { a.seeds };
    for seed in a.seed..a.seed + days {
        let day = day(&a, servers, seed)?;
        eprintln!(
            "cluster bench: seed {seed}: {} requests, {:.0}/s at the daytime peak; gears {} ({})",
            day.records.len(),
            day.rate_at_peak,
            gears_text(&day.hours),
            a.method.label()
        );
        let baseline = run_phase(
            &a,
            &me,
            &dir.join(format!("s{seed}-baseline")),
            &day,
            (None, a.per_rack),
        )?;
        // The paper's baseline for the figure with loggers: as many chunk servers as the
        // shifting cluster has servers (its chunk servers and loggers), and no loggers.
        let baseline_all = match a.method {
            Method::Paper => Some(run_phase(
                &a,
                &me,
                &dir.join(format!("s{seed}-baseline-all")),
                &day,
                (None, a.per_rack + LOGGERS_PER_RACK),
            )?),
            Method::MeanLoad => None,
        };
        let gears: Vec<usize> = day.hours.iter().map(|h| h.gear).collect();
        let shifting = run_phase(
            &a,
            &me,
            &dir.join(format!("s{seed}-gears")),
            &day,
            (Some(&gears), a.per_rack),
        )?;
        seeds.push(compare(
            seed,
            &a,
            servers,
            day,
            (baseline, baseline_all),
            shifting,
        ));
    }
    let throughput = if a.throughput_seconds > 0 {
        table5(&a, &me, &dir.join("table5"), servers, object_bytes)?
    } else {
        Vec::new()
    };
    let per_server = cordillera_models::presets::parse_size(&a.rebuild_bytes_per_server)
        .map_err(|e| anyhow!("--rebuild-bytes-per-server: {e}"))?;
    let mut rebuild = Vec::new();
    let sweep: Vec<u32> = match a.rebuild_per_rack.as_str() {
        "none" => Vec::new(),
        list => list
            .split(',')
            .map(|v| v.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|_| anyhow!("--rebuild-per-rack: numbers, comma-separated, or none"))?,
    };
    for per_rack in sweep {
        rebuild.push(rebuild_run(
            &a,
            &me,
            &dir.join(format!("rebuild-{per_rack}")),
            per_rack,
            per_server,
        )?);
    }
    let result = BenchResult {
        method: a.method,
        servers,
        loggers: a.racks,
        hour_seconds: a.hour_seconds,
        emulate: a.emulate.clone(),
        seeds,
        throughput,
        rebuild,
    };
    let json = serde_json::to_string_pretty(&result)?;
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("bench.json"), &json)?;
    }
    if a.json {
        println!("{json}");
    } else {
        print_result(&result);
    }
    Ok(())
}

fn compare(
    seed: u64,
    a: &ClusterBenchArgs,
    servers: usize,
    day: Day,
    (baseline, baseline_all): (Phase, Option<Phase>),
    gears: Phase,
) -> SeedResult {
    let saving_servers = 1.0 - gears.energy_j / baseline.energy_j.max(1e-9);
    let loggers = (a.racks * LOGGERS_PER_RACK as usize) as f64;
    let (logger_j, baseline_all_j) = match &baseline_all {
        // The paper's: the loggers as measured, against a baseline run with as many chunk
        // servers as the shifting cluster has servers.
        Some(all) => (gears.logger_energy_j, all.energy_j),
        // The variant's: the loggers at the model's idle power all day, against the chunk
        // servers' baseline scaled to as many servers.
        None => (
            loggers * PowerParams::default().idle_w * gears.replay.duration_s,
            baseline.energy_j * (servers as f64 + loggers) / servers as f64,
        ),
    };
    let saving_with_loggers = 1.0 - (gears.energy_j + logger_j) / baseline_all_j.max(1e-9);
    let (mut steady, mut reclaim, mut shift) =
        (Ratios::default(), Ratios::default(), Ratios::default());
    for (b, g) in baseline.hours.iter().zip(&gears.hours) {
        if let (Some(bp), Some(gp)) = (b.p99_ms, g.p99_ms) {
            let ratio = gp / bp.max(1e-6);
            match (g.shift_window, g.reclaiming) {
                (true, _) => shift.add(ratio),
                (false, true) => reclaim.add(ratio),
                (false, false) => steady.add(ratio),
            }
        }
    }
    SeedResult {
        seed,
        plan: day.hours,
        rate_at_peak_per_s: day.rate_at_peak,
        provisioned_servers: day.provisioned,
        baseline,
        baseline_all,
        logger_energy_j: logger_j,
        gears,
        saving_servers,
        saving_with_loggers,
        p99_steady: steady,
        p99_reclaim: reclaim,
        p99_shift: shift,
    }
}
