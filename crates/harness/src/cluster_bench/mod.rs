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
//! The day's generation and gear plan are in `day.rs`, Table 5 and Figure 12's runs and results in
//! `micro.rs`, the report in `print.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;

use cordillera_gears::schedule::GearPolicy;
use cordillera_models::power::PowerParams;
use cordillera_procs::cluster::{http_get, ClusterOptions, Daemon, LocalCluster};
use cordillera_procs::process::Proc;
use cordillera_runtime::nbd_client::NbdUrl;
use cordillera_runtime::replay::{replay, LiveReplayReport, Mode, ReplayOptions};

use crate::volume_pgbench::default_parent;

mod day;
mod micro;
mod print;

pub use day::Method;
use day::{day, gears_text, Day, HourPlan};
use micro::{rebuild_run, table5, RebuildRow, ThroughputRow};
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

/// A sample of the cluster while the day runs.
#[derive(Clone, Debug, Default, Serialize)]
struct Sample {
    t_s: f64,
    gear: usize,
    servers_up: usize,
    /// Bytes of the servers' groups held on loggers now.
    logged_bytes: u64,
    /// Counters summed over the servers.
    logged_total: u64,
    reclaimed_total: u64,
    refused_total: u64,
    energy_j: f64,
    standby_s: f64,
    /// The loggers' energy, by the same power model (busy while their disks are).
    logger_energy_j: f64,
}

