//! Serving as a group's primary: taking it (the log client formatted or recovered), its view
//! and availability, client requests, the log client's output (answers, logger requests; its
//! base I/O is `base.rs`), the replicas' answers, the superblock's write at the MDS answered,
//! and the end of a release.

use super::*;

impl ChunkServer {
    /// Moves a group's log client's output: answers to clients, logger requests, base I/O;
    /// completes a release when nothing is in flight; advances a rebuild.
    pub(super) fn pump(&mut self, g: GroupId) {
        let (now, final_ns) = (self.now, self.config.log_full_final_ns);
        let log_wait_ns = self.config.log_wait_ns;
        // A short write is answered `copies_timeout_ns` (the log wait) after its first round,
        // where the full logger refused it: a refusal this recent is that write's.
        let refusal_recent_ns = log_wait_ns + self.config.log_full_hold_ns;
        loop {
            let Some(p) = self.primaries.get_mut(&g) else {
                return;
            };
            let mut progressed = false;
            while let Some((up, reply)) = p.log.poll_upward() {
                progressed = true;
                let Some(request) = p.requests.remove(&up) else {
                    continue;
                };
                let id = request.id;
                let message = match reply {
                    UpReply::Read(data) => Message::ReadDone {
                        id,
                        result: Ok(data),
                    },
                    UpReply::Written => {
                        p.log_full_since = None;
                        Message::WriteDone { id, result: Ok(()) }
                    }
                    UpReply::Error(e) => {
                        // Short of copies because a logger refused it as full (each group logs
                        // to every logger: one full logger leaves every write short while the
                        // others take it): as full loggers, so the heartbeats name the group.
                        let short_for_room = e
                            == cordillera_offload::client::ClientError::TooFewCopies
                            && p.logger_refused_full
                                .is_some_and(|t| now.saturating_sub(t) < refusal_recent_ns);
                        let e = if short_for_room {
                            cordillera_offload::client::ClientError::NoSpace
                        } else {
                            e
                        };
                        let error = match e {
                            // Full for a moment (cleaning, a burst, replicas waking): busy,
                            // and the client sends it again; full for long: no space.
                            cordillera_offload::client::ClientError::NoSpace => {
                                p.last_full_refusal = Some(now);
                                let since = *p
                                    .log_full_since
                                    .get_or_insert(now.saturating_sub(log_wait_ns));
                                if now.saturating_sub(since) >= final_ns {
                                    ServeError::NoSpace
                                } else {
                                    ServeError::Busy
                                }
                            }
                            cordillera_offload::client::ClientError::BadRequest => {
                                ServeError::BadRequest
                            }
                            cordillera_offload::client::ClientError::NoStoreSet(_) => {
                                ServeError::Unavailable
                            }
                            // A newer primary of the group recovered from the loggers.
                            cordillera_offload::client::ClientError::Fenced => {
                                ServeError::NotPrimary
                            }
                            // Fewer loggers than copies reachable in time: the client may
                            // try again.
                            cordillera_offload::client::ClientError::TooFewCopies => {
                                ServeError::Unavailable
                            }
                            // Sierra's base is the chunk group's replicas, which never report
                            // a device error this way (they answer `Failed`); as unavailable.
                            cordillera_offload::client::ClientError::Base { .. } => {
                                ServeError::Unavailable
                            }
                        };
                        // Which kind it was is not kept; the client tells by the id.
                        Message::WriteDone {
                            id,
                            result: Err(error),
                        }
                    }
                };
                self.out.extend(request.answers(message));
            }
            if matches!(
                p.log.failure(),
                Some(cordillera_offload::client::ClientError::Fenced)
            ) {
                // Deposed: a newer primary recovered from the loggers (this one's lease lapsed
                // while its messages were held up).
                self.drop_primary(g, ServeError::NotPrimary);
                return;
            }
            let stores: Vec<u64> = {
                let mut ids = Vec::new();
                for (idx, info, _) in p.log.stores() {
                    if ids.len() <= idx {
                        ids.resize(idx + 1, u64::MAX);
                    }
                    ids[idx] = info.id;
                }
                ids
            };
            while let Some((store, log_id, request)) = p.log.poll_store() {
                progressed = true;
                let id = self.next_id;
                self.next_id += 1;
                self.store_requests.insert(id, (g, log_id, store));
                let logger = stores.get(store).copied().unwrap_or(u64::MAX);
                self.store_out.push_back((logger, id, request));
            }
            let mut base_ops = Vec::new();
            while let Some(op) = p.log.poll_base() {
                base_ops.push(op);
            }
            for op in base_ops {
                progressed = true;
                self.base_op(g, op);
            }
            let p = self.primaries.get_mut(&g).expect("primary");
            if p.releasing
                && p.requests.is_empty()
                && p.base.is_empty()
                && p.superblock_writes.is_empty()
            {
                let epoch = p.view.epoch;
                if let Some(p) = self.primaries.remove(&g) {
                    self.keep_log_stats(&p);
                }
                self.stats.primaries_released += 1;
                self.out
                    .push_back((Endpoint::Mds, Message::ReleasedPrimary { group: g, epoch }));
                return;
            }
            progressed |= self.advance_rebuild(g);
            if !progressed {
                return;
            }
        }
    }
}

