//! LRU at several cache sizes in one pass (Mattson's stack with markers). LRU is a stack
//! algorithm: a cache of c blocks holds the c most recently used blocks, so one recency list of
//! the largest size, cut by a marker after the first c₀, c₁, … entries, answers every size at
//! once: a block in segment s (between markers s − 1 and s) is a hit for every size from cₛ on.
//! An access costs one hash probe and one marker step per size, against one probe per size for
//! separate caches; the lab's grid (four cache sizes) runs in a quarter of the probes.
//!
//! Pre-loading is access, so a pre-loaded cache keeps the property. Read-ahead does not (a miss
//! at one size brings blocks in at that size only): [`MultiScheme`] falls back to one
//! [`Lru`] per size when it is asked for.

use cordillera_trace::record::Record;
use cordillera_trace::reuse::Fenwick;
use cordillera_types::Op;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::cache::list::{linked_by_field, Links, List};
use crate::cache::{Lru, NIL};
use crate::schemes::{Interval, Scheme, Timeline};
use crate::sim::block_range;

#[derive(Clone, Copy)]
struct Entry {
    block: u64,
    links: Links,
    /// The smallest size index whose cache holds the block.
    segment: u8,
}

linked_by_field!(Entry);

/// LRU caches of `sizes` blocks (ascending), simulated together.
pub struct MultiLru {
    sizes: Vec<usize>,
    map: FxHashMap<u64, u32>,
    entries: Vec<Entry>,
    /// Most recent first.
    recency: List,
    /// The least recent entry of each segment's cache (the `sizes[j]`-th entry), `NIL` while
    /// fewer entries exist.
    last: Vec<u32>,
}

impl MultiLru {
    /// Sizes must be positive and strictly ascending (at most 255 of them).
    pub fn new(sizes: &[usize]) -> MultiLru {
        assert!(
            !sizes.is_empty()
                && sizes.len() < 255
                && sizes[0] > 0
                && sizes.windows(2).all(|w| w[0] < w[1])
                && *sizes.last().expect("not empty") < NIL as usize,
            "sizes must be positive, ascending and fewer than 255: {sizes:?}"
        );
        MultiLru {
            sizes: sizes.to_vec(),
            map: FxHashMap::default(),
            entries: Vec::new(),
            recency: List::EMPTY,
            last: vec![NIL; sizes.len()],
        }
    }

    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Puts entry `i` at the most recent end, in the smallest cache.
    fn push_front(&mut self, i: u32) {
        self.entries[i as usize].segment = 0;
        self.recency.push_newest(&mut self.entries, i);
    }

    /// Touches `block`; returns the smallest size index whose cache held it (a hit for that
    /// size and every larger one), `None` if no cache did.
    pub fn access(&mut self, block: u64) -> Option<usize> {
        if let Some(&i) = self.map.get(&block) {
            let s = self.entries[i as usize].segment as usize;
            if self.recency.newest == i {
                return Some(s);
            }
            // The last entry of every smaller cache is pushed out of it by one.
            for j in 0..s {
                let b = self.last[j];
                self.entries[b as usize].segment = j as u8 + 1;
                self.last[j] = self.entries[b as usize].links.newer;
            }
            if self.last[s] == i {
                self.last[s] = self.entries[i as usize].links.newer;
            }
            self.recency.unlink(&mut self.entries, i);
            self.push_front(i);
            for j in 0..s {
                if self.last[j] == NIL {
                    // A cache of one block: it now holds only this one.
                    self.last[j] = i;
                }
            }
            return Some(s);
        }
        let largest = *self.sizes.last().expect("sizes");
        let entry = Entry {
            block,
            links: Links::NONE,
            segment: 0,
        };
        // A full cache drops its least recent entry first and the new block takes its slot;
        // the marker of the largest cache, which pointed at it, is set again below.
        let i = if self.entries.len() == largest {
            let t = self.recency.oldest;
            self.recency.unlink(&mut self.entries, t);
            self.map.remove(&self.entries[t as usize].block);
            self.entries[t as usize] = entry;
            t
        } else {
            self.entries.push(entry);
            self.entries.len() as u32 - 1
        };
        self.map.insert(block, i);
        self.push_front(i);
        let len = self.map.len();
        for j in 0..self.sizes.len() {
            if len > self.sizes[j] {
                let b = self.last[j];
                self.entries[b as usize].segment = j as u8 + 1;
                self.last[j] = self.entries[b as usize].links.newer;
            } else if len == self.sizes[j] {
                self.last[j] = self.recency.oldest;
            }
        }
        None
    }

