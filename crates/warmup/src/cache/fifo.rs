//! First in, first out.

use super::{hash, Cache, NIL};

/// First in, first out: a hit changes nothing; a miss evicts the oldest insertion. The blocks
/// sit in a ring of slots, the next victim's under the hand; a hash table of slot indices
/// finds a block (as in [`super::Lru`]).
pub struct Fifo {
    capacity: usize,
    map: hashbrown::HashTable<u32>,
    blocks: Vec<u64>,
    hand: usize,
}

impl Fifo {
    pub fn new(capacity: usize) -> Fifo {
        assert!(
            capacity < NIL as usize,
            "capacity {capacity} blocks is too large"
        );
        Fifo {
            capacity,
            map: hashbrown::HashTable::with_capacity(capacity.min(1 << 24)),
            blocks: Vec::with_capacity(capacity.min(1 << 24)),
            hand: 0,
        }
    }
}

impl Cache for Fifo {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        let h = hash(block);
        let blocks = &self.blocks;
        if self.map.find(h, |&i| blocks[i as usize] == block).is_some() {
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        let i = if self.blocks.len() < self.capacity {
            self.blocks.push(block);
            self.blocks.len() - 1
        } else {
            let i = self.hand;
            let old = std::mem::replace(&mut self.blocks[i], block);
            self.map
                .find_entry(hash(old), |&j| j as usize == i)
                .expect("the oldest block is in the table")
                .remove();
            self.hand = (i + 1) % self.capacity;
            i
        };
        let blocks = &self.blocks;
        self.map
            .insert_unique(h, i as u32, |&j| hash(blocks[j as usize]));
        debug_assert_eq!(self.map.len(), self.blocks.len(), "one bucket per slot");
        false
    }

    fn contains(&self, block: u64) -> bool {
        let blocks = &self.blocks;
        self.map
            .find(hash(block), |&i| blocks[i as usize] == block)
            .is_some()
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
    fn fifo_ignores_hits_when_evicting() {
        let mut c = Fifo::new(2);
        c.access(1);
        c.access(2);
        assert!(c.access(1));
        c.access(3); // evicts 1, the oldest insertion, despite its hit
        assert!(!c.contains(1) && c.contains(2) && c.contains(3));
    }
}
