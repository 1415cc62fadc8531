//! A member array's journal entry on arbitrary bytes (the first byte picks the unit it is read
//! against): typed errors only, and what decodes re-encodes to the same entry.
#![no_main]

use cordillera_striping::members::journal::{Entry, ENTRY_HEAD};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&u, rest)) = data.split_first() else { return };
    let unit = 512 * (1 + u64::from(u % 8));
    if let Ok(entry) = Entry::decode(rest, unit) {
        let bytes = entry.encode(ENTRY_HEAD + unit);
        assert_eq!(Entry::decode(&bytes, unit).ok(), Some(entry));
    }
});
