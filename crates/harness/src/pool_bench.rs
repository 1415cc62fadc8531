//! `cordillera pool bench`: the pool on arrays paced by models of their disks (RAID-5 4+p of
//! `fujitsu-maj3182mc` by default).
//!
//! 1. Narrow against wide: two volumes — one serving random 64 KiB requests, one sequential
//!    1 MiB requests — run at once by two fio processes, first each volume on its own array
//!    (narrow), then both striped over both arrays (wide); reads, then writes; mean and p95
//!    completion latency and throughput per volume, over rounds.
//! 2. Restripe throughput: a filled wide volume is restriped onto an added array, unbounded,
//!    while fio keeps a random 64 KiB load on it; the copy rate against the streaming rate of
//!    one emulated array, measured in the same run (a sequential 1 MiB fio read of a volume
//!    alone on its array), and against the model's per-disk streaming rate.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use cordillera_procs::process::{free_addr, Proc};

use cordillera_runtime::http::http_request;

#[derive(Args)]
pub struct PoolBenchArgs {
    /// Folder for the array files (removed after; defaults to a temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Disk preset pacing each array.
    #[arg(long, default_value = "fujitsu-maj3182mc")]
    emulate: String,
    /// Seconds per fio run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Rounds of narrow and wide (alternating).
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Size of the wide volume restriped in part 2.
    #[arg(long, default_value = "256m")]
    restripe_size: String,
    /// Restripe batch (bytes copied between durable cursors).
    #[arg(long, default_value = "16m")]
    batch: String,
    /// Skip the narrow/wide rounds (only the restripe).
    #[arg(long)]
    restripe_only: bool,
    #[arg(long)]
    json: bool,
}

struct Server {
    _proc: Proc,
    nbd: String,
    http: std::net::SocketAddr,
}

