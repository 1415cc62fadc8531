//! Read latency of a cache in front of a modelled data disk (Bonfire §6.1–6.2, Figures 11, 13
//! and 15). The paper's prototype replays a trace with synchronous I/Os and ignores request
//! times; so does this: each request waits for the one before. A read whose blocks are all
//! cached costs `hit_ns` (the DRAM cache); a read that misses also reads the missed blocks'
//! range from the data disk (one request, at its place). Writes go into the cache (write-back:
//! destaging is off the read path) and are not timed. Hit and miss counts are exactly those of
//! [`Scheme`]: the cache sees the same accesses.

use cordillera_models::device::{Completion, Device, IoRequest};

use super::*;

/// How reads are timed.
#[derive(Clone, Debug)]
pub struct LatencyOptions {
    /// Disk model preset of the data disk (the paper's: 7,200 rpm SATA).
    pub device: String,
    /// Time of a read served by the cache, ns.
    pub hit_ns: u64,
}

impl Default for LatencyOptions {
    fn default() -> LatencyOptions {
        LatencyOptions {
            device: "sata-7200".into(),
            hit_ns: 20_000,
        }
    }
}

/// One interval of a timed scheme: the block counts of [`Interval`], and the read requests
/// with their summed latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimedInterval {
    pub blocks: Interval,
    pub read_requests: u64,
    pub read_ns: u64,
}

impl TimedInterval {
    /// Mean read latency in ms, `None` without reads.
    pub fn mean_ms(&self) -> Option<f64> {
        (self.read_requests > 0).then(|| self.read_ns as f64 / self.read_requests as f64 / 1e6)
    }
}

/// A cache and the disk behind it, replayed one request at a time.
pub struct Timed<C: Cache> {
    pub cache: C,
    disk: Box<dyn Device>,
    hit_ns: u64,
    /// The replay's clock: the end of the last request.
    now: u64,
    completions: Vec<Completion>,
    pub intervals: Vec<TimedInterval>,
}

impl<C: Cache> Timed<C> {
    pub fn new(cache: C, o: &LatencyOptions) -> Result<Timed<C>, String> {
        Ok(Timed {
            cache,
            disk: cordillera_models::presets::build(&o.device, None)?,
            hit_ns: o.hit_ns,
            now: 0,
            completions: Vec::new(),
            intervals: Vec::new(),
        })
    }

    /// Pre-loads `blocks`, oldest first (no time passes: the pre-load precedes the replay).
    pub fn preload(&mut self, blocks: impl IntoIterator<Item = u64>) {
        for b in blocks {
            self.cache.access(b);
        }
    }

    /// Drives one request; it is counted and timed in `interval` when that is `Some` (before
    /// it, the request only warms the cache).
    pub fn access(&mut self, record: &Record, interval: Option<usize>) -> Result<(), String> {
        let blocks = block_range(record.offset_bytes, record.length_bytes);
        let n = blocks.end - blocks.start;
        let (mut hits, mut first_miss, mut last_miss) = (0, u64::MAX, 0);
        for block in blocks {
            if self.cache.access(block) {
                hits += 1;
            } else {
                first_miss = first_miss.min(block);
                last_miss = block;
            }
        }
        let Some(i) = interval else {
            return Ok(());
        };
        if record.op != Op::Read {
            return Ok(());
        }
        let mut took = self.hit_ns;
        if hits < n {
            took += self.read_from_disk(first_miss, last_miss + 1 - first_miss)?;
        }
        self.now += took;
        if self.intervals.len() <= i {
            self.intervals.resize(i + 1, TimedInterval::default());
        }
        let t = &mut self.intervals[i];
        t.blocks.read_block_accesses += n;
        t.blocks.read_block_hits += hits;
        t.read_requests += 1;
        t.read_ns += took;
        Ok(())
    }

    /// Reads `count` blocks from `first` on the idle disk; the time it took, ns. Addresses
    /// beyond the disk wrap to fit, as trace replay does.
    fn read_from_disk(&mut self, first: u64, count: u64) -> Result<u64, String> {
        let capacity = self.disk.capacity_bytes();
        let length = count * BLOCK_BYTES;
        if length > capacity {
            return Err(format!("a read of {length} bytes does not fit the disk"));
        }
        let mut offset = first * BLOCK_BYTES;
        if offset + length > capacity {
            offset = offset % (capacity - length + 1) / BLOCK_BYTES * BLOCK_BYTES;
        }
        let start = self.now;
        self.disk.submit(
            start,
            IoRequest {
                id: 0,
                op: Op::Read,
                offset_bytes: offset,
                length_bytes: length,
            },
        );
        loop {
            let t = self.disk.poll_timeout().ok_or("the disk model stalled")?;
            self.disk.advance(t, &mut self.completions);
            if let Some(c) = self.completions.pop() {
                self.completions.clear();
                return Ok(c.time_ns.saturating_sub(start));
            }
        }
    }

