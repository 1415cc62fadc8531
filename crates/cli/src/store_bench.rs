//! `cordillera store bench --dir DIR`: the store against the device it runs on, measured in one
//! run on the same file system, as ratios to fio with matched durability:
//!
//! 1. 64 KiB durable writes, 16 outstanding: store MB/s ÷ fio sequential 64 KiB writes at depth 16
//!    (`--direct=1 --fdatasync=N`, N = the store's records per flush in the same run);
//! 2. 4 KiB durable writes, 32 outstanding: the same with 4 KiB;
//! 3. p99 acknowledgement latency at 1 outstanding (4 KiB) ÷ fio's p99 write + p99 fdatasync
//!    latency at depth 1 with `--fdatasync=1`;
//! 4. recovery scan MB/s ÷ fio sequential 1 MiB reads of the same log bytes; page caches dropped
//!    before each, both run twice alternately, best of each.
//!
//! Ratios ≥ 1 favour the store, except latency, where ≤ 1 does.
//!
//! The store's log is filled with zeros when it is created (untimed, as `store format` does), so
//! its writes overwrite allocated blocks; fio writes over a file laid out the same way (untimed),
//! so that neither side pays the file system's block allocation in the timed part. With
//! `--sparse`, both pay it: the store's log is left sparse and fio writes a new file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use cordillera_runtime::disk::{drop_cached_pages, DiskFile, IoMode};
use cordillera_runtime::store_server::{open_store, serve, zero_fill, ServeOptions, StoreClient};
use cordillera_vstore::store::{Reply, Request, Stats};
use serde::Serialize;

#[derive(Args)]
pub struct StoreBenchArgs {
    /// Directory on the file system to measure (files are created and removed there).
    #[arg(long)]
    dir: PathBuf,
    /// Bytes written by each throughput test (and scanned by the recovery test).
    #[arg(long, default_value = "256m")]
    bytes: String,
    /// Requests of the latency test.
    #[arg(long, default_value_t = 2000)]
    latency_requests: u64,
    #[arg(long)]
    json: bool,
    /// The store's I/O mode, as `store serve --io`.
    #[arg(long, default_value = "auto")]
    io: IoMode,
    /// Rounds of every measurement (store and fio alternately); the figures are medians.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Keep the 64 KiB test's store file (DIR/bench-65536.store), e.g. for `store inspect`.
    #[arg(long)]
    keep: bool,
    /// Also measure the store's write throughput with its log on this memory file system
    /// (e.g. /dev/shm), where a flush costs nothing: the ceiling that the protocol, the copies
    /// and the CPU set on this machine, with no device at all.
    #[arg(long)]
    memory_dir: Option<PathBuf>,
    /// Leave the store's log sparse and let fio write a new file: both then pay the file
    /// system's block allocation during the timed writes (the store's first lap on a log made
    /// with `--sparse`).
    #[arg(long)]
    sparse: bool,
}

#[derive(Serialize)]
struct Figures {
    store_64k_mb_per_s: f64,
    fio_64k_mb_per_s: f64,
    store_64k_records_per_flush: f64,
    store_4k_mb_per_s: f64,
    fio_4k_mb_per_s: f64,
    store_4k_records_per_flush: f64,
    store_p50_ack_latency_us: f64,
    fio_p50_write_plus_fdatasync_us: f64,
    store_p99_ack_latency_us: f64,
    fio_p99_write_plus_fdatasync_us: f64,
    store_recovery_scan_mb_per_s: f64,
    fio_sequential_read_mb_per_s: f64,
    ratio_64k_throughput: f64,
    ratio_4k_throughput: f64,
    ratio_p99_ack_latency: f64,
    ratio_recovery_scan: f64,
    /// With `--memory-dir`: the same write tests with the log in memory (no device).
    store_64k_memory_mb_per_s: Option<f64>,
    store_4k_memory_mb_per_s: Option<f64>,
}

