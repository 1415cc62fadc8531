//! The MDS's stored records (groups, objects, servers) and its journal batches (the state kept
//! in etcd) on arbitrary bytes: each decodes or fails with a typed error, and whatever decodes
//! encodes back to the same bytes.
#![no_main]

use cordillera_gears::mds::persist::{GroupRecord, ObjectRecord, ServerRecord};
use cordillera_wire::mds_journal::{decode_batch, encode_batch};
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
    if let Ok(changes) = decode_batch(data) {
        assert_eq!(encode_batch(&changes), data, "a journal batch round-trips");
    }
});
