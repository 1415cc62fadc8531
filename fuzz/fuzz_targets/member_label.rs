//! A member array's label on arbitrary bytes: typed errors only, and what decodes re-encodes to
//! a label that decodes the same.
#![no_main]

use cordillera_striping::members::label::Label;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(label) = Label::decode(data) {
        let bytes = label.encode(data.len().max(4096) as u64).expect("a decoded label encodes");
        assert_eq!(Label::decode(&bytes).ok(), Some(label));
    }
});