    /// Makes room for `blocks` more entries (never beyond the largest cache) at once rather
    /// than growing the table step by step.
    pub fn reserve(&mut self, blocks: usize) {
        let largest = *self.sizes.last().expect("sizes");
        let more = blocks.min(largest.saturating_sub(self.map.len()));
        self.map.reserve(more);
        self.entries.reserve(more);
    }
}

/// The three schemes' caches at every size of a grid in one pass: [`MultiLru`], or one [`Lru`]
/// per size when there is read-ahead.
pub struct MultiScheme {
    inner: Inner,
    /// Per size, the interval counts (as [`Scheme::intervals`]).
    pub intervals: Vec<Vec<Interval>>,
}

enum Inner {
    Stack(MultiLru),
    Each(Vec<Scheme<Lru>>),
}

impl MultiScheme {
    /// Caches of `sizes` blocks (ascending, positive); `readahead_bytes` as in [`Timeline`].
    pub fn new(sizes: &[usize], readahead_bytes: u64) -> MultiScheme {
        let inner = if readahead_bytes == 0 {
            Inner::Stack(MultiLru::new(sizes))
        } else {
            Inner::Each(
                sizes
                    .iter()
                    .map(|&c| Scheme::new(Lru::growing(c)))
                    .collect(),
            )
        };
        MultiScheme {
            inner,
            intervals: vec![Vec::new(); sizes.len()],
        }
    }

    /// Pre-loads `blocks`, oldest first, into every size's cache.
    pub fn preload(&mut self, blocks: &[u64]) {
        match &mut self.inner {
            Inner::Stack(m) => {
                m.reserve(blocks.len());
                for &b in blocks {
                    m.access(b);
                }
            }
            Inner::Each(each) => {
                for s in each {
                    s.preload(blocks.iter().copied());
                }
            }
        }
    }

    /// As [`Scheme::run`], at every size.
    pub fn run(&mut self, records: &[Record], timeline: Timeline) {
        match &mut self.inner {
            Inner::Each(each) => {
                for (k, s) in each.iter_mut().enumerate() {
                    s.run(records, timeline);
                    self.intervals[k] = s.intervals.clone();
                }
            }
            Inner::Stack(m) => stack_run(m, records, timeline, &mut self.intervals, |_, _| {}),
        }
    }
}

/// Drives `records` through the stack of every size, counting read hits per interval;
/// `on_miss(block, interval)` is told of every access no size held (`interval`: where a read
/// is counted, `None` for a write or a read before the timeline's start).
fn stack_run(
    m: &mut MultiLru,
    records: &[Record],
    timeline: Timeline,
    intervals: &mut [Vec<Interval>],
    mut on_miss: impl FnMut(u64, Option<usize>),
) {
    assert!(timeline.interval_ns > 0, "an interval must be positive");
    let n = m.sizes().len();
    m.reserve(
        records
            .iter()
            .map(|r| {
                let b = block_range(r.offset_bytes, r.length_bytes);
                (b.end - b.start) as usize
            })
            .sum(),
    );
    let mut hits = vec![0u64; n];
    for record in records {
        let blocks = block_range(record.offset_bytes, record.length_bytes);
        let count = blocks.end - blocks.start;
        let counted = (record.op == Op::Read && record.time_ns >= timeline.start_ns)
            .then(|| ((record.time_ns - timeline.start_ns) / timeline.interval_ns) as usize);
        hits.iter_mut().for_each(|h| *h = 0);
        for block in blocks {
            match m.access(block) {
                Some(s) => hits[s..].iter_mut().for_each(|h| *h += 1),
                None => on_miss(block, counted),
            }
        }
        let Some(i) = counted else { continue };
        for (k, series) in intervals.iter_mut().enumerate() {
            if series.len() <= i {
                series.resize(i + 1, Interval::default());
            }
            series[i].read_block_accesses += count;
            series[i].read_block_hits += hits[k];
        }
    }
}

