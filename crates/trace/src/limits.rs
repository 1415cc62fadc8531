//! Every bound the trace crate keeps, in one place. A limit reached is a typed error, never
//! unbounded growth: a corrupt or hostile file must not exhaust memory.

/// Longest text line accepted. Real trace lines are under 200 bytes; a file without newlines
/// (a binary fed as text) must not be read into memory whole.
pub const LINE_BYTES_MAX: usize = 64 * 1024;

/// Distinct volumes in one trace. The full Tencent CBS trace has about 5,000, MSR Cambridge 36.
pub const VOLUMES_MAX: usize = 1 << 20;

/// Bytes read ahead to detect the format of a text trace.
pub const DETECT_SAMPLE_BYTES: usize = 64 * 1024;

/// Records in one block of a binary trace: large enough for zstd to find redundancy
/// (≈ 1 MiB of raw records), small enough to keep readers' memory constant.
pub const BINARY_BLOCK_RECORDS: u32 = 64 * 1024;

/// A reader refuses blocks that claim more than this: with at most 60 bytes per encoded record
/// plus the new volume names, this bounds the buffers a corrupt header can make us allocate.
pub const BINARY_BLOCK_RECORDS_MAX: u32 = 1 << 20;
pub const BINARY_BLOCK_RAW_BYTES_MAX: u32 = 128 * 1024 * 1024;

const _: () = assert!(BINARY_BLOCK_RECORDS <= BINARY_BLOCK_RECORDS_MAX);
const _: () = assert!(BINARY_BLOCK_RECORDS_MAX as u64 * 60 <= BINARY_BLOCK_RAW_BYTES_MAX as u64);

/// The largest request a record may carry. Real block layers split requests far below this
/// (Linux's default `max_sectors_kb` is 512 KiB to 4 MiB); a larger one is a misread field
/// (offset and size swapped, a size in the wrong unit) and is refused with its line.
pub const REQUEST_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// The end of the furthest request a record may carry: 1 PiB, beyond any single block device
/// or volume a trace records.
pub const DEVICE_BYTES_MAX: u64 = 1 << 50;

/// Why a request is implausible, or `None`.
pub fn implausible(offset_bytes: u64, length_bytes: u64) -> Option<&'static str> {
    if length_bytes > REQUEST_BYTES_MAX {
        Some("request larger than 64 MiB (are offset and size swapped, or the size in the wrong unit?)")
    } else if offset_bytes.saturating_add(length_bytes) > DEVICE_BYTES_MAX {
        Some("request ends past 1 PiB, beyond any plausible device (is the offset in the wrong unit?)")
    } else {
        None
    }
}
