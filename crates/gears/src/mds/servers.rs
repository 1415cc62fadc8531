//! Servers as the MDS sees them: heartbeats answered with leases, a server's silence and when
//! it counts ([`Silence`]: the MDS's only deadlines), returns, gear shifts, standby and waking.

use super::*;

/// What a server's silence leads to.
pub(super) enum Silence {
    /// Its leases have lapsed: its primaries go elsewhere, its peers are woken.
    Suspect,
    /// Suspected for long: its groups get new replicas.
    Failed,
}

impl Mds {
    /// What a server's silence leads to, and when: suspected once its heartbeats stop for the
    /// timeout (or it does not come up in time after a wake), failed after `permanent_after_ns`
    /// suspected. [`Mds::poll_timeout`] reports the earliest; `on_timeout` acts on those passed.
    pub(super) fn silence(&self, s: &ServerEntry) -> Option<(Nanos, Silence)> {
        match s.state {
            ServerState::Up | ServerState::Releasing => Some((
                s.last_heartbeat + self.config.heartbeat_timeout_ns,
                Silence::Suspect,
            )),
            ServerState::Suspect => {
                Some((s.since + self.config.permanent_after_ns, Silence::Failed))
            }
            ServerState::Waking => Some((s.since + self.config.wake_timeout_ns, Silence::Suspect)),
            ServerState::Standby | ServerState::Failed => None,
        }
    }

    /// How long a message may still be in flight: the margin between a lease and the
    /// heartbeat timeout (the same bound the leases rely on).
    pub(super) fn message_margin(&self) -> Nanos {
        self.config.heartbeat_timeout_ns - self.config.lease_ns
    }

    pub(super) fn heartbeat(
        &mut self,
        s: ServerId,
        incarnation: u64,
        sent_at: Nanos,
        held: &[(GroupId, Epoch)],
    ) {
        let entry = &mut self.servers[s as usize];
        if entry.state == ServerState::Failed {
            // Rebuilt elsewhere: it holds nothing the cluster relies on.
            return;
        }
        entry.last_heartbeat = self.now;
        let restarted = entry.incarnation.is_some_and(|known| known != incarnation);
        entry.incarnation = Some(incarnation);
        let state = entry.state;
        if restarted {
            // A new life (its memory is gone): whatever it was primary of is assigned again.
            let held: Vec<u32> = self.groups_of[s as usize]
                .iter()
                .copied()
                .filter(|&g| self.groups[g as usize].primary == Some(s))
                .collect();
            for g in held {
                self.groups[g as usize].primary = None;
                self.groups[g as usize].release_to = None;
            }
        }
        match state {
            ServerState::Up | ServerState::Releasing => {}
            ServerState::Standby | ServerState::Waking | ServerState::Suspect => {
                self.servers[s as usize].state = ServerState::Up;
                self.servers[s as usize].since = self.now;
                self.server_returned(s);
            }
            ServerState::Failed => unreachable!(),
        }
        if self.servers[s as usize].wanted_off && self.servers[s as usize].state == ServerState::Up
        {
            self.begin_standby(s);
        } else if self.servers[s as usize].state == ServerState::Releasing {
            // Told again, in case the first message was lost (the server ignores repeats).
            self.out
                .push_back((Endpoint::Server(s), Message::EnterStandby));
        }
        // Its report against the MDS's assignment: a group assigned to it that it does not
        // serve, in a heartbeat sent when every message of the assignment must have arrived,
        // lost its BecomePrimary or its ReleasedPrimary; it is assigned again under a new
        // epoch. A release asked and not done is asked again.
        let margin = self.message_margin();
        let mine: Vec<u32> = self.groups_of[s as usize]
            .iter()
            .copied()
            .filter(|&g| self.groups[g as usize].primary == Some(s))
            .collect();
        for g in mine {
            let entry = &self.groups[g as usize];
            let serving = held.iter().any(|&(h, e)| h.0 == g && e == entry.epoch);
            if serving {
                if entry.release_to.is_some() {
                    let epoch = entry.epoch;
                    self.out.push_back((
                        Endpoint::Server(s),
                        Message::ReleasePrimary {
                            group: GroupId(g),
                            epoch,
                        },
                    ));
                }
            } else if sent_at >= entry.assigned_at + margin {
                let to = entry.release_to.flatten();
                let leaving = self.servers[s as usize].state != ServerState::Up;
                self.groups[g as usize].primary = None;
                self.stats.reassignments += 1;
                self.assign_primary(g, to, leaving.then_some(s));
            }
        }
        // Groups left without a primary (this server's restart, or no replica was up).
        let orphans: Vec<u32> = self.groups_of[s as usize]
            .iter()
            .copied()
            .filter(|&g| self.groups[g as usize].primary.is_none())
            .collect();
        for g in orphans {
            self.assign_primary(g, None, None);
        }
        let primaries: Vec<GroupView> = self.groups_of[s as usize]
            .iter()
            .filter(|&&g| self.groups[g as usize].primary == Some(s))
            .map(|&g| self.view(GroupId(g)))
            .collect();
        self.out.push_back((
            Endpoint::Server(s),
            Message::Lease {
                until: sent_at + self.config.lease_ns,
                primaries,
            },
        ));
    }

