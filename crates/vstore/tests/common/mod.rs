//! An in-memory disk for the store's tests: every completed write is durable.

use cordillera_vstore::store::{DiskDone, DiskOp};

/// Completes `op` on `disk`, growing it as writes and reads reach past its end.
pub fn complete_on(disk: &mut Vec<u8>, op: DiskOp) -> DiskDone {
    match op {
        DiskOp::Read {
            id,
            offset_bytes,
            length_bytes,
        } => {
            let (lo, hi) = (
                offset_bytes as usize,
                (offset_bytes + length_bytes) as usize,
            );
            disk.resize(disk.len().max(hi), 0);
            DiskDone::Read {
                id,
                data: disk[lo..hi].to_vec(),
            }
        }
        DiskOp::Write {
            id,
            offset_bytes,
            data,
            ..
        } => {
            let (lo, hi) = (offset_bytes as usize, offset_bytes as usize + data.len());
            disk.resize(disk.len().max(hi), 0);
            disk[lo..hi].copy_from_slice(&data.into_vec());
            DiskDone::Written { id }
        }
        DiskOp::Flush { id } => DiskDone::Flushed { id },
    }
}
