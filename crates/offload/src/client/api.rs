//! The client's interface: its configuration, what the upper layer asks and is answered, the
//! operations on the base volume, and the figures it reports.

use super::*;

/// When writes are off-loaded (Everest §4.1's three configurations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Never off-load.
    Baseline,
    /// Off-load every write; never reclaim.
    Always,
    /// Off-load while the base volume is loaded (T_base, T_store); reclaim when it is not.
    Peak,
    /// Sierra's logging mode (§3.6): the base volume is a chunk group's replicas behind their
    /// primary. Off-load every write while the driver says the base is unavailable (a secondary
    /// is down, [`Client::set_base_available`]); reclaim while it is available. A base write
    /// that fails ([`BaseDone::Failed`]: a secondary did not take it) is sent to the stores.
    WhileBaseUnavailable,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub client: u64,
    pub volume: u64,
    /// Size of the base volume; the last [`SUPERBLOCK_BYTES`] hold the store set.
    pub volume_bytes: u64,
    pub policy: Policy,
    /// Copies of each off-loaded write, on stores of different servers.
    pub n_way: usize,
    /// Off-load only when the base volume has more requests than this in flight.
    pub t_base: u64,
    /// Off-load only to stores with fewer requests than this in flight.
    pub t_store: u64,
    /// Reclaim operations in flight at most.
    pub n_reclaim: usize,
    /// A store request unanswered this long marks the store failed (`None`: never).
    pub request_timeout_ns: Option<Nanos>,
    /// How often a failed store is probed, and a recovering one asked again.
    pub probe_interval_ns: Nanos,
    /// A store down this long is removed from the store set (`None`: only by hand).
    pub remove_after_ns: Option<Nanos>,
    /// A write that must be off-loaded and that no store takes within this long of its
    /// arrival is answered [`ClientError::NoSpace`] (ENOSPC), whatever the reason: every
    /// store, all up, refusing it as full (reclaim runs meanwhile whatever the base volume's
    /// load), a store holding it while its cleaning frees too little, or no store up. A full
    /// store never stalls a volume.
    pub full_timeout_ns: Nanos,
    /// An off-loaded write that some stores took, but fewer than `n_way`, is never
    /// acknowledged short: the missing copies go to other stores as they become available, for
    /// at most this long; then it is answered [`ClientError::TooFewCopies`] (EIO). A write that
    /// need not stay off-loaded goes to the base volume instead when fewer than `n_way` stores
    /// are available.
    pub copies_timeout_ns: Nanos,
    /// A restarting client waits this long for every store of its set. After it, it serves
    /// without the stores that failed to answer, if they are at most `n_way - 1` (so that
    /// every acknowledged write still has a copy among those that answered), treating them as
    /// failed; with more missing it keeps waiting ([`Client::recovery_wait`] says for what).
    /// If the superblock is marked degraded (a write was acknowledged with fewer than
    /// `n_way` copies since the last time every copy was whole), no store may be missing: the
    /// client waits for every store, however long.
    pub recovery_grace_ns: Nanos,
    /// Sierra §3.6, under [`Policy::WhileBaseUnavailable`] only: each off-loaded write is also
    /// written to the primary's local replica ([`BaseOp::WriteLocal`], not waited for by the
    /// acknowledgement). Once that write is done and nothing else was written over it on the
    /// local replica meanwhile, the range map marks the range [`Loc::local`]: reads of it go to
    /// the base volume (the local replica) instead of a store, and reclaim writes it to the
    /// other replicas only ([`BaseOp::Replicate`]). The marks live in memory: a restarted or
    /// migrated client starts without them and reads from the stores.
    pub local_copy: bool,
    /// At most this many bytes off-loaded and not yet reclaimed to the base volume, counting
    /// the off-loaded writes in flight (`None`: no bound). The bytes a write adds are those of
    /// its range not off-loaded already. At the bound a write that need not stay off-loaded
    /// goes to the base volume; one that must (it overwrites off-loaded data) waits for
    /// reclaim as if every store had refused it as full (ENOSPC after `full_timeout_ns`);
    /// and from 90 % of the bound, reclaim runs whatever the base volume's load, under any
    /// policy that off-loads. Everest §4.2's remedy for its worst case, where a client keeps
    /// reading what it off-loaded onto a disk that became busy.
    pub offload_bytes_max: Option<u64>,
    /// The same bound per store: at most this many bytes whose latest version the store holds
    /// for this client. A store at its bound takes no copy that would pass it; with fewer than
    /// N stores below theirs, a write goes to the base volume or waits as above.
    pub offload_bytes_max_per_store: Option<u64>,
}

