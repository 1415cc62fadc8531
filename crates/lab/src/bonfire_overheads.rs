//! Bonfire §6.3 and Table 4: what monitoring costs (log space and average logging bandwidth)
//! and how long the pre-load takes, for the two logging schemes, on a replayed workload.
//!
//! Every I/O below the cache is monitored (§5.1). The schemes:
//! - **metadata-only**: one metadata entry per request, staged in a buffer (default 256 KiB)
//!   and written to the circular metadata log when it fills; the pre-load reads the log
//!   sequentially from the logging disk, then the warm-up blocks in place from the data disk
//!   (sorted, de-duplicated, merged into runs of up to 1 MiB, 32 outstanding);
//! - **metadata+data**: also every block's data, staged in a data buffer (default 128 MiB) and
//!   written to the performance snapshot; the pre-load reads the log and the snapshot newest
//!   first, sequentially, until the warm-up blocks are all found (older copies are skipped).
//!
//! Log space is what the monitored window writes; bandwidth is that over the window's length.
//! Times are on the simulator's disk models (data and logging disks of the same preset).

use cordillera_trace::record::Record;
use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::bonfire::preload;
use cordillera_warmup::sim::{block_range, BLOCK_BYTES};

/// The runtime's metadata log entry: a 4 KiB block number (8 bytes), a length in blocks
/// (4 bytes) and a CRC32C (4 bytes).
pub const METADATA_ENTRY_BYTES: u64 = 16;

#[derive(Clone, Debug)]
pub struct OverheadOptions {
    pub metadata_buffer_bytes: u64,
    pub data_buffer_bytes: u64,
    /// Disk model preset of the data disk and of the logging disk.
    pub device: String,
    /// Reads outstanding during the pre-load.
    pub depth: usize,
}

