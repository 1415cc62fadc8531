//! An ordered map of non-overlapping byte ranges to values (Everest §3.2.1, Figure 4): what a
//! store keeps per client (the version valid there and the record holding it) and what an
//! off-loading client keeps per volume (the version and the stores holding it).
//!
//! Updates may overlap existing ranges arbitrarily: they split ranges at their edges and apply a
//! caller's rule to every piece, gaps included. Adjacent ranges with equal values are merged, so
//! memory is linear in the number of distinct ranges, never in blocks.

use std::collections::BTreeMap;

/// One piece of a lookup: bytes `[start, end)` and the value there (`None` for a gap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<V> {
    pub start: u64,
    pub end: u64,
    pub value: Option<V>,
}

/// `(start, end, value)`.
type Span<V> = (u64, u64, V);

#[derive(Clone, Debug)]
pub struct RangeMap<V> {
    /// start → (end, value); ranges are non-empty and do not overlap.
    ranges: BTreeMap<u64, (u64, V)>,
    /// Working space of `update`, kept to spare an allocation per call.
    scratch: (Vec<Span<V>>, Vec<Span<V>>),
}

impl<V> Default for RangeMap<V> {
    fn default() -> Self {
        RangeMap {
            ranges: BTreeMap::new(),
            scratch: (Vec::new(), Vec::new()),
        }
    }
}

