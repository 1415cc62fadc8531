//! The paper's three schemes side by side over one pass of a trace (§4.3): a cache created at
//! time T, either empty (*cold*, warmed on demand) or pre-loaded (*warmed*), against a cache
//! running since the trace start (*always-warm*); read hits and accesses per time interval from
//! T on. Optional disk read-ahead (§4.3.2): a read that misses also brings the blocks after it,
//! up to the read-ahead size, into the cache (they are not counted as accesses).

use cordillera_trace::record::Record;
use cordillera_types::Op;
use serde::Serialize;

use crate::cache::Cache;
use crate::sim::{block_range, BLOCK_BYTES};

/// Read block accesses and hits in one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interval {
    pub read_block_accesses: u64,
    pub read_block_hits: u64,
}

impl Interval {
    /// Hits ÷ accesses, `None` without reads.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.read_block_accesses > 0)
            .then(|| self.read_block_hits as f64 / self.read_block_accesses as f64)
    }
}

/// One scheme's cache and its per-interval counts.
pub struct Scheme<C: Cache> {
    pub cache: C,
    pub intervals: Vec<Interval>,
}

impl<C: Cache> Scheme<C> {
    pub fn new(cache: C) -> Scheme<C> {
        Scheme {
            cache,
            intervals: Vec::new(),
        }
    }

    /// Pre-loads `blocks`, oldest first (the last is the most recent).
    pub fn preload(&mut self, blocks: impl IntoIterator<Item = u64>) {
        for b in blocks {
            self.cache.access(b);
        }
    }

    /// Drives `record`; counts go to `interval` when it is `Some`.
    fn apply(&mut self, record: &Record, interval: Option<usize>, readahead_blocks: u64) {
        let blocks = block_range(record.offset_bytes, record.length_bytes);
        let (end, n) = (blocks.end, blocks.end - blocks.start);
        let mut hits = 0;
        for block in blocks {
            hits += self.cache.access(block) as u64;
        }
        if record.op != Op::Read {
            return;
        }
        if hits < n {
            for block in end..end.saturating_add(readahead_blocks) {
                self.cache.access(block);
            }
        }
        if let Some(i) = interval {
            if self.intervals.len() <= i {
                self.intervals.resize(i + 1, Interval::default());
            }
            self.intervals[i].read_block_accesses += n;
            self.intervals[i].read_block_hits += hits;
        }
    }
}

impl<C: Cache> Scheme<C> {
    /// Drives `records` through this scheme alone: those before `timeline.start_ns` warm the
    /// cache without being counted (pass only the records after it for a cache created at T).
    pub fn run<'a>(&mut self, records: impl IntoIterator<Item = &'a Record>, timeline: Timeline) {
        assert!(timeline.interval_ns > 0, "an interval must be positive");
        let readahead = timeline.readahead_bytes / BLOCK_BYTES;
        for record in records {
            let i = (record.time_ns >= timeline.start_ns)
                .then(|| ((record.time_ns - timeline.start_ns) / timeline.interval_ns) as usize);
            self.apply(record, i, readahead);
        }
    }
}

/// When the new caches are created and how counts are grouped.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    /// T: the new caches' creation, in trace time (ns since the trace start).
    pub start_ns: i64,
    /// Interval length.
    pub interval_ns: i64,
    /// Disk read-ahead in bytes (0: none; the paper's is 128 KiB).
    pub readahead_bytes: u64,
}

/// The three schemes fed one record at a time (a trace streamed once): `always_warm` sees
/// every record, `cold` and `warmed` only those at or after `start_ns`. Interval `i` covers
/// `[start_ns + i·interval_ns, start_ns + (i+1)·interval_ns)`.
pub struct Three<C: Cache> {
    pub always_warm: Scheme<C>,
    pub cold: Scheme<C>,
    pub warmed: Scheme<C>,
    timeline: Timeline,
    readahead_blocks: u64,
}

impl<C: Cache> Three<C> {
    /// Caches from `make`; the warmed one pre-loaded with `preload` (oldest first).
    pub fn new(timeline: Timeline, preload: &[u64], make: impl Fn() -> C) -> Three<C> {
        assert!(timeline.interval_ns > 0, "an interval must be positive");
        let mut warmed = Scheme::new(make());
        warmed.preload(preload.iter().copied());
        Three {
            always_warm: Scheme::new(make()),
            cold: Scheme::new(make()),
            warmed,
            timeline,
            readahead_blocks: timeline.readahead_bytes / BLOCK_BYTES,
        }
    }

    pub fn feed(&mut self, record: &Record) {
        let (t, readahead) = (&self.timeline, self.readahead_blocks);
        if record.time_ns < t.start_ns {
            self.always_warm.apply(record, None, readahead);
            return;
        }
        let i = ((record.time_ns - t.start_ns) / t.interval_ns) as usize;
        self.always_warm.apply(record, Some(i), readahead);
        self.cold.apply(record, Some(i), readahead);
        self.warmed.apply(record, Some(i), readahead);
    }

    /// The interval series of always-warm, cold and warmed, of one length (trailing intervals
    /// may have had no reads).
    pub fn finish(self) -> [Vec<Interval>; 3] {
        let mut series = [
            self.always_warm.intervals,
            self.cold.intervals,
            self.warmed.intervals,
        ];
        let n = series.iter().map(Vec::len).max().unwrap_or(0);
        for s in &mut series {
            s.resize(n, Interval::default());
        }
        series
    }
}

/// The three schemes over `records`: always-warm, cold, and warmed (pre-loaded with
/// `preload`), each with a cache from `make`; their interval series in that order.
pub fn run_three<C: Cache>(
    records: impl IntoIterator<Item = Record>,
    timeline: Timeline,
    preload: &[u64],
    make: impl Fn() -> C,
) -> [Vec<Interval>; 3] {
    let mut three = Three::new(timeline, preload, make);
    for r in records {
        three.feed(&r);
    }
    three.finish()
}

