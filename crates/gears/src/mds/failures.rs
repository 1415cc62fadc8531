//! Failures (§3.7): a silent server suspected (its primaries reassigned, its peers and itself
//! woken), a server suspected for long declared failed and each of its groups given a new
//! replica in its gear group, which the primary fills.

use super::*;

impl Mds {
    /// No heartbeat for the timeout: the server's leases have lapsed. Its primaries go to other
    /// replicas, its peers' primaries learn it is gone, and its peers in standby are woken
    /// (§3.7: "it wakes up all the servers that share any chunks with S").
    pub(super) fn suspect(&mut self, s: ServerId) {
        debug_assert_ne!(
            self.servers[s as usize].state,
            ServerState::Failed,
            "server {s} suspected after it was declared failed"
        );
        self.servers[s as usize].state = ServerState::Suspect;
        self.servers[s as usize].since = self.now;
        self.stats.suspicions += 1;
        // It may be in standby with its last message lost: a wake costs nothing if not.
        self.wakes.push_back(s);
        let groups: Vec<u32> = self.groups_of[s as usize].iter().copied().collect();
        let mut peers = BTreeSet::new();
        for &g in &groups {
            peers.extend(self.groups[g as usize].replicas.iter().copied());
        }
        for p in peers {
            if p != s && self.servers[p as usize].state == ServerState::Standby {
                self.wake(p);
            }
        }
        for g in groups {
            if self.groups[g as usize].primary == Some(s) {
                self.groups[g as usize].primary = None;
                self.groups[g as usize].release_to = None;
                self.stats.reassignments += 1;
                self.assign_primary(g, None, Some(s));
            } else {
                self.tell_primary(g);
            }
        }
        debug_assert!(
            self.groups_of[s as usize]
                .iter()
                .all(|&g| self.groups[g as usize].primary != Some(s)),
            "suspected server {s} still primary"
        );
    }

    /// Suspected for `permanent_after_ns`: each of its groups gets a new replica (power-aware
    /// grouping: a server of its gear group; otherwise any server), which the primary fills.
    pub(super) fn fail_permanently(&mut self, s: ServerId) {
        self.servers[s as usize].state = ServerState::Failed;
        self.stats.permanent_failures += 1;
        let groups: Vec<u32> = std::mem::take(&mut self.groups_of[s as usize])
            .into_iter()
            .collect();
        for g in groups {
            let Some(t) = self.replacement(g, s) else {
                continue;
            };
            let entry = &mut self.groups[g as usize];
            let i = entry
                .replicas
                .iter()
                .position(|&x| x == s)
                .expect("a replica of the group");
            entry.replicas[i] = t;
            entry.rebuilding = Some(t);
            self.groups_of[t as usize].insert(g);
            self.stats.rebuilds_started += 1;
            if self.servers[t as usize].state == ServerState::Standby {
                self.wake(t);
            }
            match self.groups[g as usize].primary {
                Some(p) => {
                    let view = self.view(GroupId(g));
                    self.out
                        .push_back((Endpoint::Server(p), Message::Rebuild { view }));
                }
                None => self.assign_primary(g, None, None),
            }
        }
    }

    /// A new replica for group `g` in place of `failed`, not failed and not already one of
    /// its replicas, holding the fewest groups among the first of these that has any: a server
    /// of the same gear group (power-aware grouping) on a rack the group's other replicas do
    /// not use (with racks); then a server of any gear group on such a rack; then any server.
    /// Three copies on fewer racks or outside the gear layout are better than two: a group
    /// still naming a failed replica keeps its writes logged for ever, and no server is let
    /// into standby while a group it holds has no other replica up, so availability in low
    /// gears holds (at the cost of power while the layout is mixed).
    pub(super) fn replacement(&mut self, g: u32, failed: ServerId) -> Option<ServerId> {
        let entry = &self.groups[g as usize];
        let others: Vec<ServerId> = entry
            .replicas
            .iter()
            .copied()
            .filter(|&x| x != failed)
            .collect();
        let live = |t: ServerId| {
            self.servers[t as usize].state != ServerState::Failed && !entry.replicas.contains(&t)
        };
        let same_gear = |t: ServerId| {
            self.layout_kind != LayoutKind::PowerAware
                || self.gear_group[t as usize] == self.gear_group[failed as usize]
        };
        let other_rack = |t: ServerId| {
            !self.cross_rack
                || others
                    .iter()
                    .all(|&o| self.topology.rack_of(o) != self.topology.rack_of(t))
        };
        let servers = 0..self.servers.len() as ServerId;
        let tiers: [&dyn Fn(ServerId) -> bool; 3] =
            [&|t| same_gear(t) && other_rack(t), &other_rack, &|_| true];
        let candidates: Vec<ServerId> = tiers.iter().find_map(|tier| {
            let found: Vec<ServerId> = servers.clone().filter(|&t| live(t) && tier(t)).collect();
            (!found.is_empty()).then_some(found)
        })?;
        let fewest = candidates
            .iter()
            .map(|&t| self.groups_of[t as usize].len())
            .min()?;
        let least: Vec<ServerId> = candidates
            .into_iter()
            .filter(|&t| self.groups_of[t as usize].len() == fewest)
            .collect();
        let t = least[self.rng.below(least.len() as u64) as usize];
        debug_assert!(
            t != failed && !others.contains(&t),
            "group {g}: replacement {t} already holds it"
        );
        Some(t)
    }

    pub(super) fn rebuild_done(&mut self, group: GroupId, epoch: Epoch, replica: ServerId) {
        let Some(entry) = self.groups.get_mut(group.0 as usize) else {
            return;
        };
        if entry.epoch != epoch || entry.rebuilding != Some(replica) {
            return;
        }
        entry.rebuilding = None;
        self.stats.rebuilds_done += 1;
        self.tell_primary(group.0);
    }
}
