//! S3-FIFO: a small FIFO queue that filters blocks seen once, a main FIFO queue with a 2-bit
//! access count, and a ghost queue of block numbers recently filtered out.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::Cache;

/// The size every block counts for in the queues' byte budgets.
const BLOCK: u64 = 4096;

/// S3-FIFO (Yang et al., SOSP '23), as libCacheSim's `S3FIFO` runs it with its defaults, so
/// that the two count the same hits: a small queue of 10 % of the cache's bytes, the main
/// queue the rest, a ghost queue of 90 % of them. The budgets are in bytes, each block
/// counting 4 KiB, and rounded as libCacheSim rounds them.
///
/// A miss goes into the small queue, or into the main queue if the ghost remembers the block
/// (and, before the first eviction, once the small queue is full). A hit adds one to the
/// block's count. A full cache evicts from the main queue when it is over its budget or the
/// small queue is empty, else from the small queue. From the small queue, the oldest block
/// moves to the main queue (count reset) if its count reached 2, else leaves for the ghost.
/// From the main queue, the oldest block with a count goes back in as the newest, its count
/// (at most 3) less one; the first without one is evicted.
pub struct S3Fifo {
    capacity: usize,
    /// Every block either queue holds and every block the ghost remembers, in one table: a
    /// miss looks a block up once, and a block filtered out to the ghost changes its entry in
    /// place.
    blocks: FxHashMap<u64, Slot>,
    /// Oldest first.
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    /// The ghost's blocks and when each entered it, oldest first; an entry whose block left
    /// the ghost since (its slot no longer says that time) is skipped.
    ghost: VecDeque<(u64, u64)>,
    remembered: usize,
    ghost_entries: u64,
    small_bytes: u64,
    main_bytes: u64,
    ghost_bytes: u64,
    /// Whether anything was evicted yet.
    evicted: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// In the small or the main queue, with its count of hits.
    Cached(u32),
    /// Remembered by the ghost since the given entry number.
    Ghost(u64),
}

impl S3Fifo {
    pub fn new(capacity: usize) -> S3Fifo {
        let bytes = capacity as u64 * BLOCK;
        // libCacheSim's arithmetic: a double product truncated to whole bytes.
        let small_bytes = (bytes as f64 * 0.10) as u64;
        let ghost_bytes = (bytes as f64 * 0.90) as u64;
        let reserve = capacity.min(1 << 24);
        S3Fifo {
            capacity,
            blocks: FxHashMap::with_capacity_and_hasher(2 * reserve, Default::default()),
            small: VecDeque::new(),
            main: VecDeque::with_capacity(reserve),
            ghost: VecDeque::new(),
            remembered: 0,
            ghost_entries: 0,
            small_bytes,
            main_bytes: bytes - small_bytes,
            ghost_bytes,
            evicted: false,
        }
    }

    /// Blocks of the small and the main queue, newest first.
    pub fn queues(&self) -> (Vec<u64>, Vec<u64>) {
        (
            self.small.iter().rev().copied().collect(),
            self.main.iter().rev().copied().collect(),
        )
    }

    /// Whether the ghost remembers `block`.
    pub fn remembers(&self, block: u64) -> bool {
        matches!(self.blocks.get(&block), Some(Slot::Ghost(_)))
    }

    fn count(&self, block: u64) -> Option<u32> {
        match self.blocks.get(&block) {
            Some(Slot::Cached(count)) => Some(*count),
            _ => None,
        }
    }

    fn bytes(blocks: usize) -> u64 {
        blocks as u64 * BLOCK
    }

