//! `cordillera store bench --dir DIR`: the store measured against baselines in one run.
//!
//! What the store controls, each a ratio to a baseline measured in the same run:
//!
//! - **Transport ceiling** (`ratio_transport_ceiling`, target ≥ 0.8): the store with its log in
//!   memory (`--memory-dir`, default `/dev/shm`: a flush costs nothing) against a minimal sink
//!   server on the same loopback, driven by the same client with the same frames (64 KiB writes,
//!   16 outstanding; 4 KiB, 32 outstanding) and answering with a reply of the store's size. The
//!   sink only finds frame boundaries and answers; the difference is what the store's own
//!   work (decoding, checksums, the log, copies, wake-ups) costs. Beside it, the log floor
//!   (`ratio_log_floor`): the sink that also checksums each frame and appends it to a file in
//!   memory with a write and `fdatasync` per read, the least a store that keeps what it
//!   acknowledges does. The three servers run together and the client alternates between them
//!   in slices (see `store_bench/ceiling.rs`); a ratio is the median of the slice-by-slice
//!   ratios, with their 10th–90th percentiles and the ratio over all bytes beside it. CPU
//!   seconds per GB written are reported for each server (the process's CPU time less the
//!   client thread's).
//! - **Device streaming** (`ratio_device_streaming`, target ≥ 0.9): the store's log on an
//!   emulated disk (`--device`, default `cheetah-15k`, as `store serve --emulate`), where the
//!   device and not the CPU is the limit; clients write random blocks of a 16 GiB volume
//!   (64 KiB with 16 outstanding, 4 KiB with 128 and with 32), which the store turns into
//!   sequential log writes. Against the same model's streaming rate, measured in the run:
//!   sequential 1 MiB writes, 8 outstanding, straight to the emulated device. The ratio is the
//!   log's write rate (records, headers and padding included) over the streaming rate, the
//!   lower of 64 KiB × 16 and 4 KiB × 128; payload rates are printed beside it (a 4 KiB write
//!   is a 4,608-byte record, so its payload reaches at most 0.889 of the device's rate), and
//!   4 KiB × 32, where 147 KB in flight are too few to cover a write and flush cycle.
//!
//! Informative, against the machine's own disk (the first baseline, kept for comparison; on
//! a virtual disk whose host absorbs durable writes faster than loopback TCP moves them, these
//! ratios measure the host, not the store — see docs/BENCHMARKS.md), as ratios to fio with
//! matched durability:
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

mod ceiling;
mod device;
mod fio;
mod store;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use cordillera_runtime::disk::{drop_cached_pages, DiskFile, IoMode};
use cordillera_runtime::emulate::{EmulateSpec, Emulator};
use cordillera_runtime::store_server::{open_store, serve, zero_fill, ServeOptions, StoreClient};
use cordillera_vstore::store::{Reply, Request, Stats};
use serde::Serialize;

use ceiling::Ceiling;
// Where the servers' threads and the client's run: apart, as on two machines, and the same for
// the store and its baselines.
use crate::cpus::{pin, unpin, CLIENT_CPU, SERVER_CPU};
use device::*;
use fio::*;
use store::*;