impl Config {
    /// Everest's defaults: peak off-load, T_base = T_store = 32, N_reclaim = 256, one copy.
    pub fn new(client: u64, volume: u64, volume_bytes: u64) -> Config {
        Config {
            client,
            volume,
            volume_bytes,
            policy: Policy::Peak,
            n_way: 1,
            t_base: 32,
            t_store: 32,
            n_reclaim: 256,
            request_timeout_ns: Some(2_000_000_000),
            probe_interval_ns: 100_000_000,
            remove_after_ns: None,
            full_timeout_ns: 5_000_000_000,
            copies_timeout_ns: 5_000_000_000,
            recovery_grace_ns: 1_000_000_000,
            local_copy: false,
            offload_bytes_max: None,
            offload_bytes_max_per_store: None,
        }
    }

    /// Bytes the upper layer can address.
    pub fn usable_bytes(&self) -> u64 {
        self.volume_bytes - SUPERBLOCK_BYTES
    }
}

/// What the upper layer asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upward {
    Read {
        offset_bytes: u64,
        length_bytes: u64,
    },
    /// `durable`: on the base volume, acknowledge only once the write is durable (FUA).
    /// Off-loaded writes are always durable when acknowledged.
    Write {
        offset_bytes: u64,
        data: Vec<u8>,
        durable: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpReply {
    Read(Vec<u8>),
    Written,
    Error(ClientError),
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("bad request: zero length or beyond the end of the volume")]
    BadRequest,
    #[error("the client cannot start: {0}")]
    NoStoreSet(#[from] SuperblockError),
    /// A write overlapping off-loaded data (so it must be off-loaded too) was refused by every
    /// store, all of them up: the stores are full, and reclaim did not make room in time (or
    /// never does, under the always policy). The write is not acknowledged; nothing
    /// acknowledged is lost.
    #[error("no space: every store refused a write that must be off-loaded (the stores are full)")]
    NoSpace,
    /// A store fenced this client: another incarnation of the same client (volume or group)
    /// recovered from the stores since this one started. Nothing it had not acknowledged is
    /// known to have happened; it serves nothing more.
    #[error("fenced: a newer incarnation of this client took over its stores")]
    Fenced,
    /// An off-loaded write got fewer than `n_way` durable copies within
    /// [`Config::copies_timeout_ns`] (too few stores reachable). It is not acknowledged; the
    /// copies made may be read later (its outcome is unknown, as with any failed write).
    #[error("too few copies: fewer than N stores took an off-loaded write in time")]
    TooFewCopies,
    /// The base volume's device failed this request ([`BaseDone::Error`]); only this one. A
    /// write's outcome is unknown (some of it may have landed).
    #[error("the base volume failed the request ({})", if *no_space { "no space on its device" } else { "I/O error" })]
    Base { no_space: bool },
}

/// An operation on the base volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseOp {
    Read {
        id: u64,
        offset_bytes: u64,
        length_bytes: u64,
    },
    /// `durable`: complete only once the write is durable (a write and a flush).
    Write {
        id: u64,
        offset_bytes: u64,
        data: Vec<u8>,
        durable: bool,
    },
    /// Sierra §3.6 ([`Config::local_copy`]): an off-loaded write's copy on the primary's own
    /// replica only, durable. Completes [`BaseDone::Written`] or [`BaseDone::Error`].
    WriteLocal {
        id: u64,
        offset_bytes: u64,
        data: Vec<u8>,
    },
    /// Sierra §3.6 ([`Config::local_copy`]): a reclaim write to every replica but the
    /// primary's own, which holds these bytes already; durable. Completes as a
    /// [`BaseOp::Write`] does (`Failed` when a replica did not take it).
    Replicate {
        id: u64,
        offset_bytes: u64,
        data: Vec<u8>,
    },
}

impl BaseOp {
    pub fn id(&self) -> u64 {
        match self {
            BaseOp::Read { id, .. }
            | BaseOp::Write { id, .. }
            | BaseOp::WriteLocal { id, .. }
            | BaseOp::Replicate { id, .. } => *id,
        }
    }