    /// `s` is up again: its peers' primaries learn it is available; primaries migrate back to
    /// it (§3.5: "it rebalances the load by moving some primaries from other servers"; §3.4:
    /// "spreading primaries uniformly across active servers"). A group moves when its primary
    /// holds at least two more than `s` — counting a migration under way as its target's, so
    /// servers woken together, each heartbeating before the first one's migrations complete,
    /// share the groups evenly (a random choice that skipped groups already migrating left
    /// the second a fraction of its share, and the first refused requests as busy at the top
    /// gear). Groups are taken in a random order.
    pub(super) fn server_returned(&mut self, s: ServerId) {
        let mut groups: Vec<u32> = self.groups_of[s as usize].iter().copied().collect();
        for i in (1..groups.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            groups.swap(i, j);
        }
        let mut held = vec![0usize; self.servers.len()];
        for entry in &self.groups {
            let owner = match entry.release_to {
                Some(Some(t)) => Some(t),
                _ => entry.primary,
            };
            if let Some(x) = owner {
                held[x as usize] += 1;
            }
        }
        for g in groups {
            let entry = &self.groups[g as usize];
            let Some(p) = entry.primary else {
                continue;
            };
            if p == s {
                continue;
            }
            self.tell_primary(g);
            let entry = &self.groups[g as usize];
            if self.servers[s as usize].wanted_off || entry.rebuilding == Some(s) {
                continue;
            }
            let owner = match entry.release_to {
                None => p,
                Some(Some(t)) if t != s => t,
                // Being released to `s` already, or because its primary is leaving.
                Some(_) => continue,
            };
            if held[owner as usize] < held[s as usize] + 2 {
                continue;
            }
            held[owner as usize] -= 1;
            held[s as usize] += 1;
            let already_releasing = entry.release_to.is_some();
            let epoch = entry.epoch;
            self.groups[g as usize].release_to = Some(Some(s));
            if !already_releasing {
                self.out.push_back((
                    Endpoint::Server(p),
                    Message::ReleasePrimary {
                        group: GroupId(g),
                        epoch,
                    },
                ));
            }
        }
    }

    pub(super) fn standby(&mut self, s: ServerId) {
        if self.servers[s as usize].state != ServerState::Releasing {
            return;
        }
        self.servers[s as usize].state = ServerState::Standby;
        self.servers[s as usize].since = self.now;
        self.stats.standbys += 1;
        if !self.servers[s as usize].wanted_off {
            // The gear went up while it was releasing.
            self.wake(s);
        }
        let groups: Vec<u32> = self.groups_of[s as usize].iter().copied().collect();
        for g in groups {
            if self.groups[g as usize].primary == Some(s) {
                // Released in a race with this message: assign it elsewhere now.
                self.groups[g as usize].primary = None;
                self.assign_primary(g, None, Some(s));
            }
        }
    }

