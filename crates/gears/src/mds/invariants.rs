//! What must hold after every step of the MDS, checked in debug builds (the seeded schedules
//! run with them) after each `handle_*` and `set_gear`:
//!
//! - each group's replicas are distinct servers, and a live server's list of groups is exactly
//!   the groups naming it (a failed server's list is emptied when it is replaced);
//! - a primary is one of its group's replicas, on a server up or releasing its primaries (never
//!   one suspected, in standby, waking or failed), and never the replica being rebuilt;
//! - a release is asked only of a group that has a primary;
//! - a group's epoch never goes down, and one epoch has one primary: a group whose epoch did not
//!   change since the last check has the primary it had then, or none;
//! - every chunk is in a slot its group has handed out.

use super::*;

impl Mds {
    pub(super) fn check_invariants(&mut self) {
        if !cfg!(debug_assertions) {
            return;
        }
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
        for (s, held) in self.groups_of.iter().enumerate() {
            if self.servers[s].state == ServerState::Failed {
                continue;
            }
            let naming: BTreeSet<u32> = (0..self.groups.len() as u32)
                .filter(|&g| self.groups[g as usize].replicas.contains(&(s as ServerId)))
                .collect();
            assert_eq!(
                held, &naming,
                "server {s}: its groups are not the groups naming it"
            );
        }
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
