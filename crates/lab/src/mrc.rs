//! The miss-ratio curve of a trace: the read miss ratio of an LRU cache of every size, from
//! one pass of exact stack distances ([`cordillera_trace::reuse`]) — what a cache simulator
//! gives one size at a time (libCacheSim's `cachesim` with several sizes), here for all at once.
//!
//! The cache is the one `warmup simulate --policy lru` models: 4 KiB blocks, every request's
//! blocks accessed in order, reads and writes alike (writes allocate), hits counted on reads.
//! An access hits in a cache of `C` blocks when fewer than `C` distinct other blocks were
//! accessed since its block's previous access; the first access to a block is a miss at every
//! size. Blocks of different volumes are different blocks.
//!
//! Exact while the working set is at most [`EXACT_BLOCKS_MAX`] blocks (4 GiB): no sampling, no
//! error. Past it, the curve is SHARDS's (Waldspurger et al., FAST'15): only blocks whose hash
//! falls in a fixed 1/[`SHARDS_RATE_INVERSE`] of the hash space are tracked — sampled from the
//! trace's start, beside the exact count — and their stack distances scaled by the rate; the
//! exact tracking is dropped. Its error against the exact curve is measured by a test (stated in
//! docs/USAGE.md) and named in the report. Memory: the working set up to the exact bound, then
//! 1/32 of it.

use cordillera_trace::reuse::ReuseDistance;
use cordillera_trace::Record;
use cordillera_types::Op;
use serde::Serialize;

const BLOCK: u64 = 4096;
/// Past this working set, in blocks, the curve is sampled.
pub const EXACT_BLOCKS_MAX: u64 = 1 << 20;
/// SHARDS's sampling rate is one block in this many.
pub const SHARDS_RATE_INVERSE: u64 = 32;

/// One point of the curve.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MrcPoint {
    pub cache_bytes: u64,
    /// Read block accesses that hit.
    pub read_hits: u64,
    pub read_miss_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MissRatioCurve {
    pub method: &'static str,
    pub read_block_accesses: u64,
    /// First accesses to their block: misses at every size.
    pub cold_read_misses: u64,
    pub working_set_bytes: u64,
    /// Sizes from 1 MiB doubling to the working set, and the working set itself.
    pub points: Vec<MrcPoint>,
}

/// Stack distances of the blocks tracked, at one sampling rate.
#[derive(Default)]
struct Distances {
    reuse: ReuseDistance,
    /// Read accesses by (unscaled) stack distance.
    read_distances: Vec<u64>,
    read_accesses: u64,
    cold_reads: u64,
}

impl Distances {
    fn access(&mut self, key: u64, read: bool) {
        let distance = self.reuse.access(key);
        if !read {
            return;
        }
        self.read_accesses += 1;
        match distance {
            None => self.cold_reads += 1,
            Some(d) => {
                let d = d as usize;
                if self.read_distances.len() <= d {
                    self.read_distances.resize(d + 1, 0);
                }
                self.read_distances[d] += 1;
            }
        }
    }
}

/// Builds the curve one record at a time.
pub struct MrcBuilder {
    /// Every block, until the working set passes `exact_limit`.
    exact: Option<Distances>,
    exact_limit: u64,
    /// One block in [`SHARDS_RATE_INVERSE`], by hash.
    sampled: Distances,
    /// Every read block access (the exact count, whatever is tracked).
    read_accesses: u64,
}

impl Default for MrcBuilder {
    fn default() -> MrcBuilder {
        MrcBuilder::with_exact_limit(EXACT_BLOCKS_MAX)
    }
}

/// A 64-bit mix of the key (SplitMix64's finalizer): the sampling decision.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl MrcBuilder {
    pub fn new() -> MrcBuilder {
        MrcBuilder::default()
    }

    /// Exact up to `blocks` of working set (0: sampled from the start).
    pub fn with_exact_limit(blocks: u64) -> MrcBuilder {
        MrcBuilder {
            exact: (blocks > 0).then(Distances::default),
            exact_limit: blocks,
            sampled: Distances::default(),
            read_accesses: 0,
        }
    }

    pub fn add(&mut self, r: &Record) {
        if r.length_bytes == 0 {
            return;
        }
        let first = r.offset_bytes / BLOCK;
        let last = r.offset_bytes.saturating_add(r.length_bytes - 1) / BLOCK;
        // Volumes apart: block numbers stay below 2^38 (1 PiB), the volume above.
        let volume = (r.volume.0 as u64) << 40;
        let read = r.op == Op::Read;
        for block in first..=last {
            let key = volume | (block & ((1 << 40) - 1));
            self.read_accesses += read as u64;
            if let Some(exact) = self.exact.as_mut() {
                exact.access(key, read);
            }
            if mix(key).is_multiple_of(SHARDS_RATE_INVERSE) {
                self.sampled.access(key, read);
            }
        }
        if self
            .exact
            .as_ref()
            .is_some_and(|e| e.reuse.distinct_blocks() > self.exact_limit)
        {
            self.exact = None;
        }
    }

    /// Read hits of an LRU cache of `blocks` blocks.
    fn hits(prefix: &[u64], blocks: u64) -> u64 {
        // prefix[i] = accesses with distance < i.
        prefix[(blocks as usize).min(prefix.len() - 1)]
    }

    pub fn finish(self) -> MissRatioCurve {
        let (d, scale, method) = match self.exact {
            Some(exact) => (exact, 1, "exact LRU stack distances (one pass, no sampling)"),
            None => (
                self.sampled,
                SHARDS_RATE_INVERSE,
                "SHARDS: stack distances of 1 block in 32 (by hash), scaled (the working set passed 4 GiB)",
            ),
        };
        // prefix[i]: sampled read accesses with an unscaled distance below i.
        let mut prefix = Vec::with_capacity(d.read_distances.len() + 1);
        prefix.push(0u64);
        for n in &d.read_distances {
            prefix.push(prefix.last().copied().unwrap_or(0) + n);
        }
        let working_set = d.reuse.distinct_blocks() * scale * BLOCK;
        let mut sizes = Vec::new();
        let mut size = 1u64 << 20;
        while size < working_set {
            sizes.push(size);
            size *= 2;
        }
        sizes.push(working_set.max(BLOCK));
        let sampled_reads = d.read_accesses.max(1) as f64;
        let points = sizes
            .into_iter()
            .map(|bytes| {
                // A cache of C blocks holds the sampled blocks within C/rate of them.
                let hits = Self::hits(&prefix, bytes / BLOCK / scale);
                let hit_ratio = hits as f64 / sampled_reads;
                MrcPoint {
                    cache_bytes: bytes,
                    read_hits: (hit_ratio * self.read_accesses as f64).round() as u64,
                    read_miss_ratio: if d.read_accesses == 0 {
                        0.0
                    } else {
                        1.0 - hit_ratio
                    },
                }
            })
            .collect();
        MissRatioCurve {
            method,
            read_block_accesses: self.read_accesses,
            cold_read_misses: (d.cold_reads as f64 / sampled_reads * self.read_accesses as f64)
                .round() as u64,
            working_set_bytes: working_set,
            points,
        }
    }
}

