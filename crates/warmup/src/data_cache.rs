//! The DRAM block cache of the volume server (Bonfire's storage-level cache): the same LRU as
//! the simulator's [`Lru`], with each block's 4 KiB of data in an array indexed by the LRU's
//! slot. Sans I/O: the volume server decides when to look up, fill and invalidate.
//!
//! A cached block may be marked invalid (a partial write changed it): it then misses, and the
//! next fill of that block reuses its slot.

use crate::cache::Lru;
use crate::sim::BLOCK_BYTES;

pub struct DataCache {
    lru: Lru,
    data: Vec<u8>,
    valid: Vec<bool>,
    /// Per slot, the number of the last change to its bytes, from one count over the whole
    /// cache: a number names one filling of one slot, so a checker that found a block's page
    /// good under a number need not read it again while the number stays
    /// ([`DataCache::valid_pages_numbered`]).
    changes: Vec<u64>,
    next_change: u64,
}

impl DataCache {
    /// A cache of `blocks` 4 KiB blocks (at least one). The data array is allocated zeroed,
    /// which the operating system maps lazily.
    pub fn new(blocks: usize) -> DataCache {
        let blocks = blocks.max(1);
        DataCache {
            lru: Lru::new(blocks),
            data: vec![0u8; blocks * BLOCK_BYTES as usize],
            valid: vec![false; blocks],
            changes: vec![0; blocks],
            next_change: 1,
        }
    }

    pub fn capacity_blocks(&self) -> usize {
        self.valid.len()
    }

    /// Blocks with a slot, valid or not.
    pub fn len(&self) -> usize {
        use crate::cache::Cache;
        self.lru.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot's bytes, to change: every change is numbered.
    fn slot_bytes(&mut self, slot: u32) -> &mut [u8] {
        self.changes[slot as usize] = self.next_change;
        self.next_change += 1;
        let at = slot as usize * BLOCK_BYTES as usize;
        &mut self.data[at..at + BLOCK_BYTES as usize]
    }

    /// Whether every block of `first..first + n` is cached and valid (no recency change).
    pub fn holds(&self, first: u64, n: u64) -> bool {
        (first..first + n).all(|b| {
            self.lru
                .peek_slot(b)
                .is_some_and(|s| self.valid[s as usize])
        })
    }

    /// Copies `n` blocks from `first` into `out` and makes them the most recent; `false` (and
    /// nothing copied) unless all are cached and valid.
    pub fn read(&mut self, first: u64, n: u64, out: &mut Vec<u8>) -> bool {
        if !self.holds(first, n) {
            return false;
        }
        let before = out.len();
        for b in first..first + n {
            let (slot, hit) = self.lru.access_slot(b);
            debug_assert!(hit);
            let at = slot as usize * BLOCK_BYTES as usize;
            out.extend_from_slice(&self.data[at..at + BLOCK_BYTES as usize]);
        }
        debug_assert_eq!((out.len() - before) as u64, n * BLOCK_BYTES);
        true
    }

    /// Stores `data` (whole blocks) from block `first`, replacing what was cached.
    pub fn fill(&mut self, first: u64, data: &[u8]) {
        debug_assert!(
            (data.len() as u64).is_multiple_of(BLOCK_BYTES),
            "a fill of part of a block ({} bytes)",
            data.len()
        );
        for (k, page) in data.chunks_exact(BLOCK_BYTES as usize).enumerate() {
            let (slot, _) = self.lru.access_slot(first + k as u64);
            self.slot_bytes(slot).copy_from_slice(page);
            self.valid[slot as usize] = true;
        }
    }

    /// Stores a block only if it is not cached (a pre-load must not replace newer contents).
    pub fn fill_if_absent(&mut self, block: u64, page: &[u8]) -> bool {
        if self
            .lru
            .peek_slot(block)
            .is_some_and(|s| self.valid[s as usize])
        {
            return false;
        }
        self.fill(block, page);
        true
    }

    /// Marks `first..first + n` invalid where cached.
    pub fn invalidate(&mut self, first: u64, n: u64) {
        for b in first..first + n {
            if let Some(s) = self.lru.peek_slot(b) {
                self.valid[s as usize] = false;
            }
        }
    }

    /// The cached, valid blocks and their contents, most recent first.
    pub fn valid_pages(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.valid_pages_numbered().map(|(b, _, page)| (b, page))
    }

    /// The cached, valid blocks, each with the number of its page's last change (the same
    /// number, the same bytes; never the same number for two changes) and its contents, most
    /// recent first.
    pub fn valid_pages_numbered(&self) -> impl Iterator<Item = (u64, u64, &[u8])> {
        self.lru.recency_order().into_iter().filter_map(|b| {
            let s = self.lru.peek_slot(b)? as usize;
            let at = s * BLOCK_BYTES as usize;
            self.valid[s].then(|| {
                (
                    b,
                    self.changes[s],
                    &self.data[at..at + BLOCK_BYTES as usize],
                )
            })
        })
    }

    /// Cached and valid blocks.
    pub fn valid_blocks(&self) -> usize {
        self.valid.iter().filter(|v| **v).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_back_evicted_in_lru_order_and_invalidated() {
        let mut c = DataCache::new(2);
        let page = |v: u8| vec![v; 4096];
        c.fill(10, &page(1));
        c.fill(11, &page(2));
        let mut out = Vec::new();
        assert!(c.read(10, 1, &mut out));
        assert_eq!(out, page(1));
        // 11 is now the least recent: filling 12 evicts it.
        c.fill(12, &page(3));
        assert!(!c.holds(11, 1));
        assert!(c.holds(10, 1) && c.holds(12, 1));
        out.clear();
        assert!(!c.read(10, 2, &mut out), "11 is gone");
        assert!(out.is_empty());
        c.invalidate(12, 1);
        assert!(!c.holds(12, 1));
        assert_eq!(c.valid_blocks(), 1);
        // A pre-load does not replace a cached block, but fills an invalid one.
        assert!(!c.fill_if_absent(10, &page(9)));
        assert!(c.fill_if_absent(12, &page(4)));
        out.clear();
        assert!(c.read(10, 1, &mut out) && out == page(1));
        out.clear();
        assert!(c.read(12, 1, &mut out) && out == page(4));
    }

    #[test]
    fn every_change_of_a_page_gets_a_new_number() {
        let mut c = DataCache::new(2);
        let numbers = |c: &DataCache| -> Vec<(u64, u64)> {
            c.valid_pages_numbered().map(|(b, n, _)| (b, n)).collect()
        };
        c.fill(10, &[1; 4096]);
        c.fill(11, &[2; 4096]);
        let first = numbers(&c);
        let mut out = Vec::new();
        assert!(c.read(10, 1, &mut out));
        let mut after_read = numbers(&c);
        after_read.sort();
        let mut sorted = first.clone();
        sorted.sort();
        assert_eq!(after_read, sorted, "a read changes no number");
        // The same bytes again still count as a change; an evicted slot's new block too.
        c.fill(11, &[2; 4096]);
        c.fill(12, &[3; 4096]);
        let now = numbers(&c);
        let all: Vec<u64> = first.iter().chain(&now).map(|(_, n)| *n).collect();
        let mut distinct = all.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{first:?} then {now:?}");
        c.invalidate(12, 1);
        assert!(c.fill_if_absent(12, &[4; 4096]));
        let refilled = numbers(&c)
            .into_iter()
            .find(|(b, _)| *b == 12)
            .map(|(_, n)| n);
        assert!(refilled.is_some_and(|n| !all.contains(&n)), "{refilled:?}");
    }
}