    /// A write of any kind: its offset and bytes (`None`: a read).
    pub fn written(&self) -> Option<(u64, &[u8])> {
        match self {
            BaseOp::Read { .. } => None,
            BaseOp::Write {
                offset_bytes, data, ..
            }
            | BaseOp::WriteLocal {
                offset_bytes, data, ..
            }
            | BaseOp::Replicate {
                offset_bytes, data, ..
            } => Some((*offset_bytes, data)),
        }
    }

    /// A write of any kind taken apart: its id, offset and bytes (`Err`: a read, given back).
    pub fn into_write(self) -> Result<(u64, u64, Vec<u8>), BaseOp> {
        match self {
            BaseOp::Write {
                id,
                offset_bytes,
                data,
                ..
            }
            | BaseOp::WriteLocal {
                id,
                offset_bytes,
                data,
            }
            | BaseOp::Replicate {
                id,
                offset_bytes,
                data,
            } => Ok((id, offset_bytes, data)),
            read => Err(read),
        }
    }
}

/// A base-volume request as a disk operation of the kind the store's core issues (the
/// runtime's disk and the simulator's host layer carry both).
impl From<BaseOp> for cordillera_vstore::store::DiskOp {
    fn from(op: BaseOp) -> cordillera_vstore::store::DiskOp {
        use cordillera_vstore::store::DiskOp;
        match op {
            BaseOp::Read {
                id,
                offset_bytes,
                length_bytes,
            } => DiskOp::Read {
                id,
                offset_bytes,
                length_bytes,
            },
            BaseOp::Write {
                id,
                offset_bytes,
                data,
                durable,
            } => DiskOp::Write {
                id,
                offset_bytes,
                data: data.into(),
                durable,
            },
            // A base volume of one copy is its own local replica; a client issues these only
            // with `local_copy`, which a single-copy base never sets (and rewriting bytes the
            // volume holds already changes nothing).
            local @ (BaseOp::WriteLocal { .. } | BaseOp::Replicate { .. }) => {
                let (id, offset_bytes, data) = local.into_write().expect("a write");
                DiskOp::Write {
                    id,
                    offset_bytes,
                    data: data.into(),
                    durable: true,
                }
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseDone {
    Read {
        id: u64,
        data: Vec<u8>,
    },
    Written {
        id: u64,
    },
    /// A write the base could not make whole (under [`Policy::WhileBaseUnavailable`]: a
    /// secondary replica did not take it), with its data back. Some replicas may hold it: an
    /// upper-layer write is off-loaded under a new version (which the range map then serves),
    /// a reclaim write is given up and its range reclaimed again later.
    Failed {
        id: u64,
        data: Vec<u8>,
    },
    /// The base volume's device failed the operation (EIO; `no_space`: ENOSPC, a sparse base
    /// volume whose filesystem is full). Only that operation fails: an upper-layer read or
    /// write is answered [`ClientError::Base`], a reclaim write is reclaimed again later, a
    /// superblock write is written again; the client goes on serving.
    Error {
        id: u64,
        no_space: bool,
    },
}

/// A disk completion as the client hears it (the client asks for no flushes: a durable write
/// is one request).
impl From<cordillera_vstore::store::DiskDone> for BaseDone {
    fn from(done: cordillera_vstore::store::DiskDone) -> BaseDone {
        use cordillera_vstore::store::DiskDone;
        match done {
            DiskDone::Read { id, data } => BaseDone::Read { id, data },
            DiskDone::Written { id } | DiskDone::Flushed { id } => BaseDone::Written { id },
        }
    }
}

/// Where the latest version of a range is: its version, the stores holding it (a bit per store
/// index), whether it has been reclaimed to the base volume (its copies are being deleted), and
/// whether the primary's local replica holds it too ([`Config::local_copy`], in memory only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub version: u64,
    pub stores: u64,
    pub on_base: bool,
    pub local: bool,
}

/// One store as the client sees it ([`Client::store_figures`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreFigures {
    pub info: StoreInfo,
    pub up: bool,
    pub removed: bool,
    pub in_flight: u64,
    pub reported_load: u64,
    /// The load of the volume beside the store on its disk, as last reported: what reclaim of
    /// a quiet base volume compares with T_store.
    pub volume_load: u64,
    pub offloaded_bytes: u64,
    /// Bytes of copies the store holds for this client that are no longer needed, deletes
    /// owed to it: stale copies, and reclaimed ones (on the base volume now).
    pub stale_bytes: u64,
    /// Of those, bytes whose delete is not sent: the store is down (a deletion record may
    /// stand for them), or an invariant holds the delete back (a reclaimed copy waits until
    /// no older copy remains elsewhere).
    pub unsent_delete_bytes: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Times a store refused this client as fenced (a newer incarnation took over).
    pub fenced: u64,
    /// Copies of off-loaded writes sent again because fewer than N stores had taken them.
    pub copies_resent: u64,
    /// Off-loaded writes short of N copies sent again whole under a fresh version: the
    /// stores that could take the missing copies were owed deletes covering the old one.
    pub writes_reversioned: u64,
    /// Off-loaded writes answered with an error because they had fewer than N copies when
    /// `copies_timeout_ns` ran out.
    pub too_few_copies: u64,
    /// Bytes whose latest version is off-loaded now.
    pub offloaded_bytes: u64,
    pub offloaded_writes: u64,
    pub offloaded_write_bytes: u64,
    pub base_writes: u64,
    pub base_reads: u64,
    pub store_reads: u64,
    pub reclaimed_bytes: u64,
    /// Of `reclaimed_bytes`, those that had fewer than N copies on stores that were up.
    pub reclaimed_at_risk_bytes: u64,
    pub reclaim_reads: u64,
    pub deletes_sent: u64,
    pub deletion_records_written: u64,
    pub deletion_records_collected: u64,
    /// Copies of deletion records found void at a recovery: held by a store that an earlier
    /// recovery went on without (see `Client::merge`); deleted when that store is up.
    pub deletion_records_void: u64,
    /// Copies of deletion records found at a recovery on fewer than N stores (perhaps never
    /// durable): the copies they name are taken as stale but unrecorded (`Client::merge`).
    pub deletion_records_short: u64,
    pub store_failures: u64,
    /// Off-loaded bytes lost: a store holding their only copy was removed or lost them.
    pub lost_bytes: u64,
    /// Reads that found a store without a copy it had acknowledged (a damaged log): the copy
    /// is dropped from the range map and read elsewhere.
    pub lost_copies: u64,
    /// Times a copy above the current version may have been left on a store holding the
    /// current one (a write's unknown outcome, or a write sent again under a fresh version):
    /// the store's current copies there are dropped from the range map and re-protected.
    pub hidden_copies: u64,
    /// Ranges where such a copy may still land over the current copy, which that store alone
    /// holds: reads of them there waited for a barrier (`seals`, barriers answered) after which
    /// nothing sent before can land.
    pub unsealed_ranges: u64,
    pub seals: u64,
    pub recoveries: u64,
    /// Writes answered [`ClientError::NoSpace`].
    pub refused_writes: u64,
    /// Writes sent to the base volume, or held back, because off-loading them would have
    /// passed [`Config::offload_bytes_max`] or a store's [`Config::offload_bytes_max_per_store`].
    pub bound_writes: u64,
    /// Of `refused_writes`, those answered because no store took them within
    /// `full_timeout_ns` of their arrival (held by a store whose cleaning frees too little,
    /// or no store up), rather than refused by every store.
    pub late_writes: u64,
    /// Base writes that failed ([`BaseDone::Failed`]): upper-layer writes then off-loaded, and
    /// reclaim writes given up.
    pub base_writes_failed: u64,
    /// Base-volume operations its device failed ([`BaseDone::Error`]).
    pub base_errors: u64,
    pub reclaims_failed: u64,
    /// Off-loaded writes also written to the local replica ([`Config::local_copy`]).
    pub local_copies: u64,
    /// Of those, copies that did not become readable there: another write over the same bytes
    /// of the local replica was in flight beside it (the order they land in is unknown), or the
    /// local write failed.
    pub local_copies_unused: u64,
    /// Read pieces of off-loaded data served by the local replica instead of a store.
    pub local_reads: u64,
    /// Reclaimed bytes written to the other replicas only (the local replica held them).
    pub reclaim_local_bytes: u64,
}

/// What a recovering client waits for ([`Client::recovery_wait`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryWait {
    /// Stores of the set (not removed) that answered, and how many there are.
    pub answered: usize,
    pub stores: usize,
    /// Answers needed to serve without the others: `stores - (n_way - 1)`, or every store
    /// when the superblock says "degraded" (some acknowledged data may have fewer than N
    /// copies).
    pub needed: usize,
    /// Ids of the stores not answered yet that have failed at least once.
    pub failed: Vec<u64>,
    /// Ids of the stores not answered yet that have not failed (yet): slow, or unreachable
    /// without an error so far.
    pub silent: Vec<u64>,
}
