//! The metadata service (§3.1, §3.5, §3.7) as a deterministic state machine: objects → chunks →
//! chunk groups → replicas and primary; heartbeats and leases; primaries reassigned when a lease
//! lapses; failures suspected, peers woken, and a permanently failed server rebuilt onto its
//! gear group; gear shifts (servers sent to standby after migrating their primaries, woken and
//! given primaries back); the log clients' superblocks.
//!
//! # Driver contract
//!
//! ```text
//! let mut mds = Mds::new(config, &layout, now);
//! loop {
//!     while let Some((to, message)) = mds.poll_message() { send }
//!     while let Some(server) = mds.poll_wake() { power the server on (it heartbeats when up) }
//!     wait for: a message          → mds.handle_message(now, from, message)
//!               a gear decision    → mds.set_gear(now, gear, rotation)
//!               mds.poll_timeout() → mds.handle_timeout(now)
//! }
//! ```
//!
//! # Timing
//!
//! A server's lease runs from the moment it *sent* the heartbeat, for `lease_ns`; the MDS
//! suspects a server `heartbeat_timeout_ns` after it last *received* one. With
//! `heartbeat_timeout_ns > lease_ns` (checked), a server's leases have lapsed — on its own clock —
//! before the MDS gives its primaries to others; the difference is the margin for messages in
//! flight (a deposed primary's late messages are also refused by epoch).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Serialize;

use cordillera_types::rng::SplitMix64;

use crate::layout::{Layout, LayoutKind, RackPolicy};
use crate::model::{GroupId, ObjectId, ServerId, Topology};
use crate::protocol::{Endpoint, Epoch, GroupView, MdsError, Message, Nanos, ObjectLayout};

#[derive(Clone, Debug, Serialize)]
pub struct MdsConfig {
    pub chunk_bytes: u64,
    pub lease_ns: Nanos,
    pub heartbeat_timeout_ns: Nanos,
    /// A server suspected this long is declared permanently failed and rebuilt.
    pub permanent_after_ns: Nanos,
    /// A server woken from standby that has not heartbeat after this long is suspected.
    pub wake_timeout_ns: Nanos,
    /// Chunks an object may have (bounds what one request can make the MDS allocate).
    pub chunks_per_object_max: u64,
    /// Chunk slots a group may have (its chunk servers hold `slots × chunk_bytes` per group).
    pub slots_per_group_max: u32,
    pub seed: u64,
}

impl MdsConfig {
    /// 1 s leases, suspicion after 3 s without a heartbeat, rebuild after 15 minutes.
    pub fn new(chunk_bytes: u64) -> MdsConfig {
        MdsConfig {
            chunk_bytes,
            lease_ns: 1_000_000_000,
            heartbeat_timeout_ns: 3_000_000_000,
            permanent_after_ns: 15 * 60 * 1_000_000_000,
            wake_timeout_ns: 60 * 1_000_000_000,
            chunks_per_object_max: 1 << 24,
            slots_per_group_max: u32::MAX,
            seed: 1,
        }
    }
}

/// A chunk server as the MDS sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerState {
    /// Heartbeating, serving.
    Up,
    /// Told to enter standby: releasing its primaries; no longer counted available.
    Releasing,
    Standby,
    /// Told to wake; waiting for its first heartbeat.
    Waking,
    /// No heartbeat for the timeout: its primaries were reassigned, its peers woken.
    Suspect,
    /// Suspected for `permanent_after_ns`: its replicas are rebuilt elsewhere; it is out.
    Failed,
}

#[derive(Clone, Debug)]
struct ServerEntry {
    state: ServerState,
    last_heartbeat: Nanos,
    /// The server's life as of its last heartbeat (`None`: not heard from yet).
    incarnation: Option<u64>,
    since: Nanos,
    /// The current gear wants it in standby.
    wanted_off: bool,
}

#[derive(Clone, Debug)]
struct GroupEntry {
    replicas: Vec<ServerId>,
    primary: Option<ServerId>,
    epoch: Epoch,
    superblock: Option<Vec<u8>>,
    next_slot: u32,
    rebuilding: Option<ServerId>,
    /// When the current primary was assigned.
    assigned_at: Nanos,
    /// The primary was asked to release, for this server (migration back) or for none (it is
    /// going into standby).
    release_to: Option<Option<ServerId>>,
}

#[derive(Clone, Debug)]
struct ObjectEntry {
    size_bytes: u64,
    first_chunk: u64,
    chunk_count: u64,
}

/// What the MDS counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MdsStats {
    pub migrations: u64,
    pub reassignments: u64,
    pub suspicions: u64,
    pub permanent_failures: u64,
    pub rebuilds_started: u64,
    pub rebuilds_done: u64,
    pub wakes: u64,
    /// Of `wakes`, those for groups whose loggers refused writes as full.
    pub log_full_wakes: u64,
    pub standbys: u64,
}

/// The MDS's state size (§4.5: 23 bytes per chunk).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StateSize {
    pub bytes: u64,
    pub chunks: u64,
    pub groups: u64,
    pub objects: u64,
    pub bytes_per_chunk: f64,
    pub bytes_per_group: f64,
}

