//! The store's record and superblock decoders on arbitrary bytes.
#![no_main]

use cordillera_vstore::format::{RecordHeader, Superblock, HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = RecordHeader::decode(data) {
        let end = (HEADER_BYTES + header.payload_bytes as usize).min(data.len());
        let _ = RecordHeader::verify(data, &data[HEADER_BYTES.min(end)..end]);
    }
    let _ = Superblock::decode(data);
});
