//! Requests through the cache: reads (hits, or misses under a ticket), writes arriving and
//! answered (filling blocks only when no other write to them was in flight: coherence 3 and
//! 4), zeroes, and the once-a-second tick.

use super::*;

impl WarmCache {
    pub(super) fn issue(&mut self) -> Ticket {
        self.reads_in_flight += 1;
        Ticket {
            seq: self.write_seq,
        }
    }

    pub(super) fn written_after(&self, block: u64, ticket: Ticket) -> bool {
        self.options.safeguards.tickets
            && self.written_at.get(&block).is_some_and(|s| *s > ticket.seq)
    }

    pub(super) fn forget_writes_if_idle(&mut self) {
        if self.reads_in_flight == 0 {
            self.written_at.clear();
        }
        debug_assert!(
            self.written_at.values().all(|&s| s <= self.write_seq),
            "a block stamped after the last write event"
        );
    }

    /// A write event (arrival or completion) on `length` bytes at `offset`.
    pub(super) fn stamp(&mut self, offset: u64, length: u64) {
        self.write_seq += 1;
        if self.reads_in_flight == 0 {
            return;
        }
        let (first, n) = blocks_of(offset, length);
        for b in first..first + n {
            self.written_at.insert(b, self.write_seq);
        }
    }

    pub(super) fn read_step(&mut self, offset: u64, length: u64) -> Result<Vec<u8>, Ticket> {
        let (first, n) = blocks_of(offset, length);
        let c = &mut self.counters;
        c.read_requests += 1;
        c.read_blocks += n;
        if n > 0 && self.cache.holds(first, n) {
            let mut out = Vec::with_capacity((n * BLOCK) as usize);
            self.cache.read(first, n, &mut out);
            c.read_hits += 1;
            c.hit_blocks += n;
            // An unaligned read: its bytes of the whole blocks.
            let skip = (offset - first * BLOCK) as usize;
            debug_assert!(
                skip + length as usize <= out.len(),
                "a hit of {length} bytes at {offset} past the blocks read"
            );
            out.truncate(skip + length as usize);
            out.drain(..skip);
            debug_assert_eq!(out.len() as u64, length, "a hit of the wrong length");
            return Ok(out);
        }
        // A read the cache holds only part of is read whole from the volume: no block of it
        // counts as a hit.
        Err(self.issue())
    }

    pub(super) fn read_done_step(&mut self, offset: u64, data: Option<&[u8]>, ticket: Ticket) {
        debug_assert!(
            self.reads_in_flight > 0,
            "a read answered with none in flight"
        );
        debug_assert!(ticket.seq <= self.write_seq, "a ticket from the future");
        self.reads_in_flight -= 1;
        if let Some(data) = data {
            let (first, n, skip) = whole_blocks(offset, data.len() as u64);
            if n > 0 {
                let pages = &data[skip as usize..(skip + n * BLOCK) as usize];
                let mut overtaken = false;
                for (k, page) in pages.chunks_exact(BLOCK as usize).enumerate() {
                    let b = first + k as u64;
                    if self.written_after(b, ticket) {
                        overtaken = true;
                    } else {
                        self.cache.fill(b, page);
                    }
                }
                // A write that overtook the read is logged already, and the read's data may be
                // older: then log the read without its data.
                self.record(
                    Entry {
                        block: first,
                        blocks: n as u32,
                        write: false,
                    },
                    (!overtaken).then_some(pages),
                );
            }
        }
        self.forget_writes_if_idle();
    }

    pub(super) fn write_arrived_step(&mut self, offset: u64, length: u64) {
        self.stamp(offset, length);
        let (first, n) = blocks_of(offset, length);
        for b in first..first + n {
            let (count, contested) = self.writes_in_flight.entry(b).or_insert((0, false));
            *count += 1;
            *contested |= *count > 1;
        }
    }

    /// A write's answer: the blocks of `[first, first + n)` it shared with another write in
    /// flight at once (safeguard 4), as runs; its own count leaves each block.
    pub(super) fn write_left(&mut self, first: u64, n: u64) -> Vec<(u64, u64)> {
        let mut contested: Vec<(u64, u64)> = Vec::new();
        for b in first..first + n {
            let Some((count, shared)) = self.writes_in_flight.get_mut(&b) else {
                continue;
            };
            let shared = *shared;
            debug_assert!(*count > 0, "block {b}: a write left that never arrived");
            *count -= 1;
            if *count == 0 {
                self.writes_in_flight.remove(&b);
            }
            if shared && self.options.safeguards.concurrent_writes {
                match contested.last_mut() {
                    Some((lo, len)) if *lo + *len == b => *len += 1,
                    _ => contested.push((b, 1)),
                }
            }
        }
        contested
    }

    /// Blocks changed in a way the log cannot hold (partly, by zeroes, or by a write that
    /// failed): invalidated, and logged without data so that a pre-load reads them from the
    /// volume rather than use an older logged copy.
    pub(super) fn changed_without_data(&mut self, first: u64, n: u64) {
        if n == 0 || !self.options.safeguards.changes_without_data {
            return;
        }
        self.cache.invalidate(first, n);
        debug_assert!(
            !self.cache.holds(first, 1) && !self.cache.holds(first + n - 1, 1),
            "blocks {first}+{n} still cached after they changed without data"
        );
        self.record(
            Entry {
                block: first,
                blocks: n as u32,
                write: true,
            },
            None,
        );
    }

    pub(super) fn zeroes_done_step(&mut self, offset: u64, length: u64) {
        self.stamp(offset, length);
        let (first, n) = blocks_of(offset, length);
        self.write_left(first, n);
        self.changed_without_data(first, n);
    }

    pub(super) fn write_done_step(&mut self, offset: u64, data: &[u8], ok: bool) {
        self.stamp(offset, data.len() as u64);
        let (first, n) = blocks_of(offset, data.len() as u64);
        let contested = self.write_left(first, n);
        if !ok {
            self.changed_without_data(first, n);
            return;
        }
        let (whole, count, skip) = whole_blocks(offset, data.len() as u64);
        debug_assert!(
            whole >= first && whole + count <= first + n,
            "whole blocks {whole}+{count} outside the write's {first}+{n}"
        );
        if count < n {
            // Partial blocks at an end: the whole range without data first, so that the
            // whole blocks' entry below is the newer one for them.
            self.changed_without_data(first, n);
        }
        if count > 0 {
            let pages = &data[skip as usize..(skip + count * BLOCK) as usize];
            self.cache.fill(whole, pages);
            self.record(
                Entry {
                    block: whole,
                    blocks: count as u32,
                    write: true,
                },
                Some(pages),
            );
        }
        // Blocks another write shared: which one the volume keeps is not known here.
        for (lo, len) in contested {
            self.changed_without_data(lo, len);
        }
    }

    pub(super) fn handle_tick_step(&mut self, now: u64) {
        self.counters.tick(now / NANOS_PER_S);
    }
}
