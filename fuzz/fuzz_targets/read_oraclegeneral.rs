//! libCacheSim's oracleGeneral reader on arbitrary bytes: 24-byte requests, a truncated last
//! one, implausible sizes and next-access indices must give records or typed errors, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cordillera_fuzz::read_all(cordillera_trace::Format::OracleGeneral, data));
