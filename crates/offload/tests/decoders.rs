//! The store-set superblock and deletion-record decoders on mutated and truncated encodings:
//! typed errors or `None`, never a panic; what decodes re-encodes to the same value. (The
//! coverage-guided target `fuzz/fuzz_targets/offload_records.rs` runs the same longer.)

use cordillera_offload::client::StoreInfo;
use cordillera_offload::records::DeletionRecord;
use cordillera_offload::superblock::Superblock;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn mutated_encodings_decode_or_are_refused(
        generation in any::<u64>(),
        degraded in any::<bool>(),
        stores in prop::collection::vec((any::<u64>(), any::<u64>()), 0..8),
        ranges in prop::collection::vec((0u64..1 << 62, 1u64..1 << 40, any::<u64>()), 0..8),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let sb = Superblock {
            generation,
            degraded,
            stores: stores.iter().map(|&(id, server)| StoreInfo { id, server }).collect(),
        };
        // Entries are non-empty ranges (the decoder drops empty ones).
        let entries = ranges.iter().map(|&(s, len, v)| (s, s + len, v)).collect();
        let record = DeletionRecord { target: generation, entries };
        prop_assert_eq!(Superblock::decode(&sb.encode()).ok(), Some(sb.clone()));
        prop_assert_eq!(DeletionRecord::decode(&record.encode()), Some(record.clone()));
        for mut bytes in [sb.encode(), record.encode()] {
            for &(at, x) in &flips {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
            bytes.truncate(cut % (bytes.len() + 1));
            if let Ok(decoded) = Superblock::decode(&bytes) {
                prop_assert_eq!(Superblock::decode(&decoded.encode()).ok(), Some(decoded));
            }
            if let Some(decoded) = DeletionRecord::decode(&bytes) {
                prop_assert_eq!(DeletionRecord::decode(&decoded.encode()), Some(decoded));
            }
        }
    }
}