/// How often, at most, the reclaim budget is shared out again on events (timeouts always do).
const BALANCE_INTERVAL_NS: Nanos = 10_000_000;

impl ChunkServer {
    /// Reclaim is background work on disks every group of the server shares (§4.5), so the
    /// server gives its groups' log clients one budget of jobs (`reclaim_jobs_max`): a group
    /// keeps the jobs it runs, and free slots go to groups with at-risk data (all of them while
    /// there are any), then to the others in turn. (Each group running its own jobs swamped the loggers at an up-shift:
    /// hundreds of groups each reading at once, the clients' reads of logged data waiting
    /// behind them until they failed; found by the testbed lab at the paper's scale.)
    pub(super) fn balance_reclaim(&mut self, at_once: bool) {
        // A group keeps its slot while it has work, so a slot freed between two balancings
        // idles at most this long (balancing looks at every group).
        if !at_once && self.now < self.balanced_at + BALANCE_INTERVAL_NS {
            return;
        }
        self.balanced_at = self.now;
        // Each group's reclaim wants, as of its last change (`primaries.rs`).
        self.primaries.settle();
        let groups: Vec<(GroupId, Facts)> = self
            .primaries
            .keys()
            .map(|&g| (g, self.primaries.facts(&g)))
            .collect();
        if groups.is_empty() {
            return;
        }
        let running: usize = groups.iter().map(|(_, f)| f.reclaim_jobs).sum();
        let mut free = self.config.reclaim_jobs_max.max(1).saturating_sub(running);
        // Background priority: data that is not at risk waits while clients keep the disk
        // busy, unless reclaim has been starved too long.
        let busy = self
            .config
            .reclaim_busy_disk
            .is_some_and(|t| self.disk.len() > running + t);
        let starved =
            running == 0 && self.now >= self.reclaim_granted_at + self.config.reclaim_starved_ns;
        let n = groups.len();
        let start = self.reclaim_cursor % n;
        let mut granted: Vec<GroupId> = Vec::new();
        let any_at_risk = groups.iter().any(|(_, f)| f.reclaiming_vulnerable);
        for at_risk in [true, false] {
            // At-risk data first (§3.7, "at high priority"): while any group has some, every
            // free slot goes to those groups (several to one if there are fewer of them).
            if !at_risk && any_at_risk {
                break;
            }
            if !at_risk && busy {
                if !starved || !granted.is_empty() {
                    break;
                }
                free = free.min(1);
            }
            loop {
                let before = free;
                for k in 0..n {
                    if free == 0 {
                        break;
                    }
                    let (g, f) = groups[(start + k) % n];
                    if f.reclaim_wanted == Some(at_risk) {
                        granted.push(g);
                        free -= 1;
                    }
                }
                if !at_risk || free == 0 || free == before {
                    break;
                }
            }
        }
        let wanted = running > 0 || groups.iter().any(|(_, f)| f.reclaim_wanted.is_some());
        if !granted.is_empty() || !wanted {
            self.reclaim_granted_at = self.now;
        }
        if let Some(last) = granted.last() {
            let i = groups.iter().position(|(g, _)| g == last).expect("a group");
            self.reclaim_cursor = i + 1;
        }
        for (g, f) in groups {
            let mut limit = f.reclaim_jobs + granted.iter().filter(|&&x| x == g).count();
            // While the disk is busy, or another group has at-risk data to reclaim, a group
            // whose data is not at risk starts no further job (the ones running finish; else
            // a group keeping its slot would hold it while at-risk data waits).
            if (busy || any_at_risk)
                && !granted.contains(&g)
                && !f.reclaiming_vulnerable
                && f.reclaim_wanted != Some(true)
            {
                limit = 0;
            }
            // (Pumping one group changes only that group's facts.)
            if f.reclaim_limit != limit {
                let p = self.primaries.get_mut(&g).expect("primary");
                p.log.set_reclaim_limit(limit);
                self.pump(g);
            }
        }
    }
}

