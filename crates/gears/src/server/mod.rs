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
use cordillera_vstore::store::{Reply as StoreReply, Request as StoreRequest, StoreError};

use crate::model::{GroupId, RackId, ServerId};
use crate::protocol::{Endpoint, Epoch, GroupView, Message, Nanos, ServeError};

mod base;
mod disk;
mod invariants;
mod placement;
mod primaries;
mod primary;
mod rebuild;
mod standing;
mod timers;

pub use placement::{GroupPlacement, Slots};

use primaries::{Epochs, Facts, Primaries};
use rebuild::{PieceStage, Rebuild, Replication};
use timers::Deadlines;

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
    /// A write that must be logged and that the loggers cannot take — all refusing it as full,
    /// or fewer than `log_copies` of them reachable — is answered within this long of its
    /// arrival (`NoSpace`, or `Unavailable` for too few copies). Keep it below the clients'
    /// request timeout: a client that times out first sends the write again into the same
    /// wait, and the retries pile up behind full loggers.
    pub log_wait_ns: Nanos,
    /// Until the group's writes that must be logged have found the loggers full for this long
    /// (none of them logged since), such a write is answered "busy" (the client sends it again
    /// later: cleaning, reclaim or the replicas' wake-up may make room meanwhile); after it,
    /// `NoSpace`.
    pub log_full_final_ns: Nanos,
    /// A group whose write the loggers refused as full is named in the heartbeats (so that
    /// the MDS keeps its replicas up, and the writes go to them) until this long after the
    /// last such refusal: longer than a client's longest wait between attempts of a write
    /// ([`crate::client::RETRY_DELAY_MAX_NS`]) plus a heartbeat, so that the attempt after a
    /// refusal finds the replicas still up.
    pub log_full_hold_ns: Nanos,
    pub log_recovery_grace_ns: Nanos,
    /// Reclaim jobs at once over all the groups the server is primary of (at least 1).
    pub reclaim_jobs_max: usize,
    /// Reclaim as background work (§4.5: "the reclaim I/Os would get background priority"):
    /// while more than this many disk operations besides the server's own reclaim jobs are in
    /// flight, no new reclaim job starts — except for at-risk data, and one job when none has
    /// started for `reclaim_starved_ns`. `None`: reclaim whatever the disk's load.
    pub reclaim_busy_disk: Option<usize>,
    pub reclaim_starved_ns: Nanos,
    /// Bytes copied per step of a rebuild.
    pub rebuild_piece_bytes: u64,
    /// Rebuild pieces copied at once over all the groups the server is primary of.
    pub rebuild_jobs_max: usize,
    /// Client requests in flight at most; more are refused `Busy`.
    pub requests_max: usize,
    /// §3.6: logged writes are also written to the primary's own replica, which then serves
    /// reads of them and is not written again by their reclaim (on by default, as the paper).
    pub local_copy: bool,
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
            log_wait_ns: 1_000_000_000,
            log_full_final_ns: 5_000_000_000,
            log_full_hold_ns: 3_000_000_000,
            log_recovery_grace_ns: 1_000_000_000,
            reclaim_jobs_max: 2,
            reclaim_busy_disk: None,
            reclaim_starved_ns: 2_000_000_000,
            rebuild_piece_bytes: 1 << 20,
            rebuild_jobs_max: 4,
            requests_max: 4096,
            local_copy: true,
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
    /// Of `refused`, by reason: not the group's primary, lease lapsed, the primary migrating
    /// or its log client starting, too many requests in flight.
    pub refused_not_primary: u64,
    pub refused_lease: u64,
    pub refused_unavailable: u64,
    pub refused_busy: u64,
    /// Writes refused (as not primary or unavailable) for naming another epoch than the
    /// primary's, or for an id no newer than one of the same client's it already took: an
    /// attempt held up in the network, which must not land after newer writes.
    pub refused_stale: u64,
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
    /// Of `reclaimed_bytes`, those that had fewer than `log_copies` copies on live loggers.
    pub reclaimed_at_risk_bytes: u64,
    /// §3.6: logged writes also written to the local replica; read pieces of logged data it
    /// served; read pieces the loggers served; reclaimed bytes not written to it again.
    pub local_copies: u64,
    pub local_reads: u64,
    pub logger_reads: u64,
    pub reclaim_local_bytes: u64,
}

