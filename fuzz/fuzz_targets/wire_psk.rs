//! The pre-shared keys file parser on arbitrary bytes: keys parse or fail with a typed error,
//! and whatever parses writes back to a file that parses to the same keys. A PSK identity as a
//! client sends it (arbitrary bytes, the first byte its length) finds a key exactly when the
//! file names that identity.
#![no_main]

use cordillera_wire::psk::PskKeys;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let n = data.first().map_or(0, |&b| b as usize).min(data.len().saturating_sub(1));
    let (identity, file) = data.get(1..).unwrap_or(&[]).split_at(n);
    if let Ok(keys) = PskKeys::parse(file) {
        let again = PskKeys::parse(keys.to_file().as_bytes()).expect("written keys parse");
        assert_eq!(again, keys, "parse ∘ to_file is the identity");
        let named = keys.identities().any(|id| id.as_bytes() == identity);
        assert_eq!(keys.get(identity).is_some(), named, "{identity:?}");
    }
});
