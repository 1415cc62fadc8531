//! The range map, with what it holds off the base volume counted as it changes: in total and
//! per store (the bytes whose latest version a store holds and that are not reclaimed yet).
//! The off-load bound ([`Config::offload_bytes_max`]) is checked against these counts, so
//! that no write walks the whole map.

use super::*;
use cordillera_types::rangemap;

/// [`RangeMap<Loc>`] and its byte counts; every change goes through [`LocMap::update`].
#[derive(Default)]
pub(super) struct LocMap {
    map: RangeMap<Loc>,
    /// Bytes not on the base volume, whatever holds them.
    unreclaimed: u64,
    /// Per store index: bytes whose latest version it holds, not on the base volume.
    held: Vec<u64>,
}

impl LocMap {
    pub(super) fn new() -> LocMap {
        LocMap::default()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u64, &Loc)> + '_ {
        self.map.iter()
    }

    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        self.map.overlaps(start, end)
    }

    pub(super) fn lookup(&self, start: u64, end: u64) -> Vec<rangemap::Piece<&Loc>> {
        self.map.lookup(start, end)
    }

    /// Bytes not on the base volume.
    pub(super) fn unreclaimed_bytes(&self) -> u64 {
        self.unreclaimed
    }

    /// Bytes whose latest version store `store` holds, not on the base volume.
    pub(super) fn held_bytes(&self, store: StoreIdx) -> u64 {
        self.held.get(store).copied().unwrap_or(0)
    }

    /// [`RangeMap::update`], the counts following every piece replaced.
    pub(super) fn update(
        &mut self,
        start: u64,
        end: u64,
        mut rule: impl FnMut(u64, u64, Option<&Loc>) -> Option<Loc>,
    ) {
        let (unreclaimed, held) = (&mut self.unreclaimed, &mut self.held);
        self.map.update(start, end, |lo, hi, old| {
            let new = rule(lo, hi, old);
            let len = hi - lo;
            if let Some(o) = old.filter(|o| !o.on_base) {
                *unreclaimed -= len;
                for s in indices(o.stores) {
                    held[s] -= len;
                }
            }
            if let Some(n) = new.as_ref().filter(|n| !n.on_base) {
                *unreclaimed += len;
                for s in indices(n.stores) {
                    if held.len() <= s {
                        held.resize(s + 1, 0);
                    }
                    held[s] += len;
                }
            }
            new
        });
        debug_assert!(
            self.map.len() > 4096 || self.counts_hold(),
            "the range map's byte counts drifted from the map"
        );
    }

    /// Whether the counts are what a walk of the map finds (checked while the map is small).
    fn counts_hold(&self) -> bool {
        let mut unreclaimed = 0;
        let mut held = vec![0u64; self.held.len()];
        for (lo, hi, l) in self.map.iter().filter(|(_, _, l)| !l.on_base) {
            unreclaimed += hi - lo;
            for s in indices(l.stores) {
                if held.len() <= s {
                    return false;
                }
                held[s] += hi - lo;
            }
        }
        unreclaimed == self.unreclaimed && held == self.held
    }
}