pub struct Mds {
    config: MdsConfig,
    topology: Topology,
    /// Gear group of each server (power-aware layouts), for standby and rebuild.
    gear_group: Vec<Option<usize>>,
    layout_kind: LayoutKind,
    cross_rack: bool,
    servers: Vec<ServerEntry>,
    groups: Vec<GroupEntry>,
    /// Groups each server holds a replica of.
    groups_of: Vec<BTreeSet<u32>>,
    objects: BTreeMap<ObjectId, ObjectEntry>,
    /// Chunk id → (group, slot); `u32::MAX` group for freed chunks.
    chunks: Vec<(u32, u32)>,
    rng: SplitMix64,
    out: VecDeque<(Endpoint, Message)>,
    wakes: VecDeque<ServerId>,
    /// The last gear set and its rotation, applied again when log pressure changes.
    plan: Option<(usize, Vec<usize>)>,
    /// Groups whose primary reports its loggers refusing writes as full (soft state: every
    /// heartbeat reports it again): their replicas are kept up whatever the gear.
    log_full: BTreeSet<u32>,
    stats: MdsStats,
    now: Nanos,
    /// The durable state as last reported by `take_changes`.
    persisted: persist::Persisted,
    /// Each group's epoch and primary at the last invariant check (debug builds).
    checked: Vec<(Epoch, Option<ServerId>)>,
    /// Events since the last invariant check.
    events_since_check: u64,
}

impl Mds {
    /// An MDS for the groups of `layout` (one unit per chunk group), every server up as of
    /// `now` (it is suspected if it does not heartbeat within the timeout).
    pub fn new(config: MdsConfig, layout: &Layout, now: Nanos) -> Mds {
        assert!(
            config.heartbeat_timeout_ns > config.lease_ns,
            "leases must lapse before the MDS gives their primaries to others"
        );
        assert!(config.chunk_bytes > 0);
        let n = layout.topology.servers();
        let rng = SplitMix64(config.seed);
        let mut groups_of = vec![BTreeSet::new(); n];
        let groups: Vec<GroupEntry> = (0..layout.unit_count())
            .map(|i| {
                let replicas = layout.unit(i).to_vec();
                for &s in &replicas {
                    groups_of[s as usize].insert(i as u32);
                }
                // Primaries are assigned as the servers first heartbeat.
                GroupEntry {
                    replicas,
                    primary: None,
                    epoch: 1,
                    superblock: None,
                    next_slot: 0,
                    rebuilding: None,
                    assigned_at: now,
                    release_to: None,
                }
            })
            .collect();
        Mds {
            gear_group: (0..n as ServerId).map(|s| layout.gear_group(s)).collect(),
            layout_kind: layout.spec.kind,
            cross_rack: layout.spec.racks != RackPolicy::Ignored,
            topology: layout.topology.clone(),
            servers: vec![
                ServerEntry {
                    state: ServerState::Up,
                    last_heartbeat: now,
                    incarnation: None,
                    since: now,
                    wanted_off: false,
                };
                n
            ],
            groups,
            groups_of,
            objects: BTreeMap::new(),
            chunks: Vec::new(),
            rng,
            config,
            out: VecDeque::new(),
            wakes: VecDeque::new(),
            plan: None,
            log_full: BTreeSet::new(),
            stats: MdsStats::default(),
            now,
            persisted: persist::Persisted::default(),
            checked: Vec::new(),
            events_since_check: 0,
        }
    }

    pub fn config(&self) -> &MdsConfig {
        &self.config
    }

    pub fn stats(&self) -> MdsStats {
        self.stats
    }

    pub fn server_state(&self, server: ServerId) -> ServerState {
        self.servers[server as usize].state
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The group as its primary would be told it.
    pub fn view(&self, group: GroupId) -> GroupView {
        let g = &self.groups[group.0 as usize];
        let available = g
            .replicas
            .iter()
            .enumerate()
            .filter(|(_, &s)| self.servers[s as usize].state == ServerState::Up)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        GroupView {
            group,
            epoch: g.epoch,
            replicas: g.replicas.clone(),
            primary: g.primary,
            available,
            rebuilding: g.rebuilding,
            slots: g.next_slot,
        }
    }

    pub fn poll_message(&mut self) -> Option<(Endpoint, Message)> {
        self.out.pop_front()
    }

    /// A server to power on (it was in standby): the driver wakes it.
    pub fn poll_wake(&mut self) -> Option<ServerId> {
        self.wakes.pop_front()
    }

    /// The next moment a server's silence must be looked at ([`Mds::silence`]).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.servers
            .iter()
            .filter_map(|s| self.silence(s))
            .map(|(at, _)| at)
            .min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.on_timeout(now);
        self.check_invariants();
    }

    fn on_timeout(&mut self, now: Nanos) {
        self.now = now;
        for s in 0..self.servers.len() {
            match self.silence(&self.servers[s]) {
                Some((at, Silence::Suspect)) if now >= at => self.suspect(s as ServerId),
                Some((at, Silence::Failed)) if now >= at => self.fail_permanently(s as ServerId),
                _ => {}
            }
        }
    }

