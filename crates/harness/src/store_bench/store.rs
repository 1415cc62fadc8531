//! The store's side of the measurements against the machine's disk: servers on fresh files,
//! writes driven from one client thread, acknowledgement latency, the recovery scan.

use super::*;

/// A store server on a fresh file in `dir`, on its own runtime thread.
pub(super) fn start_store(
    dir: &Path,
    name: &str,
    log_bytes: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(std::net::SocketAddr, Arc<Mutex<Stats>>, PathBuf)> {
    start_store_with(dir, name, log_bytes, io, sparse, None)
}

/// [`start_store`], its log on an emulated device when `emulate` says which.
pub(super) fn start_store_with(
    dir: &Path,
    name: &str,
    log_bytes: u64,
    io: IoMode,
    sparse: bool,
    emulate: Option<EmulateSpec>,
) -> Result<(std::net::SocketAddr, Arc<Mutex<Stats>>, PathBuf)> {
    let path = dir.join(name);
    std::fs::remove_file(&path).ok();
    let stats = Arc::new(Mutex::new(Stats::default()));
    let options = ServeOptions {
        io,
        sparse,
        stats: Some(stats.clone()),
        emulate,
        ..ServeOptions::local(path.clone(), log_bytes)
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-store".into())
        .spawn(move || {
            pin(SERVER_CPU);
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
        })?;
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .context("the store server did not start")?;
    Ok((addr, stats, path))
}

/// Writes `total` bytes in `size`-byte writes with `depth` outstanding; MB/s and records/flush.
pub(super) fn store_writes(
    dir: &Path,
    size: u64,
    depth: usize,
    total: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(f64, f64, PathBuf)> {
    let log = (total + total / 4 + (64 << 20)) / 512 * 512;
    let (addr, stats, path) = start_store(dir, &format!("bench-{size}.store"), log, io, sparse)?;
    let mb_per_s = drive_writes(addr, size, depth, total, false)?;
    let s = *stats.lock().unwrap();
    let per_flush = s.records_written as f64 / s.flushes.max(1) as f64;
    Ok((mb_per_s, per_flush, path))
}

/// Writes `total` bytes to the server at `addr` in `size`-byte writes with `depth`
/// outstanding, at consecutive offsets or (`random`) at random blocks of a 16 GiB volume; MB/s.
pub(super) fn drive_writes(
    addr: std::net::SocketAddr,
    size: u64,
    depth: usize,
    total: u64,
    random: bool,
) -> Result<f64> {
    let old = pin(CLIENT_CPU);
    let driven = drive_writes_timed(addr, size, depth, total, random);
    unpin(old);
    driven
}

pub(super) fn drive_writes_timed(
    addr: std::net::SocketAddr,
    size: u64,
    depth: usize,
    total: u64,
    random: bool,
) -> Result<f64> {
    let mut client = StoreClient::connect(addr)?;
    let count = total / size;
    let blocks = (16u64 << 30) / size;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let seconds = pipelined_writes(&mut client, size, depth, count, |sent| {
        let block = if random {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % blocks
        } else {
            sent
        };
        (1, block * size, sent + 1)
    })?;
    Ok((count * size) as f64 / 1e6 / seconds)
}

/// Sends `count` writes of `size` bytes on `client` with `depth` outstanding, each at the
/// (volume, offset, version) `place(n)` gives for the n-th; waits for every reply; seconds.
pub(super) fn pipelined_writes(
    client: &mut StoreClient,
    size: u64,
    depth: usize,
    count: u64,
    mut place: impl FnMut(u64) -> (u64, u64, u64),
) -> Result<f64> {
    let data = vec![0x5a; size as usize];
    let started = Instant::now();
    let (mut sent, mut done) = (0u64, 0u64);
    while done < count {
        while sent < count && sent - done < depth as u64 {
            let (volume, offset_bytes, version) = place(sent);
            client.send(Request::Write {
                client: 1,
                volume,
                offset_bytes,
                version,
                data: data.clone(),
            })?;
            sent += 1;
        }
        match client.receive()? {
            (_, Reply::Done) => done += 1,
            (_, other) => bail!("store bench: unexpected reply {other:?}"),
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Median and 99th percentile acknowledgement latency (µs) at one outstanding write.
pub(super) fn store_latency(
    dir: &Path,
    requests: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(f64, f64)> {
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
pub(super) fn recovery_scan(path: &Path, io: IoMode) -> Result<(f64, u64)> {
    let file = std::fs::File::open(path)?;
    drop_cached_pages(&file).context("dropping cached pages")?;
    drop(file);
    let started = Instant::now();
    let (_, store) = open_store(path, 0, 1, io, false)?;
    let seconds = started.elapsed().as_secs_f64();
    let scanned = store.stats().bytes_scanned;
    Ok((scanned as f64 / 1e6 / seconds, scanned))
}
