//! Messages between Sierra's parts (§3.1, §3.5, §3.7): chunk servers and the metadata service
//! (heartbeats, leases, primary migration, standby, rebuild, the log clients' superblocks),
//! clients and the metadata service (objects), clients and primaries (reads and writes),
//! primaries and secondaries (replication). Primaries talk to loggers in the versioned store's
//! own protocol, which the driver carries alongside.
//!
//! Byte ranges of a chunk group are addressed in the group's space: chunk slot × chunk size +
//! offset in the chunk.

use std::hash::{Hash, Hasher};

use crate::model::{GroupId, ObjectId, ServerId};

pub use cordillera_types::Nanos;

/// A chunk group's primary term: raised by the MDS at every change of primary. Replication
/// carries it, and a secondary refuses a term older than one it has seen (a deposed primary's
/// late messages); the MDS refuses superblock writes of an old term.
pub type Epoch = u64;

/// Who a message is for or from, as the cores name them; the driver maps them to addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Mds,
    Server(ServerId),
    Client(u32),
}

/// A chunk group as its primary needs to know it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupView {
    pub group: GroupId,
    pub epoch: Epoch,
    /// The replicas, the primary among them.
    pub replicas: Vec<ServerId>,
    pub primary: Option<ServerId>,
    /// Bit i: replica i is powered and serving (a secondary that is not forces logging mode).
    pub available: u64,
    /// A replica being rebuilt (it takes new writes; its older data is being copied to it).
    pub rebuilding: Option<ServerId>,
    /// Chunk slots allocated in the group: its data lies below `slots` × chunk size.
    pub slots: u32,
}

impl GroupView {
    pub fn secondaries(&self) -> impl Iterator<Item = (usize, ServerId)> + '_ {
        let primary = self.primary;
        self.replicas
            .iter()
            .copied()
            .enumerate()
            .filter(move |&(_, s)| Some(s) != primary)
    }

    /// Whether every secondary is available (the primary is not in logging mode).
    pub fn all_available(&self) -> bool {
        self.secondaries()
            .all(|(i, _)| self.available & (1 << i) != 0)
    }
}

/// Where an object's chunks are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectLayout {
    pub object: ObjectId,
    pub size_bytes: u64,
    pub chunk_bytes: u64,
    /// Chunk i of the object: (its group, its slot in the group).
    pub chunks: Vec<(GroupId, u32)>,
    /// The groups the chunks are in, with their current primaries.
    pub groups: Vec<GroupView>,
}

/// Why a chunk server did not serve a request; the client retries the first four (after
/// asking the MDS for the group's primary again) a bounded number of times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ServeError {
    #[error("not the primary of the group")]
    NotPrimary,
    #[error("the primary's lease has lapsed")]
    LeaseExpired,
    #[error("the primary is migrating or starting")]
    Unavailable,
    #[error("the chunk server is busy")]
    Busy,
    #[error("the request is outside the group or malformed")]
    BadRequest,
    #[error("no space on the loggers for a write that must be logged")]
    NoSpace,
}

