//! An ordered map of non-overlapping byte ranges to values (Everest §3.2.1, Figure 4): what a
//! store keeps per client (the version valid there and the record holding it) and what an
//! off-loading client keeps per volume (the version and the stores holding it).
//!
//! Updates may overlap existing ranges arbitrarily: they split ranges at their edges and apply a
//! caller's rule to every piece, gaps included. Adjacent ranges with equal values are merged, so
//! memory is linear in the number of distinct ranges, never in blocks.

/// One piece of a lookup: bytes `[start, end)` and the value there (`None` for a gap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<V> {
    pub start: u64,
    pub end: u64,
    pub value: Option<V>,
}

/// `(start, end, value)`.
type Span<V> = (u64, u64, V);

/// The chunk size: a chunk over twice this many ranges has chunks of this size cut off its end,
/// and one under a quarter of it joins a neighbour when both fit.
const CHUNK_MAX: usize = 16;

/// The ranges in order, cut into chunks of consecutive ranges (a two-level sorted array, like a
/// B+ tree of height two): a search is a binary search over the chunks' first starts, then one
/// inside a chunk, both over contiguous memory; an update splices one chunk (rarely two).
#[derive(Clone, Debug)]
pub struct RangeMap<V> {
    /// Non-empty chunks; ranges are non-empty, ordered and do not overlap.
    chunks: Vec<Vec<Span<V>>>,
    /// The start of each chunk's first range.
    firsts: Vec<u64>,
    len: usize,
    chunk_max: usize,
    /// Working space of `update`, kept to spare an allocation per call.
    scratch: Vec<Span<V>>,
}

/// Walks the ranges from a position, across chunks.
struct Cursor<'a, V> {
    chunks: &'a [Vec<Span<V>>],
    c: usize,
    i: usize,
}

impl<'a, V> Iterator for Cursor<'a, V> {
    type Item = (u64, u64, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let chunk = self.chunks.get(self.c)?;
            if let Some((s, e, v)) = chunk.get(self.i) {
                self.i += 1;
                return Some((*s, *e, v));
            }
            self.c += 1;
            self.i = 0;
        }
    }
}

impl<V> Default for RangeMap<V> {
    fn default() -> Self {
        RangeMap {
            chunks: Vec::new(),
            firsts: Vec::new(),
            len: 0,
            chunk_max: CHUNK_MAX,
            scratch: Vec::new(),
        }
    }
}

impl<V: Clone + PartialEq> RangeMap<V> {
    pub fn new() -> RangeMap<V> {
        RangeMap::default()
    }

