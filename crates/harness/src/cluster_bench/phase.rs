//! One run of the bench's day against a fresh cluster (the baseline's or the gear plan's): the
//! replay through the volume, samples of the servers' and loggers' `/status` while it runs
//! (energy, standby, logging), each hour's response times, and the reclaims after up-shifts.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use cordillera_procs::cluster::{http_get, ClusterOptions, Daemon, LocalCluster};
use cordillera_procs::process::Proc;
use cordillera_runtime::nbd_client::NbdUrl;
use cordillera_runtime::replay::{replay, LiveReplayReport, Mode, ReplayOptions};

use super::day::Day;
use super::ClusterBenchArgs;

/// A sample of the cluster while the day runs.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct Sample {
    pub(super) t_s: f64,
    pub(super) gear: usize,
    pub(super) servers_up: usize,
    /// Bytes of the servers' groups held on loggers now.
    pub(super) logged_bytes: u64,
    /// Counters summed over the servers.
    pub(super) logged_total: u64,
    pub(super) reclaimed_total: u64,
    pub(super) refused_total: u64,
    pub(super) energy_j: f64,
    pub(super) standby_s: f64,
    /// The loggers' energy, by the same power model (busy while their disks are).
    pub(super) logger_energy_j: f64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct HourResult {
    pub(super) hour: usize,
    pub(super) gear: usize,
    pub(super) shift_window: bool,
    pub(super) reclaiming: bool,
    pub(super) completions: u64,
    pub(super) mean_ms: Option<f64>,
    pub(super) p99_ms: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Reclaim {
    pub(super) at_s: f64,
    pub(super) logged_bytes: u64,
    /// Until the loggers held nothing of the servers' groups, or the gear went down.
    pub(super) seconds: f64,
    pub(super) reclaimed_bytes: u64,
    /// On the loggers at the end (0: emptied).
    pub(super) left_bytes: u64,
    pub(super) mb_per_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Phase {
    pub(super) name: &'static str,
    pub(super) replay: LiveReplayReport,
    pub(super) hours: Vec<HourResult>,
    /// Chunk servers' energy over the day (J).
    pub(super) energy_j: f64,
    /// The loggers' energy over the day (J), measured as the chunk servers' is.
    pub(super) logger_energy_j: f64,
    /// Of the day's server-seconds, the fraction spent in standby.
    pub(super) standby_fraction: f64,
    pub(super) shifts: Vec<serde_json::Value>,
    pub(super) migrations: u64,
    /// Client requests the chunk servers refused (not the primary, lease lapsed, migrating):
    /// each is retried by the client (the paper's Table 3 counts retries).
    pub(super) refused: u64,
    pub(super) logged_bytes: u64,
    pub(super) reclaimed_bytes: u64,
    pub(super) reclaims: Vec<Reclaim>,
    /// Seconds after the day until the loggers held nothing (None: not within the wait).
    pub(super) loggers_empty_after_s: Option<f64>,
    pub(super) samples: Vec<Sample>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How far ahead of a phase's cluster start its day begins.
const START_MARGIN_MS: u64 = 8_000;

/// Dedicated loggers per rack (the paper's testbed: one).
pub(super) const LOGGERS_PER_RACK: u32 = 1;

/// One run of the day: a fresh cluster of `per_rack` chunk servers in each rack, top gear all
/// day (`gears` None) or the plan.
pub(super) fn run_phase(
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
pub(super) fn start_volume(
    cluster: &LocalCluster,
    object: &str,
    size: &str,
) -> Result<(Proc, String)> {
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
