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

/// The busiest rate, per second, of counts in windows of `width_ns` anchored at `anchor_ns`,
/// for records whose times run from `min_ns` to `max_ns`. Each window's count over `width_ns`;
/// a window the span cuts short (the last, and the first when records precede the anchor) is
/// also measured over the time it covers: on its own when that is at least a quarter of a
/// window, joined to its neighbour when it is less (a sliver's rate says little). These windows
/// partition the span, so the busiest rate is never below the mean rate (`records / span`); a
/// span within one window is one window of the span's length; a zero span gives the count over
/// one window.
pub fn peak_rate_per_s(
    counts: &WindowCounts,
    anchor_ns: i64,
    (min_ns, max_ns): (i64, i64),
    width_ns: i64,
) -> f64 {
    let w = width_ns as f64;
    let mut best = counts.max() as f64 / w;
    if max_ns <= min_ns {
        return best * 1e9;
    }
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    let span = (max_ns as i128 - min_ns as i128) as f64;
    if span <= w {
        // Records before the anchor (an unordered trace) can put a span shorter than one window
        // across two windows; it is still one window of the span's length.
        return total as f64 / span * 1e9;
    }
    let (i0, i1) = (
        window_of(min_ns, anchor_ns, width_ns),
        window_of(max_ns, anchor_ns, width_ns),
    );
    let start = |i: i64| anchor_ns as i128 + i as i128 * width_ns as i128;
    let first_len = (start(i0 + 1) - min_ns as i128) as f64;
    let last_len = (max_ns as i128 - start(i1)) as f64;
    let c = |i: i64| counts.get(i) as f64;
    // A sliver joins its neighbour; when the joins meet, the whole span is one window.
    let sliver = |len: f64| len < w / 4.0;
    let first_cut = first_len < w;
    let joined_first = first_cut && sliver(first_len);
    let joined_last = sliver(last_len);
    let whole_between = i1 - i0 - 1 - joined_first as i64 - joined_last as i64;
    if i1 == i0 || whole_between < 0 {
        return best.max(total as f64 / span) * 1e9;
    }
    let first_rate = match (first_cut, joined_first) {
        (false, _) => 0.0,
        (true, false) => c(i0) / first_len,
        (true, true) => (c(i0) + c(i0 + 1)) / (first_len + w),
    };
    let last_rate = if joined_last {
        (c(i1 - 1) + c(i1)) / (w + last_len)
    } else {
        c(i1) / last_len
    };
    best = best.max(first_rate).max(last_rate);
    best * 1e9
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
    fn cut_windows_are_measured_over_what_they_cover() {
        let mut w = WindowCounts::new();
        // 27 s of records in 60 s windows: one window of 27 s.
        w.add(0, 27);
        assert_eq!(
            peak_rate_per_s(&w, 0, (0, 27_000_000_000), 60_000_000_000),
            1.0
        );
        // 10 s windows over 0..25 s: the last (20..25 s) is half a window, measured alone.
        let mut w = WindowCounts::new();
        for (i, n) in [(0, 10), (1, 10), (2, 25)] {
            w.add(i, n);
        }
        let rate = peak_rate_per_s(&w, 0, (0, 25_000_000_000), 10_000_000_000);
        assert!((rate - 25.0 / 5.0).abs() < 1e-12, "{rate}");
        // Over 0..21 s the last is a 1 s sliver: joined to 10..20 s.
        let rate = peak_rate_per_s(&w, 0, (0, 21_000_000_000), 10_000_000_000);
        assert!((rate - 35.0 / 11.0).abs() < 1e-12, "{rate}");
        // A record before the anchor cuts the first window to a 1 s sliver: it joins the next;
        // a busier whole window wins.
        let mut w = WindowCounts::new();
        for (i, n) in [(-1, 1), (0, 10), (1, 1), (2, 30), (3, 1)] {
            w.add(i, n);
        }
        let rate = peak_rate_per_s(&w, 0, (-1_000_000_000, 35_000_000_000), 10_000_000_000);
        assert!((rate - 3.0).abs() < 1e-12, "{rate}");
        // Slivers at both ends of a span of two windows: the whole span is one window.
        let mut w = WindowCounts::new();
        for (i, n) in [(-1, 4), (0, 1), (1, 4)] {
            w.add(i, n);
        }
        let rate = peak_rate_per_s(&w, 0, (-1_000_000_000, 11_000_000_000), 10_000_000_000);
        assert!((rate - 9.0 / 12.0).abs() < 1e-12, "{rate}");
        // A span shorter than a window, across two because the first record (the anchor) is
        // not the earliest: one window of the span, not two cut ones (found by a fresh seed).
        let mut w = WindowCounts::new();
        for (i, n) in [(-1, 1), (0, 2)] {
            w.add(i, n);
        }
        let rate = peak_rate_per_s(&w, 0, (-6_000_000_000, 3_000_000_000), 10_000_000_000);
        assert!((rate - 3.0 / 9.0).abs() < 1e-12, "{rate}");
    }

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
