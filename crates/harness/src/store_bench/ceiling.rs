//! The transport ceiling: the store with its log in memory against two baselines on the same
//! loopback transport — a sink that only answers, and a log floor that also checksums and keeps
//! what it answers — driven by one client with the store's frames.
//!
//! The three servers run for the whole round and the client alternates between them in
//! [`SLICES`] slices of each write size, in an order that rotates from slice to slice: the
//! slow and fast phases of a shared machine (seconds long, ±20 % and more) then fall on all
//! three alike, and each slice of the store has a slice of each baseline beside it in time.
//! A ratio is the median, over the slices, of the store's MB/s over the baseline's in the same
//! slice; throughput and CPU figures are over all the bytes of the round.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use cordillera_runtime::disk::IoMode;
use cordillera_runtime::store_server::StoreClient;
use cordillera_vstore::store::{Reply, Stats};

use super::{cpu_of, gb, pin, start_store, unpin, CLIENT_CPU, SERVER_CPU};

/// Slices of each write size per round, per server.
pub(super) const SLICES: usize = 8;
/// The log floor's file, which it writes round and round.
const FLOOR_FILE_BYTES: u64 = 256 << 20;

/// One server's figures for one write size over a round.
#[derive(Clone, Default)]
pub(super) struct Series {
    pub bytes: u64,
    pub seconds: f64,
    /// CPU seconds of the server's threads (the process's less the client thread's).
    pub server_cpu_s: f64,
    pub client_cpu_s: f64,
    /// MB/s of each slice, in order.
    pub slices: Vec<f64>,
    /// Writes the server made durable, and the durable writes it made of them (the store's
    /// records and group-commit flushes; the log floor's frames and its `fdatasync`s; the
    /// sink's frames and its reads with a frame): how many requests one batch carried.
    pub requests: u64,
    pub batches: u64,
}

impl Series {
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds
    }

    pub fn server_cpu_s_per_gb(&self) -> f64 {
        self.server_cpu_s / gb(self.bytes)
    }

    pub fn client_cpu_s_per_gb(&self) -> f64 {
        self.client_cpu_s / gb(self.bytes)
    }

    /// This series' MB/s over `base`'s, slice by slice.
    pub fn over(&self, base: &Series) -> Vec<f64> {
        self.slices
            .iter()
            .zip(&base.slices)
            .map(|(a, b)| a / b)
            .collect()
    }
}

/// One round: each server at 64 KiB (16 outstanding) and 4 KiB (32 outstanding).
#[derive(Clone, Default)]
pub(super) struct Ceiling {
    pub store_64k: Series,
    pub store_4k: Series,
    pub sink_64k: Series,
    pub sink_4k: Series,
    pub floor_64k: Series,
    pub floor_4k: Series,
}

/// Requests per batch in the memory runs, over all rounds: the store's records per
/// group-commit flush, the log floor's frames per write and `fdatasync`, the sink's frames per
/// read (see [`Series::requests`]). Fewer requests per batch is more system calls per request.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub(super) struct Batching {
    store_memory_records_per_flush_64k: f64,
    store_memory_records_per_flush_4k: f64,
    log_floor_frames_per_write_64k: f64,
    log_floor_frames_per_write_4k: f64,
    sink_frames_per_read_64k: f64,
    sink_frames_per_read_4k: f64,
}

impl Batching {
    /// Over every round's memory runs.
    pub fn over<'a>(rounds: impl Iterator<Item = &'a Ceiling> + Clone) -> Batching {
        let per_batch = |series: fn(&Ceiling) -> &Series| {
            let (requests, batches) = rounds.clone().fold((0u64, 0u64), |(q, b), c| {
                (q + series(c).requests, b + series(c).batches)
            });
            requests as f64 / batches as f64
        };
        Batching {
            store_memory_records_per_flush_64k: per_batch(|c| &c.store_64k),
            store_memory_records_per_flush_4k: per_batch(|c| &c.store_4k),
            log_floor_frames_per_write_64k: per_batch(|c| &c.floor_64k),
            log_floor_frames_per_write_4k: per_batch(|c| &c.floor_4k),
            sink_frames_per_read_64k: per_batch(|c| &c.sink_64k),
            sink_frames_per_read_4k: per_batch(|c| &c.sink_4k),
        }
    }

    pub fn print(&self) {
        println!(
            "  requests per batch (64 KiB, 4 KiB): store {:.1}, {:.1} records per flush; log floor {:.1}, {:.1} frames per write; sink {:.1}, {:.1} frames per read",
            self.store_memory_records_per_flush_64k,
            self.store_memory_records_per_flush_4k,
            self.log_floor_frames_per_write_64k,
            self.log_floor_frames_per_write_4k,
            self.sink_frames_per_read_64k,
            self.sink_frames_per_read_4k
        );
    }
}