    /// Drives `records`; those before `timeline.start_ns` only warm the cache.
    pub fn run<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a Record>,
        timeline: Timeline,
    ) -> Result<(), String> {
        assert!(timeline.interval_ns > 0, "an interval must be positive");
        for record in records {
            let i = (record.time_ns >= timeline.start_ns)
                .then(|| ((record.time_ns - timeline.start_ns) / timeline.interval_ns) as usize);
            self.access(record, i)?;
        }
        Ok(())
    }

    /// The block counts alone (what Equation 1 and the hit rates use).
    pub fn counts(&self) -> Vec<Interval> {
        self.intervals.iter().map(|t| t.blocks).collect()
    }
}

/// Mean read latency over `intervals`, ms.
pub fn mean_read_ms(intervals: &[TimedInterval]) -> Option<f64> {
    let (n, ns) = intervals
        .iter()
        .fold((0, 0), |(n, ns), t| (n + t.read_requests, ns + t.read_ns));
    (n > 0).then(|| ns as f64 / n as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_warmup::schemes::Scheme;
    use proptest::prelude::*;

    fn record(i: usize, block: u64, blocks: u64, write: bool) -> Record {
        Record {
            time_ns: i as i64,
            volume: VolumeId(0),
            op: if write { Op::Write } else { Op::Read },
            offset_bytes: block * BLOCK_BYTES,
            length_bytes: blocks * BLOCK_BYTES,
            response_ns: None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The timed replay counts exactly the hits and accesses of the untimed scheme, and a
        /// read costs the hit time only when it hits.
        #[test]
        fn timed_counts_equal_the_schemes(
            ops in proptest::collection::vec((0u64..400, 1u64..4, any::<bool>()), 1..400),
            capacity in 1usize..200,
            start in 0usize..200,
        ) {
            let records: Vec<Record> = ops
                .iter()
                .enumerate()
                .map(|(i, &(b, n, w))| record(i, b, n, w))
                .collect();
            let timeline = Timeline { start_ns: start as i64, interval_ns: 50, readahead_bytes: 0 };
            let mut plain = Scheme::new(Lru::new(capacity));
            plain.run(&records, timeline);
            let o = LatencyOptions { device: "sata-7200".into(), hit_ns: 1_000 };
            let mut timed = Timed::new(Lru::new(capacity), &o).unwrap();
            timed.run(&records, timeline).unwrap();
            let mut counts = timed.counts();
            counts.resize(plain.intervals.len().max(counts.len()), Interval::default());
            let mut expected = plain.intervals.clone();
            expected.resize(counts.len(), Interval::default());
            prop_assert_eq!(counts, expected);
            for t in &timed.intervals {
                let misses = t.blocks.read_block_accesses - t.blocks.read_block_hits;
                prop_assert!(t.read_ns >= t.read_requests * 1_000);
                prop_assert_eq!(misses == 0, t.read_ns == t.read_requests * 1_000);
            }
        }
    }

    #[test]
    fn a_miss_costs_a_disk_read_and_a_hit_does_not() {
        let o = LatencyOptions::default();
        let mut t = Timed::new(Lru::new(10), &o).unwrap();
        // A block far out, then the same block again.
        let far = 50_000_000_000 / BLOCK_BYTES;
        t.access(&record(0, far, 1, false), Some(0)).unwrap();
        t.access(&record(1, far, 1, false), Some(1)).unwrap();
        let miss = t.intervals[0].mean_ms().unwrap();
        let hit = t.intervals[1].mean_ms().unwrap();
        assert!((hit - 0.02).abs() < 1e-9, "{hit} ms");
        // A seek across a tenth of a 7,200 rpm disk and half a turn on average: milliseconds.
        assert!(miss > 2.0 && miss < 30.0, "{miss} ms");
        assert_eq!(mean_read_ms(&t.intervals), Some((miss + hit) / 2.0));
        // Writes are not timed.
        t.access(&record(2, 7, 1, true), Some(2)).unwrap();
        assert_eq!(t.intervals.len(), 2);
        assert!(Timed::new(
            Lru::new(1),
            &LatencyOptions {
                device: "nope".into(),
                hit_ns: 0
            }
        )
        .is_err());
    }
}
