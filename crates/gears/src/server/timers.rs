//! The chunk server's deadlines, each computed here once ([`Deadlines`]):
//! [`ChunkServer::poll_timeout`] reports the earliest, `on_timeout` acts on every one passed.
//!
//! | deadline | due at | then |
//! |---|---|---|
//! | heartbeat | `next_heartbeat` | a heartbeat to the MDS |
//! | lease | `lease_until`, while primary of any group | every primary is dropped (`LeaseExpired`): the MDS may give its groups to others |
//! | base write | started + replication timeout, while secondaries have not answered | the silent secondaries are suspected for `suspect_ns` and the write no longer waits for them |
//! | superblock write | sent + replication timeout | sent to the MDS again |
//! | rebuild piece | sent + piece timeout | copied again from its start |
//! | orphan piece | sent + piece timeout | forgotten: the base writes it held go on |
//! | log client | its own `poll_timeout` | its `handle_timeout` |
//!
//! A server asleep has none.

use super::*;

/// The deadline rules of the table above.
#[derive(Clone, Copy)]
pub(super) struct Deadlines {
    replicate_ns: Nanos,
    piece_ns: Nanos,
}

impl Deadlines {
    /// A rebuild piece not taken in this long is sent again: the replication timeout plus the
    /// piece's transfer at 1 MB/s. A 64 MB chunk legitimately waits many seconds behind the
    /// pieces other servers copy to the same new replica; timing it out sooner copied it again
    /// and again. (A new replica that fails is found by the MDS, which restarts the rebuild, so
    /// the timeout only covers a lost message.)
    pub(super) fn of(config: &ServerConfig) -> Deadlines {
        Deadlines {
            replicate_ns: config.replicate_timeout_ns,
            piece_ns: config.replicate_timeout_ns
                + config.rebuild_piece_bytes * 1_000_000_000 / (1 << 20),
        }
    }

    /// A base write whose secondaries were already given up on waits only for its local disk
    /// (timing it out again would fire at once, forever): no deadline.
    fn base_write(self, w: &BaseWrite) -> Option<Nanos> {
        (!w.failed && w.waiting != 0).then_some(w.started + self.replicate_ns)
    }

    fn superblock_write(self, sent: Nanos) -> Nanos {
        sent + self.replicate_ns
    }

    fn rebuild_piece(self, p: &Primary) -> Option<Nanos> {
        match p.rebuild {
            Some(Rebuild {
                piece: Some((_, _, PieceStage::Sending { since, .. })),
                ..
            }) => Some(since + self.piece_ns),
            _ => None,
        }
    }

    fn orphan_piece(self, p: &Primary) -> Option<Nanos> {
        p.orphan_piece.map(|(_, _, _, since)| since + self.piece_ns)
    }

    /// The earliest of a group's deadlines (the group rows of the table above).
    pub(super) fn of_group(self, p: &Primary) -> Option<Nanos> {
        let group = [
            p.log.poll_timeout(),
            self.rebuild_piece(p),
            self.orphan_piece(p),
        ];
        let writes = p.base.values().filter_map(|w| self.base_write(w));
        let superblocks = p
            .superblock_writes
            .values()
            .map(|&(_, _, sent)| self.superblock_write(sent));
        group
            .into_iter()
            .flatten()
            .chain(writes)
            .chain(superblocks)
            .min()
    }
}

impl ChunkServer {
    /// The earliest deadline: the heartbeat, the lease while primary of any group, and each
    /// group's (kept per group, see `primaries.rs`).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.power == Power::Asleep {
            return None;
        }
        let mut at = self.next_heartbeat;
        if !self.primaries.is_empty() {
            at = at.min(self.lease_until);
        }
        if let Some(t) = self.primaries.earliest() {
            at = at.min(t);
        }
        Some(at)
    }

    pub(super) fn on_timeout(&mut self, now: Nanos) {
        self.now = now;
        if self.power == Power::Asleep {
            return;
        }
        if now >= self.next_heartbeat {
            self.heartbeat();
            debug_assert!(self.next_heartbeat > now, "a heartbeat due again at once");
        }
        if now >= self.lease_until && !self.primaries.is_empty() {
            // The lease lapsed on our clock: the MDS may give these groups to others soon.
            self.stats.leases_lapsed += 1;
            let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
            for g in groups {
                self.drop_primary(g, ServeError::LeaseExpired);
            }
            debug_assert!(self.primaries.is_empty(), "a primary kept past its lease");
        }
        self.suspected.retain(|_, until| *until > now);
        let d = Deadlines::of(&self.config);
        let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
        for g in groups {
            let Some(p) = self.primaries.get_mut(&g) else {
                continue;
            };
            // Secondaries that did not answer a base write in time.
            let mut late = 0u64;
            for w in p.base.values_mut() {
                if d.base_write(w).is_some_and(|t| now >= t) {
                    late |= w.waiting;
                    w.failed = true;
                }
            }
            let resend: Vec<(u64, u64, Vec<u8>)> = p
                .superblock_writes
                .iter()
                .filter(|(_, (_, _, sent))| now >= d.superblock_write(*sent))
                .map(|(&id, (base, data, _))| (id, *base, data.clone()))
                .collect();
            let epoch = p.view.epoch;
            for (id, base, data) in resend {
                p.superblock_writes.insert(id, (base, data.clone(), now));
                self.out.push_back((
                    Endpoint::Mds,
                    Message::WriteSuperblock {
                        id,
                        group: g,
                        epoch,
                        data,
                    },
                ));
            }
            let orphan_done = d.orphan_piece(p).is_some_and(|t| now >= t);
            if orphan_done {
                p.orphan_piece = None;
            }
            if d.rebuild_piece(p).is_some_and(|t| now >= t) {
                // Not taken: copy the piece again later.
                let rebuild = p.rebuild.as_mut().expect("a rebuild");
                let (lo, _, _) = rebuild.piece.take().expect("a piece being sent");
                rebuild.next = lo;
            }
            for i in 0..64 {
                if late & (1 << i) != 0 {
                    let server = p.view.replicas[i];
                    self.suspected.insert(server, now + self.config.suspect_ns);
                }
            }
            if let Some(p) = self.primaries.get_mut(&g) {
                p.log.handle_timeout(now);
            }
            if orphan_done {
                self.release_held(g);
            }
            self.refresh_availability(g);
            self.finish_base_writes(g);
            self.pump(g);
        }
        self.maybe_sleep();
    }
}
