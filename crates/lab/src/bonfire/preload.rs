//! Pre-load time on a device model (Bonfire §5.2, §6.3): loading the warm-up blocks either from
//! where they live on the data volume (*metadata-only*: the log holds only their addresses, so
//! each run of consecutive blocks is a read at its own place) or from the performance snapshot
//! (*metadata+data*: the blocks were copied into one contiguous area, read sequentially). Both
//! are replayed closed-loop on a simulator device.

use cordillera_models::device::{Completion, Device, IoRequest};
use cordillera_types::Op;

use cordillera_warmup::sim::BLOCK_BYTES;

/// The largest read issued.
pub const MAX_READ_BYTES: u64 = 1 << 20;

/// Sorted, de-duplicated blocks as reads of consecutive runs (each at most [`MAX_READ_BYTES`]),
/// in bytes: (offset, size).
pub fn runs(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut sorted = blocks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let per_read = MAX_READ_BYTES / BLOCK_BYTES;
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut n = 1;
        while i + (n as usize) < sorted.len() && sorted[i + n as usize] == start + n && n < per_read
        {
            n += 1;
        }
        out.push((start * BLOCK_BYTES, n * BLOCK_BYTES));
        i += n as usize;
    }
    out
}

/// Seconds to complete `reads` (offset, size) with `depth` outstanding, from an idle device.
/// Offsets beyond the device wrap to fit, as trace replay does.
pub fn replay_reads(
    device: &mut dyn Device,
    reads: &[(u64, u64)],
    depth: usize,
) -> Result<f64, String> {
    let capacity = device.capacity_bytes();
    let depth = depth.max(1);
    let mut next = 0usize;
    let mut outstanding = 0usize;
    let mut completions: Vec<Completion> = Vec::new();
    let mut last = 0u64;
    let submit = |device: &mut dyn Device, next: &mut usize, now: u64| -> Result<(), String> {
        let (offset, size) = reads[*next];
        if size > capacity {
            return Err(format!("a read of {size} bytes does not fit the device"));
        }
        let offset = if offset + size > capacity {
            offset % (capacity - size + 1) / BLOCK_BYTES * BLOCK_BYTES
        } else {
            offset
        };
        device.submit(
            now,
            IoRequest {
                id: *next as u64,
                op: Op::Read,
                offset_bytes: offset,
                length_bytes: size,
            },
        );
        *next += 1;
        Ok(())
    };
    while next < reads.len() && outstanding < depth {
        submit(device, &mut next, 0)?;
        outstanding += 1;
    }
    while outstanding > 0 {
        let t = device.poll_timeout().ok_or("the device stalled")?;
        device.advance(t, &mut completions);
        for c in completions.drain(..) {
            outstanding -= 1;
            last = last.max(c.time_ns);
            if next < reads.len() {
                submit(device, &mut next, c.time_ns)?;
                outstanding += 1;
            }
        }
    }
    Ok(last as f64 / 1e9)
}

/// Metadata-only pre-load: the blocks' runs read in address order at `depth`.
pub fn metadata_only_s(
    device: &mut dyn Device,
    blocks: &[u64],
    depth: usize,
) -> Result<f64, String> {
    replay_reads(device, &runs(blocks), depth)
}

/// Metadata+data pre-load: as many bytes as distinct blocks, read sequentially from offset 0
/// in [`MAX_READ_BYTES`] reads at `depth`.
pub fn snapshot_s(device: &mut dyn Device, blocks: &[u64], depth: usize) -> Result<f64, String> {
    let mut distinct = blocks.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    sequential_s(device, distinct.len() as u64 * BLOCK_BYTES, depth)
}

/// Seconds to read `total` bytes from the device's start in reads of up to 1 MiB, `depth`
/// outstanding.
pub fn sequential_s(device: &mut dyn Device, total: u64, depth: usize) -> Result<f64, String> {
    let reads: Vec<(u64, u64)> = (0..total.div_ceil(MAX_READ_BYTES))
        .map(|i| {
            let at = i * MAX_READ_BYTES;
            (at, MAX_READ_BYTES.min(total - at))
        })
        .collect();
    replay_reads(device, &reads, depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_consecutive_blocks_up_to_a_megabyte() {
        assert_eq!(
            runs(&[5, 3, 4, 4, 9]),
            vec![(3 * 4096, 3 * 4096), (9 * 4096, 4096)]
        );
        let many: Vec<u64> = (0..300).collect();
        assert_eq!(runs(&many), vec![(0, 1 << 20), (256 * 4096, 44 * 4096)]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn a_snapshot_loads_scattered_blocks_faster_than_reading_them_in_place() {
        let mut device = cordillera_models::presets::build("cheetah-15k", None).unwrap();
        // 2,000 blocks scattered over the disk: one seek each in place.
        let blocks: Vec<u64> = (0..2000u64).map(|i| i * 7_919_993 % 30_000_000).collect();
        let in_place = metadata_only_s(device.as_mut(), &blocks, 32).unwrap();
        let mut device = cordillera_models::presets::build("cheetah-15k", None).unwrap();
        let snapshot = snapshot_s(device.as_mut(), &blocks, 32).unwrap();
        println!("2,000 scattered blocks on cheetah-15k: in place {in_place:.3} s, snapshot {snapshot:.3} s");
        // 8 MB sequentially takes well under a second; 2,000 random reads take seconds.
        assert!(snapshot < 0.5, "{snapshot} s");
        assert!(
            in_place > 5.0 * snapshot,
            "{in_place} s against {snapshot} s"
        );
        let mut device = cordillera_models::presets::build("cheetah-15k", None).unwrap();
        assert_eq!(snapshot_s(device.as_mut(), &[], 32).unwrap(), 0.0);
    }
}
