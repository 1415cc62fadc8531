//! SIEVE: a FIFO queue with a visited bit and a hand that stays where it stopped.

use super::list::{linked_by_field, Links, List};
use super::{hash, Cache, NIL};

/// SIEVE (Zhang et al., NSDI '24): blocks in insertion order, each with a visited bit that a
/// hit sets. A miss on a full cache moves a hand from where it last stopped (first: the oldest
/// block) towards newer blocks, wrapping to the oldest, clearing set bits, and evicts the first
/// block whose bit is clear; the hand stays at the next newer block. A new block goes in as the
/// newest, its bit clear. Unlike CLOCK, a block that survives stays in place: new blocks never
/// pass it.
pub struct Sieve {
    capacity: usize,
    map: hashbrown::HashTable<u32>,
    entries: Vec<SieveEntry>,
    /// Newest insertion first.
    order: List,
    /// Where the hand stopped (`NIL`: start at the oldest).
    hand: u32,
}

#[derive(Clone, Copy)]
struct SieveEntry {
    block: u64,
    links: Links,
    visited: bool,
}

linked_by_field!(SieveEntry);

impl Sieve {
    /// A cache of `capacity` blocks; more than `u32::MAX - 1` is refused.
    pub fn new(capacity: usize) -> Sieve {
        assert!(
            capacity < NIL as usize,
            "capacity {capacity} blocks is too large"
        );
        let reserve = capacity.min(1 << 24);
        Sieve {
            capacity,
            map: hashbrown::HashTable::with_capacity(reserve),
            entries: Vec::with_capacity(reserve),
            order: List::EMPTY,
            hand: NIL,
        }
    }

    fn find(&self, block: u64) -> Option<u32> {
        let entries = &self.entries;
        self.map
            .find(hash(block), |&i| entries[i as usize].block == block)
            .copied()
    }

    /// Blocks from newest to oldest insertion.
    pub fn insertion_order(&self) -> Vec<u64> {
        let entries = &self.entries;
        self.order
            .slots(entries)
            .map(|i| entries[i as usize].block)
            .collect()
    }

    /// The slot of the block the hand evicts, unlinked and out of the table.
    fn evict(&mut self) -> u32 {
        let mut i = if self.hand == NIL {
            self.order.oldest
        } else {
            self.hand
        };
        while self.entries[i as usize].visited {
            let e = &mut self.entries[i as usize];
            e.visited = false;
            i = match e.links.newer {
                NIL => self.order.oldest,
                newer => newer,
            };
        }
        let SieveEntry { block, links, .. } = self.entries[i as usize];
        self.hand = links.newer;
        self.order.unlink(&mut self.entries, i);
        self.map
            .find_entry(hash(block), |&j| j == i)
            .expect("the evicted block is in the table")
            .remove();
        i
    }
}

impl Cache for Sieve {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        if let Some(i) = self.find(block) {
            self.entries[i as usize].visited = true;
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        let entry = SieveEntry {
            block,
            links: Links::NONE,
            visited: false,
        };
        let i = if self.entries.len() == self.capacity {
            let i = self.evict();
            self.entries[i as usize] = entry;
            i
        } else {
            self.entries.push(entry);
            self.entries.len() as u32 - 1
        };
        self.order.push_newest(&mut self.entries, i);
        debug_assert!(self.map.len() < self.capacity, "SIEVE over its capacity");
        let entries = &self.entries;
        self.map
            .insert_unique(hash(block), i, |&j| hash(entries[j as usize].block));
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.find(block).is_some()
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sieve_keeps_visited_blocks_in_place_and_the_hand_moves_on() {
        let mut c = Sieve::new(3);
        for b in [1, 2, 3] {
            assert!(!c.access(b));
        }
        assert!(c.access(2));
        // The hand starts at the oldest, 1 (not visited): evicted; the hand stays at 2.
        assert!(!c.access(4));
        assert_eq!(c.insertion_order(), vec![4, 3, 2]);
        // 2 is visited: its bit cleared, the hand moves on to 3, evicted. 2 stays where it
        // was, older than every block inserted since.
        assert!(!c.access(5));
        assert_eq!(c.insertion_order(), vec![5, 4, 2]);
        // The hand is at 4 now, not back at the oldest (2, whose bit is clear).
        assert!(!c.access(6));
        assert_eq!(c.insertion_order(), vec![6, 5, 2]);
        assert!(c.contains(2) && !c.contains(4) && c.len() == 3);
    }

    #[test]
    fn sieve_hand_wraps_from_the_newest_to_the_oldest() {
        let mut c = Sieve::new(2);
        c.access(1);
        c.access(2);
        assert!(c.access(1) && c.access(2));
        // Both visited: the hand clears 1 and 2, wraps to 1 and evicts it; it stays at 2.
        assert!(!c.access(3));
        assert_eq!(c.insertion_order(), vec![3, 2]);
        assert!(!c.access(4));
        assert_eq!(c.insertion_order(), vec![4, 3]);
    }

    #[test]
    fn sieve_of_one_block_replaces_it_even_when_visited() {
        let mut c = Sieve::new(1);
        assert!(!c.access(1));
        assert!(c.access(1));
        assert!(!c.access(2));
        assert_eq!(c.insertion_order(), vec![2]);
    }
}
