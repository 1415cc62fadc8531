//! Least recently used.

use super::list::{linked_by_field, Links, List};
use super::{hash, Cache, NIL};

/// Least recently used. Entries live in one array, linked into a recency list by index (no
/// allocation per access; a hit touches one entry and its two neighbours); a hash table of
/// entry indices (4 bytes a bucket; a block's number is read from its entry) finds a block's
/// entry: half the memory of a map that holds the numbers too, which matters when nearly every
/// access misses into a table larger than the caches.
pub struct Lru {
    capacity: usize,
    map: hashbrown::HashTable<u32>,
    entries: Vec<Entry>,
    /// Most recent first.
    recency: List,
}

#[derive(Clone, Copy)]
struct Entry {
    block: u64,
    links: Links,
}

linked_by_field!(Entry);

impl Lru {
    /// A cache of `capacity` blocks; more than `u32::MAX - 1` is refused.
    pub fn new(capacity: usize) -> Lru {
        Lru::with_reserve(capacity, capacity.min(1 << 24))
    }

    /// A cache of `capacity` blocks whose structures start small and grow as blocks arrive:
    /// for the lab's many short-lived caches (a day each), most of which never fill, where
    /// reserving the whole capacity up front costs more than the simulation.
    pub fn growing(capacity: usize) -> Lru {
        Lru::with_reserve(capacity, capacity.min(1 << 12))
    }

    fn with_reserve(capacity: usize, reserve: usize) -> Lru {
        assert!(
            capacity < NIL as usize,
            "capacity {capacity} blocks is too large"
        );
        let map = hashbrown::HashTable::with_capacity(reserve);
        Lru {
            capacity,
            map,
            entries: Vec::with_capacity(reserve),
            recency: List::EMPTY,
        }
    }

    /// Bytes the cache's structures hold: the hash table's allocation (its buckets and
    /// control bytes) and the entries, by their capacity.
    pub fn memory_bytes(&self) -> usize {
        self.map.allocation_size() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Blocks from most to least recently used.
    pub fn recency_order(&self) -> Vec<u64> {
        let entries = &self.entries;
        self.recency
            .slots(entries)
            .map(|i| entries[i as usize].block)
            .collect()
    }
}

impl Lru {
    /// The entry slot holding `block`, without touching its recency. Slots are dense
    /// (`0..capacity`) and a block keeps its slot while it stays cached, so callers can keep
    /// per-block data in an array indexed by slot.
    pub fn peek_slot(&self, block: u64) -> Option<u32> {
        let entries = &self.entries;
        self.map
            .find(hash(block), |&i| entries[i as usize].block == block)
            .copied()
    }

    /// [`Cache::access`], also returning the block's slot: on a miss the slot is the evicted
    /// block's (or a new one while the cache fills). `capacity` must be positive.
    #[inline]
    pub fn access_slot(&mut self, block: u64) -> (u32, bool) {
        assert!(self.capacity > 0, "a cache of no blocks has no slots");
        let h = hash(block);
        let entries = &self.entries;
        if let Some(&i) = self.map.find(h, |&i| entries[i as usize].block == block) {
            self.recency.touch(&mut self.entries, i);
            return (i, true);
        }
        let i = if self.entries.len() == self.capacity {
            // Reuse the least recent entry's slot. Its bucket goes first: the table's values
            // are then distinct slots, so the bucket holding `i` under the old block's hash is
            // the victim's (found without reading an entry).
            let i = self.recency.oldest;
            self.recency.unlink(&mut self.entries, i);
            let old = std::mem::replace(&mut self.entries[i as usize].block, block);
            let victim = self.map.find_entry(hash(old), |&j| j == i);
            victim
                .expect("the least recent block is in the table")
                .remove();
            i
        } else {
            self.entries.push(Entry {
                block,
                links: Links::NONE,
            });
            self.entries.len() as u32 - 1
        };
        // The new block's bucket is in the cache line the lookup above read; growing reads
        // every entry's block, the new one's included.
        let entries = &self.entries;
        self.map
            .insert_unique(h, i, |&j| hash(entries[j as usize].block));
        self.recency.push_newest(&mut self.entries, i);
        (i, false)
    }
}

impl Cache for Lru {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        if self.capacity == 0 {
            return false;
        }
        self.access_slot(block).1
    }

    fn contains(&self, block: u64) -> bool {
        self.peek_slot(block).is_some()
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
    fn lru_evicts_the_least_recent_and_a_hit_refreshes() {
        let mut c = Lru::new(2);
        assert!(!c.access(1));
        assert!(!c.access(2));
        assert!(c.access(1)); // 1 is now the most recent
        assert!(!c.access(3)); // evicts 2
        assert!(!c.contains(2));
        assert_eq!(c.recency_order(), vec![3, 1]);
        assert!(c.access(1));
        assert_eq!(c.len(), 2);
    }
}