impl ChunkServer {
    pub(super) fn replicated(&mut self, from: Endpoint, id: u64, ok: bool) {
        let Some((g, epoch, base)) = self.replications.remove(&id) else {
            return;
        };
        let Endpoint::Server(server) = from else {
            return;
        };
        let Some(p) = self.primary_at(g, epoch) else {
            return;
        };
        match base {
            Replication::Base(base) => {
                if let Some(w) = p.base.get_mut(&base) {
                    if let Some(i) = p.view.replicas.iter().position(|&s| s == server) {
                        w.waiting &= !(1 << i);
                    }
                    if !ok {
                        w.failed = true;
                    }
                }
                self.finish_base_writes(g);
            }
            Replication::Piece(token) => {
                // A rebuild piece: the current one, or one sent for an ended rebuild.
                if p.orphan_piece.is_some_and(|o| o.2 == token) {
                    p.orphan_piece = None;
                }
                let mut copied = 0;
                if let Some(r) = &mut p.rebuild {
                    // Not an earlier copy's answer (timed out and sent again since).
                    let piece = match r.piece {
                        Some((lo, hi, PieceStage::Sending { token: t, .. })) if t == token => {
                            Some((lo, hi))
                        }
                        _ => None,
                    };
                    if let Some((lo, hi)) = piece {
                        debug_assert!(
                            lo < hi && hi <= r.end,
                            "a rebuild piece {lo}..{hi} past {}",
                            r.end
                        );
                        if ok {
                            r.next = hi;
                            copied = hi - lo;
                        } else {
                            r.next = lo;
                        }
                        r.piece = None;
                    }
                }
                self.stats.rebuilt_bytes += copied;
                self.release_held(g);
                // A slot of the rebuild budget is free: groups waiting for one go on.
                let waiting: Vec<GroupId> = self
                    .primaries
                    .iter()
                    .filter(|(&h, q)| {
                        h != g && q.rebuild.as_ref().is_some_and(|r| r.piece.is_none())
                    })
                    .map(|(&h, _)| h)
                    .collect();
                self.pump(g);
                for h in waiting {
                    self.pump(h);
                }
                return;
            }
        }
        self.pump(g);
    }

    pub(super) fn superblock_written(&mut self, id: u64, ok: bool) {
        let found = self
            .primaries
            .iter()
            .find(|(_, p)| p.superblock_writes.contains_key(&id))
            .map(|(&g, _)| g);
        let Some(g) = found else {
            return;
        };
        if !ok {
            // The MDS has given the group to another primary.
            self.drop_primary(g, ServeError::NotPrimary);
            return;
        }
        let now = self.now;
        let p = self.primaries.get_mut(&g).expect("primary");
        let (base, data, _) = p.superblock_writes.remove(&id).expect("a superblock write");
        debug_assert!(
            !p.superblock_writes.values().any(|(b, _, _)| *b == base),
            "superblock write of base {base} in flight twice"
        );
        p.superblock = data;
        p.log.handle_base(now, BaseDone::Written { id: base });
        self.pump(g);
    }