    fn evict(&mut self) {
        self.evicted = true;
        if Self::bytes(self.main.len()) > self.main_bytes || self.small.is_empty() {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }

    fn evict_small(&mut self) {
        while let Some(block) = self.small.pop_front() {
            let Some(Slot::Cached(count)) = self.blocks.get_mut(&block) else {
                unreachable!("a small queue block is cached");
            };
            if *count >= 2 {
                *count = 0;
                self.main.push_back(block);
            } else {
                self.remember(block);
                return;
            }
        }
    }

    fn evict_main(&mut self) {
        while let Some(block) = self.main.pop_front() {
            let Some(Slot::Cached(count)) = self.blocks.get_mut(&block) else {
                unreachable!("a main queue block is cached");
            };
            if *count >= 1 {
                *count = (*count).min(3) - 1;
                self.main.push_back(block);
            } else {
                self.blocks.remove(&block);
                return;
            }
        }
    }

    /// `block`, just evicted from the small queue, goes to the ghost (a FIFO of its own
    /// budget: its oldest leave first to make room).
    fn remember(&mut self, block: u64) {
        if BLOCK > self.ghost_bytes {
            self.blocks.remove(&block);
            return;
        }
        while Self::bytes(self.remembered) + BLOCK > self.ghost_bytes {
            let (old, when) = self.ghost.pop_front().expect("the ghost is not empty");
            if self.blocks.get(&old) == Some(&Slot::Ghost(when)) {
                self.blocks.remove(&old);
                self.remembered -= 1;
            }
        }
        self.ghost_entries += 1;
        self.blocks.insert(block, Slot::Ghost(self.ghost_entries));
        self.ghost.push_back((block, self.ghost_entries));
        self.remembered += 1;
        debug_assert!(
            Self::bytes(self.remembered) <= self.ghost_bytes,
            "the ghost over its budget"
        );
    }
}

impl Cache for S3Fifo {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        // A block must fit the small queue (libCacheSim's `can_insert`): when none does,
        // nothing is ever cached or remembered.
        if BLOCK > self.small_bytes {
            return false;
        }
        let from_ghost = match self.blocks.get_mut(&block) {
            Some(Slot::Cached(count)) => {
                *count = count.saturating_add(1);
                return true;
            }
            // Out of the ghost (its queue entry is skipped from now on), and in the cache
            // once room is made: the evictions below leave its slot alone.
            Some(slot) => {
                *slot = Slot::Cached(0);
                self.remembered -= 1;
                true
            }
            None => false,
        };
        while self.small.len() + self.main.len() >= self.capacity {
            self.evict();
        }
        if from_ghost {
            self.main.push_back(block);
            return false;
        }
        if BLOCK == self.small_bytes {
            // libCacheSim refuses a block the size of the small queue here.
            return false;
        }
        if !self.evicted && Self::bytes(self.small.len()) >= self.small_bytes {
            self.main.push_back(block);
        } else {
            self.small.push_back(block);
        }
        self.blocks.insert(block, Slot::Cached(0));
        debug_assert!(
            self.small.len() + self.main.len() <= self.capacity,
            "S3-FIFO over its capacity"
        );
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.count(block).is_some()
    }

    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of 20 blocks: a small queue of 2 blocks (8,192 bytes), the main queue 18, the
    /// ghost 18.
    fn twenty() -> S3Fifo {
        let c = S3Fifo::new(20);
        assert_eq!(
            (c.small_bytes, c.main_bytes, c.ghost_bytes),
            (8192, 73728, 73728)
        );
        c
    }

    #[test]
    fn a_block_seen_once_is_filtered_out_to_the_ghost() {
        let mut c = twenty();
        // Before the first eviction: 2 blocks fill the small queue, the rest go to main.
        for b in 0..20 {
            assert!(!c.access(b));
        }
        assert_eq!(c.queues().0, vec![1, 0]);
        assert_eq!(c.queues().1.len(), 18);
        // Full: main is within its budget and the small queue holds blocks, so the small
        // queue's oldest (0, never hit) leaves for the ghost.
        assert!(!c.access(100));
        assert!(!c.contains(0) && c.remembers(0));
        assert_eq!(c.queues().0, vec![100, 1]);
        // 0 again: the ghost sends it straight to the main queue (after 1 leaves).
        assert!(!c.access(0));
        assert!(!c.remembers(0) && c.remembers(1));
        assert_eq!(c.queues().1[0], 0);
    }

    #[test]
    fn a_block_hit_twice_in_the_small_queue_moves_to_main() {
        let mut c = twenty();
        for b in 0..20 {
            c.access(b);
        }
        assert!(c.access(0) && c.access(0));
        // 0 (count 2) moves to main, 1 (count 0) leaves for the ghost.
        assert!(!c.access(100));
        assert!(c.contains(0) && !c.contains(1) && c.remembers(1));
        assert_eq!(c.queues().0, vec![100]);
        assert_eq!(c.queues().1[0], 0);
        assert_eq!(c.len(), 20);
    }

    #[test]
    fn main_gives_counted_blocks_another_round_with_one_less() {
        let mut c = twenty();
        for b in 0..20 {
            c.access(b);
        }
        // Main is over its budget once 0 moves in: the next eviction is from main, whose
        // oldest (2) has a count of 1 and goes round again; 3 (count 0) is evicted.
        assert!(c.access(0) && c.access(0) && c.access(2));
        c.access(100); // 0 to main (19 blocks there), 1 to the ghost
        c.access(101);
        assert!(c.contains(2) && !c.contains(3) && !c.remembers(3));
        assert_eq!(c.queues().1[0], 2);
        assert_eq!(c.count(2), Some(0));
    }

    #[test]
    fn a_cache_too_small_for_a_small_queue_holds_nothing() {
        // 5 blocks: a small queue of 2,048 bytes, less than a block.
        let mut c = S3Fifo::new(5);
        assert!(!c.access(1) && !c.access(1));
        assert!(c.is_empty());
    }
}