fn start(me: &Path, dir: &Path, arrays: usize, emulate: &str, extra: &[&str]) -> Result<Server> {
    let (nbd, http) = (free_addr()?, free_addr()?);
    let mut args: Vec<String> = vec![
        "pool".into(),
        "serve".into(),
        "--dir".into(),
        dir.join("meta").display().to_string(),
        "--nbd".into(),
        nbd.to_string(),
        "--http".into(),
        http.to_string(),
        "--disk-size".into(),
        "256m".into(),
        "--emulate".into(),
        emulate.into(),
    ];
    for a in 0..arrays {
        args.push("--array".into());
        args.push(dir.join(format!("a{a}")).display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let (proc, _) = Proc::spawn_until(me, &args, &["cordillera pool: "]).map_err(|e| anyhow!(e))?;
    Ok(Server {
        _proc: proc,
        nbd: nbd.to_string(),
        http,
    })
}

impl Server {
    fn create(&self, name: &str, size: &str, policy: &str, unit: &str) -> Result<()> {
        http_request(
            self.http,
            "POST",
            &format!(
                "/volumes?name={name}&size={}&policy={policy}&stripe_unit={}",
                cordillera_models::presets::parse_size(size).map_err(|e| anyhow!(e))?,
                cordillera_models::presets::parse_size(unit).map_err(|e| anyhow!(e))?
            ),
        )
        .map(|_| ())
    }

    fn status(&self) -> Result<serde_json::Value> {
        Ok(serde_json::from_str(&http_request(
            self.http, "GET", "/status",
        )?)?)
    }
}

/// One fio job's figures.
#[derive(Clone, Debug, serde::Serialize)]
struct Job {
    mb_per_s: f64,
    iops: f64,
    mean_ms: f64,
    p95_ms: f64,
}

fn fio_spawn(uri: &str, args: &[&str]) -> Result<Child> {
    crate::fio_nbd::fio_command(uri)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run fio (apt-get install fio)")
}

fn fio_wait(child: Child, write: bool) -> Result<Job> {
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Stopped by SIGINT (the restripe's foreground load), fio still prints its figures.
    let Some(start) = text.find('{') else {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    };
    let v: serde_json::Value = serde_json::from_str(&text[start..])?;
    let j = &v["jobs"][0][if write { "write" } else { "read" }];
    let clat = &j["clat_ns"];
    Ok(Job {
        mb_per_s: j["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        iops: j["iops"].as_f64().unwrap_or(0.0),
        mean_ms: clat["mean"].as_f64().unwrap_or(f64::NAN) / 1e6,
        p95_ms: clat["percentile"]["95.000000"].as_f64().unwrap_or(f64::NAN) / 1e6,
    })
}

#[derive(Clone, Debug, serde::Serialize)]
struct Row {
    round: u32,
    op: &'static str,
    policy: &'static str,
    random_64k: Job,
    sequential_1m: Job,
}

pub fn run(a: PoolBenchArgs) -> Result<()> {
    let me = crate::this_program()?;
    let tmp;
    let base = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let rows = compare_policies(&a, &me, &base)?;
    let seconds = a.seconds.to_string();
    // Part 2: the restripe under load.
    let dir = base.join("restripe");
    std::fs::create_dir_all(&dir)?;
    let s = start(
        &me,
        &dir,
        2,
        &a.emulate,
        &["--restripe-rate", "0", "--batch", &a.batch],
    )?;
    s.create("alone", "128m", "narrow", "512k")?;
    s.create("w", &a.restripe_size, "wide", "32k")?;
    let stream = fio_wait(
        fio_spawn(
            &format!("nbd://{}/alone", s.nbd),
            &[
                "--rw=read",
                "--bs=1m",
                "--iodepth=2",
                "--size=128m",
                &format!("--runtime={seconds}"),
                "--time_based",
                "--ramp_time=1",
            ],
        )?,
        false,
    )?;
    let size = cordillera_models::presets::parse_size(&a.restripe_size).map_err(|e| anyhow!(e))?;
    let fill = fio_wait(
        fio_spawn(
            &format!("nbd://{}/w", s.nbd),
            &[
                "--rw=write",
                "--bs=1m",
                "--iodepth=4",
                &format!("--size={size}"),
            ],
        )?,
        true,
    )?;
    eprintln!(
        "filled the wide volume ({} MiB) at {:.1} MB/s",
        size >> 20,
        fill.mb_per_s
    );
    let foreground = fio_spawn(
        &format!("nbd://{}/w", s.nbd),
        &[
            "--rw=randrw",
            "--bs=64k",
            "--iodepth=2",
            &format!("--size={size}"),
            "--runtime=600",
            "--time_based",
        ],
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let started = Instant::now();
    http_request(
        s.http,
        "POST",
        &format!(
            "/arrays?path={}",
            cordillera_runtime::pool_server::percent_encode(&dir.join("a2").display().to_string())
        ),
    )?;
    let elapsed = loop {
        let st = s.status()?;
        let busy = st["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| !v["restripe"].is_null());
        if !busy {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("the restripe did not finish in 15 minutes");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Stop the foreground load and take its figures.
    let _ = Command::new("kill")
        .args(["-INT", &foreground.id().to_string()])
        .status();
    let fg = fio_wait(foreground, false).ok();
    let st = s.status()?;
    let copied = st["restripe_bytes"].as_u64().unwrap_or(0);
    let restripe_mb_s = copied as f64 / elapsed.as_secs_f64() / 1e6;
    let disk_mb_s = model_streaming_mb_s(&a.emulate)?;
    drop(s);
    if a.dir.is_none() {
        std::fs::remove_dir_all(&base).ok();
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "rows": rows,
                "restripe": {
                    "bytes": copied, "seconds": elapsed.as_secs_f64(), "mb_per_s": restripe_mb_s,
                    "array_streaming_mb_per_s": stream.mb_per_s,
                    "fraction_of_array_streaming": restripe_mb_s / stream.mb_per_s,
                    "disk_streaming_mb_per_s": disk_mb_s,
                    "fraction_of_disk_streaming": restripe_mb_s / disk_mb_s,
                    "foreground": fg,
                }
            }))?
        );
        return Ok(());
    }
    print_rounds(&a, &rows);
    println!(
        "restripe onto an added array under a random 64 KiB load: {} MiB in {:.1} s = {:.1} MB/s; one emulated array streams {:.1} MB/s (measured) → {:.2} of it; the disk model streams {disk_mb_s:.1} MB/s → {:.2} of it (target ≥ 0.5){}",
        copied >> 20,
        elapsed.as_secs_f64(),
        restripe_mb_s,
        stream.mb_per_s,
        restripe_mb_s / stream.mb_per_s,
        restripe_mb_s / disk_mb_s,
        fg.map(|f| format!("; foreground meanwhile: {:.0} IOPS, mean {:.1} ms", f.iops, f.mean_ms)).unwrap_or_default()
    );
    Ok(())
}

/// The disk model's own sequential read rate: 256 back-to-back 1 MiB reads on one modelled
/// disk of the preset.
fn model_streaming_mb_s(preset: &str) -> Result<f64> {
    use cordillera_models::device::{Completion, Device, IoRequest};
    let mut d = cordillera_models::presets::device(preset).map_err(|e| anyhow!(e))?;
    let mut now = 0u64;
    let mut done: Vec<Completion> = Vec::new();
    for i in 0..256u64 {
        d.submit(
            now,
            IoRequest {
                id: i,
                op: cordillera_types::Op::Read,
                offset_bytes: i << 20,
                length_bytes: 1 << 20,
            },
        );
        while done.is_empty() {
            let at = d
                .poll_timeout()
                .ok_or_else(|| anyhow!("the model stalled"))?;
            d.advance(at, &mut done);
        }
        now = done.pop().expect("one").time_ns;
    }
    Ok(256.0 * (1 << 20) as f64 / (now as f64 / 1e9) / 1e6)
}

/// Part 1: each round, a narrow and a wide pool of two arrays, a random and a sequential
/// volume on each, every load measured.
fn compare_policies(a: &PoolBenchArgs, me: &Path, base: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let seconds = a.seconds.to_string();
    for round in (1..=a.rounds).filter(|_| !a.restripe_only) {
        for policy in ["narrow", "wide"] {
            let dir = base.join(format!("{policy}{round}"));
            std::fs::create_dir_all(&dir)?;
            let s = start(me, &dir, 2, &a.emulate, &[])?;
            // Narrow: the first on array 0, the second on the least loaded: array 1.
            s.create("random", "256m", policy, "32k")?;
            s.create("sequential", "256m", policy, "512k")?;
            if policy == "narrow" {
                let st = s.status()?;
                let arrays: Vec<_> = st["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v["arrays"].clone())
                    .collect();
                if arrays[0] == arrays[1] {
                    bail!("narrow volumes share an array: {arrays:?}");
                }
            }
            for op in ["read", "write"] {
                let write = op == "write";
                let (rr, sr) = if write {
                    ("randwrite", "write")
                } else {
                    ("randread", "read")
                };
                let runtime = format!("--runtime={seconds}");
                let random = fio_spawn(
                    &format!("nbd://{}/random", s.nbd),
                    &[
                        &format!("--rw={rr}"),
                        "--bs=64k",
                        "--iodepth=4",
                        "--size=256m",
                        &runtime,
                        "--time_based",
                        "--ramp_time=1",
                    ],
                )?;
                let sequential = fio_spawn(
                    &format!("nbd://{}/sequential", s.nbd),
                    &[
                        &format!("--rw={sr}"),
                        "--bs=1m",
                        "--iodepth=2",
                        "--size=256m",
                        &runtime,
                        "--time_based",
                        "--ramp_time=1",
                    ],
                )?;
                let row = Row {
                    round,
                    op,
                    policy,
                    random_64k: fio_wait(random, write)?,
                    sequential_1m: fio_wait(sequential, write)?,
                };
                eprintln!(
                    "[round {round}] {policy:<6} {op:<5}: random 64 KiB mean {:.1} ms p95 {:.1} ms ({:.0} IOPS); sequential 1 MiB mean {:.1} ms p95 {:.1} ms ({:.1} MB/s)",
                    row.random_64k.mean_ms, row.random_64k.p95_ms, row.random_64k.iops,
                    row.sequential_1m.mean_ms, row.sequential_1m.p95_ms, row.sequential_1m.mb_per_s
                );
                rows.push(row);
            }
            drop(s);
            std::fs::remove_dir_all(&dir)?;
        }
    }
    Ok(rows)
}

/// Part 1's table: each load's figures, mean (min–max) over the rounds, and wide over narrow.
fn print_rounds(a: &PoolBenchArgs, rows: &[Row]) {
    let mean = |f: &dyn Fn(&Row) -> f64, op: &str, policy: &str| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.op == op && r.policy == policy)
            .map(f)
            .collect();
        let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let lo = v.iter().copied().fold(f64::MAX, f64::min);
        let hi = v.iter().copied().fold(f64::MIN, f64::max);
        (m, lo, hi)
    };
    println!(
        "pool bench: 2 arrays of RAID-5 4+p {} (emulated), random 64 KiB (iodepth 4) beside sequential 1 MiB (iodepth 2), {} s per run, {} round(s); mean (min–max) over rounds",
        a.emulate, a.seconds, a.rounds
    );
    println!(
        "{:<6} {:<7} {:>24} {:>24} {:>24} {:>24}",
        "op", "policy", "random mean ms", "random p95 ms", "sequential mean ms", "sequential MB/s"
    );
    for op in ["read", "write"] {
        for policy in ["narrow", "wide"] {
            let f = |x: (f64, f64, f64)| format!("{:.1} ({:.1}–{:.1})", x.0, x.1, x.2);
            println!(
                "{op:<6} {policy:<7} {:>24} {:>24} {:>24} {:>24}",
                f(mean(&|r| r.random_64k.mean_ms, op, policy)),
                f(mean(&|r| r.random_64k.p95_ms, op, policy)),
                f(mean(&|r| r.sequential_1m.mean_ms, op, policy)),
                f(mean(&|r| r.sequential_1m.mb_per_s, op, policy)),
            );
        }
        let ratio = |f: &dyn Fn(&Row) -> f64| mean(f, op, "wide").0 / mean(f, op, "narrow").0;
        println!(
            "{op:<6} wide/narrow: random mean {:.2}, random p95 {:.2}, sequential mean {:.2}, sequential MB/s {:.2}",
            ratio(&|r| r.random_64k.mean_ms),
            ratio(&|r| r.random_64k.p95_ms),
            ratio(&|r| r.sequential_1m.mean_ms),
            ratio(&|r| r.sequential_1m.mb_per_s)
        );
    }
}