/// A block met for the first time in a cold run.
#[derive(Clone, Copy)]
struct Touch {
    block: u64,
    /// Distinct blocks the run had met before it.
    distinct_before: u64,
    /// The interval the access is counted in; `u32::MAX` when it is not counted.
    interval: u32,
}

/// One cold run of LRU at every size (no read-ahead) from which the runs of any number of
/// pre-loaded caches over the same records follow exactly, without simulating them.
///
/// A pre-loaded LRU cache's stack is, at every moment, the blocks accessed since its start in
/// recency order — the cold run's stack — followed by the pre-loaded blocks not yet accessed,
/// in their pre-load order, cut at the cache's size. So an access hits the warmed cache exactly
/// when it hits the cold one, except on a block's first access: that hits when the block was
/// pre-loaded and its depth — the distinct blocks accessed so far plus the pre-loaded blocks
/// more recent than it and not yet accessed — is below the cache's size.
pub struct ColdRun {
    sizes: Vec<usize>,
    /// Per size, the cold cache's intervals.
    pub intervals: Vec<Vec<Interval>>,
    touches: Vec<Touch>,
}

impl ColdRun {
    /// Caches of `sizes` blocks (ascending, positive); `timeline.readahead_bytes` must be 0.
    pub fn new(sizes: &[usize], records: &[Record], timeline: Timeline) -> ColdRun {
        assert_eq!(
            timeline.readahead_bytes, 0,
            "read-ahead breaks the stack property"
        );
        let mut m = MultiLru::new(sizes);
        let mut intervals = vec![Vec::new(); sizes.len()];
        let mut seen = FxHashSet::default();
        let mut touches = Vec::new();
        stack_run(
            &mut m,
            records,
            timeline,
            &mut intervals,
            |block, counted| {
                let distinct_before = seen.len() as u64;
                if seen.insert(block) {
                    touches.push(Touch {
                        block,
                        distinct_before,
                        interval: counted.map_or(u32::MAX, |i| i as u32),
                    });
                }
            },
        );
        ColdRun {
            sizes: sizes.to_vec(),
            intervals,
            touches,
        }
    }

