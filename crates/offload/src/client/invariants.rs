//! The check of the client's whole state that ends each of its entry points in debug builds
//! (`rangemap.rs`'s `debug_check` is the model): what must hold between any two events,
//! whatever the driver does.
//!
//! - Every copy the range map names is on a store of the set, and no version is at or above
//!   the next one to be given out (versions never repeat).
//! - Every delete in flight is still allowed: it removes the current copy of a range only once
//!   that copy is on the base volume (invariant 1 of Everest §3.2.3) and no older write to the
//!   range, overtaken by the current one, is still in flight (it could land on a store that
//!   does not hold the current copy: invariant 3). The rest of invariant 3 — no older copy the
//!   stale maps name, without a durable deletion record, on a store that does not hold the
//!   current one — is asserted when each delete is sent (`check_delete_allowed`), and
//!   invariant 2 — a write over off-loaded data is off-loaded with a higher version — when each
//!   write is placed.
//! - A stale copy with a durable deletion record is not being recorded again.
//! - A range marked as held by the local replica (§3.6) has no write to the local replica in
//!   flight over it, and is marked only with local copies on.

use super::*;

/// Above this many ranges in the map the checks are skipped (they walk the whole state).
const CHECKED_RANGES_MAX: usize = 2048;

impl Client {
    /// The checks of the module docs; panics with what broke. Debug builds only.
    pub(super) fn check_invariants(&self) {
        if !cfg!(debug_assertions) || self.map.len() > CHECKED_RANGES_MAX {
            return;
        }
        let n = self.stores.len();
        let set = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let next = (self.generation << VERSION_BITS) | self.next_counter;
        for (start, end, l) in self.map.iter() {
            assert!(
                l.stores & !set == 0,
                "[{start}, {end}) version {} is on stores {:#b} outside the set of {n}",
                l.version,
                l.stores
            );
            assert!(
                !matches!(self.phase, Phase::Ready) || l.version < next,
                "[{start}, {end}) has version {} at or above the next one, {next}",
                l.version
            );
            if l.local {
                assert!(
                    self.local_copies_on(),
                    "[{start}, {end}) marked local without local copies"
                );
                if let Some((id, (lo, hi))) = self
                    .local_disk
                    .iter()
                    .find(|(_, &(lo, hi))| lo < end && start < hi)
                {
                    panic!(
                        "[{start}, {end}) version {} marked local while base write {id} of [{lo}, {hi}) to the local replica is in flight",
                        l.version
                    );
                }
            }
        }
        for out in self.outstanding.values() {
            if let Pending::Delete {
                start,
                end,
                version,
            } = out.pending
            {
                if let Some(why) = self.delete_in_flight_refusal(out.store, start, end, version) {
                    let stale: Vec<_> = self
                        .stores
                        .iter()
                        .map(|s| (s.info.id, s.up, s.stale.lookup(start, end)))
                        .collect();
                    panic!(
                        "a delete in flight breaks {why}: versions up to {version} of [{start}, {end}) on store {}; map {:?}; stale copies {stale:?}",
                        out.store,
                        self.map.lookup(start, end),
                    );
                }
            }
        }
        for s in &self.stores {
            for (start, end, v) in s.stale.iter() {
                assert!(
                    !(v.slot.is_some() && v.recording),
                    "[{start}, {end}) on store {}: recorded and being recorded",
                    s.info.id
                );
            }
        }
    }

    /// Whether a delete in flight still keeps invariant 1, and invariant 3 as far as the state
    /// can tell: no older write that may still land on another store is in flight. Older
    /// copies the stale maps name are checked when each delete is sent
    /// ([`Client::check_delete_allowed`]) and not here: a `read_any` answer read before a
    /// delete and arriving after its confirmation names a copy that is already gone, so a stale
    /// entry learned later is no proof of a copy on the store.
    fn delete_in_flight_refusal(
        &self,
        store: StoreIdx,
        start: u64,
        end: u64,
        version: u64,
    ) -> Option<&'static str> {
        self.current_copy_refusal(store, start, end, version, false)
    }
}