    pub(super) fn become_primary(&mut self, view: GroupView, superblock: Option<Vec<u8>>) {
        let g = view.group;
        if self.epochs.get(&g).is_some_and(|e| e > view.epoch)
            || self
                .primaries
                .get(&g)
                .is_some_and(|p| p.view.epoch >= view.epoch)
            || view.primary != Some(self.config.server)
        {
            return;
        }
        debug_assert!(
            view.replicas.contains(&self.config.server),
            "server {}: made primary of {g:?}, not one of its replicas {:?}",
            self.config.server,
            view.replicas
        );
        if self.primaries.contains_key(&g) {
            self.drop_primary(g, ServeError::NotPrimary);
        }
        self.epochs.raise(g, view.epoch);
        let mut config = LogConfig::new(
            g.0 as u64,
            g.0 as u64,
            self.config.group_bytes + SUPERBLOCK_BYTES,
        );
        config.policy = Policy::WhileBaseUnavailable;
        config.local_copy = self.config.local_copy;
        config.n_way = self.config.log_copies;
        // The server's budget is shared out by `balance_reclaim`.
        config.n_reclaim = 0;
        config.request_timeout_ns = Some(self.config.log_request_timeout_ns);
        config.recovery_grace_ns = self.config.log_recovery_grace_ns;
        config.full_timeout_ns = self.config.log_wait_ns;
        config.copies_timeout_ns = self.config.log_wait_ns;
        // Reclaim runs whatever the group's own load (it is background work on replicas
        // shared with other groups; §4.5 throttles it by priority, not by queue length).
        config.t_base = u64::MAX;
        let log = match &superblock {
            None => {
                let stores = self
                    .config
                    .loggers
                    .iter()
                    .map(|l| StoreInfo {
                        id: l.id,
                        // Copies go to distinct "servers": racks.
                        server: l.rack as u64,
                    })
                    .collect();
                Client::format(config, stores, self.now)
            }
            Some(_) => Client::recover(config, self.now),
        };
        let mut primary = Primary {
            view,
            log,
            releasing: self.power != Power::On,
            requests: BTreeMap::new(),
            last_write: BTreeMap::new(),
            base: BTreeMap::new(),
            held: VecDeque::new(),
            superblock: superblock.unwrap_or_default(),
            superblock_writes: BTreeMap::new(),
            rebuild: None,
            orphan_piece: None,
            next_up: 1,
            log_full_since: None,
            logger_refused_full: None,
            last_full_refusal: None,
        };
        primary
            .log
            .set_store_ranks(self.logger_ranks(&primary.view));
        self.primaries.insert(g, primary);
        self.stats.primaries_taken += 1;
        self.start_rebuild_if_needed(g);
        self.refresh_availability(g);
        self.pump(g);
    }

    /// Locality classes of the loggers for a group (§3.6): on a replica's server, in a
    /// replica's rack, elsewhere.
    pub(super) fn logger_ranks(&self, view: &GroupView) -> Vec<(u64, u8)> {
        let racks: BTreeSet<RackId> = view
            .replicas
            .iter()
            .map(|&s| self.config.racks_of_servers[s as usize])
            .collect();
        self.config
            .loggers
            .iter()
            .map(|l| {
                let rank = if l.server.is_some_and(|s| view.replicas.contains(&s)) {
                    0
                } else if racks.contains(&l.rack) {
                    1
                } else {
                    2
                };
                (l.id, rank)
            })
            .collect()
    }

    pub(super) fn group_changed(&mut self, view: GroupView) {
        let g = view.group;
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        if p.view.epoch != view.epoch {
            return;
        }
        // The loggers' ranks follow the replicas (a lease repeats every view unchanged).
        let same_replicas = p.view.replicas == view.replicas;
        p.view = view;
        if !same_replicas {
            let ranks = self.logger_ranks(&self.primaries[&g].view);
            self.primaries
                .get_mut(&g)
                .expect("primary")
                .log
                .set_store_ranks(ranks);
        }
        self.start_rebuild_if_needed(g);
        self.refresh_availability(g);
        self.pump(g);
    }

    /// Whether every secondary takes writes: the MDS says it is available, and it has not
    /// failed to answer here lately.
    pub(super) fn refresh_availability(&mut self, g: GroupId) {
        let now = self.now;
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        let available = !p.releasing
            && p.view.secondaries().all(|(i, s)| {
                p.view.available & (1 << i) != 0
                    && self.suspected.get(&s).is_none_or(|&until| until <= now)
            });
        if p.log.base_available() != available {
            p.log.set_base_available(now, available);
        }
    }

