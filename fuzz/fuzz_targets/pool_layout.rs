//! The storage pool's layout record on arbitrary bytes: it decodes (and then the pool it
//! describes is consistent and the record encodes back to an equal layout) or fails with a
//! typed error.
#![no_main]

use cordillera_striping::layout::PoolLayout;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((layout, pool)) = PoolLayout::decode(data) {
        assert_eq!(pool.volumes().count(), layout.volumes.len());
        let (again, _) = PoolLayout::decode(&layout.encode()).expect("an encoded layout decodes");
        assert_eq!(again, layout, "a layout round-trips");
    }
});
