//! What must hold after every step of the MDS, checked in debug builds after each `handle_*`
//! and `set_gear` — every one in the seeded schedules' clusters (48 groups), one in 64 in the
//! lab's larger ones (checking each cost the lab's Sierra run on the MSR fragments 60 % more
//! time; one in 64 costs nothing measurable):
//!
//! - each group's replicas are distinct servers, and a live server's list of groups is exactly
//!   the groups naming it (a failed server's list is emptied when it is replaced);
//! - a primary is one of its group's replicas, on a server up or releasing its primaries (never
//!   one suspected, in standby, waking or failed), and never the replica being rebuilt;
//! - a release is asked only of a group that has a primary;
//! - a group's epoch never goes down, and one epoch has one primary: a group whose epoch did not
//!   change since the last check has the primary it had then, or none;
//! - every chunk is in a slot its group has handed out (checked while there are at most
//!   [`CHECKED_CHUNKS_MAX`]).

use super::*;

/// The chunk check runs while the MDS holds at most this many chunks.
const CHECKED_CHUNKS_MAX: usize = 4096;
/// Up to this many groups (the seeded schedules' clusters) the state is checked after every
/// event; with more (the lab's clusters) after one event in [`CHECK_EVERY`], so that the
/// lab's debug-build runs are not slowed by half. The epoch check compares with the last check.
const CHECKED_GROUPS_MAX: usize = 256;
const CHECK_EVERY: u64 = 64;

impl Mds {
    pub(super) fn check_invariants(&mut self) {
        if !cfg!(debug_assertions) {
            return;
        }
        self.events_since_check += 1;
        if self.groups.len() > CHECKED_GROUPS_MAX && self.events_since_check < CHECK_EVERY {
            return;
        }
        self.events_since_check = 0;
        for (g, entry) in self.groups.iter().enumerate() {
            for (i, &s) in entry.replicas.iter().enumerate() {
                assert!(
                    !entry.replicas[..i].contains(&s),
                    "group {g}: server {s} twice among its replicas {:?}",
                    entry.replicas
                );
            }
            if let Some(p) = entry.primary {
                assert!(
                    entry.replicas.contains(&p),
                    "group {g}: primary {p} is not one of its replicas {:?}",
                    entry.replicas
                );
                let state = self.servers[p as usize].state;
                assert!(
                    matches!(state, ServerState::Up | ServerState::Releasing),
                    "group {g}: primary {p} is {state:?}"
                );
                assert_ne!(
                    entry.rebuilding,
                    Some(p),
                    "group {g}: its primary {p} is the replica being rebuilt"
                );
            } else {
                assert!(
                    entry.release_to.is_none(),
                    "group {g}: a release asked of no primary"
                );
            }
            if let Some(t) = entry.rebuilding {
                assert!(
                    entry.replicas.contains(&t),
                    "group {g}: rebuilding {t}, not one of its replicas {:?}",
                    entry.replicas
                );
            }
        }
        // Each live replica lists its group, and the lists hold nothing else (their sizes add
        // up to the live replicas counted): O(groups × r + servers), run after every event.
        let mut live_replicas = 0usize;
        for (g, entry) in self.groups.iter().enumerate() {
            for &s in &entry.replicas {
                if self.servers[s as usize].state != ServerState::Failed {
                    live_replicas += 1;
                    assert!(
                        self.groups_of[s as usize].contains(&(g as u32)),
                        "server {s}: a replica of group {g} that does not list it"
                    );
                }
            }
        }
        let listed: usize = self
            .groups_of
            .iter()
            .enumerate()
            .filter(|&(s, _)| self.servers[s].state != ServerState::Failed)
            .map(|(_, held)| held.len())
            .sum();
        assert_eq!(
            listed, live_replicas,
            "the servers list groups that do not name them"
        );
        // Chunks change only when objects are created or deleted; their slots are checked while
        // there are few enough to check at every event.
        if self.chunks.len() <= CHECKED_CHUNKS_MAX {
            for (c, &(g, slot)) in self.chunks.iter().enumerate() {
                if g != u32::MAX {
                    let group = &self.groups[g as usize];
                    assert!(
                        slot < group.next_slot,
                        "chunk {c} in slot {slot} of group {g}, which has handed out {}",
                        group.next_slot
                    );
                }
            }
        }
        if self.checked.len() == self.groups.len() {
            for (g, (entry, &(epoch, primary))) in self.groups.iter().zip(&self.checked).enumerate()
            {
                assert!(
                    entry.epoch >= epoch,
                    "group {g}: epoch went down from {epoch} to {}",
                    entry.epoch
                );
                if entry.epoch == epoch {
                    assert!(
                        entry.primary.is_none() || entry.primary == primary,
                        "group {g}: epoch {epoch} had primary {primary:?}, now {:?}",
                        entry.primary
                    );
                }
            }
        }
        self.checked = self.groups.iter().map(|g| (g.epoch, g.primary)).collect();
    }
}