/// A server under test and the client's connection to it.
struct Target {
    client: StoreClient,
    /// Writes sent so far: each has a new version, at the next block of its size's volume.
    writes: u64,
    /// The server's requests and batches so far (see [`Series::requests`]).
    batched: Box<dyn Fn() -> (u64, u64)>,
}

/// What a sink or a log floor counts as it goes: frames, and the batches they came in.
#[derive(Default)]
struct Batched {
    frames: AtomicU64,
    batches: AtomicU64,
}

impl Batched {
    fn reader(counts: &Arc<Batched>) -> Box<dyn Fn() -> (u64, u64)> {
        let counts = counts.clone();
        Box::new(move || {
            (
                counts.frames.load(Ordering::Relaxed),
                counts.batches.load(Ordering::Relaxed),
            )
        })
    }
}

/// The store's records written and group-commit flushes, from its statistics.
fn store_batched(stats: Arc<Mutex<Stats>>) -> Box<dyn Fn() -> (u64, u64)> {
    Box::new(move || {
        let s = *stats.lock().expect("stats");
        (s.records_written, s.flushes)
    })
}

/// Measures one round (`round` turns the order of the servers): `bytes_64k` of 64 KiB writes
/// and `bytes_4k` of 4 KiB writes to each server, the store's log and the floor's file in
/// `memory_dir`.
pub(super) fn measure(
    memory_dir: &Path,
    bytes_64k: u64,
    bytes_4k: u64,
    round: usize,
) -> Result<Ceiling> {
    // Both logs are laid out before the timed part, so that no write meets a fresh page. The
    // store's holds everything the round writes (it never cleans while timed); the floor's
    // file wraps, as the floor keeps nothing.
    let log = ((bytes_64k + bytes_4k) + (bytes_64k + bytes_4k) / 4 + (64 << 20)) / 512 * 512;
    let floor_path = memory_dir.join("bench-log-floor");
    let sink = sink_server(None)?;
    let floor = sink_server(Some((floor_path.clone(), log.min(FLOOR_FILE_BYTES))))?;
    let (store, stats, store_path) = start_store(
        memory_dir,
        "bench-memory.store",
        log,
        IoMode::Buffered,
        false,
    )?;
    let servers = [
        (store, store_batched(stats)),
        (sink.0, Batched::reader(&sink.1)),
        (floor.0, Batched::reader(&floor.1)),
    ];
    let result = measure_on(servers, bytes_64k, bytes_4k, round);
    std::fs::remove_file(floor_path).ok();
    std::fs::remove_file(store_path).ok();
    result
}

type Server = (std::net::SocketAddr, Box<dyn Fn() -> (u64, u64)>);

