//! The driver with real files: the log written by its thread, read back at the next start.
//! The cache's logic is tested in `cordillera_warmup::warm` and its simulation tests.

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

#[test]
fn a_clean_close_leaves_a_snapshot_and_a_crash_leaves_metadata_only() {
    let dir = tempfile::tempdir().unwrap();
    let (o, volume) = setup(dir.path(), true);
    let mut c = CacheDriver::open(&o, volume.clone()).unwrap();
    assert_eq!(c.source(), &WarmupSource::NewLog);
    assert_eq!(
        std::fs::metadata(dir.path().join("warm.log"))
            .unwrap()
            .len(),
        1 << 20,
        "a new log file is sized"
    );
    for b in 0..8u64 {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    c.close().unwrap();
    drop(c);
    let mut c = CacheDriver::open(&o, volume.clone()).unwrap();
    assert_eq!(c.source(), &WarmupSource::LogWithData);
    c.load_snapshot();
    assert_eq!(c.core.preload_loaded_blocks(), 8);
    assert_eq!(c.read(3 * BLOCK, BLOCK).unwrap(), page(3));
    assert_eq!(c.status_json()["warmup"]["done"], true);
    assert_eq!(
        c.status_json()["log"],
        o.log.as_ref().unwrap().display().to_string()
    );
    let mut metrics = String::new();
    c.metrics(&mut metrics);
    assert!(
        metrics.contains("cordillera_cache_preload_loaded_bytes 32768"),
        "{metrics}"
    );
    // Dropped without a close (a crash): the next start reads the blocks from the volume.
    drop(c);
    let mut c = CacheDriver::open(&o, volume).unwrap();
    assert_eq!(c.source(), &WarmupSource::Log);
    c.load_snapshot();
    let reads = c.next_preload_reads();
    assert_eq!((reads[0].0, reads[0].1), (0, 8 * BLOCK));
}

#[test]
fn a_log_that_cannot_be_opened_means_on_demand_warm_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, volume) = setup(dir.path(), false);
    o.log = Some(dir.path().join("missing-dir/warm.log"));
    let c = CacheDriver::open(&o, volume.clone()).unwrap();
    assert!(
        matches!(c.source(), WarmupSource::Fallback(_)),
        "{:?}",
        c.source()
    );
    assert_eq!(c.status_json()["warmup"]["done"], true);
    o.cache_bytes = 100;
    assert!(CacheDriver::open(&o, volume).is_err());
}

#[test]
fn a_cache_reset_reads_the_log_file_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut o, volume) = setup(dir.path(), false);
    o.metadata_buffer_bytes = 16 * 16;
    let mut c = CacheDriver::open(&o, volume).unwrap();
    for b in 0..20u64 {
        c.write_done(b * BLOCK, &page(b as u8), true);
    }
    // The writer thread writes the chunk of the first 16.
    for _ in 0..100 {
        c.forward();
        if c.core.status().log_chunks_written == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    c.reset();
    assert_eq!(c.source(), &WarmupSource::Log);
    assert_eq!(
        c.preload_planned_blocks(),
        20,
        "16 from the log file, 4 staged"
    );
}
