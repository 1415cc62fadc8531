//! The miss-ratio curve of a trace: the read miss ratio of an LRU cache of every size, from
//! one pass of exact stack distances ([`cordillera_trace::reuse`]) — what a cache simulator
//! gives one size at a time (libCacheSim's `cachesim` with several sizes), here for all at once.
//!
//! The cache is the one `warmup simulate --policy lru` models: 4 KiB blocks, every request's
//! blocks accessed in order, reads and writes alike (writes allocate), hits counted on reads.
//! An access hits in a cache of `C` blocks when fewer than `C` distinct other blocks were
//! accessed since its block's previous access. Exact: no sampling, so no sampling error; the
//! first access to a block is a miss at every size. Blocks of different volumes are different
//! blocks. Memory: the working set (one slot per distinct block), plus one counter per distinct
//! stack distance seen.

use cordillera_trace::reuse::ReuseDistance;
use cordillera_trace::Record;
use cordillera_types::Op;
use serde::Serialize;

const BLOCK: u64 = 4096;

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

/// Builds the curve one record at a time.
#[derive(Default)]
pub struct MrcBuilder {
    reuse: ReuseDistance,
    /// Read accesses by stack distance (distinct blocks in between).
    read_distances: Vec<u64>,
    read_accesses: u64,
    cold_reads: u64,
}

impl MrcBuilder {
    pub fn new() -> MrcBuilder {
        MrcBuilder::default()
    }

    pub fn add(&mut self, r: &Record) {
        if r.length_bytes == 0 {
            return;
        }
        let first = r.offset_bytes / BLOCK;
        let last = r.offset_bytes.saturating_add(r.length_bytes - 1) / BLOCK;
        // Volumes apart: block numbers stay below 2^38 (1 PiB), the volume above.
        let volume = (r.volume.0 as u64) << 40;
        for block in first..=last {
            let distance = self.reuse.access(volume | (block & ((1 << 40) - 1)));
            if r.op != Op::Read {
                continue;
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

    /// Read hits of an LRU cache of `blocks` blocks.
    fn hits(prefix: &[u64], blocks: u64) -> u64 {
        // prefix[i] = accesses with distance < i.
        prefix[(blocks as usize).min(prefix.len() - 1)]
    }

    pub fn finish(self) -> MissRatioCurve {
        let mut prefix = Vec::with_capacity(self.read_distances.len() + 1);
        prefix.push(0u64);
        for n in &self.read_distances {
            prefix.push(prefix.last().copied().unwrap_or(0) + n);
        }
        let working_set = self.reuse.distinct_blocks() * BLOCK;
        let mut sizes = Vec::new();
        let mut size = 1u64 << 20;
        while size < working_set {
            sizes.push(size);
            size *= 2;
        }
        sizes.push(working_set.max(BLOCK));
        let points = sizes
            .into_iter()
            .map(|bytes| {
                let hits = Self::hits(&prefix, bytes / BLOCK);
                MrcPoint {
                    cache_bytes: bytes,
                    read_hits: hits,
                    read_miss_ratio: if self.read_accesses == 0 {
                        0.0
                    } else {
                        1.0 - hits as f64 / self.read_accesses as f64
                    },
                }
            })
            .collect();
        MissRatioCurve {
            method: "exact LRU stack distances (one pass, no sampling)",
            read_block_accesses: self.read_accesses,
            cold_read_misses: self.cold_reads,
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
}