    pub(super) fn begin_standby(&mut self, s: ServerId) {
        // Every group it holds keeps another replica up.
        let alone = self.groups_of[s as usize].iter().any(|&g| {
            !self.groups[g as usize].replicas.iter().any(|&x| {
                x != s
                    && self.servers[x as usize].state == ServerState::Up
                    && !self.servers[x as usize].wanted_off
                    && self.groups[g as usize].rebuilding != Some(x)
            })
        });
        if alone {
            return;
        }
        self.servers[s as usize].state = ServerState::Releasing;
        self.servers[s as usize].since = self.now;
        let groups: Vec<u32> = self.groups_of[s as usize].iter().copied().collect();
        for g in groups {
            match self.groups[g as usize].primary {
                Some(p) if p == s => self.groups[g as usize].release_to = Some(None),
                // Its peers' primaries log from now on.
                Some(_) => self.tell_primary(g),
                None => {}
            }
        }
        debug_assert!(
            self.groups_of[s as usize].iter().all(|&g| {
                let entry = &self.groups[g as usize];
                entry.primary != Some(s) || entry.release_to == Some(None)
            }),
            "server {s} releasing with a primary not being released"
        );
        self.out
            .push_back((Endpoint::Server(s), Message::EnterStandby));
    }

    pub(super) fn wake(&mut self, s: ServerId) {
        debug_assert_eq!(
            self.servers[s as usize].state,
            ServerState::Standby,
            "server {s} woken while not in standby"
        );
        self.servers[s as usize].state = ServerState::Waking;
        self.servers[s as usize].since = self.now;
        self.stats.wakes += 1;
        self.wakes.push_back(s);
    }

    pub(super) fn on_set_gear(&mut self, now: Nanos, gear: usize, rotation: &[usize]) {
        self.now = now;
        let r = rotation.len();
        assert!(gear >= 1 && gear <= r, "gear {gear} of {r}");
        self.plan = Some((gear, rotation.to_vec()));
        self.apply_plan();
    }

    /// Puts each server where the last gear set wants it, except that a server holding a
    /// replica of a group whose loggers are full stays up (or is woken).
    fn apply_plan(&mut self) {
        let Some((gear, rotation)) = &self.plan else {
            return;
        };
        let off: BTreeSet<usize> = rotation[..rotation.len() - gear].iter().copied().collect();
        let wanted_off: Vec<bool> = (0..self.servers.len())
            .map(|s| {
                let planned_off = self.gear_group[s].is_some_and(|g| off.contains(&g));
                planned_off && !self.groups_of[s].iter().any(|g| self.log_full.contains(g))
            })
            .collect();
        for (entry, off) in self.servers.iter_mut().zip(wanted_off) {
            entry.wanted_off = off;
        }
        for s in 0..self.servers.len() as ServerId {
            let entry = &self.servers[s as usize];
            match (entry.state, entry.wanted_off) {
                (ServerState::Up, true) => self.begin_standby(s),
                (ServerState::Standby, false) => self.wake(s),
                _ => {}
            }
        }
    }

    /// A heartbeat's report of the groups whose loggers refuse writes as full, for the groups
    /// `s` is primary of. The paper's loggers are "not provisioned or optimized for long-term
    /// storage": when they fill, the group's replicas come up, so that writes go to them and
    /// reclaim drains the log; when the report clears, the gear's plan applies again.
    pub(super) fn log_full_reported(&mut self, s: ServerId, groups: &[GroupId]) {
        let mine = |g: u32| self.groups[g as usize].primary == Some(s);
        let reported: BTreeSet<u32> = groups
            .iter()
            .map(|g| g.0)
            .filter(|&g| (g as usize) < self.groups.len() && mine(g))
            .collect();
        let before: BTreeSet<u32> = self.log_full.iter().copied().filter(|&g| mine(g)).collect();
        if reported == before {
            return;
        }
        let asleep_before: Vec<bool> = self
            .servers
            .iter()
            .map(|e| e.state == ServerState::Standby)
            .collect();
        self.log_full.retain(|&g| !mine(g));
        self.log_full.extend(&reported);
        self.apply_plan();
        for (s, was_asleep) in asleep_before.into_iter().enumerate() {
            if was_asleep && self.servers[s].state == ServerState::Waking {
                self.stats.log_full_wakes += 1;
            }
        }
    }
}