    /// A map with small chunks, so that tests exercise splits and merges.
    #[cfg(test)]
    fn with_chunk_max(chunk_max: usize) -> RangeMap<V> {
        RangeMap {
            chunk_max,
            ..RangeMap::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of stored ranges.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Every range, in order: `(start, end, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &V)> + '_ {
        self.chunks.iter().flatten().map(|(s, e, v)| (*s, *e, v))
    }

    /// The position (chunk, index) of the first range whose end is at least `at` (touching
    /// counts when `touch`), or the end.
    fn first_ending_after(&self, at: u64, touch: bool) -> (usize, usize) {
        if self.chunks.is_empty() {
            return (0, 0);
        }
        // The candidate is the last range starting before `at` (at or before, without
        // `touch`), in the last chunk starting there, or else the range after it.
        let c = self
            .firsts
            .partition_point(|&f| if touch { f < at } else { f <= at })
            .saturating_sub(1);
        let chunk = &self.chunks[c];
        let i = chunk.partition_point(|&(_, e, _)| if touch { e < at } else { e <= at });
        if i == chunk.len() {
            (c + 1, 0)
        } else {
            (c, i)
        }
    }

    /// Ranges from position `(c, i)` on, in order.
    fn from(&self, c: usize, i: usize) -> Cursor<'_, V> {
        Cursor {
            chunks: &self.chunks,
            c,
            i,
        }
    }

    /// The stored ranges that overlap `[start, end)`, unclipped, in order.
    fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, &V)> + '_ {
        let (c, i) = if start < end {
            self.first_ending_after(start, false)
        } else {
            (self.chunks.len(), 0)
        };
        self.from(c, i).take_while(move |(s, _, _)| *s < end)
    }

    /// Whether any stored range overlaps `[start, end)`.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.overlapping(start, end).next().is_some()
    }

    /// `[start, end)` cut into stored pieces and gaps, clipped to it, in order.
    pub fn lookup(&self, start: u64, end: u64) -> Vec<Piece<&V>> {
        let mut out = Vec::with_capacity(4);
        if start >= end {
            return out;
        }
        let mut at = start;
        for (s, e, v) in self.overlapping(start, end) {
            let (lo, hi) = (s.max(start), e.min(end));
            if lo > at {
                out.push(Piece {
                    start: at,
                    end: lo,
                    value: None,
                });
            }
            out.push(Piece {
                start: lo,
                end: hi,
                value: Some(v),
            });
            at = hi;
        }
        if at < end {
            out.push(Piece {
                start: at,
                end,
                value: None,
            });
        }
        out
    }

    /// Replaces every piece of `[start, end)` — stored ranges clipped to it, and the gaps
    /// between them — by what `rule(piece_start, piece_end, old_value)` returns (`None` leaves
    /// or makes a gap). Parts of ranges outside `[start, end)` keep their values.
    ///
    /// One search finds every range touching `[start, end]` (the overlapping ones and the
    /// neighbours that may merge); they are replaced, in place, by the new layout.
    pub fn update(
        &mut self,
        start: u64,
        end: u64,
        mut rule: impl FnMut(u64, u64, Option<&V>) -> Option<V>,
    ) {
        if start >= end {
            return;
        }
        let (c0, i0) = self.first_ending_after(start, true);
        let mut new = std::mem::take(&mut self.scratch);
        new.clear();
        // The new layout of everything the old ranges and [start, end) cover, coalesced.
        let push = |new: &mut Vec<Span<V>>, s: u64, e: u64, v: V| {
            if let Some(last) = new.last_mut() {
                if last.1 == s && last.2 == v {
                    last.1 = e;
                    return;
                }
            }
            new.push((s, e, v));
        };
        let mut at = start;
        let mut old_count = 0;
        for (s, e, v) in self.from(c0, i0) {
            if s > end {
                break;
            }
            old_count += 1;
            if s < start {
                push(&mut new, s, e.min(start), v.clone());
            }
            let (lo, hi) = (s.max(start), e.min(end));
            if lo < hi {
                if lo > at {
                    if let Some(n) = rule(at, lo, None) {
                        push(&mut new, at, lo, n);
                    }
                }
                if let Some(n) = rule(lo, hi, Some(v)) {
                    push(&mut new, lo, hi, n);
                }
                at = hi;
            }
            if e > end {
                if at < end {
                    if let Some(n) = rule(at, end, None) {
                        push(&mut new, at, end, n);
                    }
                    at = end;
                }
                push(&mut new, s.max(end), e, v.clone());
            }
        }
        if at < end {
            if let Some(n) = rule(at, end, None) {
                push(&mut new, at, end, n);
            }
        }
        self.replace(c0, i0, old_count, &mut new);
        self.scratch = new;
        self.debug_check();
    }

    /// Replaces `count` ranges from position `(c, i)` by `new` (drained).
    fn replace(&mut self, c: usize, i: usize, count: usize, new: &mut Vec<Span<V>>) {
        self.len = self.len + new.len() - count;
        if self.chunks.is_empty() {
            if !new.is_empty() {
                self.chunks.push(std::mem::take(new));
                self.firsts.push(self.chunks[0][0].0);
                self.split(0);
            }
            return;
        }
        // Insertions at the very end go into the last chunk.
        let (c, i) = if c == self.chunks.len() {
            (c - 1, self.chunks[c - 1].len())
        } else {
            (c, i)
        };
        let here = self.chunks[c].len() - i;
        if count <= here {
            // Overwrite in place, then move the chunk's tail once (if the count changed).
            let chunk = &mut self.chunks[c];
            let same = count.min(new.len());
            let mut fresh = new.drain(..);
            for slot in &mut chunk[i..i + same] {
                *slot = fresh.next().expect("counted");
            }
            if count > same {
                chunk.drain(i + same..i + count);
            } else {
                chunk.splice(i + same..i + same, fresh);
            }
        } else {
            // The old ranges run into the next chunks: take them off there, then splice here.
            let mut left = count - here;
            let mut k = c + 1;
            while left > 0 {
                let take = left.min(self.chunks[k].len());
                self.chunks[k].drain(..take);
                left -= take;
                k += 1;
            }
            self.chunks[c].splice(i.., new.drain(..));
            for k in c + 1..k {
                if let Some(&(s, _, _)) = self.chunks[k].first() {
                    self.firsts[k] = s;
                }
            }
        }
        // Drop emptied chunks, refresh this chunk's first start, keep sizes in bounds.
        let mut k = c;
        while k < self.chunks.len() && k <= c + count {
            if self.chunks[k].is_empty() {
                self.chunks.remove(k);
                self.firsts.remove(k);
            } else {
                k += 1;
            }
        }
        if c < self.chunks.len() {
            self.firsts[c] = self.chunks[c][0].0;
            self.split(c);
            self.merge(c);
        }
    }

    /// Cuts chunks of the chunk size off the end of chunk `c` while it is over twice that.
    fn split(&mut self, c: usize) {
        while self.chunks[c].len() > 2 * self.chunk_max {
            let at = self.chunks[c].len() - self.chunk_max;
            // Room to grow to the split size without reallocating.
            let mut tail = Vec::with_capacity(2 * self.chunk_max + 2);
            tail.extend(self.chunks[c].drain(at..));
            self.firsts.insert(c + 1, tail[0].0);
            self.chunks.insert(c + 1, tail);
        }
    }

    /// Merges chunk `c` into a neighbour when it has become small.
    fn merge(&mut self, c: usize) {
        if self.chunks[c].len() >= self.chunk_max / 4 || self.chunks.len() < 2 {
            return;
        }
        let (a, b) = if c + 1 < self.chunks.len() {
            (c, c + 1)
        } else {
            (c - 1, c)
        };
        if self.chunks[a].len() + self.chunks[b].len() <= 2 * self.chunk_max {
            let moved = self.chunks.remove(b);
            self.firsts.remove(b);
            self.chunks[a].extend(moved);
        }
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
        if cfg!(debug_assertions) && self.len < 4096 {
            assert_eq!(self.chunks.len(), self.firsts.len());
            assert_eq!(self.len, self.chunks.iter().map(Vec::len).sum::<usize>());
            for (chunk, first) in self.chunks.iter().zip(&self.firsts) {
                assert!(!chunk.is_empty() && chunk[0].0 == *first, "chunk index");
                assert!(chunk.len() <= 2 * self.chunk_max, "chunk too large");
            }
            let mut last: Option<(u64, &V)> = None;
            for (s, e, v) in self.iter() {
                assert!(s < e, "empty range");
                if let Some((last_end, last_v)) = last {
                    assert!(s >= last_end, "overlapping ranges");
                    assert!(!(s == last_end && last_v == v), "unmerged equal neighbours");
                }
                last = Some((e, v));
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
        fn matches_a_per_byte_model(
            steps in proptest::collection::vec(step(), 1..60),
            chunk_max in prop_oneof![Just(1usize), Just(2), Just(3), Just(CHUNK_MAX)],
        ) {
            let mut m = RangeMap::with_chunk_max(chunk_max);
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