    /// Attempt `id` of a client's read or write whose first attempt was `piece`; a write's
    /// sent under the view of epoch `sent_under`.
    pub(super) fn client_request(
        &mut self,
        from: Endpoint,
        (id, piece): (u64, u64),
        group: GroupId,
        sent_under: Option<Epoch>,
        upward: Upward,
    ) {
        let is_write = matches!(upward, Upward::Write { .. });
        let refuse = |s: &mut ChunkServer, error: ServeError| {
            s.stats.refused += 1;
            match error {
                ServeError::NotPrimary => s.stats.refused_not_primary += 1,
                ServeError::LeaseExpired => s.stats.refused_lease += 1,
                ServeError::Unavailable => s.stats.refused_unavailable += 1,
                ServeError::Busy => s.stats.refused_busy += 1,
                _ => {}
            }
            let message = if is_write {
                Message::WriteDone {
                    id,
                    result: Err(error),
                }
            } else {
                Message::ReadDone {
                    id,
                    result: Err(error),
                }
            };
            s.out.push_back((from, message));
        };
        let in_flight: usize = self.primaries.values().map(|p| p.requests.len()).sum();
        let now = self.now;
        let group_bytes = self.config.group_bytes;
        let Some(p) = self.primaries.get_mut(&group) else {
            return refuse(self, ServeError::NotPrimary);
        };
        if now >= self.lease_until {
            return refuse(self, ServeError::LeaseExpired);
        }
        debug_assert_eq!(
            p.view.primary,
            Some(self.config.server),
            "serving {group:?} under a view naming another primary"
        );
        if p.releasing || !p.log.is_ready() {
            return refuse(self, ServeError::Unavailable);
        }
        if let Some(epoch) = sent_under.filter(|&e| e != p.view.epoch) {
            // An attempt sent under another view: one held up in the network since the group
            // moved on must not land now (the client has acknowledged the write, or will, on
            // an attempt at the newer epoch). A client that is ahead asks again shortly.
            let error = if epoch < p.view.epoch {
                ServeError::NotPrimary
            } else {
                ServeError::Unavailable
            };
            self.stats.refused_stale += 1;
            return refuse(self, error);
        }
        if let Some(r) = p
            .requests
            .values_mut()
            .find(|r| r.to == from && r.piece == piece)
        {
            // Another attempt of a request in flight here (or the same one duplicated): it is
            // answered with it, not applied again.
            if r.id != id && !r.joined.contains(&id) {
                r.joined.push(id);
            }
            if is_write {
                let last = p.last_write.entry(from).or_insert(id);
                *last = (*last).max(id);
            }
            return;
        }
        if is_write && p.last_write.get(&from).is_some_and(|&last| id <= last) {
            // An older attempt overtaken in the network by a newer write of the same client:
            // it may be one the client has given up on for a later attempt, so it is refused
            // (the client sends it again under a new id if it still waits for it).
            self.stats.refused_stale += 1;
            return refuse(self, ServeError::Unavailable);
        }
        if in_flight >= self.config.requests_max {
            return refuse(self, ServeError::Busy);
        }
        let (offset, len) = match &upward {
            Upward::Read {
                offset_bytes,
                length_bytes,
            } => (*offset_bytes, *length_bytes),
            Upward::Write {
                offset_bytes, data, ..
            } => (*offset_bytes, data.len() as u64),
        };
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > group_bytes) {
            return refuse(self, ServeError::BadRequest);
        }
        let up = p.next_up;
        p.next_up += 1;
        p.requests.insert(
            up,
            ClientRequest {
                to: from,
                id,
                piece,
                joined: Vec::new(),
            },
        );
        if is_write {
            p.last_write.insert(from, id);
        }
        if is_write {
            self.stats.writes += 1;
        } else {
            self.stats.reads += 1;
        }
        p.log.handle_upward(now, up, upward);
        self.pump(group);
    }

    /// A group's log client leaves with its primary: its counts stay in the server's.
    fn keep_log_stats(&mut self, p: &Primary) {
        self.stats.add_log(&p.log.stats());
    }

    /// Stops serving group `g` at once (lease lapsed, reassigned, fenced): requests waiting are
    /// answered `error`; work in flight is forgotten (its completions are ignored).
    pub(super) fn drop_primary(&mut self, g: GroupId, error: ServeError) {
        let Some(p) = self.primaries.remove(&g) else {
            return;
        };
        self.keep_log_stats(&p);
        for (_, request) in p.requests {
            // The client retries either kind the same way.
            let id = request.id;
            self.out.extend(request.answers(Message::WriteDone {
                id,
                result: Err(error),
            }));
        }
        self.store_requests.retain(|_, (group, _, _)| *group != g);
        self.replications.retain(|_, (group, _, _)| *group != g);
    }
}
