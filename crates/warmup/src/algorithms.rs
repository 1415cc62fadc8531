//! Warm-up algorithms (Bonfire §4.2): which regions of the previous 24 hours to pre-load into a
//! new cache. A region is `region_bytes` of the volume (4 KiB or 1 MiB in the paper); a request
//! touches every region it overlaps; `k` is the warm-up size ÷ the region size.
//!
//! - **Last-K**: the k most recently accessed regions (hourly reaccess; imitates an LRU state).
//! - **First-K**: the k first regions accessed in the window (daily reaccess: the same period
//!   of the previous day).
//! - **Top-K**: the k most frequently accessed regions (ties: the more recent first).
//! - **Random-K**: k regions drawn uniformly, without repetition, from those accessed (seeded).
//!
//! [`select`] returns blocks in pre-load order: into an LRU cache, the last one loaded ends
//! most recent, so each algorithm loads its most valued region last — Last-K the most recent,
//! First-K the very first, Top-K the most frequent.

use cordillera_trace::record::Record;
use cordillera_types::rng::SimRng;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::sim::BLOCK_BYTES;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    LastK,
    FirstK,
    TopK,
    RandomK,
}

pub const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::LastK,
    Algorithm::FirstK,
    Algorithm::TopK,
    Algorithm::RandomK,
];

impl std::str::FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Algorithm, String> {
        match s {
            "last-k" => Ok(Algorithm::LastK),
            "first-k" => Ok(Algorithm::FirstK),
            "top-k" => Ok(Algorithm::TopK),
            "random-k" => Ok(Algorithm::RandomK),
            other => Err(format!(
                "unknown warm-up algorithm {other:?} (last-k, first-k, top-k, random-k)"
            )),
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Algorithm::LastK => "last-k",
            Algorithm::FirstK => "first-k",
            Algorithm::TopK => "top-k",
            Algorithm::RandomK => "random-k",
        })
    }
}

/// The regions a request touches.
fn regions(record: &Record, region_bytes: u64) -> std::ops::Range<u64> {
    if record.length_bytes == 0 {
        return 0..0;
    }
    let first = record.offset_bytes / region_bytes;
    let last = record.offset_bytes.saturating_add(record.length_bytes - 1) / region_bytes;
    first..last + 1
}

/// The regions `algorithm` chooses from `history` (in trace order), least valued first.
pub fn select_regions(
    history: &[Record],
    algorithm: Algorithm,
    region_bytes: u64,
    k: usize,
    seed: u64,
) -> Vec<u64> {
    assert!(
        region_bytes > 0 && region_bytes.is_multiple_of(BLOCK_BYTES),
        "whole blocks"
    );
    if k == 0 {
        return Vec::new();
    }
    let mut chosen: Vec<u64> = Vec::with_capacity(k);
    match algorithm {
        Algorithm::LastK => {
            let mut seen = FxHashSet::default();
            'scan: for r in history.iter().rev() {
                for region in regions(r, region_bytes).rev() {
                    if seen.insert(region) {
                        chosen.push(region);
                        if chosen.len() == k {
                            break 'scan;
                        }
                    }
                }
            }
            chosen.reverse(); // the most recent last
        }
        Algorithm::FirstK => {
            let mut seen = FxHashSet::default();
            'scan: for r in history {
                for region in regions(r, region_bytes) {
                    if seen.insert(region) {
                        chosen.push(region);
                        if chosen.len() == k {
                            break 'scan;
                        }
                    }
                }
            }
            chosen.reverse(); // the very first last
        }
        Algorithm::TopK => {
            // region → (accesses, last access position)
            let mut counts: FxHashMap<u64, (u64, usize)> = FxHashMap::default();
            for (at, r) in history.iter().enumerate() {
                for region in regions(r, region_bytes) {
                    let e = counts.entry(region).or_insert((0, 0));
                    e.0 += 1;
                    e.1 = at;
                }
            }
            let mut all: Vec<(u64, (u64, usize))> = counts.into_iter().collect();
            // Most valued first: more accesses, then more recent, then the lower region.
            all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            chosen.extend(all.iter().take(k).map(|(region, _)| *region));
            chosen.reverse();
        }
        Algorithm::RandomK => {
            let mut distinct: Vec<u64> = Vec::new();
            let mut seen = FxHashSet::default();
            for r in history {
                for region in regions(r, region_bytes) {
                    if seen.insert(region) {
                        distinct.push(region);
                    }
                }
            }
            // A partial Fisher–Yates shuffle: the first k are a uniform sample.
            let mut rng = SimRng::new(seed, 0xb0f1);
            let k = k.min(distinct.len());
            for i in 0..k {
                let j = i + rng.below((distinct.len() - i) as u64) as usize;
                distinct.swap(i, j);
            }
            chosen.extend_from_slice(&distinct[..k]);
        }
    }
    chosen
}

