//! Block caches. A cache holds at most `capacity` block numbers; [`Cache::access`] touches a
//! block (a hit refreshes it as the policy says, a miss inserts it, evicting one block when
//! full) and tells whether it was present.

use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::VecDeque;

/// A replacement policy over block numbers.
pub trait Cache {
    /// Touches `block`; returns whether it was cached before.
    fn access(&mut self, block: u64) -> bool;
    fn contains(&self, block: u64) -> bool;
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The policies, by name (`lru`, `fifo`, `clock`, `sieve`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Lru,
    Fifo,
    Clock,
    Sieve,
}

impl Policy {
    /// Every policy, in the order benchmarks print them.
    pub const ALL: [Policy; 4] = [Policy::Lru, Policy::Fifo, Policy::Clock, Policy::Sieve];
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "lru" => Ok(Policy::Lru),
            "fifo" => Ok(Policy::Fifo),
            "clock" => Ok(Policy::Clock),
            "sieve" => Ok(Policy::Sieve),
            other => Err(format!(
                "unknown cache policy {other:?} (lru, fifo, clock, sieve)"
            )),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Policy::Lru => "lru",
            Policy::Fifo => "fifo",
            Policy::Clock => "clock",
            Policy::Sieve => "sieve",
        })
    }
}

const NIL: u32 = u32::MAX;

#[inline]
fn hash(block: u64) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(block)
}

/// Least recently used. Entries live in one array, linked into a recency list by index (no
/// allocation per access; a hit touches one entry and its two neighbours); a hash table of
/// entry indices (4 bytes a bucket; a block's number is read from its entry) finds a block's
/// entry: half the memory of a map that holds the numbers too, which matters when nearly every
/// access misses into a table larger than the caches.
pub struct Lru {
    capacity: usize,
    map: hashbrown::HashTable<u32>,
    entries: Vec<Entry>,
    /// Most and least recently used entries.
    head: u32,
    tail: u32,
}

