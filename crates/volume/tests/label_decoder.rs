//! The volume label decoder on mutated and truncated labels: typed errors, never a panic; what
//! decodes re-encodes to the same label. (`fuzz/fuzz_targets/volume_label.rs` runs it longer.)

use cordillera_volume::label::Label;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn mutated_labels_decode_or_are_refused(
        client in any::<u64>(),
        volume in any::<u64>(),
        n_way in 1u32..4,
        stores in prop::collection::vec("[a-z0-9.]{1,20}:[0-9]{1,5}", 1..6),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let label = Label { client, volume, n_way, stores };
        let encoded = label.encode().unwrap();
        prop_assert_eq!(Label::decode(&encoded).ok(), Some(label));
        let mut bytes = encoded;
        for &(at, x) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        if let Ok(decoded) = Label::decode(&bytes) {
            let again = decoded.encode().unwrap();
            prop_assert_eq!(Label::decode(&again).ok(), Some(decoded));
        }
    }
}