/// The blocks of the chosen regions, in pre-load order.
pub fn select(
    history: &[Record],
    algorithm: Algorithm,
    region_bytes: u64,
    warmup_bytes: u64,
    seed: u64,
) -> Vec<u64> {
    let k = (warmup_bytes / region_bytes) as usize;
    let per_region = region_bytes / BLOCK_BYTES;
    select_regions(history, algorithm, region_bytes, k, seed)
        .into_iter()
        .flat_map(|region| region * per_region..(region + 1) * per_region)
        .collect()
}

/// Distinct 4 KiB blocks the records touch (the working set).
pub fn working_set_blocks<'a>(records: impl IntoIterator<Item = &'a Record>) -> u64 {
    let mut seen = FxHashSet::default();
    for r in records {
        for b in crate::sim::block_range(r.offset_bytes, r.length_bytes) {
            seen.insert(b);
        }
    }
    seen.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordillera_trace::record::VolumeId;
    use cordillera_types::Op;

    fn at(block: u64) -> Record {
        Record {
            time_ns: 0,
            volume: VolumeId(0),
            op: Op::Read,
            offset_bytes: block * 4096,
            length_bytes: 4096,
            response_ns: None,
        }
    }

    #[test]
    fn each_algorithm_chooses_as_the_paper_says() {
        // Accesses: 1 2 3 2 4 2 5 3
        let h: Vec<Record> = [1, 2, 3, 2, 4, 2, 5, 3].iter().map(|&b| at(b)).collect();
        assert_eq!(
            select_regions(&h, Algorithm::LastK, 4096, 3, 0),
            vec![2, 5, 3]
        );
        assert_eq!(
            select_regions(&h, Algorithm::FirstK, 4096, 3, 0),
            vec![3, 2, 1]
        );
        // 2 three times, 3 twice; then 5, 4, 1 once each, 5 the most recent.
        assert_eq!(
            select_regions(&h, Algorithm::TopK, 4096, 3, 0),
            vec![5, 3, 2]
        );
        let random = select_regions(&h, Algorithm::RandomK, 4096, 3, 7);
        let distinct: FxHashSet<u64> = random.iter().copied().collect();
        assert_eq!(distinct.len(), 3);
        assert!(random.iter().all(|b| [1, 2, 3, 4, 5].contains(b)));
        assert_eq!(
            random,
            select_regions(&h, Algorithm::RandomK, 4096, 3, 7),
            "seeded"
        );
        // More than there are: all of them.
        assert_eq!(select_regions(&h, Algorithm::LastK, 4096, 99, 0).len(), 5);
        assert_eq!(select_regions(&h, Algorithm::RandomK, 4096, 99, 0).len(), 5);
    }

    #[test]
    fn regions_expand_to_their_blocks() {
        // Blocks 300 and 600 lie in 1 MiB regions 1 and 2 (256 blocks each).
        let h = vec![at(300), at(600)];
        let blocks = select(&h, Algorithm::LastK, 1 << 20, 2 << 20, 0);
        assert_eq!(blocks.len(), 512);
        assert_eq!(blocks[0], 256);
        assert_eq!(*blocks.last().unwrap(), 767);
        // A warm-up size under one region chooses nothing.
        assert!(select(&h, Algorithm::LastK, 1 << 20, 4096, 0).is_empty());
        assert_eq!(working_set_blocks(&h), 2);
    }

    #[test]
    fn names_parse() {
        for a in ALGORITHMS {
            assert_eq!(a.to_string().parse::<Algorithm>().unwrap(), a);
        }
        assert!("lru-k".parse::<Algorithm>().is_err());
    }
}
