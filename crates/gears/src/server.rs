//! A chunk server (§3.1, §3.5–3.7) as a sans-I/O state machine: it heartbeats to the MDS and
//! holds leases; as a group's primary it serves reads and writes through the group's log client
//! (the off-loading client of `cordillera-offload` under [`Policy::WhileBaseUnavailable`]: its
//! "base volume" is the group's replicas, its stores the loggers), replicates writes to the
//! secondaries, falls back to logging mode when one is unavailable or does not answer, and copies
//! the group to a replica being rebuilt; as a secondary it applies replicated writes, refusing a
//! deposed primary's; it migrates its primaries away before standby.
//!
//! # Driver contract
//!
//! ```text
//! let mut s = ChunkServer::new(config, incarnation, now);   // at every start (memory is lost)
//! loop {
//!     while let Some((to, m)) = s.poll_message()        { send to the MDS, a client or a server }
//!     while let Some((logger, id, r)) = s.poll_store()  { send to the logger }
//!     while let Some(io) = s.poll_io()                  { chunk I/O on the disk (writes durable) }
//!     if s.wants_sleep()                                { enter standby; later s.handle_wake(now) }
//!     wait for: a message → s.handle_message(now, from, m)
//!               a logger's reply → s.handle_store(now, logger, id, reply, load)
//!               a logger unreachable → s.logger_lost(now, logger)
//!               a disk completion → s.handle_io(now, done)
//!               s.poll_timeout() → s.handle_timeout(now)
//! }
//! ```
//!
//! # What it guarantees
//!
//! - A client request is served only under a lease that has not lapsed on the server's clock,
//!   and only by the group's primary of the current epoch.
//! - A write is acknowledged once it is durable on every replica, or on the loggers (r of them,
//!   on distinct racks) — the log client decides, and reads follow its range map.
//! - Writes to overlapping bytes reach this server's disk in the order they were issued.
//! - A replicated write of an older epoch than one seen for the group is refused.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Serialize;

use cordillera_offload::client::{
    BaseDone, BaseOp, Client, Config as LogConfig, Policy, UpReply, Upward,
};
use cordillera_offload::superblock::SUPERBLOCK_BYTES;
use cordillera_offload::StoreInfo;
use cordillera_vstore::store::{Reply as StoreReply, Request as StoreRequest};

use crate::model::{GroupId, RackId, ServerId};
use crate::protocol::{Endpoint, Epoch, GroupView, Message, Nanos, ServeError};

/// A logger (a versioned store) as chunk servers know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoggerInfo {
    pub id: u64,
    pub rack: RackId,
    /// The chunk server it shares a machine with, if any (co-located loggers, Figure 7).
    pub server: Option<ServerId>,
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub server: ServerId,
    pub chunk_bytes: u64,
    /// Bytes of a group's address space (its chunk slots); the log client's superblock sits
    /// just past it.
    pub group_bytes: u64,
    pub heartbeat_interval_ns: Nanos,
    /// A secondary that has not taken a replicated write in this long is deemed unavailable.
    pub replicate_timeout_ns: Nanos,
    /// …and stays so here this long, whatever the MDS's view (the MDS takes its own timeout to
    /// decide).
    pub suspect_ns: Nanos,
    pub racks_of_servers: Vec<RackId>,
    pub loggers: Vec<LoggerInfo>,
    /// Copies of a logged write (r, on distinct racks).
    pub log_copies: usize,
    pub log_request_timeout_ns: Nanos,
    pub log_recovery_grace_ns: Nanos,
    pub reclaim_jobs_max: usize,
    /// Bytes copied per step of a rebuild.
    pub rebuild_piece_bytes: u64,
    /// Client requests in flight at most; more are refused `Busy`.
    pub requests_max: usize,
}

impl ServerConfig {
    pub fn new(
        server: ServerId,
        chunk_bytes: u64,
        group_bytes: u64,
        racks_of_servers: Vec<RackId>,
        loggers: Vec<LoggerInfo>,
    ) -> ServerConfig {
        ServerConfig {
            server,
            chunk_bytes,
            group_bytes,
            heartbeat_interval_ns: 300_000_000,
            replicate_timeout_ns: 1_000_000_000,
            suspect_ns: 3_000_000_000,
            racks_of_servers,
            loggers,
            log_copies: 3,
            log_request_timeout_ns: 2_000_000_000,
            log_recovery_grace_ns: 1_000_000_000,
            reclaim_jobs_max: 16,
            rebuild_piece_bytes: 1 << 20,
            requests_max: 4096,
        }
    }
}

