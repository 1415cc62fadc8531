//! Exact reuse (stack) distance: the number of distinct blocks accessed between an access and
//! the next access to the same block, in O(log n) per access and memory linear in distinct
//! blocks.
//!
//! Each block's latest access holds one slot in a Fenwick tree over access order; the distance
//! of a reaccess is the number of occupied slots after the block's previous slot. When the slots
//! run out the live ones are renumbered in order (compaction), so memory stays proportional to
//! the working set, not to the trace length.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

/// Slots in the smallest tree; grows with the working set.
const SLOTS_MIN: usize = 1 << 12;

/// Reuse distances, with a value `V` kept per distinct block in the same table (one hash
/// lookup per access serves both).
pub struct ReuseDistance<V = ()> {
    /// Block → slot of its latest access, and the block's value.
    slots: FxHashMap<u64, (usize, V)>,
    tree: Fenwick,
    next_slot: usize,
}

impl<V: Default> Default for ReuseDistance<V> {
    fn default() -> ReuseDistance<V> {
        ReuseDistance::new()
    }
}

impl<V: Default> ReuseDistance<V> {
    pub fn new() -> ReuseDistance<V> {
        ReuseDistance {
            slots: FxHashMap::default(),
            tree: Fenwick::new(SLOTS_MIN),
            next_slot: 0,
        }
    }

    /// Records an access to `block`; returns the reuse distance in distinct blocks if the block
    /// was accessed before.
    pub fn access(&mut self, block: u64) -> Option<u64> {
        self.touch(block).0
    }

    /// As [`ReuseDistance::access`], with the block's value (`V::default()` on its first
    /// access).
    pub fn touch(&mut self, block: u64) -> (Option<u64>, &mut V) {
        if self.next_slot == self.tree.len() {
            self.compact();
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        self.tree.add(slot, 1);
        match self.slots.entry(block) {
            Entry::Occupied(o) => {
                let (at, value) = o.into_mut();
                let previous = std::mem::replace(at, slot);
                let after = self.tree.prefix_sum(slot) - self.tree.prefix_sum(previous + 1);
                self.tree.add(previous, -1);
                (Some(after), value)
            }
            Entry::Vacant(v) => (None, &mut v.insert((slot, V::default())).1),
        }
    }

    /// Distinct blocks seen so far.
    pub fn distinct_blocks(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Every distinct block's value.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.values().map(|(_, v)| v)
    }

    /// Renumbers live slots 0..live in their order and makes room for as many new accesses.
    fn compact(&mut self) {
        let live = self.slots.len();
        let mut order: Vec<usize> = self.slots.values().map(|(s, _)| *s).collect();
        order.sort_unstable();
        for (slot, _) in self.slots.values_mut() {
            *slot = order.binary_search(slot).expect("live slot");
        }
        let capacity = (2 * live).max(SLOTS_MIN);
        self.tree = Fenwick::with_ones(capacity, live);
        self.next_slot = live;
    }
}

/// A binary indexed tree of counts.
pub struct Fenwick {
    sums: Vec<u32>,
}

impl Fenwick {
    pub fn new(len: usize) -> Fenwick {
        Fenwick { sums: vec![0; len] }
    }

    /// A tree whose first `ones` entries are 1, built in O(len).
    fn with_ones(len: usize, ones: usize) -> Fenwick {
        assert!(ones <= len);
        let mut sums = vec![0u32; len];
        for sum in sums.iter_mut().take(ones) {
            *sum = 1;
        }
        for i in 0..len {
            let parent = i | (i + 1);
            if parent < len {
                sums[parent] += sums[i];
            }
        }
        Fenwick { sums }
    }

    fn len(&self) -> usize {
        self.sums.len()
    }

    pub fn add(&mut self, mut i: usize, delta: i32) {
        while i < self.sums.len() {
            self.sums[i] = self.sums[i].wrapping_add_signed(delta);
            i |= i + 1;
        }
    }

    /// Sum of entries `0..end`.
    pub fn prefix_sum(&self, end: usize) -> u64 {
        let mut sum = 0u64;
        let mut i = end;
        while i > 0 {
            sum += self.sums[i - 1] as u64;
            i &= i - 1;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, in O(n²).
    fn naive(accesses: &[u64]) -> Vec<Option<u64>> {
        (0..accesses.len())
            .map(|i| {
                let previous = accesses[..i].iter().rposition(|b| *b == accesses[i])?;
                let between: std::collections::HashSet<_> =
                    accesses[previous + 1..i].iter().collect();
                Some(between.len() as u64)
            })
            .collect()
    }

    #[test]
    fn small_example() {
        let mut r = ReuseDistance::<()>::new();
        let got: Vec<_> = [1, 2, 3, 1, 1, 2].iter().map(|b| r.access(*b)).collect();
        assert_eq!(got, vec![None, None, None, Some(2), Some(0), Some(2)]);
        assert_eq!(r.distinct_blocks(), 3);
    }

    #[test]
    fn survives_many_compactions() {
        let accesses: Vec<u64> = (0..50_000u64)
            .map(|i| (i * 7919) % 3_000 + (i % 5))
            .collect();
        let mut r = ReuseDistance::<()>::new();
        let got: Vec<_> = accesses.iter().map(|b| r.access(*b)).collect();
        let want = naive(&accesses[..2_000]);
        assert_eq!(&got[..2_000], &want[..]);
        // Spot-check late accesses, after compactions, against the definition.
        for i in (40_000..50_000).step_by(997) {
            let previous = accesses[..i].iter().rposition(|b| *b == accesses[i]);
            let expected = previous.map(|p| {
                accesses[p + 1..i]
                    .iter()
                    .collect::<std::collections::HashSet<_>>()
                    .len() as u64
            });
            assert_eq!(got[i], expected, "access {i}");
        }
    }

    proptest! {
        #[test]
        fn equals_the_definition(accesses in prop::collection::vec(0u64..64, 0..600)) {
            let mut r = ReuseDistance::<()>::new();
            let got: Vec<_> = accesses.iter().map(|b| r.access(*b)).collect();
            prop_assert_eq!(got, naive(&accesses));
        }
    }
}