#[derive(Clone, Debug, Serialize)]
struct HourResult {
    hour: usize,
    gear: usize,
    shift_window: bool,
    reclaiming: bool,
    completions: u64,
    mean_ms: Option<f64>,
    p99_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct Reclaim {
    at_s: f64,
    logged_bytes: u64,
    /// Until the loggers held nothing of the servers' groups, or the gear went down.
    seconds: f64,
    reclaimed_bytes: u64,
    /// On the loggers at the end (0: emptied).
    left_bytes: u64,
    mb_per_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct Phase {
    name: &'static str,
    replay: LiveReplayReport,
    hours: Vec<HourResult>,
    /// Chunk servers' energy over the day (J).
    energy_j: f64,
    /// The loggers' energy over the day (J), measured as the chunk servers' is.
    logger_energy_j: f64,
    /// Of the day's server-seconds, the fraction spent in standby.
    standby_fraction: f64,
    shifts: Vec<serde_json::Value>,
    migrations: u64,
    /// Client requests the chunk servers refused (not the primary, lease lapsed, migrating):
    /// each is retried by the client (the paper's Table 3 counts retries).
    refused: u64,
    logged_bytes: u64,
    reclaimed_bytes: u64,
    reclaims: Vec<Reclaim>,
    /// Seconds after the day until the loggers held nothing (None: not within the wait).
    loggers_empty_after_s: Option<f64>,
    samples: Vec<Sample>,
}

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

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How far ahead of a phase's cluster start its day begins.
const START_MARGIN_MS: u64 = 8_000;

/// Dedicated loggers per rack (the paper's testbed: one).
const LOGGERS_PER_RACK: u32 = 1;

/// One run of the day: a fresh cluster of `per_rack` chunk servers in each rack, top gear all
/// day (`gears` None) or the plan.
fn run_phase(
    a: &ClusterBenchArgs,
    me: &Path,
    dir: &Path,
    day: &Day,
    (gears, per_rack): (Option<&[usize]>, u32),
) -> Result<Phase> {
    let name = match (gears.is_some(), per_rack == a.per_rack) {
        (true, _) => "gears",
        (false, true) => "baseline",
        (false, false) => "baseline-all",
    };
    let hour_ms = a.hour_seconds * 1000;
    // The day starts on an hour of the MDS's clock far enough ahead for the cluster to start
    // and settle (cluster and volume start in 1–3 s here; 8 s covers a loaded machine); the plan is
    // rotated so that the day's hour 0 falls on it.
    let start_ms = (unix_ms() + START_MARGIN_MS + hour_ms).div_ceil(hour_ms) * hour_ms;
    let h0 = (start_ms / hour_ms % 24) as usize;
    let plan = gears.map(|g| {
        let mut plan = [0usize; 24];
        for (k, &gear) in g.iter().enumerate() {
            plan[(h0 + k) % 24] = gear;
        }
        plan.iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    std::fs::create_dir_all(dir)?;
    let options = ClusterOptions {
        racks: a.racks,
        per_rack,
        loggers_per_rack: LOGGERS_PER_RACK as usize,
        hour_seconds: a.hour_seconds,
        plan,
        emulate: Some(a.emulate.clone()),
        wake_seconds: a.wake_seconds,
        logger_size: "1g".into(),
        reclaim_busy_disk: a.reclaim_busy_disk.clone(),
        ..ClusterOptions::default()
    };
    eprintln!("cluster bench: {name}: starting the cluster");
    let mut cluster = LocalCluster::start(me, &dir.join("cluster"), options)
        .map_err(|e| anyhow!("starting the cluster: {e}"))?;
    // The MDS's day (which rotates the gear groups) turns at this hour of the bench's day.
    let rotation_hour = (24 - h0) % 24;
    let result = run_day(a, &cluster, day, gears, name, start_ms, rotation_hour);
    cluster.stop();
    // Each run's chunk and log files (GBs, in memory under /dev/shm) go as soon as it ends,
    // unless they were asked for with --dir: kept, three runs a seed would fill the memory.
    if a.dir.is_none() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            eprintln!("cluster bench: removing {}: {e}", dir.display());
        }
    }
    result
}

fn run_day(
    a: &ClusterBenchArgs,
    cluster: &LocalCluster,
    day: &Day,
    gears: Option<&[usize]>,
    name: &'static str,
    start_ms: u64,
    rotation_hour: usize,
) -> Result<Phase> {
    let (_volume, url) = start_volume(cluster, "bench", &a.object_size)?;
    let server_http: Vec<String> = (0..cluster.servers())
        .map(|s| cluster.http_addr(Daemon::Server(s)).expect("an endpoint"))
        .collect();
    let logger_http: Vec<String> = (0..cluster.loggers())
        .map(|i| cluster.http_addr(Daemon::Logger(i)).expect("an endpoint"))
        .collect();
    let http = Endpoints {
        servers: server_http.clone(),
        loggers: logger_http,
        mds: cluster.http_addr(Daemon::Mds).expect("an endpoint"),
    };
    let mds_http = cluster.http_addr(Daemon::Mds).expect("an endpoint");
    let wait_ms = start_ms.saturating_sub(unix_ms());
    if wait_ms == 0 {
        bail!("the cluster took too long to start (the day's first hour has begun)");
    }
    eprintln!(
        "cluster bench: {name}: the day starts in {:.1} s and lasts {} s",
        wait_ms as f64 / 1e3,
        24 * a.hour_seconds
    );
    std::thread::sleep(Duration::from_millis(wait_ms));
    let shifts_before = mds_status(&mds_http)?["shifts"]
        .as_array()
        .map_or(0, |s| s.len());
    let mds_before = mds_status(&mds_http)?;
    let before = sample(&http, Instant::now(), Instant::now())?;
    let t0 = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (samples, stop, http) = (samples.clone(), stop.clone(), http.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(s) = sample(&http, t0, Instant::now()) {
                    samples.lock().expect("samples").push(s);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let replayed = replay_day(a, &url, day);
    let report = match replayed {
        Ok(report) => report.map_err(|e| anyhow!("{name}: the replay: {e}"))?,
        Err(limit) => {
            stop.store(true, Ordering::SeqCst);
            let now = sample(&http, t0, Instant::now())
                .map_or_else(|e| format!("{e:#}"), |s| format!("{s:?}"));
            bail!(
                "{name}: the day did not end within {} s (it lasts {} s): {now}",
                limit.as_secs(),
                24 * a.hour_seconds
            );
        }
    };
    let after = sample(&http, t0, Instant::now())?;
    let mds = mds_status(&mds_http)?;
    // The day over, the gear goes to the top by hand; the loggers must then empty.
    let day_end = Instant::now();
    cluster
        .gear("3")
        .map_err(|e| anyhow!("setting gear 3 after the day: {e}"))?;
    let mut loggers_empty_after_s = None;
    while day_end.elapsed() < Duration::from_secs(120) {
        let s = sample(&http, t0, Instant::now())?;
        if s.logged_bytes == 0 && s.servers_up == server_http.len() {
            loggers_empty_after_s = Some(day_end.elapsed().as_secs_f64());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::SeqCst);
    poller.join().expect("the poller");
    let mut samples = std::mem::take(&mut *samples.lock().expect("samples"));
    samples.push(sample(&http, t0, Instant::now())?);
    let reclaims = reclaims(&samples);
    let shifts: Vec<serde_json::Value> = mds["shifts"]
        .as_array()
        .map(|s| s.iter().skip(shifts_before).cloned().collect())
        .unwrap_or_default();
    let migrations = mds["stats"]["migrations"].as_u64().unwrap_or(0)
        - mds_before["stats"]["migrations"].as_u64().unwrap_or(0);
    let hour_s = a.hour_seconds as f64;
    let hours = (0..24)
        .map(|h| {
            let g = gears.map_or(3, |g| g[h]);
            let prev = gears.map_or(3, |g| g[(h + 23) % 24]);
            let next = gears.map_or(3, |g| g[(h + 1) % 24]);
            let i = report.intervals.get(h);
            // An up-shift's reclaim overlapping the hour (until the loggers were empty).
            let reclaiming = reclaims.iter().any(|r| {
                let end = r.at_s + r.seconds;
                r.at_s < (h + 1) as f64 * hour_s && end > h as f64 * hour_s
            });
            HourResult {
                hour: h,
                gear: g,
                // A shift at the hour, an up-shift's lead into the next, or the gear groups'
                // daily rotation (servers swap) below the top gear.
                shift_window: g != prev || next > g || (h == rotation_hour && g < 3),
                reclaiming,
                completions: i.map_or(0, |i| i.completions),
                mean_ms: i.and_then(|i| i.mean_ms),
                p99_ms: i.and_then(|i| i.p99_ms),
            }
        })
        .collect();
    let server_seconds = report.duration_s * server_http.len() as f64;
    let standby_s = after.standby_s - before.standby_s;
    Ok(Phase {
        name,
        hours,
        energy_j: after.energy_j - before.energy_j,
        logger_energy_j: after.logger_energy_j - before.logger_energy_j,
        standby_fraction: standby_s / server_seconds.max(1e-9),
        shifts,
        migrations,
        refused: after.refused_total - before.refused_total,
        logged_bytes: after.logged_total - before.logged_total,
        reclaimed_bytes: after.reclaimed_total - before.reclaimed_total,
        reclaims,
        loggers_empty_after_s,
        samples,
        replay: report,
    })
}

/// The day replayed open loop on the volume at `url`, hours compressed. A day that runs far
/// past its length has a daemon gone (a logger whose disk filled up, say): `Err(limit)`, for
/// the caller to stop with what the cluster looks like rather than wait for ever.
fn replay_day(
    a: &ClusterBenchArgs,
    url: &str,
    day: &Day,
) -> Result<Result<LiveReplayReport>, Duration> {
    let options = ReplayOptions {
        mode: Mode::Open {
            speed: 3600.0 / a.hour_seconds as f64,
        },
        interval_s: a.hour_seconds as f64,
        max_outstanding: 4096,
        max_records: None,
        progress_every: Some(Duration::from_secs(4 * a.hour_seconds)),
    };
    let setup = || -> Result<(NbdUrl, tokio::runtime::Runtime)> {
        let url: NbdUrl = url.parse()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        Ok((url, runtime))
    };
    let (url, runtime) = match setup() {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    let limit = Duration::from_secs(2 * 24 * a.hour_seconds + 120);
    match runtime.block_on(async {
        tokio::time::timeout(limit, replay(&url, day.records.iter().cloned(), &options)).await
    }) {
        Ok(report) => Ok(report.map_err(|e| anyhow!("{e}"))),
        Err(_) => Err(limit),
    }
}

fn mds_status(mds_http: &str) -> Result<serde_json::Value> {
    let body = http_get(mds_http, "/status").map_err(|e| anyhow!("the MDS: {e}"))?;
    Ok(serde_json::from_str(&body)?)
}

/// Where the bench reads the cluster's figures.
#[derive(Clone)]
struct Endpoints {
    servers: Vec<String>,
    loggers: Vec<String>,
    mds: String,
}

/// The cluster now: the MDS's gear and the servers' and loggers' figures summed.
fn sample(http: &Endpoints, t0: Instant, now: Instant) -> Result<Sample> {
    let mds = mds_status(&http.mds)?;
    let mut s = Sample {
        t_s: now.duration_since(t0).as_secs_f64(),
        gear: mds["gear"].as_u64().unwrap_or(0) as usize,
        ..Sample::default()
    };
    let status = |addr: &str| -> Result<serde_json::Value> {
        let body = http_get(addr, "/status").map_err(|e| anyhow!("{addr}: {e}"))?;
        Ok(serde_json::from_str(&body)?)
    };
    for addr in &http.servers {
        let v = status(addr)?;
        let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
        s.servers_up += (v["power"]["state"] == "up") as usize;
        s.logged_bytes += n(&v["logged_bytes"]);
        s.logged_total += n(&v["stats"]["logged_bytes"]);
        s.reclaimed_total += n(&v["stats"]["reclaimed_bytes"]);
        s.refused_total += n(&v["stats"]["refused"]);
        s.energy_j += v["power"]["energy_j"].as_f64().unwrap_or(0.0);
        s.standby_s += v["power"]["standby_s"].as_f64().unwrap_or(0.0);
    }
    for addr in &http.loggers {
        let v = status(addr)?;
        s.logger_energy_j += v["power"]["energy_j"]
            .as_f64()
            .ok_or_else(|| anyhow!("logger {addr}: no power figures in /status"))?;
    }
    Ok(s)
}

/// `volume serve --cluster` for `object`; its NBD URL.
fn start_volume(cluster: &LocalCluster, object: &str, size: &str) -> Result<(Proc, String)> {
    cluster
        .start_volume(object, size, &[])
        .map_err(|e| anyhow!("the cluster volume: {e}"))
}

/// Each up-shift to the top gear with data on the loggers: reclaim until the loggers hold
/// nothing of the servers' groups or the gear goes down again, whichever comes first.
fn reclaims(samples: &[Sample]) -> Vec<Reclaim> {
    let mut out = Vec::new();
    for (i, w) in samples.windows(2).enumerate() {
        if !(w[1].gear == 3 && w[0].gear < 3 && w[1].logged_bytes > 0) {
            continue;
        }
        let start = &w[1];
        let rest = &samples[i + 1..];
        let end = rest
            .iter()
            .find(|s| s.logged_bytes == 0 || s.gear < 3)
            .or(rest.last())
            .expect("the start itself");
        let reclaimed = end.reclaimed_total - start.reclaimed_total;
        let seconds = end.t_s - start.t_s;
        out.push(Reclaim {
            at_s: start.t_s,
            logged_bytes: start.logged_bytes,
            seconds,
            reclaimed_bytes: reclaimed,
            left_bytes: end.logged_bytes,
            mb_per_s: (seconds > 0.0).then(|| reclaimed as f64 / 1e6 / seconds),
        });
    }
    out
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