/// §4.3's improvement in T_converge, in percent: how much sooner the warmed cache converges
/// than the cold one, its pre-load time counted (all three in one unit); `None` when the cold
/// cache converges at once.
pub fn converge_improvement_pct(cold: f64, warmed: f64, preload: f64) -> Option<f64> {
    (cold > 0.0).then(|| 100.0 * (cold - (warmed + preload)) / cold)
}

/// Equation 1: the first interval T from which, until the end, the new cache's hit rate is
/// below `th_v` × the always-warm cache's in at most `th_n` × (the intervals from T to the end).
/// An interval without reads is no violation. Returns the interval index, or `None` when no
/// interval qualifies: the new cache never converged within the trace.
pub fn convergence(new: &[Interval], warm: &[Interval], th_v: f64, th_n: f64) -> Option<usize> {
    assert_eq!(new.len(), warm.len(), "series of one trace");
    let violates = |i: usize| match (new[i].hit_rate(), warm[i].hit_rate()) {
        (Some(h_new), Some(h_warm)) => h_new < th_v * h_warm,
        _ => false,
    };
    // From the end backwards: violations in [t, end), keeping the smallest qualifying t.
    let n = new.len();
    let mut violations = 0usize;
    let mut best = n;
    for t in (0..n).rev() {
        violations += violates(t) as usize;
        if violations as f64 <= th_n * (n - t) as f64 {
            best = t;
        }
    }
    (best < n).then_some(best)
}

/// Equation 2: the fraction of read blocks the cache served over the first `intervals`
/// intervals (`None` without reads).
pub fn server_load_reduction(series: &[Interval], intervals: usize) -> Option<f64> {
    let (hits, accesses) = series.iter().take(intervals).fold((0, 0), |(h, a), i| {
        (h + i.read_block_hits, a + i.read_block_accesses)
    });
    (accesses > 0).then(|| hits as f64 / accesses as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Lru;
    use cordillera_trace::record::VolumeId;

    fn interval(accesses: u64, hits: u64) -> Interval {
        Interval {
            read_block_accesses: accesses,
            read_block_hits: hits,
        }
    }

    fn read(time_ns: i64, block: u64) -> Record {
        Record {
            time_ns,
            volume: VolumeId(0),
            op: Op::Read,
            offset_bytes: block * BLOCK_BYTES,
            length_bytes: BLOCK_BYTES,
            response_ns: None,
        }
    }

    #[test]
    fn convergence_follows_equation_1() {
        let warm = vec![interval(10, 9); 10];
        // The new cache reaches 90 % of the warm one's rate at interval 4 and dips once at 7.
        let rates = [0, 2, 4, 6, 9, 9, 9, 5, 9, 9];
        let new: Vec<Interval> = rates.iter().map(|&h| interval(10, h)).collect();
        // Th_V 0.9 (a violation is < 8.1 hits), no violation allowed: after the dip.
        assert_eq!(convergence(&new, &warm, 0.9, 0.0), Some(8));
        // One violation in six intervals is within 20 %: from interval 4.
        assert_eq!(convergence(&new, &warm, 0.9, 0.2), Some(4));
        // Th_V 0.6 (< 5.4 hits): 5 at interval 7 still violates, 6 at interval 3 does not.
        assert_eq!(convergence(&new, &warm, 0.6, 0.0), Some(8));
        assert_eq!(convergence(&new, &warm, 0.6, 0.2), Some(3));
        // Already warm: zero.
        assert_eq!(convergence(&warm, &warm, 0.9, 0.0), Some(0));
        // Never converging: no interval qualifies.
        let never = vec![interval(10, 0); 10];
        assert_eq!(
            convergence(&never, &warm, 0.9, 0.0),
            None,
            "never converged"
        );
    }

    #[test]
    fn intervals_without_reads_are_not_violations() {
        let warm = vec![interval(10, 9), interval(0, 0), interval(10, 9)];
        let new = vec![interval(10, 0), interval(0, 0), interval(10, 9)];
        assert_eq!(convergence(&new, &warm, 0.9, 0.0), Some(1));
        assert_eq!(server_load_reduction(&new, 3), Some(0.45));
        assert_eq!(server_load_reduction(&new[1..2], 1), None);
    }

    #[test]
    fn the_three_schemes_see_the_trace_from_their_start() {
        // Blocks 0..4 read before T; after T, the same blocks again.
        let s = 1_000_000_000;
        let mut records: Vec<Record> = (0..4).map(|b| read(b as i64, b)).collect();
        records.extend((0..4).map(|b| read(s + b as i64, b)));
        let timeline = Timeline {
            start_ns: s,
            interval_ns: s,
            readahead_bytes: 0,
        };
        let [always, cold, warmed] = run_three(records, timeline, &[2, 3], || Lru::new(8));
        assert_eq!(always, vec![interval(4, 4)]);
        assert_eq!(cold, vec![interval(4, 0)]);
        assert_eq!(warmed, vec![interval(4, 2)]);
    }

    #[test]
    fn read_ahead_brings_the_following_blocks_after_a_miss() {
        let records = vec![read(0, 10), read(1, 11), read(2, 42), read(3, 10 + 33)];
        let timeline = Timeline {
            start_ns: 0,
            interval_ns: 10,
            readahead_bytes: 128 << 10,
        };
        let [_, cold, _] = run_three(records, timeline, &[], || Lru::new(64));
        // 11 and 42 were read ahead (32 blocks after 10: 11..=42); 43 was not.
        assert_eq!(cold, vec![interval(4, 2)]);
    }
}
