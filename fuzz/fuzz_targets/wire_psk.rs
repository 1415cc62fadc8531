//! The pre-shared keys file parser on arbitrary bytes: keys parse or fail with a typed error,
//! and whatever parses writes back to a file that parses to the same keys.
#![no_main]

use cordillera_wire::psk::PskKeys;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(keys) = PskKeys::parse(data) {
        let again = PskKeys::parse(keys.to_file().as_bytes()).expect("written keys parse");
        assert_eq!(again, keys, "parse ∘ to_file is the identity");
    }
});
