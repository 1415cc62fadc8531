//! Shared vocabulary of Cordillera: what an I/O is, how big a block is, how time is counted.
//!
//! # Layout
//!
//! - [`Op`]: read or write.
//! - [`ByteRange`]: a byte range on a volume, and the 4 KiB blocks it touches.
//! - [`Nanos`]: time in nanoseconds, simulated or since a core's start.
//! - [`SplitMix64`]: the small seedable generator every crate uses where a stream of
//!   well-mixed numbers is enough (workload shapes, epochs, test data).
//! - [`units`]: sizes and time conversions, with units in every name.
//! - [`rangemap`]: an ordered map of non-overlapping byte ranges (Everest §3.2.1), what a store
//!   keeps per client and an off-loading client per volume.
//! - [`rng`]: SplitMix64 and the draws built on any 64-bit stream.
//!
//! Every other crate speaks in these types; nothing here does I/O.

pub mod rangemap;
pub mod rng;
pub mod units;

pub use rng::SplitMix64;

/// Time in nanoseconds: virtual in the simulator, since a core's start in the runtime.
pub type Nanos = u64;

use serde::{Deserialize, Serialize};

/// The direction of one block I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn is_read(self) -> bool {
        matches!(self, Op::Read)
    }

    pub fn is_write(self) -> bool {
        matches!(self, Op::Write)
    }
}

/// A half-open byte range `[offset_bytes, offset_bytes + length_bytes)` on one volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ByteRange {
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

impl ByteRange {
    pub fn new(offset_bytes: u64, length_bytes: u64) -> ByteRange {
        ByteRange {
            offset_bytes,
            length_bytes,
        }
    }

    /// One past the last byte; saturates instead of wrapping for ranges at the top of the space.
    pub fn end_bytes(self) -> u64 {
        self.offset_bytes.saturating_add(self.length_bytes)
    }

    /// The indices of the `block_bytes`-aligned blocks this range touches (empty for a
    /// zero-length range).
    pub fn blocks(self, block_bytes: u64) -> std::ops::Range<u64> {
        assert!(block_bytes > 0);
        if self.length_bytes == 0 {
            return 0..0;
        }
        let first = self.offset_bytes / block_bytes;
        let last = (self.end_bytes() - 1) / block_bytes;
        first..last + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_touched_by_unaligned_extents() {
        assert_eq!(ByteRange::new(0, 4096).blocks(4096), 0..1);
        assert_eq!(ByteRange::new(4095, 2).blocks(4096), 0..2);
        assert_eq!(ByteRange::new(8192, 1).blocks(4096), 2..3);
        assert_eq!(ByteRange::new(100, 0).blocks(4096), 0..0);
        assert_eq!(ByteRange::new(u64::MAX - 10, 100).blocks(4096).count(), 1);
    }
}
