//! ARC: two LRU lists of cached blocks (seen once recently, seen twice or more) and two of
//! blocks recently evicted from them, with a target size for the first that moves towards
//! whichever list's ghosts are being hit.

use super::list::{linked_by_field, Links, List};
use super::{hash, Cache, NIL};

/// ARC (Megiddo and Modha, FAST '03, Figure 4), in blocks: `T1` holds blocks seen once
/// recently, `T2` blocks seen at least twice, `B1` and `B2` remember the blocks last evicted
/// from each (numbers only). `p`, the target size of `T1`, rises on a hit in `B1` by
/// max(|B2| / |B1|, 1) (at most to the capacity) and falls on a hit in `B2` by
/// max(|B1| / |B2|, 1) (at least to 0): the paper's δ, a real number of blocks, as `p` is.
/// REPLACE evicts the least recent block of `T1` into `B1` if `T1` is not empty and holds
/// more than `p` blocks, or exactly `p` when the block asked for is in `B2`; else the least
/// recent of `T2` into `B2`. A hit in `T1` or `T2` moves the block to the most recent end of `T2`; a hit in a ghost
/// list adapts `p`, REPLACEs, and brings the block into `T2`. A block in none of the lists, on a
/// full cache: when `T1` and `B1` hold the capacity between them, the least recent of `B1` is
/// forgotten and REPLACE runs, or if `B1` is empty the least recent of `T1` is evicted outright;
/// otherwise, when the four lists hold twice the capacity, the least recent of `B2` is
/// forgotten, and REPLACE runs. The block then enters `T1`.
///
/// libCacheSim's `ARC` runs the same algorithm over sizes in bytes, `p` included, so with 4 KiB
/// objects its δ moves `p` by a byte where the paper moves it by a block; with objects of one
/// byte and a cache of as many bytes as blocks it counts the same hits as this one (`bench
/// cache` runs it so).
pub struct ArcCache {
    capacity: usize,
    map: hashbrown::HashTable<u32>,
    entries: Vec<Entry>,
    /// Entries of blocks forgotten, for reuse.
    free: Vec<u32>,
    lists: [List; 4],
    /// The target size of `T1`, in blocks (a real number, as in the paper).
    p: f64,
}

/// Which list an entry is on.
const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

#[derive(Clone, Copy)]
struct Entry {
    block: u64,
    /// Towards the most recent end of its list, and towards the least recent.
    links: Links,
    list: u8,
}

linked_by_field!(Entry);

impl ArcCache {
    /// A cache of `capacity` blocks (and a directory of twice as many); more than
    /// `(u32::MAX - 1) / 2` is refused.
    pub fn new(capacity: usize) -> ArcCache {
        assert!(
            capacity < (NIL as usize) / 2,
            "capacity {capacity} blocks is too large"
        );
        let reserve = (2 * capacity).min(1 << 24);
        ArcCache {
            capacity,
            map: hashbrown::HashTable::with_capacity(reserve),
            entries: Vec::with_capacity(reserve),
            free: Vec::new(),
            lists: [List::EMPTY; 4],
            p: 0.0,
        }
    }

    fn find(&self, block: u64) -> Option<u32> {
        let entries = &self.entries;
        self.map
            .find(hash(block), |&i| entries[i as usize].block == block)
            .copied()
    }

    /// Takes entry `i` off the list it is on.
    fn unlink(&mut self, i: u32) {
        let list = self.entries[i as usize].list;
        self.lists[list as usize].unlink(&mut self.entries, i);
    }

    /// Puts entry `i` at the most recent end of `list`.
    fn push_front(&mut self, list: u8, i: u32) {
        self.entries[i as usize].list = list;
        self.lists[list as usize].push_newest(&mut self.entries, i);
    }

    /// Moves entry `i` to the most recent end of `list`.
    fn move_to(&mut self, list: u8, i: u32) {
        self.unlink(i);
        self.push_front(list, i);
    }

    /// Forgets the least recent block of `list`: out of the table, its entry free.
    fn forget_oldest(&mut self, list: u8) {
        let i = self.lists[list as usize].oldest;
        debug_assert_ne!(i, NIL, "forgetting from an empty list");
        self.unlink(i);
        let block = self.entries[i as usize].block;
        self.map
            .find_entry(hash(block), |&j| j == i)
            .expect("a listed block is in the table")
            .remove();
        self.free.push(i);
    }

    fn len_of(&self, list: u8) -> usize {
        self.lists[list as usize].len
    }

