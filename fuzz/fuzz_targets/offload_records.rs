//! The off-loading client's store-set superblock and its deletion records on arbitrary bytes;
//! what decodes re-encodes to a record that decodes the same.
#![no_main]

use cordillera_offload::records::DeletionRecord;
use cordillera_offload::superblock::Superblock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = Superblock::decode(data) {
        assert_eq!(Superblock::decode(&sb.encode()).ok(), Some(sb));
    }
    if let Some(record) = DeletionRecord::decode(data) {
        assert_eq!(DeletionRecord::decode(&record.encode()), Some(record));
    }
});
