//! The simulator's LRU against an independent, straightforward LRU (a vector in recency
//! order, searched linearly): equal hit counts on generated sequences (proptest), on generated
//! workloads and on real trace fragments from `../shared/traces/` (skipped, with a message,
//! when that folder is absent).

use cordillera_trace::read::{open, ReadOptions, RecordReader};
use cordillera_trace::record::Record;
use cordillera_types::Op;
use cordillera_warmup::cache::{Cache, Lru};
use cordillera_warmup::sim::{block_range, simulate, Counts};
use proptest::prelude::*;

/// Most recent first; a hit moves the block to the front, a miss inserts it there and drops
/// the last one when over capacity.
struct ReferenceLru {
    capacity: usize,
    order: Vec<u64>,
}

impl ReferenceLru {
    fn access(&mut self, block: u64) -> bool {
        if let Some(at) = self.order.iter().position(|&b| b == block) {
            self.order.remove(at);
            self.order.insert(0, block);
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        self.order.insert(0, block);
        self.order.truncate(self.capacity);
        false
    }
}

/// Read block accesses and hits, counted the reference way.
fn reference_counts(capacity: usize, records: &[Record]) -> (u64, u64) {
    let mut lru = ReferenceLru {
        capacity,
        order: Vec::new(),
    };
    let (mut accesses, mut hits) = (0, 0);
    for r in records {
        for block in block_range(r.offset_bytes, r.length_bytes) {
            let hit = lru.access(block);
            if r.op == Op::Read {
                accesses += 1;
                hits += hit as u64;
            }
        }
    }
    (accesses, hits)
}

fn record(op: Op, offset_bytes: u64, length_bytes: u64) -> Record {
    Record {
        time_ns: 0,
        volume: cordillera_trace::record::VolumeId(0),
        op,
        offset_bytes,
        length_bytes,
        response_ns: None,
    }
}

fn check(capacity: usize, records: &[Record]) -> Counts {
    let mut lru = Lru::new(capacity);
    let counts = simulate(&mut lru, records.iter().copied());
    assert_eq!(
        (counts.read_block_accesses, counts.read_block_hits),
        reference_counts(capacity, records),
        "capacity {capacity}"
    );
    assert!(lru.len() <= capacity);
    counts
}

proptest! {
    #[test]
    fn equal_to_the_reference_on_generated_sequences(
        capacity in 0usize..40,
        requests in prop::collection::vec((any::<bool>(), 0u64..200, 1u64..5), 0..400),
    ) {
        let records: Vec<Record> = requests
            .iter()
            .map(|&(read, block, blocks)| {
                record(if read { Op::Read } else { Op::Write }, block * 4096 + block % 3 * 512, blocks * 4096 - 512)
            })
            .collect();
        check(capacity, &records);
    }
}

use cordillera_testkit::traces_dir;

fn first_records(path: &std::path::Path, n: usize) -> Vec<Record> {
    let mut reader = open(path, &ReadOptions::default()).unwrap();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match reader.next_record().unwrap() {
            Some(r) => out.push(r),
            None => break,
        }
    }
    out
}

#[test]
fn equal_to_the_reference_on_real_fragments() {
    let Some(dir) = traces_dir("equal_to_the_reference_on_real_fragments") else {
        return;
    };
    // The reference is quadratic: the first 20,000 requests of each, at three cache sizes.
    for name in [
        "cloudphysics/cloudphysics_vscsi_sample.csv",
        "arc/OLTP.lis.zst",
        "arc/P3.lis.zst",
    ] {
        let records = first_records(&dir.join(name), 20_000);
        assert!(records.len() >= 10_000, "{name}: {} records", records.len());
        for capacity in [64, 512, 2048] {
            let counts = check(capacity, &records);
            println!(
                "{name}: {capacity} blocks: {} read block accesses, {} hits",
                counts.read_block_accesses, counts.read_block_hits
            );
            assert!(counts.read_block_accesses > 0);
        }
    }
}

#[test]
fn equal_to_the_reference_on_a_generated_zipf_workload() {
    let mut reader = cordillera_sim::workload::open_spec("gen:zipf:alpha=1.1,span=256m").unwrap();
    let mut records = Vec::new();
    while records.len() < 20_000 {
        match reader.next_record().unwrap() {
            Some(r) => records.push(r),
            None => break,
        }
    }
    assert_eq!(records.len(), 20_000);
    let counts = check(1024, &records);
    // A skewed workload hits a cache of 1,024 blocks often: the check is not vacuous.
    assert!(
        counts.read_block_hits > counts.read_block_accesses / 10,
        "{counts:?}"
    );
}

/// A cache whose table starts small and grows (`Lru::growing`, 4,096 blocks reserved) answers
/// every access as one reserved whole (`Lru::new`, checked against the reference above), and
/// keeps the same recency order, through growth and then evictions at full size.
#[test]
fn a_growing_cache_answers_as_a_reserved_one() {
    let capacity = 20_000;
    let mut grown = Lru::growing(capacity);
    let mut whole = Lru::new(capacity);
    let mut x: u64 = 0x9e37_79b9;
    let (mut hits, mut accesses) = (0u64, 0u64);
    for _ in 0..300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Half the accesses over 16,000 blocks (hits once warm), half over 60,000.
        let block = if x & 1 == 0 { x % 16_000 } else { x % 60_000 };
        let hit = whole.access(block);
        assert_eq!(grown.access(block), hit, "access {accesses}: block {block}");
        hits += hit as u64;
        accesses += 1;
    }
    assert_eq!(grown.len(), capacity);
    assert_eq!(grown.recency_order(), whole.recency_order());
    // Both hits and evictions happened.
    assert!(
        hits > accesses / 4 && hits < accesses * 3 / 4,
        "{hits} of {accesses}"
    );
}