    /// The paper's REPLACE: one block out of the cache, into its ghost list.
    fn replace(&mut self, asked_in_b2: bool) {
        let t1 = self.len_of(T1) as f64;
        let from_t1 = t1 > 0.0 && (t1 > self.p || (t1 == self.p && asked_in_b2));
        // `T2` is never empty when `T1` is not chosen on a full cache; the fallback keeps a
        // broken invariant from reading an empty list.
        let (from, to) = if from_t1 || self.len_of(T2) == 0 {
            (T1, B1)
        } else {
            (T2, B2)
        };
        let i = self.lists[from as usize].oldest;
        self.move_to(to, i);
    }

    /// A new entry for `block` (a forgotten one's, or a fresh one), in the table, on no list.
    fn new_entry(&mut self, block: u64) -> u32 {
        let entry = Entry {
            block,
            links: Links::NONE,
            list: T1,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = entry;
                i
            }
            None => {
                self.entries.push(entry);
                self.entries.len() as u32 - 1
            }
        };
        let entries = &self.entries;
        self.map
            .insert_unique(hash(block), i, |&j| hash(entries[j as usize].block));
        i
    }

    /// The target size of `T1`, in blocks.
    pub fn target(&self) -> f64 {
        self.p
    }

    /// The blocks of `T1`, `T2`, `B1` and `B2`, each from most to least recent.
    pub fn lists(&self) -> [Vec<u64>; 4] {
        let entries = &self.entries;
        [T1, T2, B1, B2].map(|list| {
            self.lists[list as usize]
                .slots(entries)
                .map(|i| entries[i as usize].block)
                .collect()
        })
    }
}