    pub fn handle_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
        self.on_message(now, from, message);
        self.check_invariants();
    }

    fn on_message(&mut self, now: Nanos, from: Endpoint, message: Message) {
        self.now = now;
        match (from, message) {
            (
                Endpoint::Server(s),
                Message::Heartbeat {
                    server,
                    incarnation,
                    sent_at,
                    primaries,
                    log_full,
                },
            ) if s == server && (s as usize) < self.servers.len() => {
                self.heartbeat(s, incarnation, sent_at, &primaries);
                self.log_full_reported(s, &log_full);
            }
            (Endpoint::Server(s), Message::ReleasedPrimary { group, epoch }) => {
                self.released(s, group, epoch)
            }
            (Endpoint::Server(s), Message::Standby { server }) if s == server => self.standby(s),
            (
                Endpoint::Server(_),
                Message::RebuildDone {
                    group,
                    epoch,
                    replica,
                },
            ) => self.rebuild_done(group, epoch, replica),
            (
                Endpoint::Server(s),
                Message::WriteSuperblock {
                    id,
                    group,
                    epoch,
                    data,
                },
            ) => {
                let ok = self.write_superblock(s, group, epoch, &data);
                self.out
                    .push_back((from, Message::SuperblockWritten { id, ok }));
            }
            (
                Endpoint::Client(_),
                Message::Create {
                    id,
                    object,
                    size_bytes,
                },
            ) => {
                let result = self.create(object, size_bytes);
                self.out.push_back((from, Message::Created { id, result }));
            }
            (Endpoint::Client(_), Message::Lookup { id, object }) => {
                let result = self.layout_of(object);
                self.out.push_back((from, Message::Located { id, result }));
            }
            (Endpoint::Client(_), Message::LookupGroup { id, group }) => {
                let result = if (group.0 as usize) < self.groups.len() {
                    Ok(self.view(group))
                } else {
                    Err(MdsError::NoSuchGroup)
                };
                self.out
                    .push_back((from, Message::GroupLocated { id, result }));
            }
            (Endpoint::Client(_), Message::Delete { id, object }) => {
                let result = self.delete(object);
                self.out.push_back((from, Message::Deleted { id, result }));
            }
            // Anything else (a message of the wrong kind or from the wrong sender) is ignored:
            // the MDS never acts on what it cannot attribute.
            _ => {}
        }
    }

    /// Puts the cluster in `gear` (1 to r): the servers of the first r − gear gear groups of
    /// `rotation` go into standby (after giving up their primaries), the others are woken. A
    /// server is kept on while some group it holds would have no other replica up.
    pub fn set_gear(&mut self, now: Nanos, gear: usize, rotation: &[usize]) {
        self.on_set_gear(now, gear, rotation);
        self.check_invariants();
    }

    /// Whether the last gear shift has run its course: no primary is being released (§3.5's
    /// migrations, to standby or back), and no server is still releasing or waking.
    pub fn shift_settled(&self) -> bool {
        self.groups.iter().all(|g| g.release_to.is_none())
            && self
                .servers
                .iter()
                .all(|s| !matches!(s.state, ServerState::Releasing | ServerState::Waking))
    }

    /// The MDS's state in memory, counted from its contents (§4.5: "the MDS has on average 23
    /// bytes of data per chunk").
    pub fn state_size(&self) -> StateSize {
        let chunk = std::mem::size_of::<(u32, u32)>() as u64;
        let object = (std::mem::size_of::<ObjectId>() + std::mem::size_of::<ObjectEntry>()) as u64;
        let group_fixed = std::mem::size_of::<GroupEntry>() as u64;
        let group_bytes: u64 = self
            .groups
            .iter()
            .map(|g| {
                group_fixed
                    + 4 * g.replicas.len() as u64
                    + g.superblock.as_ref().map_or(0, |s| s.len() as u64)
            })
            .sum();
        let server_bytes = (std::mem::size_of::<ServerEntry>() * self.servers.len()) as u64
            + self
                .groups_of
                .iter()
                .map(|g| 4 * g.len() as u64)
                .sum::<u64>();
        let chunks = self.chunks.iter().filter(|c| c.0 != u32::MAX).count() as u64;
        // The chunk table as allocated (its spare capacity too: up to twice its length).
        let bytes = chunk * self.chunks.capacity() as u64
            + object * self.objects.len() as u64
            + group_bytes
            + server_bytes;
        StateSize {
            bytes,
            chunks,
            groups: self.groups.len() as u64,
            objects: self.objects.len() as u64,
            bytes_per_chunk: bytes as f64 / chunks.max(1) as f64,
            bytes_per_group: bytes as f64 / self.groups.len().max(1) as f64,
        }
    }
}

mod failures;
mod groups;
mod invariants;
mod objects;
pub mod persist;
mod servers;

use servers::Silence;
#[cfg(test)]
mod tests;
