//! `cordillera volume warmup-bench`: Bonfire's overheads (§6.3, Table 4) on real I/O. A trace is
//! replayed through a volume server with a cache and a warm-up log, once logging metadata only
//! and once metadata+data; the log space and the average logging bandwidth are what the server
//! wrote to its log over the replay. The server is then stopped cleanly and restarted, and the
//! pre-warm time is how long its pre-load took, with the read hit rate of the trace's reads
//! replayed again right after it and, for comparison, with a cold cache.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::volume_bench::{spawn_until, work_dir, Proc, Setup};
use cordillera_runtime::http::http_get;

#[derive(Args)]
pub struct WarmupBenchArgs {
    /// The trace to replay (any format `cordillera replay` reads, or gen:NAME[:…]).
    #[arg(long, default_value = "gen:zipf:count=200000,span=1g,alpha=1")]
    trace: String,
    /// The volume's size (the trace's offsets wrap around it).
    #[arg(long, default_value = "1g")]
    region: String,
    /// The cache.
    #[arg(long, default_value = "256m")]
    cache_size: String,
    /// Requests in flight during the replay (closed loop).
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Where the files go (default: a fresh folder under /var/tmp, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    scheme: &'static str,
    requests: u64,
    replay_s: f64,
    log_bytes: u64,
    log_chunks: u64,
    log_bytes_per_s: f64,
    prewarm_s: f64,
    preloaded_bytes: u64,
    source: String,
    hit_rate_before_restart: Option<f64>,
    hit_rate_after_restart: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    trace: String,
    cache_size: String,
    rows: Vec<Row>,
    /// The second replay's hit rate with a cold cache (no log).
    cold_hit_rate: Option<f64>,
}

fn status(metrics: &str) -> Result<serde_json::Value> {
    let addr = metrics.parse().context("metrics address")?;
    Ok(serde_json::from_str(&http_get(addr, "/status")?)?)
}

/// (read blocks, hit blocks).
fn counts(metrics: &str) -> Result<(f64, f64)> {
    let c = status(metrics)?["cache"].clone();
    Ok((
        c["read_blocks"].as_f64().unwrap_or(0.0),
        c["hit_blocks"].as_f64().unwrap_or(0.0),
    ))
}

/// Replays the trace closed-loop; returns (requests, seconds).
fn replay(me: &std::path::Path, trace: &str, uri: &str, depth: usize) -> Result<(u64, f64)> {
    let out = Command::new(me)
        .args(["replay", "--trace", trace, "--nbd", uri, "--depth"])
        .arg(depth.to_string())
        .arg("--json")
        .output()?;
    if !out.status.success() {
        bail!("replay: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    Ok((
        v["records"].as_u64().unwrap_or(0),
        v["duration_s"].as_f64().unwrap_or(0.0),
    ))
}

/// The hit rate of one replay of the trace.
fn hit_rate_of_replay(
    me: &std::path::Path,
    trace: &str,
    uri: &str,
    metrics: &str,
    depth: usize,
) -> Result<Option<f64>> {
    let (r0, h0) = counts(metrics)?;
    replay(me, trace, uri, depth)?;
    let (r1, h1) = counts(metrics)?;
    Ok((r1 > r0).then(|| (h1 - h0) / (r1 - r0)))
}

fn wait_warmed(metrics: &str) -> Result<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let c = status(metrics)?["cache"].clone();
        if c["warmup"]["done"] == true {
            return Ok(c);
        }
        if Instant::now() > deadline {
            bail!("the pre-load did not finish in 10 minutes: {c}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Restarts the volume on `base` with `flags`; returns the process, NBD URI and metrics address.
fn restart(
    setup: &Setup,
    base: &std::path::Path,
    flags: &[String],
) -> Result<(Proc, String, String)> {
    let mut args: Vec<String> = [
        "volume",
        "serve",
        "--nbd",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--base",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(base.to_string_lossy().into());
    args.extend_from_slice(flags);
    let (p, found) = spawn_until(
        &setup.me,
        &args,
        &[
            "cordillera volume: NBD export at ",
            "cordillera volume: metrics at http://",
        ],
    )?;
    Ok((
        p,
        found[0].clone(),
        found[1].trim_end_matches("/metrics").to_string(),
    ))
}

pub fn run(a: WarmupBenchArgs) -> Result<()> {
    let region = cordillera_models::presets::parse_size(&a.region).map_err(anyhow::Error::msg)?;
    let (dir, _scratch) = work_dir(
        &a.dir,
        std::path::Path::new("/var/tmp"),
        "cordillera-warmup-bench.",
    )?;
    let setup = Setup {
        me: crate::this_program()?,
        dir: &dir,
        region,
    };
    let mut rows = Vec::new();
    let mut cold_hit_rate = None;
    for (scheme, data) in [("metadata-only", false), ("metadata+data", true)] {
        let name = if data { "data" } else { "meta" };
        let log = dir.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&log);
        let mut flags: Vec<String> = [
            "--cache-size",
            &a.cache_size,
            "--warmup-size",
            "100%",
            "--warmup-log-size",
            if data { "2g" } else { "64m" },
            "--warmup-log",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        flags.push(log.to_string_lossy().into());
        if data {
            flags.push("--warmup-data".into());
        }
        let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
        let (mut procs, uri, metrics) = setup.volume(name, &extra, false)?;
        eprintln!("[{scheme}] replaying {}", a.trace);
        let (r0, h0) = counts(&metrics)?;
        let (requests, replay_s) = replay(&setup.me, &a.trace, &uri, a.depth)?;
        let (r1, h1) = counts(&metrics)?;
        let before = (r1 > r0).then(|| (h1 - h0) / (r1 - r0));
        let c = status(&metrics)?["cache"].clone();
        let log_bytes = c["log_bytes_written"].as_u64().unwrap_or(0);
        let log_chunks = c["log_chunks_written"].as_u64().unwrap_or(0);
        if !procs[0]
            .terminate(Duration::from_secs(60))
            .map_err(anyhow::Error::msg)?
        {
            bail!("the volume server did not stop cleanly");
        }
        let base = dir.join(format!("{name}.base"));
        let (v, uri, metrics) = restart(&setup, &base, &flags)?;
        let c = wait_warmed(&metrics)?;
        let prewarm_s = c["warmup"]["seconds"].as_f64().unwrap_or(0.0);
        let after = hit_rate_of_replay(&setup.me, &a.trace, &uri, &metrics, a.depth)?;
        eprintln!("[{scheme}] pre-warm {prewarm_s:.2} s; hit rate {before:?} before, {after:?} right after the restart");
        rows.push(Row {
            scheme,
            requests,
            replay_s,
            log_bytes,
            log_chunks,
            log_bytes_per_s: log_bytes as f64 / replay_s.max(1e-9),
            prewarm_s,
            preloaded_bytes: c["warmup"]["loaded_bytes"].as_u64().unwrap_or(0),
            source: c["warmup"]["source"].as_str().unwrap_or("").to_owned(),
            hit_rate_before_restart: before,
            hit_rate_after_restart: after,
        });
        drop(v);
        if !data {
            // The same volume without its log: a cold cache.
            let (v, uri, metrics) = restart(
                &setup,
                &base,
                &["--cache-size".into(), a.cache_size.clone()],
            )?;
            cold_hit_rate = hit_rate_of_replay(&setup.me, &a.trace, &uri, &metrics, a.depth)?;
            drop(v);
        }
        drop(procs);
    }
    let report = Report {
        trace: a.trace.clone(),
        cache_size: a.cache_size.clone(),
        rows,
        cold_hit_rate,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let pct = |h: Option<f64>| h.map_or("-".to_owned(), |h| format!("{:.1} %", h * 100.0));
    println!(
        "Bonfire overheads on real I/O (Table 4): {} replayed at depth {} through a {} cache",
        report.trace, a.depth, report.cache_size
    );
    println!(
        "  {:<14} {:>10} {:>12} {:>14} {:>14} {:>12} {:>12} {:>12}",
        "scheme",
        "requests",
        "log space",
        "log bandwidth",
        "pre-warm time",
        "pre-loaded",
        "hits before",
        "hits after"
    );
    for r in &report.rows {
        println!(
            "  {:<14} {:>10} {:>9.1} MB {:>9.2} MB/s {:>12.2} s {:>9.1} MB {:>12} {:>12}",
            r.scheme,
            r.requests,
            r.log_bytes as f64 / 1e6,
            r.log_bytes_per_s / 1e6,
            r.prewarm_s,
            r.preloaded_bytes as f64 / 1e6,
            pct(r.hit_rate_before_restart),
            pct(r.hit_rate_after_restart)
        );
    }
    println!(
        "  the same replay after a restart without the log (cold cache): {} hits",
        pct(report.cold_hit_rate)
    );
    Ok(())
}