#[derive(Clone, Copy)]
struct Entry {
    block: u64,
    prev: u32,
    next: u32,
}

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
            head: NIL,
            tail: NIL,
        }
    }

    #[inline]
    fn unlink(&mut self, i: u32) {
        let Entry { prev, next, .. } = self.entries[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
    }

    #[inline]
    fn push_front(&mut self, i: u32) {
        let head = self.head;
        let e = &mut self.entries[i as usize];
        e.prev = NIL;
        e.next = head;
        if head != NIL {
            self.entries[head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Bytes the cache's structures hold: the hash table's allocation (its buckets and
    /// control bytes) and the entries, by their capacity.
    pub fn memory_bytes(&self) -> usize {
        self.map.allocation_size() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Blocks from most to least recently used.
    pub fn recency_order(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.map.len());
        let mut i = self.head;
        while i != NIL {
            out.push(self.entries[i as usize].block);
            i = self.entries[i as usize].next;
        }
        out
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
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            return (i, true);
        }
        let i = if self.entries.len() == self.capacity {
            // Reuse the least recent entry's slot. Its bucket goes first: the table's values
            // are then distinct slots, so the bucket holding `i` under the old block's hash is
            // the victim's (found without reading an entry).
            let i = self.tail;
            self.unlink(i);
            let old = std::mem::replace(&mut self.entries[i as usize].block, block);
            let victim = self.map.find_entry(hash(old), |&j| j == i);
            victim
                .expect("the least recent block is in the table")
                .remove();
            i
        } else {
            self.entries.push(Entry {
                block,
                prev: NIL,
                next: NIL,
            });
            self.entries.len() as u32 - 1
        };
        // The new block's bucket is in the cache line the lookup above read; growing reads
        // every entry's block, the new one's included.
        let entries = &self.entries;
        self.map
            .insert_unique(h, i, |&j| hash(entries[j as usize].block));
        self.push_front(i);
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

/// First in, first out: a hit changes nothing; a miss evicts the oldest insertion.
pub struct Fifo {
    capacity: usize,
    map: rustc_hash::FxHashSet<u64>,
    order: VecDeque<u64>,
}

impl Fifo {
    pub fn new(capacity: usize) -> Fifo {
        Fifo {
            capacity,
            map: Default::default(),
            order: VecDeque::new(),
        }
    }
}

impl Cache for Fifo {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        if self.map.contains(&block) {
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.order.len() == self.capacity {
            let oldest = self.order.pop_front().expect("full");
            self.map.remove(&oldest);
        }
        self.order.push_back(block);
        self.map.insert(block);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains(&block)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

/// CLOCK (second chance): blocks sit in a ring with a reference bit, set by a hit. A miss on a
/// full cache advances the hand, clearing set bits, to the first block whose bit is clear and
/// replaces it; a new block starts with its bit clear.
pub struct Clock {
    capacity: usize,
    map: FxHashMap<u64, u32>,
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
            map: FxHashMap::default(),
            blocks: Vec::new(),
            referenced: Vec::new(),
            hand: 0,
        }
    }
}

impl Cache for Clock {
    #[inline]
    fn access(&mut self, block: u64) -> bool {
        if let Some(&i) = self.map.get(&block) {
            self.referenced[i as usize] = true;
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.blocks.len() < self.capacity {
            self.map.insert(block, self.blocks.len() as u32);
            self.blocks.push(block);
            self.referenced.push(false);
            return false;
        }
        while self.referenced[self.hand] {
            self.referenced[self.hand] = false;
            self.hand = (self.hand + 1) % self.capacity;
        }
        let i = self.hand;
        self.map.remove(&self.blocks[i]);
        self.blocks[i] = block;
        self.map.insert(block, i as u32);
        self.hand = (self.hand + 1) % self.capacity;
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

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
    /// The newest and oldest blocks, and the hand (`NIL`: start at the oldest).
    newest: u32,
    oldest: u32,
    hand: u32,
}

#[derive(Clone, Copy)]
struct SieveEntry {
    block: u64,
    newer: u32,
    older: u32,
    visited: bool,
}

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
            newest: NIL,
            oldest: NIL,
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
        let mut out = Vec::with_capacity(self.map.len());
        let mut i = self.newest;
        while i != NIL {
            out.push(self.entries[i as usize].block);
            i = self.entries[i as usize].older;
        }
        out
    }

    /// The slot of the block the hand evicts, unlinked and out of the table.
    fn evict(&mut self) -> u32 {
        let mut i = if self.hand == NIL {
            self.oldest
        } else {
            self.hand
        };
        while self.entries[i as usize].visited {
            let e = &mut self.entries[i as usize];
            e.visited = false;
            i = if e.newer == NIL { self.oldest } else { e.newer };
        }
        let SieveEntry {
            block,
            newer,
            older,
            ..
        } = self.entries[i as usize];
        self.hand = newer;
        if newer == NIL {
            self.newest = older;
        } else {
            self.entries[newer as usize].older = older;
        }
        if older == NIL {
            self.oldest = newer;
        } else {
            self.entries[older as usize].newer = newer;
        }
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
            newer: NIL,
            older: self.newest,
            visited: false,
        };
        let i = if self.entries.len() == self.capacity {
            let i = self.evict();
            // The eviction may have unlinked the newest block.
            self.entries[i as usize] = SieveEntry {
                older: self.newest,
                ..entry
            };
            i
        } else {
            self.entries.push(entry);
            self.entries.len() as u32 - 1
        };
        match self.newest {
            NIL => self.oldest = i,
            newest => self.entries[newest as usize].newer = i,
        }
        self.newest = i;
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

/// A cache of `policy` holding `capacity` blocks.
pub fn build(policy: Policy, capacity: usize) -> Box<dyn Cache> {
    match policy {
        Policy::Lru => Box::new(Lru::new(capacity)),
        Policy::Fifo => Box::new(Fifo::new(capacity)),
        Policy::Clock => Box::new(Clock::new(capacity)),
        Policy::Sieve => Box::new(Sieve::new(capacity)),
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

    #[test]
    fn fifo_ignores_hits_when_evicting() {
        let mut c = Fifo::new(2);
        c.access(1);
        c.access(2);
        assert!(c.access(1));
        c.access(3); // evicts 1, the oldest insertion, despite its hit
        assert!(!c.contains(1) && c.contains(2) && c.contains(3));
    }

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

    #[test]
    fn a_zero_capacity_cache_never_hits() {
        for policy in Policy::ALL {
            let mut c = build(policy, 0);
            assert!(!c.access(7) && !c.access(7), "{policy}");
            assert!(c.is_empty());
        }
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!("clock".parse::<Policy>().unwrap(), Policy::Clock);
        assert!("arc".parse::<Policy>().is_err());
    }
}
