//! The binary reader on arbitrary bytes: every line parser and the whole reader (framing,
//! interning, time origin, skip-invalid) must return records or typed errors, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cordillera_fuzz::read_all(cordillera_trace::Format::Binary, data));
