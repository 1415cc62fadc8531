//! The NBD codec on arbitrary bytes: option payloads and request headers parse or fail with a
//! typed error, parsed requests are checked without panicking, and headers round-trip.
#![no_main]

use cordillera_wire::nbd::{
    check_request, encode_request, parse_export_name, parse_info_request, parse_option_header,
    parse_request, Limits, OPTION_HEADER_BYTES, REQUEST_HEADER_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_info_request(data);
    let _ = parse_export_name(data);
    if let Some(header) = data.get(..OPTION_HEADER_BYTES) {
        let _ = parse_option_header(header.try_into().unwrap());
    }
    if let Some(header) = data.get(..REQUEST_HEADER_BYTES) {
        let header: [u8; REQUEST_HEADER_BYTES] = header.try_into().unwrap();
        if let Ok(r) = parse_request(header) {
            assert_eq!(encode_request(&r), header, "parse ∘ encode is the identity");
            let limits = Limits {
                length_bytes: 1 << 30,
                minimum_block: 512,
                maximum_payload: 32 << 20,
                read_only: data.len() % 2 == 0,
            };
            let _ = check_request(&r, &limits);
        }
    }
});