impl ServerStats {
    /// Adds a log client's figures (a primary's, while it serves or as it ends).
    fn add_log(&mut self, log: &cordillera_offload::client::Stats) {
        self.logged_writes += log.offloaded_writes;
        self.logged_bytes += log.offloaded_write_bytes;
        self.reclaimed_bytes += log.reclaimed_bytes;
        self.reclaimed_at_risk_bytes += log.reclaimed_at_risk_bytes;
        self.local_copies += log.local_copies;
        self.local_reads += log.local_reads;
        self.logger_reads += log.store_reads;
        self.reclaim_local_bytes += log.reclaim_local_bytes;
    }
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

/// A client's read or write in flight at a primary.
struct ClientRequest {
    to: Endpoint,
    id: u64,
    /// The request's first attempt: later attempts join it.
    piece: u64,
    /// Later attempts that arrived while it was in flight: each is answered as it is.
    joined: Vec<u64>,
}

impl ClientRequest {
    /// The answer `message` (to the first attempt) to every attempt.
    fn answers(&self, message: Message) -> Vec<(Endpoint, Message)> {
        let mut all: Vec<(Endpoint, Message)> = self
            .joined
            .iter()
            .map(|&id| {
                let again = match &message {
                    Message::WriteDone { result, .. } => Message::WriteDone {
                        id,
                        result: *result,
                    },
                    Message::ReadDone { result, .. } => Message::ReadDone {
                        id,
                        result: result.clone(),
                    },
                    other => other.clone(),
                };
                (self.to, again)
            })
            .collect();
        all.push((self.to, message));
        all
    }
}

struct Primary {
    view: GroupView,
    log: Client,
    releasing: bool,
    /// The log client's upward ids → the client's request.
    requests: BTreeMap<u64, ClientRequest>,
    /// The newest write id taken from each client in this epoch: a client numbers its
    /// attempts in order, so an older one arriving late is refused, not applied over a newer.
    last_write: BTreeMap<Endpoint, u64>,
    base: BTreeMap<u64, BaseWrite>,
    /// Base writes waiting for a rebuild piece over their range.
    held: VecDeque<BaseOp>,
    /// The superblock as the MDS holds it (padded when read).
    superblock: Vec<u8>,
    /// MDS request id → (base id, data, sent at) of superblock writes in flight.
    superblock_writes: BTreeMap<u64, (u64, Vec<u8>, Nanos)>,
    rebuild: Option<Rebuild>,
    /// A piece copy sent for a rebuild the MDS has since ended or replaced: (lo, hi, token,
    /// sent at). Base writes over it wait for its answer, or its timeout, as for a current one.
    orphan_piece: Option<(u64, u64, u64, Nanos)>,
    next_up: u64,
    /// Since when the group's writes that must be logged have found the loggers full (from
    /// the first such answer, less the wait it took); cleared when one is logged.
    log_full_since: Option<Nanos>,
    /// When a write of the group was last refused for full loggers (busy or no space): the
    /// heartbeats name the group until `log_full_hold_ns` after it.
    last_full_refusal: Option<Nanos>,
    /// When a logger last refused one of the group's log writes as full, even if the others
    /// took it: the group logs to every logger, so one full logger leaves every write short.
    logger_refused_full: Option<Nanos>,
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
    Replica { to: Endpoint, id: u64 },
    RebuildRead {
        group: GroupId,
        epoch: Epoch,
        token: u64,
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
    primaries: Primaries,
    /// The highest epoch seen per group (replication from an older one is refused).
    epochs: Epochs,
    /// Secondaries that did not answer: unavailable here until then.
    suspected: BTreeMap<ServerId, Nanos>,
    next_id: u64,
    disk: BTreeMap<u64, DiskWork>,
    /// Writes in flight on the disk: (group, start, end) by disk id.
    writing: BTreeMap<u64, (GroupId, u64, u64)>,
    queued_writes: VecDeque<QueuedWrite>,
    /// Replicated writes sent: id → (group, epoch, base id or rebuild).
    replications: BTreeMap<u64, (GroupId, Epoch, Replication)>,
    /// Store requests sent: our id → (group, the log client's id, store index).
    store_requests: BTreeMap<u64, (GroupId, u64, usize)>,
    out: VecDeque<(Endpoint, Message)>,
    store_out: VecDeque<(u64, u64, StoreRequest)>,
    io_out: VecDeque<ChunkIo>,
    stats: ServerStats,
    /// Where the next free reclaim slot is offered, and when the slots were last shared out
    /// (see `balance_reclaim`).
    reclaim_cursor: usize,
    balanced_at: Nanos,
    /// When a reclaim job was last granted (or none was wanted).
    reclaim_granted_at: Nanos,
}

impl ChunkServer {
    /// A server starting (or restarting: memory is empty, its disk as it was); `incarnation`
    /// must differ from every earlier start's.
    pub fn new(config: ServerConfig, incarnation: u64, now: Nanos) -> ChunkServer {
        let mut s = ChunkServer {
            primaries: Primaries::new(Deadlines::of(&config)),
            config,
            incarnation,
            now,
            lease_until: 0,
            next_heartbeat: now,
            power: Power::On,
            epochs: Epochs::default(),
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
            reclaim_cursor: 0,
            balanced_at: 0,
            reclaim_granted_at: 0,
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
            stats.add_log(&p.log.stats());
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

    /// Of [`logged_bytes`](Self::logged_bytes), those with fewer than `log_copies` copies on
    /// loggers that are up (a logger failed): reclaimed at high priority (§3.7).
    pub fn at_risk_bytes(&self) -> u64 {
        self.primaries.values().map(|p| p.log.at_risk_bytes()).sum()
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
        self.event_done();
    }

    // ---- The host's entry points: each event, then the reclaim budget shared out again.

    /// After every event: the changed groups' facts computed again (`primaries.rs`), then the
    /// invariants checked (debug builds).
    fn event_done(&mut self) {
        self.primaries.settle();
        self.check_invariants();
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.on_timeout(now);
        self.balance_reclaim(true);
        self.event_done();
    }

    pub fn handle_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
        self.on_message(now, from, message);
        self.balance_reclaim(false);
        self.event_done();
    }

    /// A logger answered request `id` (`load`: the requests open there).
    pub fn handle_store(&mut self, now: Nanos, id: u64, reply: StoreReply, load: Option<u64>) {
        self.on_store(now, id, reply, load);
        self.balance_reclaim(false);
        self.event_done();
    }

    /// The connection to a logger broke: its requests may or may not have been carried out.
    pub fn logger_lost(&mut self, now: Nanos, logger: u64) {
        self.on_logger_lost(now, logger);
        self.balance_reclaim(false);
        self.event_done();
    }

    pub fn handle_io(&mut self, now: Nanos, done: ChunkIoDone) {
        self.on_io(now, done);
        self.balance_reclaim(false);
        self.event_done();
    }

    fn on_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
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
                self.enter_standby()
            }
            Message::GroupChanged { view } | Message::Rebuild { view } if from == Endpoint::Mds => {
                self.group_changed(view)
            }
            Message::SuperblockWritten { id, ok } if from == Endpoint::Mds => {
                self.superblock_written(id, ok)
            }
            Message::Read {
                id,
                piece,
                group,
                offset_bytes,
                length_bytes,
            } => self.client_request(
                from,
                (id, piece),
                group,
                None,
                Upward::Read {
                    offset_bytes,
                    length_bytes,
                },
            ),
            Message::Write {
                id,
                piece,
                group,
                epoch,
                offset_bytes,
                data,
            } => self.client_request(
                from,
                (id, piece),
                group,
                Some(epoch),
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
    fn on_store(&mut self, now: Nanos, id: u64, reply: StoreReply, load: Option<u64>) {
        self.now = now;
        let Some((group, log_id, store)) = self.store_requests.remove(&id) else {
            return;
        };

        let Some(p) = self.primaries.get_mut(&group) else {
            return;
        };
        if reply == StoreReply::Error(StoreError::Full) {
            p.logger_refused_full = Some(now);
        }
        p.log.handle_store(now, store, log_id, reply, load);
        self.pump(group);
        self.maybe_sleep();
    }

    /// The connection to a logger broke: its requests may or may not have been carried out.
    fn on_logger_lost(&mut self, now: Nanos, logger: u64) {
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

    fn on_io(&mut self, now: Nanos, done: ChunkIoDone) {
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
            (
                DiskWork::RebuildRead {
                    group,
                    epoch,
                    token,
                },
                ChunkIoDone::Read { data, .. },
            ) => self.rebuild_read(group, epoch, token, data),
            _ => {}
        }
        self.maybe_sleep();
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
}

#[cfg(test)]
mod tests;