impl<V: Clone + PartialEq> RangeMap<V> {
    pub fn new() -> RangeMap<V> {
        RangeMap::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of stored ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Every range, in order: `(start, end, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &V)> + '_ {
        self.ranges.iter().map(|(s, (e, v))| (*s, *e, v))
    }

    /// The stored ranges that overlap `[start, end)`, unclipped, from the last to the first
    /// (one search of the tree).
    fn overlapping_rev(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, &V)> + '_ {
        let upper = if start < end { end } else { 0 };
        self.ranges
            .range(..upper)
            .rev()
            .take_while(move |(_, (e, _))| *e > start)
            .map(|(s, (e, v))| (*s, *e, v))
    }

    /// Whether any stored range overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.overlapping_rev(start, end).next().is_some()
    }

    /// `[start, end)` cut into stored pieces and gaps, clipped to it, in order.
    pub fn lookup(&self, start: u64, end: u64) -> Vec<Piece<&V>> {
        let mut out = Vec::with_capacity(4);
        if start >= end {
            return out;
        }
        // Built from the end backwards (one search), then put in order.
        let mut at = end;
        for (s, e, v) in self.overlapping_rev(start, end) {
            let (lo, hi) = (s.max(start), e.min(end));
            if hi < at {
                out.push(Piece {
                    start: hi,
                    end: at,
                    value: None,
                });
            }
            out.push(Piece {
                start: lo,
                end: hi,
                value: Some(v),
            });
            at = lo;
        }
        if at > start {
            out.push(Piece {
                start,
                end: at,
                value: None,
            });
        }
        out.reverse();
        out
    }

    /// Replaces every piece of `[start, end)` — stored ranges clipped to it, and the gaps
    /// between them — by what `rule(piece_start, piece_end, old_value)` returns (`None` leaves
    /// or makes a gap). Parts of ranges outside `[start, end)` keep their values.
    ///
    /// One search of the tree finds every range touching `[start, end]` (the overlapping ones
    /// and the neighbours that may merge); only entries that change are written back.
    pub fn update(
        &mut self,
        start: u64,
        end: u64,
        mut rule: impl FnMut(u64, u64, Option<&V>) -> Option<V>,
    ) {
        if start >= end {
            return;
        }
        let (mut old, mut new) = std::mem::take(&mut self.scratch);
        old.clear();
        new.clear();
        for (s, (e, v)) in self.ranges.range(..=end).rev() {
            if *e < start {
                break;
            }
            old.push((*s, *e, v.clone()));
            if *s < start {
                break;
            }
        }
        old.reverse();
        // The new layout of everything the old ranges and [start, end) cover, coalesced.
        let mut push = |s: u64, e: u64, v: V| {
            if let Some(last) = new.last_mut() {
                if last.1 == s && last.2 == v {
                    last.1 = e;
                    return;
                }
            }
            new.push((s, e, v));
        };
        let mut at = start;
        for (s, e, v) in &old {
            let (s, e) = (*s, *e);
            if s < start {
                push(s, e.min(start), v.clone());
            }
            let (lo, hi) = (s.max(start), e.min(end));
            if lo < hi {
                if lo > at {
                    if let Some(n) = rule(at, lo, None) {
                        push(at, lo, n);
                    }
                }
                if let Some(n) = rule(lo, hi, Some(v)) {
                    push(lo, hi, n);
                }
                at = hi;
            }
            if e > end {
                if at < end {
                    if let Some(n) = rule(at, end, None) {
                        push(at, end, n);
                    }
                    at = end;
                }
                push(s.max(end), e, v.clone());
            }
        }
        if at < end {
            if let Some(n) = rule(at, end, None) {
                push(at, end, n);
            }
        }
        // Write back what changed: a new entry at an old start replaces it in place.
        for (s, _, _) in &old {
            if !new.iter().any(|(ns, _, _)| ns == s) {
                self.ranges.remove(s);
            }
        }
        for (s, e, v) in new.drain(..) {
            if old
                .iter()
                .any(|(os, oe, ov)| *os == s && *oe == e && *ov == v)
            {
                continue;
            }
            self.ranges.insert(s, (e, v));
        }
        old.clear();
        self.scratch = (old, new);
        self.debug_check();
    }

    /// Sets `[start, end)` to `value`.
    pub fn insert(&mut self, start: u64, end: u64, value: V) {
        self.update(start, end, |_, _, _| Some(value.clone()));
    }

    /// Clears `[start, end)`.
    pub fn remove(&mut self, start: u64, end: u64) {
        self.update(start, end, |_, _, _| None);
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions) && self.ranges.len() < 4096 {
            let mut last: Option<(u64, &V)> = None;
            for (s, (e, v)) in &self.ranges {
                assert!(s < e, "empty range");
                if let Some((last_end, last_v)) = last {
                    assert!(*s >= last_end, "overlapping ranges");
                    assert!(
                        !(*s == last_end && last_v == v),
                        "unmerged equal neighbours"
                    );
                }
                last = Some((*e, v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn figure_4_overlapping_writes_split_ranges() {
        // Everest Figure 4's shape: a range, then a newer write inside it, then one across its end.
        let mut m = RangeMap::new();
        m.insert(0, 100, ("store A", 1));
        m.insert(40, 60, ("store B", 2));
        m.insert(90, 150, ("store A", 3));
        let got: Vec<_> = m.iter().map(|(s, e, v)| (s, e, *v)).collect();
        assert_eq!(
            got,
            vec![
                (0, 40, ("store A", 1)),
                (40, 60, ("store B", 2)),
                (60, 90, ("store A", 1)),
                (90, 150, ("store A", 3)),
            ]
        );
        let pieces = m.lookup(30, 200);
        assert_eq!(pieces.len(), 5);
        assert_eq!(
            pieces[0],
            Piece {
                start: 30,
                end: 40,
                value: Some(&("store A", 1))
            }
        );
        assert_eq!(
            pieces[4],
            Piece {
                start: 150,
                end: 200,
                value: None
            }
        );
    }

    #[test]
    fn equal_neighbours_merge_and_removal_splits() {
        let mut m = RangeMap::new();
        m.insert(0, 10, 7);
        m.insert(20, 30, 7);
        m.insert(10, 20, 7);
        assert_eq!(m.len(), 1);
        m.remove(5, 25);
        let got: Vec<_> = m.iter().map(|(s, e, v)| (s, e, *v)).collect();
        assert_eq!(got, vec![(0, 5, 7), (25, 30, 7)]);
        assert!(m.overlaps(0, 1) && !m.overlaps(5, 25) && m.overlaps(24, 26));
        // Empty and inverted ranges change nothing.
        m.insert(3, 3, 1);
        m.remove(9, 2);
        assert_eq!(m.len(), 2);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Insert(u64, u64, u8),
        Remove(u64, u64),
        KeepHigher(u64, u64, u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        let range = (0u64..300, 0u64..80).prop_map(|(s, l)| (s, s + l));
        prop_oneof![
            (range.clone(), 0u8..4).prop_map(|((s, e), v)| Step::Insert(s, e, v)),
            range.clone().prop_map(|(s, e)| Step::Remove(s, e)),
            (range, 0u8..4).prop_map(|((s, e), v)| Step::KeepHigher(s, e, v)),
        ]
    }

    proptest! {
        /// Against a per-byte model: every lookup agrees, ranges never overlap, equal neighbours
        /// are always merged (so the map is as small as the model allows).
        #[test]
        fn matches_a_per_byte_model(steps in proptest::collection::vec(step(), 1..60)) {
            let mut m = RangeMap::new();
            let mut model: Vec<Option<u8>> = vec![None; 400];
            for st in steps {
                match st {
                    Step::Insert(s, e, v) => {
                        m.insert(s, e, v);
                        for b in s..e { model[b as usize] = Some(v); }
                    }
                    Step::Remove(s, e) => {
                        m.remove(s, e);
                        for b in s..e { model[b as usize] = None; }
                    }
                    Step::KeepHigher(s, e, v) => {
                        m.update(s, e, |_, _, old| Some(old.map_or(v, |o| (*o).max(v))));
                        for b in s..e {
                            let o = model[b as usize];
                            model[b as usize] = Some(o.map_or(v, |o| o.max(v)));
                        }
                    }
                }
                let mut bytes: Vec<Option<u8>> = vec![None; 400];
                for p in m.lookup(0, 400) {
                    for b in p.start..p.end { bytes[b as usize] = p.value.copied(); }
                }
                prop_assert_eq!(&bytes, &model);
                let runs = model.windows(2).filter(|w| w[0] != w[1] && w[1].is_some()).count()
                    + usize::from(model[0].is_some());
                prop_assert_eq!(m.len(), runs);
            }
        }
    }
}