#[derive(Args)]
pub struct StoreBenchArgs {
    /// Directory on the file system to measure (files are created and removed there).
    #[arg(long)]
    dir: PathBuf,
    /// Bytes written by each throughput test (and scanned by the recovery test).
    #[arg(long, default_value = "256m")]
    bytes: String,
    /// Bytes written to each server of the transport ceiling per round at 64 KiB (a quarter of
    /// it at 4 KiB), in 8 slices alternating between the servers. The memory directory must
    /// hold 1.6 times this plus 320 MiB (the store's log and the log floor's file).
    #[arg(long, default_value = "1g")]
    ceiling_bytes: String,
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
    /// The memory file system for the transport-ceiling test (the store's log there costs
    /// no device time) [default: /dev/shm when present].
    #[arg(long)]
    memory_dir: Option<PathBuf>,
    /// The modeled disk of the device-streaming test (a preset, as `store serve --emulate`).
    #[arg(long, default_value = "cheetah-15k")]
    device: String,
    /// Seconds of each device-streaming measurement.
    #[arg(long, default_value_t = 5)]
    device_seconds: u64,
    /// Leave the store's log sparse and let fio write a new file: both then pay the file
    /// system's block allocation during the timed writes (the store's first lap on a log made
    /// with `--sparse`).
    #[arg(long)]
    sparse: bool,
    /// Leave the client and the servers where the scheduler puts them. By default, on a
    /// machine with two CPUs or more, the servers' threads (the store's, the sinks') run on
    /// CPU 1 and the client on CPU 0, as on two machines: on two CPUs the scheduler otherwise
    /// stacks them now and then, and the same run swings by 2× from one measurement to the next.
    #[arg(long)]
    no_pin: bool,
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
    /// The same write tests with the log in memory (no device), and the sink on the same
    /// transport; `ratio_transport_ceiling` is the 64 KiB ratio.
    store_64k_memory_mb_per_s: Option<f64>,
    store_4k_memory_mb_per_s: Option<f64>,
    sink_64k_mb_per_s: Option<f64>,
    sink_4k_mb_per_s: Option<f64>,
    ratio_transport_ceiling: Option<f64>,
    ratio_transport_ceiling_4k: Option<f64>,
    /// The store's 64 KiB MB/s over the sink's over all the bytes of all rounds.
    ratio_transport_ceiling_all_bytes: f64,
    /// The 10th and 90th percentiles of the 64 KiB slice ratios behind the median.
    slices_ratio_transport_ceiling: [f64; 2],
    /// CPU seconds per GB written: the server's (process less client thread) and the client's.
    store_server_cpu_s_per_gb_64k: Option<f64>,
    sink_server_cpu_s_per_gb_64k: Option<f64>,
    store_server_cpu_s_per_gb_4k: Option<f64>,
    sink_server_cpu_s_per_gb_4k: Option<f64>,
    client_cpu_s_per_gb_64k: Option<f64>,
    client_cpu_s_per_gb_4k: Option<f64>,
    /// The log floor: the sink that also checksums every frame and appends it to a file in
    /// the memory directory with one write and `fdatasync` per read — the least work a store
    /// that keeps what it acknowledges does. `ratio_log_floor` is the store's 64 KiB MB/s
    /// over it.
    log_sink_64k_mb_per_s: f64,
    log_sink_4k_mb_per_s: f64,
    log_sink_server_cpu_s_per_gb_64k: f64,
    log_sink_server_cpu_s_per_gb_4k: f64,
    ratio_log_floor: f64,
    ratio_log_floor_4k: f64,
    ratio_log_floor_all_bytes: f64,
    slices_ratio_log_floor: [f64; 2],
    /// Requests per batch in the memory runs (see [`ceiling::Batching`]).
    #[serde(flatten)]
    batching: ceiling::Batching,
    /// Whether the servers ran on CPU 1 and the client on CPU 0 (see `--no-pin`).
    pinned: bool,
    /// Device streaming: the model, its nominal media rate, its measured streaming rate, and
    /// the store's throughput under random client writes, as payload MB/s and as log MB/s
    /// (records: a 128-byte header, padded to 512 bytes, so a 4 KiB write is a 4,608-byte
    /// record and payload can reach at most 0.889 of the device's rate).
    /// `ratio_device_streaming` is log MB/s ÷ streaming, the lower of 64 KiB × 16 and
    /// 4 KiB × 128 outstanding (enough in flight for the device to be the limit); 4 KiB × 32
    /// is reported beside it.
    device: String,
    device_nominal_transfer_mb_per_s: Option<f64>,
    device_streaming_mb_per_s: f64,
    store_device_random_4k_mb_per_s: f64,
    store_device_random_4k_depth_128_mb_per_s: f64,
    store_device_random_64k_mb_per_s: f64,
    store_device_random_4k_log_mb_per_s: f64,
    store_device_random_4k_depth_128_log_mb_per_s: f64,
    store_device_random_64k_log_mb_per_s: f64,
    ratio_device_streaming_4k: f64,
    ratio_device_streaming_4k_depth_128: f64,
    ratio_device_streaming_64k: f64,
    ratio_device_streaming: f64,
    /// Payload ÷ streaming, and the most the record format allows at each size.
    ratio_device_streaming_payload_4k_depth_128: f64,
    ratio_device_streaming_payload_64k: f64,
    payload_ceiling_4k: f64,
    payload_ceiling_64k: f64,
    /// Each round's figures behind the medians of the two headline ratios.
    rounds_ratio_transport_ceiling: Vec<f64>,
    rounds_ratio_device_streaming: Vec<f64>,
    rounds_ratio_log_floor: Vec<f64>,
}

