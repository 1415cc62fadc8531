//! A trace through a block cache. Requests are cut into 4 KiB blocks (a request touches every
//! block it overlaps); each block is an access: reads and writes both insert or refresh it, and
//! a read of a cached block is a hit. Counts are of block accesses, as in the paper's
//! simulator, and of requests.

use cordillera_trace::record::Record;
use cordillera_types::Op;
use serde::Serialize;

use crate::cache::Cache;

/// The cache's block size.
pub const BLOCK_BYTES: u64 = 4096;

/// The blocks a request of `length_bytes` at `offset_bytes` touches (none for an empty request).
pub fn block_range(offset_bytes: u64, length_bytes: u64) -> std::ops::Range<u64> {
    if length_bytes == 0 {
        return 0..0;
    }
    let first = offset_bytes / BLOCK_BYTES;
    let last = offset_bytes.saturating_add(length_bytes - 1) / BLOCK_BYTES;
    first..last + 1
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub requests: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    pub read_block_accesses: u64,
    pub read_block_hits: u64,
    pub write_block_accesses: u64,
    /// Writes to a block already cached (not hits in the paper's sense, which counts reads).
    pub write_block_hits: u64,
}

impl Counts {
    /// Read hits ÷ read block accesses, or `None` without reads.
    pub fn read_hit_rate(&self) -> Option<f64> {
        (self.read_block_accesses > 0)
            .then(|| self.read_block_hits as f64 / self.read_block_accesses as f64)
    }
}

/// Drives one request through `cache`.
#[inline]
pub fn apply<C: Cache + ?Sized>(cache: &mut C, record: &Record, counts: &mut Counts) {
    counts.requests += 1;
    let blocks = block_range(record.offset_bytes, record.length_bytes);
    let n = blocks.end - blocks.start;
    let mut hits = 0;
    for block in blocks {
        hits += cache.access(block) as u64;
    }
    match record.op {
        Op::Read => {
            counts.read_requests += 1;
            counts.read_block_accesses += n;
            counts.read_block_hits += hits;
        }
        Op::Write => {
            counts.write_requests += 1;
            counts.write_block_accesses += n;
            counts.write_block_hits += hits;
        }
    }
}

/// Drives every record through `cache` (which may already hold blocks: a warmed cache).
pub fn simulate<C: Cache + ?Sized>(
    cache: &mut C,
    records: impl IntoIterator<Item = Record>,
) -> Counts {
    let mut counts = Counts::default();
    for record in records {
        apply(cache, &record, &mut counts);
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_touches_every_block_it_overlaps() {
        assert_eq!(block_range(0, 4096), 0..1);
        assert_eq!(block_range(4095, 2), 0..2);
        assert_eq!(block_range(8192, 12288), 2..5);
        assert_eq!(block_range(100, 0), 0..0);
        assert_eq!(
            block_range(u64::MAX - 10, 100),
            (u64::MAX - 10) / 4096..u64::MAX / 4096 + 1
        );
    }
}
