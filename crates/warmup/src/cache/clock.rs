//! CLOCK, second chance.

use super::{hash, Cache, NIL};

/// CLOCK (second chance): blocks sit in a ring with a reference bit, set by a hit. A miss on a
/// full cache advances the hand, clearing set bits, to the first block whose bit is clear and
/// replaces it; a new block starts with its bit clear.
pub struct Clock {
    capacity: usize,
    /// Slot indices by block (4 bytes a bucket; the block is read from `blocks`), as in
    /// [`super::Lru`].
    map: hashbrown::HashTable<u32>,
    blocks: Vec<u64>,
    referenced: Vec<bool>,
    hand: usize,
}

impl Clock {
    pub fn new(capacity: usize) -> Clock {
        assert!(
            capacity < NIL as usize,
            "capacity {capacity} blocks is too large"
        );
        Clock {
            capacity,
            map: hashbrown::HashTable::with_capacity(capacity.min(1 << 24)),
            blocks: Vec::with_capacity(capacity.min(1 << 24)),
            referenced: Vec::with_capacity(capacity.min(1 << 24)),
            hand: 0,
        }
    }
}

impl Cache for Clock {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        let h = hash(block);
        let blocks = &self.blocks;
        if let Some(&i) = self.map.find(h, |&i| blocks[i as usize] == block) {
            self.referenced[i as usize] = true;
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        let i = if self.blocks.len() < self.capacity {
            self.blocks.push(block);
            self.referenced.push(false);
            self.blocks.len() - 1
        } else {
            while self.referenced[self.hand] {
                self.referenced[self.hand] = false;
                self.hand = (self.hand + 1) % self.capacity;
            }
            let i = self.hand;
            // The victim's bucket is the one holding its slot (slots are distinct).
            let old = std::mem::replace(&mut self.blocks[i], block);
            self.map
                .find_entry(hash(old), |&j| j as usize == i)
                .expect("the victim is in the table")
                .remove();
            self.hand = (self.hand + 1) % self.capacity;
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
    fn clock_gives_a_referenced_block_a_second_chance() {
        let mut c = Clock::new(2);
        c.access(1);
        c.access(2);
        assert!(c.access(1)); // 1's bit set
        c.access(3); // hand clears 1, evicts 2
        assert!(c.contains(1) && !c.contains(2) && c.contains(3));
        c.access(4); // 1's bit is clear now: evicted
        assert!(!c.contains(1) && c.contains(3) && c.contains(4));
    }
}
