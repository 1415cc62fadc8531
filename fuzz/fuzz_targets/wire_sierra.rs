//! The Sierra protocol decoder on arbitrary bytes: frames decode or fail with a typed error,
//! and whatever decodes encodes back to the same bytes.
#![no_main]

use cordillera_wire::sierra::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((frame, used))) = decode(data) {
        let mut again = Vec::new();
        encode(&frame, &mut again);
        assert_eq!(&again[..], &data[..used], "decode ∘ encode is the identity");
    }
});
