//! What must hold after every event of a chunk server, checked in debug builds (the seeded
//! schedules and the lab run with them) after each `handle_*` and `logger_lost`:
//!
//! - a primary serves its own group, names this server as primary, and holds an epoch no newer
//!   than the newest this server has seen for the group;
//! - the newest epoch seen per group never goes down (replication from an older one is
//!   refused against it): checked at every change, by `Epochs::raise`;
//! - a server asleep holds no primary;
//! - writes in flight on the disk never overlap within a group (an overlapping write waits in
//!   the queue until the first completes), and each lies within the group;
//! - a primary's base writes in flight never overlap (an overlapping one is held until the
//!   first is done on every replica: replicas apply overlapping writes in one order).
//!
//! The checks of a primary visit the groups changed since the last check: an unchanged
//! group's fields have not moved, and the newest epoch it is checked against only rises.

use super::*;

impl ChunkServer {
    pub(super) fn check_invariants(&mut self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let me = self.config.server;
        for g in self.primaries.take_unchecked() {
            let p = &self.primaries[&g];
            assert_eq!(
                p.view.group, g,
                "primary of {g:?} holds the view of another group"
            );
            assert_eq!(
                p.view.primary,
                Some(me),
                "server {me}: primary of {g:?} under a view naming {:?}",
                p.view.primary
            );
            let seen = self.epochs.get(&g);
            assert!(
                seen.is_some_and(|e| e >= p.view.epoch),
                "server {me}: primary of {g:?} at epoch {}, newest seen {seen:?}",
                p.view.epoch
            );
            let mut ranges: Vec<(u64, u64)> = p
                .base
                .values()
                .map(|w| (w.offset_bytes, w.offset_bytes + w.data.len() as u64))
                .collect();
            ranges.sort_unstable();
            for w in ranges.windows(2) {
                assert!(
                    w[0].1 <= w[1].0,
                    "server {me}: overlapping base writes in flight on {g:?}: {:?} and {:?}",
                    w[0],
                    w[1]
                );
            }
        }
        if self.power == Power::Asleep {
            assert!(
                self.primaries.is_empty(),
                "server {me}: asleep with {} primaries",
                self.primaries.len()
            );
        }
        let mut by_group: BTreeMap<GroupId, Vec<(u64, u64)>> = BTreeMap::new();
        for &(g, start, end) in self.writing.values() {
            assert!(
                start <= end && end <= self.config.group_bytes,
                "server {me}: a write in flight on {g:?} over {start}..{end}"
            );
            by_group.entry(g).or_default().push((start, end));
        }
        for (g, mut ranges) in by_group {
            ranges.sort_unstable();
            for w in ranges.windows(2) {
                assert!(
                    w[0].1 <= w[1].0,
                    "server {me}: overlapping writes in flight on {g:?}: {:?} and {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }
}
