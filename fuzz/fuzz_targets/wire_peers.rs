//! The store's peer bindings file on arbitrary bytes: it parses or fails with a typed error;
//! whatever parses is written back line by line to a file that parses to the same bindings,
//! and the complete lines end at a line break (or the file holds none).
#![no_main]

use cordillera_wire::peers::{line, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = parse(data) {
        assert!(b.complete_bytes <= data.len());
        assert!(b.complete_bytes == 0 || data[b.complete_bytes - 1] == b'\n');
        let file: String = b.by_client.iter().map(|(c, id)| line(*c, id)).collect();
        let again = parse(file.as_bytes()).expect("written bindings parse");
        assert_eq!(again.by_client, b.by_client, "parse ∘ line is the identity");
        assert_eq!(again.complete_bytes, file.len());
    }
});