/// Chunk data on the server's disk, by group and offset in the group's space. Writes are
/// durable when done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkIo {
    Read {
        id: u64,
        group: GroupId,
        offset_bytes: u64,
        length_bytes: u64,
    },
    Write {
        id: u64,
        group: GroupId,
        offset_bytes: u64,
        data: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkIoDone {
    Read { id: u64, data: Vec<u8> },
    Written { id: u64 },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerStats {
    pub reads: u64,
    pub writes: u64,
    pub refused: u64,
    pub replicated: u64,
    pub replicas_fenced: u64,
    pub base_writes_failed: u64,
    pub primaries_taken: u64,
    pub primaries_released: u64,
    pub leases_lapsed: u64,
    pub rebuilt_bytes: u64,
    pub logged_writes: u64,
    pub logged_bytes: u64,
    pub reclaimed_bytes: u64,
}

/// A base write of a group's log client: on the local disk and on every secondary.
struct BaseWrite {
    offset_bytes: u64,
    data: Vec<u8>,
    local_done: bool,
    /// Replica indices still to answer.
    waiting: u64,
    failed: bool,
    started: Nanos,
}

/// Copying a group to a replica being rebuilt, piece by piece; base writes overlapping the
/// piece being copied wait for it.
struct Rebuild {
    target: ServerId,
    end: u64,
    next: u64,
    piece: Option<(u64, u64, PieceStage)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PieceStage {
    /// Waiting for base writes in flight over the piece.
    Draining,
    Reading,
    Sending {
        since: Nanos,
    },
}

struct Primary {
    view: GroupView,
    log: Client,
    releasing: bool,
    /// The log client's upward ids → (client, its request id).
    requests: BTreeMap<u64, (Endpoint, u64)>,
    base: BTreeMap<u64, BaseWrite>,
    /// Base writes waiting for a rebuild piece over their range.
    held: VecDeque<BaseOp>,
    /// The superblock as the MDS holds it (padded when read).
    superblock: Vec<u8>,
    /// MDS request id → (base id, data, sent at) of superblock writes in flight.
    superblock_writes: BTreeMap<u64, (u64, Vec<u8>, Nanos)>,
    rebuild: Option<Rebuild>,
    next_up: u64,
}

enum DiskWork {
    /// A group's base read or the local part of a base write.
    BaseRead {
        group: GroupId,
        epoch: Epoch,
        base: u64,
    },
    BaseWrite {
        group: GroupId,
        epoch: Epoch,
        base: u64,
    },
    /// A replicated write from a primary.
    Replica {
        to: Endpoint,
        id: u64,
    },
    RebuildRead {
        group: GroupId,
        epoch: Epoch,
    },
}

/// A write waiting for an overlapping write in flight to complete.
struct QueuedWrite {
    io: ChunkIo,
    work: DiskWork,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Power {
    On,
    /// Told to enter standby: releasing primaries.
    Releasing,
    /// Asked the driver to enter standby.
    Asleep,
}

pub struct ChunkServer {
    config: ServerConfig,
    incarnation: u64,
    now: Nanos,
    lease_until: Nanos,
    next_heartbeat: Nanos,
    power: Power,
    primaries: BTreeMap<GroupId, Primary>,
    /// The highest epoch seen per group (replication from an older one is refused).
    epochs: BTreeMap<GroupId, Epoch>,
    /// Secondaries that did not answer: unavailable here until then.
    suspected: BTreeMap<ServerId, Nanos>,
    next_id: u64,
    disk: BTreeMap<u64, DiskWork>,
    /// Writes in flight on the disk: (group, start, end) by disk id.
    writing: BTreeMap<u64, (GroupId, u64, u64)>,
    queued_writes: VecDeque<QueuedWrite>,
    /// Replicated writes sent: id → (group, epoch, base id or rebuild).
    replications: BTreeMap<u64, (GroupId, Epoch, Option<u64>)>,
    /// Store requests sent: our id → (group, the log client's id, store index).
    store_requests: BTreeMap<u64, (GroupId, u64, usize)>,
    out: VecDeque<(Endpoint, Message)>,
    store_out: VecDeque<(u64, u64, StoreRequest)>,
    io_out: VecDeque<ChunkIo>,
    stats: ServerStats,
}

impl ChunkServer {
    /// A server starting (or restarting: memory is empty, its disk as it was); `incarnation`
    /// must differ from every earlier start's.
    pub fn new(config: ServerConfig, incarnation: u64, now: Nanos) -> ChunkServer {
        let mut s = ChunkServer {
            config,
            incarnation,
            now,
            lease_until: 0,
            next_heartbeat: now,
            power: Power::On,
            primaries: BTreeMap::new(),
            epochs: BTreeMap::new(),
            suspected: BTreeMap::new(),
            next_id: 1,
            disk: BTreeMap::new(),
            writing: BTreeMap::new(),
            queued_writes: VecDeque::new(),
            replications: BTreeMap::new(),
            store_requests: BTreeMap::new(),
            out: VecDeque::new(),
            store_out: VecDeque::new(),
            io_out: VecDeque::new(),
            stats: ServerStats::default(),
        };
        s.heartbeat();
        s
    }

    pub fn id(&self) -> ServerId {
        self.config.server
    }

    pub fn stats(&self) -> ServerStats {
        let mut stats = self.stats;
        for p in self.primaries.values() {
            let log = p.log.stats();
            stats.logged_writes += log.offloaded_writes;
            stats.logged_bytes += log.offloaded_write_bytes;
            stats.reclaimed_bytes += log.reclaimed_bytes;
        }
        stats
    }

    pub fn power(&self) -> Power {
        self.power
    }

    /// Groups this server serves as primary, with their epochs.
    pub fn primaries(&self) -> impl Iterator<Item = (GroupId, Epoch)> + '_ {
        self.primaries.iter().map(|(g, p)| (*g, p.view.epoch))
    }

    /// Bytes logged and not yet reclaimed, over the groups this server is primary of.
    pub fn logged_bytes(&self) -> u64 {
        self.primaries
            .values()
            .map(|p| p.log.stats().offloaded_bytes)
            .sum()
    }

    /// One line per group served as primary: its view, whether the log client sees every
    /// replica available, a rebuild in progress, and the log client's own account.
    pub fn describe(&self) -> String {
        let now = self.now;
        self.primaries
            .iter()
            .map(|(g, p)| {
                format!(
                    "group {} epoch {} replicas {:?} available {:#b} rebuilding {:?} releasing {} base available {} suspected {:?} rebuild {:?} held {} base in flight {} log timeout {:?} requests {} superblock writes {}: {:?} {}",
                    g.0,
                    p.view.epoch,
                    p.view.replicas,
                    p.view.available,
                    p.view.rebuilding,
                    p.releasing,
                    p.log.base_available(),
                    self.suspected.iter().filter(|(_, &u)| u > now).map(|(s, _)| *s).collect::<Vec<_>>(),
                    p.rebuild.as_ref().map(|r| (r.target, r.next, r.end, r.piece.map(|(lo, hi, _)| (lo, hi)))),
                    p.held.len(),
                    p.base.len(),
                    p.log.poll_timeout(),
                    p.requests.len(),
                    p.superblock_writes.len(),
                    p.log.writes_in_flight(),
                    p.log.describe()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn poll_message(&mut self) -> Option<(Endpoint, Message)> {
        self.out.pop_front()
    }

    pub fn poll_store(&mut self) -> Option<(u64, u64, StoreRequest)> {
        self.store_out.pop_front()
    }

    pub fn poll_io(&mut self) -> Option<ChunkIo> {
        self.io_out.pop_front()
    }

    /// The server has released everything and asks to be put into standby.
    pub fn wants_sleep(&self) -> bool {
        self.power == Power::Asleep
    }

    /// Out of standby (memory kept): heartbeat at once.
    pub fn handle_wake(&mut self, now: Nanos) {
        self.now = now;
        self.power = Power::On;
        self.lease_until = 0;
        self.heartbeat();
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.power == Power::Asleep {
            return None;
        }
        let mut at = self.next_heartbeat;
        let mut consider = |t: Nanos| at = at.min(t);
        if !self.primaries.is_empty() {
            consider(self.lease_until);
        }
        for p in self.primaries.values() {
            if let Some(t) = p.log.poll_timeout() {
                consider(t);
            }
            for w in p.base.values() {
                consider(w.started + self.config.replicate_timeout_ns);
            }
            for (_, _, sent) in p.superblock_writes.values() {
                consider(sent + self.config.replicate_timeout_ns);
            }
            if let Some(Rebuild {
                piece: Some((_, _, PieceStage::Sending { since })),
                ..
            }) = p.rebuild
            {
                consider(since + self.config.replicate_timeout_ns);
            }
        }
        Some(at)
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = now;
        if self.power == Power::Asleep {
            return;
        }
        if now >= self.next_heartbeat {
            self.heartbeat();
        }
        if now >= self.lease_until && !self.primaries.is_empty() {
            // The lease lapsed on our clock: the MDS may give these groups to others soon.
            self.stats.leases_lapsed += 1;
            let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
            for g in groups {
                self.drop_primary(g, ServeError::LeaseExpired);
            }
        }
        self.suspected.retain(|_, until| *until > now);
        let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
        for g in groups {
            let timeout = self.config.replicate_timeout_ns;
            let Some(p) = self.primaries.get_mut(&g) else {
                continue;
            };
            // Secondaries that did not answer a base write in time.
            let mut late = 0u64;
            for w in p.base.values_mut() {
                if !w.failed && w.waiting != 0 && now >= w.started + timeout {
                    late |= w.waiting;
                    w.failed = true;
                }
            }
            let resend: Vec<(u64, u64, Vec<u8>)> = p
                .superblock_writes
                .iter()
                .filter(|(_, (_, _, sent))| now >= sent + timeout)
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
            if let Some(Rebuild {
                piece: Some((lo, hi, PieceStage::Sending { since })),
                ..
            }) = &mut p.rebuild
            {
                if now >= *since + timeout {
                    // Not taken: copy the piece again later.
                    let lo = *lo;
                    let _ = hi;
                    let rebuild = p.rebuild.as_mut().expect("a rebuild");
                    rebuild.piece = None;
                    rebuild.next = lo;
                }
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
            self.refresh_availability(g);
            self.finish_base_writes(g);
            self.pump(g);
        }
        self.maybe_sleep();
    }

    pub fn handle_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
        self.now = now;
        if self.power == Power::Asleep {
            return;
        }
        match message {
            Message::Lease { until, primaries } if from == Endpoint::Mds => {
                self.lease(until, primaries)
            }
            Message::BecomePrimary { view, superblock } if from == Endpoint::Mds => {
                self.become_primary(view, superblock)
            }
            Message::ReleasePrimary { group, epoch } if from == Endpoint::Mds => {
                if let Some(p) = self.primaries.get_mut(&group) {
                    if p.view.epoch == epoch {
                        p.releasing = true;
                        self.pump(group);
                    }
                }
            }
            Message::EnterStandby if from == Endpoint::Mds && self.power == Power::On => {
                self.power = Power::Releasing;
                let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
                for g in groups {
                    self.primaries.get_mut(&g).expect("primary").releasing = true;
                    self.pump(g);
                }
                self.maybe_sleep();
            }
            Message::GroupChanged { view } | Message::Rebuild { view } if from == Endpoint::Mds => {
                self.group_changed(view)
            }
            Message::SuperblockWritten { id, ok } if from == Endpoint::Mds => {
                self.superblock_written(id, ok)
            }
            Message::Read {
                id,
                group,
                offset_bytes,
                length_bytes,
            } => self.client_request(
                from,
                id,
                group,
                Upward::Read {
                    offset_bytes,
                    length_bytes,
                },
            ),
            Message::Write {
                id,
                group,
                offset_bytes,
                data,
            } => self.client_request(
                from,
                id,
                group,
                Upward::Write {
                    offset_bytes,
                    data,
                    durable: true,
                },
            ),
            Message::Replicate {
                id,
                group,
                epoch,
                offset_bytes,
                data,
            } => self.replicate_in(from, id, group, epoch, offset_bytes, data),
            Message::Replicated { id, ok } => self.replicated(from, id, ok),
            _ => {}
        }
        self.maybe_sleep();
    }

    /// A logger answered request `id`.
    pub fn handle_store(&mut self, now: Nanos, id: u64, reply: StoreReply, load: Option<u64>) {
        self.now = now;
        let Some((group, log_id, store)) = self.store_requests.remove(&id) else {
            return;
        };

        let Some(p) = self.primaries.get_mut(&group) else {
            return;
        };
        p.log.handle_store(now, store, log_id, reply, load);
        self.pump(group);
        self.maybe_sleep();
    }

    /// The connection to a logger broke: its requests may or may not have been carried out.
    pub fn logger_lost(&mut self, now: Nanos, logger: u64) {
        self.now = now;

        let groups: Vec<GroupId> = self.primaries.keys().copied().collect();
        for g in groups {
            let p = self.primaries.get_mut(&g).expect("primary");
            if let Some((idx, _, _)) = p.log.stores().into_iter().find(|(_, i, _)| i.id == logger) {
                p.log.connection_lost(now, idx);
                self.store_requests
                    .retain(|_, (group, _, store)| !(*group == g && *store == idx));
            }
            self.pump(g);
        }
    }

    pub fn handle_io(&mut self, now: Nanos, done: ChunkIoDone) {
        self.now = now;
        let id = match &done {
            ChunkIoDone::Read { id, .. } | ChunkIoDone::Written { id } => *id,
        };
        if self.writing.remove(&id).is_some() {
            self.issue_queued_writes();
        }
        let Some(work) = self.disk.remove(&id) else {
            return;
        };
        match (work, done) {
            (DiskWork::BaseRead { group, epoch, base }, ChunkIoDone::Read { data, .. }) => {
                if let Some(p) = self.primary_at(group, epoch) {
                    p.log.handle_base(now, BaseDone::Read { id: base, data });
                    self.pump(group);
                }
            }
            (DiskWork::BaseWrite { group, epoch, base }, ChunkIoDone::Written { .. }) => {
                if let Some(p) = self.primary_at(group, epoch) {
                    if let Some(w) = p.base.get_mut(&base) {
                        w.local_done = true;
                    }
                    self.finish_base_writes(group);
                    self.pump(group);
                }
            }
            (DiskWork::Replica { to, id }, ChunkIoDone::Written { .. }) => {
                self.stats.replicated += 1;
                self.out
                    .push_back((to, Message::Replicated { id, ok: true }));
            }
            (DiskWork::RebuildRead { group, epoch }, ChunkIoDone::Read { data, .. }) => {
                self.rebuild_read(group, epoch, data)
            }
            _ => {}
        }
        self.maybe_sleep();
    }

    // ---------------------------------------------------------------------------------------

    fn heartbeat(&mut self) {
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
            },
        ));
        self.next_heartbeat = self.now + self.config.heartbeat_interval_ns;
    }

    fn id_next(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn primary_at(&mut self, group: GroupId, epoch: Epoch) -> Option<&mut Primary> {
        self.primaries
            .get_mut(&group)
            .filter(|p| p.view.epoch == epoch)
    }

    fn lease(&mut self, until: Nanos, primaries: Vec<GroupView>) {
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
    }

    fn become_primary(&mut self, view: GroupView, superblock: Option<Vec<u8>>) {
        let g = view.group;
        if self.epochs.get(&g).is_some_and(|&e| e > view.epoch)
            || self
                .primaries
                .get(&g)
                .is_some_and(|p| p.view.epoch >= view.epoch)
            || view.primary != Some(self.config.server)
        {
            return;
        }
        if self.primaries.contains_key(&g) {
            self.drop_primary(g, ServeError::NotPrimary);
        }
        self.epochs.insert(g, view.epoch);
        let mut config = LogConfig::new(
            g.0 as u64,
            g.0 as u64,
            self.config.group_bytes + SUPERBLOCK_BYTES,
        );
        config.policy = Policy::WhileBaseUnavailable;
        config.n_way = self.config.log_copies;
        config.n_reclaim = self.config.reclaim_jobs_max;
        config.request_timeout_ns = Some(self.config.log_request_timeout_ns);
        config.recovery_grace_ns = self.config.log_recovery_grace_ns;
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
            base: BTreeMap::new(),
            held: VecDeque::new(),
            superblock: superblock.unwrap_or_default(),
            superblock_writes: BTreeMap::new(),
            rebuild: None,
            next_up: 1,
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
    fn logger_ranks(&self, view: &GroupView) -> Vec<(u64, u8)> {
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

    fn group_changed(&mut self, view: GroupView) {
        let g = view.group;
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        if p.view.epoch != view.epoch {
            return;
        }
        p.view = view;
        let ranks = self.logger_ranks(&self.primaries[&g].view);
        self.primaries
            .get_mut(&g)
            .expect("primary")
            .log
            .set_store_ranks(ranks);
        self.start_rebuild_if_needed(g);
        self.refresh_availability(g);
        self.pump(g);
    }

    fn start_rebuild_if_needed(&mut self, g: GroupId) {
        let chunk_bytes = self.config.chunk_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        match (p.view.rebuilding, &p.rebuild) {
            (Some(t), Some(r)) if r.target == t => {}
            (Some(target), _) => {
                p.rebuild = Some(Rebuild {
                    target,
                    end: p.view.slots as u64 * chunk_bytes,
                    next: 0,
                    piece: None,
                });
            }
            (None, _) => p.rebuild = None,
        }
    }

    /// Whether every secondary takes writes: the MDS says it is available, and it has not
    /// failed to answer here lately.
    fn refresh_availability(&mut self, g: GroupId) {
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

    fn client_request(&mut self, from: Endpoint, id: u64, group: GroupId, upward: Upward) {
        let is_write = matches!(upward, Upward::Write { .. });
        let refuse = |s: &mut ChunkServer, error: ServeError| {
            s.stats.refused += 1;
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
        if p.releasing || !p.log.is_ready() {
            return refuse(self, ServeError::Unavailable);
        }
        if p.requests
            .values()
            .any(|&(to, known)| to == from && known == id)
        {
            // A retry of a request still in flight here: its answer will serve both.
            return;
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
        p.requests.insert(up, (from, id));
        if is_write {
            self.stats.writes += 1;
        } else {
            self.stats.reads += 1;
        }
        p.log.handle_upward(now, up, upward);
        self.pump(group);
    }

    /// Moves a group's log client's output: answers to clients, logger requests, base I/O;
    /// completes a release when nothing is in flight; advances a rebuild.
    fn pump(&mut self, g: GroupId) {
        loop {
            let Some(p) = self.primaries.get_mut(&g) else {
                return;
            };
            let mut progressed = false;
            while let Some((up, reply)) = p.log.poll_upward() {
                progressed = true;
                let Some((to, id)) = p.requests.remove(&up) else {
                    continue;
                };
                let message = match reply {
                    UpReply::Read(data) => Message::ReadDone {
                        id,
                        result: Ok(data),
                    },
                    UpReply::Written => Message::WriteDone { id, result: Ok(()) },
                    UpReply::Error(e) => {
                        let error = match e {
                            cordillera_offload::client::ClientError::NoSpace => ServeError::NoSpace,
                            cordillera_offload::client::ClientError::BadRequest => {
                                ServeError::BadRequest
                            }
                            cordillera_offload::client::ClientError::NoStoreSet(_) => {
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
                self.out.push_back((to, message));
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
                self.primaries.remove(&g);
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

    fn base_op(&mut self, g: GroupId, op: BaseOp) {
        let group_bytes = self.config.group_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        match op {
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } if offset_bytes >= group_bytes => {
                // The log client's superblock, as the MDS holds it.
                let mut data = p.superblock.clone();
                data.resize(length_bytes as usize, 0);
                p.log.handle_base(self.now, BaseDone::Read { id, data });
            }
            BaseOp::Write {
                id,
                offset_bytes,
                data,
                ..
            } if offset_bytes >= group_bytes => {
                let request = self.next_id;
                self.next_id += 1;
                p.superblock_writes
                    .insert(request, (id, data.clone(), self.now));
                self.out.push_back((
                    Endpoint::Mds,
                    Message::WriteSuperblock {
                        id: request,
                        group: g,
                        epoch,
                        data,
                    },
                ));
            }
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => {
                let disk = self.id_next();
                self.disk.insert(
                    disk,
                    DiskWork::BaseRead {
                        group: g,
                        epoch,
                        base: id,
                    },
                );
                self.io_out.push_back(ChunkIo::Read {
                    id: disk,
                    group: g,
                    offset_bytes,
                    length_bytes,
                });
            }
            BaseOp::Write {
                id,
                offset_bytes,
                data,
                ..
            } => {
                let end = offset_bytes + data.len() as u64;
                let held = p.rebuild.as_ref().is_some_and(
                    |r| matches!(r.piece, Some((lo, hi, _)) if lo < end && offset_bytes < hi),
                );
                if held {
                    p.held.push_back(BaseOp::Write {
                        id,
                        offset_bytes,
                        data,
                        durable: true,
                    });
                    return;
                }
                self.start_base_write(g, id, offset_bytes, data);
            }
        }
    }

    fn start_base_write(&mut self, g: GroupId, base: u64, offset_bytes: u64, data: Vec<u8>) {
        let now = self.now;
        let me = self.config.server;
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        if !p.log.base_available() {
            // A secondary went away since the log client chose the base: log it instead.
            self.stats.base_writes_failed += 1;
            p.log.handle_base(now, BaseDone::Failed { id: base, data });
            return;
        }
        let targets: Vec<(usize, ServerId)> = p
            .view
            .replicas
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, s)| s != me)
            .collect();
        let waiting = targets.iter().fold(0u64, |m, &(i, _)| m | 1 << i);
        p.base.insert(
            base,
            BaseWrite {
                offset_bytes,
                data: data.clone(),
                local_done: false,
                waiting,
                failed: false,
                started: now,
            },
        );
        for (_, s) in targets {
            let id = self.id_next();
            self.replications.insert(id, (g, epoch, Some(base)));
            self.out.push_back((
                Endpoint::Server(s),
                Message::Replicate {
                    id,
                    group: g,
                    epoch,
                    offset_bytes,
                    data: data.clone(),
                },
            ));
        }
        let disk = self.id_next();
        self.write_disk(
            ChunkIo::Write {
                id: disk,
                group: g,
                offset_bytes,
                data,
            },
            DiskWork::BaseWrite {
                group: g,
                epoch,
                base,
            },
        );
    }

    /// Completes base writes whose replicas all answered (or one failed, once the local
    /// write is done).
    fn finish_base_writes(&mut self, g: GroupId) {
        let now = self.now;
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        let done: Vec<u64> = p
            .base
            .iter()
            .filter(|(_, w)| w.local_done && (w.waiting == 0 || w.failed))
            .map(|(&id, _)| id)
            .collect();
        for id in done {
            let w = p.base.remove(&id).expect("base write");
            if w.failed {
                self.stats.base_writes_failed += 1;
                p.log
                    .handle_base(now, BaseDone::Failed { id, data: w.data });
            } else {
                p.log.handle_base(now, BaseDone::Written { id });
            }
        }
    }

    /// Issues a disk write once no overlapping write is in flight (writes to the same bytes
    /// reach the disk in the order they were issued).
    fn write_disk(&mut self, io: ChunkIo, work: DiskWork) {
        let ChunkIo::Write {
            id,
            group,
            offset_bytes,
            ref data,
        } = io
        else {
            unreachable!("a write");
        };
        let end = offset_bytes + data.len() as u64;
        let overlaps = |w: &(GroupId, u64, u64)| w.0 == group && w.1 < end && offset_bytes < w.2;
        let blocked = self.writing.values().any(overlaps)
            || self.queued_writes.iter().any(|q| match &q.io {
                ChunkIo::Write {
                    group: qg,
                    offset_bytes: qo,
                    data: qd,
                    ..
                } => *qg == group && *qo < end && offset_bytes < qo + qd.len() as u64,
                _ => false,
            });
        if blocked {
            self.queued_writes.push_back(QueuedWrite { io, work });
            return;
        }
        self.writing.insert(id, (group, offset_bytes, end));
        self.disk.insert(id, work);
        self.io_out.push_back(io);
    }

    fn issue_queued_writes(&mut self) {
        let queued = std::mem::take(&mut self.queued_writes);
        for q in queued {
            self.write_disk(q.io, q.work);
        }
    }

    fn replicate_in(
        &mut self,
        from: Endpoint,
        id: u64,
        group: GroupId,
        epoch: Epoch,
        offset_bytes: u64,
        data: Vec<u8>,
    ) {
        let seen = self.epochs.entry(group).or_insert(epoch);
        if epoch < *seen
            || offset_bytes
                .checked_add(data.len() as u64)
                .is_none_or(|end| end > self.config.group_bytes)
        {
            self.stats.replicas_fenced += 1;
            self.out
                .push_back((from, Message::Replicated { id, ok: false }));
            return;
        }
        *seen = epoch;
        let disk = self.id_next();
        self.write_disk(
            ChunkIo::Write {
                id: disk,
                group,
                offset_bytes,
                data,
            },
            DiskWork::Replica { to: from, id },
        );
    }

    fn replicated(&mut self, from: Endpoint, id: u64, ok: bool) {
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
            Some(base) => {
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
            None => {
                // A rebuild piece.
                let mut copied = 0;
                if let Some(r) = &mut p.rebuild {
                    if let Some((lo, hi, PieceStage::Sending { .. })) = r.piece {
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
            }
        }
        self.pump(g);
    }

    fn release_held(&mut self, g: GroupId) {
        let Some(p) = self.primaries.get_mut(&g) else {
            return;
        };
        let held = std::mem::take(&mut p.held);
        for op in held {
            self.base_op(g, op);
        }
    }

    /// One step of a rebuild: wait for base writes over the next piece, read it, send it.
    fn advance_rebuild(&mut self, g: GroupId) -> bool {
        let piece_bytes = self.config.rebuild_piece_bytes;
        let p = self.primaries.get_mut(&g).expect("primary");
        let epoch = p.view.epoch;
        let Some(r) = &mut p.rebuild else {
            return false;
        };
        match r.piece {
            None if r.next >= r.end => {
                let replica = r.target;
                p.rebuild = None;
                self.out.push_back((
                    Endpoint::Mds,
                    Message::RebuildDone {
                        group: g,
                        epoch,
                        replica,
                    },
                ));
                true
            }
            None => {
                let lo = r.next;
                let hi = (lo + piece_bytes).min(r.end);
                r.piece = Some((lo, hi, PieceStage::Draining));
                true
            }
            Some((lo, hi, PieceStage::Draining)) => {
                let busy = p
                    .base
                    .values()
                    .any(|w| w.offset_bytes < hi && lo < w.offset_bytes + w.data.len() as u64);
                if busy {
                    return false;
                }
                r.piece = Some((lo, hi, PieceStage::Reading));
                let disk = self.id_next();
                self.disk
                    .insert(disk, DiskWork::RebuildRead { group: g, epoch });
                self.io_out.push_back(ChunkIo::Read {
                    id: disk,
                    group: g,
                    offset_bytes: lo,
                    length_bytes: hi - lo,
                });
                true
            }
            Some(_) => false,
        }
    }

    fn rebuild_read(&mut self, g: GroupId, epoch: Epoch, data: Vec<u8>) {
        let now = self.now;
        let Some(p) = self.primary_at(g, epoch) else {
            return;
        };
        let Some(r) = &mut p.rebuild else {
            return;
        };
        let Some((lo, hi, PieceStage::Reading)) = r.piece else {
            return;
        };
        r.piece = Some((lo, hi, PieceStage::Sending { since: now }));
        let target = r.target;
        let id = self.id_next();
        self.replications.insert(id, (g, epoch, None));
        self.out.push_back((
            Endpoint::Server(target),
            Message::Replicate {
                id,
                group: g,
                epoch,
                offset_bytes: lo,
                data,
            },
        ));
    }

    fn superblock_written(&mut self, id: u64, ok: bool) {
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
        p.superblock = data;
        p.log.handle_base(now, BaseDone::Written { id: base });
        self.pump(g);
    }

    /// Stops serving group `g` at once (lease lapsed, reassigned, fenced): requests waiting are
    /// answered `error`; work in flight is forgotten (its completions are ignored).
    fn drop_primary(&mut self, g: GroupId, error: ServeError) {
        let Some(p) = self.primaries.remove(&g) else {
            return;
        };
        for (_, (to, id)) in p.requests {
            // The client retries either kind the same way.
            self.out.push_back((
                to,
                Message::WriteDone {
                    id,
                    result: Err(error),
                },
            ));
        }
        self.store_requests.retain(|_, (group, _, _)| *group != g);
        self.replications.retain(|_, (group, _, _)| *group != g);
    }

    /// In standby once every primary is released and nothing is in flight on the disk.
    fn maybe_sleep(&mut self) {
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
