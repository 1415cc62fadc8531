//! A client's index of valid ranges: ordered, non-overlapping byte ranges, each naming the
//! version that is valid there and the record holding it. Updates split ranges as they overlap
//! (Everest Figure 4); memory is linear in ranges, not in blocks.
//!
//! Versions, not arrival order, decide: a write never displaces a higher version, and a delete
//! removes only versions at or below its own.

use cordillera_types::rangemap::RangeMap;

/// One valid range: bytes `[start, end)` hold `version`, stored in record `record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub end: u64,
    pub version: u64,
    pub record: u64,
}

/// Bytes a record gained or lost in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveDelta {
    pub record: u64,
    pub bytes: i64,
}

#[derive(Clone, Debug, Default)]
pub struct ClientIndex {
    /// (version, record) of every valid range.
    ranges: RangeMap<(u64, u64)>,
}

impl ClientIndex {
    pub fn new() -> ClientIndex {
        ClientIndex::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Every valid range, in order.
    pub fn ranges(&self) -> impl Iterator<Item = Range> + '_ {
        self.ranges
            .iter()
            .map(|(start, end, &(version, record))| Range {
                start,
                end,
                version,
                record,
            })
    }

    /// The valid ranges within `[start, end)`, clipped to it, in order (gaps are not stored).
    pub fn lookup(&self, start: u64, end: u64) -> Vec<Range> {
        self.ranges
            .lookup(start, end)
            .into_iter()
            .filter_map(|p| {
                p.value.map(|&(version, record)| Range {
                    start: p.start,
                    end: p.end,
                    version,
                    record,
                })
            })
            .collect()
    }

    /// Records `[start, end)` = `version` in `record`. Returns how many bytes each record gained
    /// or lost (the new record gains what it wins; displaced records lose it).
    pub fn write(&mut self, start: u64, end: u64, version: u64, record: u64) -> Vec<LiveDelta> {
        let mut deltas = Vec::new();
        let mut gained = 0;
        self.ranges.update(start, end, |lo, hi, old| match old {
            // A higher version keeps its bytes.
            Some(&(v, r)) if v > version => Some((v, r)),
            old => {
                if let Some(&(_, r)) = old {
                    deltas.push(LiveDelta {
                        record: r,
                        bytes: -((hi - lo) as i64),
                    });
                }
                gained += hi - lo;
                Some((version, record))
            }
        });
        if gained > 0 {
            deltas.push(LiveDelta {
                record,
                bytes: gained as i64,
            });
        }
        deltas
    }

    /// Removes every version ≤ `version` within `[start, end)`; returns the bytes records lost.
    pub fn delete(&mut self, start: u64, end: u64, version: u64) -> Vec<LiveDelta> {
        let mut deltas = Vec::new();
        self.ranges.update(start, end, |lo, hi, old| match old {
            Some(&(v, r)) if v <= version => {
                deltas.push(LiveDelta {
                    record: r,
                    bytes: -((hi - lo) as i64),
                });
                None
            }
            old => old.copied(),
        });
        deltas
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    #[test]
    fn overlapping_writes_split_ranges_by_version() {
        let mut ix = ClientIndex::new();
        ix.write(0, 100, 1, 10);
        let d = ix.write(40, 60, 2, 11);
        assert_eq!(
            d,
            vec![
                LiveDelta {
                    record: 10,
                    bytes: -20
                },
                LiveDelta {
                    record: 11,
                    bytes: 20
                }
            ]
        );
        let got: Vec<_> = ix.ranges().map(|r| (r.start, r.end, r.version)).collect();
        assert_eq!(got, vec![(0, 40, 1), (40, 60, 2), (60, 100, 1)]);
        // An older version arriving late only fills what no newer version holds.
        let d = ix.write(30, 70, 1, 12);
        assert_eq!(
            ix.lookup(0, 100)
                .iter()
                .map(|r| (r.start, r.end, r.record))
                .collect::<Vec<_>>(),
            vec![
                (0, 30, 10),
                (30, 40, 12),
                (40, 60, 11),
                (60, 70, 12),
                (70, 100, 10)
            ]
        );
        assert!(d.contains(&LiveDelta {
            record: 12,
            bytes: 20
        }));
        // A delete removes versions up to its own.
        let d = ix.delete(0, 100, 1);
        assert_eq!(
            ix.ranges().map(|r| (r.start, r.end)).collect::<Vec<_>>(),
            vec![(40, 60)]
        );
        assert_eq!(d.iter().map(|d| d.bytes).sum::<i64>(), -80);
        assert_eq!(
            ix.lookup(50, 55),
            vec![Range {
                start: 50,
                end: 55,
                version: 2,
                record: 11
            }]
        );
    }

    proptest! {
        /// Against a per-byte model: every byte holds the highest version written and not
        /// deleted, and live-byte accounting matches the bytes each record holds.
        #[test]
        fn matches_a_per_byte_model(ops in prop::collection::vec((0u64..64, 1u64..32, 0u64..8, any::<bool>()), 1..60)) {
            let mut ix = ClientIndex::new();
            let mut model: FxHashMap<u64, (u64, u64)> = FxHashMap::default(); // byte -> (version, record)
            let mut live: FxHashMap<u64, i64> = FxHashMap::default();
            for (i, (start, len, version, is_delete)) in ops.into_iter().enumerate() {
                let (end, record) = (start + len, i as u64);
                let deltas = if is_delete {
                    for b in start..end {
                        if model.get(&b).is_some_and(|(v, _)| *v <= version) {
                            model.remove(&b);
                        }
                    }
                    ix.delete(start, end, version)
                } else {
                    for b in start..end {
                        if model.get(&b).is_none_or(|(v, _)| *v <= version) {
                            model.insert(b, (version, record));
                        }
                    }
                    ix.write(start, end, version, record)
                };
                for d in deltas {
                    *live.entry(d.record).or_default() += d.bytes;
                }
            }
            let mut from_index: FxHashMap<u64, (u64, u64)> = FxHashMap::default();
            for r in ix.ranges() {
                for b in r.start..r.end {
                    from_index.insert(b, (r.version, r.record));
                }
            }
            prop_assert_eq!(&from_index, &model);
            let mut held: FxHashMap<u64, i64> = FxHashMap::default();
            for (_, record) in model.values() {
                *held.entry(*record).or_default() += 1;
            }
            live.retain(|_, v| *v != 0);
            prop_assert_eq!(live, held);
        }
    }
}