impl MissRatioCurve {
    /// Read hits at any size (exact between the points too: the curve is a step function of
    /// the stack distances, kept only at the points here).
    pub fn point(&self, cache_bytes: u64) -> Option<&MrcPoint> {
        self.points.iter().find(|p| p.cache_bytes == cache_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::VolumeId;
    use cordillera_warmup::cache::Lru;
    use cordillera_warmup::sim::simulate;

    #[test]
    fn the_curve_equals_the_cache_simulator_at_every_size() {
        let mut rng = cordillera_types::SplitMix64(7);
        let records: Vec<Record> = (0..40_000)
            .map(|i| {
                let hot = !rng.next_u64().is_multiple_of(4);
                let block = if hot {
                    rng.next_u64() % 300
                } else {
                    rng.next_u64() % 20_000
                };
                Record {
                    time_ns: i,
                    volume: VolumeId(0),
                    op: if rng.next_u64().is_multiple_of(3) {
                        Op::Write
                    } else {
                        Op::Read
                    },
                    offset_bytes: block * 4096 + (rng.next_u64() % 2) * 2048,
                    length_bytes: 4096 * (1 + rng.next_u64() % 3),
                    response_ns: None,
                }
            })
            .collect();
        let mut b = MrcBuilder::new();
        records.iter().for_each(|r| b.add(r));
        let curve = b.finish();
        assert!(curve.points.len() >= 5, "{curve:?}");
        for p in &curve.points {
            let mut lru = Lru::new((p.cache_bytes / 4096) as usize);
            let counts = simulate(&mut lru, records.iter().copied());
            assert_eq!(
                p.read_hits, counts.read_block_hits,
                "{} bytes",
                p.cache_bytes
            );
            assert_eq!(curve.read_block_accesses, counts.read_block_accesses);
        }
        // Misses fall as the cache grows; at the working set only cold misses remain.
        for w in curve.points.windows(2) {
            assert!(w[1].read_miss_ratio <= w[0].read_miss_ratio);
        }
        let last = curve.points.last().unwrap();
        assert_eq!(
            curve.read_block_accesses - last.read_hits,
            curve.cold_read_misses
        );
    }

    /// SHARDS against the exact curve on the same trace: the largest difference in miss ratio
    /// over the sizes, printed and bounded.
    #[test]
    fn the_sampled_curve_is_within_its_stated_error_of_the_exact_one() {
        let mut rng = cordillera_types::SplitMix64(11);
        let records: Vec<Record> = (0..400_000)
            .map(|i| {
                // A hot set, a warm set and a long cold tail.
                let pick = rng.next_u64() % 100;
                let block = match pick {
                    0..=59 => rng.next_u64() % 20_000,
                    60..=89 => 20_000 + rng.next_u64() % 200_000,
                    _ => 220_000 + rng.next_u64() % 2_000_000,
                };
                Record {
                    time_ns: i,
                    volume: VolumeId((block % 3) as u32),
                    op: if rng.next_u64().is_multiple_of(4) {
                        Op::Write
                    } else {
                        Op::Read
                    },
                    offset_bytes: block * 4096,
                    length_bytes: 4096 * (1 + rng.next_u64() % 2),
                    response_ns: None,
                }
            })
            .collect();
        let (mut exact, mut sampled) = (MrcBuilder::new(), MrcBuilder::with_exact_limit(0));
        for r in &records {
            exact.add(r);
            sampled.add(r);
        }
        let (exact, sampled) = (exact.finish(), sampled.finish());
        assert!(exact.method.starts_with("exact") && sampled.method.starts_with("SHARDS"));
        assert_eq!(exact.read_block_accesses, sampled.read_block_accesses);
        let mut worst: f64 = 0.0;
        let mut compared = 0;
        for p in &exact.points {
            if let Some(q) = sampled
                .points
                .iter()
                .find(|q| q.cache_bytes == p.cache_bytes)
            {
                worst = worst.max((p.read_miss_ratio - q.read_miss_ratio).abs());
                compared += 1;
            }
        }
        eprintln!(
            "SHARDS at 1/{SHARDS_RATE_INVERSE}: largest miss-ratio difference from exact {worst:.4} over {compared} sizes"
        );
        assert!(compared >= 8, "{compared}");
        assert!(worst <= 0.02, "{worst}");
    }
}