fn measure_on(
    servers: [Server; 3],
    bytes_64k: u64,
    bytes_4k: u64,
    round: usize,
) -> Result<Ceiling> {
    let mut targets = servers
        .into_iter()
        .map(|(addr, batched)| {
            Ok(Target {
                client: StoreClient::connect(addr)?,
                writes: 0,
                batched,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut ceiling = Ceiling::default();
    for (size, depth, volume, bytes) in [
        (65536u64, 16usize, 1u64, bytes_64k),
        (4096, 32, 2, bytes_4k),
    ] {
        let per_slice = (bytes / SLICES as u64 / size).max(1) * size;
        let mut series = [Series::default(), Series::default(), Series::default()];
        for slice in 0..SLICES {
            for turn in 0..3 {
                let which = (turn + slice + round) % 3;
                let driven = drive(&mut targets[which], volume, size, depth, per_slice)?;
                let s = &mut series[which];
                s.bytes += per_slice;
                s.seconds += driven.seconds;
                s.server_cpu_s += driven.server_cpu_s;
                s.client_cpu_s += driven.client_cpu_s;
                s.slices.push(per_slice as f64 / 1e6 / driven.seconds);
                s.requests += driven.requests;
                s.batches += driven.batches;
            }
        }
        let [store, sink, floor] = series;
        if size == 65536 {
            (ceiling.store_64k, ceiling.sink_64k, ceiling.floor_64k) = (store, sink, floor);
        } else {
            (ceiling.store_4k, ceiling.sink_4k, ceiling.floor_4k) = (store, sink, floor);
        }
    }
    Ok(ceiling)
}

/// One slice.
struct Driven {
    seconds: f64,
    server_cpu_s: f64,
    client_cpu_s: f64,
    /// The server's requests and batches during the slice.
    requests: u64,
    batches: u64,
}

/// Writes `bytes` in `size`-byte writes with `depth` outstanding to consecutive blocks of
/// `volume`, from this thread on the client's CPU.
fn drive(target: &mut Target, volume: u64, size: u64, depth: usize, bytes: u64) -> Result<Driven> {
    let old = pin(CLIENT_CPU);
    let before = (target.batched)();
    let driven = cpu_of(|| {
        super::pipelined_writes(&mut target.client, size, depth, bytes / size, |_| {
            target.writes += 1;
            (volume, target.writes * size, target.writes)
        })
    });
    unpin(old);
    let (seconds, server_cpu_s, client_cpu_s) = driven?;
    // Every write is acknowledged when the slice ends, so the server has counted it.
    let after = (target.batched)();
    Ok(Driven {
        seconds,
        server_cpu_s,
        client_cpu_s,
        requests: after.0 - before.0,
        batches: after.1 - before.1,
    })
}

/// A minimal server with the store's framing: reads length-prefixed frames and answers each
/// with a reply of the store's size (`Done` with load figures), written together once per
/// read; nothing is decoded, checked or kept. The transport's ceiling for the store.
///
/// With `log` (a file and its size), it also does the least a store that keeps what it
/// acknowledges must do: a CRC-32C of each frame, every complete frame a read brought
/// appended to the file with one write (wrapping at the end) and made durable with
/// `fdatasync` before the replies go out. No index, no records, no recovery: a floor, not a
/// store.
fn sink_server(log: Option<(PathBuf, u64)>) -> Result<(std::net::SocketAddr, Arc<Batched>)> {
    use std::io::{Read, Write};
    use std::os::unix::fs::FileExt;
    let log = match log {
        Some((path, size)) => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            // Laid out before the timed part, as the store's log is.
            let zeros = vec![0u8; 1 << 20];
            let mut at = 0;
            while at < size {
                let n = (size - at).min(zeros.len() as u64) as usize;
                file.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            Some((Arc::new(file), size))
        }
        None => None,
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let counts = Arc::new(Batched::default());
    let counted = counts.clone();
    let mut reply = Vec::new();
    cordillera_wire::store::encode(
        &cordillera_wire::store::Frame::Reply {
            id: 0,
            load: Default::default(),
            reply: Reply::Done,
        },
        &mut reply,
    );
    // Named, as the store's thread is, so that a profile of the server CPU tells them apart.
    let name = if log.is_some() {
        "bench-floor"
    } else {
        "bench-sink"
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            pin(SERVER_CPU);
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let reply = reply.clone();
                let log = log.clone();
                let counts = counted.clone();
                let connection = std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        let _ = stream.set_nodelay(true);
                        let mut buffer = vec![0u8; 4 << 20];
                        let (mut filled, mut out) = (0usize, Vec::new());
                        let mut head = 0u64;
                        let mut checksums = 0u32;
                        loop {
                            if filled == buffer.len() {
                                buffer.resize(buffer.len() * 2, 0);
                            }
                            let n = match stream.read(&mut buffer[filled..]) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            filled += n;
                            let mut at = 0;
                            let mut frames = 0;
                            while filled - at >= 14 {
                                let length =
                                    u32::from_le_bytes(buffer[at..at + 4].try_into().unwrap())
                                        as usize;
                                if filled - at < 4 + length {
                                    break;
                                }
                                let id = &buffer[at + 6..at + 14];
                                let start = out.len();
                                out.extend_from_slice(&reply);
                                out[start + 6..start + 14].copy_from_slice(id);
                                if log.is_some() {
                                    checksums ^= crc32c::crc32c(&buffer[at + 4..at + 4 + length]);
                                }
                                at += 4 + length;
                                frames += 1;
                            }
                            if frames > 0 {
                                counts.frames.fetch_add(frames, Ordering::Relaxed);
                                counts.batches.fetch_add(1, Ordering::Relaxed);
                            }
                            if let Some((file, size)) = &log {
                                if at > 0 {
                                    let bytes = at as u64;
                                    if head + bytes > *size {
                                        head = 0;
                                    }
                                    if file.write_all_at(&buffer[..at], head).is_err()
                                        || file.sync_data().is_err()
                                    {
                                        return;
                                    }
                                    head += bytes;
                                }
                            }
                            std::hint::black_box(checksums);
                            buffer.copy_within(at..filled, 0);
                            filled -= at;
                            if !out.is_empty() {
                                if stream.write_all(&out).is_err() {
                                    return;
                                }
                                out.clear();
                            }
                        }
                    });
                if let Err(e) = connection {
                    eprintln!("store bench: {name}: cannot start a connection's thread: {e}");
                }
            }
        })?;
    Ok((addr, counts))
}
