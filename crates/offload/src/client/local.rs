//! Sierra §3.6: off-loaded writes also written to the primary's local replica
//! ([`Config::local_copy`]), so that reads of them are served there and reclaim does not
//! write them to it again.
//!
//! The copy is written once the off-loaded write has entered the range map, whole and not
//! superseded by a newer write, so the local replica never holds bytes that no store holds nor
//! older bytes over newer ones (see [`Client::copy_locally`]).
//!
//! A range is marked [`Loc::local`] only when the local replica is known to hold its latest
//! version: the local copy's write is done, the off-loaded write is in the range map (its
//! version is the range's, piece by piece), and no other write over the same bytes of the
//! local replica was in flight at any moment of the copy's (the disk may land concurrent
//! writes in either order). Any later write to those bytes of the local replica clears the
//! mark as it is issued. The marks are in memory only.

use super::*;

/// The local copy of off-loaded write `key` (by its key in `writes`: a retry gives the write a
/// fresh version, not new bytes).
pub(super) struct LocalCopy {
    pub(super) start: u64,
    pub(super) end: u64,
    /// Its write to the local replica is done.
    pub(super) done: bool,
    /// Another write over these bytes of the local replica was in flight beside it: the
    /// replica may hold either, so the copy never marks anything.
    pub(super) tainted: bool,
    /// The version the off-loaded write entered the range map with.
    pub(super) version: u64,
}

impl Client {
    /// Whether off-loaded writes get local copies.
    pub(super) fn local_copies_on(&self) -> bool {
        self.config.local_copy && self.config.policy == Policy::WhileBaseUnavailable
    }

    /// Writes off-loaded write `key`'s bytes (`data` at `start`) to the local replica too,
    /// once it has entered the range map: never before, since a write that fails without a
    /// copy on any store would leave the local replica holding bytes no store has, and a later
    /// life of this primary (which knows nothing of it) would serve them after reads had
    /// returned the older data (sierra-short seed 7158457761728923922: a primary deposed by a
    /// stalled link, its log writes fenced, its local copy landed). Only a write no newer one
    /// superseded while it was in flight is copied: the newer bytes may already be on the
    /// local replica, written there by their own copy or by reclaim (sierra seed
    /// 5929858340065061311).
    pub(super) fn copy_locally(&mut self, key: u64, start: u64, version: u64, data: Vec<u8>) {
        if !self.local_copies_on() || self.local.contains_key(&key) {
            return;
        }
        let end = start + data.len() as u64;
        debug_assert!(
            start < end && end <= self.config.usable_bytes(),
            "a local copy of [{start}, {end}) outside the volume"
        );
        let id = self.id();
        let busy = self.local_write_issued(id, start, end);
        self.local.insert(
            key,
            LocalCopy {
                start,
                end,
                done: false,
                tainted: busy,
                version,
            },
        );
        self.base_pending.insert(id, BaseKind::LocalCopy { key });
        self.base_in_flight += 1;
        self.stats.local_copies += 1;
        self.base_out.push_back(BaseOp::WriteLocal {
            id,
            offset_bytes: start,
            data,
        });
    }

    /// A write over `[start, end)` of the local replica is being issued as base operation
    /// `id`: local copies over those bytes (in flight or done, not yet marking) can no longer
    /// be trusted, marks there are cleared, and it is tracked until it completes. Returns
    /// whether another such write was in flight over those bytes. Nothing is tracked without
    /// local copies.
    pub(super) fn local_write_issued(&mut self, id: u64, start: u64, end: u64) -> bool {
        if !self.local_copies_on() {
            return false;
        }
        let busy = self
            .local_disk
            .values()
            .any(|&(lo, hi)| lo < end && start < hi);
        for copy in self.local.values_mut() {
            if copy.start < end && start < copy.end {
                copy.tainted = true;
            }
        }
        // Most such writes are the volume's own, over bytes not off-loaded: nothing to clear.
        if self.map.overlaps(start, end) {
            self.map.update(start, end, |_, _, old| {
                old.map(|l| Loc { local: false, ..*l })
            });
        }
        self.local_disk.insert(id, (start, end));
        busy
    }

    /// Base operation `id` completed (any kind, any outcome): no longer a write in flight on
    /// the local replica.
    pub(super) fn local_write_ended(&mut self, id: u64) {
        if !self.local_disk.is_empty() {
            self.local_disk.remove(&id);
        }
    }

    /// The local copy of write `key` completed (`ok`: durably).
    pub(super) fn local_copy_done(&mut self, key: u64, ok: bool) {
        let Some(copy) = self.local.get_mut(&key) else {
            return;
        };
        debug_assert!(!copy.done, "the local copy of write {key} completed twice");
        copy.done = true;
        if !ok {
            copy.tainted = true;
        }
        self.settle_local_copy(key);
    }

    /// The copy is done: the pieces of it still at its version (a newer write may have taken
    /// some) are marked as held by the local replica, unless the copy is tainted.
    fn settle_local_copy(&mut self, key: u64) {
        let copy = self.local.remove(&key).expect("local copy");
        let version = copy.version;
        if copy.tainted {
            self.stats.local_copies_unused += 1;
            return;
        }
        self.map.update(copy.start, copy.end, |_, _, old| {
            old.map(|l| {
                if l.version == version && !l.on_base {
                    Loc { local: true, ..*l }
                } else {
                    *l
                }
            })
        });
    }
}
