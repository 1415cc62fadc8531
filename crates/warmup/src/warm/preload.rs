//! The pre-load: the snapshot of the planned blocks loaded before the first request, reads
//! issued a window at a time (held while the driver asks), and their answers filling the cache
//! under tickets (coherence 1).

use super::*;

impl WarmCache {
    pub(super) fn hold_preload_step(&mut self, hold: bool) {
        self.preload_held = hold;
    }

    pub(super) fn load_snapshot_step(&mut self, now: u64) {
        for (block, page) in std::mem::take(&mut self.preload.snapshot) {
            if self.cache.fill_if_absent(block, &page) {
                self.preload.loaded_blocks += 1;
            }
        }
        self.preload.finish_if_done(now);
    }

    pub(super) fn issue_preload_reads(&mut self) {
        let p = &mut self.preload;
        while p.outstanding < PRELOAD_DEPTH && p.next < p.blocks.len() {
            let start = p.blocks[p.next];
            let mut n = 1;
            while p.next + (n as usize) < p.blocks.len()
                && p.blocks[p.next + n as usize] == start + n
                && n < PRELOAD_READ_BLOCKS
            {
                n += 1;
            }
            p.next += n as usize;
            p.outstanding += 1;
            self.reads_in_flight += 1;
            self.out.push_back(CacheIo::VolumeRead {
                offset_bytes: start * BLOCK,
                length_bytes: n * BLOCK,
                ticket: Ticket {
                    seq: self.write_seq,
                },
            });
        }
    }

    pub(super) fn preload_done_step(
        &mut self,
        now: u64,
        offset: u64,
        data: Option<&[u8]>,
        ticket: Ticket,
    ) {
        debug_assert!(
            self.preload.outstanding > 0 && self.reads_in_flight > 0,
            "a pre-load read answered with none in flight"
        );
        debug_assert!(
            offset.is_multiple_of(BLOCK)
                && data.is_none_or(|d| (d.len() as u64).is_multiple_of(BLOCK)),
            "a pre-load read of part of a block at {offset}"
        );
        self.preload.outstanding -= 1;
        self.reads_in_flight -= 1;
        if let Some(data) = data {
            let first = offset / BLOCK;
            for (k, page) in data.chunks_exact(BLOCK as usize).enumerate() {
                let b = first + k as u64;
                if self.written_after(b, ticket) {
                    self.preload.skipped_blocks += 1;
                } else if self.cache.fill_if_absent(b, page) {
                    self.preload.loaded_blocks += 1;
                }
            }
        }
        self.forget_writes_if_idle();
        self.preload.finish_if_done(now);
    }
}