pub fn run(args: StoreBenchArgs) -> Result<()> {
    if Command::new("fio").arg("--version").output().is_err() {
        bail!("fio is not installed (apt-get install fio); the benchmark measures against it");
    }
    std::fs::create_dir_all(&args.dir)?;
    let bytes = cordillera_sim::presets::parse_size(&args.bytes).map_err(anyhow::Error::msg)?;
    let dir = &args.dir;
    let progress = |what: &str| eprintln!("store bench: {what}");

    let rounds = args.repeat.max(1);
    let small = (bytes / 8).max(16 << 20);
    let mut samples: Vec<Round> = Vec::new();
    // Each round measures the store and then fio, alternately, so that slow phases of a shared
    // machine fall on both; the figures are the medians over the rounds.
    for round in 1..=rounds {
        progress(&format!(
            "round {round}/{rounds}: 64 KiB writes, 16 outstanding"
        ));
        let (store_64k, flush_64k, store_file) =
            store_writes(dir, 65536, 16, bytes, args.io, args.sparse)?;
        let fio_64k = fio_write(
            dir,
            "64k",
            16,
            flush_64k.round().max(1.0) as u64,
            bytes,
            args.sparse,
        )?;

        progress(&format!("round {round}/{rounds}: recovery scan"));
        // Whichever reads first also warms caches below the page cache (a virtual disk's host
        // cache): scan, read, read, scan, and the best of each.
        let (first_scan, scanned) = recovery_scan(&store_file, args.io)?;
        let first_read = fio_read(&store_file, scanned)?;
        let second_read = fio_read(&store_file, scanned)?;
        let (second_scan, _) = recovery_scan(&store_file, args.io)?;
        if !args.keep || round < rounds {
            std::fs::remove_file(&store_file).ok();
        }

        progress(&format!(
            "round {round}/{rounds}: 4 KiB writes, 32 outstanding"
        ));
        let (store_4k, flush_4k, file_4k) =
            store_writes(dir, 4096, 32, small, args.io, args.sparse)?;
        std::fs::remove_file(&file_4k).ok();
        let fio_4k = fio_write(
            dir,
            "4k",
            32,
            flush_4k.round().max(1.0) as u64,
            small,
            args.sparse,
        )?;

        progress(&format!(
            "round {round}/{rounds}: acknowledgement latency, 1 outstanding"
        ));
        let (store_p50, store_p99) =
            store_latency(dir, args.latency_requests, args.io, args.sparse)?;
        let (fio_p50, fio_p99) = fio_latency(dir, args.latency_requests, args.sparse)?;
        let mut memory = (f64::NAN, f64::NAN);
        if let Some(memory_dir) = &args.memory_dir {
            progress(&format!(
                "round {round}/{rounds}: writes with the log in {}",
                memory_dir.display()
            ));
            let (m64, _, f64k) =
                store_writes(memory_dir, 65536, 16, bytes, IoMode::Buffered, false)?;
            std::fs::remove_file(f64k).ok();
            let (m4, _, f4k) = store_writes(memory_dir, 4096, 32, small, IoMode::Buffered, false)?;
            std::fs::remove_file(f4k).ok();
            memory = (m64, m4);
        }
        samples.push(Round {
            store_64k,
            fio_64k,
            flush_64k,
            store_4k,
            fio_4k,
            flush_4k,
            store_p50,
            fio_p50,
            store_p99,
            fio_p99,
            scan: first_scan.max(second_scan),
            read: first_read.max(second_read),
            memory_64k: memory.0,
            memory_4k: memory.1,
        });
    }
    let median = |field: fn(&Round) -> f64| {
        let mut values: Vec<f64> = samples.iter().map(field).collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        }
    };
    let (store_64k, fio_64k) = (median(|r| r.store_64k), median(|r| r.fio_64k));
    let (store_4k, fio_4k) = (median(|r| r.store_4k), median(|r| r.fio_4k));
    let (scan, fio_read) = (median(|r| r.scan), median(|r| r.read));
    let (store_p99, fio_p99) = (median(|r| r.store_p99), median(|r| r.fio_p99));

    let f = Figures {
        store_64k_mb_per_s: store_64k,
        fio_64k_mb_per_s: fio_64k,
        store_64k_records_per_flush: median(|r| r.flush_64k),
        store_4k_mb_per_s: store_4k,
        fio_4k_mb_per_s: fio_4k,
        store_4k_records_per_flush: median(|r| r.flush_4k),
        store_p50_ack_latency_us: median(|r| r.store_p50),
        fio_p50_write_plus_fdatasync_us: median(|r| r.fio_p50),
        store_p99_ack_latency_us: store_p99,
        fio_p99_write_plus_fdatasync_us: fio_p99,
        store_recovery_scan_mb_per_s: scan,
        fio_sequential_read_mb_per_s: fio_read,
        ratio_64k_throughput: store_64k / fio_64k,
        ratio_4k_throughput: store_4k / fio_4k,
        ratio_p99_ack_latency: store_p99 / fio_p99,
        ratio_recovery_scan: scan / fio_read,
        store_64k_memory_mb_per_s: args.memory_dir.as_ref().map(|_| median(|r| r.memory_64k)),
        store_4k_memory_mb_per_s: args.memory_dir.as_ref().map(|_| median(|r| r.memory_4k)),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    println!(
        "{:<44} {:>12} {:>12} {:>8}  target",
        "measurement", "store", "fio", "ratio"
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≥ 0.9",
        "64 KiB writes, 16 outstanding (MB/s)",
        f.store_64k_mb_per_s,
        f.fio_64k_mb_per_s,
        f.ratio_64k_throughput
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≥ 0.8",
        "4 KiB writes, 32 outstanding (MB/s)",
        f.store_4k_mb_per_s,
        f.fio_4k_mb_per_s,
        f.ratio_4k_throughput
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≤ 1.5",
        "p99 ack latency, 1 outstanding (µs)",
        f.store_p99_ack_latency_us,
        f.fio_p99_write_plus_fdatasync_us,
        f.ratio_p99_ack_latency
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≥ 0.8",
        "recovery scan vs sequential read (MB/s)",
        f.store_recovery_scan_mb_per_s,
        f.fio_sequential_read_mb_per_s,
        f.ratio_recovery_scan
    );
    println!("(fio fdatasync every {:.0} writes at 64 KiB and {:.0} at 4 KiB: the store's records per flush)", f.store_64k_records_per_flush.round(), f.store_4k_records_per_flush.round());
    if let (Some(m64), Some(m4)) = (f.store_64k_memory_mb_per_s, f.store_4k_memory_mb_per_s) {
        println!("store with its log in memory (no device): {m64:.1} MB/s at 64 KiB, {m4:.1} MB/s at 4 KiB");
    }
    Ok(())
}

