//! The files around the cache core: the log written by the writer thread, read back at the
//! next start. The cache's logic is tested in `cordillera_warmup::warm` and its simulation.

use super::*;
use crate::disk::IoMode;

fn page(v: u8) -> Vec<u8> {
    vec![v; BLOCK as usize]
}

fn setup(dir: &std::path::Path, data: bool) -> (CacheOptions, Arc<DiskFile>) {
    let o = CacheOptions {
        log: Some(dir.join("warm.log")),
        log_bytes: 1 << 20,
        log_data: data,
        warmup_bytes: 64 * BLOCK,
        ..CacheOptions::new(256 * BLOCK)
    };
    let volume = DiskFile::open(&dir.join("volume"), true, IoMode::Buffered).unwrap();
    (o, Arc::new(volume))
}

/// Hands the core's log commands to the writer.
fn forward(log: &mut CacheLog, core: &mut WarmCache) {
    log.collect(core);
    while let Some(io) = core.poll_io() {
        if !matches!(io, CacheIo::VolumeRead { .. }) {
            log.execute(core, io);
        }
    }
}

#[test]
fn a_clean_close_leaves_a_snapshot_and_a_crash_leaves_metadata_only() {
    let dir = tempfile::tempdir().unwrap();
    let (o, volume) = setup(dir.path(), true);
    let (mut core, mut log) = CacheLog::open(&o, volume.clone(), Instant::now()).unwrap();
    assert_eq!(core.source(), &WarmupSource::NewLog);
    assert_eq!(
        std::fs::metadata(dir.path().join("warm.log"))
            .unwrap()
            .len(),
        1 << 20,
        "a new log file is sized"
    );
    for b in 0..8u64 {
        core.write_done(b * BLOCK, &page(b as u8), true);
    }
    forward(&mut log, &mut core);
    log.close(&mut core).unwrap();
    drop((core, log));
    let (mut core, log) = CacheLog::open(&o, volume.clone(), Instant::now()).unwrap();
    assert_eq!(core.source(), &WarmupSource::LogWithData);
    assert_eq!(
        core.preload_loaded_blocks(),
        8,
        "the snapshot is loaded at open"
    );
    assert_eq!(core.read(3 * BLOCK, BLOCK).unwrap(), page(3));
    let status = log.status_json(&core);
    assert_eq!(status["warmup"]["done"], true);
    assert_eq!(status["log"], o.log.as_ref().unwrap().display().to_string());
    let mut text = String::new();
    metrics(&core, &mut text);
    assert!(
        text.contains("cordillera_cache_preload_loaded_bytes 32768"),
        "{text}"
    );
    // Dropped without a close (a crash): the next start reads the blocks from the volume.
    drop((core, log));
    let (mut core, _log) = CacheLog::open(&o, volume, Instant::now()).unwrap();
    assert_eq!(core.source(), &WarmupSource::Log);
    let Some(CacheIo::VolumeRead {
        offset_bytes,
        length_bytes,
        ..
    }) = core.poll_io()
    else {
        panic!("a pre-load read")
    };
    assert_eq!((offset_bytes, length_bytes), (0, 8 * BLOCK));
}

#[test]
fn a_log_that_cannot_be_used_is_an_error_not_a_cold_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, volume) = setup(dir.path(), false);
    // Cannot be opened.
    o.log = Some(dir.path().join("missing-dir/warm.log"));
    let e = CacheLog::open(&o, volume.clone(), Instant::now())
        .err()
        .expect("refused");
    assert!(format!("{e:#}").contains("refusing to serve"), "{e:#}");
    // Opens, but the start's log commands fail (sizing /dev/full fails): the "in use" mark is
    // never written.
    if std::path::Path::new("/dev/full").exists() {
        o.log = Some("/dev/full".into());
        let e = CacheLog::open(&o, volume.clone(), Instant::now())
            .err()
            .expect("refused");
        assert!(format!("{e:#}").contains("cannot be written"), "{e:#}");
    }
    // Without a log: on-demand warm-up, as asked.
    o.log = None;
    let (core, log) = CacheLog::open(&o, volume.clone(), Instant::now()).unwrap();
    assert!(
        matches!(core.source(), WarmupSource::None),
        "{:?}",
        core.source()
    );
    assert_eq!(log.status_json(&core)["warmup"]["done"], true);
    o.cache_bytes = 100;
    assert!(CacheLog::open(&o, volume, Instant::now()).is_err());
}

#[test]
fn a_cache_reset_reads_the_log_file_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, volume) = setup(dir.path(), false);
    o.metadata_buffer_bytes = 16 * 16;
    let (mut core, mut log) = CacheLog::open(&o, volume, Instant::now()).unwrap();
    for b in 0..20u64 {
        core.write_done(b * BLOCK, &page(b as u8), true);
    }
    forward(&mut log, &mut core);
    // The writer thread writes the chunk of the first 16: its answer.
    assert_eq!(core.status().log_chunks_written, 1);
    log.wait(&mut core);
    log.reset(&mut core);
    assert_eq!(core.source(), &WarmupSource::Log);
    assert_eq!(
        core.preload_planned_blocks(),
        20,
        "16 from the log file, 4 staged"
    );
}

#[test]
fn the_warmup_size_is_a_percentage_of_the_cache_or_a_size() {
    assert_eq!(CacheOptions::warmup_bytes_of("25%", 1 << 30), Ok(256 << 20));
    assert_eq!(CacheOptions::warmup_bytes_of(" 100 %", 4096), Ok(4096));
    assert_eq!(CacheOptions::warmup_bytes_of("64m", 1 << 30), Ok(64 << 20));
    for bad in ["101%", "-1%", "x%", "%", "lots"] {
        assert!(
            CacheOptions::warmup_bytes_of(bad, 1 << 30).is_err(),
            "{bad:?} accepted"
        );
    }
}