pub fn run(args: StoreBenchArgs) -> Result<()> {
    if Command::new("fio").arg("--version").output().is_err() {
        bail!("fio is not installed (apt-get install fio); the benchmark measures against it");
    }
    std::fs::create_dir_all(&args.dir)?;
    crate::cpus::allow_pinning(!args.no_pin);
    let bytes = cordillera_models::presets::parse_size(&args.bytes).map_err(anyhow::Error::msg)?;
    let dir = &args.dir;

    let memory_dir = match &args.memory_dir {
        Some(d) => d.clone(),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => bail!("no /dev/shm here: give --memory-dir (a memory file system, e.g. a tmpfs)"),
    };
    let device: EmulateSpec = args
        .device
        .parse()
        .map_err(|e| anyhow::anyhow!("--device: {e}"))?;
    let rounds = args.repeat.max(1);
    let small = (bytes / 8).max(16 << 20);
    let ceiling_bytes = cordillera_models::presets::parse_size(&args.ceiling_bytes)
        .map_err(|e| anyhow::anyhow!("--ceiling-bytes: {e}"))?;
    let ceiling_small = (ceiling_bytes / 4).max(1 << 20);
    let setup = Setup {
        dir: dir.clone(),
        bytes,
        small,
        memory_dir,
        device: device.clone(),
        ceiling_bytes,
        ceiling_small,
        rounds,
    };
    let mut samples: Vec<Round> = Vec::new();
    // Each round measures the store and then fio, alternately, so that slow phases of a shared
    // machine fall on both; the figures are the medians over the rounds.
    for round in 1..=rounds {
        samples.push(measure_round(&args, &setup, round)?);
    }
    let median = |field: &dyn Fn(&Round) -> f64| crate::median(samples.iter().map(field).collect());
    // The transport measurements: the median over every slice of every round of the store's
    // MB/s over a baseline's in the same slice; their 10th and 90th percentiles; and MB/s
    // over all the bytes of all rounds.
    let slices = |ratios: &dyn Fn(&Ceiling) -> Vec<f64>| {
        crate::median(samples.iter().flat_map(|r| ratios(&r.ceiling)).collect())
    };
    let spread = |ratios: &dyn Fn(&Ceiling) -> Vec<f64>| {
        let mut all: Vec<f64> = samples.iter().flat_map(|r| ratios(&r.ceiling)).collect();
        all.sort_by(f64::total_cmp);
        let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
        [at(0.1), at(0.9)]
    };
    let all_bytes = |series: &dyn Fn(&Ceiling) -> &ceiling::Series| {
        let (bytes, seconds) = samples.iter().fold((0u64, 0.0), |(b, t), r| {
            let s = series(&r.ceiling);
            (b + s.bytes, t + s.seconds)
        });
        bytes as f64 / 1e6 / seconds
    };
    let (store_64k, fio_64k) = (median(&|r| r.store_64k), median(&|r| r.fio_64k));
    let (store_4k, fio_4k) = (median(&|r| r.store_4k), median(&|r| r.fio_4k));
    let (scan, fio_read) = (median(&|r| r.scan), median(&|r| r.read));
    let (store_p99, fio_p99) = (median(&|r| r.store_p99), median(&|r| r.fio_p99));

    // Payload bytes per log byte of a record of each size.
    let payload =
        |size: u64| size as f64 / cordillera_vstore::format::record_total_bytes(size) as f64;
    let (payload_4k, payload_64k) = (payload(4096), payload(65536));
    let device_ratio =
        |r: &Round| (r.device_4k_deep / payload_4k).min(r.device_64k / payload_64k) / r.streaming;
    let f = Figures {
        store_64k_mb_per_s: store_64k,
        fio_64k_mb_per_s: fio_64k,
        store_64k_records_per_flush: median(&|r| r.flush_64k),
        store_4k_mb_per_s: store_4k,
        fio_4k_mb_per_s: fio_4k,
        store_4k_records_per_flush: median(&|r| r.flush_4k),
        store_p50_ack_latency_us: median(&|r| r.store_p50),
        fio_p50_write_plus_fdatasync_us: median(&|r| r.fio_p50),
        store_p99_ack_latency_us: store_p99,
        fio_p99_write_plus_fdatasync_us: fio_p99,
        store_recovery_scan_mb_per_s: scan,
        fio_sequential_read_mb_per_s: fio_read,
        ratio_64k_throughput: store_64k / fio_64k,
        ratio_4k_throughput: store_4k / fio_4k,
        ratio_p99_ack_latency: store_p99 / fio_p99,
        ratio_recovery_scan: scan / fio_read,
        store_64k_memory_mb_per_s: Some(median(&|r| r.ceiling.store_64k.mb_per_s())),
        store_4k_memory_mb_per_s: Some(median(&|r| r.ceiling.store_4k.mb_per_s())),
        sink_64k_mb_per_s: Some(median(&|r| r.ceiling.sink_64k.mb_per_s())),
        sink_4k_mb_per_s: Some(median(&|r| r.ceiling.sink_4k.mb_per_s())),
        ratio_transport_ceiling: Some(slices(&|c| c.store_64k.over(&c.sink_64k))),
        ratio_transport_ceiling_4k: Some(slices(&|c| c.store_4k.over(&c.sink_4k))),
        ratio_transport_ceiling_all_bytes: all_bytes(&|c| &c.store_64k)
            / all_bytes(&|c| &c.sink_64k),
        slices_ratio_transport_ceiling: spread(&|c| c.store_64k.over(&c.sink_64k)),
        store_server_cpu_s_per_gb_64k: Some(median(&|r| r.ceiling.store_64k.server_cpu_s_per_gb())),
        sink_server_cpu_s_per_gb_64k: Some(median(&|r| r.ceiling.sink_64k.server_cpu_s_per_gb())),
        store_server_cpu_s_per_gb_4k: Some(median(&|r| r.ceiling.store_4k.server_cpu_s_per_gb())),
        sink_server_cpu_s_per_gb_4k: Some(median(&|r| r.ceiling.sink_4k.server_cpu_s_per_gb())),
        client_cpu_s_per_gb_64k: Some(median(&|r| r.ceiling.store_64k.client_cpu_s_per_gb())),
        client_cpu_s_per_gb_4k: Some(median(&|r| r.ceiling.store_4k.client_cpu_s_per_gb())),
        log_sink_64k_mb_per_s: median(&|r| r.ceiling.floor_64k.mb_per_s()),
        log_sink_4k_mb_per_s: median(&|r| r.ceiling.floor_4k.mb_per_s()),
        log_sink_server_cpu_s_per_gb_64k: median(&|r| r.ceiling.floor_64k.server_cpu_s_per_gb()),
        log_sink_server_cpu_s_per_gb_4k: median(&|r| r.ceiling.floor_4k.server_cpu_s_per_gb()),
        ratio_log_floor: slices(&|c| c.store_64k.over(&c.floor_64k)),
        ratio_log_floor_4k: slices(&|c| c.store_4k.over(&c.floor_4k)),
        ratio_log_floor_all_bytes: all_bytes(&|c| &c.store_64k) / all_bytes(&|c| &c.floor_64k),
        slices_ratio_log_floor: spread(&|c| c.store_64k.over(&c.floor_64k)),
        batching: ceiling::Batching::over(samples.iter().map(|r| &r.ceiling)),
        rounds_ratio_log_floor: samples
            .iter()
            .map(|r| crate::median(r.ceiling.store_64k.over(&r.ceiling.floor_64k)))
            .collect(),
        pinned: crate::cpus::pinned(),
        device: args.device.clone(),
        device_nominal_transfer_mb_per_s: cordillera_models::presets::hdd_params(&device.preset)
            .filter(|_| device.array.is_none())
            .map(|p| p.transfer_mb_per_s),
        device_streaming_mb_per_s: median(&|r| r.streaming),
        store_device_random_4k_mb_per_s: median(&|r| r.device_4k),
        store_device_random_4k_depth_128_mb_per_s: median(&|r| r.device_4k_deep),
        store_device_random_64k_mb_per_s: median(&|r| r.device_64k),
        store_device_random_4k_log_mb_per_s: median(&|r| r.device_4k) / payload_4k,
        store_device_random_4k_depth_128_log_mb_per_s: median(&|r| r.device_4k_deep) / payload_4k,
        store_device_random_64k_log_mb_per_s: median(&|r| r.device_64k) / payload_64k,
        ratio_device_streaming_4k: median(&|r| r.device_4k / payload_4k / r.streaming),
        ratio_device_streaming_4k_depth_128: median(&|r| {
            r.device_4k_deep / payload_4k / r.streaming
        }),
        ratio_device_streaming_64k: median(&|r| r.device_64k / payload_64k / r.streaming),
        ratio_device_streaming: median(&device_ratio),
        ratio_device_streaming_payload_4k_depth_128: median(&|r| r.device_4k_deep / r.streaming),
        ratio_device_streaming_payload_64k: median(&|r| r.device_64k / r.streaming),
        payload_ceiling_4k: payload_4k,
        payload_ceiling_64k: payload_64k,
        rounds_ratio_transport_ceiling: samples
            .iter()
            .map(|r| crate::median(r.ceiling.store_64k.over(&r.ceiling.sink_64k)))
            .collect(),
        rounds_ratio_device_streaming: samples.iter().map(device_ratio).collect(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    print_figures(&f);
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
    ceiling: Ceiling,
    streaming: f64,
    device_4k: f64,
    device_4k_deep: f64,
    device_64k: f64,
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

/// CPU seconds of `rusage` (user + system).
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut usage) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

/// Runs `work` on this thread (the client); returns its result, the CPU seconds the rest of
/// the process spent meanwhile (the server's threads), and this thread's CPU seconds.
fn cpu_of<T>(work: impl FnOnce() -> Result<T>) -> Result<(T, f64, f64)> {
    let (process, thread) = (
        cpu_seconds(libc::RUSAGE_SELF),
        cpu_seconds(libc::RUSAGE_THREAD),
    );
    let out = work()?;
    let thread = cpu_seconds(libc::RUSAGE_THREAD) - thread;
    let process = cpu_seconds(libc::RUSAGE_SELF) - process;
    Ok((out, (process - thread).max(0.0), thread))
}

/// What every round measures with: the places and sizes the flags give.
struct Setup {
    dir: PathBuf,
    /// The 64 KiB writes' bytes, and the 4 KiB writes' (an eighth, at least 16 MiB).
    bytes: u64,
    small: u64,
    /// A memory file system for the transport ceiling's log.
    memory_dir: PathBuf,
    device: EmulateSpec,
    ceiling_bytes: u64,
    ceiling_small: u64,
    rounds: usize,
}

/// One round: the store and fio alternately at 64 KiB and 4 KiB, the recovery scan against a
/// sequential read, acknowledgement latency, the transport ceiling and the device streaming.
fn measure_round(args: &StoreBenchArgs, setup: &Setup, round: usize) -> Result<Round> {
    let Setup {
        dir,
        bytes,
        small,
        memory_dir,
        device,
        ceiling_bytes,
        ceiling_small,
        rounds,
    } = setup;
    let (bytes, small, ceiling_bytes, ceiling_small, rounds) =
        (*bytes, *small, *ceiling_bytes, *ceiling_small, *rounds);
    let progress = |what: &str| eprintln!("store bench: {what}");
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
    let (store_4k, flush_4k, file_4k) = store_writes(dir, 4096, 32, small, args.io, args.sparse)?;
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
    let (store_p50, store_p99) = store_latency(dir, args.latency_requests, args.io, args.sparse)?;
    let (fio_p50, fio_p99) = fio_latency(dir, args.latency_requests, args.sparse)?;
    progress(&format!(
        "round {round}/{rounds}: transport ceiling: the store with its log in {} against a sink",
        memory_dir.display()
    ));
    let ceiling = ceiling::measure(memory_dir, ceiling_bytes, ceiling_small, round)?;
    progress(&format!(
        "round {round}/{rounds}: device streaming on an emulated {}",
        args.device
    ));
    let streaming = device_streaming(device, args.device_seconds)?;
    let device_total =
        |size: u64| ((streaming * 1e6 * args.device_seconds as f64) as u64 / size).max(64) * size;
    let device_4k = store_device_writes(dir, device, 4096, 32, device_total(4096))?;
    let device_4k_deep = store_device_writes(dir, device, 4096, 128, device_total(4096))?;
    let device_64k = store_device_writes(dir, device, 65536, 16, device_total(65536))?;
    Ok(Round {
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
        ceiling,
        streaming,
        device_4k,
        device_4k_deep,
        device_64k,
    })
}

/// The figures as a table beside their targets.
fn print_figures(f: &Figures) {
    let rounds_of = |r: &[f64]| {
        r.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "{:<44} {:>12} {:>12} {:>8}  target",
        if f.pinned {
            "what the store controls (client CPU 0, servers CPU 1)"
        } else {
            "what the store controls (threads not pinned)"
        },
        "store",
        "baseline",
        "ratio"
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≥ 0.8  (sink; slices p10–p90 {:.2}–{:.2}; rounds {}; all bytes {:.2})",
        "64 KiB writes, 16 outstanding, log in memory",
        f.store_64k_memory_mb_per_s.unwrap_or(f64::NAN),
        f.sink_64k_mb_per_s.unwrap_or(f64::NAN),
        f.ratio_transport_ceiling.unwrap_or(f64::NAN),
        f.slices_ratio_transport_ceiling[0],
        f.slices_ratio_transport_ceiling[1],
        rounds_of(&f.rounds_ratio_transport_ceiling),
        f.ratio_transport_ceiling_all_bytes
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}  ≥ 0.8  (sink)",
        "4 KiB writes, 32 outstanding, log in memory",
        f.store_4k_memory_mb_per_s.unwrap_or(f64::NAN),
        f.sink_4k_mb_per_s.unwrap_or(f64::NAN),
        f.ratio_transport_ceiling_4k.unwrap_or(f64::NAN)
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}         (log floor; slices p10–p90 {:.2}–{:.2}; rounds {}; all bytes {:.2})",
        "64 KiB writes, 16 outstanding, log in memory",
        f.store_64k_memory_mb_per_s.unwrap_or(f64::NAN),
        f.log_sink_64k_mb_per_s,
        f.ratio_log_floor,
        f.slices_ratio_log_floor[0],
        f.slices_ratio_log_floor[1],
        rounds_of(&f.rounds_ratio_log_floor),
        f.ratio_log_floor_all_bytes
    );
    println!(
        "{:<44} {:>12.1} {:>12.1} {:>8.3}         (log floor)",
        "4 KiB writes, 32 outstanding, log in memory",
        f.store_4k_memory_mb_per_s.unwrap_or(f64::NAN),
        f.log_sink_4k_mb_per_s,
        f.ratio_log_floor_4k
    );
    f.batching.print();
    println!(
        "  server CPU per GB written: store {:.2} s (64 KiB), {:.2} s (4 KiB); sink {:.2} s, {:.2} s; log floor {:.2} s, {:.2} s; client {:.2} s, {:.2} s",
        f.store_server_cpu_s_per_gb_64k.unwrap_or(f64::NAN),
        f.store_server_cpu_s_per_gb_4k.unwrap_or(f64::NAN),
        f.sink_server_cpu_s_per_gb_64k.unwrap_or(f64::NAN),
        f.sink_server_cpu_s_per_gb_4k.unwrap_or(f64::NAN),
        f.log_sink_server_cpu_s_per_gb_64k,
        f.log_sink_server_cpu_s_per_gb_4k,
        f.client_cpu_s_per_gb_64k.unwrap_or(f64::NAN),
        f.client_cpu_s_per_gb_4k.unwrap_or(f64::NAN)
    );
    println!(
        "  {} (nominal media rate {}): streaming {:.1} MB/s (1 MiB sequential, 8 outstanding); the store under random client writes:",
        f.device,
        f.device_nominal_transfer_mb_per_s
            .map_or("-".to_string(), |r| format!("{r:.1} MB/s")),
        f.device_streaming_mb_per_s
    );
    for (what, payload_mb, log_mb, ratio, target) in [
        (
            "64 KiB writes, 16 outstanding",
            f.store_device_random_64k_mb_per_s,
            f.store_device_random_64k_log_mb_per_s,
            f.ratio_device_streaming_64k,
            "≥ 0.9",
        ),
        (
            "4 KiB writes, 128 outstanding",
            f.store_device_random_4k_depth_128_mb_per_s,
            f.store_device_random_4k_depth_128_log_mb_per_s,
            f.ratio_device_streaming_4k_depth_128,
            "≥ 0.9",
        ),
        (
            "4 KiB writes, 32 outstanding",
            f.store_device_random_4k_mb_per_s,
            f.store_device_random_4k_log_mb_per_s,
            f.ratio_device_streaming_4k,
            "",
        ),
    ] {
        println!(
            "{:<44} {:>12.1} {:>12.1} {:>8.3}  {target:<5}  (log MB/s ÷ streaming; payload {payload_mb:.1} MB/s)",
            format!("  {what}, log MB/s"),
            log_mb,
            f.device_streaming_mb_per_s,
            ratio
        );
    }
    println!(
        "  device streaming ratio (the lower of the first two): {:.3} (rounds {}); payload ÷ streaming {:.3} at 64 KiB, {:.3} at 4 KiB (the record format allows at most {:.3} and {:.3})",
        f.ratio_device_streaming,
        rounds_of(&f.rounds_ratio_device_streaming),
        f.ratio_device_streaming_payload_64k,
        f.ratio_device_streaming_payload_4k_depth_128,
        f.payload_ceiling_64k,
        f.payload_ceiling_4k
    );
    println!();
    println!(
        "{:<44} {:>12} {:>12} {:>8}  target",
        "informative: against this machine's disk", "store", "fio", "ratio"
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
}
