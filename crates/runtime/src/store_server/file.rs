//! The store's file: opened, or created and laid out (zero-filled) and formatted under a
//! temporary name.

use super::*;

/// Opens the store at `path`, creating and formatting it with a log of `log_bytes` if the file
/// does not exist (see [`create_store`]; `sparse` as there). Returns the file and the ready
/// store core.
pub fn open_store(
    path: &std::path::Path,
    log_bytes: u64,
    seed: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(Arc<DiskFile>, Store)> {
    if !path.exists() {
        return create_store(path, log_bytes, seed, io, sparse);
    }
    let disk_file = Arc::new(
        DiskFile::open(path, false, io)
            .with_context(|| format!("cannot open {}", path.display()))?,
    );
    let size = disk_file.file.metadata()?.len();
    if size <= LOG_OFFSET {
        bail!(
            "{}: {size} bytes is too small to hold a store",
            path.display()
        );
    }
    let mut store = Store::recover(
        Config::new(((size - LOG_OFFSET) / 512 * 512).max(2048)),
        seed,
        0,
    );
    // Concurrently: the scan verifies one chunk while the next ones are read.
    let started = Instant::now();
    disk_file.advise_sequential(true);
    run_to_quiet_concurrently(&mut store, disk_file.clone(), || {
        started.elapsed().as_nanos() as u64
    })
    .map_err(io_error)?;
    disk_file.advise_sequential(false);
    if store.failed() {
        bail!(
            "{}: no valid store superblock (not a store, or damaged); refusing to reformat",
            path.display()
        );
    }
    run_to_quiet(&mut store, &disk_file, 0).map_err(io_error)?;
    assert!(store.is_ready(), "recovered");
    Ok((disk_file, store))
}

/// Creates a store file at `path` (which must not exist) with a log of `log_bytes`, formatted
/// and durable. Unless `sparse`, the log is first filled with zeros, as databases fill their
/// write-ahead logs: every block is then allocated, so that a full file system can never refuse
/// a write to the log, and writes in the first lap are overwrites that `fdatasync` makes
/// durable without a file-system journal commit. The file is built under a temporary name and
/// renamed into place once formatted, so a crash while creating it leaves no half-made store.
pub fn create_store(
    path: &std::path::Path,
    log_bytes: u64,
    seed: u64,
    io: IoMode,
    sparse: bool,
) -> Result<(Arc<DiskFile>, Store)> {
    if log_bytes < 64 * 1024 || !log_bytes.is_multiple_of(512) {
        bail!("the log size must be a multiple of 512 bytes and at least 64 KiB");
    }
    let mut building = path.as_os_str().to_owned();
    building.push(".creating");
    let building = PathBuf::from(building);
    // A leftover from a crash while creating: never a store, safe to replace.
    std::fs::remove_file(&building).ok();
    let disk_file = Arc::new(
        DiskFile::open(&building, true, io)
            .with_context(|| format!("cannot create {}", building.display()))?,
    );
    disk_file.file.set_len(LOG_OFFSET + log_bytes)?;
    if !sparse {
        zero_fill(&disk_file, LOG_OFFSET, log_bytes)
            .with_context(|| format!("filling the log of {} with zeros", path.display()))?;
    }
    let store_id = ((seed as u128) << 64) | std::process::id() as u128;
    let mut store = Store::format(Config::new(log_bytes), store_id, seed);
    run_to_quiet(&mut store, &disk_file, 0).map_err(io_error)?;
    disk_file.file.sync_all()?;
    std::fs::rename(&building, path)
        .with_context(|| format!("cannot rename {} to {}", building.display(), path.display()))?;
    let directory = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    std::fs::File::open(directory)?.sync_all()?;
    assert!(store.is_ready(), "formatted");
    Ok((disk_file, store))
}

/// Writes zeros over `bytes` bytes from `offset`, then makes them durable (a new store's log;
/// `store bench` lays out fio's files with it too); reports progress on
/// standard error when it takes more than a few seconds.
pub fn zero_fill(file: &DiskFile, offset: u64, bytes: u64) -> Result<()> {
    const CHUNK: u64 = 4 << 20;
    let zeros = vec![0u8; CHUNK as usize];
    let started = Instant::now();
    let mut reported = started;
    let mut done = 0;
    while done < bytes {
        let n = CHUNK.min(bytes - done);
        file.write_batch(offset + done, &[&zeros[..n as usize]])
            .map_err(io_error)?;
        done += n;
        if reported.elapsed() >= Duration::from_secs(5) {
            reported = Instant::now();
            tracing::info!(
                done_mib = done >> 20,
                total_mib = bytes >> 20,
                mb_per_s =
                    format_args!("{:.0}", done as f64 / 1e6 / started.elapsed().as_secs_f64()),
                "filling the log with zeros"
            );
        }
    }
    file.sync().map_err(io_error)?;
    Ok(())
}

/// `store inspect`: the superblock, the log extent and every client's valid ranges, every
/// record from the tail to the head verified (by opening the store); text, or JSON.
pub fn inspect(path: &std::path::Path, json: bool) -> Result<String> {
    use std::fmt::Write;
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    let started = std::time::Instant::now();
    let (_, store) = open_store(path, 0, 1, IoMode::Buffered, false)?;
    let elapsed = started.elapsed();
    let sb = store.superblock();
    let stats = store.stats();
    let clients = store.clients();
    if json {
        let json_doc = serde_json::json!({
            "store_id": format!("{:032x}", sb.store_id),
            "generation": sb.generation,
            "log_bytes": sb.log_bytes,
            "tail": sb.tail,
            "tail_seq": sb.tail_seq,
            "records_verified": stats.records_scanned,
            "bytes_scanned": stats.bytes_scanned,
            "valid_data_bytes": stats.valid_data_bytes,
            "used_bytes": store.used_bytes(),
            "scan_seconds": elapsed.as_secs_f64(),
            "clients": clients.iter().map(|(c, extents)| serde_json::json!({
                "client": c,
                "ranges": extents.iter().map(|e| serde_json::json!({"volume": e.volume, "offset_bytes": e.offset_bytes, "length_bytes": e.length_bytes, "version": e.version})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        return Ok(serde_json::to_string_pretty(&json_doc)? + "\n");
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "store {:032x}, format v{}, superblock generation {}",
        sb.store_id,
        cordillera_vstore::format::FORMAT_VERSION,
        sb.generation
    );
    let _ = writeln!(
        out,
        "log: {} bytes; durable tail at {} (record {}); {} bytes in use",
        sb.log_bytes,
        sb.tail,
        sb.tail_seq,
        store.used_bytes()
    );
    let _ = writeln!(out,"verified {} records ({} bytes) from the tail to the head in {:.3} s; {} bytes of valid data", stats.records_scanned, stats.bytes_scanned, elapsed.as_secs_f64(), stats.valid_data_bytes);
    let _ = writeln!(out, "{}", store.describe());
    for (client, extents) in &clients {
        let _ = writeln!(out, "client {client}: {} valid ranges", extents.len());
        for e in extents.iter().take(20) {
            let _ = writeln!(
                out,
                "  volume {} bytes {}..{} version {}",
                e.volume,
                e.offset_bytes,
                e.offset_bytes + e.length_bytes,
                e.version
            );
        }
        if extents.len() > 20 {
            let _ = writeln!(out, "  … {} more (--json lists all)", extents.len() - 20);
        }
    }
    Ok(out)
}