/// Why the MDS refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MdsError {
    #[error("no such object")]
    NoSuchObject,
    #[error("the object exists")]
    Exists,
    #[error("the object is too large for the MDS's limits")]
    TooLarge,
    #[error("no such chunk group")]
    NoSuchGroup,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    // ---- chunk server → MDS
    /// Every heartbeat interval. `incarnation` changes at every start of the server, so the MDS
    /// tells a restart (memory lost: its primaries must be assigned again) from a late heartbeat.
    Heartbeat {
        server: ServerId,
        incarnation: u64,
        sent_at: Nanos,
        /// The groups it serves as primary, with their epochs (releasing ones included).
        primaries: Vec<(GroupId, Epoch)>,
        /// Of those, the groups whose loggers refuse their writes as full: the MDS keeps their
        /// replicas up (waking them if asleep) until the log drains by reclaim.
        log_full: Vec<GroupId>,
    },
    /// §3.5 step 2: the server no longer serves as the group's primary.
    ReleasedPrimary {
        group: GroupId,
        epoch: Epoch,
    },
    /// §3.5: no primaries and nothing outstanding: the server goes into standby now.
    Standby {
        server: ServerId,
    },
    /// The group's rebuilt replica holds all its data.
    RebuildDone {
        group: GroupId,
        epoch: Epoch,
        replica: ServerId,
    },
    /// A log client's superblock for the group (its generation, loggers and degraded flag),
    /// kept by the MDS so that it survives the primary.
    WriteSuperblock {
        id: u64,
        group: GroupId,
        epoch: Epoch,
        data: Vec<u8>,
    },

    // ---- MDS → chunk server
    /// The reply to a heartbeat: a lease on the listed primaries until `until` (the heartbeat's
    /// `sent_at` plus the lease time, on the server's own clock).
    Lease {
        until: Nanos,
        primaries: Vec<GroupView>,
    },
    /// §3.5 step 4 (and reassignment after a failure): serve as the group's primary from now,
    /// starting its log client from `superblock` (none: never logged).
    BecomePrimary {
        view: GroupView,
        superblock: Option<Vec<u8>>,
    },
    /// Give up the group's primary (migration back to a woken server, or before standby).
    ReleasePrimary {
        group: GroupId,
        epoch: Epoch,
    },
    /// Go into standby: release every primary, then report `Standby`.
    EnterStandby,
    /// The replicas of a group changed availability (a peer went into standby, failed, or came
    /// back), or its replicas changed (rebuild).
    GroupChanged {
        view: GroupView,
    },
    /// Copy the group's data to `view.rebuilding`.
    Rebuild {
        view: GroupView,
    },
    SuperblockWritten {
        id: u64,
        ok: bool,
    },

    // ---- client → MDS
    Create {
        id: u64,
        object: ObjectId,
        size_bytes: u64,
    },
    Lookup {
        id: u64,
        object: ObjectId,
    },
    LookupGroup {
        id: u64,
        group: GroupId,
    },
    Delete {
        id: u64,
        object: ObjectId,
    },
    // ---- MDS → client
    Created {
        id: u64,
        result: Result<ObjectLayout, MdsError>,
    },
    Located {
        id: u64,
        result: Result<ObjectLayout, MdsError>,
    },
    GroupLocated {
        id: u64,
        result: Result<GroupView, MdsError>,
    },
    Deleted {
        id: u64,
        result: Result<(), MdsError>,
    },

    // ---- client → primary
    /// A read's attempt: `piece` is the id of its first attempt, as for a write.
    Read {
        id: u64,
        piece: u64,
        group: GroupId,
        offset_bytes: u64,
        length_bytes: u64,
    },
    /// A write's attempt, under the view of epoch `epoch`: a primary serving another epoch
    /// refuses it, so an attempt held up in the network cannot land once the group has moved
    /// on (the client acknowledges a write only when no attempt of it may still land). `id`
    /// is the attempt's own; `piece` the id of the write's first attempt, the same at every
    /// attempt: one arriving while an earlier attempt is in flight at the primary joins it
    /// (applied once, each attempt answered).
    Write {
        id: u64,
        piece: u64,
        group: GroupId,
        epoch: Epoch,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    // ---- primary → client
    ReadDone {
        id: u64,
        result: Result<Vec<u8>, ServeError>,
    },
    WriteDone {
        id: u64,
        result: Result<(), ServeError>,
    },

    // ---- primary ↔ secondary
    Replicate {
        id: u64,
        group: GroupId,
        epoch: Epoch,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    Replicated {
        id: u64,
        ok: bool,
    },
}

/// Only what identifies a message enters the simulator's run hash: lengths stand for data.
impl Hash for Message {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Message::Heartbeat {
                server,
                incarnation,
                sent_at,
                primaries,
                log_full,
            } => (server, incarnation, sent_at, primaries, log_full).hash(state),
            Message::ReleasedPrimary { group, epoch }
            | Message::ReleasePrimary { group, epoch } => (group, epoch).hash(state),
            Message::Standby { server } => server.hash(state),
            Message::RebuildDone {
                group,
                epoch,
                replica,
            } => (group, epoch, replica).hash(state),
            Message::WriteSuperblock {
                id,
                group,
                epoch,
                data,
            } => (id, group, epoch, data).hash(state),
            Message::Lease { until, primaries } => (until, primaries).hash(state),
            Message::BecomePrimary { view, superblock } => (view, superblock).hash(state),
            Message::EnterStandby => {}
            Message::GroupChanged { view } | Message::Rebuild { view } => view.hash(state),
            Message::SuperblockWritten { id, ok } | Message::Replicated { id, ok } => {
                (id, ok).hash(state)
            }
            Message::Create {
                id,
                object,
                size_bytes,
            } => (id, object, size_bytes).hash(state),
            Message::Lookup { id, object } | Message::Delete { id, object } => {
                (id, object).hash(state)
            }
            Message::LookupGroup { id, group } => (id, group).hash(state),
            Message::Created { id, result } | Message::Located { id, result } => {
                (id, result.as_ref().map(|l| (l.object, l.chunks.len()))).hash(state)
            }
            Message::GroupLocated { id, result } => (id, result).hash(state),
            Message::Deleted { id, result } => (id, result).hash(state),
            Message::Read {
                id,
                piece,
                group,
                offset_bytes,
                length_bytes,
            } => (id, piece, group, offset_bytes, length_bytes).hash(state),
            Message::Write {
                id,
                piece,
                group,
                epoch,
                offset_bytes,
                data,
            } => (id, piece, group, epoch, offset_bytes, data.len()).hash(state),
            Message::ReadDone { id, result } => (id, result.as_ref().map(Vec::len)).hash(state),
            Message::WriteDone { id, result } => (id, result).hash(state),
            Message::Replicate {
                id,
                group,
                epoch,
                offset_bytes,
                data,
            } => (id, group, epoch, offset_bytes, data.len()).hash(state),
        }
    }
}

impl Message {
    /// Bytes on the wire: a 64-byte header plus the data carried.
    pub fn wire_bytes(&self) -> u64 {
        64 + match self {
            Message::Write { data, .. }
            | Message::Replicate { data, .. }
            | Message::WriteSuperblock { data, .. } => data.len() as u64,
            Message::ReadDone {
                result: Ok(data), ..
            } => data.len() as u64,
            Message::Lease { primaries, .. } => 48 * primaries.len() as u64,
            Message::Heartbeat { primaries, .. } => 12 * primaries.len() as u64,
            Message::Created { result: Ok(l), .. } | Message::Located { result: Ok(l), .. } => {
                8 * l.chunks.len() as u64 + 48 * l.groups.len() as u64
            }
            Message::BecomePrimary { superblock, .. } => {
                48 + superblock.as_ref().map_or(0, |s| s.len() as u64)
            }
            _ => 0,
        }
    }
}
