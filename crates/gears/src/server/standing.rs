//! The server's standing with the MDS: heartbeats, the lease its primaries serve under, and
//! standby (primaries released first, then nothing in flight on the disk).

use super::*;

impl ChunkServer {
    pub(super) fn heartbeat(&mut self) {
        debug_assert_ne!(self.power, Power::Asleep, "a heartbeat from standby");
        self.out.push_back((
            Endpoint::Mds,
            Message::Heartbeat {
                server: self.config.server,
                incarnation: self.incarnation,
                sent_at: self.now,
                primaries: self
                    .primaries
                    .iter()
                    .map(|(g, p)| (*g, p.view.epoch))
                    .collect(),
                // Full loggers matter while the group's writes must be logged (a replica is
                // down) or data logged waits for reclaim; a store's next accepted write clears
                // the client's mark, but once the replicas take the writes none may come. A
                // write refused for them keeps the group named for the hold after it, so that
                // its next attempt finds the replicas up.
                log_full: self
                    .primaries
                    .iter()
                    .filter(|(_, p)| {
                        let held = p
                            .last_full_refusal
                            .is_some_and(|t| self.now < t + self.config.log_full_hold_ns);
                        held || (p.log.stores_full_since().is_some()
                            && (p.log.stats().offloaded_bytes > 0 || !p.view.all_available()))
                    })
                    .map(|(g, _)| *g)
                    .collect(),
            },
        ));
        self.next_heartbeat = self.now + self.config.heartbeat_interval_ns;
    }

    /// Told to enter standby: every primary is released (its writes finish, then the MDS
    /// moves the group), then the server sleeps.
    pub(super) fn enter_standby(&mut self) {
        debug_assert_eq!(self.power, Power::On, "standby entered twice");
        self.power = Power::Releasing;
        let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
        for g in groups {
            self.primaries.get_mut(&g).expect("primary").releasing = true;
            self.pump(g);
        }
        self.maybe_sleep();
    }

    pub(super) fn lease(&mut self, until: Nanos, primaries: Vec<GroupView>) {
        if until <= self.now {
            return;
        }
        self.lease_until = self.lease_until.max(until);
        let listed: BTreeSet<GroupId> = primaries.iter().map(|v| v.group).collect();
        // Groups the MDS no longer counts as ours (it reassigned them) stop at once.
        let ours: Vec<GroupId> = self.primaries.keys().copied().collect();
        for g in ours {
            if !listed.contains(&g) {
                self.drop_primary(g, ServeError::NotPrimary);
            }
        }
        for view in primaries {
            self.group_changed(view);
        }
        debug_assert!(
            self.primaries.keys().all(|g| listed.contains(g)),
            "server {}: primary of a group the lease does not list",
            self.config.server
        );
    }

    /// In standby once every primary is released and nothing is in flight on the disk.
    pub(super) fn maybe_sleep(&mut self) {
        if self.power == Power::Releasing
            && self.primaries.is_empty()
            && self.disk.is_empty()
            && self.queued_writes.is_empty()
        {
            self.power = Power::Asleep;
            self.out.push_back((
                Endpoint::Mds,
                Message::Standby {
                    server: self.config.server,
                },
            ));
        }
    }
}
