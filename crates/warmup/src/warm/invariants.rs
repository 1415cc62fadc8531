//! What must hold after every call into the warm cache, checked in debug builds (the seeded
//! schedules run with them):
//!
//! - the cache holds at most its capacity;
//! - write stamps are kept only while reads are in flight (a ticket is compared only with
//!   writes after it), none newer than the last write event, and the pre-load's reads are
//!   among the reads in flight;
//! - a block counted among writes in flight has at least one;
//! - with ordered log writes (safeguard 5), no two log writes in flight overlap, and a command
//!   is held only behind a log write in flight it would overlap.

use super::*;

impl WarmCache {
    pub(super) fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        assert!(
            self.cache.len() <= self.cache.capacity_blocks(),
            "the cache holds {} blocks of {}",
            self.cache.len(),
            self.cache.capacity_blocks()
        );
        assert!(
            self.reads_in_flight > 0 || self.written_at.is_empty(),
            "{} write stamps kept with no read in flight",
            self.written_at.len()
        );
        if let Some((b, s)) = self.written_at.iter().find(|(_, &s)| s > self.write_seq) {
            panic!(
                "block {b} stamped {s}, after the last write event {}",
                self.write_seq
            );
        }
        assert!(
            self.preload.outstanding <= self.reads_in_flight,
            "{} pre-load reads out, {} reads in flight",
            self.preload.outstanding,
            self.reads_in_flight
        );
        if let Some((b, _)) = self.writes_in_flight.iter().find(|(_, &(n, _))| n == 0) {
            panic!("block {b} among the writes in flight with none");
        }
        if self.options.safeguards.ordered_log_writes {
            for (i, &(a, lo, hi)) in self.log_writing.iter().enumerate() {
                if let Some(&(b, _, _)) = self.log_writing[..i]
                    .iter()
                    .find(|&&(_, l, h)| l < hi && lo < h)
                {
                    panic!("log writes {b} and {a} in flight over the same bytes");
                }
            }
            if let Some(front) = self.log_held.front() {
                assert!(
                    self.overlaps_log_writing(front),
                    "a log command held behind no write it overlaps"
                );
            }
        }
    }
}
