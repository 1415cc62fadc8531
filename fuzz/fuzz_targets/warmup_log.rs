//! The warm-up log's superblock decoder and its chunk scan on arbitrary bytes: only typed
//! errors or skipped chunks, never a panic or an unbounded allocation.
#![no_main]

use cordillera_warmup::wlog::{read_from, scan, Superblock};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Superblock::decode(data);
    if data.len() < 8 {
        return;
    }
    let instance = u64::from_le_bytes(data[..8].try_into().unwrap());
    let _ = scan(data.len() as u64, instance, read_from(data), |offset| offset);
});
