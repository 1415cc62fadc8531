//! Device streaming: the emulated disk's streaming rate, and the store's log on it under random
//! client writes.

use super::*;

/// The emulated device's streaming write rate (MB/s): sequential 1 MiB writes, 8 outstanding,
/// for `seconds`, straight to the model.
pub(super) fn device_streaming(spec: &EmulateSpec, seconds: u64) -> Result<f64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let emulator = Arc::new(Emulator::start(spec).map_err(anyhow::Error::msg)?);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let limit = Duration::from_secs(seconds.max(1));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (emulator, next) = (emulator.clone(), next.clone());
            std::thread::spawn(move || {
                let mut done = 0u64;
                while started.elapsed() < limit {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    emulator
                        .begin(cordillera_types::Op::Write, at << 20, 1 << 20)
                        .wait();
                    done += 1 << 20;
                }
                done
            })
        })
        .collect();
    let bytes: u64 = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
    Ok(bytes as f64 / 1e6 / started.elapsed().as_secs_f64())
}

/// The store with its log on the emulated device: random `size`-byte writes of a 16 GiB
/// volume, `depth` outstanding, `total` bytes; MB/s.
pub(super) fn store_device_writes(
    dir: &Path,
    spec: &EmulateSpec,
    size: u64,
    depth: usize,
    total: u64,
) -> Result<f64> {
    let log = (total + total / 4 + (64 << 20)) / 512 * 512;
    let (addr, _, path) = start_store_with(
        dir,
        &format!("bench-device-{size}.store"),
        log,
        IoMode::Buffered,
        true,
        Some(spec.clone()),
    )?;
    let mb_per_s = drive_writes(addr, size, depth, total, true)?;
    std::fs::remove_file(path).ok();
    Ok(mb_per_s)
}
