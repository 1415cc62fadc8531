//! Counters over fixed-length time windows, for rates and episodes.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// Windows kept in the dense vector; windows further away (a stray timestamp in a corrupt or
/// unordered trace) go to a sparse map, so memory stays bounded by distinct windows.
const DENSE_WINDOWS_MAX: usize = 1 << 24;

/// Counts per window index (`floor((time - anchor) / width)`), for any order of arrival.
#[derive(Clone, Debug, Default)]
pub struct WindowCounts {
    base: i64,
    /// Counts of windows `base..base + dense.len()`; grows at either end in amortized O(1).
    dense: VecDeque<u64>,
    sparse: FxHashMap<i64, u64>,
}

impl WindowCounts {
    pub fn new() -> WindowCounts {
        WindowCounts::default()
    }

    pub fn add(&mut self, window: i64, n: u64) {
        if self.dense.is_empty() {
            self.base = window;
            self.dense.push_back(0);
        }
        if window < self.base {
            let grow = (self.base - window) as u128;
            if grow + self.dense.len() as u128 > DENSE_WINDOWS_MAX as u128 {
                *self.sparse.entry(window).or_default() += n;
                return;
            }
            let grow = grow as usize;
            for _ in 0..grow {
                self.dense.push_front(0);
            }
            self.base = window;
        }
        let index = (window as i128 - self.base as i128) as u128;
        if index >= DENSE_WINDOWS_MAX as u128 {
            *self.sparse.entry(window).or_default() += n;
            return;
        }
        let index = index as usize;
        if index >= self.dense.len() {
            self.dense.resize(index + 1, 0);
        }
        self.dense[index] += n;
    }

    /// The count of one window.
    pub fn get(&self, window: i64) -> u64 {
        let dense = (window >= self.base)
            .then(|| self.dense.get((window - self.base) as usize))
            .flatten()
            .copied()
            .unwrap_or(0);
        dense + self.sparse.get(&window).copied().unwrap_or(0)
    }

    /// The largest count of any window (0 when empty).
    pub fn max(&self) -> u64 {
        let dense = self.dense.iter().copied().max().unwrap_or(0);
        dense.max(self.sparse.values().copied().max().unwrap_or(0))
    }

    /// Every non-empty window and its count, in window order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        let mut sparse: Vec<(i64, u64)> = self.sparse.iter().map(|(w, n)| (*w, *n)).collect();
        sparse.sort_unstable();
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (self.base + i as i64, *n));
        let mut merged: Vec<(i64, u64)> = dense.chain(sparse).collect();
        merged.sort_unstable_by_key(|(w, _)| *w);
        merged.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 += later.1;
                true
            } else {
                false
            }
        });
        merged.into_iter()
    }
}

/// `floor((time_ns - anchor_ns) / width_ns)` without overflow.
pub fn window_of(time_ns: i64, anchor_ns: i64, width_ns: i64) -> i64 {
    debug_assert!(width_ns > 0);
    ((time_ns as i128 - anchor_ns as i128).div_euclid(width_ns as i128)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_in_any_order() {
        let mut w = WindowCounts::new();
        w.add(5, 1);
        w.add(3, 2);
        w.add(5, 1);
        w.add(1 << 40, 7);
        w.add(-(1 << 40), 1);
        assert_eq!((w.get(5), w.get(3), w.get(4), w.get(1 << 40)), (2, 2, 0, 7));
        assert_eq!(w.max(), 7);
        let all: Vec<_> = w.iter().collect();
        assert_eq!(all, vec![(-(1 << 40), 1), (3, 2), (5, 2), (1 << 40, 7)]);
        assert_eq!(window_of(-1, 0, 10), -1);
        assert_eq!(window_of(19, 0, 10), 1);
    }
}