impl Cache for ArcCache {
    fn access(&mut self, block: u64) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let c = self.capacity;
        if let Some(i) = self.find(block) {
            let (b1, b2) = (self.len_of(B1) as f64, self.len_of(B2) as f64);
            match self.entries[i as usize].list {
                T1 | T2 => {
                    self.move_to(T2, i);
                    return true;
                }
                B1 => {
                    self.p = (self.p + (b2 / b1).max(1.0)).min(c as f64);
                    self.replace(false);
                }
                _ => {
                    self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
                    self.replace(true);
                }
            }
            self.move_to(T2, i);
            return false;
        }
        if self.len_of(T1) + self.len_of(T2) >= c {
            if self.len_of(T1) + self.len_of(B1) >= c {
                if self.len_of(T1) < c {
                    self.forget_oldest(B1);
                    self.replace(false);
                } else {
                    self.forget_oldest(T1);
                }
            } else {
                if self.map.len() >= 2 * c {
                    self.forget_oldest(B2);
                }
                self.replace(false);
            }
        }
        let i = self.new_entry(block);
        self.push_front(T1, i);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.find(block)
            .is_some_and(|i| matches!(self.entries[i as usize].list, T1 | T2))
    }

    fn len(&self) -> usize {
        self.len_of(T1) + self.len_of(T2)
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's lists, step by step, on a cache of 2: a block seen twice moves to `T2`, a
    /// miss on a full cache sends `T1`'s least recent to `B1`, a hit in `B1` raises `p` and
    /// brings the block into `T2`, and a hit in `B2` lowers it again.
    #[test]
    fn the_lists_and_the_target_move_as_the_paper_says() {
        let mut c = ArcCache::new(2);
        assert!(!c.access(1));
        assert!(!c.access(2));
        assert!(c.access(1), "1 is cached");
        assert_eq!(c.lists(), [vec![2], vec![1], vec![], vec![]]);
        // Full, |T1| + |B1| = 1 < 2, |T1| = 1 > p = 0: 2 goes to B1.
        assert!(!c.access(3));
        assert_eq!(c.lists(), [vec![3], vec![1], vec![2], vec![]]);
        assert!(!c.contains(2));
        // A hit in B1: p = 1; |T1| = 1 is not above p (and 2 was not in B2), so REPLACE
        // takes T2's least recent, 1, into B2; 2 enters T2.
        assert!(!c.access(2));
        assert_eq!(c.target(), 1.0);
        assert_eq!(c.lists(), [vec![3], vec![2], vec![], vec![1]]);
        // A hit in B2: p = 0; REPLACE takes T1's 3 (|T1| = 1 > 0) into B1; 1 enters T2.
        assert!(!c.access(1));
        assert_eq!(c.target(), 0.0);
        assert_eq!(c.lists(), [vec![], vec![1, 2], vec![3], vec![]]);
        assert_eq!(c.len(), 2);
    }

    /// ARC as the paper's Figure 4 reads, as plainly as possible: four lists of block numbers,
    /// most recent first, searched by scanning.
    struct Figure4 {
        c: usize,
        p: f64,
        t1: std::collections::VecDeque<u64>,
        t2: std::collections::VecDeque<u64>,
        b1: std::collections::VecDeque<u64>,
        b2: std::collections::VecDeque<u64>,
    }

    impl Figure4 {
        fn take(list: &mut std::collections::VecDeque<u64>, x: u64) -> bool {
            match list.iter().position(|&y| y == x) {
                Some(at) => {
                    list.remove(at);
                    true
                }
                None => false,
            }
        }

        fn replace(&mut self, x_in_b2: bool) {
            let t1 = self.t1.len() as f64;
            if t1 >= 1.0 && ((x_in_b2 && t1 == self.p) || t1 > self.p) {
                let y = self.t1.pop_back().unwrap();
                self.b1.push_front(y);
            } else {
                let y = self.t2.pop_back().unwrap();
                self.b2.push_front(y);
            }
        }

        /// Case I to IV; whether `x` was a hit.
        fn access(&mut self, x: u64) -> bool {
            if Self::take(&mut self.t1, x) || Self::take(&mut self.t2, x) {
                self.t2.push_front(x);
                return true;
            }
            if self.b1.contains(&x) {
                let delta = (self.b2.len() as f64 / self.b1.len() as f64).max(1.0);
                self.p = (self.p + delta).min(self.c as f64);
                self.replace(false);
                Self::take(&mut self.b1, x);
                self.t2.push_front(x);
                return false;
            }
            if self.b2.contains(&x) {
                let delta = (self.b1.len() as f64 / self.b2.len() as f64).max(1.0);
                self.p = (self.p - delta).max(0.0);
                self.replace(true);
                Self::take(&mut self.b2, x);
                self.t2.push_front(x);
                return false;
            }
            let l1 = self.t1.len() + self.b1.len();
            let total = l1 + self.t2.len() + self.b2.len();
            if l1 == self.c {
                if self.t1.len() < self.c {
                    self.b1.pop_back();
                    self.replace(false);
                } else {
                    self.t1.pop_back();
                }
            } else if total >= self.c {
                if total == 2 * self.c {
                    self.b2.pop_back();
                }
                self.replace(false);
            }
            self.t1.push_front(x);
            false
        }
    }

    /// The same hits, and the same four lists and target after every access, as Figure 4
    /// written out plainly, over skewed random streams at several capacities.
    #[test]
    fn every_access_is_as_figure_4_says() {
        for c in [1usize, 2, 5, 16, 100] {
            let mut rng = cordillera_types::rng::SimRng::new(7 + c as u64, 0xf14);
            let mut ours = ArcCache::new(c);
            let mut paper = Figure4 {
                c,
                p: 0.0,
                t1: Default::default(),
                t2: Default::default(),
                b1: Default::default(),
                b2: Default::default(),
            };
            let mut hits = 0;
            for step in 0..30_000 {
                // A hot set that shifts over time and a long tail: p moves both ways.
                let phase = (step / 3_000) as u64 * c as u64;
                let block = if rng.chance(0.5) {
                    phase + rng.below(c as u64 + 1)
                } else {
                    rng.below(6 * c as u64)
                };
                let hit = ours.access(block);
                assert_eq!(
                    hit,
                    paper.access(block),
                    "c {c}, step {step}, block {block}"
                );
                hits += hit as usize;
                let lists = [&paper.t1, &paper.t2, &paper.b1, &paper.b2]
                    .map(|l| l.iter().copied().collect::<Vec<u64>>());
                assert_eq!(ours.lists(), lists, "c {c}, step {step}");
                assert_eq!(ours.target(), paper.p, "c {c}, step {step}");
            }
            assert!(hits > 0 && hits < 30_000, "c {c}: {hits} hits");
        }
    }

    /// The paper's invariants after every access of a random stream: |T1| + |T2| ≤ c,
    /// |T1| + |B1| ≤ c, all four ≤ 2c, the ghosts empty until the cache is full, 0 ≤ p ≤ c,
    /// and a hit exactly when the block is in `T1` or `T2`.
    #[test]
    fn invariants_hold_on_a_random_stream() {
        for c in [1usize, 2, 3, 7, 64] {
            let mut rng = cordillera_types::rng::SimRng::new(c as u64, 0xa2c);
            let mut cache = ArcCache::new(c);
            for _ in 0..20_000 {
                // Skewed: a small hot set and a long tail, so every list is used.
                let block = if rng.chance(0.6) {
                    rng.below(2 * c as u64)
                } else {
                    rng.below(10 * c as u64)
                };
                let cached = cache.contains(block);
                assert_eq!(cache.access(block), cached, "c {c}: a hit iff cached");
                assert!(cache.contains(block), "c {c}: the block is cached after");
                let [t1, t2, b1, b2] = cache.lists().map(|l| l.len());
                assert!(t1 + t2 <= c && t1 + b1 <= c && t1 + t2 + b1 + b2 <= 2 * c);
                assert!(t1 + t2 == c || b1 + b2 == 0, "c {c}: ghosts only once full");
                assert!((0.0..=c as f64).contains(&cache.target()));
                assert_eq!(cache.map.len(), t1 + t2 + b1 + b2);
            }
        }
    }
}