/// One round's figures (MB/s, records per flush, µs).
struct Round {
    store_64k: f64,
    fio_64k: f64,
    flush_64k: f64,
    store_4k: f64,
    fio_4k: f64,
    flush_4k: f64,
    store_p50: f64,
    fio_p50: f64,
    store_p99: f64,
    fio_p99: f64,
    scan: f64,
    read: f64,
    memory_64k: f64,
    memory_4k: f64,
}

/// A store server on a fresh file in `dir`, on its own runtime thread.
fn start_store(
    dir: &Path,
    name: &str,
    log_bytes: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(std::net::SocketAddr, Arc<Mutex<Stats>>, PathBuf)> {
    let path = dir.join(name);
    std::fs::remove_file(&path).ok();
    let stats = Arc::new(Mutex::new(Stats::default()));
    let options = ServeOptions {
        path: path.clone(),
        log_bytes,
        listen: "127.0.0.1:0".parse().unwrap(),
        broadcast: Duration::from_secs(1),
        io,
        sparse,
        stats: Some(stats.clone()),
        emulate: None,
        limits: Default::default(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let result = runtime.block_on(serve(options, |addr| {
            let _ = tx.send(addr);
        }));
        if let Err(e) = result {
            eprintln!("store bench: server failed: {e:#}");
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .context("the store server did not start")?;
    Ok((addr, stats, path))
}

/// Writes `total` bytes in `size`-byte writes with `depth` outstanding; MB/s and records/flush.
fn store_writes(
    dir: &Path,
    size: u64,
    depth: usize,
    total: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(f64, f64, PathBuf)> {
    let log = (total + total / 4 + (64 << 20)) / 512 * 512;
    let (addr, stats, path) = start_store(dir, &format!("bench-{size}.store"), log, io, sparse)?;
    let mut client = StoreClient::connect(addr)?;
    let count = total / size;
    let data = vec![0x5a; size as usize];
    let started = Instant::now();
    let (mut sent, mut done) = (0u64, 0u64);
    while done < count {
        while sent < count && sent - done < depth as u64 {
            client.send(Request::Write {
                client: 1,
                volume: 1,
                offset_bytes: sent * size,
                version: sent + 1,
                data: data.clone(),
            })?;
            sent += 1;
        }
        match client.receive()? {
            (_, Reply::Done) => done += 1,
            (_, other) => bail!("store bench: unexpected reply {other:?}"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let s = *stats.lock().unwrap();
    let per_flush = s.records_written as f64 / s.flushes.max(1) as f64;
    Ok(((count * size) as f64 / 1e6 / seconds, per_flush, path))
}

/// Median and 99th percentile acknowledgement latency (µs) at one outstanding write.
fn store_latency(dir: &Path, requests: u64, io: IoMode, sparse: bool) -> Result<(f64, f64)> {
    let (addr, _, path) = start_store(dir, "bench-latency.store", 256 << 20, io, sparse)?;
    let mut client = StoreClient::connect(addr)?;
    let data = vec![0xa5; 4096];
    let mut latencies = Vec::with_capacity(requests as usize);
    for i in 0..requests {
        let started = Instant::now();
        let reply = client.call(Request::Write {
            client: 1,
            volume: 1,
            offset_bytes: i * 4096,
            version: i + 1,
            data: data.clone(),
        })?;
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
        if reply != Reply::Done {
            bail!("store bench: unexpected reply {reply:?}");
        }
    }
    std::fs::remove_file(path).ok();
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| {
        latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    Ok((at(0.5), at(0.99)))
}

/// MB/s of recovery, and the bytes of log it scanned.
fn recovery_scan(path: &Path, io: IoMode) -> Result<(f64, u64)> {
    let file = std::fs::File::open(path)?;
    drop_cached_pages(&file).context("dropping cached pages")?;
    drop(file);
    let started = Instant::now();
    let (_, store) = open_store(path, 0, 1, io, false)?;
    let seconds = started.elapsed().as_secs_f64();
    let scanned = store.stats().bytes_scanned;
    Ok((scanned as f64 / 1e6 / seconds, scanned))
}

fn fio_json(args: &[String]) -> Result<serde_json::Value> {
    let out = Command::new("fio")
        .args(args)
        .arg("--output-format=json")
        .output()?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON object.
    let start = text.find('{').context("no JSON from fio")?;
    Ok(serde_json::from_str(&text[start..])?)
}

/// A file of `bytes` zeros, written and made durable, its pages dropped from the cache: fio's
/// target, laid out as the store's log is.
fn laid_out(path: &Path, bytes: u64) -> Result<()> {
    std::fs::remove_file(path).ok();
    let file = DiskFile::open(path, true, IoMode::Buffered)?;
    file.file.set_len(bytes)?;
    zero_fill(&file, 0, bytes)?;
    drop_cached_pages(&file.file)?;
    Ok(())
}

fn fio_write(
    dir: &Path,
    bs: &str,
    depth: usize,
    fdatasync: u64,
    total: u64,
    new_file: bool,
) -> Result<f64> {
    let file = dir.join("bench-fio.dat");
    if !new_file {
        laid_out(&file, total)?;
    }
    let json = fio_json(&[
        "--name=write".into(),
        format!("--filename={}", file.display()),
        "--rw=write".into(),
        format!("--bs={bs}"),
        format!("--size={total}"),
        "--ioengine=libaio".into(),
        format!("--iodepth={depth}"),
        "--direct=1".into(),
        format!("--fdatasync={fdatasync}"),
    ])?;
    std::fs::remove_file(file).ok();
    Ok(json["jobs"][0]["write"]["bw_bytes"]
        .as_f64()
        .context("fio bw")?
        / 1e6)
}

/// fio's median and 99th percentile write latency plus fdatasync latency (µs) at depth 1.
fn fio_latency(dir: &Path, requests: u64, new_file: bool) -> Result<(f64, f64)> {
    let file = dir.join("bench-fio-lat.dat");
    if !new_file {
        laid_out(&file, requests * 4096)?;
    }
    let json = fio_json(&[
        "--name=latency".into(),
        format!("--filename={}", file.display()),
        "--rw=write".into(),
        "--bs=4k".into(),
        format!("--size={}", requests * 4096),
        "--ioengine=psync".into(),
        "--direct=1".into(),
        "--fdatasync=1".into(),
    ])?;
    std::fs::remove_file(file).ok();
    let job = &json["jobs"][0];
    let sum = |q: &str| -> Result<f64> {
        let write = job["write"]["clat_ns"]["percentile"][q]
            .as_f64()
            .context("fio write percentile")?;
        let sync = job["sync"]["lat_ns"]["percentile"][q]
            .as_f64()
            .context("fio sync percentile")?;
        Ok((write + sync) / 1e3)
    };
    Ok((sum("50.000000")?, sum("99.000000")?))
}

/// Sequential 1 MiB reads of exactly the log bytes recovery scanned (the rest of the file is
/// unwritten, and reading holes would flatter fio).
fn fio_read(path: &Path, bytes: u64) -> Result<f64> {
    let file = std::fs::File::open(path)?;
    drop_cached_pages(&file)?;
    let json = fio_json(&[
        "--name=read".into(),
        format!("--filename={}", path.display()),
        "--rw=read".into(),
        "--bs=1m".into(),
        format!("--offset={}", cordillera_vstore::format::LOG_OFFSET),
        format!("--size={bytes}"),
        "--ioengine=psync".into(),
        "--readonly".into(),
    ])?;
    Ok(json["jobs"][0]["read"]["bw_bytes"]
        .as_f64()
        .context("fio read bw")?
        / 1e6)
}
