//! The warm-up log's superblock decoder and chunk scan on mutated bytes: typed errors or
//! skipped chunks, never a panic. (`fuzz/fuzz_targets/warmup_log.rs` runs the same longer.)

use cordillera_warmup::wlog::{read_from, scan, Superblock};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]
    #[test]
    fn mutated_logs_never_panic(
        instance in any::<u64>(),
        clean in any::<bool>(),
        data in any::<bool>(),
        data_from in any::<u64>(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..20_000),
    ) {
        let sb = Superblock { instance, capacity: 1 << 20, clean, data, data_from };
        let encoded = sb.encode();
        prop_assert_eq!(Superblock::decode(&encoded), Ok(sb));
        let mut bytes = encoded;
        bytes.extend_from_slice(&noise);
        for &(at, x) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = Superblock::decode(&bytes);
        let _ = scan(bytes.len() as u64, instance, read_from(&bytes), |offset| offset);
    }
}