impl Default for OverheadOptions {
    fn default() -> OverheadOptions {
        OverheadOptions {
            metadata_buffer_bytes: 256 << 10,
            data_buffer_bytes: 128 << 20,
            device: "sata-7200".into(),
            depth: 32,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SchemeOverhead {
    /// Bytes written to the logging volume over the window.
    pub log_bytes: u64,
    /// Writes to the logging volume (staging-buffer flushes).
    pub log_writes: u64,
    pub log_bytes_per_s: f64,
    /// Bytes the pre-load reads from the logging volume.
    pub preload_log_read_bytes: u64,
    pub prewarm_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Overhead {
    pub workload: String,
    pub window_requests: u64,
    pub window_block_accesses: u64,
    pub window_s: f64,
    pub warmup_blocks: u64,
    pub device: String,
    pub metadata_only: SchemeOverhead,
    pub metadata_data: SchemeOverhead,
}

/// The overheads of monitoring `window` (lasting `window_s`) and pre-loading `warmup` (the
/// warm-up blocks, distinct, chosen from the window).
pub fn measure(
    workload: &str,
    window: &[Record],
    window_s: f64,
    warmup: &[u64],
    o: &OverheadOptions,
) -> Result<Overhead, String> {
    if window_s.is_nan()
        || window_s <= 0.0
        || o.metadata_buffer_bytes == 0
        || o.data_buffer_bytes == 0
    {
        return Err("the window and the staging buffers must be positive".into());
    }
    let requests = window.len() as u64;
    let accesses: u64 = window
        .iter()
        .map(|r| {
            let b = block_range(r.offset_bytes, r.length_bytes);
            b.end - b.start
        })
        .sum();
    let metadata_bytes = requests * METADATA_ENTRY_BYTES;
    let data_bytes = accesses * BLOCK_BYTES;
    // Newest first: how far back the snapshot must be read to find every warm-up block.
    let wanted: FxHashSet<u64> = warmup.iter().copied().collect();
    let mut found: FxHashSet<u64> = FxHashSet::default();
    let (mut suffix_requests, mut suffix_blocks) = (0u64, 0u64);
    'scan: for r in window.iter().rev() {
        if found.len() == wanted.len() {
            break 'scan;
        }
        suffix_requests += 1;
        for b in block_range(r.offset_bytes, r.length_bytes) {
            suffix_blocks += 1;
            if wanted.contains(&b) {
                found.insert(b);
            }
        }
    }
    let device = |what: &str| {
        cordillera_models::presets::build(&o.device, None).map_err(|e| format!("{what}: {e}"))
    };
    let sequential = |bytes: u64| -> Result<f64, String> {
        // Whole 4 KiB pages of the log.
        let bytes = bytes.next_multiple_of(BLOCK_BYTES);
        preload::sequential_s(device("logging disk")?.as_mut(), bytes, o.depth)
    };
    let in_place = preload::metadata_only_s(device("data disk")?.as_mut(), warmup, o.depth)?;
    let metadata_read = suffix_requests * METADATA_ENTRY_BYTES;
    let snapshot_read = suffix_blocks * BLOCK_BYTES;
    Ok(Overhead {
        workload: workload.to_owned(),
        window_requests: requests,
        window_block_accesses: accesses,
        window_s,
        warmup_blocks: wanted.len() as u64,
        device: o.device.clone(),
        metadata_only: SchemeOverhead {
            log_bytes: metadata_bytes,
            log_writes: metadata_bytes.div_ceil(o.metadata_buffer_bytes),
            log_bytes_per_s: metadata_bytes as f64 / window_s,
            preload_log_read_bytes: metadata_read,
            prewarm_s: sequential(metadata_read)? + in_place,
        },
        metadata_data: SchemeOverhead {
            log_bytes: metadata_bytes + data_bytes,
            log_writes: metadata_bytes.div_ceil(o.metadata_buffer_bytes)
                + data_bytes.div_ceil(o.data_buffer_bytes),
            log_bytes_per_s: (metadata_bytes + data_bytes) as f64 / window_s,
            preload_log_read_bytes: metadata_read + snapshot_read,
            prewarm_s: sequential(metadata_read + snapshot_read)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::record::VolumeId;
    use cordillera_types::Op;

    fn read(block: u64, blocks: u64) -> Record {
        Record {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Read,
            offset_bytes: block * BLOCK_BYTES,
            length_bytes: blocks * BLOCK_BYTES,
            response_ns: None,
        }
    }

    #[test]
    fn log_sizes_follow_the_entries_and_the_snapshot_is_read_newest_first() {
        // 1,000 scattered single-block reads, then the first 100 again.
        let mut window: Vec<Record> = (0..1000).map(|i| read(i * 7919, 1)).collect();
        window.extend((0..100).map(|i| read(i * 7919, 1)));
        let warmup: Vec<u64> = (0..100).map(|i| i * 7919).collect();
        let o = OverheadOptions::default();
        let r = measure("t", &window, 100.0, &warmup, &o).unwrap();
        assert_eq!(r.window_requests, 1100);
        assert_eq!(r.metadata_only.log_bytes, 1100 * METADATA_ENTRY_BYTES);
        assert_eq!(r.metadata_only.log_writes, 1);
        assert_eq!(
            r.metadata_data.log_bytes,
            1100 * METADATA_ENTRY_BYTES + 1100 * 4096
        );
        assert_eq!(
            r.metadata_data.log_bytes_per_s,
            r.metadata_data.log_bytes as f64 / 100.0
        );
        // The warm-up blocks are the newest 100 requests: only those are read back.
        assert_eq!(r.metadata_data.preload_log_read_bytes, 100 * (16 + 4096));
        // Scattered blocks read in place take longer than 400 KiB read sequentially.
        assert!(
            r.metadata_only.prewarm_s > 5.0 * r.metadata_data.prewarm_s,
            "{r:?}"
        );
        assert!(measure("t", &window, 0.0, &warmup, &o).is_err());
    }
}