    /// Per size, the intervals of caches pre-loaded with `preload` (oldest first, as
    /// [`MultiScheme::preload`]) before the same records.
    pub fn warmed(&self, preload: &[u64]) -> Vec<Vec<Interval>> {
        // Each pre-loaded block's place in recency order: its last pre-load.
        let mut place: FxHashMap<u64, usize> = FxHashMap::default();
        place.reserve(preload.len());
        for (p, &b) in preload.iter().enumerate() {
            place.insert(b, p);
        }
        let mut waiting = Fenwick::new(preload.len());
        for &p in place.values() {
            waiting.add(p, 1);
        }
        let mut left = place.len() as u64;
        let mut out = self.intervals.clone();
        for t in &self.touches {
            let Some(&p) = place.get(&t.block) else {
                continue;
            };
            // Pre-loaded blocks more recent than this one and not yet accessed.
            let newer = left - waiting.prefix_sum(p + 1);
            waiting.add(p, -1);
            left -= 1;
            if t.interval == u32::MAX {
                continue;
            }
            let depth = t.distinct_before + newer;
            for (k, &size) in self.sizes.iter().enumerate() {
                if depth < size as u64 {
                    out[k][t.interval as usize].read_block_hits += 1;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::sim::BLOCK_BYTES;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Every access answers, for every size, exactly what a separate LRU of that size
        /// answers.
        #[test]
        fn multi_lru_matches_one_lru_per_size(
            sizes in proptest::collection::btree_set(1usize..40, 1..5),
            accesses in proptest::collection::vec(0u64..80, 0..600),
        ) {
            let sizes: Vec<usize> = sizes.into_iter().collect();
            let mut multi = MultiLru::new(&sizes);
            let mut each: Vec<Lru> = sizes.iter().map(|&c| Lru::new(c)).collect();
            for (n, &b) in accesses.iter().enumerate() {
                let got = multi.access(b);
                for (k, lru) in each.iter_mut().enumerate() {
                    let hit = lru.access(b);
                    prop_assert_eq!(hit, got.is_some_and(|s| s <= k), "access {} of block {} at size {}", n, b, sizes[k]);
                }
                prop_assert_eq!(multi.len(), each.last().unwrap().len());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Every pre-loaded run derived from the cold run equals the pre-loaded cache
        /// simulated: at every size, in every interval (pre-loads with repeats, longer than
        /// the caches, writes, reads before the start).
        #[test]
        fn warmed_runs_from_the_cold_run_equal_warmed_runs_simulated(
            sizes in proptest::collection::btree_set(1usize..30, 1..5),
            preload in proptest::collection::vec(0u64..60, 0..50),
            accesses in proptest::collection::vec((0u64..60, 1u64..4, any::<bool>()), 0..300),
        ) {
            let sizes: Vec<usize> = sizes.into_iter().collect();
            let records: Vec<Record> = accesses
                .iter()
                .enumerate()
                .map(|(t, &(block, blocks, read))| Record {
                    time_ns: t as i64,
                    volume: cordillera_trace::record::VolumeId(0),
                    op: if read { Op::Read } else { Op::Write },
                    offset_bytes: block * BLOCK_BYTES,
                    length_bytes: blocks * BLOCK_BYTES,
                    response_ns: None,
                })
                .collect();
            let timeline = Timeline { start_ns: 20, interval_ns: 25, readahead_bytes: 0 };
            let cold = ColdRun::new(&sizes, &records, timeline);
            let mut simulated = MultiScheme::new(&sizes, 0);
            simulated.run(&records, timeline);
            prop_assert_eq!(&cold.intervals, &simulated.intervals);
            let mut warmed = MultiScheme::new(&sizes, 0);
            warmed.preload(&preload);
            warmed.run(&records, timeline);
            prop_assert_eq!(cold.warmed(&preload), warmed.intervals);
        }
    }

    #[test]
    fn schemes_at_every_size_equal_separate_schemes() {
        let mut records = Vec::new();
        let mut x = 7u64;
        for t in 0..5000i64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            records.push(Record {
                time_ns: t * 1_000_000,
                volume: cordillera_trace::record::VolumeId(0),
                op: if x >> 62 == 0 { Op::Write } else { Op::Read },
                offset_bytes: ((x >> 20) % 300) * BLOCK_BYTES,
                length_bytes: BLOCK_BYTES * (1 + (x >> 50) % 3),
                response_ns: None,
            });
        }
        let timeline = Timeline {
            start_ns: 1_000_000_000,
            interval_ns: 500_000_000,
            readahead_bytes: 0,
        };
        let sizes = [10usize, 50, 120, 400];
        let preload: Vec<u64> = (0..60).collect();
        let mut multi = MultiScheme::new(&sizes, 0);
        multi.preload(&preload);
        multi.run(&records[..2500], timeline);
        multi.run(&records[2500..], timeline);
        for (k, &c) in sizes.iter().enumerate() {
            let mut one = Scheme::new(Lru::new(c));
            one.preload(preload.iter().copied());
            one.run(&records, timeline);
            assert_eq!(multi.intervals[k], one.intervals, "size {c}");
        }
    }
}
