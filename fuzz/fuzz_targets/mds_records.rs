//! The MDS's stored records (groups, objects, servers) on arbitrary bytes: each decodes or
//! fails with a typed error, and whatever decodes encodes back to the same bytes.
#![no_main]

use cordillera_gears::mds::persist::{GroupRecord, ObjectRecord, ServerRecord};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = GroupRecord::decode(data) {
        assert_eq!(r.encode(), data, "a group record round-trips");
    }
    if let Ok(r) = ObjectRecord::decode(data) {
        assert_eq!(r.encode(), data, "an object record round-trips");
    }
    if let Ok(r) = ServerRecord::decode(data) {
        assert_eq!(r.encode(), data, "a server record round-trips");
    }
});
